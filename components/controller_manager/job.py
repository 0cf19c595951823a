"""The Job controller's shell (k8s pkg/controller/job's Controller).

Event handlers map pod changes to the Job that controls them (an orphan to every Job of its
namespace whose selector matches it) and keep the records of `components.controllers.job`:
a pod of ours appearing is a creation observed; one disappearing or getting a
deletionTimestamp is a deletion observed; one seen without the tracking finalizer (or gone) is
a finalizer removal observed. A pod that still carries the finalizer while its Job is gone or
finished goes to a second queue that takes the finalizer off (k8s' orphan queue).

A sync hands the core the Job and the pods it may own, stores the new record *before* writing,
then runs the actions in order; the new pod-failure backoff is kept only once the first Job
status write (the one listing the newly finished pods as uncounted) succeeded, or at the end of
a sync without one, so a failed write never counts the same pods twice. The Job's status writes and the finalizer removals are this
shell's own, because their outcome matters: a status write carries the resourceVersion it was
computed from (a concurrent change is a Conflict, and the retry recomputes) and its result's
resourceVersion is remembered (no sync decides on a cached Job older than that); a finalizer
removal that failed is not expected any more. Everything else goes through the ActionExecutor.
The first status or finalizer failure stops the sync; the key is retried with backoff.
"""
from __future__ import annotations

import asyncio
import time

from components.controllers import CreatePod, DeletePod, RemoveFinalizer, UpdateStatus
from components.controllers.job import (Backoff, JobRecords, has_tracking_finalizer,
                                        is_finished, orphan_finalizer_removal, sync_job)
from components.controllers.podutil import (controller_ref, is_terminating, labels_of, meta,
                                            object_key, selector_matches)
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import (CONTROLLER_INDEX, SharedInformers,
                                                     orphan_value)
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient, NotFound
from kubemu.cache import NAMESPACE_INDEX, DeletedFinalStateUnknown
from kubemu.events import EventRecorder

COMPONENT = "job-controller"


def _rv(obj: dict) -> str | None:
    return meta(obj).get("resourceVersion")


def status_patch(old: dict, new: dict) -> dict:
    """A merge patch turning status `old` into `new` (keys `new` lacks are removed, nested
    objects such as uncountedTerminatedPods too)."""
    out: dict = {k: None for k in old if k not in new}
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(old.get(key), dict):
            out[key] = status_patch(old[key], value)
        else:
            out[key] = value
    return out


