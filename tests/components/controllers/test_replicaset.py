"""ReplicaSet reconcile core: fake caches in, expected actions out (as sample-controller does)."""
from __future__ import annotations

import copy

import pytest

from components.controllers import Adopt, CreatePod, DeletePod, Release, UpdateStatus
from components.controllers.podutil import format_time
from components.controllers.replicaset import (BURST_REPLICAS, EXPECTATIONS_TTL, Expectation,
                                               Expectations, pod_update_matters, sync_replicaset)

NOW = 1_700_000_000.0
SEL = {"matchLabels": {"app": "web"}}


def make_rs(replicas=3, *, name="web", uid="rs-uid", generation=1, min_ready=0, status=None,
            deleting=False):
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
          "metadata": {"name": name, "namespace": "default", "uid": uid, "generation": generation},
          "spec": {"replicas": replicas, "minReadySeconds": min_ready, "selector": SEL,
                   "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}},
                                "spec": {"containers": [{"name": "c", "image": "img"}]}}},
          "status": status or {}}
    if deleting:
        rs["metadata"]["deletionTimestamp"] = format_time(NOW)
    return rs


def make_pod(name, *, owner="rs-uid", phase="Running", ready=True, ready_at=NOW - 100,
             node="node-0", restarts=0, created=NOW - 1000, labels=None, deleting=False):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                        "labels": {"app": "web", "tier": "fe"} if labels is None else labels,
                        "creationTimestamp": format_time(created)},
           "spec": {"nodeName": node} if node else {},
           "status": {"phase": phase,
                      "containerStatuses": [{"name": "c", "restartCount": restarts}],
                      "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                      "lastTransitionTime": format_time(ready_at)}]}}
    if owner:
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                               "name": "x", "uid": owner, "controller": True}]
    if deleting:
        pod["metadata"]["deletionTimestamp"] = format_time(NOW)
    return pod


def of(kind, actions):
    return [a for a in actions if isinstance(a, kind)]


def materialise(create: CreatePod, n: int, now: float) -> dict:
    """What the apiserver + kubelet would make of a CreatePod: a named, running, ready pod."""
    pod = {**create.pod, "metadata": {**create.pod["metadata"],
                                      "name": create.pod["metadata"]["generateName"] + str(n),
                                      "uid": f"uid-new-{n}",
                                      "creationTimestamp": format_time(now)}}
    pod["spec"] = {**pod["spec"], "nodeName": "node-0"}
    pod["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": format_time(now)}]}
    return pod


def test_create_pod_shape():
    result = sync_replicaset(make_rs(1), [], None, NOW)
    (create,) = of(CreatePod, result.actions)
    assert create.namespace == "default"
    md = create.pod["metadata"]
    assert md["generateName"] == "web-"
    assert md["labels"] == {"app": "web", "tier": "fe"}
    assert md["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                                      "uid": "rs-uid", "controller": True,
                                      "blockOwnerDeletion": True}]
    assert create.pod["spec"] == {"containers": [{"name": "c", "image": "img"}]}
    assert result.expectation == Expectation(adds=1, timestamp=NOW, batch=1)


def test_scale_up_slow_start_batches_and_expectations_suppress_resync():
    rs, pods, record, batches = make_rs(10), [], None, []
    now = NOW
    for step in range(10):
        result = sync_replicaset(rs, pods, record, now)
        creates = of(CreatePod, result.actions)
        if not creates:
            break
        batches.append(len(creates))
        record = result.expectation
        # The informer has not seen the writes yet: a second sync must not create again.
        again = sync_replicaset(rs, pods, record, now + 1)
        assert of(CreatePod, again.actions) == []
        assert again.expectation == record
        for create in creates:  # the shell reports success; the informer feeds the pods back
            pods.append(materialise(create, len(pods), now))
            record = record.creation_observed()
        now += 2
    assert batches == [1, 2, 4, 3]
    assert len(pods) == 10
    final = sync_replicaset(rs, pods, record, now)
    assert final.expectation is None
    assert of(UpdateStatus, final.actions)[0].status["replicas"] == 10


