"""The ServiceAccount controller's shell: a "default" ServiceAccount in every active namespace,
made again when deleted (k8s pkg/controller/serviceaccount).

Keys are namespace names, queued when a namespace is added or changes and when an ensured
ServiceAccount is deleted (the informer watches only those, by name). A sync reads both
caches, runs the pure core (components/controllers/serviceaccounts.py) and creates what is
missing.
"""
from __future__ import annotations

from components.controllers.podutil import meta
from components.controllers.serviceaccounts import ENSURED, sync_service_accounts
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient
from kubemu.cache import DeletedFinalStateUnknown
from kubemu.events import EventRecorder

COMPONENT = "service-account-controller"


def namespace_of(obj) -> str:
    """The namespace of a namespaced object, or of the final state of a missed delete."""
    if isinstance(obj, DeletedFinalStateUnknown):
        return obj.key.partition("/")[0]
    return meta(obj).get("namespace") or ""


class ServiceAccountsController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 1):
        self.namespaces = informers.informer("namespaces")
        self.accounts = informers.informer("serviceaccounts")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("serviceaccount", self.sync, workers)
        self.namespaces.add_event_handler(self._namespace, lambda _old, new: self._namespace(new),
                                          None)
        self.accounts.add_event_handler(None, None,
                                        lambda sa: self.workers.add(namespace_of(sa)))

    def _namespace(self, ns: dict) -> None:
        self.workers.add(meta(ns).get("name", ""))

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, namespace: str) -> None:
        existing = {name: sa for name in ENSURED
                    if (sa := self.accounts.get(f"{namespace}/{name}")) is not None}
        await self.executor.execute(sync_service_accounts(self.namespaces.get(namespace), existing))
