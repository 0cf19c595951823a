"""Node lifecycle reconcile core: fake nodes/leases/pods in, expected actions out."""
from __future__ import annotations

import pytest

from components.controllers import DeletePod, RecordEvent, UpdateNode, UpdateStatus, merge_patch
from components.controllers.nodelifecycle import (TAINT_NOT_READY, TAINT_UNREACHABLE,
                                                  EvictionLimiter, NodeLifecycleSettings,
                                                  sync_nodes)
from components.controllers.podutil import format_time

NOW = 1_700_000_000.0
# scaled settings: 4 s grace, 30 s default toleration, 0.1 nodes/s
S = NodeLifecycleSettings(node_monitor_grace_period=4.0, node_startup_grace_period=6.0,
                          eviction_rate=0.1, default_toleration_seconds=30.0)


def node(name="n1", *, ready="True", heartbeat=NOW - 1, taints=None, conditions=None):
    conds = conditions if conditions is not None else [
        {"type": "Ready", "status": ready, "reason": "KubeletReady",
         "lastHeartbeatTime": format_time(heartbeat), "lastTransitionTime": format_time(NOW - 1000)},
        {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": format_time(heartbeat)},
        {"type": "DiskPressure", "status": "False", "lastHeartbeatTime": format_time(heartbeat)},
        {"type": "PIDPressure", "status": "False", "lastHeartbeatTime": format_time(heartbeat)}]
    n = {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": format_time(NOW - 5000)},
         "spec": {}, "status": {"conditions": conds, "capacity": {"cpu": "4"}}}
    if taints is not None:
        n["spec"]["taints"] = taints
    return n


def lease(name="n1", renew=NOW - 1):
    return {"metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                     "renewTime": format_time(renew)}}


def pod(name, node_name="n1", tolerations=None, annotations=None, owner_kind=None, ready=True):
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
         "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "i"}]},
         "status": {"phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    if tolerations is not None:
        p["spec"]["tolerations"] = tolerations
    if annotations:
        p["metadata"]["annotations"] = annotations
    if owner_kind:
        p["metadata"]["ownerReferences"] = [{"kind": owner_kind, "name": "o", "uid": "o-uid",
                                             "controller": True}]
    return p


def unreachable(added=NOW):
    return {"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": format_time(added)}


def node_update(actions, name="n1"):
    return [a for a in actions if isinstance(a, UpdateNode) and a.name == name]


def deleted(actions):
    return sorted(a.name for a in actions if isinstance(a, DeletePod))


def test_fresh_lease_does_nothing_and_requeues_at_grace_end():
    # the Ready heartbeat is old, but the lease was renewed: healthy
    result = sync_nodes([node(heartbeat=NOW - 100)], [lease(renew=NOW - 1)], [pod("a")], NOW,
                        settings=S)
    assert result.actions == []
    assert result.requeue_after == pytest.approx(3.0, abs=0.01)


def test_stale_lease_marks_unknown_taints_and_records_event():
    result = sync_nodes([node(heartbeat=NOW - 10)], [lease(renew=NOW - 10)], [pod("a")], NOW,
                        settings=S)
    (status,) = [a for a in result.actions if isinstance(a, UpdateStatus) and a.kind == "Node"]
    by_type = {c["type"]: c for c in status.status["conditions"]}
    for ctype in ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure"):
        assert by_type[ctype]["status"] == "Unknown"
        assert by_type[ctype]["reason"] == "NodeStatusUnknown"
        assert by_type[ctype]["message"] == "Kubelet stopped posting node status."
    assert by_type["Ready"]["lastTransitionTime"] == format_time(NOW)
    assert status.status["capacity"] == {"cpu": "4"}
    (upd,) = node_update(result.actions)
    taints = upd.changes["spec"]["taints"]
    assert {"key": TAINT_UNREACHABLE, "effect": "NoExecute", "timeAdded": format_time(NOW)} in taints
    assert {"key": TAINT_UNREACHABLE, "effect": "NoSchedule"} in taints
    assert RecordEvent("default", "Node", "n1", "Normal", "NodeNotReady",
                       "Node n1 status is now: NodeNotReady") in result.actions
    # MarkPodsNotReady
    (pst,) = [a for a in result.actions if isinstance(a, UpdateStatus) and a.kind == "Pod"]
    assert pst.status["conditions"][0]["status"] == "False"
    # the pod tolerates unreachable for the default 30 s: not evicted yet, requeue then
    assert deleted(result.actions) == []
    assert result.requeue_after == pytest.approx(30.0)
    assert result.limiter == EvictionLimiter(0.0, NOW)


def test_no_lease_uses_ready_heartbeat():
    assert sync_nodes([node(heartbeat=NOW - 2)], [], [], NOW, settings=S).actions == []
    assert node_update(sync_nodes([node(heartbeat=NOW - 5)], [], [], NOW, settings=S).actions)


def test_node_that_never_posted_status_uses_startup_grace():
    n = node(conditions=[])  # created NOW - 5000, no lease
    result = sync_nodes([n], [], [], NOW, settings=S)
    (status,) = [a for a in result.actions if isinstance(a, UpdateStatus)]
    assert {c["reason"] for c in status.status["conditions"]} == {"NodeStatusNeverUpdated"}
    assert not any(isinstance(a, RecordEvent) for a in result.actions)
    n["metadata"]["creationTimestamp"] = format_time(NOW - 3)
    young = sync_nodes([n], [], [], NOW, settings=S)
    assert young.actions == [] and young.requeue_after == pytest.approx(3.0, abs=0.01)


def test_ready_false_gets_not_ready_taint():
    result = sync_nodes([node(ready="False")], [lease()], [], NOW, settings=S)
    (upd,) = node_update(result.actions)
    keys = {(t["key"], t["effect"]) for t in upd.changes["spec"]["taints"]}
    assert keys == {(TAINT_NOT_READY, "NoExecute"), (TAINT_NOT_READY, "NoSchedule")}
    assert not any(isinstance(a, UpdateStatus) and a.kind == "Node" for a in result.actions)


def test_recovery_removes_taints_and_keeps_foreign_ones():
    foreign = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    taints = [foreign, unreachable(NOW - 50), {"key": TAINT_UNREACHABLE, "effect": "NoSchedule"}]
    result = sync_nodes([node(taints=taints)], [lease()], [pod("a")], NOW, settings=S)
    assert result.actions == [UpdateNode("n1", {"spec": {"taints": [foreign]}})]


def test_unreachable_swaps_to_not_ready_immediately():
    limiter = EvictionLimiter(0.0, NOW)  # empty bucket: a swap does not need a token
    result = sync_nodes([node(ready="False", taints=[unreachable(NOW - 50)])], [lease()], [], NOW,
                        limiter=limiter, settings=S)
    (upd,) = node_update(result.actions)
    ne = [t for t in upd.changes["spec"]["taints"] if t["effect"] == "NoExecute"]
    assert ne == [{"key": TAINT_NOT_READY, "effect": "NoExecute", "timeAdded": format_time(NOW)}]


TOL_FOREVER = [{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]
TOL_10 = [{"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
           "tolerationSeconds": 10}]
TOL_ALL = [{"operator": "Exists"}]


@pytest.mark.parametrize("p, age, evicted", [
    (pod("plain"), 29, False),                       # default 30 s toleration not over
    (pod("plain"), 30, True),                        # ... now it is
    (pod("forever", tolerations=TOL_FOREVER), 10_000, False),
    (pod("tolall", tolerations=TOL_ALL), 10_000, False),
    (pod("ten", tolerations=TOL_10), 9, False),
    (pod("ten", tolerations=TOL_10), 10, True),       # explicit tolerationSeconds beats default
    (pod("other", tolerations=[{"key": "x", "operator": "Exists", "effect": "NoExecute"}]), 30, True),
    (pod("mirror", annotations={"kubernetes.io/config.mirror": "abc"}), 10_000, False),
    (pod("ds", owner_kind="DaemonSet"), 10_000, False),
])
def test_taint_based_eviction(p, age, evicted):
    n = node(ready="Unknown", heartbeat=NOW - age - 100, taints=[unreachable(NOW - age)])
    result = sync_nodes([n], [lease(renew=NOW - age - 100)], [p], NOW, settings=S)
    name = p["metadata"]["name"]
    assert deleted(result.actions) == ([name] if evicted else [])
    if evicted:
        assert RecordEvent("default", "Pod", name, "Normal", "TaintManagerEviction",
                           f"Marking for deletion Pod default/{name}") in result.actions


def test_untolerated_custom_no_execute_taint_evicts_at_once():
    taint = {"key": "maintenance", "effect": "NoExecute", "timeAdded": format_time(NOW)}
    result = sync_nodes([node(taints=[taint])], [lease()],
                        [pod("a"), pod("b", tolerations=[{"key": "maintenance",
                                                          "operator": "Exists"}])], NOW, settings=S)
    assert deleted(result.actions) == ["a"]
    assert not node_update(result.actions)


def test_terminating_pods_and_pods_elsewhere_untouched():
    p = pod("a")
    p["metadata"]["deletionTimestamp"] = format_time(NOW - 1)
    n = node(ready="Unknown", heartbeat=NOW - 500, taints=[unreachable(NOW - 400)])
    result = sync_nodes([n], [lease(renew=NOW - 500)], [p, pod("b", node_name="n2")], NOW,
                        settings=S)
    assert deleted(result.actions) == []


def simulate(nodes, pods, start, end, settings):
    """Run the controller like the shell would: apply its actions, wake at requeue_after."""
    nodes = {n["metadata"]["name"]: n for n in nodes}
    pods = {p["metadata"]["name"]: p for p in pods}
    limiter, now, evictions, taint_times = None, start, {}, {}
    while now <= end:
        result = sync_nodes(list(nodes.values()), [], list(pods.values()), now, limiter, settings)
        limiter = result.limiter
        for a in result.actions:
            if isinstance(a, UpdateNode):
                nodes[a.name] = merge_patch(nodes[a.name], a.changes)
                for t in a.changes["spec"]["taints"]:
                    if t["effect"] == "NoExecute":
                        taint_times.setdefault(a.name, now)
            elif isinstance(a, UpdateStatus) and a.kind == "Node":
                nodes[a.name] = dict(nodes[a.name], status=a.status)
            elif isinstance(a, DeletePod):
                evictions[a.name] = now
                del pods[a.name]
        if result.requeue_after is None:
            break
        now += result.requeue_after
    return taint_times, evictions


def test_eviction_rate_spreads_three_failing_nodes():
    # all three nodes stop heart-beating at once; 0.1 nodes/s -> tainted 10 s apart
    nodes = [node(f"n{i}", heartbeat=NOW - 10) for i in (1, 2, 3)]
    pods = [pod(f"p{i}", node_name=f"n{i}", tolerations=[]) for i in (1, 2, 3)]
    taint_times, evictions = simulate(nodes, pods, NOW, NOW + 100, S)
    assert [round(taint_times[f"n{i}"] - NOW) for i in (1, 2, 3)] == [0, 10, 20]
    # with the default 30 s toleration, evictions follow the taints 30 s later
    assert [round(evictions[f"p{i}"] - NOW) for i in (1, 2, 3)] == [30, 40, 50]


def test_eviction_rate_zero_never_taints():
    s = NodeLifecycleSettings(node_monitor_grace_period=4.0, eviction_rate=0.0)
    result = sync_nodes([node(heartbeat=NOW - 10)], [], [pod("a", tolerations=[])], NOW, settings=s)
    ne = [t for a in node_update(result.actions) for t in a.changes["spec"]["taints"]
          if t["effect"] == "NoExecute"]
    assert ne == [] and deleted(result.actions) == []


def test_limiter_token_bucket():
    lim = EvictionLimiter()
    ok, lim, _ = lim.take(NOW, 0.1, 1)
    assert ok
    ok, lim2, wait = lim.take(NOW + 4, 0.1, 1)
    assert not ok and wait == pytest.approx(6.0)
    ok, _, _ = lim2.take(NOW + 10, 0.1, 1)
    assert ok
