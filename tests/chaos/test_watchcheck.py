"""kubemu/chaos/watchcheck.py: a watch's events against the store's history, across reconnects."""
from __future__ import annotations

import random

import pytest

from kubemu.chaos.history import DELETE, PUT, Change, HistoryError
from kubemu.chaos.watchcheck import (BEFORE_START, DUPLICATE, MISMATCH, MISSED, OUT_OF_ORDER, OUTSIDE, PHANTOM,
                                     WatchSession, check_list, check_watch, state_at)
from store.backend import MemoryBackend
from store.mvcc import KVStore, delete_op, put_op, txn_op

# revision 2: a; 3: b; 4: a and c together (one txn); 5: delete b; 6: x (not watched); 7: a
STORE = [Change(2, "a", PUT, 1), Change(3, "b", PUT, 1), Change(4, "a", PUT, 2), Change(4, "c", PUT, 1),
         Change(5, "b", DELETE), Change(6, "x", PUT, 1), Change(7, "a", PUT, 3)]
ABC = frozenset("abc").__contains__


def watched_changes(lo=0, hi=99):
    return [c for c in STORE if ABC(c.key) and lo <= c.revision <= hi]


def kinds(result):
    return sorted({v.kind for v in result.violations})


def test_one_stream_with_everything_passes():
    result = check_watch(STORE, [WatchSession(2, watched_changes())], watched=ABC, until=7)
    assert result.ok and (result.delivered, result.expected) == (6, 6)
    assert "ok (6 events delivered, 6 expected)" in str(result)


def test_a_stream_that_starts_later_owes_nothing_before_it():
    assert check_watch(STORE, [WatchSession(4, watched_changes(4))], watched=ABC, until=7).ok


def test_reconnect_resuming_after_the_last_event_passes():
    sessions = [WatchSession(2, watched_changes(2, 3)), WatchSession(4, watched_changes(4, 4)),
                WatchSession(5, watched_changes(5))]
    assert check_watch(STORE, sessions, watched=ABC, until=7).ok


def test_resuming_from_a_bookmark_past_changes_it_does_not_watch_passes():
    # the last event was at 5; nothing watched changed at 6, so resuming from 7 skips nothing
    sessions = [WatchSession(2, watched_changes(2, 5)), WatchSession(7, watched_changes(7))]
    assert check_watch(STORE, sessions, watched=ABC, until=7).ok


def test_resuming_one_revision_too_late_misses_a_change():
    sessions = [WatchSession(2, watched_changes(2, 3)), WatchSession(5, watched_changes(5))]
    result = check_watch(STORE, sessions, watched=ABC, until=7, name="pods")
    assert kinds(result) == [MISSED]
    assert {v.change for v in result.violations} == {STORE[2], STORE[3]}  # both keys of revision 4
    assert "watch pods: FAILED" in str(result) and "2 missed" in str(result)


def test_resuming_from_the_last_event_again_delivers_it_twice():
    sessions = [WatchSession(2, watched_changes(2, 3)), WatchSession(3, watched_changes(3))]
    result = check_watch(STORE, sessions, watched=ABC, until=7)
    assert kinds(result) == [DUPLICATE]
    assert [v.change for v in result.violations] == [STORE[1]]


def test_a_lost_event_inside_a_stream_is_missed():
    events = watched_changes()
    del events[2]  # one of the two keys of revision 4's txn
    result = check_watch(STORE, [WatchSession(2, events)], watched=ABC)
    assert kinds(result) == [MISSED] and result.violations[0].change == STORE[2]


def test_a_lost_tail_is_missed_only_if_the_watch_is_known_to_have_caught_up():
    sessions = [WatchSession(2, watched_changes(2, 5))]
    assert check_watch(STORE, sessions, watched=ABC).ok  # it may simply be behind
    result = check_watch(STORE, sessions, watched=ABC, until=7)
    assert kinds(result) == [MISSED] and result.violations[0].change == STORE[6]


def test_out_of_order_delivery_is_caught():
    events = watched_changes()
    events[0], events[1] = events[1], events[0]
    assert kinds(check_watch(STORE, [WatchSession(2, events)], watched=ABC)) == [OUT_OF_ORDER]
    events = watched_changes()
    events[1], events[2] = events[2], events[1]  # a txn's keys before the revision before it
    assert kinds(check_watch(STORE, [WatchSession(2, events)], watched=ABC)) == [OUT_OF_ORDER]


def test_events_the_store_did_not_do_are_caught():
    events = watched_changes()
    assert kinds(check_watch(STORE, [WatchSession(2, events + [Change(9, "a", PUT, 4)])], watched=ABC)) == [PHANTOM]
    wrong_value = events[:2] + [Change(4, "a", PUT, 99)] + events[3:]
    assert kinds(check_watch(STORE, [WatchSession(2, wrong_value)], watched=ABC)) == [MISMATCH]
    # consumers that see transformed values may compare types and revisions only
    assert check_watch(STORE, [WatchSession(2, wrong_value)], watched=ABC, compare_values=False).ok
    wrong_type = events[:4] + [Change(5, "b", PUT, 1)] + events[5:]
    assert kinds(check_watch(STORE, [WatchSession(2, wrong_type)], watched=ABC, compare_values=False)) == [MISMATCH]


