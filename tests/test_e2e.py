"""The whole cluster end to end, real processes and `--fast` timings (the control-plane issue's §9):
`kubemu up --nodes 3` -> a Deployment of a small HTTP server with a readiness probe -> kill a
container, delete a pod, scale, kill the controller-manager mid-scale, a rolling update and
its undo, kill the apiserver / a store replica / node-0's kubelet, a whole node dies, `kubemu
down`, `kubemu up` again; plus bad input, each with a clear message and nothing disturbed."""
from __future__ import annotations

import json
import os
import signal
import sys
import textwrap

import pytest

from kubemu._wire_auth import state_credentials
from kubemu.apiclient import SyncApiClient
from kubemu.statedir import StateDir
from kubemu.wire import Conflict, Gone, WireError
from tests.conftest import DEADLINE, alive, marked_processes, wait_for
from tests.kubemu.test_cli import kubemu

PY = sys.executable
LONG = DEADLINE * 3  # several processes restart in turn on a loaded 2-core machine

SERVER = textwrap.dedent('''\
    """A tiny HTTP server on a free port; the port goes to <dir>/<pod name> for the probe."""
    import http.server, os, sys
    name = os.environ["HOSTNAME"]
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f"hello from {name} {os.environ.get('VERSION')}".encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
        def log_message(self, *args):
            pass
    server = http.server.HTTPServer(("127.0.0.1", 0), Hello)
    path = os.path.join(sys.argv[1], name)
    with open(path + ".tmp", "w") as f:
        f.write(str(server.server_port))
    os.replace(path + ".tmp", path)
    print("serving on", server.server_port, flush=True)
    server.serve_forever()
''')
PROBE = ("import os, socket, sys\n"
         "port = int(open(os.path.join(sys.argv[1], os.environ['HOSTNAME'])).read())\n"
         "s = socket.create_connection(('127.0.0.1', port), timeout=2)\n"
         "s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
         "sys.exit(0 if s.recv(64).startswith(b'HTTP/1.0 200') else 1)")


def deployment(app_dir, replicas: int, version: str = "1") -> str:
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                     "terminationGracePeriodSeconds": 10,
                     "containers": [{"name": "web", "command": [PY, str(app_dir / "server.py"), str(app_dir)],
                                     "env": [{"name": "VERSION", "value": version}],
                                     "readinessProbe": {"exec": {"command": [PY, "-S", "-c", PROBE, str(app_dir)]},
                                                        "periodSeconds": 10, "timeoutSeconds": 5}}]}}}})


