"""components.apiserver.watchcache: a watcher gets only the events after its resourceVersion."""
from __future__ import annotations

from components.apiserver.watchcache import CacheEvent, Watcher


def ev(rev: int) -> CacheEvent:
    return CacheEvent(rev, "PUT", f"/registry/pods/ns/p{rev}", {"rev": rev}, None)


def test_a_watcher_made_while_the_cache_is_behind_skips_what_it_asked_to_start_after():
    w = Watcher(start=7)  # the cache has seen up to 5 when the watch from 7 arrives
    for rev in (6, 7, 8, 9):
        w.offer(ev(rev))
    assert [e.revision for e in w.queue] == [8, 9]
    assert w.wake.is_set()
