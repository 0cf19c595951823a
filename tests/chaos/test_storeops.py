"""kubemu/chaos/storeops.py: histories recorded against the store's real state machine (KVStore)
through the mapping of register operations to store requests are judged correct by every
checker; a store that acknowledges a write it never applied is caught."""
from __future__ import annotations

import heapq

import pytest

from kubemu.chaos.acked import LOST, check_acked, check_revisions
from kubemu.chaos.history import CAS, READ, SWAP, Change, History, HistoryError, Versions
from kubemu.chaos.linearizability import Verdict, check
from kubemu.chaos.storeops import cas_request, outcome, read_request, write_request
from store.backend import MemoryBackend
from store.mvcc import KVStore, put_op

from . import sim


def record(seed: int, n: int, lose: int | None = None):
    """Play sim.plan's operations against a KVStore, each taking effect at its planned instant.
    A process's cas compares the mod_revision it last saw for the key. `lose`: the id of a plain
    write the store acknowledges (with a revision it gives nobody else) but never applies."""
    planned = sim.plan(seed, n, keys=("a", "b"), processes=4, info_rate=0.06)
    kv = KVStore(MemoryBackend())
    kv.apply(1, put_op(b"/other", b"x"))  # revisions and indexes need not start together
    index = [1]
    history, versions = History(clock=lambda: now[0]), Versions()
    seen: dict[tuple[int, bytes], int] = {}
    requests, answers = {}, {}
    now = [0.0]
    queue = []
    for op in planned:
        for stage, at in ((0, op.call), (1, op.lin), (2, op.ret)):
            if stage != 1 or op.applied:
                heapq.heappush(queue, (at, stage, op.id, op))
    while queue:
        now[0], stage, _, op = heapq.heappop(queue)
        key = b"/k/" + op.key.encode()
        new = None if op.new is None else op.new.encode()
        if stage == 0:
            if op.f == READ:
                requests[op.id], value = read_request(key), None
            elif op.f == CAS:
                revision = seen.get((op.process, key), 0)
                requests[op.id], value = cas_request(key, revision, new), (versions.value_at(key, revision), new)
            else:
                requests[op.id], value = write_request(key, new, prev=op.f == SWAP), new
            history.invoke(op.process, op.f, key, value)
        elif stage == 1:
            if op.id == lose:
                answers[op.id] = (None, 10_000 + op.id)
                continue
            index[0] += 1
            if op.f == READ:
                response = kv.range(key)
            else:
                response, _ = kv.apply(index[0], requests[op.id])
            answers[op.id] = outcome(op.f, response)
        elif op.outcome == sim.OK:
            output, revision = answers[op.id]
            wrote = op.f != READ and (op.f != CAS or output)
            versions.learn(key, revision or 0, new if wrote else output)
            if op.f == READ or wrote:
                # the mod_revision a later compare can name: 0 once the key is absent
                seen[(op.process, key)] = 0 if (new if wrote else output) is None else revision
            history.ok(op.process, output, revision=revision)
        elif op.outcome == sim.FAIL:
            history.fail(op.process, error="not executed")
        else:
            history.info(op.process, error="timed out")
    truth = [Change.from_store_event(e) for e in kv.events(1)]
    final = {k: kv.range(k)["kvs"][0]["value"] for k in (b"/k/a", b"/k/b") if kv.range(k)["kvs"]}
    return history.operations(), truth, final


@pytest.mark.parametrize("seed", range(8))
def test_histories_recorded_against_the_real_state_machine_pass_every_check(seed):
    ops, truth, final = record(seed, 300)
    assert check(ops).verdict is Verdict.VALID, str(check(ops))
    acked = check_acked(ops, final)
    assert acked.ok, str(acked)
    revisions = check_revisions(ops, truth)
    assert revisions.ok, str(revisions)
    assert revisions.checked > 100
    cases = [op for op in ops if op.f == CAS and op.status == "ok"]
    assert {op.output for op in cases} == {True, False}  # both outcomes of the compare were exercised


def test_a_store_that_acknowledges_a_write_it_never_applied_is_caught():
    planned = sim.plan(3, 300, keys=("a", "b"), processes=4, info_rate=0.06)
    victim = next(op for op in planned[150:] if op.f == "write" and op.outcome == sim.OK and op.new)
    ops, truth, final = record(3, 300, lose=victim.id)
    result = check_revisions(ops, truth)
    assert [v.kind for v in result.violations] == [LOST]
    assert result.violations[0].op.input == victim.new.encode()


def test_outcomes_of_each_answer():
    kv = KVStore(MemoryBackend())
    k = b"/k"
    assert outcome(READ, kv.range(k)) == (None, 0)
    assert outcome("write", kv.apply(1, write_request(k, b"a"))[0]) == (None, 2)
    assert outcome(READ, kv.range(k), bytes.decode) == ("a", 2)
    assert outcome(SWAP, kv.apply(2, write_request(k, b"b", prev=True))[0]) == (b"a", 3)
    assert outcome(CAS, kv.apply(3, cas_request(k, 2, b"c"))[0]) == (False, None)  # 409: it is at 3 now
    assert outcome(CAS, kv.apply(4, cas_request(k, 3, b"c"))[0]) == (True, 4)
    assert outcome(SWAP, kv.apply(5, write_request(k, None, prev=True))[0]) == (b"c", 5)
    # a delete of nothing changes nothing: no revision to hold against the store's history
    assert outcome("write", kv.apply(6, write_request(k, None))[0]) == (None, None)
    assert outcome(SWAP, kv.apply(7, write_request(k, None, prev=True))[0]) == (None, None)
    # once absent, the key compares as mod_revision 0 (not the delete's revision): a create
    assert outcome(CAS, kv.apply(8, cas_request(k, 5, b"d"))[0]) == (False, None)
    assert outcome(CAS, kv.apply(9, cas_request(k, 0, b"d"))[0]) == (True, 6)
    with pytest.raises(HistoryError):
        outcome("increment", {"header": {"revision": 1}})
