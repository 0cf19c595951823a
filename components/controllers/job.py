"""The Job controller's reconcile core (a re-implementation of k8s pkg/controller/job, 1.32).

``sync_job(job, pods, record, now, time_scale) -> JobSync`` is pure: the cached Job, the cached
pods of its namespace, the Job's ``JobRecord`` (what the controller has asked for and not yet
seen, and its pod-failure backoff) and the time give the actions, the new record, and when to
look again.

Finalizer-based tracking (k8s' design): every pod the controller creates carries the finalizer
``batch.kubernetes.io/job-tracking``, so a finished pod cannot vanish before it is counted. A
finished pod is counted in three writes, in this order, each a separate action:

1. its uid goes into ``status.uncountedTerminatedPods`` (UpdateStatus);
2. its finalizer is removed (RemoveFinalizer on the pod);
3. uids of pods that no longer carry the finalizer move from ``uncountedTerminatedPods`` into
   ``status.succeeded`` / ``status.failed`` (UpdateStatus).

A pod with the finalizer that is not in the uncounted lists is new; one in them is not counted
again; one without the finalizer was counted (or is in the uncounted lists, and moves). So a
restart between any two writes neither loses nor doubles a pod. Indexed Jobs count succeeded
indexes (``completedIndexes``) instead of uids. The shell runs the actions in order and stops
at the first failure (the retry recomputes from the caches).

Stale caches are covered by the record, like k8s' expectations: pod creations/deletions not
yet observed (``adds``/``deletes``), finalizer removals not yet observed (``removing``: such a
pod is treated as counted), and the Job's own last status write (``status_rv``: no decision is
taken on a cached Job older than what we wrote, or a pod whose finalizer is gone but whose
count we do not see yet would be replaced twice).

Terminal conditions are set as 1.31+ do: ``FailureTarget`` / ``SuccessCriteriaMet`` first
(active pods are deleted), then ``Failed`` / ``Complete`` once no pod is uncounted or
terminating.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Iterable

from components.controllers import (CreatePod, DeletePod, PatchObject, RecordEvent,
                                    RemoveFinalizer, UpdateStatus)
from components.controllers.podutil import (claim_objects, controller_ref, format_time,
                                            is_pod_ready, is_terminating, meta, owner_reference,
                                            parse_time, pod_from_template, pod_phase,
                                            rank_for_deletion, selector_is_empty)

KIND = "Job"
API_VERSION = "batch/v1"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
INDEX_ENV = "JOB_COMPLETION_INDEX"

DEFAULT_BACKOFF = 10.0        # k8s DefaultJobPodFailureBackOff
MAX_BACKOFF = 360.0           # the documented cap of the pod-failure backoff (6 minutes)
MIN_REQUEUE = 1.0             # k8s syncJobBatchPeriod: the shortest delayed re-sync
MAX_UNCOUNTED = 500           # k8s MaxUncountedPods
MAX_PODS_PER_SYNC = 500       # k8s MaxPodCreateDeletePerSync
EXPECTATIONS_TTL = 300.0      # k8s ExpectationsTimeout
DEFAULT_BACKOFF_LIMIT = 6
UNLIMITED = 2**31 - 1         # backoffLimit's default beside backoffLimitPerIndex

BACKOFF_LIMIT_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"
MAX_FAILED_INDEXES_MESSAGE = "Job has exceeded the specified maximal number of failed indexes"
FAILED_INDEXES_MESSAGE = "Job has failed indexes"
SUCCESS_MESSAGE = "Reached expected number of succeeded pods"


# --- the record ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backoff:
    """k8s backoffRecord: failures since the last success, and when the last one finished."""
    failures: int = 0
    last_failure: float | None = None

    def after(self, succeeded: list[dict], failed: list[dict], now: float) -> "Backoff":
        """The record once these newly finished pods are taken into account."""
        if not failed:
            return Backoff() if succeeded else self
        failed_times = sorted(finish_time(p, now) for p in failed)
        if not succeeded:
            return Backoff(self.failures + len(failed), failed_times[-1])
        last_success = max(finish_time(p, now) for p in succeeded)
        later = [t for t in failed_times if t > last_success]
        return Backoff(len(later), later[-1] if later else None)

    def remaining(self, now: float, time_scale: float) -> float:
        """Seconds before a new pod may be created (0: now)."""
        if self.failures <= 0 or self.last_failure is None:
            return 0.0
        delay = DEFAULT_BACKOFF * 2 ** min(self.failures - 1, 32)
        return max(0.0, min(delay, MAX_BACKOFF) * time_scale - (now - self.last_failure))


@dataclass(frozen=True)
class JobRecord:
    """What one Job's controller has asked for and not yet seen, and its backoff."""
    adds: int = 0                          # pod creations not yet observed
    deletes: frozenset = frozenset()       # uids of pod deletions not yet observed
    timestamp: float = 0.0                 # when adds/deletes were set (for the TTL)
    removing: frozenset = frozenset()      # uids whose finalizer removal is not yet observed
    status_rv: int | None = None           # resourceVersion our last status write returned
    backoff: Backoff = Backoff()

    def satisfied(self, now: float) -> bool:
        return (self.adds <= 0 and not self.deletes) or now - self.timestamp > EXPECTATIONS_TTL


