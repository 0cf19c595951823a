"""Storage without a store: the apiserver's objects in one process's memory, for tests.

`MemStorage()` is a `storage.Storage` over `MemoryStoreClient`, which answers the part of
`store.client.StoreClient` that `Storage` and `WatchCache` use (range, get, txn, compact, watch)
from the store's own state machine (`store.mvcc.KVStore` on a `MemoryBackend`), applied in
process. So revisions, txn compares, range limits, reads at a past revision, compaction
(`Compacted`) and watch history behave exactly as with the replicated store, without
processes, sockets or Raft:

    storage = MemStorage()
    api = API(storage, WatchCache(storage.client), AuditLog(None))
"""
from __future__ import annotations

import asyncio
from typing import AsyncIterator, Iterable

from store.backend import MemoryBackend
from store.client import _translate
from store.errors import to_wire_error
from store.mvcc import Event, KVStore, StoreError, compact_op, prefix_end, txn_op

from .storage import Storage


def _b(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _raised(err: StoreError) -> Exception:
    """The error a StoreClient raises for it (Compacted, FutureRevision, ...)."""
    return _translate(to_wire_error(err))


class MemoryStoreClient:
    """StoreClient's key-value calls, applied at once to an in-process KVStore."""

    def __init__(self) -> None:
        self.kv = KVStore(MemoryBackend())
        self._index = 0
        self._changed = asyncio.Event()

    def _apply(self, request: dict) -> dict:
        self._index += 1
        resp, events = self.kv.apply(self._index, request)
        if isinstance(resp, StoreError):
            raise _raised(resp)
        if events or request.get("op") == "compact":
            self._changed.set()  # wakes every watch; each waits on a fresh event after
            self._changed = asyncio.Event()
        return resp

    async def range(self, key: str | bytes, range_end: str | bytes | None = None, *, prefix: bool = False,
                    revision: int = 0, limit: int = 0, count_only: bool = False, keys_only: bool = False,
                    serializable: bool = False, timeout: float | None = None) -> dict:
        key = _b(key)
        end = prefix_end(key) if prefix else _b(range_end)
        try:
            return self.kv.range(key, end, revision=revision, limit=limit, count_only=count_only,
                                 keys_only=keys_only)
        except StoreError as err:
            raise _raised(err) from None

    async def get(self, key: str | bytes, *, revision: int = 0, serializable: bool = False,
                  timeout: float | None = None) -> dict | None:
        kvs = (await self.range(key, revision=revision)).get("kvs") or []
        return kvs[0] if kvs else None

    async def txn(self, compare: Iterable[dict] = (), success: Iterable[dict] = (), failure: Iterable[dict] = (),
                  *, timeout: float | None = None) -> dict:
        return self._apply(txn_op(list(compare), list(success), list(failure)))

    async def compact(self, revision: int, *, timeout: float | None = None) -> dict:
        return self._apply(compact_op(revision))

    def watch(self, key: str | bytes, *, prefix: bool = False, range_end: str | bytes | None = None,
              start_revision: int = 0, prev_kv: bool = False, resume_timeout: float | None = None) -> MemoryWatch:
        key = _b(key)
        return MemoryWatch(self, key, prefix_end(key) if prefix else _b(range_end), start_revision, prev_kv)

    async def close(self) -> None:
        pass


class MemoryWatch:
    """Events on a key range from `start_revision` (0: from now on), as `store.client.Watch`
    yields them; raises Compacted if that history is gone."""

    def __init__(self, client: MemoryStoreClient, key: bytes, range_end: bytes | None, start_revision: int,
                 prev_kv: bool):
        self._client = client
        self._key, self._range_end = key, range_end
        self._next = start_revision or client.kv.revision + 1
        self._prev_kv = prev_kv

    async def __aenter__(self) -> MemoryWatch:
        return self

    async def __aexit__(self, *exc) -> None:
        pass

    async def aclose(self) -> None:
        pass

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        kv = self._client.kv
        while True:
            changed = self._client._changed
            if self._next <= kv.revision:
                try:
                    events = list(kv.events(self._next, self._key, self._range_end, self._prev_kv))
                except StoreError as err:
                    raise _raised(err) from None
                self._next = kv.revision + 1
                for ev in events:
                    yield ev
                continue
            await changed.wait()


class MemStorage(Storage):
    """A Storage whose store is a MemoryStoreClient (`.client`)."""

    def __init__(self) -> None:
        super().__init__(MemoryStoreClient())
