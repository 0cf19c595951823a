"""The StatefulSet controller's reconcile core (a re-implementation of k8s
pkg/controller/statefulset: stateful_set_control.go, stateful_set_utils.go,
stateful_pod_control.go).

``sync_statefulset(sts, pods, revisions, claims, now) -> StatefulSetSync`` is pure: given the
cached StatefulSet, the pods it may own (its own and the orphans of its namespace), the
ControllerRevisions and PersistentVolumeClaims of its namespace and the time, it returns the
actions to take and when to look again.

Pods are ``<sts>-<ordinal>``: a fixed name makes a create idempotent (the apiserver refuses a
second ``web-1``, and a create from a stale cache only meets AlreadyExists), and deletes carry
the pod's uid, so the core needs no expectations and is safe right after a controller-manager
restart: each sync recomputes everything from the caches.

One sync, as upstream's UpdateStatefulSet:

1. claim pods (members ``<sts>-<n>`` matching the selector; adopt orphans, release the ones
   that stopped matching) and revisions;
2. the revisions: the update revision is the one whose data equals the set's template (reused,
   renumbered when it was an older one - a rollback - or created), the current revision is
   ``status.currentRevision`` (or the update one); a name taken by other data bumps
   ``collisionCount``;
3. replicas in ordinal order: a Failed/Succeeded pod is deleted (re-created with the same name
   once it is gone); a missing pod is created, its claims first; with OrderedReady nothing
   further happens until that pod, and every one before it, is Running, Ready and available
   (minReadySeconds); Parallel goes on with all of them;
4. condemned pods (ordinals beyond the replicas), highest first: OrderedReady deletes one and
   waits for it to be gone, and only when every remaining pod is healthy;
5. RollingUpdate: pods not at the update revision are deleted from the highest ordinal down to
   ``partition``, at most ``maxUnavailable`` unavailable at a time; OnDelete: never;
6. the history beyond ``revisionHistoryLimit`` (revisions no pod uses) is deleted, the status
   written.
"""
from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass
from typing import Iterable

from components.controllers import (CreateObject, CreatePod, DeleteObject, DeletePod,
                                    PatchObject, RecordEvent, UpdateStatus)
from components.controllers.history import (equal_revision, find_equal_revisions,
                                            new_revision, next_revision, sort_revisions,
                                            template_data, template_of)
from components.controllers.podutil import (claim_objects, is_pod_ready, is_terminating,
                                            labels_of, meta, owner_reference, pod_phase,
                                            pod_from_template, ready_since, selector_is_empty)

KIND = "StatefulSet"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
REVISION_LABEL = "controller-revision-hash"
DEFAULT_HISTORY_LIMIT = 10
RETAIN, DELETE = "Retain", "Delete"

_MEMBER = re.compile(r"^(.*)-([0-9]+)$")


@dataclass(frozen=True)
class StatefulSetSync:
    actions: list
    requeue_after: float | None = None  # seconds; e.g. when a pod reaches minReadySeconds


# --- identity -----------------------------------------------------------------------------


def parent_and_ordinal(pod: dict) -> tuple[str, int]:
    """upstream getParentNameAndOrdinal: ("", -1) for a name that is not <parent>-<n>."""
    match = _MEMBER.match(meta(pod).get("name") or "")
    if not match or int(match.group(2)) >= 2 ** 31:
        return "", -1
    return match.group(1), int(match.group(2))


def ordinal_of(pod: dict) -> int:
    return parent_and_ordinal(pod)[1]


def pod_name(sts: dict, ordinal: int) -> str:
    return f"{meta(sts).get('name')}-{ordinal}"


def claim_name(template_name: str, sts: dict, ordinal: int) -> str:
    return f"{template_name}-{meta(sts).get('name')}-{ordinal}"


def _spec(sts: dict) -> dict:
    return sts.get("spec") or {}


def start_ordinal(sts: dict) -> int:
    return int((_spec(sts).get("ordinals") or {}).get("start") or 0)


def replica_count(sts: dict) -> int:
    replicas = _spec(sts).get("replicas")
    return 1 if replicas is None else int(replicas)


def in_ordinal_range(pod: dict, sts: dict) -> bool:
    ordinal, start = ordinal_of(pod), start_ordinal(sts)
    return start <= ordinal < start + replica_count(sts)


def revision_of(pod: dict) -> str:
    return labels_of(pod).get(REVISION_LABEL) or ""