class JobRecords:
    """The shell's per-Job records ("<namespace>/<name>"), with the informer handlers' calls."""

    def __init__(self) -> None:
        self.records: dict[str, JobRecord] = {}

    def get(self, key: str) -> JobRecord | None:
        return self.records.get(key)

    def set(self, key: str, record: JobRecord | None) -> None:
        if record is None or record == JobRecord():
            self.records.pop(key, None)
        else:
            self.records[key] = record

    def forget(self, key: str) -> None:
        self.records.pop(key, None)

    def _update(self, key: str, **changes) -> None:
        record = self.records.get(key)
        if record is not None:
            self.set(key, dataclasses.replace(record, **{k: f(record) for k, f in changes.items()}))

    def creation_observed(self, key: str) -> None:
        self._update(key, adds=lambda r: r.adds - 1)

    def deletion_observed(self, key: str, uid: str) -> None:
        self._update(key, deletes=lambda r: r.deletes - {uid})

    def finalizer_removal_observed(self, key: str, uid: str) -> None:
        self._update(key, removing=lambda r: r.removing - {uid})

    def backoff_counted(self, key: str, backoff: Backoff) -> None:
        record = self.records.get(key) or JobRecord()
        self.set(key, dataclasses.replace(record, backoff=backoff))

    def status_written(self, key: str, resource_version: str | None) -> None:
        rv = _int_rv(resource_version)
        record = self.records.get(key) or JobRecord()
        self.set(key, dataclasses.replace(record, status_rv=rv))


@dataclass(frozen=True)
class JobSync:
    actions: list
    record: JobRecord | None
    requeue_after: float | None = None
    # The backoff once the newly finished pods are counted: kept (JobRecords.backoff_counted)
    # only after the sync's first Job status write succeeds, the one that puts them in
    # uncountedTerminatedPods, or a failed write would count the same pods again on the retry.
    # None: unchanged.
    backoff: Backoff | None = None


# --- small rules ----------------------------------------------------------------------------


def _int_rv(rv) -> int | None:
    try:
        return int(rv)
    except (TypeError, ValueError):
        return None


def has_tracking_finalizer(pod: dict) -> bool:
    return TRACKING_FINALIZER in (meta(pod).get("finalizers") or [])