def test_burst_limit_caps_a_batch():
    rs = make_rs(5000)
    record = Expectation(batch=400, timestamp=NOW)  # last batch of 400 fully observed
    result = sync_replicaset(rs, [], record, NOW + 1)
    assert len(of(CreatePod, result.actions)) == BURST_REPLICAS


def test_failed_batch_restarts_at_one_and_sets_replica_failure():
    rs = make_rs(10)
    record = Expectation(adds=4, timestamp=NOW, batch=4)
    for _ in range(3):
        record = record.creation_observed()
    record = record.creation_failed("pods \"web-x\" is forbidden: exceeded quota")
    assert record.satisfied(NOW)
    pods = [make_pod(f"p{i}") for i in range(3)]
    result = sync_replicaset(rs, pods, record, NOW + 1)
    assert len(of(CreatePod, result.actions)) == 1
    (status,) = of(UpdateStatus, result.actions)
    (cond,) = status.status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("ReplicaFailure", "True",
                                                              "FailedCreate")
    assert "exceeded quota" in cond["message"]
    # The next batch succeeds: batch doubles to 2 and the condition is cleared.
    rs["status"] = status.status
    record = result.expectation.creation_observed()
    pods.append(make_pod("p3"))
    result = sync_replicaset(rs, pods, record, NOW + 2)
    assert len(of(CreatePod, result.actions)) == 2
    assert "conditions" not in of(UpdateStatus, result.actions)[0].status


def test_expired_expectations_allow_a_sync():
    record = Expectation(adds=3, timestamp=NOW, batch=4)
    assert of(CreatePod, sync_replicaset(make_rs(3), [], record, NOW + 10).actions) == []
    late = sync_replicaset(make_rs(3), [], record, NOW + EXPECTATIONS_TTL + 1)
    assert len(of(CreatePod, late.actions)) == 1  # expired: start over at 1


def test_expectations_container():
    exps = Expectations()
    assert exps.satisfied("default/web", NOW)
    exps.set("default/web", Expectation(deletes=frozenset({"a", "b"}), timestamp=NOW))
    exps.deletion_observed("default/web", "a")
    assert not exps.satisfied("default/web", NOW)
    exps.deletion_failed("default/web", "b", "boom")
    assert exps.satisfied("default/web", NOW)
    exps.forget("default/web")
    assert exps.get("default/web") is None


@pytest.mark.parametrize("pods, expected", [
    # pending before running
    ([make_pod("running"), make_pod("pending", phase="Pending", ready=False)], ["pending"]),
    # unassigned before assigned
    ([make_pod("assigned", phase="Pending", ready=False),
      make_pod("unassigned", phase="Pending", ready=False, node=None)], ["unassigned"]),
    # Unknown before Running
    ([make_pod("running"), make_pod("unknown", phase="Unknown")], ["unknown"]),
    # not ready before ready
    ([make_pod("ready"), make_pod("notready", ready=False)], ["notready"]),
    # ready for less time first
    ([make_pod("old", ready_at=NOW - 500), make_pod("young", ready_at=NOW - 5)], ["young"]),
    # more restarts first
    ([make_pod("calm"), make_pod("flappy", restarts=7)], ["flappy"]),
    # newer first
    ([make_pod("older", created=NOW - 900), make_pod("newer", created=NOW - 10)], ["newer"]),
])
def test_scale_down_ranking(pods, expected):
    result = sync_replicaset(make_rs(len(pods) - 1), pods, None, NOW)
    assert [a.name for a in of(DeletePod, result.actions)] == expected
    assert result.expectation.deletes == frozenset(f"uid-{n}" for n in expected)


def test_scale_down_picks_pending_notready_newest_in_order():
    pods = [make_pod("a-old-ready", created=NOW - 900), make_pod("b-new-ready", created=NOW - 10),
            make_pod("c-notready", ready=False), make_pod("d-pending", phase="Pending",
                                                          ready=False)]
    result = sync_replicaset(make_rs(1), pods, None, NOW)
    assert [a.name for a in of(DeletePod, result.actions)] == ["d-pending", "c-notready",
                                                               "b-new-ready"]
    assert all(a.uid == f"uid-{a.name}" for a in of(DeletePod, result.actions))