def _claim_templates(sts: dict) -> list[dict]:
    return list(_spec(sts).get("volumeClaimTemplates") or [])


def _template_name(claim_template: dict) -> str:
    return meta(claim_template).get("name") or ""


# --- pod states (upstream's isCreated, isRunningAndReady, isRunningAndAvailable, ...) -------


def _created(pod: dict) -> bool:
    return bool((pod.get("status") or {}).get("phase"))


def _running_and_ready(pod: dict) -> bool:
    return pod_phase(pod) == "Running" and is_pod_ready(pod)


def _running_and_available(pod: dict, min_ready: int, now: float) -> bool:
    if not _running_and_ready(pod):
        return False
    if not min_ready:
        return True
    since = ready_since(pod)
    return since is not None and since + min_ready <= now


def _healthy(pod: dict) -> bool:
    return _running_and_ready(pod) and not is_terminating(pod)


def _unavailable(pod: dict, min_ready: int, now: float) -> bool:
    return not _running_and_available(pod, min_ready, now) or is_terminating(pod)


# --- pods and claims of a revision --------------------------------------------------------


def apply_revision(sts: dict, revision: dict) -> dict:
    """upstream ApplyRevision: ``sts`` with the template recorded in ``revision``."""
    return {**sts, "spec": {**_spec(sts), "template": template_of(revision)}}


def new_claims(sts: dict, ordinal: int) -> dict[str, dict]:
    """upstream getPersistentVolumeClaims: template name -> the claim of that ordinal (labels:
    the template's plus the selector's matchLabels)."""
    m = meta(sts)
    selector_labels = (_spec(sts).get("selector") or {}).get("matchLabels") or {}
    claims = {}
    for template in _claim_templates(sts):
        tmeta = dict(meta(template))
        tmeta["name"] = claim_name(_template_name(template), sts, ordinal)
        tmeta["namespace"] = m.get("namespace") or "default"
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **selector_labels}
        claims[_template_name(template)] = {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": tmeta,
            "spec": copy.deepcopy(template.get("spec") or {})}
    return claims


def new_pod(sts: dict, revision_name: str, ordinal: int) -> dict:
    """upstream newStatefulSetPod + setPodRevision: the pod of ``ordinal`` from ``sts``'s
    template, with its identity labels, hostname/subdomain and one volume per claim template
    (replacing a template volume of the same name)."""
    m = meta(sts)
    namespace = m.get("namespace") or "default"
    pod = pod_from_template(_spec(sts).get("template") or {}, namespace, sts, KIND, "")
    name = pod_name(sts, ordinal)
    pod["metadata"].pop("generateName", None)
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"].update({POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal),
                                      REVISION_LABEL: revision_name})
    spec = pod["spec"]
    spec["hostname"] = name
    if _spec(sts).get("serviceName"):
        spec["subdomain"] = _spec(sts)["serviceName"]
    claims = new_claims(sts, ordinal)
    if claims:
        volumes = [{"name": template, "persistentVolumeClaim": {"claimName": meta(c)["name"]}}
                   for template, c in claims.items()]
        spec["volumes"] = volumes + [v for v in spec.get("volumes") or []
                                     if v.get("name") not in claims]
    return pod


def _identity_matches(sts: dict, pod: dict) -> bool:
    parent, ordinal = parent_and_ordinal(pod)
    labels = labels_of(pod)
    return (ordinal >= 0 and parent == meta(sts).get("name")
            and labels.get(POD_NAME_LABEL) == meta(pod).get("name")
            and labels.get(POD_INDEX_LABEL) == str(ordinal))


# --- retention policy (upstream claimOwnerMatchesSetAndPod / updateClaimOwnerRefForSetAndPod)


def retention_policy(sts: dict) -> tuple[str, str]:
    """(whenDeleted, whenScaled); anything but Delete is Retain."""
    policy = _spec(sts).get("persistentVolumeClaimRetentionPolicy") or {}
    return (DELETE if policy.get("whenDeleted") == DELETE else RETAIN,
            DELETE if policy.get("whenScaled") == DELETE else RETAIN)


def _has_ref(obj: dict, owner_uid: str | None) -> bool:
    return any(r.get("uid") == owner_uid for r in meta(obj).get("ownerReferences") or [])


def _plain_ref(owner: dict, api_version: str, kind: str) -> dict:
    return {"apiVersion": owner.get("apiVersion") or api_version,
            "kind": owner.get("kind") or kind, "name": meta(owner).get("name"),
            "uid": meta(owner).get("uid")}


