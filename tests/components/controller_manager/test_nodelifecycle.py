"""The node lifecycle controller in a real controller-manager process, with tiny timings: a node
whose lease stops being renewed goes Unknown, gets the unreachable taints, and loses the pods
that don't tolerate it; and the process exits 0 on SIGTERM."""
from __future__ import annotations

import pytest

from tests.conftest import wait_for

from . import cluster, now_rfc3339  # noqa: F401  (cluster: a fixture)

UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture(scope="module")
def cm(cluster):
    return cluster.controller_manager(
        "--controllers", "nodelifecycle", "--node-monitor-period", "0.5",
        "--node-monitor-grace-period", "2", "--node-startup-grace-period", "2",
        "--default-toleration-seconds", "1", name="node-controller")


def node(name: str) -> dict:
    now = now_rfc3339()
    conditions = [{"type": t, "status": s, "reason": "KubeletReady" if t == "Ready" else "Fine",
                   "lastHeartbeatTime": now, "lastTransitionTime": now}
                  for t, s in (("Ready", "True"), ("MemoryPressure", "False"),
                               ("DiskPressure", "False"), ("PIDPressure", "False"))]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "spec": {}, "status": {"conditions": conditions}}


def lease(name: str) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 2,
                     "renewTime": now_rfc3339()}}


def bound_pod(name: str, node_name: str, tolerations: list | None = None) -> dict:
    spec = {"nodeName": node_name,
            "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1000"]}]}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_unrenewed_lease_taints_the_node_and_evicts_its_pods(cluster, cm):
    api = cluster.api
    cluster.namespace("kube-node-lease")
    ns = cluster.namespace("on-nodes")
    api.create("nodes", node("n1"))
    api.create("leases", lease("n1"), namespace="kube-node-lease")
    api.create("pods", bound_pod("evicted", "n1"), namespace=ns)
    api.create("pods", bound_pod("stays", "n1", tolerations=[
        {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]), namespace=ns)
    # ... and nobody renews the lease again.

    def ready_condition():
        conds = (api.get("nodes", "n1").get("status") or {}).get("conditions") or []
        return next(c for c in conds if c["type"] == "Ready")
    wait_for(lambda: ready_condition()["status"] == "Unknown", message="Ready: Unknown")
    assert ready_condition()["reason"] == "NodeStatusUnknown"

    def taints():
        node_taints = api.get("nodes", "n1")["spec"].get("taints") or []
        return {(t["key"], t["effect"]): t for t in node_taints}
    wait_for(lambda: (UNREACHABLE, "NoExecute") in taints(), message="the NoExecute taint")
    assert taints()[(UNREACHABLE, "NoExecute")].get("timeAdded")
    assert (UNREACHABLE, "NoSchedule") in taints()

    # a bound pod is deleted gracefully (no kubelet finishes it here): deletionTimestamp set
    wait_for(lambda: api.get("pods", "evicted", namespace=ns)["metadata"].get("deletionTimestamp"),
             message="the pod without a toleration to be evicted")
    # the eviction pass that came after the 1 s default toleration spared the tolerating pod
    assert not api.get("pods", "stays", namespace=ns)["metadata"].get("deletionTimestamp")
    wait_for(lambda: cluster.events("default", "NodeNotReady", "n1"),
             message="a NodeNotReady event")
    wait_for(lambda: cluster.events(ns, "TaintManagerEviction", "evicted"),
             message="a TaintManagerEviction event")


def test_sigterm_exits_cleanly(cluster, cm):
    assert cm.terminate() == 0
    assert "shutting down" in cm.log_text()
