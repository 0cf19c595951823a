"""The garbage collector's event handlers: which updates schedule a pass (no API, no loop)."""
from __future__ import annotations

import copy

from components.controller_manager.garbagecollector import GarbageCollector
from components.controller_manager.informers import SharedInformers
from components.controllers.garbagecollector import ORPHAN

STAMP = "2027-01-15T08:00:00Z"


def _collector() -> tuple[GarbageCollector, list]:
    informers = SharedInformers(None)
    collector = GarbageCollector(None, informers)
    passes = []
    collector._trigger = lambda: passes.append(1)
    return collector, passes


def _replicaset(uid: str, terminating: bool = False) -> dict:
    meta = {"name": f"rs-{uid}", "namespace": "default", "uid": uid}
    if terminating:
        meta.update(deletionTimestamp=STAMP, finalizers=[ORPHAN])
    return {"kind": "ReplicaSet", "metadata": meta}


def _pod(owner_uid: str | None, rv: str = "1", phase: str = "Pending") -> dict:
    meta = {"name": "web-1", "namespace": "default", "uid": "pod-uid", "resourceVersion": rv}
    if owner_uid:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"rs-{owner_uid}",
                                    "uid": owner_uid, "controller": True}]
    return {"kind": "Pod", "metadata": meta, "status": {"phase": phase}}


def _status_change(pod: dict) -> dict:
    new = copy.deepcopy(pod)
    new["metadata"]["resourceVersion"] = "2"
    new["status"]["phase"] = "Running"
    return new


def test_a_status_update_of_a_pod_with_a_live_owner_schedules_no_pass():
    collector, passes = _collector()
    collector.informers.informer("replicasets").indexer.add(_replicaset("rs-uid"))
    old = _pod("rs-uid")
    collector._updated(old, _status_change(old))
    assert passes == []


def test_an_update_that_drops_what_needed_a_pass_still_schedules_one():
    # only `old` needs the pass in each case: the shortcut that skips asking about `old` must
    # see every field that makes the difference
    collector, passes = _collector()
    collector.informers.informer("replicasets").indexer.add(_replicaset("orphaning", terminating=True))
    old = _pod("orphaning")
    new = _status_change(old)
    del new["metadata"]["ownerReferences"]           # orphaned: the owner's finalizer may go
    collector._updated(old, new)
    assert passes == [1]

    terminating = _pod(None)
    terminating["metadata"].update(deletionTimestamp=STAMP, finalizers=[ORPHAN])
    released = copy.deepcopy(terminating)
    released["metadata"]["finalizers"] = []          # the dependents were orphaned
    released["metadata"]["resourceVersion"] = "2"
    collector._updated(terminating, released)
    assert passes == [1, 1]


def test_a_status_update_of_a_pod_whose_owner_is_gone_or_going_schedules_a_pass():
    collector, passes = _collector()
    old = _pod("gone-uid")                            # owner not cached: deleted
    collector._updated(old, _status_change(old))
    assert passes == [1]
    collector.informers.informer("replicasets").indexer.add(_replicaset("going", terminating=True))
    old = _pod("going")
    collector._updated(old, _status_change(old))
    assert passes == [1, 1]
