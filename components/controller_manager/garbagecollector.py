"""The garbage collector's shell (k8s pkg/controller/garbagecollector).

The core is one pass over every cached object of the OWNER_KINDS (pods and the workloads and
claims that own them), so the work queue holds a single key. A pass runs every `period` seconds, and shortly (``DEBOUNCE``) after a change that
may give it work: an object deleted while others still name it as their owner, an object being
deleted with the ``orphan`` or ``foregroundDeletion`` finalizer, an object whose owner is
missing from the caches or being deleted. A cascade of thousands of pods is then one pass,
not thousands. Changes of ordinary owned objects (every pod a ReplicaSet creates) cost one
uid lookup and no pass.

An owner missing from the caches is not yet a missing owner: each resource has its own watch,
so the pod of a ReplicaSet created a moment ago can be cached before the ReplicaSet is. Like
k8s' attemptToDeleteItem, the shell confirms with a live GET that such an owner is really gone
(or replaced by a namesake with another uid) before deleting or unlinking a dependent; if it
still exists, the action waits for a later pass.
"""
from __future__ import annotations

import time

from components.controllers.garbagecollector import FOREGROUND, ORPHAN, sync_garbage
from components.controllers.podutil import is_terminating, meta
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers, resource_of
from components.controller_manager.workers import Workers
from kubemu.apiclient import ApiClient, NotFound
from kubemu.cache import DeletedFinalStateUnknown
from kubemu.events import EventRecorder

COMPONENT = "garbage-collector"
KEY = "all-objects"
# The kinds whose objects the collector caches: owners of others, or dependents of those.
OWNER_KINDS = ("Pod", "ReplicaSet", "Deployment", "StatefulSet", "DaemonSet", "ControllerRevision",
               "Job", "CronJob", "PersistentVolumeClaim")
DEBOUNCE = 0.2   # seconds: a burst of deletes becomes one pass
RECHECK = 1.0    # seconds: a pass after one that found the caches behind the API


def _pass_fields(obj: dict) -> tuple:
    """What `GarbageCollector._needs_pass` reads of an object (besides its owners' state)."""
    m = meta(obj)
    return m.get("deletionTimestamp"), m.get("finalizers"), m.get("ownerReferences")


class GarbageCollector:
    def __init__(self, api: ApiClient, informers: SharedInformers, period: float = 30.0):
        self.api = api
        self.informers = informers
        self.period = period
        self.sources = [informers.informer(resource_of(kind).plural) for kind in OWNER_KINDS]
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("garbagecollector", self.sync, 1)
        for informer in self.sources:
            informer.add_event_handler(self._added, self._updated, self._deleted)

    async def run(self, stop) -> None:
        self.workers.add(KEY)
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, _key: str) -> float:
        objects = [obj for informer in self.sources for obj in informer.list()]
        actions = sync_garbage(objects, time.time(), OWNER_KINDS)
        confirmed, behind = await self._confirm(actions)
        await self.executor.execute_independent(confirmed)
        return RECHECK if behind else self.period

    async def _confirm(self, actions: list) -> tuple[list, bool]:
        """The actions whose dependent's uncached owners are really gone; and whether some
        action was held back because an owner exists after all."""
        exists: dict[str, bool] = {}   # owner uid -> found by a live GET (one GET per owner)
        keep, behind = [], False
        for action in actions:
            obj = self.informers.by_uid(action.uid)
            if obj is not None:
                namespace = meta(obj).get("namespace")
                uncached = [ref for ref in meta(obj).get("ownerReferences") or []
                            if ref.get("kind") in OWNER_KINDS
                            and self.informers.by_uid(ref.get("uid")) is None]
                found = [await self._owner_exists(ref, namespace, exists) for ref in uncached]
                if any(found):
                    behind = True
                    continue
            keep.append(action)
        return keep, behind

    async def _owner_exists(self, ref: dict, namespace: str | None, memo: dict) -> bool:
        uid = ref.get("uid")
        if uid not in memo:
            r = resource_of(ref.get("kind"))
            try:
                owner = await self.api.get(r.plural, ref.get("name"),
                                           (namespace or "default") if r.namespaced else None)
                memo[uid] = meta(owner).get("uid") == uid
            except NotFound:
                memo[uid] = False
        return memo[uid]

    # -- events: schedule a pass only when there may be garbage --

    def _needs_pass(self, obj: dict) -> bool:
        m = meta(obj)
        if is_terminating(obj) and {ORPHAN, FOREGROUND} & set(m.get("finalizers") or []):
            return True
        for ref in m.get("ownerReferences") or []:
            owner = self.informers.by_uid(ref.get("uid"), ref.get("kind"))
            if owner is None:
                if ref.get("kind") in OWNER_KINDS:
                    return True
            elif is_terminating(owner):
                return True
        return False

    def _trigger(self) -> None:
        self.workers.add_after(KEY, DEBOUNCE)

    def _added(self, obj: dict) -> None:
        if self._needs_pass(obj):
            self._trigger()

    def _updated(self, old: dict, new: dict) -> None:
        # `old` too: a dependent that just dropped its reference to an orphaning owner lets
        # that owner's finalizer go. Asked only when it differs from `new` in what
        # `_needs_pass` reads (most updates change a status, and the owners are the same).
        if self._needs_pass(new) or (_pass_fields(old) != _pass_fields(new) and self._needs_pass(old)):
            self._trigger()

    def _deleted(self, obj) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        if self.informers.has_dependents(meta(obj).get("uid")) or self._needs_pass(obj):
            self._trigger()
