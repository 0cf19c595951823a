"""store._pending_requests: clients' proposals waiting to apply, driven by a fake clock."""
from __future__ import annotations

import asyncio

import pytest

from kubemu import wire
from store._pending_requests import PendingRequests
from store.mvcc import KeyNotFound


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_resolve_answers_and_errors_become_wire_errors():
    async def main():
        p = PendingRequests(timeout=5.0)
        ok, bad, empty = (p.add(rid, 1, 0.0, op=f"op{rid}") for rid in (1, 2, 3))
        assert p.op(1) == "op1" and p.op(99) is None and p.op("x") is None
        p.resolve(1, {"header": {}})
        p.resolve(2, KeyNotFound("key not found", key=b"k"))
        p.resolve(3, None)
        p.resolve(1, {"twice": True})  # already answered: ignored
        p.resolve("not-an-id", {})
        assert ok.result() == {"header": {}}
        assert isinstance(bad.exception(), wire.WireError) and "key not found" in str(bad.exception())
        assert isinstance(empty.exception(), wire.OutcomeUnknown)
        assert p.op(1) is None  # nothing kept once answered
    run(main())


def test_expire_fails_only_requests_past_the_timeout():
    async def main():
        p = PendingRequests(timeout=5.0)
        early, late = p.add(1, 1, 0.0), p.add(2, 1, 3.0)
        p.expire(4.99)
        assert not early.done() and not late.done()
        p.expire(5.0)
        assert isinstance(early.exception(), wire.OutcomeUnknown) and "within 5s" in str(early.exception())
        assert not late.done()
        p.resolve(2, {"ok": 1})
        p.expire(100.0)  # an answered request is not failed later
        assert late.result() == {"ok": 1}
        p.resolve(1, {"too": "late"})  # an expired request stays failed
        assert isinstance(early.exception(), wire.OutcomeUnknown)
    run(main())


def test_a_cancelled_waiter_is_left_alone():
    async def main():
        p = PendingRequests(timeout=5.0)
        fut = p.add(1, 1, 0.0, op="op")
        fut.cancel()  # the client gave up (CANCEL); its entry may still apply
        assert p.op(1) == "op"
        p.resolve(1, {"ok": 1})
        p.expire(10.0)
        assert fut.cancelled()
    run(main())


def test_losing_the_term_or_stopping_makes_outcomes_unknown():
    async def main():
        p = PendingRequests(timeout=5.0)
        old, new = p.add(1, 1, 0.0), p.add(2, 2, 0.0)
        p.check(leading=True, term=2)
        assert isinstance(old.exception(), wire.OutcomeUnknown) and "leadership" in str(old.exception())
        assert not new.done()
        p.check(leading=False, term=2)
        assert isinstance(new.exception(), wire.OutcomeUnknown)
        last = p.add(3, 3, 0.0)
        p.fail_all(wire.Unavailable("stopping"))
        assert isinstance(last.exception(), wire.Unavailable)
        p.expire(100.0)  # nothing left to fail
    run(main())


@pytest.mark.parametrize("n", [1, 1000])
def test_deadline_queue_does_not_outlive_its_requests(n):
    async def main():
        p = PendingRequests(timeout=1.0)
        futs = [p.add(rid, 1, rid / n, op=rid) for rid in range(n)]
        for rid in range(n):
            p.resolve(rid, {"i": rid})
        p.expire(0.5)
        assert [f.result()["i"] for f in futs] == list(range(n))
        assert not p._deadlines  # idle: no leftovers
    run(main())
