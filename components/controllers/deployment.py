"""The Deployment controller's reconcile core (a re-implementation of k8s pkg/controller/deployment).

``sync_deployment(deployment, replicasets, pods, now) -> DeploymentSync`` is pure: the cached
Deployment, the cached ReplicaSets and pods of its namespace, and the time in; actions out.

One sync emits what k8s' syncDeployment would write in one pass, applying each write to its
working copy so later steps see it (e.g. the new RS it just created counts towards maxSurge):

* claim ReplicaSets (controllerRef; adopt matching orphans, release non-matching ones);
* find the new RS (oldest RS whose template equals the Deployment's, ignoring the
  pod-template-hash label), or create ``<name>-<hash>`` (see ``podutil.compute_hash``; on a
  name collision with a different template, ``status.collisionCount`` is bumped instead);
* ``deployment.kubernetes.io/revision``: the new RS gets max(old revisions) + 1 if its own is
  lower, and the Deployment's annotation follows it;
* RollingUpdate: ``reconcileNewReplicaSet`` (scale the new RS up, to at most
  replicas + maxSurge pods in total) and, if that did nothing, ``reconcileOldReplicaSets``
  (clean up unhealthy old replicas first, then scale old RSes down, oldest first, keeping
  replicas - maxUnavailable available). maxSurge rounds up, maxUnavailable rounds down, both
  default 25%; if both resolve to 0, maxUnavailable becomes 1 (k8s ResolveFenceposts), and
  both *specified* as 0 is invalid (``validate_strategy``);
* Recreate: scale every old RS to 0, wait until no old pod is running, then create/scale the
  new RS to ``replicas``;
* when the rollout is complete, delete the oldest old RSes (0 replicas) beyond
  ``revisionHistoryLimit`` (default 10);
* status: replicas, updatedReplicas, readyReplicas, availableReplicas, unavailableReplicas,
  observedGeneration, collisionCount, conditions Available and Progressing (and
  ReplicaFailure mirrored from the RSes).

Not implemented: proportional scaling of several RSes when ``spec.replicas`` changes
mid-rollout (the rolling math still converges), and the deprecated ``spec.rollbackTo``; rollback
is ``undo()`` (kubectl's client-side behaviour: it returns the template to apply).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Iterable

from components.controllers import (CreateReplicaSet, DeleteReplicaSet, RecordEvent,
                                    UpdateDeployment, UpdateReplicaSet, UpdateStatus)
from components.controllers.podutil import (POD_TEMPLATE_HASH, claim_objects, compute_hash,
                                            controller_ref, equal_ignore_hash, format_time,
                                            is_terminating, meta, owner_reference, parse_time,
                                            selector_is_empty, strip_hash_label)
from kubemu.api.patch import json_copy

KIND = "Deployment"
REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
DEFAULT_REVISION_HISTORY_LIMIT = 10
DEFAULT_PROGRESS_DEADLINE = 600
NO_PROGRESS_DEADLINE = 2**31 - 1  # math.MaxInt32: "no deadline"


@dataclass(frozen=True)
class DeploymentSync:
    actions: list
    requeue_after: float | None = None


class RollbackError(ValueError):
    pass


# --- spec helpers -----------------------------------------------------------------------------


def replicas_of(obj: dict) -> int:
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def status_int(obj: dict, field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def revision(rs: dict) -> int:
    try:
        return int((meta(rs).get("annotations") or {}).get(REVISION) or 0)
    except (TypeError, ValueError):
        return 0


def _strategy(d: dict) -> dict:
    return (d.get("spec") or {}).get("strategy") or {}


def is_recreate(d: dict) -> bool:
    return _strategy(d).get("type") == "Recreate"


def _rolling(d: dict) -> dict:
    return _strategy(d).get("rollingUpdate") or {}


def resolve_int_or_percent(value, total: int, round_up: bool) -> int:
    """k8s intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1])
        exact = pct * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value)


def _surge_spec(d: dict):
    value = _rolling(d).get("maxSurge")
    return "25%" if value is None else value


def _unavailable_spec(d: dict):
    value = _rolling(d).get("maxUnavailable")
    return "25%" if value is None else value


