"""kubemu/workqueue.py: the pure core with explicit times, checked against a naive model, and
the asyncio shell under many concurrent workers."""
from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kubemu.ratelimit import BucketRateLimiter, ItemExponentialFailureRateLimiter
from kubemu.workqueue import AsyncWorkQueue, QueueEmpty, ShutDown, WorkQueue
from tests.conftest import DEADLINE


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


def drain(q: WorkQueue, now: float | None = None) -> list:
    """Get and finish everything ready, in order."""
    out = []
    while True:
        try:
            item = q.get_nowait(now)
        except (QueueEmpty, ShutDown):
            return out
        out.append(item)
        q.done(item)


# -- the pure core --

def test_fifo_and_dedupe():
    q = WorkQueue()
    for item in ["a", "b", "a", "c", "b", "a"]:
        q.add(item)
    assert len(q) == 3
    assert drain(q) == ["a", "b", "c"]
    with pytest.raises(QueueEmpty):
        q.get_nowait()


def test_add_while_processing_requeues_once_on_done():
    q = WorkQueue()
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "a processing item must not be handed to a second worker"
    q.add("b")
    assert q.get_nowait() == "b"
    q.done("a")
    assert len(q) == 1
    assert q.get_nowait() == "a"
    q.done("a")
    q.done("b")
    assert len(q) == 0 and q.processing() == 0


def test_done_of_unknown_item_is_ignored():
    q = WorkQueue()
    q.add("a")
    q.done("a")          # queued, not processing: nothing happens
    q.done("zzz")
    assert drain(q) == ["a"]


def test_none_is_rejected():
    q = WorkQueue()
    with pytest.raises(ValueError):
        q.add(None)
    with pytest.raises(ValueError):
        q.add_after(None, 1.0, 0.0)


def test_delays_release_in_deadline_order():
    q = WorkQueue()
    q.add_after("c", 3.0, now=0.0)
    q.add_after("a", 1.0, now=0.0)
    q.add_after("b", 2.0, now=0.0)
    q.add_after("now", 0.0, now=0.0)   # no delay: straight in
    assert q.next_deadline() == 1.0
    assert drain(q, now=0.5) == ["now"]
    assert drain(q, now=2.0) == ["a", "b"]
    assert q.next_deadline() == 3.0 and q.waiting() == 1
    assert drain(q, now=10.0) == ["c"]
    assert q.next_deadline() is None


def test_delayed_item_keeps_its_earliest_deadline():
    q = WorkQueue()
    q.add_after("a", 5.0, now=0.0)
    q.add_after("a", 9.0, now=0.0)    # later: ignored
    assert q.next_deadline() == 5.0
    q.add_after("a", 2.0, now=0.0)    # earlier: wins
    assert q.next_deadline() == 2.0 and q.waiting() == 1
    assert drain(q, now=2.0) == ["a"]
    assert q.next_deadline() is None, "the superseded heap entry must not fire again"
    assert drain(q, now=100.0) == []


def test_delayed_item_already_queued_is_deduped_on_release():
    q = WorkQueue()
    q.add("a")
    q.add_after("a", 1.0, now=0.0)
    assert q.release_due(1.0) == 1
    assert drain(q) == ["a"]


def test_rate_limited_requeue_backs_off_exponentially_and_forget_resets():
    q = WorkQueue(ItemExponentialFailureRateLimiter(base=0.005, max=0.04))
    deadlines = []
    now = 0.0
    for _ in range(6):
        q.add_rate_limited("k", now)
        deadlines.append(q.next_deadline() - now)
        now = q.next_deadline()
        assert drain(q, now) == ["k"]
    assert deadlines == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.04, 0.04])
    assert q.num_requeues("k") == 6
    q.forget("k")
    assert q.num_requeues("k") == 0
    q.add_rate_limited("k", now)
    assert q.next_deadline() - now == pytest.approx(0.005)


def test_rate_limited_bucket_limits_a_burst():
    q = WorkQueue(BucketRateLimiter(qps=10, burst=5))
    for i in range(8):
        q.add_rate_limited(i, now=0.0)
    assert drain(q, now=0.0) == [0, 1, 2, 3, 4]      # the burst: no delay
    assert q.next_deadline() == pytest.approx(0.1)
    assert drain(q, now=0.1) == [5]
    assert drain(q, now=0.3) == [6, 7]


def test_shutdown_drains_queued_items_then_reports_shutdown():
    q = WorkQueue()
    q.add("a")
    q.add("b")
    assert q.get_nowait() == "a"
    q.add("a")                     # dirty while processing
    q.add_after("late", 1.0, 0.0)
    q.shut_down()
    q.add("c")                     # dropped
    q.add_after("d", 1.0, 0.0)     # dropped
    q.add_rate_limited("e", 0.0)   # dropped, and not counted
    assert q.num_requeues("e") == 0
    assert q.next_deadline() is None and q.waiting() == 0
    assert q.get_nowait() == "b"
    q.done("b")
    q.done("a")                    # its add happened before shutdown: still handed out
    assert q.get_nowait() == "a"
    q.done("a")
    with pytest.raises(ShutDown):
        q.get_nowait(100.0)