def test_deletion_in_flight_suppresses_resync():
    record = Expectation(deletes=frozenset({"uid-x"}), timestamp=NOW)
    pods = [make_pod("a"), make_pod("b")]
    result = sync_replicaset(make_rs(1), pods, record, NOW + 1)
    assert of(DeletePod, result.actions) == []
    result = sync_replicaset(make_rs(1), pods, record.deletion_observed("uid-x"), NOW + 1)
    assert len(of(DeletePod, result.actions)) == 1


def test_adopts_orphans_ignores_others_releases_nonmatching_skips_inactive():
    pods = [make_pod("mine"), make_pod("orphan", owner=None),
            make_pod("foreign", owner="other-uid"),
            make_pod("orphan-nomatch", owner=None, labels={"app": "db"}),
            make_pod("mine-nomatch", labels={"app": "db"}),
            make_pod("done", phase="Succeeded"), make_pod("failed", phase="Failed"),
            make_pod("terminating", deleting=True)]
    result = sync_replicaset(make_rs(2), pods, None, NOW)
    (adopt,) = of(Adopt, result.actions)
    assert (adopt.kind, adopt.name, adopt.uid) == ("Pod", "orphan", "uid-orphan")
    assert adopt.owner_reference["uid"] == "rs-uid" and adopt.owner_reference["controller"]
    (release,) = of(Release, result.actions)
    assert release.name == "mine-nomatch"
    assert of(CreatePod, result.actions) == [] and of(DeletePod, result.actions) == []
    assert of(UpdateStatus, result.actions)[0].status["replicas"] == 2


def test_deleting_rs_neither_adopts_nor_manages():
    result = sync_replicaset(make_rs(3, deleting=True), [make_pod("orphan", owner=None)], None, NOW)
    assert of(Adopt, result.actions) == [] and of(CreatePod, result.actions) == []


def test_status_counts_with_min_ready_seconds():
    pods = [make_pod("avail", ready_at=NOW - 60),
            make_pod("just-ready", ready_at=NOW - 5),
            make_pod("notready", ready=False),
            make_pod("partial-labels", labels={"app": "web"}, ready_at=NOW - 60)]
    rs = make_rs(4, generation=7, min_ready=30)
    result = sync_replicaset(rs, pods, None, NOW)
    (update,) = of(UpdateStatus, result.actions)
    assert (update.kind, update.name) == ("ReplicaSet", "web")
    assert update.status == {"replicas": 4, "fullyLabeledReplicas": 3, "readyReplicas": 3,
                             "availableReplicas": 2, "observedGeneration": 7}
    assert result.requeue_after == pytest.approx(25)  # when "just-ready" becomes available
    # unchanged status: no write
    rs["status"] = update.status
    assert of(UpdateStatus, sync_replicaset(rs, pods, None, NOW).actions) == []
    later = sync_replicaset(rs, pods, None, NOW + 25)
    assert of(UpdateStatus, later.actions)[0].status["availableReplicas"] == 3


def test_empty_selector_is_refused():
    rs = make_rs(3)
    rs["spec"]["selector"] = {}
    result = sync_replicaset(rs, [], None, NOW)
    assert [a.reason for a in result.actions] == ["SelectingAll"]


def _changed(pod, fn):
    new = copy.deepcopy(pod)
    fn(new)
    return new


