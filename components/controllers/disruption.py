"""The disruption controller's reconcile core (k8s pkg/controller/disruption): a
PodDisruptionBudget's status from the pods it selects.

``sync_pdb(pdb, pods, lookup, now) -> DisruptionSync`` is pure: `pods` are the cached pods of the
PDB's namespace, `lookup(kind, namespace, name)` reads a cached controller (ReplicaSet,
Deployment, StatefulSet, ...), `now` is the time. It returns the actions (the status write, the
events) and when to look again.

* expectedPods: with an integer minAvailable, the number of selected pods; otherwise the sum of
  the scales (spec.replicas) of the selected pods' controllers, each counted once (a ReplicaSet
  a Deployment controls counts as that Deployment). A pod without a controller cannot be
  counted (event UnmanagedPods); a controller that is not found fails the sync (event
  NoControllers, the fail-safe status: no disruption allowed, condition reason SyncFailed).
* desiredHealthy: minAvailable (a percent of expectedPods, rounded up), or expectedPods minus
  maxUnavailable (a percent rounded up), at least 0; no budget at all asks for nothing.
* currentHealthy: selected pods that are Ready, not being deleted, and not in
  status.disruptedPods (an eviction the apiserver admitted and whose delete is on its way).
  A disruptedPods entry lasts DELETION_TIMEOUT (2 minutes): a pod still there after that was
  not deleted after all (event NotDeleted) and counts again; the sync asks to be run again
  when the next entry runs out.
* disruptionsAllowed = currentHealthy - desiredHealthy, at least 0, and 0 while expectedPods is
  0 (the first pods of a new workload must not be evictable before this status counts them).
* condition DisruptionAllowed: True/SufficientPods when disruptions are allowed, else
  False/InsufficientPods; observedGeneration = the PDB's generation.

The status is written as a merge patch (the executor's UpdateStatus) guarded by the PDB's
resourceVersion (evictions write it too): a disruptedPods entry dropped is a null in the patch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from kubemu.api import policy
from kubemu.api.labels import LabelSelectorError, selector_from_label_selector

from components.controllers import RecordEvent, UpdateStatus
from components.controllers.deployment import resolve_int_or_percent
from components.controllers.podutil import (controller_ref, format_time, is_pod_ready, is_terminating,
                                            labels_of, meta, parse_time)

KIND = "PodDisruptionBudget"
DELETION_TIMEOUT = 120.0  # k8s DeletionTimeout: an admitted eviction's delete must show by then

Lookup = Callable[[str, str, str], "dict | None"]


@dataclass(frozen=True)
class DisruptionSync:
    actions: list = field(default_factory=list)
    requeue_after: float | None = None


class _NoController(Exception):
    pass


def selected_pods(pdb: dict, pods: list[dict]) -> list[dict]:
    """The pods of the PDB's namespace its selector matches (policy/v1: an empty selector
    matches every pod, an absent one none; an invalid one none)."""
    spec = pdb.get("spec") or {}
    try:
        selector = selector_from_label_selector(spec.get("selector"))
    except (LabelSelectorError, ValueError, TypeError, AttributeError):
        return []
    namespace = meta(pdb).get("namespace") or "default"
    return [p for p in pods if (meta(p).get("namespace") or "default") == namespace
            and selector.matches(labels_of(p))]


def _replicas(obj: dict) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def _owned(lookup: Lookup, ref: dict, namespace: str) -> dict | None:
    """The cached object `ref` points to, if it is that one (same uid)."""
    obj = lookup(str(ref.get("kind")), namespace, str(ref.get("name")))
    return obj if obj is not None and meta(obj).get("uid") == ref.get("uid") else None


def _controller_scale(ref: dict, namespace: str, lookup: Lookup) -> tuple[str, int] | None:
    """(uid, scale) of the controller behind a pod's controllerRef: a ReplicaSet's Deployment
    when it has one, else the controller itself (anything with spec.replicas: ReplicaSet,
    StatefulSet, ReplicationController)."""
    owner = _owned(lookup, ref, namespace)
    if owner is None:
        return None
    if ref.get("kind") == "ReplicaSet":
        parent = controller_ref(owner)
        if parent is not None and parent.get("kind") == "Deployment":
            deployment = _owned(lookup, parent, namespace)
            if deployment is not None:
                return meta(deployment).get("uid"), _replicas(deployment)
    if not isinstance((owner.get("spec") or {}).get("replicas"), int):
        return None  # not a scalable controller (a Job, a DaemonSet)
    return meta(owner).get("uid"), _replicas(owner)


def _expected_scale(pods: list[dict], lookup: Lookup) -> tuple[int, list[str]]:
    """getExpectedScale: the sum of the controllers' scales, and the unmanaged pods' names."""
    scales: dict[str, int] = {}
    unmanaged = []
    for pod in pods:
        ref = controller_ref(pod)
        if ref is None:
            unmanaged.append(meta(pod).get("name"))
            continue
        if ref.get("uid") in scales:
            continue
        found = _controller_scale(ref, meta(pod).get("namespace") or "default", lookup)
        if found is None:
            raise _NoController(f'found no controllers for pod "{meta(pod).get("name")}"')
        scales[found[0]] = found[1]
        scales.setdefault(ref.get("uid"), 0)  # the pod's own controller is known now too
    return sum(scales.values()), unmanaged


def expected_and_desired(pdb: dict, pods: list[dict], lookup: Lookup) -> tuple[int, int, list[str]]:
    """getExpectedPodCount: (expectedPods, desiredHealthy, unmanaged pod names)."""
    spec = pdb.get("spec") or {}
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if max_unavailable is not None:
        expected, unmanaged = _expected_scale(pods, lookup)
        return expected, max(0, expected - resolve_int_or_percent(max_unavailable, expected, True)), unmanaged
    if isinstance(min_available, int):
        return len(pods), min_available, []
    if isinstance(min_available, str):
        expected, unmanaged = _expected_scale(pods, lookup)
        return expected, resolve_int_or_percent(min_available, expected, True), unmanaged
    return 0, 0, []


def _disrupted(pdb: dict, pods: list[dict], now: float) -> tuple[dict, float | None, list[str]]:
    """buildDisruptedPodMap: the entries still pending, when the first runs out, and the pods
    whose entry ran out while they are still there (NotDeleted)."""
    recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
    kept: dict = {}
    recheck = None
    overdue = []
    for pod in pods:
        name = meta(pod).get("name")
        if is_terminating(pod) or name not in recorded:
            continue
        since = parse_time(recorded[name])
        expires = (since if since is not None else now) + DELETION_TIMEOUT
        if expires < now:
            overdue.append(name)
            continue
        kept[name] = recorded[name]
        recheck = expires if recheck is None else min(recheck, expires)
    return kept, recheck, overdue


def _healthy(pods: list[dict], disrupted: dict) -> int:
    return sum(1 for p in pods if not is_terminating(p) and meta(p).get("name") not in disrupted
               and is_pod_ready(p))


def _event(pdb: dict, kind: str, name: str, etype: str, reason: str, message: str) -> RecordEvent:
    return RecordEvent(meta(pdb).get("namespace") or "default", kind, name, etype, reason, message)


def _status_write(pdb: dict, status: dict) -> UpdateStatus:
    old = (pdb.get("status") or {}).get("disruptedPods") or {}
    new = status.get("disruptedPods") or {}
    out = {k: v for k, v in status.items() if k != "disruptedPods"}
    if new:
        out["disruptedPods"] = {**{k: None for k in old if k not in new}, **new}
    m = meta(pdb)
    return UpdateStatus(KIND, m.get("namespace") or "default", m.get("name"), out)


def _fail_safe(pdb: dict, message: str, now: float) -> UpdateStatus:
    """failSafe: no disruption allowed until a sync succeeds."""
    status = {k: v for k, v in (pdb.get("status") or {}).items()}
    status["disruptionsAllowed"] = 0
    policy.set_disruption_allowed(status, format_time(now), reason=policy.SYNC_FAILED, message=message)
    return _status_write(pdb, status)


def _up_to_date(old: dict, new: dict) -> bool:
    """updatePdbStatus's no-op test, ConditionsAreUpToDate included."""
    fields = policy.STATUS_COUNTS + ("observedGeneration",)
    if any((old.get(f) or 0) != new[f] for f in fields):
        return False
    if (old.get("disruptedPods") or {}) != new["disruptedPods"]:
        return False
    cond = next((c for c in old.get("conditions") or [] if c.get("type") == policy.DISRUPTION_ALLOWED), None)
    want = "True" if new["disruptionsAllowed"] > 0 else "False"
    return cond is not None and cond.get("observedGeneration") == new["observedGeneration"] \
        and cond.get("status") == want and cond.get("reason") != policy.SYNC_FAILED