def finished_condition(job: dict) -> dict | None:
    """The Job's Complete or Failed condition that is True (k8s util.FinishedCondition)."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return c
    return None


def is_finished(job: dict) -> bool:
    """k8s util.IsJobFinished."""
    return finished_condition(job) is not None


def finished_at(job: dict) -> float | None:
    """When the Job finished (its Complete/Failed condition's lastTransitionTime)."""
    c = finished_condition(job)
    return parse_time(c.get("lastTransitionTime")) if c is not None else None


def is_indexed(job: dict) -> bool:
    return (job.get("spec") or {}).get("completionMode") == "Indexed"


def completion_index(pod: dict) -> int | None:
    value = (meta(pod).get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        index = int(value)
    except (TypeError, ValueError):
        return None
    return index if index >= 0 else None


def _terminal(pod: dict) -> bool:
    return pod_phase(pod) in ("Succeeded", "Failed")


def _active(pod: dict) -> bool:
    return not _terminal(pod) and not is_terminating(pod)


def _pod_terminating(pod: dict) -> bool:
    """k8s controller.IsPodTerminating: being deleted and not terminal yet."""
    return not _terminal(pod) and is_terminating(pod)


def only_replace_failed(job: dict) -> bool:
    spec = job.get("spec") or {}
    return spec.get("podReplacementPolicy") == "Failed" or spec.get("podFailurePolicy") is not None


def is_pod_failed(pod: dict, job: dict) -> bool:
    """A Failed pod; or, unless only failed pods are replaced, a pod deleted before it
    succeeded (orphans that never reach the Failed phase)."""
    if pod_phase(pod) == "Failed":
        return True
    if only_replace_failed(job):
        return False
    return is_terminating(pod) and pod_phase(pod) != "Succeeded"


def finish_time(pod: dict, now: float) -> float:
    """When a pod finished: its containers' latest finishedAt, else its deletion, else now."""
    status = pod.get("status") or {}
    times = [parse_time(((cs.get("state") or {}).get("terminated") or {}).get("finishedAt"))
             for cs in (status.get("containerStatuses") or [])
             + (status.get("initContainerStatuses") or [])]
    times = [t for t in times if t is not None]
    if times:
        return max(times)
    deleted = parse_time(meta(pod).get("deletionTimestamp"))
    return deleted if deleted is not None else now


# --- pod failure policy -----------------------------------------------------------------------


def _exit_code_matches(code: int, requirement: dict) -> bool:
    values = requirement.get("values") or []
    if requirement.get("operator") == "In":
        return code in values
    if requirement.get("operator") == "NotIn":
        return code not in values
    return False


def _matching_container(statuses: list, requirement: dict) -> dict | None:
    for cs in statuses or []:
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated is None:
            continue  # still terminating: no exit code to match
        name = requirement.get("containerName")
        code = int(terminated.get("exitCode") or 0)
        if (name is None or name == cs.get("name")) and code != 0 \
                and _exit_code_matches(code, requirement):
            return cs
    return None


def match_pod_failure_policy(policy: dict | None, pod: dict) -> tuple[str | None, bool, str | None]:
    """k8s matchPodFailurePolicy: (the Job's failure message for a FailJob rule, whether the
    failure counts towards backoffLimit, the matched action)."""
    if policy is None:
        return None, True, None
    status = pod.get("status") or {}
    m = meta(pod)
    for index, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        if rule.get("onExitCodes") is not None:
            requirement = rule["onExitCodes"]
            cs = _matching_container(status.get("containerStatuses"), requirement) or \
                _matching_container(status.get("initContainerStatuses"), requirement)
            if cs is None:
                continue
            code = int(cs["state"]["terminated"].get("exitCode") or 0)
            message = (f"Container {cs.get('name')} for pod {m.get('namespace')}/{m.get('name')} "
                       f"failed with exit code {code} matching {action} rule at index {index}")
        elif rule.get("onPodConditions") is not None:
            condition = next((c for c in status.get("conditions") or []
                              for pattern in rule["onPodConditions"]
                              if c.get("type") == pattern.get("type")
                              and c.get("status") == (pattern.get("status") or "True")), None)
            if condition is None:
                continue
            message = (f"Pod {m.get('namespace')}/{m.get('name')} has condition "
                       f"{condition.get('type')} matching {action} rule at index {index}")
        else:
            continue
        if action == "Ignore":
            return None, False, action
        if action in ("Count", "FailIndex"):
            return None, True, action
        if action == "FailJob":
            return message, True, action
    return None, True, None


# --- indexes ----------------------------------------------------------------------------------


def parse_indexes(text: str | None, completions: int) -> set[int]:
    """"1,3-5" -> {1, 3, 4, 5}, ignoring anything at or beyond `completions`."""
    out: set[int] = set()
    for part in (text or "").split(","):
        first, _, last = part.strip().partition("-")
        try:
            lo, hi = int(first), int(last or first)
        except ValueError:
            continue
        out.update(range(max(lo, 0), min(hi, completions - 1) + 1))
    return out


def format_indexes(indexes: Iterable[int]) -> str:
    """{1, 3, 4, 5} -> "1,3-5" (k8s orderedIntervals.String)."""
    parts: list[str] = []
    run: list[int] = []
    for ix in sorted(set(indexes)):
        if run and ix == run[-1] + 1:
            run.append(ix)
            continue
        if run:
            parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [ix]
    if run:
        parts.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(parts)


def _indexed_pods_for_removal(pods: list[dict], completions: int) -> tuple[list, list]:
    """k8s appendDuplicatedIndexPodsForRemoval: active pods without a valid index, with an index
    out of range, or repeating an index (all but the best of each) go; the rest stay."""
    remove, keep = [], []
    by_index: dict[int, list[dict]] = {}
    for pod in pods:
        ix = completion_index(pod)
        if ix is None or ix >= completions:
            remove.append(pod)
        else:
            by_index.setdefault(ix, []).append(pod)
    for ix in sorted(by_index):
        ranked = rank_for_deletion(by_index[ix])
        remove += ranked[:-1]
        keep.append(ranked[-1])
    return remove, keep


def pods_for_removal(job: dict, active: list[dict], at_least: int, completions: int) -> list[dict]:
    """k8s activePodsForRemoval."""
    remove, left = (_indexed_pods_for_removal(active, completions) if is_indexed(job)
                    else ([], active))
    if len(remove) < at_least:
        remove += rank_for_deletion(left)[:at_least - len(remove)]
    return remove


# --- the pods of a Job --------------------------------------------------------------------------


def claim_pods(job: dict, pods: Iterable[dict]) -> tuple[list[dict], list]:
    """k8s getPodsForJob: the Job's pods (any phase), after adopting matching orphans (the
    tracking finalizer added with the ownerReference) and releasing its pods that no longer
    match."""
    owner_ref = owner_reference(job, KIND, API_VERSION)

    def adopt(pod: dict) -> tuple[PatchObject, dict]:
        pm = meta(pod)
        refs = list(pm.get("ownerReferences") or []) + [owner_ref]
        finalizers = list(pm.get("finalizers") or [])
        if TRACKING_FINALIZER not in finalizers:
            finalizers.append(TRACKING_FINALIZER)
        patch = PatchObject("v1", "Pod", pm.get("namespace") or "default", pm.get("name"),
                            pm.get("uid"), {"metadata": {"ownerReferences": refs,
                                                         "finalizers": finalizers}},
                            pm.get("resourceVersion"))
        return patch, {**pod, "metadata": {**pm, "ownerReferences": refs,
                                           "finalizers": finalizers}}

    return claim_objects(job, pods, "Pod", owner_ref, adopt=adopt)


def remove_finalizer(pod: dict) -> RemoveFinalizer:
    pm = meta(pod)
    return RemoveFinalizer("v1", "Pod", pm.get("namespace") or "default", pm.get("name"),
                           pm.get("uid"), TRACKING_FINALIZER)


def orphan_finalizer_removal(pod: dict, job: dict | None) -> RemoveFinalizer | None:
    """k8s syncOrphanPod: a pod still carrying the tracking finalizer whose Job is gone (or
    finished, or is not its controller any more) loses the finalizer."""
    if not has_tracking_finalizer(pod):
        return None
    ref = controller_ref(pod)
    if ref is not None:
        if ref.get("kind") != KIND or ref.get("apiVersion") != API_VERSION:
            return None
        if job is not None and meta(job).get("uid") == ref.get("uid") and not is_finished(job):
            return None
    return remove_finalizer(pod)


# --- backoffLimitPerIndex ---------------------------------------------------------------------


def _count_annotation(pod: dict | None, key: str) -> int:
    try:
        return max(0, int((meta(pod or {}).get("annotations") or {}).get(key)))
    except (TypeError, ValueError):
        return 0


def _index_failures(job: dict, spec: "_Spec", pod: dict | None) -> tuple[int, int]:
    """(counted, ignored) failures of an index once its pod `pod` (None: no pod failed yet)
    is taken into account (k8s addIndexFailureCountAnnotation)."""
    counted = _count_annotation(pod, INDEX_FAILURE_COUNT)
    ignored = _count_annotation(pod, INDEX_IGNORED_FAILURE_COUNT)
    if pod is not None and is_pod_failed(pod, job):
        if match_pod_failure_policy(spec.policy, pod)[1]:
            counted += 1
        else:
            ignored += 1
    return counted, ignored


def _index_failed(job: dict, spec: "_Spec", pod: dict) -> bool:
    """k8s isIndexFailed: a FailIndex rule matched the failed pod, or its counted failure went
    past backoffLimitPerIndex."""
    if not is_pod_failed(pod, job):
        return False
    _, counts, action = match_pod_failure_policy(spec.policy, pod)
    if action == "FailIndex":
        return True
    return counts and _count_annotation(pod, INDEX_FAILURE_COUNT) >= (spec.per_index or 0)


def _last_failed_per_index(job: dict, pods: list[dict], indexes: list[int]) -> dict:
    """The failed pod of each index with the most failures behind it (the newest)."""
    out: dict = {ix: None for ix in indexes}
    for pod in pods:
        ix = completion_index(pod)
        if ix in out and is_pod_failed(pod, job):
            best = out[ix]
            key = lambda p: (_count_annotation(p, INDEX_FAILURE_COUNT)  # noqa: E731
                             + _count_annotation(p, INDEX_IGNORED_FAILURE_COUNT),
                             finish_time(p, 0.0))
            if best is None or key(pod) > key(best):
                out[ix] = pod
    return out


def _index_backoff(job: dict, spec: "_Spec", pod: dict | None, now: float) -> Backoff:
    """k8s getRemainingTimePerIndex: an index backs off by all its failures so far."""
    if pod is None:
        return Backoff()
    counted, ignored = _index_failures(job, spec, pod)
    return Backoff(counted + ignored, finish_time(pod, now))


# --- the pod template -----------------------------------------------------------------------


def _with_index_env(containers: list) -> list:
    out = []
    for c in containers or []:
        c = dict(c)
        env = list(c.get("env") or [])
        if not any(e.get("name") == INDEX_ENV for e in env):
            env.append({"name": INDEX_ENV, "valueFrom": {"fieldRef": {
                "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']"}}})
        c["env"] = env
        out.append(c)
    return out


def new_pod(job: dict, index: int | None, previous: dict | None = None,
            settings: "_Spec | None" = None) -> dict:
    """The pod the Job creates (k8s manageJob): the template, the tracking finalizer, and for an
    Indexed Job the completion index as annotation, label, env and hostname; with
    backoffLimitPerIndex, the index's failure counts so far (from `previous`, its last failed
    pod)."""
    m = meta(job)
    name, namespace = m.get("name"), m.get("namespace") or "default"
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    tmeta = template.setdefault("metadata", {})
    finalizers = list(tmeta.get("finalizers") or [])
    if TRACKING_FINALIZER not in finalizers:
        finalizers.append(TRACKING_FINALIZER)
    tmeta["finalizers"] = finalizers
    prefix = f"{name}-"
    if index is not None:
        spec = template.setdefault("spec", {})
        spec["containers"] = _with_index_env(spec.get("containers"))
        if spec.get("initContainers"):
            spec["initContainers"] = _with_index_env(spec["initContainers"])
        tmeta["annotations"] = {**(tmeta.get("annotations") or {}), COMPLETION_INDEX: str(index)}
        if settings is not None and settings.per_index is not None:
            counted, ignored = _index_failures(job, settings, previous)
            tmeta["annotations"][INDEX_FAILURE_COUNT] = str(counted)
            if ignored:
                tmeta["annotations"][INDEX_IGNORED_FAILURE_COUNT] = str(ignored)
        tmeta["labels"] = {**(tmeta.get("labels") or {}), COMPLETION_INDEX: str(index)}
        spec["hostname"] = f"{name}-{index}"
        prefix = f"{name}-{index}-"
        if len(prefix) > 58:  # k8s podGenerateNameWithIndex: keep room for the random suffix
            prefix = f"{name[:58 - len(str(index)) - 2]}-{index}-"
    return pod_from_template(template, namespace, job, KIND, prefix)


# --- conditions ---------------------------------------------------------------------------------


def _condition(ctype: str, status: str, reason: str, message: str, now: float) -> dict:
    stamp = format_time(now)
    return {"type": ctype, "status": status, "reason": reason, "message": message,
            "lastProbeTime": stamp, "lastTransitionTime": stamp}


def _find(conditions: list[dict], ctype: str) -> dict | None:
    return next((c for c in conditions if c.get("type") == ctype), None)


def _ensure(conditions: list[dict], ctype: str, status: str, reason: str, message: str,
            now: float) -> tuple[list[dict], bool]:
    """k8s ensureJobConditionStatus (a False condition is never added, only set)."""
    current = _find(conditions, ctype)
    if current is not None:
        if (current.get("status"), current.get("reason"), current.get("message")) == \
                (status, reason, message):
            return conditions, False
        return [(_condition(ctype, status, reason, message, now) if c is current else c)
                for c in conditions], True
    if status == "False":
        return conditions, False
    return conditions + [_condition(ctype, status, reason, message, now)], True


def _true(job: dict, ctype: str) -> dict | None:
    c = _find((job.get("status") or {}).get("conditions") or [], ctype)
    return c if c is not None and c.get("status") == "True" else None


# --- the sync -----------------------------------------------------------------------------------


@dataclass
class _Spec:
    parallelism: int
    completions: int | None
    backoff_limit: int
    suspended: bool
    deadline: int | None
    policy: dict | None
    restart_policy: str
    per_index: int | None          # backoffLimitPerIndex (Indexed Jobs)
    max_failed_indexes: int | None

    @staticmethod
    def of(job: dict) -> "_Spec":
        spec = job.get("spec") or {}
        completions = spec.get("completions")
        if completions is None and spec.get("parallelism") is None:
            completions = 1   # the apiserver's default for a Job that sets neither
        parallelism = spec.get("parallelism")
        backoff = spec.get("backoffLimit")
        per_index = spec.get("backoffLimitPerIndex") if is_indexed(job) else None
        if backoff is None:
            backoff = UNLIMITED if per_index is not None else DEFAULT_BACKOFF_LIMIT
        return _Spec(1 if parallelism is None else int(parallelism),
                     None if completions is None else int(completions), int(backoff),
                     bool(spec.get("suspend")), spec.get("activeDeadlineSeconds"),
                     spec.get("podFailurePolicy"),
                     ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") or "",
                     None if per_index is None else int(per_index),
                     spec.get("maxFailedIndexes"))


def past_backoff_limit_on_failure(spec: _Spec, pods: list[dict]) -> bool:
    """restartPolicy OnFailure: the containers' restarts in running/pending pods reach the
    backoffLimit (any restart with a limit of 0)."""
    if spec.restart_policy != "OnFailure":
        return False
    restarts = sum(int(cs.get("restartCount") or 0)
                   for p in pods if pod_phase(p) in ("Running", "Pending")
                   for cs in ((p.get("status") or {}).get("initContainerStatuses") or [])
                   + ((p.get("status") or {}).get("containerStatuses") or []))
    return restarts > 0 if spec.backoff_limit == 0 else restarts >= spec.backoff_limit


def sync_job(job: dict, pods: Iterable[dict], record: JobRecord | None, now: float,
             time_scale: float = 1.0) -> JobSync:
    record = record or JobRecord()
    m = meta(job)
    namespace, name = m.get("namespace") or "default", m.get("name")
    if record.status_rv is not None and (_int_rv(m.get("resourceVersion")) or 0) < record.status_rv:
        return JobSync([], record)   # our last status write is not in the cache yet
    if is_finished(job):
        return JobSync([], None)
    spec_obj = job.get("spec") or {}
    mode = spec_obj.get("completionMode")
    if mode not in (None, "NonIndexed", "Indexed"):
        return JobSync([RecordEvent(namespace, KIND, name, "Warning", "UnknownCompletionMode",
                                    "Skipped Job sync because completion mode is unknown")], record)
    if selector_is_empty(spec_obj.get("selector")):
        return JobSync([], record)   # the apiserver never lets one through
    spec = _Spec.of(job)
    indexed = is_indexed(job)
    completions = spec.completions if spec.completions is not None else 0
    old_status = job.get("status") or {}
    status = copy.deepcopy(old_status)
    uncounted = status.get("uncountedTerminatedPods") or {}
    uncounted_succeeded = list(uncounted.get("succeeded") or [])
    uncounted_failed = list(uncounted.get("failed") or [])
    satisfied = record.satisfied(now)
    requeue: list[float] = []

    owned, actions = claim_pods(job, pods)
    active_pods = [p for p in owned if _active(p)]
    ready = sum(1 for p in active_pods if is_pod_ready(p))
    terminating = sum(1 for p in owned if _pod_terminating(p))
    active = len(active_pods)

    def valid(pod: dict) -> bool:
        if not indexed:
            return True
        ix = completion_index(pod)
        return ix is not None and ix < completions

    def new_finished(skip: list[str], finished) -> list[dict]:
        return [p for p in owned if has_tracking_finalizer(p) and meta(p).get("uid") not in skip
                and meta(p).get("uid") not in record.removing and valid(p) and finished(p)]

    new_succeeded = new_finished(uncounted_succeeded, lambda p: pod_phase(p) == "Succeeded")
    new_failed = new_finished(uncounted_failed, lambda p: is_pod_failed(p, job))
    counted_failed = [p for p in new_failed
                      if match_pod_failure_policy(spec.policy, p)[1]]
    succeeded = int(status.get("succeeded") or 0) + len(new_succeeded) + len(uncounted_succeeded)
    failed = int(status.get("failed") or 0) + len(counted_failed) + len(uncounted_failed)

    if status.get("startTime") is None and not spec.suspended:
        status["startTime"] = format_time(now)
    backoff = record.backoff.after(new_succeeded, new_failed, now)

    # -- is the Job done? --
    finished = _true(job, "SuccessCriteriaMet")
    if finished is None:
        target = _true(job, "FailureTarget")
        if target is not None:
            finished = _condition("Failed", "True", target.get("reason", ""),
                                  target.get("message", ""), now)
        elif spec.policy is not None:
            for pod in owned:
                if is_pod_failed(pod, job):
                    message = match_pod_failure_policy(spec.policy, pod)[0]
                    if message is not None:
                        finished = _condition("FailureTarget", "True", "PodFailurePolicy",
                                              message, now)
                        break
    if finished is None:
        start = parse_time(status.get("startTime"))
        if failed > spec.backoff_limit or past_backoff_limit_on_failure(spec, owned):
            finished = _condition("FailureTarget", "True", "BackoffLimitExceeded",
                                  BACKOFF_LIMIT_MESSAGE, now)
        elif spec.deadline is not None and start is not None and not spec.suspended:
            left = start + int(spec.deadline) - now
            if left <= 0:
                finished = _condition("FailureTarget", "True", "DeadlineExceeded",
                                      DEADLINE_MESSAGE, now)
            else:
                requeue.append(left)

    prev_indexes: set[int] = set()
    succeeded_indexes: set[int] = set()
    if indexed:
        prev_indexes = parse_indexes(status.get("completedIndexes"), completions)
        succeeded_indexes = prev_indexes | {completion_index(p) for p in new_succeeded}
        succeeded = len(succeeded_indexes)
    failed_indexes: set[int] | None = None
    if indexed and spec.per_index is not None:
        failed_indexes = parse_indexes(status.get("failedIndexes"), completions) | {
            completion_index(p) for p in owned if valid(p) and _index_failed(job, spec, p)}
        if finished is None:
            if spec.max_failed_indexes is not None and \
                    len(failed_indexes) > int(spec.max_failed_indexes):
                finished = _condition("FailureTarget", "True", "MaxFailedIndexesExceeded",
                                      MAX_FAILED_INDEXES_MESSAGE, now)
            elif failed_indexes and len(failed_indexes) + succeeded >= completions:
                finished = _condition("FailureTarget", "True", "FailedIndexes",
                                      FAILED_INDEXES_MESSAGE, now)
        status["failedIndexes"] = format_indexes(failed_indexes)

    creates_deletes: list = []
    new_record = record
    if finished is not None:
        # every active pod goes; the finish waits until they are gone
        for pod in active_pods:
            pm = meta(pod)
            creates_deletes.append(DeletePod(namespace, pm.get("name"), pm.get("uid")))
        if not satisfied:
            finished = None
        terminating += active
        ready = 0
        active = 0
    else:
        manage_ran = False
        if satisfied and not is_terminating(job):
            manage_ran = True
            active, ready, terminating, manage_actions, new_record, wait = _manage(
                job, spec, active_pods, owned, succeeded,
                succeeded_indexes | (failed_indexes or set()),
                terminating, ready, new_record, backoff, now, time_scale)
            creates_deletes += manage_actions
            if wait:
                requeue.append(wait)
        if spec.completions is None:
            complete = succeeded > 0 and active == 0
        else:
            complete = succeeded >= spec.completions and active == 0
        conditions = list(status.get("conditions") or [])
        if complete:
            finished = _condition("SuccessCriteriaMet", "True", "CompletionsReached",
                                  SUCCESS_MESSAGE, now)
        elif manage_ran:
            if spec.suspended:
                conditions, changed = _ensure(conditions, "Suspended", "True", "JobSuspended",
                                              "Job suspended", now)
                if changed:
                    actions.append(RecordEvent(namespace, KIND, name, "Normal", "Suspended",
                                               "Job suspended"))
            else:
                conditions, changed = _ensure(conditions, "Suspended", "False", "JobResumed",
                                              "Job resumed", now)
                if changed:
                    actions.append(RecordEvent(namespace, KIND, name, "Normal", "Resumed",
                                               "Job resumed"))
                    # activeDeadlineSeconds counts continuous activity: it starts again
                    status["startTime"] = format_time(now)
        if conditions:
            status["conditions"] = conditions
    actions += creates_deletes

    status["active"] = active
    status["ready"] = ready
    status["terminating"] = terminating
    track_actions, new_record = _track(job, spec, status, owned, finished, prev_indexes,
                                       succeeded_indexes, indexed, completions,
                                       uncounted_succeeded, uncounted_failed, new_record, now)
    actions += track_actions
    return JobSync(actions, new_record, min(requeue) if requeue else None,
                   backoff if backoff != record.backoff else None)


def _manage(job, spec: _Spec, active_pods, owned, succeeded, done_indexes, terminating,
            ready, record: JobRecord, backoff: Backoff, now, time_scale):
    """k8s manageJob: delete what is too much, create what is missing (after the backoff).
    `done_indexes`: the succeeded (and failed) indexes, never started again.
    Returns (active, ready, terminating, actions, record, requeue)."""
    namespace = meta(job).get("namespace") or "default"
    active = len(active_pods)
    completions = spec.completions or 0
    actions: list = []
    if spec.suspended:
        doomed = pods_for_removal(job, active_pods, active, completions)
        return (active - len(doomed), ready - sum(1 for p in doomed if is_pod_ready(p)),
                terminating + len(doomed), _delete_pods(namespace, doomed),
                _expect_deletes(record, doomed, now), None)
    if spec.completions is None:
        want = active if succeeded > 0 else spec.parallelism
    else:
        want = max(0, min(spec.completions - succeeded, spec.parallelism))
    doomed = pods_for_removal(job, active_pods, max(0, active - want), completions)
    doomed = doomed[:MAX_PODS_PER_SYNC]
    if doomed:
        return (active - len(doomed), ready - sum(1 for p in doomed if is_pod_ready(p)),
                terminating + len(doomed), _delete_pods(namespace, doomed),
                _expect_deletes(record, doomed, now), None)
    waiting = terminating if only_replace_failed(job) else 0
    diff = want - waiting - active
    if diff <= 0:
        return active, ready, terminating, actions, record, None
    wait = backoff.remaining(now, time_scale) if spec.per_index is None else 0.0
    if wait > 0:
        return active, ready, terminating, actions, record, max(wait, MIN_REQUEUE * time_scale)
    diff = min(diff, MAX_PODS_PER_SYNC)
    if is_indexed(job):
        running = {completion_index(p) for p in active_pods}
        pending = [ix for ix in range(completions)
                   if ix not in done_indexes and ix not in running][:diff]
        previous = {ix: None for ix in pending}
        if spec.per_index is not None:
            # each index backs off on its own failures (k8s getPodCreationInfoForIndependentIndexes)
            previous = _last_failed_per_index(job, owned, pending)
            waits = {ix: _index_backoff(job, spec, previous[ix], now).remaining(now, time_scale)
                     for ix in pending}
            ready_now = [ix for ix in pending if waits[ix] <= 0]
            if pending and not ready_now:
                return (active, ready, terminating, actions, record,
                        max(min(waits.values()), MIN_REQUEUE * time_scale))
            pending = ready_now
        actions = [CreatePod(namespace, new_pod(job, ix, previous[ix], spec)) for ix in pending]
    else:
        actions = [CreatePod(namespace, new_pod(job, None)) for _ in range(diff)]
    record = dataclasses.replace(record, adds=len(actions), deletes=frozenset(), timestamp=now)
    return active + len(actions), ready, terminating, actions, record, None


def _delete_pods(namespace: str, pods: list[dict]) -> list:
    """k8s deleteJobPods: the finalizer goes first (a pod deleted on purpose is no failure),
    then the pod."""
    out: list = [remove_finalizer(p) for p in pods if has_tracking_finalizer(p)]
    return out + [DeletePod(namespace, meta(p).get("name"), meta(p).get("uid")) for p in pods]


def _expect_deletes(record: JobRecord, pods: list[dict], now: float) -> JobRecord:
    return dataclasses.replace(record, adds=0, timestamp=now,
                               deletes=frozenset(meta(p).get("uid") for p in pods))


def _track(job, spec: _Spec, status: dict, owned, finished, prev_indexes, succeeded_indexes,
           indexed, completions, uncounted_succeeded, uncounted_failed, record: JobRecord,
           now) -> tuple[list, JobRecord]:
    """k8s trackJobStatusAndRemoveFinalizers: status with the newly finished pods as uncounted,
    finalizer removals, status with them counted (and the terminal condition once nothing is
    left uncounted or terminating)."""
    m = meta(job)
    namespace, name = m.get("namespace") or "default", m.get("name")
    old_status = job.get("status") or {}
    with_finalizer = {meta(p).get("uid") for p in owned
                      if has_tracking_finalizer(p) and meta(p).get("uid") not in record.removing}
    succeeded_n = int(status.get("succeeded") or 0)
    failed_n = int(status.get("failed") or 0)

    def move(uids: list[str]) -> tuple[list[str], int]:
        kept = [u for u in uids if u in with_finalizer]
        return kept, len(uids) - len(kept)

    # uncounted pods whose finalizer went already are counted now
    uncounted_succeeded, moved = move(uncounted_succeeded)
    succeeded_n += moved
    uncounted_failed, moved = move(uncounted_failed)
    failed_n += moved

    to_remove: list[dict] = []
    new_indexes: list[int] = []
    terminal_failure = finished is not None and finished.get("type") != "SuccessCriteriaMet"
    for pod in sorted(owned, key=lambda p: (completion_index(p) or 0)) if indexed else owned:
        uid = meta(pod).get("uid")
        if not has_tracking_finalizer(pod) or uid in record.removing:
            continue   # counted in an earlier sync
        failed_pod = is_pod_failed(pod, job)
        if not (is_terminating(job) or finished is not None or pod_phase(pod) == "Succeeded"
                or failed_pod):
            continue   # still running: its finalizer stays
        to_remove.append(pod)
        if pod_phase(pod) == "Succeeded" and uid not in uncounted_failed:
            if indexed:
                ix = completion_index(pod)
                if ix is not None and ix < completions and ix not in prev_indexes:
                    new_indexes.append(ix)
            elif uid not in uncounted_succeeded:
                uncounted_succeeded.append(uid)
        elif failed_pod or terminal_failure:
            # a Job that failed counts every pod it did not see succeed as failed
            ix = completion_index(pod)
            if uid not in uncounted_failed and \
                    (not indexed or (ix is not None and ix < completions)):
                if match_pod_failure_policy(spec.policy, pod)[1]:
                    uncounted_failed.append(uid)
        if len(new_indexes) + len(uncounted_succeeded) + len(uncounted_failed) >= MAX_UNCOUNTED:
            break
    reached_max = \
        len(new_indexes) + len(uncounted_succeeded) + len(uncounted_failed) >= MAX_UNCOUNTED

    status["succeeded"] = succeeded_n
    status["failed"] = failed_n
    status["uncountedTerminatedPods"] = _uncounted(uncounted_succeeded, uncounted_failed)
    if indexed:
        all_indexes = succeeded_indexes | set(new_indexes)
        status["completedIndexes"] = format_indexes(all_indexes)
        status["succeeded"] = len(all_indexes)
    conditions = list(status.get("conditions") or [])
    if finished is not None and finished["type"] == "FailureTarget":
        conditions.append(finished)
        finished = _condition("Failed", "True", finished["reason"], finished["message"], now)
    elif finished is not None and finished["type"] == "SuccessCriteriaMet":
        if _true(job, "SuccessCriteriaMet") is None:
            conditions.append(finished)
        finished = _condition("Complete", "True", finished["reason"], finished["message"], now)
    if conditions:
        status["conditions"] = conditions

    actions: list = []
    first = status
    if _differs(old_status, first):
        actions.append(UpdateStatus(KIND, namespace, name, copy.deepcopy(first)))
    removing = record.removing
    if to_remove:
        actions += [remove_finalizer(p) for p in to_remove]
        removing = removing | {meta(p).get("uid") for p in to_remove}
    # what the status reads once those finalizers are gone
    second = copy.deepcopy(first)
    gone = {meta(p).get("uid") for p in to_remove}
    left_s = [u for u in uncounted_succeeded if u not in gone]
    left_f = [u for u in uncounted_failed if u not in gone]
    if not indexed:
        second["succeeded"] = first["succeeded"] + len(uncounted_succeeded) - len(left_s)
    second["failed"] = first["failed"] + len(uncounted_failed) - len(left_f)
    second["uncountedTerminatedPods"] = _uncounted(left_s, left_f)
    events: list = []
    if finished is not None and not reached_max and not left_s and not left_f \
            and int(second.get("terminating") or 0) == 0:
        second["conditions"], _ = _ensure(list(second.get("conditions") or []), finished["type"],
                                          "True", finished["reason"], finished["message"], now)
        if finished["type"] == "Complete":
            second["completionTime"] = finished["lastTransitionTime"]
            if spec.completions is not None and second["succeeded"] > spec.completions:
                events.append(RecordEvent(namespace, KIND, name, "Warning", "TooManySucceededPods",
                                          "Too many succeeded pods running after completion "
                                          "count reached"))
            events.append(RecordEvent(namespace, KIND, name, "Normal", "Completed",
                                      "Job completed"))
        else:
            events.append(RecordEvent(namespace, KIND, name, "Warning", finished["reason"],
                                      finished["message"]))
    if second != first:
        actions.append(UpdateStatus(KIND, namespace, name, second))
    actions += events
    return actions, dataclasses.replace(record, removing=removing)


def _uncounted(succeeded: list[str], failed: list[str]) -> dict:
    out: dict = {}
    if succeeded:
        out["succeeded"] = list(succeeded)
    if failed:
        out["failed"] = list(failed)
    return out


def _differs(old: dict, new: dict) -> bool:
    def norm(s: dict) -> dict:
        return {k: v for k, v in s.items() if v not in (None, {}, [], "")
                and not (k in ("active", "ready", "terminating", "succeeded", "failed") and v == 0)}
    return norm(old) != norm(new)


__all__ = ["sync_job", "JobSync", "JobRecord", "JobRecords", "Backoff", "is_finished",
           "finished_condition", "finished_at", "orphan_finalizer_removal", "match_pod_failure_policy", "new_pod",
           "parse_indexes", "format_indexes", "TRACKING_FINALIZER",
           "COMPLETION_INDEX"]
