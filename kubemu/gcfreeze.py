"""Keep CPython's cyclic garbage collector off a server's long-lived data.

A store replica holds ~10^5 tracked objects that live for minutes (its in-memory Raft log, the
MVCC index, the recent-record cache) and make almost no reference cycles: over a 30 s run at
256 clients, 510 objects in all were collected as cyclic garbage. Yet every time the tracked
heap grows by a quarter CPython runs a full collection over all of it: 12-17 of them in that
run, 1.4-1.9 s of a replica's 9-15 s of CPU.

`GcFreezer.tick` (call it about once a second) moves everything tracked so far into the
permanent generation (`gc.freeze`), so the automatic collections see only what is younger than
a second. A cycle that was alive when frozen and dies later would never be collected, so every
`thaw_s` it unfreezes and runs one full collection: one pause (tens of milliseconds for 10^5
objects) instead of a dozen.

The informer caches of the controller-manager, the scheduler and the hollow kubelet are the
same kind of data (every pod and node as nested dicts, kept until the object changes), and so
are the apiserver's watch caches (every key's state, the window of recent events, the shared
watch events): those processes run `keep_frozen` as a task.

The first tick also raises the young generation's threshold from CPython's 700 allocations to
`young` (10,000): a request's decoded message, its copies and its answer are dicts and lists
that are garbage a moment later, and a young collection every 700 of them scans many that are
still in use, then again in the middle generation; at 10,000 most of them are gone before any
collection looks. A young collection of 10,000 objects takes a few milliseconds.
"""
from __future__ import annotations

import asyncio
import gc

PERIOD_S = 1.0
YOUNG_THRESHOLD = 10_000


class GcFreezer:
    def __init__(self, thaw_s: float = 300.0, young: int = YOUNG_THRESHOLD):
        self.thaw_s = thaw_s
        self.young = young
        self._next_thaw: float | None = None  # thaw_s after the first tick, on the caller's clock

    def tick(self, now: float) -> None:
        if self._next_thaw is None:
            self._next_thaw = now + self.thaw_s
            gc.set_threshold(self.young, *gc.get_threshold()[1:])
        elif now >= self._next_thaw:
            self._next_thaw = now + self.thaw_s
            gc.unfreeze()
            gc.collect()
        gc.freeze()


async def keep_frozen(freezer: GcFreezer | None = None, period: float = PERIOD_S) -> None:
    """Tick `freezer` (a new one by default) every `period` seconds on the running loop's
    clock, until cancelled."""
    freezer = freezer or GcFreezer()
    loop = asyncio.get_running_loop()
    while True:
        freezer.tick(loop.time())
        await asyncio.sleep(period)
