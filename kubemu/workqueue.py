"""The controller work queue, after client-go's util/workqueue (Type, delaying_queue,
rate_limiting_queue), in two layers:

`WorkQueue`       the pure core: no clock, no loop, no threads. Time-dependent calls take
                  `now` explicitly, so every behaviour is testable with plain numbers.
`AsyncWorkQueue`  the asyncio shell used by controllers: `await get()` sleeps until an item is
                  ready, with ONE loop timer armed at the earliest delayed deadline.

Guarantees (client-go's, kept here):
  * an item is handed to at most one worker at a time: from `get` until `done(item)`;
  * adding an item that is already queued is a no-op (dedupe: a burst of events for one key
    costs one sync, which is fine because syncs are level-based);
  * adding an item that is being processed marks it dirty: it is queued again when the
    worker calls `done(item)`, so the change is never lost and never processed concurrently;
  * otherwise first in, first out;
  * `add_after(item, delay, now)` holds an item back until `now + delay`; an item already
    waiting keeps the earlier of its two deadlines (client-go's waitingEntryByData);
  * `add_rate_limited(item, now)` = add_after with the rate limiter's delay; `forget(item)`
    resets the item's backoff, `num_requeues(item)` reports it;
  * `shut_down()`: further adds are dropped, delayed items are abandoned (client-go stops
    the waiting loop), but what is already queued is still handed out; once it is drained,
    `get` reports shutdown (`ShutDown` from the core, None from the async shell).

Items must be hashable and not None (None is the async shell's "shut down" answer).

The worker loop, as in kubernetes/sample-controller:

    while (key := await queue.get()) is not None:
        try:
            await sync(key)
        except Exception:
            queue.add_rate_limited(key)     # retry with backoff
        else:
            queue.forget(key)               # success: reset the backoff
        finally:
            queue.done(key)
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Hashable

from kubemu.ratelimit import RateLimiter, default_controller_rate_limiter


class QueueEmpty(Exception):
    """No item is ready right now (`WorkQueue.get_nowait`)."""


class ShutDown(Exception):
    """The queue is shut down and drained: there will never be another item."""


class WorkQueue:
    """The pure work queue. Not thread-safe: use it from one thread (or one event loop)."""

    def __init__(self, rate_limiter: RateLimiter | None = None) -> None:
        self.rate_limiter = rate_limiter if rate_limiter is not None else default_controller_rate_limiter()
        self._queue: deque[Hashable] = deque()   # ready, in order; never holds duplicates
        self._dirty: set[Hashable] = set()       # needs processing (queued, or re-queue on done)
        self._processing: set[Hashable] = set()  # handed out, not yet done
        self._shutting_down = False
        # Delayed items: a heap of (deadline, seq, item) with lazy deletion. `_waiting` holds
        # each item's live entry; a heap entry that is not it is stale and skipped. `seq`
        # breaks deadline ties in insertion order and keeps items from ever being compared.
        self._heap: list[tuple[float, int, Hashable]] = []
        self._waiting: dict[Hashable, tuple[float, int]] = {}
        self._seq = itertools.count()

    # -- the basic queue (client-go's workqueue.Type) --

    def add(self, item: Hashable) -> None:
        if item is None:
            raise ValueError("None cannot be queued")
        if self._shutting_down or item in self._dirty:
            return
        self._dirty.add(item)
        if item in self._processing:
            return          # queued by done(item), so no two workers ever hold it
        self._queue.append(item)

    def get_nowait(self, now: float | None = None) -> Hashable:
        """The next ready item, now being processed by the caller until `done(item)`.

        With `now`, delayed items due by then are released first. Raises QueueEmpty if
        nothing is ready, ShutDown if the queue is shut down and nothing is left."""
        if now is not None:
            self.release_due(now)
        if not self._queue:
            raise ShutDown() if self._shutting_down else QueueEmpty()
        item = self._queue.popleft()
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    def done(self, item: Hashable) -> None:
        """The caller finished processing `item`; if it was added meanwhile, queue it again.
        (Also after shut_down, like client-go: the add happened before the shutdown.)"""
        if item not in self._processing:
            return
        self._processing.discard(item)
        if item in self._dirty:
            self._queue.append(item)

    def shut_down(self) -> None:
        self._shutting_down = True
        self._heap.clear()
        self._waiting.clear()

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Items ready to be handed out (like client-go's Len: not processing, not delayed)."""
        return len(self._queue)

    def processing(self) -> int:
        """Items handed out and not yet done."""
        return len(self._processing)

    def waiting(self) -> int:
        """Delayed items not yet due."""
        return len(self._waiting)

    # -- delays (client-go's DelayingInterface) --

    def add_after(self, item: Hashable, delay: float, now: float) -> None:
        if item is None:
            raise ValueError("None cannot be queued")
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        deadline = now + delay
        current = self._waiting.get(item)
        if current is not None and current[0] <= deadline:
            return          # already due sooner: keep the earlier deadline
        entry = (deadline, next(self._seq))
        self._waiting[item] = entry
        heapq.heappush(self._heap, (entry[0], entry[1], item))

    def next_deadline(self) -> float | None:
        """The earliest deadline of a delayed item, or None: what a shell arms its timer for."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def release_due(self, now: float) -> int:
        """Queue every delayed item whose deadline is <= now, earliest first. Returns how
        many were released (some may have been no-ops: already queued)."""
        released = 0
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                return released
            _, _, item = heapq.heappop(self._heap)
            del self._waiting[item]
            self.add(item)
            released += 1

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap and self._waiting.get(heap[0][2]) != (heap[0][0], heap[0][1]):
            heapq.heappop(heap)

    # -- rate limiting (client-go's RateLimitingInterface) --

    def add_rate_limited(self, item: Hashable, now: float) -> None:
        if self._shutting_down:
            return          # don't let a dead queue's limiter count more failures
        self.add_after(item, self.rate_limiter.when(item, now), now)

    def forget(self, item: Hashable) -> None:
        self.rate_limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.rate_limiter.num_requeues(item)


class AsyncWorkQueue:
    """`WorkQueue` for asyncio workers. Time is the running loop's clock (`loop.time()`).

    Sleeping getters are futures in FIFO order; each event that makes an item ready wakes one
    of them, and a getter that takes an item while more remain wakes the next (so a timer that
    releases k items, or get() releasing them itself, still reaches k workers). A getter
    cancelled after being woken passes its wakeup on, as asyncio.Queue does. Delayed items cost
    one `loop.call_at` handle for the earliest deadline, re-armed as deadlines change.

    Every method must be called from the loop's thread."""

    def __init__(self, rate_limiter: RateLimiter | None = None) -> None:
        self.core = WorkQueue(rate_limiter)
        self._getters: deque[asyncio.Future[None]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._idle: asyncio.Event | None = None   # created on demand by shut_down_with_drain

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()

    async def get(self) -> Hashable | None:
        """The next item (process it, then call `done(item)`), waiting as long as needed;
        None once the queue is shut down and drained."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                item = self.core.get_nowait(loop.time())
            except ShutDown:
                self._wake_one()   # let every other sleeping getter see the shutdown too
                return None
            except QueueEmpty:
                pass
            else:
                if len(self.core):
                    self._wake_one()
                self._arm_timer()
                return item
            self._arm_timer()
            waiter: asyncio.Future[None] = loop.create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()      # woken but cancelled: hand the wakeup on
                else:
                    self._discard(waiter)
                raise

    def add(self, item: Hashable) -> None:
        self.core.add(item)
        self._wake_one_if_ready()

    def add_after(self, item: Hashable, delay: float) -> None:
        self.core.add_after(item, delay, self._now())
        self._wake_one_if_ready()
        self._arm_timer()

    def add_rate_limited(self, item: Hashable) -> None:
        self.core.add_rate_limited(item, self._now())
        self._wake_one_if_ready()
        self._arm_timer()

    def forget(self, item: Hashable) -> None:
        self.core.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return self.core.num_requeues(item)

    def done(self, item: Hashable) -> None:
        self.core.done(item)
        self._wake_one_if_ready()
        if self._idle is not None and not self.core.processing():
            self._idle.set()

    def shut_down(self) -> None:
        """Drop further adds and delayed items; getters drain what is queued, then get None."""
        self.core.shut_down()
        self._cancel_timer()
        self._wake_one()   # a getter finding ShutDown wakes the next: the whole line hears it

    async def shut_down_with_drain(self) -> None:
        """shut_down, then wait until every handed-out item is done (client-go's
        ShutDownWithDrain). Workers must keep running for this to finish."""
        self.shut_down()
        while self.core.processing() or len(self.core):
            self._idle = asyncio.Event()
            await self._idle.wait()
        self._idle = None

    @property
    def shutting_down(self) -> bool:
        return self.core.shutting_down

    def __len__(self) -> int:
        return len(self.core)

    # -- plumbing --

    def _wake_one_if_ready(self) -> None:
        if len(self.core):
            self._wake_one()

    def _wake_one(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _discard(self, waiter: asyncio.Future[None]) -> None:
        try:
            self._getters.remove(waiter)
        except ValueError:
            pass

    def _arm_timer(self) -> None:
        deadline = self.core.next_deadline()
        if deadline is None:
            self._cancel_timer()
        elif self._timer_at is None or deadline < self._timer_at:
            self._cancel_timer()
            self._timer = asyncio.get_running_loop().call_at(deadline, self._on_timer)
            self._timer_at = deadline

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = None
        self._timer_at = None

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        # asyncio may run a handle up to one clock resolution early; _arm_timer re-arms for
        # the same deadline in that case, so nothing is released before it is due.
        self.core.release_due(self._now())
        self._wake_one_if_ready()
        self._arm_timer()