def sync_pdb(pdb: dict, pods: list[dict], lookup: Lookup, now: float) -> DisruptionSync:
    name = meta(pdb).get("name")
    actions: list = []
    selected = selected_pods(pdb, pods)
    if not selected:
        actions.append(_event(pdb, KIND, name, "Normal", "NoPods", "No matching pods found"))
    try:
        expected, desired, unmanaged = expected_and_desired(pdb, selected, lookup)
    except _NoController as err:
        actions.append(_event(pdb, KIND, name, "Warning", "NoControllers", str(err)))
        actions.append(_fail_safe(pdb, str(err), now))
        return DisruptionSync(actions)
    if unmanaged:
        actions.append(_event(pdb, KIND, name, "Warning", "UnmanagedPods", (
            "Pods selected by this PodDisruptionBudget (selector: {}) were found to be unmanaged. As a "
            "result, the status of the PDB cannot be calculated correctly, which may result in undefined "
            "behavior. To account for these pods please set \".spec.minAvailable\" field of the PDB to an "
            "integer value.").format((pdb.get("spec") or {}).get("selector"))))
    disrupted, recheck, overdue = _disrupted(pdb, selected, now)
    for pod_name in overdue:
        actions.append(_event(pdb, "Pod", pod_name, "Warning", "NotDeleted",
                              f"Pod was expected by PDB {meta(pdb).get('namespace') or 'default'}/{name} "
                              "to be deleted but it wasn't"))
    healthy = _healthy(selected, disrupted)
    allowed = healthy - desired if expected > 0 and healthy > desired else 0
    old = pdb.get("status") or {}
    status = {"currentHealthy": healthy, "desiredHealthy": desired, "expectedPods": expected,
              "disruptionsAllowed": allowed, "disruptedPods": disrupted,
              "observedGeneration": meta(pdb).get("generation") or 0}
    if not _up_to_date(old, status):
        status["conditions"] = list(old.get("conditions") or [])
        policy.set_disruption_allowed(status, format_time(now))
        actions.append(_status_write(pdb, status))
    return DisruptionSync(actions, None if recheck is None else max(0.0, recheck - now))
