"""The CronJob controller's shell (k8s pkg/controller/cronjob's ControllerV2).

Keys are CronJobs, queued when one is added or deleted, when a Job it controls changes, and at
the time the core says its next schedule comes (a changed schedule or time zone is requeued for
its own next time, as upstream's updateCronJob does). A sync hands the core the CronJob and the
Jobs it controls, after asking the apiserver what the cache cannot tell: the current CronJob
when a running Job of ours is missing from the cached status (our own status write may not be
cached yet), and whether an active Job the cache lacks is really gone. Then it runs the
core's deletes and events, creates the due Job (AlreadyExists: the Job of that name is fetched,
and added to ``active`` if it is ours: a controller killed between the create and the status
write), and writes the status.

The clock: real time plus the float in ``clock_offset_file`` (``--cronjob-clock-offset-file``,
a testing knob: tests move the CronJob clock by writing that file). The file is read on every
sync, and polled every CLOCK_POLL seconds: a change requeues every CronJob at once, since the
delays the queue holds were computed on the old clock. Absent or empty means 0; anything else
that is not a finite number means 0 and one warning (per content).
"""
from __future__ import annotations

import asyncio
import logging
import time

from components.controllers import UpdateStatus
from components.controllers.cronjob import (active_refs_not_cached, controls, job_started,
                                            requeue_after_schedule_change, sync_cronjob,
                                            unlisted_jobs)
from components.controllers.podutil import controller_ref, meta, object_key
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import CONTROLLER_INDEX, SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import AlreadyExists, ApiClient, NotFound
from kubemu.cache import DeletedFinalStateUnknown
from kubemu.events import EventRecorder

log = logging.getLogger("kubemu.controller_manager")

COMPONENT = "cronjob-controller"
CLOCK_POLL = 0.5   # seconds between reads of the clock offset file


# Beyond this the schedule arithmetic leaves datetime's years: such an offset is garbage.
MAX_CLOCK_OFFSET = 100 * 365.25 * 86400.0


def parse_offset(text: str) -> float | None:
    """The offset file's content in seconds: "" is 0, None if it is not a number of seconds
    within MAX_CLOCK_OFFSET either way."""
    text = text.strip()
    if not text:
        return 0.0
    try:
        value = float(text)
    except ValueError:
        return None
    return value if abs(value) <= MAX_CLOCK_OFFSET else None


class OffsetClock:
    """time.time() + the offset in a file (no file: real time)."""

    def __init__(self, path: str | None):
        self.path = path
        self.offset = 0.0
        self._bad: str | None = None   # the garbage content already warned about

    def read(self) -> float:
        """Re-read the file; the offset now in force."""
        if self.path is None:
            return 0.0
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                text = f.read(4096)
        except FileNotFoundError:
            text = ""
        except OSError as err:
            text = f"<unreadable: {err}>"
        value = parse_offset(text)
        if value is None:
            if text != self._bad:
                self._bad = text
                log.warning("cronjob clock offset file %s holds %r, not a number of seconds "
                            "within 100 years: using 0", self.path, text[:80])
            value = 0.0
        else:
            self._bad = None
        self.offset = value
        return value

    def now(self) -> float:
        return time.time() + self.read()


