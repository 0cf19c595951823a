"""The ReplicaSet controller's reconcile core (a re-implementation of k8s replica_set.go).

``sync_replicaset(rs, pods, expectation, now) -> ReplicaSetSync`` is pure: given the cached
ReplicaSet, the cached pods of its namespace, the RS's in-flight-writes record and the time, it
returns the actions to take, the new record, and when to look again.

Expectations (k8s ControlleeExpectations / UIDTrackingControllerExpectations): after the
controller asks for N creations or for specific deletions, it must not act again on the same RS
until its informer has seen its own writes, or it would create/delete twice. ``Expectation`` is
an immutable record; ``Expectations`` is a small dict-of-records the shell keeps, with the
methods the shell calls from its informer handlers:

* pod added with a controllerRef to the RS        -> ``creation_observed(rs_key)``
* pod deleted, or its deletionTimestamp got set   -> ``deletion_observed(rs_key, pod_uid)``
* a CreatePod the shell executed failed           -> ``creation_failed(rs_key, message)``
* a DeletePod failed (other than NotFound)        -> ``deletion_failed(rs_key, uid, message)``
* the ReplicaSet is deleted                        -> ``forget(rs_key)``
* after a sync                                     -> ``set(rs_key, result.expectation)``

The RS syncs (creates/deletes) only when its record is satisfied (nothing in flight) or older
than ``EXPECTATIONS_TTL`` (5 minutes); otherwise only its status is refreshed.

Slow start: k8s creates up to ``BURST_REPLICAS`` (500) pods per sync in batches 1, 2, 4, ...
and stops at the first batch with an error. A pure function cannot see a batch's outcome, so
here each sync emits *one* batch; the next sync (once the batch is observed) doubles it, unless
the shell reported a failure in it, in which case it starts again at 1 and the status carries a
``ReplicaFailure`` condition (reason ``FailedCreate``) until a batch succeeds. Scaling 0 -> 10
is batches 1, 2, 4, 3 over four syncs.

Pod create/delete events (SuccessfulCreate / SuccessfulDelete) are recorded by the shell once
the API call succeeded: only it knows the generated name.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterable

from components.controllers import CreatePod, DeletePod, RecordEvent, UpdateStatus
from components.controllers.podutil import (claim_objects, format_time, is_pod_active,
                                            is_terminating, labels_of, meta, object_key,
                                            owner_reference, pod_from_template, pod_phase,
                                            rank_for_deletion, readiness, ready_condition,
                                            ready_since, selector_is_empty)

BURST_REPLICAS = 500
EXPECTATIONS_TTL = 300.0  # k8s ExpectationsTimeout: 5 minutes
KIND = "ReplicaSet"


@dataclass(frozen=True)
class Expectation:
    """What one ReplicaSet has asked for and not yet seen in its informer."""
    adds: int = 0                          # creations not yet observed
    deletes: frozenset = frozenset()       # uids of pods whose deletion is not yet observed
    timestamp: float = 0.0                 # when these were set (for the TTL)
    batch: int = 0                         # size of the last create batch (0: none running)
    failure: str | None = None             # a create/delete error in the last batch
    failure_reason: str = "FailedCreate"

    def satisfied(self, now: float) -> bool:
        return (self.adds <= 0 and not self.deletes) or self.expired(now)

    def expired(self, now: float) -> bool:
        return now - self.timestamp > EXPECTATIONS_TTL

    def creation_observed(self) -> "Expectation":
        return dataclasses.replace(self, adds=self.adds - 1)

    def deletion_observed(self, uid: str) -> "Expectation":
        return dataclasses.replace(self, deletes=self.deletes - {uid})

    def creation_failed(self, message: str) -> "Expectation":
        return dataclasses.replace(self, adds=self.adds - 1, failure=message,
                                   failure_reason="FailedCreate")

    def deletion_failed(self, uid: str, message: str) -> "Expectation":
        return dataclasses.replace(self, deletes=self.deletes - {uid}, failure=message,
                                   failure_reason="FailedDelete")


class Expectations:
    """The shell's per-RS records (keyed "<namespace>/<name>"), with explicit methods."""

    def __init__(self) -> None:
        self.records: dict[str, Expectation] = {}

    def get(self, key: str) -> Expectation | None:
        return self.records.get(key)

    def set(self, key: str, record: Expectation | None) -> None:
        if record is None:
            self.records.pop(key, None)
        else:
            self.records[key] = record

    def forget(self, key: str) -> None:
        self.records.pop(key, None)

    def satisfied(self, key: str, now: float) -> bool:
        record = self.records.get(key)
        return record is None or record.satisfied(now)

    def _update(self, key: str, fn) -> None:
        record = self.records.get(key)
        if record is not None:
            self.records[key] = fn(record)

    def creation_observed(self, key: str) -> None:
        self._update(key, Expectation.creation_observed)

    def deletion_observed(self, key: str, uid: str) -> None:
        self._update(key, lambda r: r.deletion_observed(uid))

    def creation_failed(self, key: str, message: str) -> None:
        self._update(key, lambda r: r.creation_failed(message))

    def deletion_failed(self, key: str, uid: str, message: str) -> None:
        self._update(key, lambda r: r.deletion_failed(uid, message))


