"""The CSR signer's shell (k8s pkg/controller/certificates/signer): every approved request of a
signer it runs is signed by the cluster CA (--cluster-signing-cert-file / --cluster-signing-
key-file): the pure core (components/controllers/csrsigning.py) decides and makes the
certificate, and the executor writes it through the status subresource.
"""
from __future__ import annotations

import time

from components.controllers.csrsigning import sign
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder

COMPONENT = "csrsigning"


class CSRSigner:
    def __init__(self, api: ApiClient, informers: SharedInformers, ca, duration: float,
                 clock=time.time):
        self.ca = ca
        self.duration = duration
        self.clock = clock
        self.csrs = informers.informer("certificatesigningrequests")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("csrsigning", self.sync)
        self.csrs.add_event_handler(self._queue, lambda _old, new: self._queue(new), None)

    def _queue(self, csr: dict) -> None:
        self.workers.add((csr.get("metadata") or {}).get("name", ""))

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, name: str) -> None:
        csr = self.csrs.get(name)
        if csr is not None:
            await self.executor.execute(sign(csr, self.ca, self.clock(), self.duration))
