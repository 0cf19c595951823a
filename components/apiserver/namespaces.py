"""The namespaces a create checks, as the NamespaceLifecycle admission's lister keeps them.

Listed once, then kept current by the namespaces watch (through the watch cache), so that a
namespaced create does not read its namespace from the store each time. A name not known here
(just created, deleted, or the watch not running) is read from the store. After this apiserver
writes a namespace, the store is read for it until the watch delivers that write: a namespace
it just marked for deletion must refuse new content at once.
"""
from __future__ import annotations

import asyncio
import logging

from kubemu.api.resources import registry_key, registry_prefix

from .storage import Storage
from .watchcache import WatchCache

log = logging.getLogger("kubemu.apiserver.namespaces")

PREFIX = registry_prefix("namespaces")


class NamespaceCache:
    def __init__(self, storage: Storage, cache: WatchCache):
        self._storage = storage
        self._cache = cache
        # name -> (the namespace, or None: read the store; the revision this is as of)
        self._known: dict[str, tuple[dict | None, int]] = {}
        self._task: asyncio.Task | None = None

    async def get(self, name: str) -> dict | None:
        """The namespace `name` (never to be changed by the caller), or None if it does not exist."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._follow(), name="namespace cache")
        obj = self._known.get(name, (None, 0))[0]
        if obj is None:
            obj, _ = await self._storage.get(registry_key("namespaces", None, name))
        return obj

    def wrote(self, name: str, revision: int) -> None:
        """This apiserver wrote namespace `name` at `revision` (unless the watch delivered it already)."""
        known = self._known.get(name)
        if known is None or known[1] < revision:
            self._known[name] = (None, revision)

    def _note(self, name: str, obj: dict | None, revision: int) -> None:
        known = self._known.get(name)
        if known is None or known[1] <= revision:  # never go back to an older state
            self._known[name] = (obj, revision)

    async def _follow(self) -> None:
        try:
            items, rev, _ = await self._storage.list(PREFIX)
            for key, obj in items:
                self._note(key.decode()[len(PREFIX):], obj, int(obj["metadata"]["resourceVersion"]))
            source, _ = await self._cache.open(PREFIX, rev)
            try:
                async for ev in source:
                    self._note(ev.key[len(PREFIX):], ev.obj, ev.revision)  # obj None: deleted
            finally:
                await source.aclose()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the next create starts over; until then the store is read
            log.info("namespace cache stopped: %s", exc)
        finally:
            self._known.clear()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except BaseException:
                pass