def validate_strategy(d: dict) -> list[str]:
    """The apiserver's checks on the strategy, for the cases the controller relies on."""
    if is_recreate(d):
        return []
    errors = []
    surge, unavail = _surge_spec(d), _unavailable_spec(d)
    for name, value in (("maxSurge", surge), ("maxUnavailable", unavail)):
        try:
            if resolve_int_or_percent(value, 100, True) < 0:
                errors.append(f"spec.strategy.rollingUpdate.{name}: must be non-negative")
        except (TypeError, ValueError):
            errors.append(f"spec.strategy.rollingUpdate.{name}: invalid value {value!r}")
    if not errors and resolve_int_or_percent(surge, 100, True) == 0 \
            and resolve_int_or_percent(unavail, 100, False) == 0:
        errors.append("spec.strategy.rollingUpdate.maxUnavailable: may not be 0 when "
                      "maxSurge is 0")
    if isinstance(unavail, str) and unavail.endswith("%") and int(unavail[:-1]) > 100:
        errors.append("spec.strategy.rollingUpdate.maxUnavailable: must not be greater than 100%")
    return errors


def resolve_fenceposts(d: dict) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) in pods: surge rounds up, unavailable down; never both 0."""
    replicas = replicas_of(d)
    surge = resolve_int_or_percent(_surge_spec(d), replicas, True)
    unavailable = resolve_int_or_percent(_unavailable_spec(d), replicas, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_unavailable(d: dict) -> int:
    replicas = replicas_of(d)
    if is_recreate(d) or replicas == 0:
        return 0
    return min(resolve_fenceposts(d)[1], replicas)


def max_surge(d: dict) -> int:
    return 0 if is_recreate(d) else resolve_fenceposts(d)[0]


def new_rs_new_replicas(d: dict, all_rss: list[dict], new_rs: dict | None) -> int:
    """k8s NewRSNewReplicas: the size the new RS should have now."""
    new_size = replicas_of(new_rs) if new_rs else 0
    if is_recreate(d):
        return replicas_of(d)
    total = sum(replicas_of(rs) for rs in all_rss)
    max_total = replicas_of(d) + max_surge(d)
    if total >= max_total:
        return new_size
    return new_size + min(max_total - total, replicas_of(d) - new_size)


def _progress_deadline(d: dict) -> int | None:
    value = (d.get("spec") or {}).get("progressDeadlineSeconds")
    value = DEFAULT_PROGRESS_DEADLINE if value is None else int(value)
    return None if value == NO_PROGRESS_DEADLINE else value


def _history_limit(d: dict) -> int:
    value = (d.get("spec") or {}).get("revisionHistoryLimit")
    return DEFAULT_REVISION_HISTORY_LIMIT if value is None else int(value)


def _created(rs: dict):
    t = parse_time(meta(rs).get("creationTimestamp"))
    return (t if t is not None else float("inf"), meta(rs).get("name") or "")


# --- conditions -------------------------------------------------------------------------------


def get_condition(status: dict, ctype: str) -> dict | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == ctype), None)


def _condition(ctype, cstatus, reason, message, now) -> dict:
    t = format_time(now)
    return {"type": ctype, "status": cstatus, "lastUpdateTime": t, "lastTransitionTime": t,
            "reason": reason, "message": message}


def set_condition(status: dict, cond: dict) -> None:
    """k8s SetDeploymentCondition: no-op for the same status+reason; keep lastTransitionTime
    while the status doesn't change."""
    current = get_condition(status, cond["type"])
    if current and current.get("status") == cond["status"] and current.get("reason") == cond["reason"]:
        return
    if current and current.get("status") == cond["status"]:
        cond = {**cond, "lastTransitionTime": current.get("lastTransitionTime")}
    remove_condition(status, cond["type"])
    status.setdefault("conditions", []).append(cond)


def remove_condition(status: dict, ctype: str) -> None:
    conds = [c for c in status.get("conditions") or [] if c.get("type") != ctype]
    if conds:
        status["conditions"] = conds
    else:
        status.pop("conditions", None)


# --- the sync ---------------------------------------------------------------------------------


def _working_copy(rs: dict) -> dict:
    """A cached ReplicaSet as a sync may change it: its own metadata, annotations and spec
    (spec.replicas, spec.minReadySeconds and the annotations are all `_Sync` ever sets); its
    template, selector and status stay shared with the cache, read-only. A deep copy of each
    ReplicaSet on every sync of its Deployment was about a third of the sync."""
    m = rs.get("metadata") or {}
    return {**rs, "metadata": {**m, "annotations": dict(m.get("annotations") or {})},
            "spec": dict(rs.get("spec") or {})}


