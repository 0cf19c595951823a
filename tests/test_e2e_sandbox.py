"""Pod sandboxes end to end (issue 15 §5), real processes on a `kubemu up --nodes 3 --fast`
cluster: three replicas of one server on one port, each its own IP; a pod on one node fetches
from a pod on another by IP, without NAT; two containers of a pod share localhost and the
hostname is the pod's; kill -9 of a sandbox holder and of a kubelet; the kernel's OOM kill;
`kubemu down` leaves no namespace, link, route, cgroup or mount. Needs root and the CNI
reference plugins: otherwise skipped, with the reason `kubemu up` gives."""
from __future__ import annotations

import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request

import pytest

from kubemu import network
from kubemu.statedir import StateDir
from tests.conftest import wait_for
from tests.test_e2e import LONG, cluster, ready, restarts  # noqa: F401 (cluster: the fixture)

PY = sys.executable

_mode = network.probe(None)
pytestmark = pytest.mark.skipif(_mode.kind != "cni", reason=f"no pod networks here: {_mode.reason}")

# Binds the pod's every address: inside its own network namespace that is eth0 and lo only.
SERVE = f"{PY} -m http.server {{port}}"
FETCH = ("import sys, time, urllib.request\n"
         "for _ in range(300):\n"
         "    try:\n"
         "        print(urllib.request.urlopen(sys.argv[1], timeout=5).status, flush=True); break\n"
         "    except OSError as exc:\n"
         "        print('retry', exc, flush=True); time.sleep(0.2)\n"
         "time.sleep(3600)\n")
HOG = "b = bytearray(512 * 1024 * 1024)\nimport time; time.sleep(60)\n"


def pod(name: str, containers: list[dict], **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 2, "containers": containers, **spec}}


def container(name: str, *argv: str, **extra) -> dict:
    return {"name": name, "command": list(argv), **extra}


def pod_ip(p: dict) -> str | None:
    return (p.get("status") or {}).get("podIP")


def sandbox_record(state: StateDir, p: dict) -> dict:
    meta = p["metadata"]
    path = state.node_dir(p["spec"]["nodeName"]) / "pods" / f"{meta['namespace']}_{meta['name']}_{meta['uid']}"
    return json.loads((path / "sandbox.json").read_text())


def http_status(url: str) -> int | None:
    try:
        return urllib.request.urlopen(url, timeout=5).status
    except OSError:
        return None


def nsfs_mounts() -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if " - nsfs " in line]