def wanted_claim_owners(sts: dict, pod: dict) -> tuple[bool, bool]:
    """Whether a claim of ``pod`` should be owned by the set, and by the pod: whenDeleted
    Delete ties a claim to the set (deleted with it) while its pod is in range; whenScaled
    Delete ties the claim of a scaled-down pod to that pod (deleted with it)."""
    when_deleted, when_scaled = retention_policy(sts)
    scaled_down = not in_ordinal_range(pod, sts)
    by_pod = when_scaled == DELETE and scaled_down
    by_set = when_deleted == DELETE and not by_pod
    return by_set, by_pod


def claim_owner_changes(claim: dict, sts: dict, pod: dict) -> list[dict] | None:
    """The claim's new ownerReferences when they disagree with the retention policy, else
    None (the pod must exist: a scaled-down pod's claim refers to its uid)."""
    by_set, by_pod = wanted_claim_owners(sts, pod)
    refs = list(meta(claim).get("ownerReferences") or [])
    changed = False
    for owner, want, api_version, kind in ((sts, by_set, "apps/v1", KIND),
                                           (pod, by_pod, "v1", "Pod")):
        uid = meta(owner).get("uid")
        if want and not _has_ref(claim, uid):
            refs.append(_plain_ref(owner, api_version, kind))
            changed = True
        elif not want and _has_ref(claim, uid):
            refs = [r for r in refs if r.get("uid") != uid]
            changed = True
    return refs if changed else None


# --- claiming ------------------------------------------------------------------------------


def claim_pods(sts: dict, pods: Iterable[dict]) -> tuple[list[dict], list]:
    """upstream getPodsForStatefulSet (ClaimPods with the isMemberOf filter: a pod named
    <set>-<ordinal>): the members this set controls, including failed and terminating ones,
    after adopting matching orphans; and the Adopt/Release actions."""
    name = meta(sts).get("name")
    return claim_objects(sts, pods, "Pod", owner_reference(sts, KIND),
                         member=lambda pod: parent_and_ordinal(pod)[0] == name)


def claim_revisions(sts: dict, revisions: Iterable[dict]) -> tuple[list[dict], list]:
    """The set's revisions, oldest first, after adopting matching orphans (upstream's
    ListRevisions + AdoptOrphanRevisions, claimed with the rule every controller uses)."""
    owned, actions = claim_objects(sts, revisions, "ControllerRevision",
                                   owner_reference(sts, KIND))
    return sort_revisions(owned), actions


# --- revisions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Revisions:
    current: dict
    update: dict
    collision_count: int
    actions: list


def resolve_revisions(sts: dict, owned: list[dict], namespace_revisions: list[dict]) -> Revisions:
    """upstream getStatefulSetRevisions (``owned`` sorted oldest first). A new revision is
    written by the returned actions and used right away; a name already taken by other data
    (of any owner) bumps the collision count."""
    status = sts.get("status") or {}
    collision_count = int(status.get("collisionCount") or 0)
    data = template_data(sts)
    number = next_revision(owned)
    candidate = new_revision(sts, data, number, collision_count)
    equal = find_equal_revisions(owned, candidate)
    actions: list = []
    if equal and equal_revision(owned[-1], equal[-1]):
        update = owned[-1]
    elif equal:
        # an older template again (a rollback): that revision becomes the newest
        old = equal[-1]
        update = {**old, "revision": number}
        actions.append(PatchObject("apps/v1", "ControllerRevision", meta(old).get("namespace"),
                                   meta(old).get("name"), meta(old).get("uid"),
                                   {"revision": number}))
    else:
        taken = {meta(r).get("name"): r for r in namespace_revisions}
        while (meta(candidate)["name"] in taken
               and not equal_revision(taken[meta(candidate)["name"]], candidate)):
            collision_count += 1
            candidate = new_revision(sts, data, number, collision_count)
        update = taken.get(meta(candidate)["name"]) or candidate
        if meta(candidate)["name"] not in taken:
            actions.append(CreateObject(meta(candidate)["namespace"], candidate))
    current = next((r for r in owned if meta(r).get("name") == status.get("currentRevision")),
                   update)
    return Revisions(current, update, collision_count, actions)