class _Sync:
    """One pass over one Deployment: a working copy of its RSes plus the actions so far."""

    def __init__(self, d: dict, replicasets: Iterable[dict], pods: Iterable[dict], now: float):
        self.d, self.now = d, now
        m = meta(d)
        self.ns, self.name, self.uid = m.get("namespace") or "default", m.get("name"), m.get("uid")
        self.actions: list = []
        # The status k8s' getNewReplicaSet would have written back (conditions, collisionCount).
        self.dstatus: dict = json_copy(d.get("status") or {})
        self.all_in_ns = [rs for rs in replicasets
                          if (meta(rs).get("namespace") or "default") == self.ns]
        self.rss = self._claim()
        self._pods_given = pods

    @functools.cached_property
    def pods(self) -> list[dict]:
        # Read only by a Recreate rollout (are the old pods gone?): a rolling one never walks
        # them, so the shell may hand a lazy iterable, consumed here at most once.
        return [p for p in self._pods_given if (meta(p).get("namespace") or "default") == self.ns]

    def _claim(self) -> list[dict]:
        owned, actions = claim_objects(self.d, self.all_in_ns, "ReplicaSet",
                                       owner_reference(self.d, KIND))
        self.actions += actions
        return sorted((_working_copy(rs) for rs in owned), key=_created)

    # -- events and writes --

    def event(self, reason: str, message: str, type_: str = "Normal") -> None:
        self.actions.append(RecordEvent(self.ns, KIND, self.name, type_, reason, message))

    def scale(self, rs: dict, size: int) -> bool:
        """k8s scaleReplicaSetAndRecordEvent: True if the size changed."""
        old = replicas_of(rs)
        annotations = meta(rs).get("annotations") or {}
        want = {DESIRED_REPLICAS: str(replicas_of(self.d)),
                MAX_REPLICAS: str(replicas_of(self.d) + max_surge(self.d))}
        ann_changes = {k: v for k, v in want.items() if annotations.get(k) != v}
        if old == size and not ann_changes:
            return False
        changes: dict = {}
        if old != size:
            changes["spec"] = {"replicas": size}
            rs.setdefault("spec", {})["replicas"] = size
        if ann_changes:
            changes["metadata"] = {"annotations": ann_changes}
            rs.setdefault("metadata", {}).setdefault("annotations", {}).update(ann_changes)
        self.actions.append(UpdateReplicaSet(self.ns, meta(rs)["name"], changes))
        if old != size:
            direction = "up" if size > old else "down"
            self.event("ScalingReplicaSet",
                       f"Scaled {direction} replica set {meta(rs)['name']} to {size} from {old}")
        return old != size

    # -- new / old replica sets --

    def split(self) -> tuple[dict | None, list[dict]]:
        template = (self.d.get("spec") or {}).get("template") or {}
        new = next((rs for rs in self.rss
                    if equal_ignore_hash((rs.get("spec") or {}).get("template") or {}, template)),
                   None)
        return new, [rs for rs in self.rss if rs is not new]

    def new_and_old(self, create: bool) -> tuple[dict | None, list[dict], bool]:
        """k8s getAllReplicaSetsAndSyncRevision. The bool is False when the sync must stop
        (a hash collision was recorded)."""
        new, old = self.split()
        new_revision = max([revision(rs) for rs in old], default=0) + 1
        spec = self.d.get("spec") or {}
        if new is not None:
            changes: dict = {}
            if revision(new) < new_revision:
                changes["metadata"] = {"annotations": {REVISION: str(new_revision)}}
                new.setdefault("metadata", {}).setdefault("annotations", {})[REVISION] = \
                    str(new_revision)
            if int((new.get("spec") or {}).get("minReadySeconds") or 0) != \
                    int(spec.get("minReadySeconds") or 0):
                changes["spec"] = {"minReadySeconds": int(spec.get("minReadySeconds") or 0)}
                new["spec"]["minReadySeconds"] = int(spec.get("minReadySeconds") or 0)
            if changes:
                self.actions.append(UpdateReplicaSet(self.ns, meta(new)["name"], changes))
            if _progress_deadline(self.d) is not None and \
                    get_condition(self.dstatus, "Progressing") is None:
                set_condition(self.dstatus, _condition(
                    "Progressing", "True", "FoundNewReplicaSet",
                    f"Found new replica set \"{meta(new)['name']}\"", self.now))
        elif create:
            new = self._create_new(old, new_revision)
            if new is None:
                return None, old, False
        if new is not None:
            self._sync_deployment_revision(revision(new))
        return new, old, True

    def _create_new(self, old: list[dict], new_revision: int) -> dict | None:
        spec = self.d.get("spec") or {}
        collisions = self.dstatus.get("collisionCount")
        template = json_copy(spec.get("template") or {})
        pth = compute_hash(template, collisions)
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), POD_TEMPLATE_HASH: pth}
        selector = json_copy(spec.get("selector") or {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: pth}
        name = f"{self.name}-{pth}"
        clash = next((rs for rs in self.all_in_ns if meta(rs).get("name") == name), None)
        if clash is not None:
            ref = controller_ref(clash)
            if ref and ref.get("uid") == self.uid and equal_ignore_hash(
                    (clash.get("spec") or {}).get("template") or {}, template):
                return json_copy(clash)  # ours after all (cache lag)
            self.dstatus["collisionCount"] = int(collisions or 0) + 1
            self.actions.append(UpdateStatus(KIND, self.ns, self.name, self.dstatus))
            return None
        probe = {"spec": {"replicas": 0}}
        size = new_rs_new_replicas(self.d, old + [probe], probe)
        new = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
               "metadata": {"name": name, "namespace": self.ns,
                            "labels": dict(tmeta["labels"]),
                            "annotations": {REVISION: str(new_revision),
                                            DESIRED_REPLICAS: str(replicas_of(self.d)),
                                            MAX_REPLICAS: str(replicas_of(self.d)
                                                              + max_surge(self.d))},
                            "ownerReferences": [owner_reference(self.d, KIND)]},
               "spec": {"replicas": size, "minReadySeconds": int(spec.get("minReadySeconds") or 0),
                        "selector": selector, "template": template}}
        self.actions.append(CreateReplicaSet(self.ns, json_copy(new)))
        if size > 0:
            self.event("ScalingReplicaSet", f"Scaled up replica set {name} to {size} from 0")
        if _progress_deadline(self.d) is not None:
            set_condition(self.dstatus, _condition(
                "Progressing", "True", "NewReplicaSetCreated",
                f"Created new replica set \"{name}\"", self.now))
        self.rss.append(new)
        return new

    def _sync_deployment_revision(self, rev: int) -> None:
        annotations = meta(self.d).get("annotations") or {}
        if annotations.get(REVISION) != str(rev):
            self.actions.append(UpdateDeployment(self.ns, self.name,
                                                 {"metadata": {"annotations": {REVISION: str(rev)}}}))

    # -- rolling update --

    def reconcile_new(self, all_rss: list[dict], new: dict) -> bool:
        if replicas_of(new) == replicas_of(self.d):
            return False
        if replicas_of(new) > replicas_of(self.d):
            return self.scale(new, replicas_of(self.d))
        return self.scale(new, new_rs_new_replicas(self.d, all_rss, new))

    def reconcile_old(self, all_rss: list[dict], old: list[dict], new: dict | None) -> bool:
        active_old = [rs for rs in old if replicas_of(rs) > 0]
        if sum(replicas_of(rs) for rs in active_old) == 0:
            return False
        all_pods = sum(replicas_of(rs) for rs in all_rss)
        min_available = replicas_of(self.d) - max_unavailable(self.d)
        new_unavailable = (replicas_of(new) - status_int(new, "availableReplicas")) if new else 0
        max_scaled_down = all_pods - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        cleaned = self._cleanup_unhealthy(active_old, max_scaled_down)
        scaled = self._scale_down_old(all_rss, active_old)
        return cleaned + scaled > 0

    def _cleanup_unhealthy(self, old: list[dict], max_cleanup: int) -> int:
        total = 0
        for rs in sorted(old, key=_created):
            if total >= max_cleanup:
                break
            size, available = replicas_of(rs), status_int(rs, "availableReplicas")
            if size == 0 or size == available:
                continue
            count = min(max_cleanup - total, size - available)
            self.scale(rs, size - count)
            total += count
        return total

    def _scale_down_old(self, all_rss: list[dict], old: list[dict]) -> int:
        min_available = replicas_of(self.d) - max_unavailable(self.d)
        available = sum(status_int(rs, "availableReplicas") for rs in all_rss)
        if available <= min_available:
            return 0
        budget = available - min_available
        total = 0
        for rs in sorted(old, key=_created):
            if total >= budget:
                break
            if replicas_of(rs) == 0:
                continue
            count = min(replicas_of(rs), budget - total)
            self.scale(rs, replicas_of(rs) - count)
            total += count
        return total

    # -- recreate --

    def old_pods_running(self, new: dict | None, old: list[dict]) -> bool:
        if sum(status_int(rs, "replicas") for rs in old) > 0:
            return True
        old_uids = {meta(rs).get("uid") for rs in old}
        new_uid = meta(new).get("uid") if new else None
        for pod in self.pods:
            ref = controller_ref(pod)
            if not ref or ref.get("uid") not in old_uids or ref.get("uid") == new_uid:
                continue
            phase = (pod.get("status") or {}).get("phase")
            if phase in ("Failed", "Succeeded"):
                continue
            return True
        return False

    # -- cleanup and status --

    def cleanup(self, old: list[dict]) -> None:
        alive = [rs for rs in old if not is_terminating(rs)]
        diff = len(alive) - _history_limit(self.d)
        if diff <= 0:
            return
        for rs in sorted(alive, key=lambda r: (revision(r), _created(r)))[:diff]:
            if status_int(rs, "replicas") != 0 or replicas_of(rs) != 0 or \
                    int(meta(rs).get("generation") or 0) > status_int(rs, "observedGeneration"):
                continue
            self.actions.append(DeleteReplicaSet(self.ns, meta(rs)["name"], meta(rs).get("uid")))

    def calculate_status(self, all_rss: list[dict], new: dict | None) -> dict:
        available = sum(status_int(rs, "availableReplicas") for rs in all_rss)
        total = sum(replicas_of(rs) for rs in all_rss)
        status = {"observedGeneration": int(meta(self.d).get("generation") or 0),
                  "replicas": sum(status_int(rs, "replicas") for rs in all_rss),
                  "updatedReplicas": status_int(new, "replicas") if new else 0,
                  "readyReplicas": sum(status_int(rs, "readyReplicas") for rs in all_rss),
                  "availableReplicas": available,
                  "unavailableReplicas": max(total - available, 0)}
        if self.dstatus.get("collisionCount") is not None:
            status["collisionCount"] = self.dstatus["collisionCount"]
        if self.dstatus.get("conditions"):
            status["conditions"] = json_copy(self.dstatus["conditions"])
        if available >= replicas_of(self.d) - max_unavailable(self.d):
            set_condition(status, _condition("Available", "True", "MinimumReplicasAvailable",
                                             "Deployment has minimum availability.", self.now))
        else:
            set_condition(status, _condition("Available", "False", "MinimumReplicasUnavailable",
                                             "Deployment does not have minimum availability.",
                                             self.now))
        return status

    def complete(self, status: dict) -> bool:
        """k8s DeploymentComplete."""
        r = replicas_of(self.d)
        return (status.get("updatedReplicas") == r and status.get("replicas") == r
                and status.get("availableReplicas") == r
                and status.get("observedGeneration", 0) >= int(meta(self.d).get("generation") or 0))

    def progressing(self, status: dict) -> bool:
        """k8s DeploymentProgressing: compared with the status last written."""
        old = self.d.get("status") or {}
        old_old = int(old.get("replicas") or 0) - int(old.get("updatedReplicas") or 0)
        new_old = status["replicas"] - status["updatedReplicas"]
        return (status["updatedReplicas"] > int(old.get("updatedReplicas") or 0)
                or new_old < old_old
                or status["readyReplicas"] > int(old.get("readyReplicas") or 0)
                or status["availableReplicas"] > int(old.get("availableReplicas") or 0))

    def timed_out(self, status: dict) -> bool:
        cond = get_condition(status, "Progressing")
        deadline = _progress_deadline(self.d)
        if cond is None or deadline is None or cond.get("reason") == "NewReplicaSetAvailable":
            return False
        if cond.get("reason") == "ProgressDeadlineExceeded":
            return True
        since = parse_time(cond.get("lastUpdateTime"))
        return since is not None and since + deadline < self.now

    def write_status(self, status: dict) -> None:
        if status != (self.d.get("status") or {}):
            self.actions.append(UpdateStatus(KIND, self.ns, self.name, status))

    def sync_status(self, all_rss: list[dict], new: dict | None) -> None:
        """k8s syncDeploymentStatus: counts and Available, no Progressing bookkeeping."""
        self.write_status(self.calculate_status(all_rss, new))

    def sync_rollout_status(self, all_rss: list[dict], new: dict | None) -> float | None:
        """k8s syncRolloutStatus; returns when to look again for a stuck rollout."""
        status = self.calculate_status(all_rss, new)
        deadline = _progress_deadline(self.d)
        if deadline is None:
            remove_condition(status, "Progressing")
        current = get_condition(self.dstatus, "Progressing")
        done = status["replicas"] == status["updatedReplicas"] and current is not None and \
            current.get("reason") == "NewReplicaSetAvailable"
        new_name = meta(new).get("name") if new else ""
        if deadline is not None and not done:
            if self.complete(status):
                set_condition(status, _condition("Progressing", "True", "NewReplicaSetAvailable",
                                                 f"ReplicaSet \"{new_name}\" has successfully "
                                                 "progressed.", self.now))
            elif self.progressing(status):
                cond = _condition("Progressing", "True", "ReplicaSetUpdated",
                                  f"ReplicaSet \"{new_name}\" is progressing.", self.now)
                if current is not None and current.get("status") == "True":
                    cond["lastTransitionTime"] = current.get("lastTransitionTime")
                remove_condition(status, "Progressing")
                set_condition(status, cond)
            elif self.timed_out(status):
                set_condition(status, _condition("Progressing", "False",
                                                 "ProgressDeadlineExceeded",
                                                 f"ReplicaSet \"{new_name}\" has timed out "
                                                 "progressing.", self.now))
        failure = None
        for rs in ([new] if new else []) + [rs for rs in all_rss if rs is not new]:
            cond = get_condition(rs.get("status") or {}, "ReplicaFailure")
            if cond and cond.get("status") == "True":
                failure = cond
                break
        if failure:
            set_condition(status, _condition("ReplicaFailure", "True", failure.get("reason", ""),
                                             failure.get("message", ""), self.now))
        else:
            remove_condition(status, "ReplicaFailure")
        self.write_status(status)
        # requeueStuckDeployment
        cond = get_condition(status, "Progressing")
        if deadline is None or cond is None or self.complete(status) or \
                cond.get("reason") == "ProgressDeadlineExceeded":
            return None
        since = parse_time(cond.get("lastUpdateTime"))
        if since is None:
            return None
        return max(since + deadline - self.now, 0.0) + 1.0


