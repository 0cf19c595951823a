"""The kubelet's copies of the ConfigMaps and Secrets its pods read, and of their
ServiceAccount tokens (kubelet/apiagent.py owns them; envvars.py and volumes.py read them).

* **ObjectCache**, the kubelet's watch-based manager (its default
  configMapAndSecretChangeDetectionStrategy, Watch): one list+watch per object the node's pods
  reference (`metadata.name=<name>` in its namespace), started when the first pod references
  it and stopped when the last one is gone, so an edit reaches the kubelet at once and the
  volumes within a sync. `lookup` answers from memory: the object, None (the API has none),
  or Unavailable until its first list is in. An object seen `immutable` is not watched any
  more (it cannot change; the kubelet keeps serving the copy it has), as the kubelet does.
* **TokenCache**, the kubelet's token manager: a TokenRequest bound to the pod, kept until
  80% of its life (at most 24 hours) has passed, then asked for again in the background.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Iterable

from kubemu.apiclient import ApiClient
from kubemu.informer import Informer
from kubemu.wire import WireError

from .configsource import Unavailable

log = logging.getLogger("kubelet.objects")

Ref = tuple[str, str, str]  # (resource, namespace, name)
TOKEN_REFRESH_FRACTION = 0.8
TOKEN_MAX_AGE = 24 * 3600
TOKEN_RETRY = 5.0  # seconds between failed TokenRequests for one token


class ObjectCache:
    def __init__(self, api: ApiClient, on_change: Callable[[Ref], None]):
        self.api = api
        self.on_change = on_change
        self._informers: dict[Ref, tuple[Informer, asyncio.Event, asyncio.Task]] = {}
        self._refs_set = asyncio.Event()  # set (and replaced) at each set_references

    def set_references(self, refs: Iterable[Ref]) -> None:
        """Watch exactly these objects (called in the loop, with every pod's references)."""
        wanted = set(refs)
        for ref in set(self._informers) - wanted:
            _informer, stop, _task = self._informers.pop(ref)
            stop.set()
        for ref in wanted - set(self._informers):
            resource, namespace, name = ref
            informer = Informer(self.api, resource, namespace,
                                field_selector=f"metadata.name={name}")
            stop = asyncio.Event()

            def changed(*objs, ref=ref, stop=stop):
                if objs[-1].get("immutable") is True:
                    stop.set()
                self.on_change(ref)
            informer.add_event_handler(changed, changed, changed)
            task = asyncio.get_running_loop().create_task(
                informer.run(stop), name=f"watch {resource} {namespace}/{name}")
            task.add_done_callback(_log_failure)
            self._informers[ref] = (informer, stop, task)
        self._refs_set.set()
        self._refs_set = asyncio.Event()

    def lookup(self, resource: str, namespace: str, name: str) -> dict | None:
        entry = self._informers.get((resource, namespace, name))
        if entry is None:
            raise Unavailable(f'object "{namespace}"/"{name}" not registered')
        informer = entry[0]
        if not informer.has_synced():
            raise Unavailable(f"failed to sync {resource.removesuffix('s')} cache: timed out "
                              "waiting for the condition")
        return informer.get(f"{namespace}/{name}")

    def watching(self, ref: Ref) -> bool:
        """True while `ref`'s watch runs (not for one seen immutable)."""
        entry = self._informers.get(ref)
        return entry is not None and not entry[2].done()

    def synced(self, refs: Iterable[Ref]) -> bool:
        return all(ref in self._informers and self._informers[ref][0].has_synced() for ref in refs)

    async def wait_synced(self, refs: Iterable[Ref], timeout: float) -> bool:
        """True once every one of `refs` is watched and listed; False after `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        for ref in refs:
            while ref not in self._informers:  # the pod's references are not set yet
                try:
                    await asyncio.wait_for(self._refs_set.wait(), deadline - loop.time())
                except asyncio.TimeoutError:
                    return False
            left = deadline - loop.time()
            if left <= 0 or not await self._informers[ref][0].wait_for_sync(left):
                return False
        return True

    async def close(self) -> None:
        entries = list(self._informers.values())
        self._informers.clear()
        for _informer, stop, _task in entries:
            stop.set()
        await asyncio.gather(*(task for _i, _s, task in entries), return_exceptions=True)


def _log_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s: %s", task.get_name(), task.exception())


class TokenCache:
    """token(namespace, service account, audience, expiration, pod) -> the token, or raises
    Unavailable while the first one is being asked for (the volume is retried)."""

    def __init__(self, api: ApiClient, on_change: Callable[[], None], clock=time.time):
        self.api = api
        self.on_change = on_change
        self.clock = clock
        self._tokens: dict[tuple, tuple[str, float, float]] = {}  # key -> (token, issued, expires)
        self._errors: dict[tuple, tuple[str, float]] = {}  # key -> (why, when) of a failure
        self._pending: dict[tuple, asyncio.Task] = {}

    def token(self, namespace: str, service_account: str, audience: str | None,
              expiration: int, pod: dict) -> str:
        meta = pod.get("metadata") or {}
        key = (namespace, service_account, audience, expiration, meta.get("name"), meta.get("uid"))
        held = self._tokens.get(key)
        now = self.clock()
        stale = held is None or now >= held[1] + min((held[2] - held[1]) * TOKEN_REFRESH_FRACTION,
                                                     TOKEN_MAX_AGE)
        failure = self._errors.get(key)
        if stale and (failure is None or now >= failure[1] + TOKEN_RETRY):
            self._request(key)
        if held is not None and now < held[2]:
            return held[0]
        raise Unavailable(failure[0] if failure else
                          f'requesting a token for service account "{namespace}/{service_account}"')

    def forget(self, pod_uids: set[str]) -> None:
        """Drop the tokens of pods no longer here."""
        for key in [k for k in self._tokens if k[5] not in pod_uids]:
            del self._tokens[key]
        for key in [k for k in self._errors if k[5] not in pod_uids]:
            del self._errors[key]

    def holds(self, namespace: str, service_account: str, audience: str | None, expiration: int,
              pod: dict) -> bool:
        """Whether a token for this request is held and still valid."""
        meta = pod.get("metadata") or {}
        held = self._tokens.get((namespace, service_account, audience, expiration, meta.get("name"), meta.get("uid")))
        return held is not None and self.clock() < held[2]

    async def settled(self, pod: dict, timeout: float) -> None:
        """Wait (up to `timeout`) for the token requests made for `pod` to be answered."""
        uid = (pod.get("metadata") or {}).get("uid")
        tasks = [t for key, t in self._pending.items() if key[5] == uid]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    def _request(self, key: tuple) -> None:
        if key not in self._pending:
            task = asyncio.get_running_loop().create_task(self._fetch(key))
            self._pending[key] = task

    async def _fetch(self, key: tuple) -> None:
        namespace, service_account, audience, expiration, pod_name, pod_uid = key
        request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                   "spec": {"audiences": [audience] if audience else [],
                            "expirationSeconds": expiration,
                            "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                               "name": pod_name, "uid": pod_uid}}}
        try:
            answer = await self.api.token_request(service_account, request, namespace)
            issued = self.clock()
            seconds = (answer.get("spec") or {}).get("expirationSeconds") or expiration
            self._tokens[key] = (answer["status"]["token"], issued, issued + seconds)
            self._errors.pop(key, None)
        except WireError as err:
            log.info("token for %s/%s: %s", namespace, service_account, err)
            self._errors[key] = (f"failed to fetch token: {err.message}", self.clock())
        finally:
            del self._pending[key]
        self.on_change()