class WorkQueueModel(RuleBasedStateMachine):
    """The core against a deliberately naive model of client-go's semantics."""

    keys = st.sampled_from("abcde")

    def __init__(self):
        super().__init__()
        self.q = WorkQueue(ItemExponentialFailureRateLimiter(base=1.0, max=4.0))
        self.now = 0.0
        self.queue: list = []
        self.dirty: set = set()
        self.processing: set = set()
        self.waiting: dict = {}      # item -> (deadline, seq)
        self.failures: dict = {}
        self.seq = itertools.count()
        self.shut = False

    def _add(self, item):
        if self.shut or item in self.dirty:
            return
        self.dirty.add(item)
        if item not in self.processing:
            self.queue.append(item)

    def _add_after(self, item, delay):
        if self.shut:
            return
        if delay <= 0:
            self._add(item)
            return
        deadline = self.now + delay
        if item in self.waiting and self.waiting[item][0] <= deadline:
            return
        self.waiting[item] = (deadline, next(self.seq))

    def _release(self):
        due = sorted((v, k) for k, v in self.waiting.items() if v[0] <= self.now)
        for _, item in due:
            del self.waiting[item]
            self._add(item)

    @rule(item=keys)
    def add(self, item):
        self.q.add(item)
        self._add(item)

    @rule(item=keys, delay=st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]))
    def add_after(self, item, delay):
        self.q.add_after(item, delay, self.now)
        self._add_after(item, delay)

    @rule(item=keys)
    def add_rate_limited(self, item):
        self.q.add_rate_limited(item, self.now)
        if not self.shut:
            n = self.failures.get(item, 0)
            self.failures[item] = n + 1
            self._add_after(item, min(1.0 * 2 ** n, 4.0))

    @rule(item=keys)
    def forget(self, item):
        self.q.forget(item)
        self.failures.pop(item, None)

    @rule(dt=st.sampled_from([0.0, 0.5, 1.0, 2.5]))
    def get(self, dt):
        self.now += dt
        self._release()
        if self.queue:
            item = self.queue.pop(0)
            self.processing.add(item)
            self.dirty.discard(item)
            assert self.q.get_nowait(self.now) == item
        else:
            with pytest.raises(ShutDown if self.shut else QueueEmpty):
                self.q.get_nowait(self.now)

    @precondition(lambda self: self.processing)
    @rule(data=st.data())
    def done(self, data):
        item = data.draw(st.sampled_from(sorted(self.processing)))
        self.q.done(item)
        self.processing.discard(item)
        if item in self.dirty:
            self.queue.append(item)

    @rule()
    def shut_down(self):
        self.q.shut_down()
        self.shut = True
        self.waiting.clear()

    @invariant()
    def agrees(self):
        assert len(self.q) == len(self.queue)
        assert self.q.processing() == len(self.processing)
        assert self.q.waiting() == len(self.waiting)
        expected = min((d for d, _ in self.waiting.values()), default=None)
        assert self.q.next_deadline() == expected
        for item in "abcde":
            assert self.q.num_requeues(item) == self.failures.get(item, 0)


TestWorkQueueModel = WorkQueueModel.TestCase
TestWorkQueueModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


# -- the asyncio shell --

def test_async_get_waits_for_add():
    async def main():
        q = AsyncWorkQueue()
        getter = asyncio.create_task(q.get())
        await asyncio.sleep(0)
        assert not getter.done()
        q.add("a")
        assert await getter == "a"
        q.done("a")
    run(main())


def test_async_delays_come_out_in_deadline_order():
    async def main():
        q = AsyncWorkQueue()
        loop = asyncio.get_running_loop()
        start = loop.time()
        for item, delay in [("c", 0.06), ("a", 0.02), ("b", 0.04)]:
            q.add_after(item, delay)
        out = []
        for _ in range(3):
            item = await q.get()
            out.append((item, loop.time() - start))
            q.done(item)
        assert [i for i, _ in out] == ["a", "b", "c"]
        for (_, t), want in zip(out, [0.02, 0.04, 0.06]):
            assert t >= want - 0.001
    run(main())


def test_async_arms_one_timer_for_many_delays(monkeypatch):
    async def main():
        loop = asyncio.get_running_loop()
        calls = []
        real_call_at = loop.call_at
        monkeypatch.setattr(loop, "call_at", lambda *a, **kw: calls.append(a) or real_call_at(*a, **kw))
        q = AsyncWorkQueue()
        for i in range(50):
            q.add_after(i, 0.01 + i * 0.0001)   # later and later: the first timer stays
        assert len(calls) == 1
        q.add_after("first", 0.005)              # earlier: one re-arm
        assert len(calls) == 2
        got = []
        while len(got) < 51:
            item = await q.get()
            got.append(item)
            q.done(item)
        assert got == ["first", *range(50)]
        # No polling: roughly one timer per distinct release, never one per get() spin.
        assert len(calls) <= 2 + 51
    run(main())


