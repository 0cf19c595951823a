"""The DaemonSet controller in a real controller-manager process against a real apiserver (Nodes
are plain objects, pods stay unbound: the controller finds a pod's node in its affinity): one pod
per node, a node added or deleted, a NoExecute taint, a Failed pod replaced, and a kill -9 in the
middle of the roll-out never leaves two pods on a node; deleting the DaemonSet takes its pods
and ControllerRevisions with it (the garbage collector)."""
from __future__ import annotations

import pytest

from components.controllers.daemonset import target_node
from tests.conftest import wait_for

from . import PodCensus, cluster  # noqa: F401  (cluster: a fixture)


@pytest.fixture(scope="module")
def cm(cluster):
    return cluster.controller_manager("--controllers", "daemonset,garbagecollector")


def node(name: str, labels=None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


def daemonset(name: str, node_selector=None) -> dict:
    spec = {"containers": [{"name": "c", "image": "agent:1"}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def placement(cluster, ns: str, prefix: str) -> dict[str, list[str]]:
    """node -> the names of the live pods meant for it (only nodes named `prefix`*)."""
    out: dict[str, list[str]] = {}
    for pod in cluster.pods(ns):
        target = target_node(pod)
        if target and target.startswith(prefix):
            out.setdefault(target, []).append(pod["metadata"]["name"])
    return out


def one_each(cluster, ns: str, prefix: str, nodes: set[str]):
    def check():
        got = placement(cluster, ns, prefix)
        return got if set(got) == nodes and all(len(v) == 1 for v in got.values()) else None
    return wait_for(check, message=f"one pod on each of {sorted(nodes)}")


def test_one_pod_per_node_follows_the_nodes(cluster, cm):
    api, ns = cluster.api, cluster.namespace("ds-basic")
    for name in ("a-1", "a-2"):
        api.create("nodes", node(name))
    api.create("daemonsets", daemonset("agent"), namespace=ns)
    first = one_each(cluster, ns, "a-", {"a-1", "a-2"})

    def status_says(n):
        status = api.get("daemonsets", "agent", namespace=ns).get("status") or {}
        return status.get("currentNumberScheduled") == n and status.get("observedGeneration") == 1
    wait_for(lambda: status_says(2), message="status.currentNumberScheduled 2")
    revisions = api.list("controllerrevisions", namespace=ns)["items"]
    assert len(revisions) == 1 and revisions[0]["revision"] == 1
    pod = api.get("pods", first["a-1"][0], namespace=ns)
    assert pod["metadata"]["labels"]["controller-revision-hash"] in revisions[0]["metadata"]["name"]
    wait_for(lambda: any(e["message"] == f"Created pod: {first['a-1'][0]}"
                         for e in cluster.events(ns, "SuccessfulCreate", "agent")),
             message="a SuccessfulCreate event")

    api.create("nodes", node("a-3"))
    one_each(cluster, ns, "a-", {"a-1", "a-2", "a-3"})
    api.delete("nodes", "a-2")
    one_each(cluster, ns, "a-", {"a-1", "a-3"})
    api.patch("nodes", "a-3", {"spec": {"taints": [{"key": "dedicated", "effect": "NoExecute"}]}})
    one_each(cluster, ns, "a-", {"a-1"})


def test_a_failed_pod_is_replaced(cluster, cm):
    api, ns = cluster.api, cluster.namespace("ds-failed")
    api.create("nodes", node("f-1"))
    api.create("daemonsets", daemonset("agent"), namespace=ns)
    victim = one_each(cluster, ns, "f-", {"f-1"})["f-1"][0]
    pod = api.get("pods", victim, namespace=ns)
    pod["status"] = {"phase": "Failed"}
    api.update_status("pods", pod, namespace=ns)

    def replaced():
        got = placement(cluster, ns, "f-").get("f-1") or []
        return got if got and victim not in got else None
    wait_for(replaced, message="the failed pod replaced")
    assert cluster.events(ns, "FailedDaemonPod", "agent")


def test_kill_9_mid_rollout_never_doubles_a_node(cluster, cm):
    api, ns = cluster.api, cluster.namespace("ds-restart")
    nodes = {f"k-{i}" for i in range(12)}
    census = PodCensus(cluster.endpoint, ns)
    try:
        for name in nodes:
            api.create("nodes", node(name, {"pool": "k"}))
        api.create("daemonsets", daemonset("agent", {"pool": "k"}), namespace=ns)
        # slow start creates 1, 2, 4, ... pods per sync: kill it after the first batch
        wait_for(lambda: census.live, message="the roll-out to start")
        cm.kill()
        cm.start()
        one_each(cluster, ns, "k-", nodes)
        wait_for(lambda: len(census.live) == len(nodes), message="the census to catch up")
        assert census.most == len(nodes)
    finally:
        census.stop()


def test_deleting_the_daemonset_deletes_its_pods_and_revisions(cluster, cm):
    api, ns = cluster.api, cluster.namespace("ds-delete")
    api.create("nodes", node("d-1", {"pool": "d"}))
    api.create("daemonsets", daemonset("agent", {"pool": "d"}), namespace=ns)
    one_each(cluster, ns, "d-", {"d-1"})
    wait_for(lambda: api.list("controllerrevisions", namespace=ns)["items"], message="a revision")
    api.delete("daemonsets", "agent", namespace=ns)
    wait_for(lambda: not cluster.pods(ns, active_only=False), message="its pods deleted")
    wait_for(lambda: not api.list("controllerrevisions", namespace=ns)["items"],
             message="its revisions deleted")


def test_an_adopted_orphan_gone_before_the_adoption_counts_as_deleted():
    """An orphan the DaemonSet adopted and deleted in one sync, deleted by someone else first
    (a static pod's mirror pod, `kubemu up` on an older state directory): the adoption fails and
    the delete finds it gone, so no deletion event names the DaemonSet as its owner. Its
    deletion is observed all the same, or the DaemonSet would create nothing until the
    expectations' TTL (5 minutes)."""
    from components.controller_manager.daemonset import DaemonSetController
    from components.controller_manager.informers import SharedInformers
    from components.controllers.replicaset import Expectation
    from kubemu.apiclient import ApiClient

    api = ApiClient("ipc:///nonexistent/apiserver.sock")
    ctrl = DaemonSetController(api, SharedInformers(api))
    ds = {**daemonset("agent"), "metadata": {"name": "agent", "namespace": "ns", "uid": "ds-1"}}
    ctrl.daemonsets.indexer.add(ds)
    ctrl.expectations.set("ns/agent", Expectation(deletes=frozenset({"orphan-1"}), timestamp=1e12))
    other = {"metadata": {"name": "x", "namespace": "ns", "uid": "orphan-2", "labels": {"app": "other"}}}
    ctrl._pod_deleted(other)
    assert not ctrl.expectations.satisfied("ns/agent", 1e12)
    orphan = {"metadata": {"name": "agent-node-1", "namespace": "ns", "uid": "orphan-1", "labels": {"app": "agent"}}}
    ctrl._pod_deleted(orphan)
    assert ctrl.expectations.satisfied("ns/agent", 1e12)