@dataclass(frozen=True)
class ReplicaSetSync:
    actions: list
    expectation: Expectation | None   # store it back (None: nothing in flight)
    requeue_after: float | None = None  # seconds; e.g. when a pod reaches minReadySeconds


def pod_update_matters(old: dict, new: dict) -> bool:
    """Whether a pod's update can change what a sync of its ReplicaSet decides or reports: who
    owns it (labels, ownerReferences), whether it counts (phase, deletionTimestamp) and its
    readiness and availability (the Ready condition, with its lastTransitionTime).

    Anything else (the binding's nodeName, container statuses, IPs) only orders the pods a
    scale-down picks, and the sync that scales down ranks them from the cache as they are
    then. k8s' updatePod enqueues on every update; skipping these spares a pass over all the
    ReplicaSet's pods for every pod's binding."""
    old_meta, new_meta = meta(old), meta(new)
    return (old_meta.get("labels") != new_meta.get("labels")
            or old_meta.get("ownerReferences") != new_meta.get("ownerReferences")
            or old_meta.get("deletionTimestamp") != new_meta.get("deletionTimestamp")
            or pod_phase(old) != pod_phase(new)
            or ready_condition(old) != ready_condition(new))


def rs_key(rs: dict) -> str:
    return object_key(rs)


def claim_pods(rs: dict, pods: Iterable[dict]) -> tuple[list[dict], list]:
    """k8s ControllerRefManager.ClaimPods over the *active* pods (upstream filters them
    first): the pods this RS controls (after adopting matching orphans), and the Adopt/Release
    actions."""
    return claim_objects(rs, [p for p in pods if is_pod_active(p)], "Pod",
                         owner_reference(rs, KIND))


def calculate_status(rs: dict, owned: list[dict], now: float) -> dict:
    """k8s calculateStatus (without conditions)."""
    spec = rs.get("spec") or {}
    template_labels = (((spec.get("template") or {}).get("metadata") or {}).get("labels")
                       or {}).items()
    min_ready = int(spec.get("minReadySeconds") or 0)
    # one pass over the pods: a sync runs for every change of any of them
    fully = ready = available = 0
    for pod in owned:
        if template_labels <= labels_of(pod).items():
            fully += 1
        pod_ready, pod_available = readiness(pod, min_ready, now)
        ready += pod_ready
        available += pod_available
    return {"replicas": len(owned), "fullyLabeledReplicas": fully, "readyReplicas": ready,
            "availableReplicas": available,
            "observedGeneration": int(meta(rs).get("generation") or 0)}