class CronJobController:
    def __init__(self, api: ApiClient, informers: SharedInformers,
                 clock_offset_file: str | None = None, workers: int = 5):
        self.api = api
        self.cronjobs = informers.informer("cronjobs")
        self.jobs = informers.informer("jobs")
        self.clock = OffsetClock(clock_offset_file)
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("cronjob", self.sync, workers)
        self.cronjobs.add_event_handler(self._enqueue, self._cronjob_updated, self._cronjob_deleted)
        self.jobs.add_event_handler(self._job_changed, self._job_updated, self._job_changed)

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [asyncio.create_task(self.workers.run(stop), name="cronjob workers")]
        if self.clock.path is not None:
            tasks.append(asyncio.create_task(self._watch_clock(stop), name="cronjob clock"))
        await asyncio.gather(*tasks)

    async def close(self) -> None:
        await self.recorder.close()

    async def _watch_clock(self, stop: asyncio.Event) -> None:
        last = self.clock.read()
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), CLOCK_POLL)
            except asyncio.TimeoutError:
                pass
            offset = self.clock.read()
            if offset != last:
                log.info("cronjob clock offset %gs -> %gs: syncing every CronJob", last, offset)
                last = offset
                for key in self.cronjobs.indexer.list_keys():
                    self.workers.add(key)

    # -- the sync --

    async def sync(self, key: str) -> float | None:
        cronjob = self.cronjobs.get(key)
        if cronjob is None:
            return None
        namespace, name = meta(cronjob).get("namespace") or "default", meta(cronjob).get("name")
        jobs = self.jobs.indexer.by_index(CONTROLLER_INDEX, meta(cronjob).get("uid"))
        if unlisted_jobs(cronjob, jobs):
            try:
                cronjob = await self.api.get("cronjobs", name, namespace)
            except NotFound:
                return None
        gone = set()
        for ref in active_refs_not_cached(cronjob, jobs):
            try:
                await self.api.get("jobs", ref.get("name"), namespace)
            except NotFound:
                gone.add(ref.get("uid"))
        result = sync_cronjob(cronjob, jobs, self.clock.now(), gone)
        status, update = result.status, result.update_status
        # a failed delete stops here: its Job stays active, and the retry recomputes
        await self.executor.execute(result.actions)
        if result.job is not None:
            try:
                job = await self._create(cronjob, result.job)
            except Exception:
                if update:   # what the sync learnt before the create still counts
                    await self._write_status(namespace, name, status)
                raise
            if job is not None:
                status, update = job_started(status, job, result.scheduled_time), True
        if update:
            await self._write_status(namespace, name, status)
        return result.requeue_after

    async def _write_status(self, namespace: str, name: str, status: dict) -> None:
        await self.executor.execute([UpdateStatus("CronJob", namespace, name, status)])

    async def _create(self, cronjob: dict, job: dict) -> dict | None:
        """Create the due Job; the Job to add to ``active`` (None: not ours to add)."""
        namespace, name = meta(job)["namespace"], meta(job)["name"]
        try:
            created = await self.api.create("jobs", job, namespace)
        except AlreadyExists:
            existing = await self.api.get("jobs", name, namespace)
            if not controls(cronjob, existing):
                return None   # someone else's Job of that name: theirs to account for
            if any(r.get("uid") == meta(existing).get("uid")
                   for r in (cronjob.get("status") or {}).get("active") or []):
                return None
            log.info("cronjob %s: job %s already exists", object_key(cronjob), name)
            return existing
        except Exception as err:
            self.recorder.event(cronjob, "Warning", "FailedCreate", f"Error creating job: {err}")
            raise
        self.recorder.event(cronjob, "Normal", "SuccessfulCreate", f"Created job {name}")
        return created

    # -- CronJob events --

    def _enqueue(self, cronjob: dict) -> None:
        self.workers.add(object_key(cronjob))

    def _cronjob_updated(self, old: dict, new: dict) -> None:
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if (old_spec.get("schedule"), old_spec.get("timeZone")) == \
                (new_spec.get("schedule"), new_spec.get("timeZone")):
            self._enqueue(new)
            return
        delay, events = requeue_after_schedule_change(new, self.clock.now())
        for event in events:
            self.recorder.event(new, event.type, event.reason, event.message)
        if delay is not None:
            self.workers.add_after(object_key(new), delay)

    def _cronjob_deleted(self, cronjob) -> None:
        self.workers.add(cronjob.key if isinstance(cronjob, DeletedFinalStateUnknown)
                         else object_key(cronjob))

    # -- Job events --

    def _owner_key(self, job: dict) -> str | None:
        """The key of the cached CronJob controlling ``job`` (same name and uid)."""
        ref = controller_ref(job)
        if ref is None or ref.get("kind") != "CronJob":
            return None
        key = f"{meta(job).get('namespace') or 'default'}/{ref.get('name')}"
        cronjob = self.cronjobs.get(key)
        if cronjob is None or meta(cronjob).get("uid") != ref.get("uid"):
            return None
        return key

    def _job_changed(self, job) -> None:
        if isinstance(job, DeletedFinalStateUnknown):
            job = job.obj
        key = self._owner_key(job)
        if key is not None:
            self.workers.add(key)

    def _job_updated(self, old: dict, new: dict) -> None:
        if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
            return   # a resync
        if controller_ref(old) != controller_ref(new):
            self._job_changed(old)
        self._job_changed(new)
