"""The shell of nodekeys.py: Nodes' CURVE key annotations followed through the watch cache, and
the identify hook the wire's CURVE server asks on its ZAP thread.

Nodes are listed at one revision, then followed (as rbaccache.py follows the RBAC kinds); a
watch that ends is listed again after a pause, the last index known serving meanwhile. Every
change builds a new immutable snapshot, swapped in with one assignment: the ZAP thread reads
whichever snapshot is current without a lock, and never sees one half-built.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kubemu._wire_auth import node_identity
from kubemu.api.resources import registry_prefix

from .nodekeys import ANNOTATION, NodeKeys
from .rbaccache import RETRY_SECONDS, list_all
from .storage import Storage
from .watchcache import WatchCache

log = logging.getLogger("kubemu.apiserver.nodekeys")

PREFIX = registry_prefix("nodes")


class NodeKeyCache:
    def __init__(self, cache: WatchCache, *, retry_seconds: float = RETRY_SECONDS):
        self._cache = cache
        self._storage = Storage(cache.client)
        self._retry = retry_seconds
        self._keys = NodeKeys()
        self._snapshot = self._keys.snapshot()
        self._task: asyncio.Task | None = None
        self._listed = asyncio.Event()  # set by the first index published

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._follow(), name="node key cache")

    async def wait_listed(self) -> None:
        """Until the first listing's index serves (the CURVE server opens after it: a joined
        node's kubelet reconnecting right after a restart is known at once)."""
        await self._listed.wait()

    def owners(self, key: str) -> list[str]:
        """The Nodes whose annotation names `key` now (admission refuses a second one)."""
        return self._keys.owners(key)

    def identify(self, key: str) -> str | None:
        """CurveAuth's hook (any thread): system:node:<name> for a key one Node's annotation names."""
        name = self._snapshot.get(key)
        return None if name is None else node_identity(name)

    def chain(self, first: Callable[[str], str | None]) -> Callable[[str], str | None]:
        """`first`'s identity for a key, else this cache's."""
        def identify(key: str) -> str | None:
            identity = first(key)
            return identity if identity is not None else self.identify(key)
        return identify

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():
                    raise  # close() itself was cancelled: not the task's end to swallow

    async def _follow(self) -> None:
        failing = False
        while True:
            try:
                nodes, revision = await self._list()
                self._publish(self._keys.replace(nodes))
                failing = False
                source, _ = await self._cache.open(PREFIX, revision)
                try:
                    async for ev in source:
                        self._publish(self._keys.apply(ev.key[len(PREFIX):], ev.obj))
                finally:
                    await source.aclose()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the last index known keeps serving until the relist
                if not failing:
                    log.warning("node key cache stopped: %s; listing again", exc)
                failing = True
            await asyncio.sleep(self._retry)

    async def _list(self) -> tuple[dict[str, dict], int]:
        """Node name -> Node, at one revision."""
        nodes, revision = await list_all(self._storage, PREFIX)
        return {key[len(PREFIX):]: node for key, node in nodes.items()}, revision

    def _publish(self, shared: list[str]) -> None:
        self._snapshot = self._keys.snapshot()
        self._listed.set()
        for key in shared:
            log.warning("CURVE key %s is the %s annotation of more than one Node (%s): refused for every one "
                        "of them", key, ANNOTATION, ", ".join(self._keys.owners(key)))