class JobController:
    def __init__(self, api: ApiClient, informers: SharedInformers, time_scale: float = 1.0,
                 workers: int = 5):
        self.api = api
        self.time_scale = time_scale
        self.pods = informers.informer("pods")
        self.jobs = informers.informer("jobs")
        self.records = JobRecords()
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("job", self.sync, workers)
        self.orphans = Workers("job-orphan-pod", self.sync_orphan, 1)
        self.jobs.add_event_handler(self._job_added, self._job_updated, self._job_deleted)
        self.pods.add_event_handler(self._pod_added, self._pod_updated,
                                    lambda pod: self._pod_deleted(pod, final=True))

    async def run(self, stop) -> None:
        await asyncio.gather(self.workers.run(stop), self.orphans.run(stop))

    async def close(self) -> None:
        await self.recorder.close()

    # -- the sync --

    async def sync(self, key: str) -> float | None:
        job = self.jobs.get(key)
        if job is None:
            self.records.forget(key)
            return None
        m = meta(job)
        pods = self.pods.indexer.by_index(CONTROLLER_INDEX, m.get("uid")) + \
            self.pods.indexer.by_index(CONTROLLER_INDEX, orphan_value(m.get("namespace")))
        result = sync_job(job, pods, self.records.get(key), time.time(), self.time_scale)
        self.records.set(key, result.record)
        await self._execute(key, job, result.actions, result.backoff)
        return result.requeue_after

    async def _execute(self, key: str, job: dict, actions: list, backoff: Backoff | None) -> None:
        observer = _PodBookkeeping(self, key, job)
        segments = _segments(actions)
        base = job
        errors: list[Exception] = []
        for i, segment in enumerate(segments):
            try:
                if isinstance(segment, UpdateStatus):
                    base = await self._write_status(key, base, segment)
                    if backoff is not None:
                        self.records.backoff_counted(key, backoff)
                        backoff = None
                elif isinstance(segment[0], RemoveFinalizer):
                    await self._remove_finalizers(key, segment)
                else:
                    await self.executor.execute(segment, observer)
            except Exception as err:
                errors.append(err)
                if isinstance(segment, UpdateStatus) or isinstance(segment[0], RemoveFinalizer):
                    # what follows builds on this write: skip it, expect none of it
                    for later in segments[i + 1:]:
                        self._skipped(key, later, observer)
                    break
        if errors:
            raise errors[0]
        if backoff is not None:
            self.records.backoff_counted(key, backoff)

    def _skipped(self, key: str, segment, observer: "_PodBookkeeping") -> None:
        for action in [] if isinstance(segment, UpdateStatus) else segment:
            if isinstance(action, (CreatePod, DeletePod)):
                observer.pod_skipped(action)
            elif isinstance(action, RemoveFinalizer):
                self.records.finalizer_removal_observed(key, action.uid)

    async def _write_status(self, key: str, base: dict, action: UpdateStatus) -> dict:
        body = {"metadata": {"resourceVersion": _rv(base)},
                "status": status_patch(base.get("status") or {}, action.status)}
        try:
            job = await self.api.patch("jobs", action.name, body, action.namespace,
                                       subresource="status")
        except NotFound:
            return base   # deleted meanwhile: nothing to count any more
        self.records.status_written(key, _rv(job))
        return job

    async def _remove_finalizers(self, key: str, actions: list[RemoveFinalizer]) -> None:
        results = await asyncio.gather(*(self.executor.remove_finalizer(a) for a in actions),
                                       return_exceptions=True)
        errors = []
        for action, result in zip(actions, results):
            if isinstance(result, Exception):
                # not removed: nothing to wait for, the retry sees the finalizer again
                self.records.finalizer_removal_observed(key, action.uid)
                errors.append(result)
        if errors:
            raise errors[0]

    # -- orphan pods: the tracking finalizer comes off --

    async def sync_orphan(self, key: str) -> None:
        pod = self.pods.get(key)
        if pod is None:
            return None
        removal = orphan_finalizer_removal(pod, self._controller(pod))
        if removal is not None:
            await self.executor.remove_finalizer(removal)
        return None

    def _controller(self, pod: dict) -> dict | None:
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "Job":
            return None
        job = self.jobs.get(f"{meta(pod).get('namespace') or 'default'}/{ref.get('name')}")
        if job is None or meta(job).get("uid") != ref.get("uid"):
            return None
        return job

    def _orphan(self, pod: dict) -> None:
        if has_tracking_finalizer(pod):
            self.orphans.add(object_key(pod))

    # -- Job events --

    def _job_added(self, job: dict) -> None:
        self.workers.add(object_key(job))

    def _job_updated(self, old: dict, new: dict) -> None:
        self.workers.add(object_key(new))
        if is_finished(new):
            self._cleanup_finalizers(new)   # a backstop: the sync removed them before

    def _job_deleted(self, job) -> None:
        if isinstance(job, DeletedFinalStateUnknown):
            key, job = job.key, job.obj
        else:
            key = object_key(job)
        self.records.forget(key)
        self.workers.add(key)
        if isinstance(job, dict):
            self._cleanup_finalizers(job)

    def _cleanup_finalizers(self, job: dict) -> None:
        for pod in self.pods.indexer.by_index(CONTROLLER_INDEX, meta(job).get("uid")):
            self._orphan(pod)

    # -- pod events --

    def _job_key(self, pod: dict) -> str | None:
        job = self._controller(pod)
        return object_key(job) if job is not None else None

    def _enqueue_matching(self, pod: dict) -> None:
        namespace = meta(pod).get("namespace") or "default"
        labels = labels_of(pod)
        for job in self.jobs.indexer.by_index(NAMESPACE_INDEX, namespace):
            if selector_matches((job.get("spec") or {}).get("selector"), labels):
                self.workers.add(object_key(job))

    def _pod_added(self, pod: dict) -> None:
        if is_terminating(pod):
            # a restarted controller finds pods already being deleted: not creations
            self._pod_deleted(pod, final=False)
            return
        if controller_ref(pod) is not None:
            key = self._job_key(pod)
            if key is not None:
                self.records.creation_observed(key)
                self.workers.add(key)
            else:
                self._orphan(pod)
            return
        self._orphan(pod)
        self._enqueue_matching(pod)

    def _pod_updated(self, old: dict, new: dict) -> None:
        if _rv(old) == _rv(new):
            return
        if is_terminating(new):
            self._pod_deleted(new, final=False)
            return
        removed = not has_tracking_finalizer(new)
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        if old_ref != new_ref and old_ref is not None:
            key = self._job_key(old)
            if key is not None:
                if removed:
                    self.records.finalizer_removal_observed(key, meta(new).get("uid"))
                self.workers.add(key)
        if new_ref is not None:
            key = self._job_key(new)
            if key is None:
                self._orphan(new)
                return
            if removed:
                self.records.finalizer_removal_observed(key, meta(new).get("uid"))
            self.workers.add(key)
            return
        self._orphan(new)
        if labels_of(old) != labels_of(new) or old_ref != new_ref:
            self._enqueue_matching(new)

    def _pod_deleted(self, pod, final: bool) -> None:
        if isinstance(pod, DeletedFinalStateUnknown):
            pod = pod.obj
        if controller_ref(pod) is None:
            self._orphan(pod)
            return
        job = self._controller(pod)
        if job is None or is_finished(job):
            self._orphan(pod)
            return
        key = object_key(job)
        uid = meta(pod).get("uid")
        self.records.deletion_observed(key, uid)
        if final or not has_tracking_finalizer(pod):
            self.records.finalizer_removal_observed(key, uid)
        self.workers.add(key)