def test_events_outside_the_range_or_before_the_start_are_caught():
    everything = check_watch(STORE, [WatchSession(2, list(STORE))], watched=ABC)
    assert kinds(everything) == [OUTSIDE]
    early = check_watch(STORE, [WatchSession(4, watched_changes(3))], watched=ABC)
    assert kinds(early) == [BEFORE_START]


def test_a_relisted_session_is_excused_the_gap_but_not_what_follows():
    sessions = [WatchSession(2, watched_changes(2, 2)), WatchSession(6, watched_changes(6), relisted=True)]
    assert check_watch(STORE, sessions, watched=ABC, until=7).ok
    lossy = [sessions[0], WatchSession(6, [], relisted=True)]
    result = check_watch(STORE, lossy, watched=ABC, until=7)
    assert kinds(result) == [MISSED] and [v.change for v in result.violations] == [STORE[6]]


def test_a_store_history_out_of_order_is_refused():
    with pytest.raises(HistoryError, match="goes back"):
        check_watch([STORE[2], STORE[0]], [])
    with pytest.raises(HistoryError, match="twice"):
        check_watch([STORE[0], STORE[0]], [])


# ------------------------------------------------------------------- against the real store

def random_store(seed: int, n: int) -> KVStore:
    rng = random.Random(seed)
    kv = KVStore(MemoryBackend())
    keys = [b"/pods/%d" % i for i in range(5)] + [b"/nodes/%d" % i for i in range(2)]
    for index in range(1, n + 1):
        r = rng.random()
        if r < 0.15:
            kv.apply(index, delete_op(rng.choice(keys)))
        elif r < 0.3:
            a, b = rng.sample(keys, 2)
            kv.apply(index, txn_op(success=[put_op(a, b"t%d" % index), put_op(b, b"u%d" % index)]))
        else:
            kv.apply(index, put_op(rng.choice(keys), b"v%d" % index))
    return kv


def pods(key) -> bool:
    return key.startswith(b"/pods/")


def replay_watch(kv: KVStore, rng: random.Random, resume_off_by: int = 0) -> tuple[list[WatchSession], int]:
    """A consumer of kv.events(): its stream drops now and then and it reopens after the last
    revision it saw (plus `resume_off_by`, a bug); how many times it reopened wrongly in a way
    that skips or repeats a change it watches."""
    sessions, last, bugs = [], 0, 0
    start = 1
    while True:
        session = WatchSession(start)
        sessions.append(session)
        for event in kv.events(start, b"/pods/", b"/pods0"):
            change = Change.from_store_event(event)
            if session.events and change.revision != session.events[-1].revision and rng.random() < 0.1:
                break  # the stream drops between revisions
            session.events.append(change)
            last = change.revision
        else:
            return sessions, bugs
        start = last + 1 + resume_off_by
        if resume_off_by < 0:
            bugs += 1  # the change at `last` comes again
        elif resume_off_by > 0:
            bugs += any(e.revision == last + 1 for e in kv.events(last + 1, b"/pods/", b"/pods0"))


@pytest.mark.parametrize("seed", range(10))
def test_a_real_store_history_and_a_correctly_resuming_consumer_pass(seed):
    kv = random_store(seed, 300)
    store = [Change.from_store_event(e) for e in kv.events(1)]
    sessions, _ = replay_watch(kv, random.Random(seed))
    assert len(sessions) > 5
    result = check_watch(store, sessions, watched=pods, until=kv.revision)
    assert result.ok, str(result)
    assert result.expected == sum(1 for c in store if pods(c.key))


@pytest.mark.parametrize("off_by", [1, -1])
def test_a_consumer_that_resumes_at_the_wrong_revision_fails(off_by):
    for seed in range(10):
        kv = random_store(seed, 300)
        store = [Change.from_store_event(e) for e in kv.events(1)]
        sessions, bugs = replay_watch(kv, random.Random(seed), resume_off_by=off_by)
        assert bugs > 0
        result = check_watch(store, sessions, watched=pods, until=kv.revision)
        assert kinds(result) == ([MISSED] if off_by > 0 else [DUPLICATE]), str(result)


def test_a_relist_must_show_the_state_at_its_revision():
    assert state_at(STORE, 4) == {"a": 2, "b": 1, "c": 1}
    assert state_at(STORE, 7) == {"a": 3, "c": 1, "x": 1}
    assert check_list(STORE, 5, {"a": 2, "c": 1}, watched=ABC).ok
    result = check_list(STORE, 5, {"a": 1, "b": 1}, watched=ABC, name="pods list")
    assert kinds(result) == [MISMATCH, MISSED, PHANTOM]
    assert "the list at revision 5 lacks 'c'" in str(result) and "'b', absent then" in str(result)
    assert check_list(STORE, 5, {"a": 1, "c": 1}, watched=ABC, compare_values=False).ok


@pytest.mark.parametrize("seed", range(3))
def test_a_relist_from_the_real_store_matches(seed):
    kv = random_store(seed, 200)
    store = [Change.from_store_event(e) for e in kv.events(1)]
    for revision in (2, kv.revision // 2, kv.revision):
        listed = {kv_["key"]: kv_["value"] for kv_ in kv.range(b"/pods/", b"/pods0", revision=revision)["kvs"]}
        assert check_list(store, revision, listed, watched=pods).ok
    listed.popitem()
    assert kinds(check_list(store, kv.revision, listed, watched=pods)) == [MISSED]