def test_async_rate_limited_requeue_delays():
    async def main():
        q = AsyncWorkQueue(ItemExponentialFailureRateLimiter(base=0.005, max=0.02))
        loop = asyncio.get_running_loop()
        q.add("k")
        gaps = []
        for _ in range(4):
            item = await q.get()
            q.add_rate_limited(item)
            q.done(item)
            t = loop.time()
            await q.get()
            gaps.append(loop.time() - t)
            q.add("k")           # keep it flowing: next loop takes it from the queue
            q.done("k")
        assert q.num_requeues("k") == 4
        for gap, want in zip(gaps, [0.005, 0.01, 0.02, 0.02]):
            assert gap >= want - 0.001
        q.forget("k")
        assert q.num_requeues("k") == 0
    run(main())


def test_async_shutdown_wakes_every_sleeping_worker():
    async def main():
        q = AsyncWorkQueue()
        workers = [asyncio.create_task(q.get()) for _ in range(5)]
        await asyncio.sleep(0)
        q.add_after("never", 10.0)
        q.shut_down()
        assert await asyncio.gather(*workers) == [None] * 5
        assert await q.get() is None
    run(main())


def test_async_shutdown_with_drain_waits_for_inflight_items():
    async def main():
        q = AsyncWorkQueue()
        for i in range(3):
            q.add(i)
        processed = []

        async def worker():
            while (item := await q.get()) is not None:
                await asyncio.sleep(0.01)
                processed.append(item)
                q.done(item)

        tasks = [asyncio.create_task(worker()) for _ in range(2)]
        await asyncio.sleep(0)
        await q.shut_down_with_drain()
        assert sorted(processed) == [0, 1, 2]
        await asyncio.gather(*tasks)
    run(main())


def test_async_cancelled_getter_passes_its_wakeup_on():
    async def main():
        q = AsyncWorkQueue()
        first = asyncio.create_task(q.get())
        second = asyncio.create_task(q.get())
        await asyncio.sleep(0)
        q.add("a")          # wakes `first` ...
        first.cancel()      # ... which is cancelled before it runs
        assert await second == "a"
        assert first.cancelled()
    run(main())


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), workers=st.integers(1, 8))
def test_async_at_most_one_worker_per_key_and_no_lost_adds(seed, workers):
    """Random interleavings of producers and workers: no key is ever held by two workers,
    and every key's last add is followed by a sync that started after it (level-based
    controllers depend on exactly this)."""
    rnd = random.Random(seed)
    keys = [f"ns/k{i}" for i in range(6)]

    async def main():
        q = AsyncWorkQueue(ItemExponentialFailureRateLimiter(base=0.0001, max=0.001))
        clock = itertools.count()
        last_add: dict = {}
        last_start: dict = {}
        active: set = set()

        def record_add(key):
            last_add[key] = next(clock)

        async def worker():
            while (key := await q.get()) is not None:
                assert key not in active, f"{key} handed to two workers"
                active.add(key)
                last_start[key] = next(clock)
                for _ in range(rnd.randrange(4)):
                    await asyncio.sleep(0)
                active.discard(key)
                if rnd.random() < 0.2:
                    record_add(key)
                    q.add_rate_limited(key)     # a failed sync retries later
                else:
                    q.forget(key)
                q.done(key)

        tasks = [asyncio.create_task(worker()) for _ in range(workers)]
        for _ in range(150):
            key = rnd.choice(keys)
            op = rnd.random()
            record_add(key)
            if op < 0.7:
                q.add(key)
            else:
                q.add_after(key, rnd.choice([0.0, 0.0005, 0.001]))
            for _ in range(rnd.randrange(3)):
                await asyncio.sleep(0)
        # Quiesce: nothing queued, delayed or in flight, then stop the workers.
        while len(q) or q.core.processing() or q.core.waiting():
            await asyncio.sleep(0.001)
        q.shut_down()
        await asyncio.gather(*tasks)
        for key, added in last_add.items():
            assert last_start[key] > added, f"the last add of {key} was never synced"

    run(main())


def test_async_one_timer_release_reaches_every_sleeping_worker():
    """Three items due at once, three workers asleep: the one timer wakes one worker, and
    each worker that takes an item while more remain wakes the next."""
    async def main():
        q = AsyncWorkQueue()
        getters = [asyncio.create_task(q.get()) for _ in range(3)]
        await asyncio.sleep(0)
        for item in "abc":
            q.add_after(item, 0.01)
        assert sorted(await asyncio.gather(*getters)) == ["a", "b", "c"]
    run(main())
