"""The replica's watch fan-out: one `_Watcher` (a queue of live batches, bounded by count and
by bytes) per watch stream, all of them fed by the apply path through the `WatchHub`; and
`history`, the stored events a watch replays before it goes live. The `watch` handler itself is `Replica.rpc_watch`."""
from __future__ import annotations

import asyncio
import bisect
import collections
from typing import AsyncIterator

from kubemu import wire

from ._mvcc_requests import KeyRange
from .errors import to_wire_error
from .mvcc import Event, KVStore, StoreError

# how far a watcher may fall behind before it is cancelled: in live batches, and in the bytes
# of their keys and values (a count alone lets big values pin any amount of memory)
WATCH_QUEUE_ITEMS = 1024
WATCH_QUEUE_BYTES = 16 * 1024 * 1024
HISTORY_CHUNK_EVENTS = 512


def _event_wire(ev: Event, prev_kv: bool) -> dict:
    return {"type": ev.type, "kv": ev.kv, "prev_kv": ev.prev_kv if prev_kv else None}


def _kv_bytes(kv: dict | None) -> int:
    return 0 if kv is None else len(kv["key"]) + len(kv.get("value") or b"")


class _Watcher:
    """One watch stream's live side: a bounded queue of batches filled by the apply path."""

    __slots__ = ("keys", "prev_kv", "start", "items", "queued_bytes", "wake", "error")

    def __init__(self, keys: KeyRange, prev_kv: bool, start: int):
        self.keys, self.prev_kv, self.start = keys, prev_kv, start
        self.items: collections.deque[tuple[dict, int]] = collections.deque()  # (batch, its bytes)
        self.queued_bytes = 0
        self.wake = asyncio.Event()
        self.error: wire.WireError | None = None

    def offer(self, events: list[Event], revision: int) -> None:
        if self.error is not None:
            return
        keys, start = self.keys, self.start
        mine = [_event_wire(ev, self.prev_kv) for ev in events
                if ev.kv["mod_revision"] >= start and ev.kv["key"] in keys]
        if not mine:
            return
        size = sum(_kv_bytes(ev["kv"]) + _kv_bytes(ev["prev_kv"]) for ev in mine)
        # bytes count only behind a backlog: one applied batch may be large by itself
        if len(self.items) >= WATCH_QUEUE_ITEMS or (self.items and self.queued_bytes + size > WATCH_QUEUE_BYTES):
            self.fail(wire.Unavailable(f"watch cancelled: the watcher fell more than {WATCH_QUEUE_ITEMS} batches "
                                       f"or {WATCH_QUEUE_BYTES // 2**20} MiB behind; watch again from the last "
                                       f"revision received", {"reason": "slow watcher"}))
            return
        self.items.append(({"header": {"revision": revision}, "events": mine}, size))
        self.queued_bytes += size
        self.wake.set()

    def fail(self, err: wire.WireError) -> None:
        if self.error is None:
            self.error = err
            self.items.clear()
            self.queued_bytes = 0
            self.wake.set()

    async def next(self) -> dict:
        while True:
            if self.error is not None:
                raise self.error
            if self.items:
                batch, size = self.items.popleft()
                self.queued_bytes -= size
                return batch
            self.wake.clear()
            await self.wake.wait()


class WatchHub:
    """The live watchers of one replica."""

    def __init__(self) -> None:
        self._watchers: set[_Watcher] = set()

    def __len__(self) -> int:
        return len(self._watchers)

    def add(self, keys: KeyRange, prev_kv: bool, start: int) -> _Watcher:
        w = _Watcher(keys, prev_kv, start)
        self._watchers.add(w)
        return w

    def discard(self, w: _Watcher) -> None:
        self._watchers.discard(w)

    def publish(self, events: list[Event], revision: int) -> None:
        """One applied batch's events, with the store revision after it, to every watcher."""
        if not self._watchers:
            return
        # Each watcher is offered the events of its key range, found by two binary searches
        # over the batch's keys, instead of testing every event against every watcher: an
        # apiserver watches each resource's prefix, so most watchers want none of a batch.
        # (offer() still checks each event it is given: this only narrows what it looks at.)
        order = sorted(range(len(events)), key=lambda i: events[i].kv["key"])
        keys = [events[i].kv["key"] for i in order]
        for w in list(self._watchers):
            lo = bisect.bisect_left(keys, w.keys.start)
            hi = len(keys) if w.keys.stop is None else bisect.bisect_left(keys, w.keys.stop, lo)
            if lo < hi:
                w.offer([events[i] for i in sorted(order[lo:hi])], revision)  # in revision order again

    def fail_all(self, err: wire.WireError) -> None:
        for w in list(self._watchers):
            w.fail(err)


async def history(kv: KVStore, key, range_end, start: int, until: int, prev_kv: bool) -> AsyncIterator[dict]:
    """Stored events from `start` to `until`, in items that never split a revision (so an
    item's header revision, its last event's, says every event up to it was delivered)."""
    try:
        events = kv.events(start, key, range_end, prev_kv)
    except StoreError as err:
        raise to_wire_error(err) from None
    chunk: list[dict] = []
    last = 0
    try:
        while True:
            try:
                ev = next(events)
            except StopIteration:
                break
            except StoreError as err:
                raise to_wire_error(err) from None
            r = ev.kv["mod_revision"]
            if r > until:
                break
            if len(chunk) >= HISTORY_CHUNK_EVENTS and r != last:
                yield {"header": {"revision": last}, "events": chunk}
                chunk = []
            chunk.append(_event_wire(ev, prev_kv))
            last = r
    finally:
        events.close()
    if chunk:
        yield {"header": {"revision": last}, "events": chunk}
