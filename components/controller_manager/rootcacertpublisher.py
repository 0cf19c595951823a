"""The root CA publisher's shell: the ConfigMap kube-root-ca.crt, holding the cluster CA, in
every active namespace, made again when deleted and set back when changed (k8s
pkg/controller/certificates/rootcacertpublisher).

Keys are namespace names, queued when a namespace is added or changes and when its
kube-root-ca.crt is added, changed or deleted (the informer watches only ConfigMaps of that
name). A sync reads both caches and runs the pure core
(components/controllers/rootcacertpublisher.py).
"""
from __future__ import annotations

from components.controllers.podutil import meta
from components.controllers.rootcacertpublisher import CONFIGMAP, sync_root_ca
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.serviceaccounts import namespace_of
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder

COMPONENT = "root-ca-cert-publisher"


class RootCACertPublisher:
    def __init__(self, api: ApiClient, informers: SharedInformers, root_ca: str,
                 workers: int = 1):
        self.root_ca = root_ca
        self.namespaces = informers.informer("namespaces")
        self.configmaps = informers.informer("configmaps")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("root-ca-cert-publisher", self.sync, workers)
        self.namespaces.add_event_handler(self._namespace, lambda _old, new: self._namespace(new),
                                          None)
        self.configmaps.add_event_handler(self._configmap, lambda _old, new: self._configmap(new),
                                          self._configmap)

    def _namespace(self, ns: dict) -> None:
        self.workers.add(meta(ns).get("name", ""))

    def _configmap(self, cm) -> None:
        self.workers.add(namespace_of(cm))

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, namespace: str) -> None:
        await self.executor.execute(sync_root_ca(self.namespaces.get(namespace),
                                                 self.configmaps.get(f"{namespace}/{CONFIGMAP}"),
                                                 self.root_ca))
