"""The namespace controller's shell: a namespace being deleted is emptied, then finalized.

Keys are namespace names, queued by the namespaces informer. A sync lists every namespaced
resource in the namespace live from the API (as k8s' controller does through discovery: the
shared caches hold only some resources), runs the pure core (components/controllers/namespace.py)
and carries out its actions; deletes are independent and go out together.
"""
from __future__ import annotations

import asyncio

from components.controllers.namespace import FinalizeNamespace, sync_namespace
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu.api.resources import RESOURCES
from kubemu.apiclient import ApiClient, NotFound
from kubemu.events import EventRecorder

COMPONENT = "namespace-controller"
NAMESPACED = tuple(r.plural for r in RESOURCES if r.namespaced and r.stored)


class NamespaceController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 2):
        self.api = api
        self.namespaces = informers.informer("namespaces")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("namespace", self.sync, workers)
        self.namespaces.add_event_handler(self._changed, lambda _old, new: self._changed(new), None)

    def _changed(self, ns: dict) -> None:
        if (ns.get("metadata") or {}).get("deletionTimestamp"):
            self.workers.add(ns["metadata"]["name"])

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, name: str) -> float | None:
        ns = self.namespaces.get(name)
        if ns is None:
            return None
        lists = await asyncio.gather(*(self.api.list_all(plural, name) for plural in NAMESPACED))
        contents = {plural: listed.get("items") or [] for plural, listed in zip(NAMESPACED, lists)}
        result = sync_namespace(ns, contents)
        deletes = [a for a in result.actions if not isinstance(a, FinalizeNamespace)]
        await self.executor.execute_independent(deletes)
        for action in result.actions:
            if isinstance(action, FinalizeNamespace):
                await self._finalize(ns, action)
        return result.requeue_after

    async def _finalize(self, ns: dict, action: FinalizeNamespace) -> None:
        if ns["metadata"].get("uid") != action.uid:
            return
        try:
            await self.api.finalize("namespaces", dict(ns, spec={**(ns.get("spec") or {}),
                                                                 "finalizers": list(action.finalizers)}))
        except NotFound:
            pass
