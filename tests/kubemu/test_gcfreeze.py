"""kubemu.gcfreeze: what is tracked goes to the permanent generation at each tick, and every
thaw_s it comes back and cyclic garbage frozen meanwhile is collected."""
from __future__ import annotations

import asyncio
import gc
import weakref

from kubemu.gcfreeze import GcFreezer, keep_frozen


class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_tick_freezes_and_the_thaw_collects_cycles_that_died_frozen():
    gc.collect()
    before = gc.get_threshold()
    f = GcFreezer(thaw_s=300.0)
    try:
        node = Node()
        dead = weakref.ref(node)
        f.tick(0.0)
        assert gc.get_freeze_count() > 0
        del node
        gc.collect()
        assert dead() is not None  # frozen: not even a full collection looks at it
        f.tick(299.0)
        assert dead() is not None
        f.tick(300.0)  # the thaw
        assert dead() is None
        assert gc.get_freeze_count() > 0  # and frozen again
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_the_first_tick_raises_the_young_generations_threshold_only():
    before = gc.get_threshold()
    try:
        GcFreezer(young=12_345).tick(0.0)
        assert gc.get_threshold() == (12_345, *before[1:])
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_keep_frozen_ticks_each_period_until_cancelled():
    ticks: list[float] = []

    class Recording(GcFreezer):
        def tick(self, now: float) -> None:
            ticks.append(now)
            super().tick(now)

    async def body():
        task = asyncio.create_task(keep_frozen(Recording(), 0.01))
        await asyncio.sleep(0.1)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        seen = len(ticks)
        await asyncio.sleep(0.03)
        return seen

    before = gc.get_threshold()
    try:
        seen = asyncio.run(body())
        assert seen >= 3 and len(ticks) == seen, "the ticks stop with the task"
        assert ticks == sorted(ticks)
        assert gc.get_freeze_count() > 0, "what was tracked is out of the collections"
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
