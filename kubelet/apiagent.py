"""The kubelet's side of the API: its Node, its Lease, mirror pods, the pods bound to it.

Runs inside the kubelet's loop once started with --api (after READY=1: static pods never wait
for the apiserver, which is itself a static pod):

* **the Node and its Lease**: kubelet/heartbeat.py.
* **pods**: an informer on `spec.nodeName=<node>` feeds the kubelet the pods bound to it
  (mirror pods excluded) — level-based, the whole set at a time.
* **mirror pods**: one per static pod, made again whenever it is missing, deleted or stale
  (from an older manifest); a mirror pod without a static pod is deleted.
* **ConfigMaps, Secrets and tokens** the pods read (kubelet/objectcache.py): watched while a
  pod bound here references them; `lookup` and `token` answer envvars.py and volumes.py from
  memory, and `on_objects` hears of every change.
* **Services** of every namespace (the kubelet's service informer): what envvars.py makes the
  pods' service variables of; a pod from the API waits for their first list, as for its objects.
* **status**: the latest status of each pod, coalesced, patched into the pod's status (the
  mirror pod's for a static pod), and patched again whenever the API's copy drifts from it; a terminated pod that is being deleted is then removed with
  grace 0 and a uid precondition (the kubelet's last word on a pod).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from kubemu.api.patch import json_equal, json_merge_patch
from kubemu.apiclient import ApiClient, is_already_exists, is_not_found
from kubemu.events import EventRecorder
from kubemu.informer import Informer
from kubemu.wire import WireError

from . import volumes
from .manifests import is_static
from .configsource import Unavailable, references
from .heartbeat import NodeHeartbeat
from .nodestatus import NodeConfig, NodeNetwork, is_mirror_pod, mirror_matches, mirror_pod
from .objectcache import ObjectCache, Ref, TokenCache

log = logging.getLogger("kubelet.api")

RETRY_INITIAL = 0.2
STATUS_WRITERS = 8  # status patches in flight at once


def pod_key(pod: dict) -> tuple[str, str]:
    meta = pod["metadata"]
    return meta.get("namespace") or "default", meta["name"]


class ApiAgent:
    def __init__(self, endpoint: str, config: NodeConfig, on_pods: Callable[[list[dict]], None], *,
                 credentials: tuple[str, str] | None = None, lease_duration: int = 40,
                 renew_interval: float = 10.0, status_interval: float = 300.0,
                 network: Callable[[dict | None], NodeNetwork] | None = None,
                 on_objects: Callable[[set[Ref]], None] | None = None):
        self.config = config
        self.node = config.name
        self.on_pods = on_pods
        self.api = ApiClient(endpoint, credentials=credentials, timeout=10.0)
        self.heartbeat = NodeHeartbeat(self.api, config, lease_duration, renew_interval, status_interval, network)
        self.recorder = EventRecorder(self.api, "kubelet", host=self.node)
        self.informer = Informer(self.api, "pods", field_selector=f"spec.nodeName={self.node}")
        self.informer.add_event_handler(lambda _o: self._changed(), lambda _o, _n: self._changed(),
                                        lambda _o: self._changed())
        self.services = Informer(self.api, "services")
        self.static: dict[tuple[str, str], dict] = {}
        self._latest: dict[tuple[str, str], tuple[str, dict]] = {}  # key -> (uid, status) of each pod
        self._sent: dict[tuple[str, str], dict] = {}  # key -> the status the API has
        self._queued: dict[tuple[str, str], None] = {}  # keys whose latest status is to be sent
        self._finished: dict[tuple[str, str], str] = {}  # terminated pods to delete -> uid
        self._wake = asyncio.Event()
        self._sync_scheduled = False
        self._mirror_ops: set[tuple[str, str]] = set()
        self._stop = asyncio.Event()
        # on_objects(refs): these ConfigMaps/Secrets changed (an empty set: a token came)
        self.on_objects = on_objects or (lambda refs: None)
        self.objects = ObjectCache(self.api, lambda ref: self.on_objects({ref}))
        self.tokens = TokenCache(self.api, lambda: self.on_objects(set()))

    @property
    def synced(self) -> bool:
        return self.informer.has_synced()

    async def run(self) -> None:
        tasks = [asyncio.create_task(self.informer.run(self._stop), name="pod informer"),
                 asyncio.create_task(self.services.run(self._stop), name="service informer"),
                 asyncio.create_task(self.heartbeat.run(), name="node heartbeat"),
                 asyncio.create_task(self._first_sync(), name="first sync"),
                 *(asyncio.create_task(self._write_statuses(), name="status writer")
                   for _ in range(STATUS_WRITERS))]
        try:
            await asyncio.gather(*tasks)
        finally:
            self._stop.set()
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.recorder.close(timeout=1.0)
            await self.objects.close()
            await self.api.close()

    async def _first_sync(self) -> None:
        """An empty first LIST calls no handler: sync once it is in, so mirror pods get made."""
        await self.informer.wait_for_sync()
        self._changed()

    # -- what the kubelet tells us -----------------------------------------------------------

    def set_static_pods(self, pods: list[dict]) -> None:
        self.static = {pod_key(p): p for p in pods}
        self._changed()

    def pod_status(self, pod: dict, status: dict) -> None:
        """Queue the latest status of a pod (static: its mirror pod's)."""
        key = pod_key(pod)
        self._latest[key] = (pod["metadata"].get("uid", ""), status)
        if self._sent.get(key) != status:
            self._queued[key] = None
            self._wake.set()

    def pod_terminated(self, pod: dict) -> None:
        """A pod's containers are all gone and it is no longer desired: if the API still has it
        (being deleted), remove it for good."""
        key = pod_key(pod)
        self._latest.pop(key, None)
        self._sent.pop(key, None)
        if is_static(pod):
            return
        self._finished[key] = pod["metadata"].get("uid", "")
        self._wake.set()

    def event(self, pod: dict, type_: str, reason: str, message: str, field_path: str | None) -> None:
        self.recorder.event(pod, type_, reason, message, field_path)

    # -- what the pods read (configsource.Lookup, volumes.TokenSource) -----------------------

    def lookup(self, resource: str, namespace: str, name: str) -> dict | None:
        return self.objects.lookup(resource, namespace, name)

    def token(self, namespace: str, service_account: str, audience: str | None, expiration: int,
              pod: dict) -> str:
        return self.tokens.token(namespace, service_account, audience, expiration, pod)

    async def claimed_volume(self, namespace: str, claim: str) -> volumes.ClaimedVolume | volumes.VolumeError:
        """Where claim `claim`'s volume is: the claim, then its volume, each read from the API
        when asked (the node may only `get` them, as the kubelet's populator reads them)."""
        try:
            pvc = await self._get("persistentvolumeclaims", claim, namespace)
            name = ((pvc or {}).get("spec") or {}).get("volumeName")
            pv = await self._get("persistentvolumes", name) if name else None
        except WireError as err:
            return volumes.VolumeError(f"error processing PVC {namespace}/{claim}: "
                                       f"failed to fetch PVC from API server: {err.message}")
        return volumes.claimed_volume(namespace, claim, pvc, pv)

    async def _get(self, resource: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return await self.api.get(resource, name, namespace)
        except WireError as err:
            if is_not_found(err):
                return None
            raise

    def service_list(self) -> list[dict] | None:
        """Every Service, None until they have been listed once."""
        return self.services.list() if self.services.has_synced() else None

    def objects_synced(self, pod: dict) -> bool:
        return (is_static(pod) or self.services.has_synced()) and self.objects.synced(references(pod)) and all(
            self.tokens.holds(*volumes.token_request(pod, p), pod) for p in volumes.token_projections(pod))

    async def wait_for_objects(self, pod: dict, timeout: float) -> bool:
        """True once every ConfigMap and Secret `pod` reads is known, and its projected tokens
        have been asked for and answered (as the kubelet's volume set-up waits for them), and,
        for a pod from the API, the Services have been listed (its variables need them);
        False after `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if not is_static(pod) and not await self.services.wait_for_sync(timeout):
            return False
        if not await self.objects.wait_synced(references(pod), max(0.0, deadline - loop.time())):
            return False
        for projection in volumes.token_projections(pod):
            try:
                self.tokens.token(*volumes.token_request(pod, projection), pod)
            except Unavailable:
                pass  # asked for now
        await self.tokens.settled(pod, max(0.0, deadline - loop.time()))
        return True

    # -- pods and mirror pods ---------------------------------------------------------------

    def _changed(self) -> None:
        if not self._sync_scheduled:
            self._sync_scheduled = True
            asyncio.get_running_loop().call_soon(self._sync)

    def _sync(self) -> None:
        self._sync_scheduled = False
        if not self.informer.has_synced():
            return
        pods = self.informer.list()
        bound = [p for p in pods if not is_mirror_pod(p)]
        # before on_pods: a pod the kubelet starts finds its objects watched
        self.objects.set_references(set().union(*map(references, bound)))
        self.tokens.forget({p["metadata"].get("uid") for p in bound})
        self.on_pods(bound)
        mirrors = {pod_key(p): p for p in pods if is_mirror_pod(p)}
        for key, static in self.static.items():
            mirror = mirrors.get(key)
            if mirror is None:
                self._mirror_op(key, self._create_mirror(static))
            elif not mirror_matches(mirror, static):
                self._mirror_op(key, self._delete_mirror(mirror))
        for key, mirror in mirrors.items():
            if key not in self.static:
                self._mirror_op(key, self._delete_mirror(mirror))
        # Level-based, like the kubelet's status manager: whenever the API's copy of a pod's
        # status is not what the kubelet would post (a mirror pod made just now, or someone
        # else's write - the node lifecycle controller marks pods not ready while a node is
        # unreachable), post it again.
        for key, (_uid, status) in self._latest.items():
            cached = self.informer.get(f"{key[0]}/{key[1]}")
            if cached is None or key in self._queued:
                continue
            current = cached.get("status") or {}
            if not json_equal(json_merge_patch(current, status), current):
                self._queued[key] = None
                self._wake.set()

    def _mirror_op(self, key: tuple[str, str], coro) -> None:
        if key in self._mirror_ops:  # one at a time per pod; the next sync sees its result
            coro.close()
            return
        self._mirror_ops.add(key)
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(lambda _t: (self._mirror_ops.discard(key), self._changed()))

    async def _create_mirror(self, static: dict) -> None:
        try:
            await self.api.create("pods", mirror_pod(static), namespace=pod_key(static)[0])
            log.info("created mirror pod %s/%s", *pod_key(static))
            self._sent.pop(pod_key(static), None)  # its status is posted anew once we see it
        except WireError as err:
            if not is_already_exists(err):
                log.warning("creating mirror pod %s/%s: %s", *pod_key(static), err)
                await asyncio.sleep(RETRY_INITIAL)

    async def _delete_mirror(self, mirror: dict) -> None:
        try:
            await self.api.delete("pods", mirror["metadata"]["name"], namespace=pod_key(mirror)[0],
                                  grace_period_seconds=0, preconditions={"uid": mirror["metadata"]["uid"]})
            log.info("deleted mirror pod %s/%s", *pod_key(mirror))
        except WireError as err:
            if not is_not_found(err):
                log.warning("deleting mirror pod %s/%s: %s", *pod_key(mirror), err)
                await asyncio.sleep(RETRY_INITIAL)

    # -- status and final deletion ------------------------------------------------------------

    async def _write_statuses(self) -> None:
        while True:
            if not self._queued and not self._finished:
                self._wake.clear()
                await self._wake.wait()
                continue
            if self._queued:
                key = next(iter(self._queued))
                del self._queued[key]
                if key in self._latest:
                    await self._write_status(key, *self._latest[key])
            else:
                key = next(iter(self._finished))
                uid = self._finished.pop(key)
                await self._delete_finished(key, uid)

    async def _write_status(self, key: tuple[str, str], uid: str, status: dict) -> None:
        cached = self.informer.get(f"{key[0]}/{key[1]}")
        if cached is None:
            return  # not (yet) in the API: a mirror pod's creation re-posts it
        if key in self.static:
            if not is_mirror_pod(cached):
                return
        elif cached["metadata"].get("uid") != uid:
            return  # another pod with that name now
        try:
            await self.api.patch("pods", key[1], {"status": status}, namespace=key[0], subresource="status")
            self._sent[key] = status
        except WireError as err:
            if not is_not_found(err):
                log.info("status of pod %s/%s: %s (retrying)", *key, err)
                await asyncio.sleep(RETRY_INITIAL)
                self._queued[key] = None

    async def _delete_finished(self, key: tuple[str, str], uid: str) -> None:
        cached = self.informer.get(f"{key[0]}/{key[1]}")
        if cached is None or cached["metadata"].get("uid") != uid or not cached["metadata"].get("deletionTimestamp"):
            return
        try:
            await self.api.delete("pods", key[1], namespace=key[0], grace_period_seconds=0,
                                  preconditions={"uid": uid})
            self._sent.pop(key, None)
        except WireError as err:
            if not is_not_found(err):
                log.info("deleting pod %s/%s: %s (retrying)", *key, err)
                await asyncio.sleep(RETRY_INITIAL)
                self._finished.setdefault(key, uid)
