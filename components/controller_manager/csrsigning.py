"""The CSR signer's shell (k8s pkg/controller/certificates/signer): every approved request of a
signer it runs is signed by the cluster CA (--cluster-signing-cert-file / --cluster-signing-
key-file) and written through the status subresource; the pure core
(components/controllers/csrsigning.py) decides and makes the certificate.
"""
from __future__ import annotations

import time

from components.controllers.csrsigning import sign
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient


class CSRSigner:
    def __init__(self, api: ApiClient, informers: SharedInformers, ca, duration: float,
                 clock=time.time):
        self.api = api
        self.ca = ca
        self.duration = duration
        self.clock = clock
        self.csrs = informers.informer("certificatesigningrequests")
        self.workers = Workers("csrsigning", self.sync)
        self.csrs.add_event_handler(self._queue, lambda _old, new: self._queue(new), None)

    def _queue(self, csr: dict) -> None:
        self.workers.add((csr.get("metadata") or {}).get("name", ""))

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        pass

    async def sync(self, name: str) -> None:
        csr = self.csrs.get(name)
        signed = sign(csr, self.ca, self.clock(), self.duration) if csr is not None else None
        if signed is not None:
            await self.api.update_status("certificatesigningrequests", signed)
