"""The bootstrap signer's shell (k8s pkg/controller/bootstrap/bootstrapsigner.go): cluster-info is
signed again whenever it or a bootstrap token Secret changes. The ConfigMap is watched by name
in kube-public (its own informer, as Kubernetes' signer has), the tokens through the shared
Secrets informer; a sync runs the pure core (components/controllers/bootstrapsigner.py).
"""
from __future__ import annotations

import asyncio
import time

from components.controllers.bootstrapsigner import CONFIGMAP, NAMESPACE, sign_cluster_info
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder
from kubemu.informer import Informer

COMPONENT = "bootstrap-signer"
KEY = f"{NAMESPACE}/{CONFIGMAP}"


class BootstrapSigner:
    def __init__(self, api: ApiClient, informers: SharedInformers, clock=time.time):
        self.clock = clock
        self.secrets = informers.informer("secrets")
        self.configmaps = Informer(api, "configmaps", namespace=NAMESPACE,
                                   field_selector=f"metadata.name={CONFIGMAP}")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("bootstrap-signer", self.sync)
        for informer in (self.secrets, self.configmaps):
            informer.add_event_handler(self._queue, lambda _old, _new: self._queue(), self._queue)

    def _queue(self, _obj=None) -> None:
        self.workers.add(KEY)

    async def run(self, stop) -> None:
        watching = asyncio.create_task(self.configmaps.run(stop), name="cluster-info informer")
        try:
            await self.workers.run(stop)
        finally:
            await asyncio.gather(watching, return_exceptions=True)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, _key: str) -> None:
        if not self.configmaps.has_synced():
            await self.configmaps.wait_for_sync()
        await self.executor.execute(sign_cluster_info(self.configmaps.get(KEY), self.secrets.list(),
                                                      self.clock()))
