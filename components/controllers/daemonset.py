"""The DaemonSet controller's reconcile core (a re-implementation of k8s pkg/controller/daemon).

``sync_daemonset(ds, nodes, pods, revisions, expectation, backoff, now) -> DaemonSetSync`` is
pure: from the cached DaemonSet, every Node, the pods it may own (its own and the orphans of its
namespace), the ControllerRevisions of its namespace, its in-flight-writes record (the
ReplicaSet's `Expectation`) and the failed-pod backoff records, it returns the actions, the new
record, the backoff records to store and when to look again.

One sync, as upstream's syncDaemonSet:

1. history (constructHistory): the revision whose data restores the current template is the
   current one (created when missing, renumbered when an old template comes back, duplicates
   merged); its hash labels the new pods (``controller-revision-hash``);
2. while writes are in flight, only the status is refreshed (observedGeneration unchanged);
3. manage: per node, NodeShouldRunDaemonPod -> create a pod where one should run and none is,
   delete pods where none should continue to run, delete Failed pods (with a per-node backoff,
   1 s doubling to 15 min), keep the oldest of several pods on a node (with maxSurge: the
   oldest new and the oldest old one until the new is available); pods whose node no longer
   exists are deleted too;
4. the rolling update, only when manage wrote nothing (upstream re-checks the expectations it
   has just set): without surge, delete old pods while fewer than maxUnavailable nodes are
   unavailable, and let manage create their replacements; with surge, create a new pod next to
   an old one on up to maxSurge nodes (at once where the old pod is unavailable), and the
   manage step deletes the old pod once the new one is available. OnDelete: nothing;
5. old revisions beyond revisionHistoryLimit (default 10) that no pod uses are deleted, oldest
   first; then the status.

A pod is a daemon pod of node N when spec.nodeName is N or, before it is bound, its required
node affinity has the term ``matchFields metadata.name In [N]`` the controller gave it. A pod
being deleted still occupies its node (no replacement until it is gone, as upstream), so a
node never runs two daemon pods of one DaemonSet, except with maxSurge.

Slow start as the ReplicaSet core: one batch of creates per sync (1, 2, 4, ... while the
previous batch was observed without error), at most BURST_REPLICAS creates and deletes.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Iterable, Mapping

from components.controllers import (CreateObject, CreatePod, DeleteObject, DeletePod,
                                    PatchObject, RecordEvent, UpdateObject, UpdateStatus,
                                    history)
from components.controllers.deployment import resolve_int_or_percent
from components.controllers.nodelifecycle import TAINT_NOT_READY, TAINT_UNREACHABLE
from components.controllers.podutil import (claim_objects, is_pod_available, is_pod_ready,
                                            is_terminating, labels_of, meta, owner_reference,
                                            parse_time, pod_from_template, pod_phase,
                                            ready_since, selector_is_empty)
from components.controllers.replicaset import EXPECTATIONS_TTL, Expectation
from components.scheduling.filters import (NO_EXECUTE, NO_SCHEDULE, TAINT_UNSCHEDULABLE,
                                           find_untolerated_taint, node_name, node_taints,
                                           pod_matches_node_selector_and_affinity)

KIND = "DaemonSet"
BURST_REPLICAS = 250                     # upstream BurstReplicas
HASH_LABEL = "controller-revision-hash"  # apps.DefaultDaemonSetUniqueLabelKey
GENERATION_LABEL = "pod-template-generation"   # extensions.DaemonSetTemplateGenerationKey
TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"
DEFAULT_HISTORY_LIMIT = 10
BACKOFF_INITIAL = 1.0                    # kube-controller-manager's failedPodsBackoff
BACKOFF_MAX = 15 * 60.0

# AddOrUpdateDaemonPodTolerations: every daemon pod survives node problems and cordons.
DAEMON_TOLERATIONS = (
    {"key": TAINT_NOT_READY, "operator": "Exists", "effect": NO_EXECUTE},
    {"key": TAINT_UNREACHABLE, "operator": "Exists", "effect": NO_EXECUTE},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": NO_SCHEDULE},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": NO_SCHEDULE},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": NO_SCHEDULE},
    {"key": TAINT_UNSCHEDULABLE, "operator": "Exists", "effect": NO_SCHEDULE},
)
HOST_NETWORK_TOLERATION = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                           "effect": NO_SCHEDULE}


@dataclass(frozen=True)
class Backoff:
    """One node's failed-pod backoff (flowcontrol.Backoff's entry): the current delay and when
    it was last stepped."""
    delay: float
    updated: float

    def in_backoff(self, now: float) -> bool:
        return now - self.updated < self.delay

    def expired(self, now: float) -> bool:
        return now - self.updated > 2 * BACKOFF_MAX

    @staticmethod
    def step(previous: "Backoff | None", now: float) -> "Backoff":
        if previous is None or previous.expired(now):
            return Backoff(BACKOFF_INITIAL, now)
        return Backoff(min(previous.delay * 2, BACKOFF_MAX), now)


@dataclass(frozen=True)
class DaemonSetSync:
    actions: list
    expectation: Expectation | None       # store it back (None: nothing in flight)
    backoff: dict                         # backoff key -> Backoff entries stepped by this sync
    requeue_after: float | None = None


# --- pods of a node ---------------------------------------------------------------------------


def _tolerations_match(a: dict, b: dict) -> bool:
    """v1.Toleration.MatchToleration: same key, operator, value and effect."""
    return all((a.get(f) or "") == (b.get(f) or "") for f in ("key", "operator", "value", "effect"))


def add_daemon_tolerations(spec: dict) -> None:
    """AddOrUpdateDaemonPodTolerations on a pod spec (in place): each automatic toleration
    replaces a matching one of the template (one with tolerationSeconds, say) or is appended."""
    wanted = list(DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        wanted.append(HOST_NETWORK_TOLERATION)
    tolerations = list(spec.get("tolerations") or [])
    for toleration in wanted:
        found = False
        for i, existing in enumerate(tolerations):
            if _tolerations_match(existing, toleration):
                tolerations[i] = dict(toleration)
                found = True
        if not found:
            tolerations.append(dict(toleration))
    spec["tolerations"] = tolerations


def node_name_affinity(affinity: dict | None, node: str) -> dict:
    """ReplaceDaemonSetPodNodeNameNodeAffinity: the required node affinity becomes the single
    term ``matchFields metadata.name In [node]`` (the controller has checked the template's
    own terms against that node already); preferred terms and other affinities stay."""
    affinity = copy.deepcopy(affinity or {})
    node_affinity = affinity.setdefault("nodeAffinity", {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    return affinity


def target_node(pod: dict) -> str | None:
    """GetTargetNodeName: spec.nodeName, else the node of the matchFields term."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchFields") or []:
            if expr.get("key") == "metadata.name" and expr.get("operator") == "In":
                values = expr.get("values") or []
                return values[0] if len(values) == 1 else None
    return None