def sync_deployment(deployment: dict, replicasets: Iterable[dict], pods: Iterable[dict],
                    now: float) -> DeploymentSync:
    d = deployment
    spec = d.get("spec") or {}
    s = _Sync(d, replicasets, pods, now)
    if selector_is_empty(spec.get("selector")):
        s.event("SelectingAll", "This deployment is selecting all pods. A non-empty selector is "
                "required.", "Warning")
        return DeploymentSync(s.actions)
    errors = validate_strategy(d)
    if errors:
        s.event("InvalidDeployment", "; ".join(errors), "Warning")
    if is_terminating(d) or errors:
        new, old, _ = s.new_and_old(create=False)
        s.sync_status(s.rss, new)
        return DeploymentSync(s.actions)

    if spec.get("paused"):
        cond = get_condition(s.dstatus, "Progressing")
        if _progress_deadline(d) is not None and (cond is None or cond.get("reason") != "DeploymentPaused"):
            set_condition(s.dstatus, _condition("Progressing", "Unknown", "DeploymentPaused",
                                                "Deployment is paused", now))
        new, old, ok = s.new_and_old(create=False)
        if ok:
            s.cleanup(old)
            s.sync_status(s.rss, new)
        return DeploymentSync(s.actions)
    cond = get_condition(s.dstatus, "Progressing")
    if cond is not None and cond.get("reason") == "DeploymentPaused":
        set_condition(s.dstatus, _condition("Progressing", "Unknown", "DeploymentResumed",
                                            "Deployment is resumed", now))

    if is_recreate(d):
        return _rollout_recreate(s)
    return _rollout_rolling(s)


