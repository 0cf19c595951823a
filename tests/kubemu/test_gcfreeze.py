"""kubemu.gcfreeze: what is tracked goes to the permanent generation at each tick, and every
thaw_s it comes back and cyclic garbage frozen meanwhile is collected."""
from __future__ import annotations

import gc
import weakref

from kubemu.gcfreeze import GcFreezer


class Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_tick_freezes_and_the_thaw_collects_cycles_that_died_frozen():
    gc.collect()
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
        gc.unfreeze()
