"""kubemu/chaos/acked.py: every acknowledged write is still there or superseded, and sits in the
store's history at the revision it was acknowledged at."""
from __future__ import annotations

import random

import pytest

from kubemu.chaos.acked import LOST, PHANTOM, WRONG_REVISION, check_acked, check_revisions
from kubemu.chaos.history import CAS, DELETE, FAIL, INFO, OK, PUT, READ, WRITE, Change, Operation

from . import sim


def w(p, key, value, call, ret=None, status=OK, revision=None):
    return Operation(p, WRITE, key, value, None, call, ret, INFO if ret is None else status, revision)


def kinds(result):
    return [v.kind for v in result.violations]


def test_the_last_acknowledged_write_is_there():
    ops = [w(1, "k", "a", 0, 1), w(1, "k", "b", 2, 3)]
    result = check_acked(ops, {"k": "b"})
    assert result.ok and result.checked == 2
    assert "ok (2 checked)" in str(result)


def test_superseded_by_a_later_a_concurrent_or_an_unknown_write():
    assert check_acked([w(1, "k", "a", 0, 1), w(2, "k", "b", 2, 3)], {"k": "b"}).ok
    concurrent = [w(1, "k", "a", 0, 5), w(2, "k", "b", 1, 3)]
    assert check_acked(concurrent, {"k": "a"}).ok and check_acked(concurrent, {"k": "b"}).ok
    assert check_acked([w(1, "k", "a", 0, 1), w(2, "k", "b", 2)], {"k": "b"}).ok
    assert check_acked([w(1, "k", "a", 0, 1), w(2, "k", None, 2, 3)], {}).ok  # deleted since


def test_an_acknowledged_write_overwritten_by_an_older_one_is_lost():
    result = check_acked([w(1, "k", "a", 0, 1), w(2, "k", "b", 2, 3)], {"k": "a"})
    assert kinds(result) == [LOST] and result.violations[0].op.input == "b"
    assert "acknowledged" in str(result) and "returned before it was invoked" in str(result)


def test_an_acknowledged_write_that_vanished_is_lost():
    result = check_acked([w(1, "k", "a", 0, 1)], {})
    assert kinds(result) == [LOST] and "its value before any write" in result.violations[0].message
    assert check_acked([w(1, "k", "a", 0, 1)], {"k": "a"}, initial="a").ok  # it was there before


def test_a_value_nobody_wrote_is_a_phantom():
    assert kinds(check_acked([w(1, "k", "a", 0, 1)], {"k": "zzz"})) == [PHANTOM]
    # a failed write never happened: its value showing up is a phantom too
    assert kinds(check_acked([w(1, "k", "a", 0, 1, status=FAIL)], {"k": "a"})) == [PHANTOM]


def test_only_swapping_cases_count_as_acknowledged():
    failed_cas = Operation(2, CAS, "k", ("x", "b"), False, 2, 3, OK)
    assert check_acked([w(1, "k", "a", 0, 1), failed_cas], {"k": "a"}).ok
    assert kinds(check_acked([w(1, "k", "a", 0, 1), failed_cas], {"k": "b"})) == [PHANTOM]
    won = Operation(2, CAS, "k", ("a", "b"), True, 2, 3, OK)
    assert kinds(check_acked([w(1, "k", "a", 0, 1), won], {"k": "a"})) == [LOST]


def test_acknowledged_writes_sit_at_their_revisions():
    store = [Change(2, "k", PUT, "a"), Change(3, "k", PUT, "b"), Change(4, "k", DELETE)]
    ops = [w(1, "k", "a", 0, 1, revision=2), w(1, "k", "b", 2, 3, revision=3), w(1, "k", None, 4, 5, revision=4),
           Operation(2, READ, "k", None, "b", 3, 4, OK, 3), Operation(2, READ, "k", None, None, 6, 7, OK, 0)]
    result = check_revisions(ops, store)
    assert result.ok and result.checked == 4  # a read of an absent key names no revision
    # the store lost revision 3, or holds another value there
    assert kinds(check_revisions(ops, [store[0], store[2]])) == [LOST, WRONG_REVISION]
    assert kinds(check_revisions(ops, [store[0], Change(3, "k", PUT, "c"), store[2]])) == [LOST, WRONG_REVISION]
    # revisions before the history's start may have been compacted: not judged
    assert check_revisions(ops, store[1:], since=3).ok


@pytest.mark.parametrize("seed", range(10))
def test_a_linearizable_register_keeps_every_acknowledged_write(seed):
    planned = sim.plan(seed, 200, info_rate=0.1)
    history, final = sim.run(planned, sim.Register(planned), random.Random(seed))
    result = check_acked(history.operations(), final)
    assert result.ok, str(result)
    assert result.checked > 50


def test_a_register_that_loses_its_last_acknowledged_write_fails():
    cheated = 0
    for seed in range(20):
        planned = sim.plan(seed, 100, info_rate=0.1)
        register = sim.LastWriteLosingRegister(planned)
        history, final = sim.run(planned, register, random.Random(seed))
        result = check_acked(history.operations(), final)
        if register.cheated:
            cheated += 1
            assert kinds(result) == [LOST], str(result)
            assert result.violations[0].op.input == register.victim.new
        else:
            assert result.ok
    assert cheated >= 10
