"""The TTL-after-finished controller's shell (k8s pkg/controller/ttlafterfinished).

Every Job added or updated that is finished and has ``ttlSecondsAfterFinished`` is queued; a
sync requeues it for when its TTL runs out, and then reads the Job fresh from the apiserver
(the cache may be behind a change of the TTL, or the Job may have been replaced) and deletes
that one, Foreground, with its uid as a precondition.
"""
from __future__ import annotations

import logging
import time

from components.controllers.podutil import meta, object_key
from components.controllers.ttlafterfinished import delete, needs_cleanup, time_left
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient, NotFound
from kubemu.events import EventRecorder

log = logging.getLogger("kubemu.controller_manager")
COMPONENT = "ttl-after-finished-controller"


class TTLAfterFinishedController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 5):
        self.api = api
        self.jobs = informers.informer("jobs")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("ttl-after-finished", self.sync, workers)
        self.jobs.add_event_handler(self._job_changed, lambda old, new: self._job_changed(new),
                                    lambda job: None)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    def _job_changed(self, job: dict) -> None:
        if needs_cleanup(job):
            self.workers.add(object_key(job))

    async def sync(self, key: str) -> float | None:
        job = self.jobs.get(key)
        if job is None:
            return None
        left = time_left(job, time.time())
        if left is None or left > 0:
            return left
        m = meta(job)
        try:
            fresh = await self.api.get("jobs", m.get("name"), m.get("namespace"))
        except NotFound:
            return None
        left = time_left(fresh, time.time())
        if left is None or left > 0:
            return left
        log.info("cleaning up Job %s", key)
        await self.executor.execute([delete(fresh)])
        return None
