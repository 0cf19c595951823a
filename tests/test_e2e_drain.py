"""Node maintenance end to end (issue 17 §4-5), real processes on a `kubemu up --nodes 3 --fast`
cluster: a Deployment of 3 on node-1 with a PodDisruptionBudget minAvailable 2; `kubemu drain
node-1` evicts one pod at a time (the others' evictions are refused with a 429 and retried)
while never fewer than 2 are Ready, the controller-manager killed -9 in the middle converges
with no extra pod; the node is cordoned (spec.unschedulable and the
node.kubernetes.io/unschedulable taint) and `kubemu uncordon` reverses it; then real kubectl
drains node-2 the same way through the REST door (when kubectl is installed).

node-0 is the control plane (tainted NoSchedule), so user pods live on node-1 and node-2."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import pytest

from kubemu._wire_auth import state_credentials
from kubemu.apiclient import SyncApiClient
from kubemu.wire import WireError
from tests.conftest import wait_for
from tests.test_e2e import LONG, cluster, ready  # noqa: F401 (cluster: the fixture)

PY = sys.executable
BLOCKED = "Cannot evict pod as it would violate the pod's disruption budget."
TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def manifests() -> str:
    labels = {"app": "web"}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"replicas": 3, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels}, "spec": {
                               "terminationGracePeriodSeconds": 1,
                               # no probe: Ready when running, so only evictions take pods out of service
                               "containers": [{"name": "web", "command": [PY, "-S", "-c", "import time; time.sleep(10**6)"]}]}}}}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}}}
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [deployment, pdb]})


def web_on(cluster, node: str) -> list[dict] | None:
    """The live web pods, all Ready, all on `node` (None otherwise)."""
    pods = cluster.ready_web(3)
    return pods if pods and all(p["spec"].get("nodeName") == node for p in pods) else None


def cordoned(cluster, name: str) -> bool:
    spec = (cluster.call("get", "nodes", name) or {}).get("spec") or {}
    return spec.get("unschedulable") is True and TAINT in [
        {k: t.get(k) for k in ("key", "effect")} for t in spec.get("taints") or []]


def schedulable(cluster, name: str) -> bool:
    spec = (cluster.call("get", "nodes", name) or {}).get("spec") or {}
    return not spec.get("unschedulable") and not any(t.get("key") == TAINT["key"] for t in spec.get("taints") or [])


def budget_allows(cluster, count: int) -> bool:
    pdb = cluster.call("get", "poddisruptionbudgets", "web", namespace="default") or {}
    return (pdb.get("status") or {}).get("disruptionsAllowed") == count


class ReadyFloor:
    """Watches the web pods during a drain: the fewest live Ready ones seen, and every pod."""

    def __init__(self, cluster):
        self.api = SyncApiClient(cluster.state.api_endpoint(), timeout=15, credentials=state_credentials(cluster.dir))
        self.lowest = 3
        self.seen: list = []  # the pods when the lowest was seen
        self.pods: dict = {}  # uid -> (name, node) of every web pod listed
        self.polls = 0  # lists answered
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            try:
                pods = self.api.list("pods", namespace="default", label_selector="app=web")["items"]
            except WireError:
                continue  # the control plane restarting
            self.pods.update((p["metadata"]["uid"], (p["metadata"]["name"], p["spec"].get("nodeName")))
                             for p in pods)
            self.polls += 1
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp") and ready(p)]
            if len(live) < self.lowest:
                self.lowest = len(live)
                self.seen = [(p["metadata"]["name"], p["spec"].get("nodeName"), p["metadata"].get("deletionTimestamp"),
                              p["status"].get("phase"), ready(p)) for p in pods]

    def settle(self) -> None:
        """Returns once the thread has listed twice more (it has seen the state of now)."""
        mark = self.polls
        wait_for(lambda: self.polls >= mark + 2, timeout=LONG, interval=0.1, message="two more lists")

    def close(self) -> int:
        self.stop.set()
        self.thread.join()
        self.api.close()
        return self.lowest


def test_drain_respects_the_disruption_budget(cluster, tmp_path):
    cluster.cli("up", "--nodes", "3", "--fast", "--detach", "--api-port", "0", "--no-kubeconfig")
    # everything starts on node-1: node-2 is cordoned meanwhile
    assert cluster.cli("cordon", "node-2").stdout == "node/node-2 cordoned\n"
    manifest = tmp_path / "web.json"
    manifest.write_text(manifests())
    cluster.cli("apply", "-f", str(manifest))
    wait_for(lambda: web_on(cluster, "node-1"), timeout=LONG, message="3 Ready web pods on node-1")
    assert cluster.cli("uncordon", "node-2").stdout == "node/node-2 uncordoned\n"
    wait_for(lambda: schedulable(cluster, "node-2"), timeout=LONG, message="node-2 schedulable again")
    wait_for(lambda: budget_allows(cluster, 1), timeout=LONG, message="the budget to allow 1 disruption")

    # a bare pod on node-1: kubectl's refusal without --force, and nothing evicted
    cluster.api.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lonely"}, "spec": {
        "nodeName": "node-1", "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "command": [PY, "-S", "-c", "import time; time.sleep(10**6)"]}]}},
        namespace="default")
    refused = cluster.cli("drain", "node-1", "--ignore-daemonsets", check=False)
    unmanaged = "cannot delete Pods that declare no controller (use --force to override): default/lonely"
    assert refused.returncode == 1 and refused.stdout == "node/node-1 cordoned\n", refused
    assert refused.stderr == (f'error: unable to drain node "node-1" due to error: {unmanaged}, continuing command...\n'
                              f"There are pending nodes to be drained:\n node-1\nerror: {unmanaged}\n"), refused.stderr
    assert len(cluster.web_pods()) == 3

    floor = ReadyFloor(cluster)
    env = dict(os.environ, KUBEMU_STATE_DIR=str(cluster.dir))
    drain = subprocess.Popen([PY, "-m", "kubemu.cli", "drain", "node-1", "--ignore-daemonsets", "--force",
                              "--timeout", f"{int(LONG)}s"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL)
    try:
        # the first pod admitted: kill -9 the controller-manager; the drain still finishes
        wait_for(lambda: len(cluster.web_pods() or [None] * 3) < 3 or drain.poll() is not None,
                 timeout=LONG, message="the first eviction")
        os.kill(cluster.system_pid("controller-manager"), signal.SIGKILL)
        out, err = drain.communicate(timeout=LONG * 2)
        # (still watching) the replacements settle on node-2
        wait_for(lambda: drain.returncode != 0 or web_on(cluster, "node-2"), timeout=LONG,
                 message="3 Ready web pods on node-2")
        floor.settle()
    finally:
        if drain.poll() is None:
            drain.kill()
            drain.communicate()
        lowest = floor.close()
    assert drain.returncode == 0, f"{out}\n{err}"
    lines = out.splitlines()
    assert lines[0] == "node/node-1 already cordoned" and lines[-1] == "node/node-1 drained", out
    assert "pod/lonely evicted" in lines, out
    # node-1's kube-proxy is a DaemonSet pod: skipped, and said in the same line, as kubectl does
    assert any(line.startswith("WARNING: deleting Pods that declare no controller: default/lonely; "
                               "ignoring DaemonSet-managed Pods: kube-system/kube-proxy-")
               for line in err.splitlines()), err
    assert sum(line.startswith("pod/web-") and line.endswith(" evicted") for line in lines) == 3, out
    assert f'-n "default" (will retry after 5s): {BLOCKED}' in err, err
    assert "Traceback" not in out + err
    assert lowest >= 2, f"only {lowest} web pods were Ready at some point: {floor.seen}\n{out}\n{err}"
    # no duplicates despite the controller-manager's restart: the 3 evicted and one replacement each
    assert len(floor.pods) == 6, floor.pods
    assert sorted(node for _, node in floor.pods.values()) == ["node-1"] * 3 + ["node-2"] * 3, floor.pods
    wait_for(lambda: cordoned(cluster, "node-1"), timeout=LONG, message="node-1 unschedulable and tainted")
    assert cluster.cli("cordon", "node-1").stdout == "node/node-1 already cordoned\n"

    assert cluster.cli("uncordon", "node-1").stdout == "node/node-1 uncordoned\n"
    wait_for(lambda: schedulable(cluster, "node-1"), timeout=LONG, message="node-1 schedulable, its taint gone")

    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the REST door's drain is not checked")
    wait_for(lambda: budget_allows(cluster, 1), timeout=LONG, message="the budget to allow 1 disruption")
    home = tmp_path / "home"
    home.mkdir()
    kubectl = subprocess.run(["kubectl", "--kubeconfig", str(cluster.dir / "admin.conf"), "drain", "node-2",
                              "--ignore-daemonsets", "--timeout", f"{int(LONG)}s"],
                             env={"HOME": str(home), "PATH": os.environ["PATH"]}, capture_output=True, text=True,
                             timeout=LONG * 4, stdin=subprocess.DEVNULL)
    assert kubectl.returncode == 0, f"{kubectl.stdout}\n{kubectl.stderr}"
    assert kubectl.stdout.splitlines()[-1] == "node/node-2 drained", kubectl.stdout
    assert BLOCKED in kubectl.stderr, kubectl.stderr
    wait_for(lambda: web_on(cluster, "node-1"), timeout=LONG, message="3 Ready web pods back on node-1")
    wait_for(lambda: cordoned(cluster, "node-2"), timeout=LONG, message="node-2 cordoned by kubectl")
