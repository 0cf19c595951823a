"""kubemu/chaos/history.py: recording, pairing, round trips, and the store's vocabulary."""
from __future__ import annotations

import json

import pytest

from kubemu.chaos.history import (CAS, DELETE, FAIL, INFO, OK, PUT, READ, WRITE, Change, Event, History, HistoryError,
                                  Operation, Versions, operations)
from store.mvcc import Event as StoreEvent, make_kv


def fake_clock():
    ticks = iter(range(1000))
    return lambda: next(ticks)


def test_recorder_pairs_invokes_with_completions():
    h = History(fake_clock())
    h.invoke(1, WRITE, "k", "a")
    h.invoke(2, WRITE, "k", "b")  # concurrent with process 1's
    h.ok(1, revision=5)
    h.info(2, error="timed out")
    h.invoke(2, CAS, "k", ("a", "c"))  # a process may go on after an unknown outcome
    h.fail(2, error="NotLeader")
    h.invoke(3, READ, "k")
    h.ok(3, "b", revision=6)
    h.invoke(1, READ, "k")  # never answered
    assert h.operations() == [
        Operation(1, WRITE, "k", "a", None, 0, 2, OK, 5),
        Operation(2, WRITE, "k", "b", None, 1, None, INFO, None, "timed out"),
        Operation(2, CAS, "k", ("a", "c"), None, 4, 5, FAIL, None, "NotLeader"),
        Operation(3, READ, "k", None, "b", 6, 7, OK, 6),
        Operation(1, READ, "k", None, None, 8, None, INFO),
    ]


def test_recorder_refuses_what_a_client_cannot_do():
    h = History(fake_clock())
    with pytest.raises(HistoryError, match="never invoked"):
        h.ok(1)
    h.invoke(1, WRITE, "k", "a")
    with pytest.raises(HistoryError, match="is open"):
        h.invoke(1, READ, "k")
    with pytest.raises(HistoryError, match="unknown operation"):
        h.invoke(2, "increment", "k")


def test_operations_refuses_malformed_event_lists():
    inv = Event("invoke", 1, WRITE, "k", "a", 0)
    with pytest.raises(HistoryError, match="never invoked"):
        operations([Event(OK, 1, WRITE, "k", None, 1)])
    with pytest.raises(HistoryError, match="invoked again"):
        operations([inv, inv])
    with pytest.raises(HistoryError, match="does not match"):
        operations([inv, Event(OK, 1, READ, "k", None, 1)])
    with pytest.raises(HistoryError, match="before it invoked"):
        operations([Event("invoke", 1, WRITE, "k", "a", 5), Event(OK, 1, WRITE, "k", None, 1)])
    with pytest.raises(HistoryError, match="unknown event type"):
        operations([inv, Event("done", 1, WRITE, "k", None, 1)])
    with pytest.raises(HistoryError, match="malformed"):
        operations([{"type": "invoke"}])


def test_json_round_trip_keeps_operations():
    h = History(fake_clock())
    h.invoke("w1", CAS, "k", (None, "a"))
    h.ok("w1", True, revision=3)
    h.invoke("w2", READ, "k")
    h.info("w2", error="lost")
    text = json.dumps(h.to_dicts())
    assert operations(json.loads(text)) == h.operations()  # (None, "a") is a tuple again


def test_operation_helpers():
    a = Operation(1, WRITE, "k", "a", None, 0, 5, OK)
    b = Operation(2, CAS, "k", ("a", "b"), True, 5, 6, OK)
    c = Operation(3, READ, "k", None, "b", 7, None, INFO)
    assert b.new_value == "b" and a.new_value == "a"
    assert a.writes and b.writes and not c.writes
    assert not a.precedes(b)  # one instant holds a's return and b's invoke: concurrent
    assert b.precedes(c) and not c.precedes(a)  # an open operation precedes nothing
    assert "process 2: 'k' cas(('a', 'b')) -> True" in str(b) and "-> ?" in str(c)


def test_change_from_a_store_event():
    put = StoreEvent(PUT, make_kv(b"/k", b"v1", 3, 4, 2, 0))
    gone = StoreEvent(DELETE, {**make_kv(b"/k", b"", 0, 5, 0, 0)})
    assert Change.from_store_event(put) == Change(4, b"/k", PUT, b"v1")
    assert Change.from_store_event(put, bytes.decode) == Change(4, b"/k", PUT, "v1")
    assert Change.from_store_event(gone) == Change(5, b"/k", DELETE, None)


def test_versions_turn_a_revision_precondition_into_an_expected_value():
    v = Versions()
    v.learn("k", 7, "a")  # a write acknowledged at revision 7, or a read of ("a", mod_revision 7)
    v.learn("k", 0, None)
    assert v.value_at("k", 7) == "a"
    assert v.value_at("k", 0) is None  # mod_revision 0: the key is absent (a create)
    v.learn("k", 7, "other")  # a contradicting answer is the store's fault: check_revisions judges it
    assert v.value_at("k", 7) == "a"
    with pytest.raises(HistoryError, match="no answer named"):
        v.value_at("k", 8)