def _set_failure(conditions: list[dict], failure: str | None, reason: str, now: float,
                 manage_ran: bool) -> list[dict]:
    current = next((c for c in conditions if c.get("type") == "ReplicaFailure"), None)
    others = [c for c in conditions if c.get("type") != "ReplicaFailure"]
    if failure:
        if current and current.get("status") == "True" and current.get("reason") == reason \
                and current.get("message") == failure:
            return others + [current]
        since = current.get("lastTransitionTime") if current and current.get("status") == "True" \
            else format_time(now)
        return others + [{"type": "ReplicaFailure", "status": "True", "reason": reason,
                          "message": failure, "lastTransitionTime": since}]
    if manage_ran:
        return others
    return conditions


def sync_replicaset(rs: dict, pods: Iterable[dict], expectation: Expectation | None,
                    now: float) -> ReplicaSetSync:
    m = meta(rs)
    spec = rs.get("spec") or {}
    namespace, name = m.get("namespace") or "default", m.get("name")
    if selector_is_empty(spec.get("selector")):
        return ReplicaSetSync([RecordEvent(namespace, KIND, name, "Warning", "SelectingAll",
                                           "This replicaset is selecting all pods. "
                                           "A non-empty selector is required.")], expectation)
    owned, actions = claim_pods(rs, pods)
    needs_sync = expectation is None or expectation.satisfied(now)
    new_expectation = expectation
    manage_ran = False
    if needs_sync and not is_terminating(rs):
        manage_ran = True
        desired = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        diff = len(owned) - desired
        if diff < 0:
            want = min(-diff, BURST_REPLICAS)
            previous = expectation
            if previous is None or previous.batch <= 0 or previous.failure or previous.expired(now):
                size = 1
            else:
                size = previous.batch * 2
            size = min(size, want)
            template = spec.get("template") or {}
            for _ in range(size):
                actions.append(CreatePod(namespace, pod_from_template(
                    template, namespace, rs, KIND, f"{name}-")))
            new_expectation = Expectation(adds=size, timestamp=now, batch=size)
        elif diff > 0:
            doomed = rank_for_deletion(owned)[:min(diff, BURST_REPLICAS)]
            for pod in doomed:
                actions.append(DeletePod(namespace, meta(pod).get("name"), meta(pod).get("uid")))
            new_expectation = Expectation(deletes=frozenset(meta(p).get("uid") for p in doomed),
                                          timestamp=now)
        else:
            new_expectation = None

    status = calculate_status(rs, owned, now)
    old_status = rs.get("status") or {}
    conditions = _set_failure(list(old_status.get("conditions") or []),
                              expectation.failure if expectation else None,
                              expectation.failure_reason if expectation else "FailedCreate",
                              now, manage_ran)
    if conditions:
        status["conditions"] = conditions
    if _status_differs(old_status, status):
        actions.append(UpdateStatus(KIND, namespace, name, status))

    requeue = _requeue_after(rs, owned, status, new_expectation, now)
    return ReplicaSetSync(actions, new_expectation, requeue)


_STATUS_FIELDS = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas",
                  "observedGeneration")


def _status_differs(old: dict, new: dict) -> bool:
    if any(int(old.get(f) or 0) != new.get(f) for f in _STATUS_FIELDS):
        return True
    return (old.get("conditions") or []) != (new.get("conditions") or [])


def _requeue_after(rs: dict, owned: list[dict], status: dict, record: Expectation | None,
                   now: float) -> float | None:
    candidates = []
    min_ready = int((rs.get("spec") or {}).get("minReadySeconds") or 0)
    if min_ready and status["readyReplicas"] != status["availableReplicas"]:
        for pod in owned:
            since = ready_since(pod)
            if since is not None and since + min_ready > now:
                candidates.append(since + min_ready - now)
    if record is not None and not record.satisfied(now):
        candidates.append(record.timestamp + EXPECTATIONS_TTL - now + 1)
    return min(candidates) if candidates else None
