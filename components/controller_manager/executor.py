"""Carrying out the actions a reconcile core returns, through the API client.

    executor = ActionExecutor(api, informers, EventRecorder(api, component="replicaset-controller"))
    await executor.execute(result.actions, observer=pod_bookkeeping)

Actions run in the order the core emitted them (a Deployment's new ReplicaSet exists before its
revision annotation is written; a status comes last), except that a run of consecutive
CreatePod / DeletePod actions (one slow-start batch) goes out concurrently. A failed pod write
is reported to the observer (the ReplicaSet expectations) and the rest still runs - the status
must still be written; any other failure stops the sync (the pod writes it skips are reported
too). Either way `execute` raises the first error at the end, so the key is retried with
backoff. `execute_independent` is for actions that don't build on each other (a garbage
collector pass): all of them go out at once.

How each write is made safe without holding locks:

* pod and object deletes carry a uid precondition: never delete a namesake created since;
* Node writes, pod status writes (the kubelet writes those too) and ownerReferences edits carry
  the resourceVersion they were computed from: a concurrent writer makes them fail with a
  Conflict, and the retry recomputes from fresher caches. Several writes to one object in one
  sync chain through the resourceVersion each write returns (a Node's conditions, then its
  taints), so they don't conflict with each other;
* a status is a merge patch on the status subresource (it can't touch spec or metadata) that
  also removes the fields the new status no longer has;
* a garbage-collector patch carries the object's uid (immutable, so a namesake rejects it);
* a finalizer removal (RemoveFinalizer) is a strategic merge patch deleting that one string
  from metadata.finalizers, with the uid: whatever other finalizers were added meanwhile stay;
* an object update (UpdateObject) carries the cached resourceVersion it was computed from; an
  object create (CreateObject) that finds the name taken is done: the informer reports the
  object that is there, and its sync judges that one.

"Gone" (NotFound, or a uid precondition failing because the name now belongs to another
object) is success for deletes and for writes to dependents: the informer reports the
deletion and the owner is synced again.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Protocol

from components.controllers import (Adopt, CreateObject, CreatePod, CreateReplicaSet,
                                    DeleteObject, DeletePod, DeleteReplicaSet, PatchObject,
                                    RecordEvent, Release, RemoveFinalizer, UpdateDeployment,
                                    UpdateNode, UpdateObject, UpdateReplicaSet, UpdateStatus)
from components.controllers.podutil import meta
from components.controller_manager.informers import SharedInformers, resource_of
from kubemu.api.resources import Resource
from kubemu.apiclient import AlreadyExists, ApiClient, Conflict, NotFound
from kubemu.events import EventRecorder

# Kinds whose status someone else writes too (the kubelet; evictions a PDB's; the CSR
# approver a request's conditions): status writes are guarded by RV.
_SHARED_STATUS = frozenset({"Node", "Pod", "PodDisruptionBudget", "CertificateSigningRequest"})
# At most this many garbage collector writes in flight (k8s' burst of pod writes, too).
MAX_CONCURRENT_WRITES = 500


class PodObserver(Protocol):
    """Told the outcome of each pod write of a batch (the ReplicaSet's expectations and its
    SuccessfulCreate / SuccessfulDelete events)."""

    def pod_created(self, action: CreatePod, pod: dict) -> None: ...

    def pod_create_failed(self, action: CreatePod, err: Exception) -> None: ...

    def pod_deleted(self, action: DeletePod) -> None: ...

    def pod_delete_failed(self, action: DeletePod, err: Exception) -> None: ...

    def pod_skipped(self, action: CreatePod | DeletePod) -> None: ...


def is_gone(err: Exception) -> bool:
    """NotFound, or a uid precondition that failed: the object we meant no longer exists."""
    return isinstance(err, NotFound) or (
        isinstance(err, Conflict) and str(err.message).startswith("Precondition failed: UID"))


def _ns(r: Resource, namespace: str | None) -> str | None:
    return (namespace or "default") if r.namespaced else None


def _object_key(kind: str, namespace: str | None, name: str) -> tuple:
    return kind, _ns(resource_of(kind), namespace), name


class ActionExecutor:
    def __init__(self, api: ApiClient, informers: SharedInformers, recorder: EventRecorder,
                 on_written: Callable[[CreateObject | UpdateObject | DeleteObject, dict | None],
                                      None] | None = None):
        self.api = api
        self.informers = informers
        self.recorder = recorder
        # told each object this executor created or updated (what the API returned) or deleted
        # (None): the EndpointSlice/Endpoints controllers' records of their own writes
        self.on_written = on_written

    async def execute(self, actions: Iterable, observer: PodObserver | None = None) -> None:
        written: dict[tuple, dict] = {}   # what this sync's writes returned, by object
        errors: list[Exception] = []
        groups = _batches(actions)
        for i, group in enumerate(groups):
            if isinstance(group, list):
                errors += await self._pod_batch(group, observer)
                continue
            try:
                await self._one(group, written)
            except Exception as err:
                errors.append(err)
                # later actions build on this one (a scale after a create): skip them, and
                # tell the observer of the pod writes that will never be observed
                if observer is not None:
                    for batch in groups[i + 1:]:
                        for action in batch if isinstance(batch, list) else ():
                            observer.pod_skipped(action)
                break
        if errors:
            raise errors[0]

    async def execute_independent(self, actions: Iterable) -> None:
        """Actions that don't build on each other (one garbage collector pass: each touches
        another object) all go out together, at most MAX_CONCURRENT_WRITES at a time; the
        first error is raised once all are done."""
        limit = asyncio.Semaphore(MAX_CONCURRENT_WRITES)

        async def one(action) -> None:
            async with limit:
                await self._one(action, {})

        results = await asyncio.gather(*(one(a) for a in actions), return_exceptions=True)
        errors = [r for r in results if isinstance(r, Exception)]
        if errors:
            raise errors[0]

    # -- pods, concurrently --

    async def _pod_batch(self, batch: list, observer: PodObserver | None) -> list[Exception]:
        """One slow-start batch, all at once (the core caps a batch at 500, as k8s does)."""
        async def one(action) -> Exception | None:
            try:
                if isinstance(action, CreatePod):
                    pod = await self.api.create("pods", action.pod, namespace=action.namespace)
                    if observer:
                        observer.pod_created(action, pod)
                else:
                    await self.api.delete("pods", action.name, namespace=action.namespace,
                                          preconditions={"uid": action.uid})
                    if observer:
                        observer.pod_deleted(action)
            except Exception as err:  # noqa: BLE001  (every failure is reported)
                if isinstance(action, DeletePod) and is_gone(err):
                    return None   # the informer will report the deletion
                if observer:
                    (observer.pod_create_failed if isinstance(action, CreatePod)
                     else observer.pod_delete_failed)(action, err)
                return err
            return None

        results = await asyncio.gather(*(one(a) for a in batch))
        return [err for err in results if err is not None]

    # -- everything else, in order --

    async def _one(self, action, written: dict) -> None:
        if isinstance(action, RecordEvent):
            self._event(action)
        elif isinstance(action, (Adopt, Release)):
            await self._owner_references(action, written)
        elif isinstance(action, UpdateStatus):
            await self._status(action, written)
        elif isinstance(action, CreateReplicaSet):
            await self.api.create("replicasets", action.replicaset, namespace=action.namespace)
        elif isinstance(action, UpdateReplicaSet):
            await self.api.patch("replicasets", action.name, action.changes, action.namespace)
        elif isinstance(action, UpdateDeployment):
            await self.api.patch("deployments", action.name, action.changes, action.namespace)
        elif isinstance(action, DeleteReplicaSet):
            await self._delete(resource_of("ReplicaSet"), action.namespace, action.name,
                               action.uid)
        elif isinstance(action, UpdateNode):
            await self._update_node(action, written)
        elif isinstance(action, DeleteObject):
            if await self._delete(resource_of(action.kind, action.api_version), action.namespace,
                                  action.name, action.uid, action.propagation_policy):
                self._written(action, None)
        elif isinstance(action, PatchObject):
            await self._patch_object(action)
        elif isinstance(action, CreateObject):
            await self._create_object(action)
        elif isinstance(action, UpdateObject):
            await self._update_object(action)
        elif isinstance(action, RemoveFinalizer):
            await self.remove_finalizer(action)
        else:
            raise TypeError(f"unknown action {action!r}")

    def _base(self, kind: str, namespace: str | None, name: str, written: dict) -> dict | None:
        """The newest version of an object we know: our own last write to it in this sync,
        else the cache."""
        return written.get(_object_key(kind, namespace, name)) or \
            self.informers.get(kind, namespace, name)

    def _remember(self, kind: str, namespace: str | None, name: str, obj: dict,
                  written: dict) -> None:
        written[_object_key(kind, namespace, name)] = obj

    def _event(self, action: RecordEvent) -> None:
        obj = self.informers.get(action.kind, action.namespace, action.name)
        if obj is None:  # not cached (deleted meanwhile): refer to it by name
            r = resource_of(action.kind)
            obj = {"apiVersion": r.api_version, "kind": action.kind,
                   "metadata": {"name": action.name, "namespace": _ns(r, action.namespace)}}
        self.recorder.event(obj, action.type, action.reason, action.message)

    async def _owner_references(self, action: Adopt | Release, written: dict) -> None:
        base = self._base(action.kind, action.namespace, action.name, written)
        if base is None or meta(base).get("uid") != action.uid:
            return  # gone since the sync looked
        refs = list(meta(base).get("ownerReferences") or [])
        if isinstance(action, Adopt):
            refs = [r for r in refs if r.get("uid") != action.owner_reference.get("uid")]
            refs.append(action.owner_reference)
        else:
            refs = [r for r in refs if r.get("uid") != action.owner_uid]
        r = resource_of(action.kind)
        body = {"metadata": {"ownerReferences": refs or None, "uid": action.uid,
                             "resourceVersion": meta(base).get("resourceVersion")}}
        try:
            obj = await self.api.patch(r.plural, action.name, body, _ns(r, action.namespace))
        except NotFound:
            return
        self._remember(action.kind, action.namespace, action.name, obj, written)

    async def _status(self, action: UpdateStatus, written: dict) -> None:
        r = resource_of(action.kind)
        base = self._base(action.kind, action.namespace, action.name, written)
        old = (base or {}).get("status") or {}
        body: dict = {"status": {**{k: None for k in old if k not in action.status},
                                 **action.status}}
        if action.kind in _SHARED_STATUS and base is not None:
            body["metadata"] = {"resourceVersion": meta(base).get("resourceVersion")}
        try:
            obj = await self.api.patch(r.plural, action.name, body, _ns(r, action.namespace),
                                       subresource="status")
        except NotFound:
            return  # deleted meanwhile: its delete event re-syncs whoever cares
        self._remember(action.kind, action.namespace, action.name, obj, written)

    async def _update_node(self, action: UpdateNode, written: dict) -> None:
        base = self._base("Node", None, action.name, written)
        body = dict(action.changes)
        if base is not None:
            body["metadata"] = {**(body.get("metadata") or {}),
                                "resourceVersion": meta(base).get("resourceVersion")}
        try:
            obj = await self.api.patch("nodes", action.name, body)
        except NotFound:
            return
        self._remember("Node", None, action.name, obj, written)

    async def _delete(self, r: Resource, namespace: str | None, name: str, uid: str,
                      policy: str | None = None) -> bool:
        """Delete; False if it was gone already."""
        try:
            await self.api.delete(r.plural, name, _ns(r, namespace), propagation_policy=policy,
                                  preconditions={"uid": uid})
        except (NotFound, Conflict) as err:
            if not is_gone(err):
                raise
            return False
        return True

    def _written(self, action, obj: dict | None) -> None:
        if self.on_written is not None:
            self.on_written(action, obj)

    async def _patch_object(self, action: PatchObject) -> None:
        r = resource_of(action.kind, action.api_version)
        guard = {"uid": action.uid}
        if action.resource_version:
            guard["resourceVersion"] = action.resource_version
        body = {**action.changes, "metadata": {**(action.changes.get("metadata") or {}), **guard}}
        try:
            await self.api.patch(r.plural, action.name, body, _ns(r, action.namespace))
        except NotFound:
            return

    async def remove_finalizer(self, action: RemoveFinalizer) -> None:
        """One finalizer off an object; gone already (or a namesake) is done."""
        r = resource_of(action.kind, action.api_version)
        patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [action.finalizer],
                              "uid": action.uid}}
        try:
            await self.api.patch(r.plural, action.name, patch, _ns(r, action.namespace),
                                 patch_type="strategic")
        except (NotFound, Conflict) as err:
            if not is_gone(err):
                raise

    async def _create_object(self, action: CreateObject) -> None:
        r = resource_of(action.object["kind"], action.object.get("apiVersion"))
        try:
            obj = await self.api.create(r.plural, action.object, _ns(r, action.namespace))
        except AlreadyExists:
            return  # the informer reports the object that is there
        self._written(action, obj)

    async def _update_object(self, action: UpdateObject) -> None:
        r = resource_of(action.object["kind"], action.object.get("apiVersion"))
        try:
            obj = await self.api.update(r.plural, action.object, _ns(r, action.namespace))
        except NotFound:
            return  # deleted meanwhile: its delete event syncs it again
        self._written(action, obj)


def _batches(actions: Iterable) -> list:
    """The actions, with each run of consecutive pod creates/deletes grouped into a list."""
    out: list = []
    for action in actions:
        if isinstance(action, (CreatePod, DeletePod)):
            if out and isinstance(out[-1], list):
                out[-1].append(action)
            else:
                out.append([action])
        else:
            out.append(action)
    return out