def truncate_history(sts: dict, owned: list[dict], pods: list[dict], live: set[str]) -> list:
    """upstream truncateHistory: delete the oldest revisions no pod and neither the current
    nor the update revision uses, keeping ``revisionHistoryLimit`` of them."""
    limit = _spec(sts).get("revisionHistoryLimit")
    limit = DEFAULT_HISTORY_LIMIT if limit is None else int(limit)
    live = live | {revision_of(p) for p in pods}
    history = [r for r in owned if meta(r).get("name") not in live]
    if limit < 0 or len(history) <= limit:
        return []
    return [DeleteObject("apps/v1", "ControllerRevision", meta(r).get("namespace"),
                         meta(r).get("name"), meta(r).get("uid"))
            for r in history[:len(history) - limit]]


# --- status --------------------------------------------------------------------------------


def compute_status(sts: dict, pods: list[dict], revisions: Revisions, now: float,
                   replaced: int = 0) -> dict:
    """upstream updateStatus + completeRollingUpdate; ``replaced`` pods were just deleted for
    the update (no longer current: a pod re-created before the status is read again must get
    the update revision)."""
    min_ready = int(_spec(sts).get("minReadySeconds") or 0)
    current, update = meta(revisions.current).get("name"), meta(revisions.update).get("name")
    status = {"observedGeneration": int(meta(sts).get("generation") or 0),
              "replicas": 0, "readyReplicas": 0, "currentReplicas": 0, "updatedReplicas": 0,
              "availableReplicas": 0, "currentRevision": current, "updateRevision": update,
              "collisionCount": revisions.collision_count}
    for pod in pods:
        if _created(pod):
            status["replicas"] += 1
        if _running_and_ready(pod):
            status["readyReplicas"] += 1
            if _running_and_available(pod, min_ready, now):
                status["availableReplicas"] += 1
        if _created(pod) and not is_terminating(pod):
            if revision_of(pod) == current:
                status["currentReplicas"] += 1
            if revision_of(pod) == update:
                status["updatedReplicas"] += 1
    status["currentReplicas"] -= replaced
    if (_strategy(sts) == "RollingUpdate" and status["updatedReplicas"] == status["replicas"]
            and status["readyReplicas"] == status["replicas"]):
        status["currentReplicas"] = status["updatedReplicas"]
        status["currentRevision"] = update
    return status


_STATUS_FIELDS = ("observedGeneration", "replicas", "readyReplicas", "currentReplicas",
                  "updatedReplicas", "availableReplicas", "currentRevision", "updateRevision",
                  "collisionCount")


def _status_differs(old: dict, new: dict) -> bool:
    return any((old.get(f) or 0) != (new.get(f) or 0) for f in _STATUS_FIELDS)


# --- the sync ------------------------------------------------------------------------------


def _strategy(sts: dict) -> str:
    return (_spec(sts).get("updateStrategy") or {}).get("type") or "RollingUpdate"


def _rolling(sts: dict) -> dict | None:
    return (_spec(sts).get("updateStrategy") or {}).get("rollingUpdate")


def max_unavailable(sts: dict) -> int:
    """rollingUpdate.maxUnavailable: a number or a percentage of the replicas (rounded down),
    at least 1 (upstream getStatefulSetMaxUnavailable)."""
    value = (_rolling(sts) or {}).get("maxUnavailable")
    if value is None:
        return 1
    if isinstance(value, str) and value.endswith("%"):
        try:
            value = math.floor(int(value[:-1]) * replica_count(sts) / 100)
        except ValueError:
            return 1
    try:
        return max(int(value), 1)
    except (TypeError, ValueError):
        return 1