def template_generation(ds: dict) -> str | None:
    """The template generation pods are labelled with: the annotation the apiserver keeps
    (deprecated.daemonset.template.generation), else the DaemonSet's generation."""
    value = (meta(ds).get("annotations") or {}).get(TEMPLATE_GENERATION)
    if value is None:
        value = meta(ds).get("generation")
    try:
        return str(int(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


def new_pod(ds: dict, node: str) -> dict:
    """NewPod: the template's pod with the automatic tolerations, meant for ``node``."""
    template = (ds.get("spec") or {}).get("template") or {}
    spec = copy.deepcopy(template.get("spec") or {})
    spec["nodeName"] = node
    add_daemon_tolerations(spec)
    return {"metadata": copy.deepcopy(template.get("metadata") or {}), "spec": spec}


def node_should_run(node: dict, ds: dict) -> tuple[bool, bool]:
    """NodeShouldRunDaemonPod: (shouldRun, shouldContinueRunning). A NoSchedule taint the pod
    does not tolerate keeps new pods off the node; only an untolerated NoExecute one evicts."""
    name = node_name(node)
    wanted = (((ds.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeName")
    if wanted and wanted != name:
        return False, False
    pod = new_pod(ds, name)
    if not pod_matches_node_selector_and_affinity(pod, node):
        return False, False
    tolerations = pod["spec"]["tolerations"]
    taints = node_taints(node)
    if find_untolerated_taint(taints, tolerations) is not None:
        return False, find_untolerated_taint(taints, tolerations, (NO_EXECUTE,)) is None
    return True, True


def _created(pod: dict) -> float:
    created = parse_time(meta(pod).get("creationTimestamp"))
    return created if created is not None else float("inf")


def by_creation(pods: Iterable[dict]) -> list[dict]:
    """podByCreationTimestampAndPhase: bound pods first, then oldest first, then by name."""
    return sorted(pods, key=lambda p: (0 if (p.get("spec") or {}).get("nodeName") else 1,
                                       _created(p), meta(p).get("name") or ""))


def is_updated(pod: dict, hash_: str, generation: str | None) -> bool:
    """IsPodUpdated: the pod carries the current revision's hash or template generation."""
    labels = labels_of(pod)
    return (bool(hash_) and labels.get(HASH_LABEL) == hash_) or \
        (generation is not None and labels.get(GENERATION_LABEL) == generation)


def _pods_by_node(pods: Iterable[dict]) -> dict[str, list[dict]]:
    """getNodesToDaemonPods: a terminal pod already being deleted is done with."""
    out: dict[str, list[dict]] = {}
    for pod in pods:
        if pod_phase(pod) in ("Succeeded", "Failed") and is_terminating(pod):
            continue
        node = target_node(pod)
        if node:
            out.setdefault(node, []).append(pod)
    return out


# --- history ----------------------------------------------------------------------------------


def _revision_hash(revision: dict) -> str:
    labels = labels_of(revision)
    return labels.get(HASH_LABEL) or labels.get(history.HASH_LABEL) or ""


class _Sync:
    """One pass over one DaemonSet: the actions so far and what the pass has learnt."""

    def __init__(self, ds: dict, nodes: Iterable[dict], now: float):
        self.ds, self.now = ds, now
        m = meta(ds)
        self.ns, self.name, self.uid = m.get("namespace") or "default", m.get("name"), m.get("uid")
        self.spec = ds.get("spec") or {}
        self.min_ready = int(self.spec.get("minReadySeconds") or 0)
        self.nodes = sorted(nodes, key=node_name)
        self.actions: list = []
        self.requeue: list[float] = []

    def event(self, type_: str, reason: str, message: str) -> None:
        self.actions.append(RecordEvent(self.ns, KIND, self.name, type_, reason, message))

    # -- history --

    def construct_history(self, revisions: list[dict], pods: list[dict]) -> \
            tuple[dict | None, list[dict]]:
        """(the current revision, the old ones); None when the sync must stop (a collision)."""
        owned, claims = claim_objects(self.ds, revisions, "ControllerRevision",
                                       owner_reference(self.ds, KIND))
        self.actions += claims
        data = history.template_data(self.ds)
        current = [r for r in owned if (r.get("data") or {}) == data]
        old = [r for r in owned if (r.get("data") or {}) != data]
        number = history.next_revision(old)
        if not current:
            collision_count = (self.ds.get("status") or {}).get("collisionCount")
            cur = history.new_revision(self.ds, data, number, collision_count)
            hash_ = cur["metadata"]["labels"][history.HASH_LABEL]
            cur["metadata"]["labels"][HASH_LABEL] = hash_
            taken = next((r for r in revisions
                          if meta(r).get("name") == cur["metadata"]["name"]
                          and (meta(r).get("namespace") or "default") == self.ns), None)
            if taken is not None:
                # a name collision with other data: a new hash next time (snapshot)
                status = copy.deepcopy(self.ds.get("status") or {})
                status["collisionCount"] = int(collision_count or 0) + 1
                self.actions.append(UpdateStatus(KIND, self.ns, self.name, status))
                return None, old
            self.actions.append(CreateObject(self.ns, cur))
            return cur, old
        keep = max(current, key=lambda r: int(r.get("revision") or 0))
        # dedupCurHistories: the duplicates' pods take the kept hash, then the duplicates go
        dups = [r for r in current if r is not keep]
        dup_hashes = {_revision_hash(r) for r in dups}
        for pod in pods:
            if labels_of(pod).get(HASH_LABEL) in dup_hashes:
                pm = meta(pod)
                self.actions.append(PatchObject(
                    "v1", "Pod", self.ns, pm.get("name"), pm.get("uid"),
                    {"metadata": {"labels": {HASH_LABEL: _revision_hash(keep)}}}))
        for dup in dups:
            self.actions.append(DeleteObject("apps/v1", "ControllerRevision", self.ns,
                                             meta(dup).get("name"), meta(dup).get("uid")))
        if int(keep.get("revision") or 0) < number:
            renumbered = copy.deepcopy(keep)
            renumbered["revision"] = number
            self.actions.append(UpdateObject(self.ns, renumbered))
        return keep, old

    def cleanup_history(self, old: list[dict], pods: list[dict]) -> None:
        limit = self.spec.get("revisionHistoryLimit")
        limit = DEFAULT_HISTORY_LIMIT if limit is None else int(limit)
        to_kill = len(old) - limit
        if to_kill <= 0:
            return
        live = {labels_of(p).get(HASH_LABEL) for p in pods} - {None, ""}
        for revision in history.sort_revisions(old):
            if to_kill <= 0:
                break
            if _revision_hash(revision) in live:
                continue
            self.actions.append(DeleteObject("apps/v1", "ControllerRevision", self.ns,
                                             meta(revision).get("name"),
                                             meta(revision).get("uid")))
            to_kill -= 1

    # -- manage --

    def allows_surge(self) -> bool:
        return self.surge_count(1) > 0

    def rolling(self) -> dict | None:
        strategy = self.spec.get("updateStrategy") or {}
        if (strategy.get("type") or "RollingUpdate") != "RollingUpdate":
            return None
        return strategy.get("rollingUpdate") or {}

    def surge_count(self, desired: int) -> int:
        rolling = self.rolling()
        if rolling is None or rolling.get("maxSurge") is None:
            return 0
        return resolve_int_or_percent(rolling["maxSurge"], desired, True)

    def unavailable_count(self, desired: int) -> int:
        rolling = self.rolling()
        if rolling is None:
            return 0
        value = rolling.get("maxUnavailable")
        return resolve_int_or_percent(1 if value is None else value, desired, True)

    def pods_should_be_on_node(self, node: dict, on_node: list[dict], hash_: str,
                               backoff: Mapping[str, Backoff], stepped: dict) -> \
            tuple[bool, list[dict]]:
        """(create a pod here?, pods to delete here)."""
        should_run, should_continue = node_should_run(node, self.ds)
        name = node_name(node)
        if should_run and not on_node:
            return True, []
        if not should_continue:
            return False, [p for p in on_node if not is_terminating(p)]
        doomed: list[dict] = []
        running: list[dict] = []
        for pod in on_node:
            if is_terminating(pod):
                continue
            phase = pod_phase(pod)
            if phase == "Failed":
                key = self.backoff_key(name)
                entry = stepped.get(key) or backoff.get(key)
                if entry is not None and entry.in_backoff(self.now):
                    self.requeue.append(entry.updated + entry.delay - self.now)
                    continue
                stepped[key] = Backoff.step(entry, self.now)
                self.event("Warning", "FailedDaemonPod",
                           f"Found failed daemon pod {self.ns}/{meta(pod).get('name')} on node "
                           f"{name}, will try to kill it")
                doomed.append(pod)
            elif phase == "Succeeded":
                self.event("Normal", "SucceededDaemonPod",
                           f"Found succeeded daemon pod {self.ns}/{meta(pod).get('name')} on "
                           f"node {name}, will try to delete it")
                doomed.append(pod)
            else:
                running.append(pod)
        running = by_creation(running)
        if not self.allows_surge():
            return False, doomed + running[1:]
        if len(running) <= 1:
            return not running and should_run, doomed
        # surge: keep the oldest new and the oldest old pod until the new one is available
        newest = oldest_old = None
        for pod in running:
            if labels_of(pod).get(HASH_LABEL) == hash_:
                if newest is None:
                    newest = pod
                    continue
            elif oldest_old is None:
                oldest_old = pod
                continue
            doomed.append(pod)
        if newest is not None and oldest_old is not None and (
                not is_pod_ready(oldest_old)
                or is_pod_available(newest, self.min_ready, self.now)):
            doomed.append(oldest_old)
        return False, doomed

    def backoff_key(self, node: str) -> str:
        observed = int((self.ds.get("status") or {}).get("observedGeneration") or 0)
        return f"{self.uid}/{observed}/{node}"

    def manage(self, by_node: dict[str, list[dict]], hash_: str,
               backoff: Mapping[str, Backoff], stepped: dict) -> tuple[list[str], list[dict]]:
        """(nodes needing a pod, pods to delete)."""
        needing: list[str] = []
        doomed: list[dict] = []
        for node in self.nodes:
            create, delete = self.pods_should_be_on_node(
                node, by_node.get(node_name(node), []), hash_, backoff, stepped)
            if create:
                needing.append(node_name(node))
            doomed += delete
        # pods of nodes that are gone (upstream's pod GC deletes the bound ones)
        existing = {node_name(n) for n in self.nodes}
        for name, pods in sorted(by_node.items()):
            if name not in existing:
                doomed += [p for p in pods if not is_terminating(p)]
        return needing, doomed

    # -- rolling update --

    def rolling_update(self, by_node: dict[str, list[dict]], hash_: str,
                       generation: str | None) -> tuple[list[str], list[dict]]:
        """(nodes to surge a new pod onto, old pods to delete)."""
        desired = 0
        by_node = dict(by_node)
        for node in self.nodes:
            if node_should_run(node, self.ds)[0]:
                desired += 1
                by_node.setdefault(node_name(node), [])
        max_surge, max_unavailable = self.surge_count(desired), self.unavailable_count(desired)
        if desired > 0 and max_surge == 0 and max_unavailable == 0:
            max_unavailable = 1
        if max_surge == 0:
            unavailable = 0
            replacements: list[dict] = []
            candidates: list[dict] = []
            for name in sorted(by_node):
                found = _new_and_old(by_node[name], hash_, generation)
                if found is None:
                    unavailable += 1   # duplicates: manage cleans up first
                    continue
                newest, oldest = found
                if (newest is None) == (oldest is None):
                    unavailable += 1
                elif newest is not None:
                    if not is_pod_available(newest, self.min_ready, self.now):
                        unavailable += 1
                elif not is_pod_available(oldest, self.min_ready, self.now):
                    replacements.append(oldest)
                elif unavailable < max_unavailable:
                    candidates.append(oldest)
            room = max(0, min(max_unavailable - unavailable, len(candidates)))
            return [], replacements + candidates[:room]
        surging = 0
        doomed: list[dict] = []
        allowed: list[str] = []
        candidates_nodes: list[str] = []
        for name in sorted(by_node):
            found = _new_and_old(by_node[name], hash_, generation)
            if found is None:
                surging += 1
                continue
            newest, oldest = found
            if oldest is None:
                continue
            if newest is None:
                if not is_pod_available(oldest, self.min_ready, self.now):
                    allowed.append(name)
                elif surging < max_surge:
                    candidates_nodes.append(name)
                continue
            if not is_pod_available(newest, self.min_ready, self.now):
                surging += 1
                continue
            doomed.append(oldest)
        room = max(0, min(max_surge - surging, len(candidates_nodes)))
        return allowed + candidates_nodes[:room], doomed

    # -- writes --

    def sync_nodes(self, needing: list[str], doomed: list[dict], hash_: str,
                   generation: str | None, previous: Expectation | None) -> Expectation | None:
        """Emit one slow-start batch of creates and the deletes; the record to wait on."""
        doomed = doomed[:BURST_REPLICAS]
        want = min(len(needing), BURST_REPLICAS)
        size = 0
        if want:
            if previous is None or previous.batch <= 0 or previous.failure \
                    or previous.expired(self.now):
                size = 1
            else:
                size = previous.batch * 2
            size = min(size, want)
        template = copy.deepcopy(self.spec.get("template") or {})
        template_spec = template.setdefault("spec", {})
        add_daemon_tolerations(template_spec)
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        if generation is not None:
            labels[GENERATION_LABEL] = generation
        if hash_:
            labels[HASH_LABEL] = hash_
        for node in needing[:size]:
            pod = pod_from_template(template, self.ns, self.ds, KIND, f"{self.name}-")
            pod["spec"]["affinity"] = node_name_affinity(pod["spec"].get("affinity"), node)
            self.actions.append(CreatePod(self.ns, pod))
        for pod in doomed:
            self.actions.append(DeletePod(self.ns, meta(pod).get("name"), meta(pod).get("uid")))
        if not size and not doomed:
            return None
        return Expectation(adds=size, deletes=frozenset(meta(p).get("uid") for p in doomed),
                           timestamp=self.now, batch=size)

    def status(self, by_node: dict[str, list[dict]], hash_: str, generation: str | None,
               observe: bool) -> None:
        """updateDaemonSetStatus (written only when something changed)."""
        desired = current = misscheduled = ready = updated = available = 0
        for node in self.nodes:
            should_run = node_should_run(node, self.ds)[0]
            pods = by_node.get(node_name(node)) or []
            if not should_run:
                misscheduled += 1 if pods else 0
                continue
            desired += 1
            if not pods:
                continue
            current += 1
            pod = by_creation(pods)[0]
            if is_pod_ready(pod):
                ready += 1
                if is_pod_available(pod, self.min_ready, self.now):
                    available += 1
                elif self.min_ready:
                    since = ready_since(pod)
                    if since is not None:
                        self.requeue.append(since + self.min_ready - self.now)
            if is_updated(pod, hash_, generation):
                updated += 1
        old = self.ds.get("status") or {}
        counts = {"desiredNumberScheduled": desired, "currentNumberScheduled": current,
                  "numberMisscheduled": misscheduled, "numberReady": ready,
                  "updatedNumberScheduled": updated, "numberAvailable": available,
                  "numberUnavailable": desired - available}
        generation_now = int(meta(self.ds).get("generation") or 0)
        observed = int(old.get("observedGeneration") or 0)
        if all(int(old.get(k) or 0) == v for k, v in counts.items()) and \
                observed >= generation_now:
            return
        status = {k: v for k, v in copy.deepcopy(old).items() if k not in counts}
        status.update(counts)
        if observe:
            status["observedGeneration"] = generation_now
        if status != old:
            self.actions.append(UpdateStatus(KIND, self.ns, self.name, status))


def _new_and_old(pods: list[dict], hash_: str, generation: str | None) -> \
        tuple[dict | None, dict | None] | None:
    """findUpdatedPodsOnNode: the node's live new and old pod; None when it has two of a kind."""
    newest = oldest = None
    for pod in pods:
        if is_terminating(pod):
            continue
        if is_updated(pod, hash_, generation):
            if newest is not None:
                return None
            newest = pod
        else:
            if oldest is not None:
                return None
            oldest = pod
    return newest, oldest


def sync_daemonset(ds: dict, nodes: Iterable[dict], pods: Iterable[dict],
                   revisions: Iterable[dict], expectation: Expectation | None,
                   backoff: Mapping[str, Backoff], now: float) -> DaemonSetSync:
    s = _Sync(ds, nodes, now)
    if selector_is_empty(s.spec.get("selector")):
        s.event("Warning", "SelectingAll",
                "This daemon set is selecting all pods. A non-empty selector is required.")
        return DaemonSetSync(s.actions, expectation, {})
    if is_terminating(ds):
        # its revisions may be going already: nothing can be computed reliably (upstream)
        return DaemonSetSync([], expectation, {})
    owned, claims = claim_objects(ds, pods, "Pod", owner_reference(ds, KIND))
    revisions = list(revisions)
    cur, old = s.construct_history(revisions, owned)
    if cur is None:
        return DaemonSetSync(claims + s.actions, expectation, {}, 1.0)
    s.actions = claims + s.actions
    hash_ = _revision_hash(cur)
    generation = template_generation(ds)
    by_node = _pods_by_node(owned)
    stepped: dict = {}
    new_expectation = expectation
    synced = expectation is None or expectation.satisfied(now)
    if synced:
        needing, doomed = s.manage(by_node, hash_, backoff, stepped)
        if not needing and not doomed and s.rolling() is not None:
            needing, doomed = s.rolling_update(by_node, hash_, generation)
        new_expectation = s.sync_nodes(needing, doomed, hash_, generation, expectation)
        s.cleanup_history(old, owned)
    s.status(by_node, hash_, generation, synced)
    if new_expectation is not None and not new_expectation.satisfied(now):
        s.requeue.append(new_expectation.timestamp + EXPECTATIONS_TTL - now + 1)
    requeue = min((r for r in s.requeue if r > 0), default=None)
    return DaemonSetSync(s.actions, new_expectation, stepped, requeue)


def update_backoff(records: dict, stepped: Mapping[str, Backoff], now: float) -> None:
    """Store a sync's stepped entries and drop the long-expired ones (failedPodsBackoff.GC)."""
    records.update(stepped)
    for key in [k for k, v in records.items() if v.expired(now)]:
        del records[key]

