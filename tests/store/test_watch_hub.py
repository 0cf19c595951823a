"""store._watch_hub: which applied events each live watcher is handed."""
from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from store._mvcc_requests import KeyRange
from store._watch_hub import WatchHub
from store.mvcc import DELETE, PUT, Event, make_kv

# Few short keys, so that batches repeat keys and ranges start and stop exactly on them.
KEYS = [b"a", b"a\0", b"ab", b"b", b"ba", b"c"]
keys = st.sampled_from(KEYS)
ranges = st.builds(KeyRange, keys, st.none() | keys)  # includes empty ranges (stop <= start)
watches = st.lists(st.tuples(ranges, st.integers(1, 6)), min_size=1, max_size=6)  # (keys, start revision)
batches = st.lists(st.tuples(keys, st.sampled_from([PUT, DELETE])), min_size=1, max_size=12)


def _batch(changes: list[tuple[bytes, str]]) -> list[Event]:
    """One applied batch: revision 2 on, one per change, so the order is the revisions'."""
    return [Event(kind, make_kv(key, b"v", rev, rev, 1, 0), None) for rev, (key, kind) in enumerate(changes, 2)]


@settings(max_examples=300, deadline=None)
@given(watches, batches)
def test_each_watcher_gets_exactly_its_events_in_revision_order(watched, changes):
    """Every event in the watcher's key range at or after its start revision, none other, in
    the batch's order: the key-sorted search must neither drop an event at a range's edge
    (key == start; key just below stop) nor reorder a batch that changes one key twice."""
    events = _batch(changes)

    async def run():
        hub = WatchHub()
        ws = [hub.add(rng, False, start) for rng, start in watched]
        hub.publish(events, events[-1].revision)
        for w, (rng, start) in zip(ws, watched):
            want = [(e.type, e.kv["key"], e.revision) for e in events if e.revision >= start and e.kv["key"] in rng]
            got = [] if not w.items else [(e["type"], e["kv"]["key"], e["kv"]["mod_revision"])
                                          for e in (await w.next())["events"]]
            assert got == want, (rng, start)
            assert not w.items  # one batch in, at most one item out

    asyncio.run(run())