class _Sync:
    """One sync's state: the actions so far, and what the decisions read."""

    def __init__(self, sts: dict, claims: dict[str, dict], revisions: Revisions, now: float):
        self.sts = sts
        m = meta(sts)
        self.namespace, self.name = m.get("namespace") or "default", m.get("name")
        self.claims = claims
        self.revisions = revisions
        self.now = now
        self.min_ready = int(_spec(sts).get("minReadySeconds") or 0)
        self.monotonic = _spec(sts).get("podManagementPolicy") != "Parallel"
        self.current_set = apply_revision(sts, revisions.current)
        self.update_set = apply_revision(sts, revisions.update)
        self.actions: list = []
        self.creates: list = []      # CreatePod actions, emitted after the claims' creations
        self.replaced = 0            # pods deleted for the rolling update

    def event(self, type_: str, reason: str, message: str) -> None:
        self.actions.append(RecordEvent(self.namespace, KIND, self.name, type_, reason, message))

    def delete(self, pod: dict) -> None:
        self.actions.append(DeletePod(self.namespace, meta(pod).get("name"),
                                      meta(pod).get("uid")))

    # upstream newVersionedStatefulSetPod
    def placeholder(self, ordinal: int) -> dict:
        rolling = _rolling(self.sts)
        status = self.sts.get("status") or {}
        if _strategy(self.sts) == "RollingUpdate" and (
                (rolling is None and ordinal < start_ordinal(self.sts)
                 + int(status.get("currentReplicas") or 0))
                or (rolling is not None and ordinal < start_ordinal(self.sts)
                    + int(rolling.get("partition") or 0))):
            return new_pod(self.current_set, meta(self.revisions.current)["name"], ordinal)
        return new_pod(self.update_set, meta(self.revisions.update)["name"], ordinal)

    def create(self, pod: dict) -> bool:
        """upstream CreateStatefulPod: the claims (missing ones created), then the pod. False
        when a claim blocks it (being deleted, or still owned by a previous pod of that
        name, which the garbage collector is about to delete with it)."""
        ordinal = ordinal_of(pod)
        for claim in new_claims(self.sts, ordinal).values():
            name = meta(claim)["name"]
            existing = self.claims.get(name)
            if existing is None:
                by_set, _ = wanted_claim_owners(self.sts, pod)
                if by_set:
                    claim["metadata"]["ownerReferences"] = [
                        _plain_ref(self.sts, "apps/v1", KIND)]
                self.actions.append(CreateObject(self.namespace, claim))
            elif is_terminating(existing):
                self.event("Warning", "FailedCreate",
                           f"create Pod {meta(pod)['name']} in StatefulSet {self.name} failed "
                           f"error: pvc {name} is being deleted")
                return False
            elif any(r.get("kind") == "Pod" and r.get("name") == meta(pod)["name"]
                     for r in meta(existing).get("ownerReferences") or []):
                return False   # upstream PodClaimIsStale
        self.creates.append(CreatePod(self.namespace, pod))
        return True

    def create_missing_claims(self, pod: dict) -> None:
        for claim in new_claims(self.sts, ordinal_of(pod)).values():
            if meta(claim)["name"] not in self.claims:
                self.actions.append(CreateObject(self.namespace, claim))

    def fix_claims(self, pod: dict) -> None:
        """upstream UpdatePodClaimForRetentionPolicy (claims the cache has)."""
        for claim in new_claims(self.sts, ordinal_of(pod)).values():
            existing = self.claims.get(meta(claim)["name"])
            if existing is None:
                continue
            refs = claim_owner_changes(existing, self.update_set, pod)
            if refs is not None:
                em = meta(existing)
                self.actions.append(PatchObject(
                    "v1", "PersistentVolumeClaim", self.namespace, em.get("name"),
                    em.get("uid"), {"metadata": {"ownerReferences": refs or None}},
                    em.get("resourceVersion")))

    def process_replica(self, pod: dict, exists: bool) -> bool:
        """upstream processReplica; True: stop here (OrderedReady)."""
        name = meta(pod).get("name")
        phase = pod_phase(pod) if exists else ""
        if phase in ("Failed", "Succeeded"):
            if not is_terminating(pod):
                if phase == "Failed":
                    self.event("Warning", "RecreatingFailedPod",
                               f"StatefulSet {self.namespace}/{self.name} is recreating failed "
                               f"Pod {name}")
                else:
                    self.event("Normal", "RecreatingTerminatedPod",
                               f"StatefulSet {self.namespace}/{self.name} is recreating "
                               f"terminated Pod {name}")
                self.delete(pod)
            return True
        if not exists:
            if not self.create(pod) or self.monotonic:
                return True
            return False  # Parallel: the next one is created too
        if phase == "Pending":
            self.create_missing_claims(pod)
        if self.monotonic and (is_terminating(pod) or not _running_and_ready(pod)
                               or not _running_and_available(pod, self.min_ready, self.now)):
            return True
        if is_terminating(pod):
            return False
        self.fix_claims(pod)
        if not _identity_matches(self.sts, pod):
            pm = meta(pod)
            ordinal = ordinal_of(pod)
            self.actions.append(PatchObject(
                "v1", "Pod", self.namespace, name, pm.get("uid"),
                {"metadata": {"labels": {POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal)}}},
                pm.get("resourceVersion")))
            self.event("Normal", "SuccessfulUpdate",
                       f"update Pod {name} in StatefulSet {self.name} successful")
        return False

    def process_condemned(self, pod: dict, first_unavailable: dict | None) -> bool:
        """upstream processCondemned; True: stop here (OrderedReady)."""
        if is_terminating(pod):
            return self.monotonic
        if self.monotonic and pod is not first_unavailable and (
                not _running_and_ready(pod)
                or not _running_and_available(pod, self.min_ready, self.now)):
            return True
        self.delete(pod)
        return True

    def rolling_update(self, replicas: list[dict]) -> None:
        """upstream updateStatefulSetAfterInvariantEstablished (MaxUnavailableStatefulSet)."""
        partition = int((_rolling(self.sts) or {}).get("partition") or 0)
        limit = max_unavailable(self.sts)
        unavailable = sum(1 for p in replicas if _unavailable(p, self.min_ready, self.now))
        budget = limit - unavailable
        update = meta(self.revisions.update).get("name")
        for index in range(len(replicas) - 1, -1, -1):
            if budget <= 0:
                break
            pod = replicas[index]
            if index < partition:
                break
            if revision_of(pod) != update and not is_terminating(pod):
                self.delete(pod)
                self.replaced += 1
                budget -= 1


