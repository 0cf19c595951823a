"""The CSR cleaner's shell (k8s pkg/controller/certificates/cleaner): every request is synced
when it is added or changed, and again when the next of its deadlines comes (Kubernetes polls
every hour instead); a sync runs the pure core (components/controllers/csrcleaner.py).
"""
from __future__ import annotations

import time

from components.controllers.csrcleaner import clean_csr
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder

COMPONENT = "csrcleaner"


class CSRCleaner:
    def __init__(self, api: ApiClient, informers: SharedInformers, clock=time.time):
        self.clock = clock
        self.csrs = informers.informer("certificatesigningrequests")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("csrcleaner", self.sync)
        self.csrs.add_event_handler(self._queue, lambda _old, new: self._queue(new), None)

    def _queue(self, csr: dict) -> None:
        self.workers.add((csr.get("metadata") or {}).get("name", ""))

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, name: str) -> float | None:
        actions, recheck = clean_csr(self.csrs.get(name), self.clock())
        await self.executor.execute(actions)
        return recheck