def _segments(actions: list) -> list:
    """The actions, in order: each Job status write alone, each run of finalizer removals as a
    list, and each run of anything else as a list for the executor."""
    out: list = []
    for action in actions:
        if isinstance(action, UpdateStatus) and action.kind == "Job":
            out.append(action)
            continue
        removal = isinstance(action, RemoveFinalizer)
        if out and isinstance(out[-1], list) and isinstance(out[-1][0], RemoveFinalizer) == removal:
            out[-1].append(action)
        else:
            out.append([action])
    return out


class _PodBookkeeping:
    """One sync's pod writes: the records learn what will not be observed; the events k8s'
    pod control records (only the shell knows a created pod's generated name)."""

    def __init__(self, controller: JobController, key: str, job: dict):
        self.records = controller.records
        self.recorder = controller.recorder
        self.key = key
        self.job = job

    def pod_created(self, action: CreatePod, pod: dict) -> None:
        self.recorder.event(self.job, "Normal", "SuccessfulCreate",
                            f"Created pod: {meta(pod).get('name')}")

    def pod_create_failed(self, action: CreatePod, err: Exception) -> None:
        self.records.creation_observed(self.key)
        self.recorder.event(self.job, "Warning", "FailedCreate", f"Error creating: {err}")

    def pod_deleted(self, action: DeletePod) -> None:
        self.recorder.event(self.job, "Normal", "SuccessfulDelete", f"Deleted pod: {action.name}")

    def pod_delete_failed(self, action: DeletePod, err: Exception) -> None:
        self.records.deletion_observed(self.key, action.uid)
        self.recorder.event(self.job, "Warning", "FailedDelete", f"Error deleting: {err}")

    def pod_skipped(self, action: CreatePod | DeletePod) -> None:
        if isinstance(action, CreatePod):
            self.records.creation_observed(self.key)
        else:
            self.records.deletion_observed(self.key, action.uid)