def _rollout_rolling(s: _Sync) -> DeploymentSync:
    new, old, ok = s.new_and_old(create=True)
    if not ok:
        return DeploymentSync(s.actions, requeue_after=0.0)
    all_rss = s.rss
    if s.reconcile_new(all_rss, new):
        return DeploymentSync(s.actions, s.sync_rollout_status(all_rss, new))
    if s.reconcile_old(all_rss, old, new):
        return DeploymentSync(s.actions, s.sync_rollout_status(all_rss, new))
    if s.complete(s.calculate_status(all_rss, new)):
        s.cleanup(old)
    return DeploymentSync(s.actions, s.sync_rollout_status(all_rss, new))


def _rollout_recreate(s: _Sync) -> DeploymentSync:
    new, old, ok = s.new_and_old(create=False)
    scaled = False
    for rs in old:
        if replicas_of(rs) > 0:
            scaled = s.scale(rs, 0) or scaled
    if scaled or s.old_pods_running(new, old):
        return DeploymentSync(s.actions, s.sync_rollout_status(s.rss, new))
    if new is None:
        new, old, ok = s.new_and_old(create=True)
        if not ok:
            return DeploymentSync(s.actions, requeue_after=0.0)
    s.scale(new, replicas_of(s.d))
    if s.complete(s.calculate_status(s.rss, new)):
        s.cleanup(old)
    return DeploymentSync(s.actions, s.sync_rollout_status(s.rss, new))