def test_every_pod_its_own_network(cluster, tmp_path):
    cluster.cli("up", "--nodes", "3", "--fast", "--detach")
    rec = network.load(cluster.dir)
    assert rec is not None and rec.mode == "cni", rec
    cidr = ipaddress.ip_network(rec.cluster_cidr)

    # Three replicas of one server on one port: all Running, three addresses of the pod network.
    web = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                        "terminationGracePeriodSeconds": 2,
                        "containers": [container("web", *SERVE.format(port=8000).split(), readinessProbe={
                            "httpGet": {"path": "/", "port": 8000}, "periodSeconds": 1})]}}}}
    manifest = tmp_path / "web.json"
    manifest.write_text(json.dumps(web))
    cluster.cli("apply", "-f", str(manifest))
    pods = wait_for(lambda: cluster.ready_web(3), timeout=LONG, interval=0.25, message="3 web pods Ready")
    ips = {pod_ip(p) for p in pods}
    assert len(ips) == 3 and all(ipaddress.ip_address(ip) in cidr for ip in ips), ips
    for ip in ips:  # the machine reaches every pod through the fabric
        assert http_status(f"http://{ip}:8000/") == 200

    # A pod on one worker fetches from a pod on the other by IP; the server sees the client's own IP.
    target = pods[0]
    other = "node-2" if target["spec"]["nodeName"] == "node-1" else "node-1"
    client = pod("client", [container("fetch", PY, "-c", FETCH, f"http://{pod_ip(target)}:8000/")], nodeName=other)
    (tmp_path / "client.json").write_text(json.dumps(client))
    cluster.cli("apply", "-f", str(tmp_path / "client.json"))
    wait_for(lambda: "200" in (cluster.call("log", "client", "default") or ""), timeout=LONG, interval=0.25,
             message="the client's fetch across nodes")
    client_ip = pod_ip(cluster.call("get", "pods", "client", namespace="default"))
    assert client_ip and client_ip != pod_ip(target)
    assert f"{client_ip} - - " in cluster.call("log", target["metadata"]["name"], "default")  # no NAT

    # Two containers of one pod share localhost; the pod's hostname is its name.
    duo = pod("duo", [container("server", PY, "-m", "http.server", "9000", "--bind", "127.0.0.1"),
                      container("client", PY, "-c", "import socket; print('hostname', socket.gethostname(), flush=True)\n"
                                + FETCH, "http://127.0.0.1:9000/")])
    (tmp_path / "duo.json").write_text(json.dumps(duo))
    cluster.cli("apply", "-f", str(tmp_path / "duo.json"))
    log = wait_for(lambda: (text := cluster.call("log", "duo", "default", container="client") or "")
                   and "200" in text and text, timeout=LONG, interval=0.25, message="duo's containers over localhost")
    assert "hostname duo\n" in log

    # kill -9 of a sandbox holder: the containers are killed, a new sandbox made, RESTARTS+1.
    victim = cluster.call("get", "pods", target["metadata"]["name"], namespace="default")
    before = restarts(victim)
    os.kill(sandbox_record(cluster.state, victim)["holder"]["pid"], signal.SIGKILL)
    wait_for(lambda: (p := cluster.call("get", "pods", victim["metadata"]["name"], namespace="default"))
             and restarts(p) == before + 1 and ready(p), timeout=LONG, interval=0.25,
             message="the pod in a new sandbox")
    events = cluster.cli("get", "events", "--field-selector", f"involvedObject.name={victim['metadata']['name']}").stdout
    assert "SandboxChanged" in events and "Pod sandbox changed, it will be killed and re-created." in events

    # kill -9 of a kubelet: its sandboxes are adopted, the same holders and the same IPs.
    node = victim["spec"]["nodeName"]
    on_node = {p["metadata"]["name"]: (pod_ip(p), sandbox_record(cluster.state, p)["holder"]["pid"])
               for p in cluster.ready_web(3) if p["spec"]["nodeName"] == node}
    ps = json.loads(cluster.cli("ps", "-o", "json").stdout)["nodes"]
    init = next(n["init"] for n in ps if n["name"] == node)
    kubelet = next(u for u in init["units"] if u["name"] == "kubelet.service")["main_pid"]
    os.kill(kubelet, signal.SIGKILL)
    wait_for(lambda: (n := next(n["init"] for n in json.loads(cluster.cli("ps", "-o", "json").stdout)["nodes"]
                                if n["name"] == node))
             and any(u["name"] == "kubelet.service" and u["main_pid"] not in (None, kubelet) and u["active_state"] == "active"
                     for u in n["units"]), timeout=LONG, interval=0.25, message="the kubelet restarted")
    after = wait_for(lambda: (pods := cluster.ready_web(3)) and {
        p["metadata"]["name"]: (pod_ip(p), sandbox_record(cluster.state, p)["holder"]["pid"])
        for p in pods if p["spec"]["nodeName"] == node}, timeout=LONG, interval=0.25, message="the pods after it")
    assert after == on_node
    for ip, _ in after.values():
        assert http_status(f"http://{ip}:8000/") == 200

    # The kernel's OOM killer ends a container past its memory limit.
    hog = pod("hog", [container("hog", PY, "-c", HOG, resources={"limits": {"memory": "64Mi"}})],
              restartPolicy="Never")
    (tmp_path / "hog.json").write_text(json.dumps(hog))
    cluster.cli("apply", "-f", str(tmp_path / "hog.json"))
    term = wait_for(lambda: (p := cluster.call("get", "pods", "hog", namespace="default"))
                    and (p.get("status") or {}).get("containerStatuses")
                    and p["status"]["containerStatuses"][0]["state"].get("terminated"),
                    timeout=LONG, interval=0.25, message="the hog to end")
    assert (term["reason"], term["exitCode"]) == ("OOMKilled", 137), term
    assert "message" not in term  # the kernel said so; the RSS watch (the fallback) names the limit

    # kubemu down: no namespace, link, route or namespace mount of this cluster is left.
    cluster.close_api()
    cluster.cli("down")
    assert network.leftovers(rec) == []
    assert rec.netns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [m for m in nsfs_mounts() if rec.netns in m]


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="no setpriv (util-linux) to drop capabilities with")
def test_without_the_privileges_pods_share_the_host_network(cluster, tmp_path):
    """`kubemu up` as root without CAP_NET_ADMIN and CAP_SYS_ADMIN (what a user without them
    gets): one line says why, the nodes say so in a condition, pods run as before on 127.0.0.1."""
    drop = ["setpriv", "--inh-caps=-net_admin,-sys_admin", "--bounding-set=-net_admin,-sys_admin"]
    env = dict(os.environ, KUBEMU_STATE_DIR=str(cluster.dir), COLUMNS="200")
    done = subprocess.run([*drop, PY, "-m", "kubemu.cli", "up", "--nodes", "2", "--fast", "--detach",
                           "--no-kubeconfig", "--api-port", "0"], env=env, capture_output=True, text=True,
                          timeout=LONG, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    why = "CAP_NET_ADMIN and CAP_SYS_ADMIN are needed for pod networks"
    said = done.stdout + done.stderr
    assert said.count("pods share the host's network") == 1 and why in said, said
    assert "Traceback" not in said
    described = cluster.cli("describe", "node", "node-1").stdout
    assert "NetworkUnavailable" in described and f"pods share the host's network: {why}" in described
    (tmp_path / "p.json").write_text(json.dumps(pod("plain", [container("sleep", "sleep", "3600")])))
    cluster.cli("apply", "-f", str(tmp_path / "p.json"))
    wait_for(lambda: (p := cluster.call("get", "pods", "plain", namespace="default"))
             and ready(p) and pod_ip(p) == "127.0.0.1", timeout=LONG, interval=0.25, message="the pod on 127.0.0.1")
    assert network.load(cluster.dir).mode == "host"


def test_configmaps_and_secrets_reach_a_pods_containers(cluster, tmp_path):
    """A Secret in env, a ConfigMap mounted at its mountPath (read-only, the machine's path
    untouched), and an edit of the ConfigMap reaching the running container's file."""
    cluster.cli("up", "--nodes", "2", "--fast", "--detach")
    api = cluster.api
    api.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"},
                              "data": {"greeting": "hello"}}, namespace="default")
    api.create("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"},
                           "stringData": {"token": "s3cret"}}, namespace="default")
    mount = f"/kmtest-{os.getpid()}/config"  # nowhere on the machine: made inside the container's overlay
    watch = ("import os, time\n"
             "print('token', os.environ['TOKEN'], flush=True)\n"
             "print('sa', open('/var/run/secrets/tokens/token').read().count('.'), flush=True)\n"
             "last = None\n"
             "while True:\n"
             f"    now = open('{mount}/greeting').read()\n"
             "    if now != last:\n"
             "        print('greeting', now, 'writable', os.access('" + mount + "', os.W_OK), flush=True)\n"
             "        last = now\n"
             "    time.sleep(0.2)\n")
    reader = pod("reader", [container("main", PY, "-c", watch,
                                      env=[{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}],
                                      volumeMounts=[{"name": "cfg", "mountPath": mount}])],
                 volumes=[{"name": "cfg", "configMap": {"name": "app"}}])
    reader["spec"]["containers"][0]["volumeMounts"].append({"name": "sa", "mountPath": "/var/run/secrets/tokens"})
    reader["spec"]["volumes"].append({"name": "sa", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token", "audience": "api", "expirationSeconds": 3600}}]}})
    (tmp_path / "reader.json").write_text(json.dumps(reader))
    cluster.cli("apply", "-f", str(tmp_path / "reader.json"))
    log = wait_for(lambda: (text := cluster.call("log", "reader", "default") or "") and "greeting" in text and text,
                   timeout=LONG, interval=0.25, message="the reader's first lines")
    assert "token s3cret\n" in log and "greeting hello writable False\n" in log
    assert "sa 2\n" in log  # a projected ServiceAccount token: a JWT, header.payload.signature
    assert "FailedMount" not in cluster.cli("get", "events", "--field-selector", "involvedObject.name=reader").stdout
    assert not os.path.exists(os.path.dirname(mount))  # the machine's file system untouched
    api.patch("configmaps", "app", {"data": {"greeting": "bonjour"}}, namespace="default")
    wait_for(lambda: "greeting bonjour" in (cluster.call("log", "reader", "default") or ""), timeout=LONG,
             interval=0.25, message="the edit in the running container's file")