def sync_statefulset(sts: dict, pods: Iterable[dict], revisions: Iterable[dict],
                     claims: Iterable[dict], now: float) -> StatefulSetSync:
    m = meta(sts)
    spec = _spec(sts)
    if selector_is_empty(spec.get("selector")):
        return StatefulSetSync([])
    namespace = m.get("namespace") or "default"
    owned, claim_actions = claim_pods(sts, pods)
    namespace_revisions = [r for r in revisions
                           if (meta(r).get("namespace") or "default") == namespace]
    owned_revisions, revision_adoptions = claim_revisions(sts, namespace_revisions)
    revs = resolve_revisions(sts, owned_revisions, namespace_revisions)
    claims_by_name = {meta(c).get("name"): c for c in claims
                      if (meta(c).get("namespace") or "default") == namespace}
    s = _Sync(sts, claims_by_name, revs, now)
    s.actions += claim_actions + revision_adoptions + revs.actions

    start, count = start_ordinal(sts), replica_count(sts)
    by_ordinal: dict[int, dict] = {}
    condemned: list[dict] = []
    for pod in owned:
        if in_ordinal_range(pod, sts):
            by_ordinal[ordinal_of(pod)] = pod
        else:
            condemned.append(pod)
    condemned.sort(key=ordinal_of, reverse=True)
    existing = set(by_ordinal)
    replicas = [by_ordinal.get(o) or s.placeholder(o) for o in range(start, start + count)]

    first_unavailable = next((p for p in replicas if _unavailable(p, s.min_ready, now)), None)
    if first_unavailable is None:
        first_unavailable = next((p for p in reversed(condemned)
                                  if _unavailable(p, s.min_ready, now)), None)

    if not is_terminating(sts):
        _reconcile(s, replicas, existing, condemned, first_unavailable)
    actions = s.actions + s.creates

    live = {meta(revs.current).get("name"), meta(revs.update).get("name")}
    actions += truncate_history(sts, owned_revisions, owned, live)
    status = compute_status(sts, owned, revs, now, s.replaced)
    if _status_differs(sts.get("status") or {}, status):
        actions.append(UpdateStatus(KIND, namespace, m.get("name"), status))
    return StatefulSetSync(actions, _requeue_after(sts, owned, now))


def _reconcile(s: _Sync, replicas: list[dict], existing: set[int], condemned: list[dict],
               first_unavailable: dict | None) -> None:
    for pod in replicas:
        if s.process_replica(pod, ordinal_of(pod) in existing) and s.monotonic:
            return
    for pod in condemned:
        s.fix_claims(pod)
    for pod in condemned:
        if s.process_condemned(pod, first_unavailable) and s.monotonic:
            return
    if _strategy(s.sts) == "OnDelete":
        return
    s.rolling_update(replicas)


def _requeue_after(sts: dict, pods: list[dict], now: float) -> float | None:
    """When a ready pod becomes available (minReadySeconds): no pod event says so."""
    min_ready = int(_spec(sts).get("minReadySeconds") or 0)
    if not min_ready:
        return None
    waits = [since + min_ready - now for p in pods
             if _running_and_ready(p) and (since := ready_since(p)) is not None
             and since + min_ready > now]
    return min(waits) if waits else None