# --- kubectl-side helpers ---------------------------------------------------------------------


def undo(deployment: dict, replicasets: Iterable[dict], to_revision: int = 0) -> dict:
    """``kubectl rollout undo``: the pod template to put into the Deployment (without the
    pod-template-hash label) - the previous revision by default, or ``to_revision``."""
    name, uid = meta(deployment).get("name"), meta(deployment).get("uid")
    if (deployment.get("spec") or {}).get("paused"):
        raise RollbackError(f"you cannot rollback a paused deployment; resume it first with "
                            f"'kubectl rollout resume deployment/{name}' and try again")
    owned = [rs for rs in replicasets if (controller_ref(rs) or {}).get("uid") == uid]
    if to_revision:
        chosen = next((rs for rs in owned if revision(rs) == to_revision), None)
        if chosen is None:
            raise RollbackError(f"unable to find specified revision {to_revision} in history")
    else:
        ranked = sorted(owned, key=revision, reverse=True)
        if len(ranked) < 2 or revision(ranked[1]) <= 0:
            raise RollbackError(f"no rollout history found for deployment \"{name}\"")
        chosen = ranked[1]
    return strip_hash_label((chosen.get("spec") or {}).get("template") or {})


@dataclass(frozen=True)
class RolloutStatus:
    message: str
    done: bool
    failed: bool = False