class Cluster:
    def __init__(self, state_dir):
        self.dir = state_dir
        self.state = StateDir(state_dir)
        self._api: SyncApiClient | None = None

    def cli(self, *args, check=True):
        return kubemu(self.dir, *args, check=check)

    @property
    def api(self) -> SyncApiClient:
        if self._api is None:
            self._api = SyncApiClient(self.state.api_endpoint(), timeout=15,
                                      credentials=state_credentials(self.dir))
        return self._api

    def close_api(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    def call(self, fn, *args, **kw):
        """An API call that rides out a control-plane restart (None while it does not answer)."""
        try:
            return getattr(self.api, fn)(*args, **kw)
        except WireError:
            return None

    def web_pods(self) -> list[dict] | None:
        listed = self.call("list", "pods", namespace="default", label_selector="app=web")
        if listed is None:
            return None
        return [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]

    def ready_web(self, count: int, version: str | None = None) -> list[dict] | None:
        """Exactly `count` live web pods, all Running and Ready (of `version`, if given)."""
        pods = self.web_pods()
        if pods is None or len(pods) != count or not all(ready(p) for p in pods):
            return None
        if version and not all(env_version(p) == version for p in pods):
            return None
        return pods

    def system_pid(self, component: str) -> int | None:
        pod = self.call("get", "pods", f"{component}-node-0", namespace="kube-system")
        return container_pid(pod) if pod else None

    def node_ready(self, name: str) -> str | None:
        node = self.call("get", "nodes", name)
        cond = next((c for c in ((node or {}).get("status") or {}).get("conditions") or []
                     if c["type"] == "Ready"), None)
        return cond and cond["status"]


def ready(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


def env_version(pod: dict) -> str:
    return next(e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == "VERSION")


def container_pid(pod: dict) -> int | None:
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        if "running" in c.get("state", {}) and c.get("containerID", "").startswith("process://"):
            return int(c["containerID"].removeprefix("process://"))
    return None


def restarts(pod: dict) -> int:
    return sum(c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])


@pytest.fixture
def cluster(state_dir):
    c = Cluster(state_dir)
    try:
        yield c
    finally:
        c.close_api()
        if c.state.running_nodes():
            c.cli("down", check=False)


def test_the_cluster_keeps_itself_alive(cluster, tmp_path):
    app = tmp_path / "app"
    app.mkdir()
    (app / "server.py").write_text(SERVER)

    # kubemu up: every node Ready, the control plane visible as mirror pods.
    cluster.cli("up", "--nodes", "3", "--fast", "--detach")
    nodes = cluster.cli("get", "nodes").stdout
    assert [line.split()[1] for line in nodes.splitlines()[1:]] == ["Ready"] * 3, nodes
    system = cluster.cli("get", "pods", "-n", "kube-system").stdout
    for name in ("apiserver-node-0", "scheduler-node-0", "controller-manager-node-0", "store-0-node-0"):
        wait_for(lambda: cluster.system_pid(name.removesuffix("-node-0")), timeout=LONG,
                 message=f"mirror pod {name} running")
    assert "apiserver-node-0" in system or cluster.system_pid("apiserver")

    # A Deployment of 3: Running and Ready on the worker nodes (node-0 is tainted control-plane).
    manifest = tmp_path / "web.json"
    manifest.write_text(deployment(app, 3))
    assert "deployment.apps/web created" in cluster.cli("apply", "-f", str(manifest)).stdout
    pods = wait_for(lambda: cluster.ready_web(3), timeout=LONG, interval=0.25, message="3 web pods Running and Ready")
    assert {p["spec"]["nodeName"] for p in pods} <= {"node-1", "node-2"}

    # kill -9 a container: its kubelet restarts it (RESTARTS 1).
    victim = pods[0]
    os.kill(container_pid(victim), signal.SIGKILL)
    wait_for(lambda: (p := cluster.call("get", "pods", victim["metadata"]["name"], namespace="default"))
             and restarts(p) == 1 and ready(p), timeout=LONG, interval=0.25, message="the container restarted")
    assert " 1 " in cluster.cli("get", "pod", victim["metadata"]["name"]).stdout
    assert "serving on" in cluster.api.log(victim["metadata"]["name"], "default")  # the pods/log subresource
    assert "serving on" in cluster.cli("logs", victim["metadata"]["name"], "--previous").stdout

    # Delete a pod: a replacement appears.
    gone = pods[1]["metadata"]["name"]
    cluster.cli("delete", "pod", gone)
    replaced = wait_for(lambda: cluster.ready_web(3), timeout=LONG, interval=0.25, message="a replacement pod")
    assert gone not in {p["metadata"]["name"] for p in replaced}

    # Scale to 10, then back to 2 with the controller-manager killed -9 in the middle.
    cluster.cli("scale", "deployment/web", "--replicas", "10")
    wait_for(lambda: cluster.ready_web(10), timeout=LONG, interval=0.25, message="10 web pods")
    cluster.cli("scale", "deployment/web", "--replicas", "2")
    os.kill(cluster.system_pid("controller-manager"), signal.SIGKILL)
    wait_for(lambda: cluster.ready_web(2), timeout=LONG, interval=0.25, message="the scale-down to converge after the kill")

    # A rolling update keeps maxUnavailable (0 of 2 here): 2 ready pods all along; then undo.
    manifest.write_text(deployment(app, 2, version="2"))
    assert "configured" in cluster.cli("apply", "-f", str(manifest)).stdout
    lowest = [2]

    def rolled_out():
        pods = cluster.web_pods() or []
        lowest[0] = min(lowest[0], len([p for p in pods if ready(p)]))
        return cluster.ready_web(2, version="2")
    wait_for(rolled_out, timeout=LONG, interval=0.25, message="the rolling update")
    assert lowest[0] >= 2, "a rolling update with maxUnavailable 0 took ready pods away"
    cluster.cli("rollout", "status", "deployment/web")
    history = cluster.cli("rollout", "history", "deployment/web").stdout
    assert "1" in history and "2" in history
    cluster.cli("rollout", "undo", "deployment/web")
    wait_for(lambda: cluster.ready_web(2, version="1"), timeout=LONG, interval=0.25, message="the undo to roll back")

    # kill -9 the apiserver, a store replica, node-0's kubelet, in turn: each comes back.
    for component in ("apiserver", "store-1"):
        pid = cluster.system_pid(component)
        os.kill(pid, signal.SIGKILL)
        cluster.close_api()
        wait_for(lambda: (n := cluster.system_pid(component)) and n != pid, timeout=LONG,
                 message=f"{component} to be restarted")
    node_0 = json.loads(cluster.cli("ps", "-o", "json").stdout)["nodes"][0]
    kubelet = next(u for u in node_0["init"]["units"] if u["name"] == "kubelet.service")
    os.kill(kubelet["main_pid"], signal.SIGKILL)
    wait_for(lambda: cluster.ready_web(2, version="1"), timeout=LONG, interval=0.25, message="the workload after the kills")
    assert cluster.call("get", "deployments", "web", namespace="default")["spec"]["replicas"] == 2

    # A whole node dies: NotReady, its pods evicted and made again elsewhere.
    cluster.cli("scale", "deployment/web", "--replicas", "3")
    on_1 = wait_for(lambda: (pods := cluster.ready_web(3)) and [p for p in pods if p["spec"]["nodeName"] == "node-1"],
                    timeout=LONG, interval=0.25, message="a web pod on node-1")
    cluster.cli("node", "kill", "node-1")
    wait_for(lambda: cluster.node_ready("node-1") == "Unknown", timeout=LONG, interval=0.25, message="node-1 NotReady")
    assert "NotReady" in cluster.cli("get", "nodes").stdout
    moved = wait_for(lambda: (pods := cluster.ready_web(3)) and all(p["spec"]["nodeName"] == "node-2" for p in pods)
                     and pods, timeout=LONG, interval=0.25, message="node-1's pods evicted and recreated on node-2")
    assert not {p["metadata"]["name"] for p in on_1} & {p["metadata"]["name"] for p in moved}

    # kubemu down leaves nothing; kubemu up again shows the Deployment and its pods.
    cluster.close_api()
    cluster.cli("down")
    assert marked_processes(str(cluster.dir)) == []
    cluster.cli("up", "--nodes", "3", "--fast", "--detach")
    wait_for(lambda: cluster.ready_web(3), timeout=LONG, interval=0.25, message="the Deployment's pods after up again")
    assert "web" in cluster.cli("get", "deployments").stdout


def test_bad_input_gets_one_clear_message_and_disturbs_nothing(cluster, tmp_path):
    cluster.cli("up", "--nodes", "1", "--fast", "--detach")
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x\n")
    out = cluster.cli("apply", "-f", str(bad_yaml), check=False)
    assert out.returncode != 0 and "bad.yaml" in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("apiVersion: v1\nkind: Gizmo\nmetadata: {name: g}\n")
    out = cluster.cli("apply", "-f", str(unknown), check=False)
    assert out.returncode != 0 and 'no matches for kind "Gizmo"' in out.stderr, out.stderr
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicas: -1\n"
                       "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n"
                       "    spec: {containers: [{name: c, command: [x]}]}\n")
    out = cluster.cli("apply", "-f", str(invalid), check=False)
    assert out.returncode != 0 and "spec.replicas" in out.stderr and "is invalid" in out.stderr, out.stderr

    api = cluster.api
    ns = api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}})
    stale = dict(ns, metadata=dict(ns["metadata"], labels={"a": "1"}))
    api.update("namespaces", dict(ns, metadata=dict(ns["metadata"], labels={"a": "0"})))
    with pytest.raises(Conflict):
        api.update("namespaces", stale)  # the 409: the resourceVersion moved on
    # The 410: a watch from a compacted revision. Events are watched by nobody here, so no
    # watch cache window covers the old revision: it must come from the store's history.
    old_rv = api.get("namespaces", "kube-system")["metadata"]["resourceVersion"]
    cluster.cli("store", "compact", api.list("namespaces")["metadata"]["resourceVersion"])
    with pytest.raises(Gone):
        with api.watch("events", resource_version=old_rv) as w:
            next(iter(w))
    assert cluster.node_ready("node-0") == "True"
    assert "demo" in cluster.cli("get", "namespaces").stdout
    for pid in (cluster.system_pid("apiserver"), cluster.system_pid("store-0")):
        assert alive(pid)
