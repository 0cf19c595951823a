"""DaemonSets end to end (issue 17 §5), real processes on a `kubemu up --nodes 3 --fast` cluster:
exactly one pod per node, control-plane node included when tolerated; none on a tainted node
without a toleration; a node started later gets its pod; a rolling update replaces the pods
within maxUnavailable; the controller-manager killed -9 in the middle of a rolling update
converges with one pod per node, never two."""
from __future__ import annotations

import os
import signal
import sys

from kubemu.apiclient import Conflict
from tests.conftest import wait_for
from tests.test_e2e import LONG, cluster, ready  # noqa: F401 (cluster: the fixture)

PY = sys.executable
NODES = {"node-0", "node-1", "node-2"}


def daemonset(name: str, version: str, tolerations=None) -> dict:
    spec = {"terminationGracePeriodSeconds": 1,
            "containers": [{"name": "agent", "command": [PY, "-c", "import time; time.sleep(3600)"],
                            "env": [{"name": "VERSION", "value": version}]}]}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def version(pod: dict) -> str:
    return next(e["value"] for e in pod["spec"]["containers"][0]["env"] if e["name"] == "VERSION")


class Watcher:
    """Polls one DaemonSet's pods and remembers the worst it saw: the most live pods on one node,
    the fewest nodes with a Ready pod."""

    def __init__(self, cluster, name: str):
        self.cluster, self.name = cluster, name
        self.most_on_a_node = 0
        self.fewest_ready = len(NODES)

    def pods(self) -> list[dict] | None:
        listed = self.cluster.call("list", "pods", namespace="default", label_selector=f"app={self.name}")
        if listed is None:
            return None
        live = [p for p in listed["items"] if not p["metadata"].get("deletionTimestamp")]
        per_node: dict[str, int] = {}
        for pod in live:
            node = pod["spec"].get("nodeName")
            if node:
                per_node[node] = per_node.get(node, 0) + 1
        self.most_on_a_node = max([self.most_on_a_node, *per_node.values()])
        ready_nodes = {p["spec"].get("nodeName") for p in live if ready(p)}
        self.fewest_ready = min(self.fewest_ready, len(ready_nodes))
        return live

    def one_ready_per_node(self, nodes: set[str], want_version: str | None = None) -> list[dict] | None:
        pods = self.pods()
        if pods is None or len(pods) != len(nodes) or not all(ready(p) for p in pods):
            return None
        if {p["spec"].get("nodeName") for p in pods} != nodes:
            return None
        if want_version and not all(version(p) == want_version for p in pods):
            return None
        return pods


def status(cluster, name: str) -> dict:
    return (cluster.call("get", "daemonsets", name, namespace="default") or {}).get("status") or {}


def set_version(cluster, name: str, value: str) -> None:
    def patched():
        ds = cluster.call("get", "daemonsets", name, namespace="default")
        if ds is None:
            return False
        ds["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "VERSION", "value": value}]
        try:
            return cluster.api.update("daemonsets", ds, namespace="default") is not None
        except Conflict:
            return False
    wait_for(patched, timeout=LONG, message=f"{name}'s template updated to {value}")


def test_one_pod_per_node_taints_a_new_node_and_rolling_updates(cluster):
    cluster.cli("up", "--nodes", "3", "--fast", "--detach", "--api-port", "0", "--no-kubeconfig")
    api = cluster.api

    # node-2 goes away (its Node object too) before any DaemonSet exists; it comes back later.
    cluster.cli("node", "kill", "node-2")
    api.delete("nodes", "node-2")
    # node-1 is reserved: a NoSchedule taint through the API
    api.patch("nodes", "node-1", {"spec": {"taints": [
        {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}})

    # `agent` tolerates every taint (control-plane node-0, node-1's); `plain` tolerates none.
    api.create("daemonsets", daemonset("agent", "1", tolerations=[{"operator": "Exists"}]),
               namespace="default")
    api.create("daemonsets", daemonset("plain", "1"), namespace="default")
    agent, plain = Watcher(cluster, "agent"), Watcher(cluster, "plain")
    wait_for(lambda: agent.one_ready_per_node({"node-0", "node-1"}), timeout=LONG, interval=0.25,
             message="one agent pod on node-0 and node-1")
    wait_for(lambda: status(cluster, "plain").get("observedGeneration") == 1, timeout=LONG,
             message="plain observed")
    assert plain.pods() == [] and status(cluster, "plain")["desiredNumberScheduled"] == 0

    # node-2 starts again and registers: a new Node, it gets agent's and plain's pods
    cluster.cli("node", "start", "node-2")
    wait_for(lambda: agent.one_ready_per_node(NODES), timeout=LONG, interval=0.25,
             message="one agent pod on each node, node-2 included")
    wait_for(lambda: plain.one_ready_per_node({"node-2"}), timeout=LONG, interval=0.25,
             message="plain's pod on the untainted node-2 only")
    wait_for(lambda: status(cluster, "agent").get("numberAvailable") == 3, timeout=LONG,
             message="agent's status: 3 available")
    got = status(cluster, "agent")
    assert (got["desiredNumberScheduled"], got["currentNumberScheduled"], got["numberReady"],
            got["updatedNumberScheduled"], got["numberMisscheduled"]) == (3, 3, 3, 3, 0), got

    # A rolling update with the default maxUnavailable 1: never fewer than 2 nodes Ready.
    agent = Watcher(cluster, "agent")
    set_version(cluster, "agent", "2")
    wait_for(lambda: agent.one_ready_per_node(NODES, "2"), timeout=LONG, interval=0.2,
             message="agent rolled out to version 2")
    assert agent.fewest_ready >= len(NODES) - 1, agent.fewest_ready
    assert agent.most_on_a_node == 1, agent.most_on_a_node
    revisions = api.list("controllerrevisions", namespace="default", label_selector="app=agent")["items"]
    assert sorted(r["revision"] for r in revisions) == [1, 2]

    # The controller-manager killed -9 while the next one is under way: it converges, one a node.
    agent = Watcher(cluster, "agent")
    set_version(cluster, "agent", "3")
    wait_for(lambda: any(version(p) == "3" for p in agent.pods() or []), timeout=LONG, interval=0.1,
             message="the update to version 3 to start")
    os.kill(cluster.system_pid("controller-manager"), signal.SIGKILL)
    wait_for(lambda: agent.one_ready_per_node(NODES, "3"), timeout=LONG, interval=0.2,
             message="agent rolled out to version 3 after the kill")
    wait_for(lambda: status(cluster, "agent").get("updatedNumberScheduled") == 3, timeout=LONG,
             message="agent's status: 3 updated")
    assert agent.most_on_a_node == 1, agent.most_on_a_node
    assert agent.fewest_ready >= len(NODES) - 1, agent.fewest_ready
    assert plain.one_ready_per_node({"node-2"})