# pod_update_matters against what a sync decides: the RS wants 2 pods and minReadySeconds 10;
# "p" (the pod that changes) is ready since 5 s (not yet available), "q" is available. Every
# field a sync reads then changes its actions or its requeue when changed alone.
_READ_FIELDS = {
    "readiness": lambda p: p["status"]["conditions"][0].update(status="False"),
    "when it became ready (availability)":
        lambda p: p["status"]["conditions"][0].update(lastTransitionTime=format_time(NOW - 100)),
    "the phase": lambda p: p["status"].update(phase="Failed"),
    "a selected label": lambda p: p["metadata"]["labels"].update(app="other"),
    "a template label (fully labeled)": lambda p: p["metadata"]["labels"].update(tier="be"),
    "the owner": lambda p: p["metadata"]["ownerReferences"][0].update(uid="another-rs"),
    "a graceful delete": lambda p: p["metadata"].update(deletionTimestamp=format_time(NOW)),
}
# What no sync without a scale-down reads (a scale-down ranks the pods from the cache as they
# are then): the binding, the IPs, container statuses, annotations.
_UNREAD_FIELDS = {
    "the binding": lambda p: p["spec"].update(nodeName="node-9"),
    "the pod IP": lambda p: p["status"].update(podIP="10.0.0.1"),
    "container restarts": lambda p: p["status"]["containerStatuses"][0].update(restartCount=3),
    "an annotation": lambda p: p["metadata"].update(annotations={"a": "b"}),
}
# Fixed for a pod's life (the apiserver refuses to change them): never an update to filter.
_IMMUTABLE = {("metadata", "namespace"), ("metadata", "name"), ("metadata", "uid")}


def _matters_scenario():
    rs = make_rs(2, min_ready=10, status={"replicas": 2, "fullyLabeledReplicas": 2,
                                          "readyReplicas": 2, "availableReplicas": 1,
                                          "observedGeneration": 1})
    return rs, make_pod("p", ready_at=NOW - 5), make_pod("q")


def _sync_outcome(rs, pod, other):
    result = sync_replicaset(rs, [pod, other], None, NOW)
    return result.actions, result.requeue_after


@pytest.mark.parametrize("what", sorted(_READ_FIELDS))
def test_a_pod_update_matters_when_it_changes_a_field_the_sync_reads(what):
    rs, pod, other = _matters_scenario()
    new = _changed(pod, _READ_FIELDS[what])
    assert _sync_outcome(rs, new, other) != _sync_outcome(rs, pod, other), \
        f"the scenario must make the sync read {what}"
    assert pod_update_matters(pod, new)


@pytest.mark.parametrize("what", sorted(_UNREAD_FIELDS))
def test_a_pod_update_does_not_matter_when_only_unread_fields_change(what):
    rs, pod, other = _matters_scenario()
    new = _changed(pod, _UNREAD_FIELDS[what])
    assert _sync_outcome(rs, new, other) == _sync_outcome(rs, pod, other)
    assert not pod_update_matters(pod, new)


def _leaf_changes(value, path=()):
    """(path, change) for each leaf of a JSON value changed alone, and each map entry removed:
    a field a sync starts reading is in here without anyone listing it."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, child in items:
        if isinstance(child, (dict, list)):
            yield from _leaf_changes(child, (*path, key))
            continue
        new = (not child if isinstance(child, bool) else child + 1 if isinstance(child, int)
               else f"{child}-changed")
        yield (*path, key), lambda obj, k=key, v=new: obj.__setitem__(k, v)
        if isinstance(value, dict):
            yield (*path, key, "removed"), lambda obj, k=key: obj.pop(k)


def _at(obj, path):
    for key in path:
        obj = obj[key]
    return obj


def test_every_pod_change_that_alters_a_sync_matters():
    rs, pod, other = _matters_scenario()
    pod["metadata"]["annotations"] = {"a": "b"}
    before = _sync_outcome(rs, pod, other)
    checked = 0
    for path, change in _leaf_changes(pod):
        field = path[:-1] if path[-1] == "removed" else path
        if field in _IMMUTABLE:
            continue
        new = copy.deepcopy(pod)
        change(_at(new, field[:-1]))
        if _sync_outcome(rs, new, other) != before:
            checked += 1
            assert pod_update_matters(pod, new), f"changing {'.'.join(map(str, path))}"
    assert checked >= len(_READ_FIELDS)


