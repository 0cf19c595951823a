"""Disruption controller core: a PodDisruptionBudget's status from fake caches and a fake clock."""
from __future__ import annotations

import pytest

from components.controllers import RecordEvent, UpdateStatus
from components.controllers.disruption import DELETION_TIMEOUT, sync_pdb
from components.controllers.podutil import format_time

NOW = 1_700_000_000.0


def make_pdb(*, generation=1, status=None, selector=None, **spec):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default", "generation": generation, "uid": "pdb-uid"},
            "spec": {"selector": {"matchLabels": {"app": "web"}} if selector is None else selector, **spec},
            "status": status or {}}


def make_pod(name, *, ready=True, owner=("ReplicaSet", "web-abc", "rs-uid"), deleting=False, labels=None,
             namespace="default"):
    pod = {"metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": "web"}},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    if owner:
        kind, oname, uid = owner
        pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": kind, "name": oname,
                                               "uid": uid, "controller": True}]
    if deleting:
        pod["metadata"]["deletionTimestamp"] = format_time(NOW)
    return pod


def workload(replicas=3, deployment=True):
    """Cached controllers: Deployment web (replicas) over ReplicaSet web-abc (its own replicas 1,
    which must not count), and StatefulSet db."""
    rs = {"metadata": {"name": "web-abc", "namespace": "default", "uid": "rs-uid"}, "spec": {"replicas": 1}}
    objs = {("ReplicaSet", "web-abc"): rs,
            ("StatefulSet", "db"): {"metadata": {"name": "db", "namespace": "default", "uid": "sts-uid"},
                                    "spec": {"replicas": 2}}}
    if deployment:
        rs["metadata"]["ownerReferences"] = [{"kind": "Deployment", "name": "web", "uid": "d-uid", "controller": True}]
        objs[("Deployment", "web")] = {"metadata": {"name": "web", "namespace": "default", "uid": "d-uid"},
                                       "spec": {"replicas": replicas}}
    return lambda kind, ns, name: objs.get((kind, name)) if ns == "default" else None


def status_of(result):
    writes = [a for a in result.actions if isinstance(a, UpdateStatus)]
    assert len(writes) == 1 and writes[0].kind == "PodDisruptionBudget" and writes[0].name == "web"
    return writes[0].status


def events(result):
    return [(a.kind, a.name, a.type, a.reason, a.message) for a in result.actions if isinstance(a, RecordEvent)]


def pods3(**kw):
    return [make_pod(f"web-{i}", **kw) for i in range(3)]


def test_min_available_count_over_three_ready_pods():
    result = sync_pdb(make_pdb(minAvailable=2), pods3(), workload(), NOW)
    assert status_of(result) == {
        "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3, "disruptionsAllowed": 1,
        "observedGeneration": 1,
        "conditions": [{"type": "DisruptionAllowed", "status": "True", "observedGeneration": 1,
                        "reason": "SufficientPods", "message": "", "lastTransitionTime": format_time(NOW)}]}
    assert events(result) == [] and result.requeue_after is None


@pytest.mark.parametrize("spec, replicas, expected, desired, allowed", [
    (dict(minAvailable="50%"), 3, 3, 2, 1),          # 1.5 rounded up
    (dict(minAvailable="100%"), 3, 3, 3, 0),
    (dict(maxUnavailable=1), 3, 3, 2, 1),
    (dict(maxUnavailable="34%"), 3, 3, 1, 2),        # 1.02 unavailable rounded up to 2
    (dict(maxUnavailable=1), 5, 5, 4, 0),            # the Deployment's scale counts, not the pods
    (dict(maxUnavailable=5), 3, 3, 0, 3),            # at least 0 desired
    (dict(), 3, 0, 0, 0),                            # no budget, and expectedPods 0: nothing allowed
])
def test_desired_healthy_from_the_controllers_scale(spec, replicas, expected, desired, allowed):
    status = status_of(sync_pdb(make_pdb(**spec), pods3(), workload(replicas), NOW))
    assert (status["expectedPods"], status["desiredHealthy"], status["disruptionsAllowed"]) == (expected, desired, allowed)