def rollout_status(deployment: dict) -> RolloutStatus:
    """What ``kubectl rollout status deployment/<name>`` prints for this object (one line,
    without the trailing newline), whether it is done, and whether it failed."""
    name = meta(deployment).get("name")
    status = deployment.get("status") or {}
    if int(meta(deployment).get("generation") or 0) > int(status.get("observedGeneration") or 0):
        return RolloutStatus("Waiting for deployment spec update to be observed...", False)
    cond = get_condition(status, "Progressing")
    if cond is not None and cond.get("reason") == "ProgressDeadlineExceeded":
        return RolloutStatus(f"error: deployment \"{name}\" exceeded its progress deadline",
                             False, True)
    replicas = replicas_of(deployment)
    updated = int(status.get("updatedReplicas") or 0)
    current = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if updated < replicas:
        return RolloutStatus(f"Waiting for deployment \"{name}\" rollout to finish: {updated} out "
                             f"of {replicas} new replicas have been updated...", False)
    if current > updated:
        return RolloutStatus(f"Waiting for deployment \"{name}\" rollout to finish: "
                             f"{current - updated} old replicas are pending termination...", False)
    if available < updated:
        return RolloutStatus(f"Waiting for deployment \"{name}\" rollout to finish: {available} "
                             f"of {updated} updated replicas are available...", False)
    return RolloutStatus(f"deployment \"{name}\" successfully rolled out", True)