def test_controllers_counted_once_each_and_replicasets_of_deployments_as_the_deployment():
    pods = pods3() + [make_pod(f"db-{i}", owner=("StatefulSet", "db", "sts-uid")) for i in range(2)]
    status = status_of(sync_pdb(make_pdb(maxUnavailable=1), pods, workload(3), NOW))
    assert status["expectedPods"] == 5 and status["currentHealthy"] == 5
    bare_rs = status_of(sync_pdb(make_pdb(maxUnavailable=0), pods3(), workload(deployment=False), NOW))
    assert bare_rs["expectedPods"] == 1  # the ReplicaSet's own scale when no Deployment runs it


def test_unready_and_terminating_pods_are_not_healthy():
    pods = [make_pod("web-0"), make_pod("web-1", ready=False), make_pod("web-2", deleting=True),
            make_pod("other", labels={"app": "db"}), make_pod("web-9", namespace="prod")]
    status = status_of(sync_pdb(make_pdb(minAvailable=1), pods, workload(), NOW))
    assert (status["expectedPods"], status["currentHealthy"], status["disruptionsAllowed"]) == (3, 1, 0)
    assert status["conditions"][0]["status"] == "False" and status["conditions"][0]["reason"] == "InsufficientPods"


def test_disrupted_pods_are_not_healthy_until_their_entry_runs_out():
    admitted = NOW - 30
    pdb = make_pdb(minAvailable=1, status={"disruptedPods": {"web-0": format_time(admitted), "gone": format_time(admitted)},
                                           "disruptionsAllowed": 1})
    result = sync_pdb(pdb, pods3(), workload(), NOW)
    status = status_of(result)
    assert status["currentHealthy"] == 2 and status["disruptionsAllowed"] == 1
    # the entry of a pod no longer there is dropped (null in the merge patch)
    assert status["disruptedPods"] == {"gone": None, "web-0": format_time(admitted)}
    assert result.requeue_after == pytest.approx(DELETION_TIMEOUT - 30)
    later = NOW + DELETION_TIMEOUT
    result = sync_pdb(pdb, pods3(), workload(), later)
    status = status_of(result)
    assert status["currentHealthy"] == 3 and "disruptedPods" not in status and result.requeue_after is None
    assert events(result) == [("Pod", "web-0", "Warning", "NotDeleted",
                               "Pod was expected by PDB default/web to be deleted but it wasn't")]


def test_an_up_to_date_status_is_not_written_again():
    first = status_of(sync_pdb(make_pdb(minAvailable=2), pods3(), workload(), NOW))
    again = sync_pdb(make_pdb(minAvailable=2, status=first), pods3(), workload(), NOW + 5)
    assert again.actions == []
    bumped = sync_pdb(make_pdb(minAvailable=2, status=first, generation=2), pods3(), workload(), NOW + 5)
    status = status_of(bumped)
    assert status["observedGeneration"] == 2
    # the condition did not flip: its transition time stays
    assert status["conditions"][0]["lastTransitionTime"] == format_time(NOW)
    assert status["conditions"][0]["observedGeneration"] == 2


def test_no_pods_no_controllers_and_unmanaged_pods():
    result = sync_pdb(make_pdb(minAvailable=1), [], workload(), NOW)
    assert events(result) == [("PodDisruptionBudget", "web", "Normal", "NoPods", "No matching pods found")]
    assert status_of(result)["disruptionsAllowed"] == 0

    lost = [make_pod("web-0", owner=("ReplicaSet", "gone", "gone-uid"))]
    result = sync_pdb(make_pdb(maxUnavailable=1, status={"disruptionsAllowed": 1, "observedGeneration": 1}),
                      lost, workload(), NOW)
    assert events(result) == [("PodDisruptionBudget", "web", "Warning", "NoControllers",
                               'found no controllers for pod "web-0"')]
    status = status_of(result)
    assert status["disruptionsAllowed"] == 0 and status["observedGeneration"] == 1
    assert [(c["status"], c["reason"], c["message"]) for c in status["conditions"]] == [
        ("False", "SyncFailed", 'found no controllers for pod "web-0"')]

    bare = [make_pod("web-0", owner=None), make_pod("web-1")]
    result = sync_pdb(make_pdb(maxUnavailable=1), bare, workload(1), NOW)
    assert [e[3] for e in events(result)] == ["UnmanagedPods"]
    assert status_of(result)["expectedPods"] == 1
    # an integer minAvailable counts the pods themselves: no controller needed
    result = sync_pdb(make_pdb(minAvailable=1), bare, workload(), NOW)
    assert events(result) == [] and status_of(result)["disruptionsAllowed"] == 1
