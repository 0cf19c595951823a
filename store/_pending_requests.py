"""The clients waiting for their proposals to apply, by request id: `PendingRequests`.

A request is answered when its entry applies on this replica (`resolve`); it has an unknown
fate (OutcomeUnknown) if the replica stops leading the term it was proposed in (`check`), if it
does not apply within the request timeout (`expire`, called on every tick: one deadline queue
instead of a timer per request), or if the replica stops (`fail_all`). The leader also keeps
the request it parsed, so applying its own entry does not parse it again (`op`)."""
from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from kubemu import wire

from .errors import to_wire_error
from .mvcc import StoreError


class _Pending:
    __slots__ = ("future", "term", "op")

    def __init__(self, future: asyncio.Future, term: int, op: Any):
        self.future, self.term, self.op = future, term, op


class PendingRequests:
    def __init__(self, timeout: float):
        self._timeout = timeout
        self._pending: dict[int, _Pending] = {}
        self._deadlines: deque[tuple[float, int]] = deque()  # in order: one timeout for all
        self._term_checked = -1

    def add(self, rid: int, term: int, now: float, op: Any = None) -> asyncio.Future:
        """A future for the result of request `rid`, proposed in `term` at loop time `now`."""
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = _Pending(fut, term, op)
        self._deadlines.append((now + self._timeout, rid))
        return fut

    def op(self, rid: Any) -> Any:
        """What the proposer parsed for request `rid`, if it still waits here."""
        p = self._pending.get(rid) if isinstance(rid, int) else None
        return None if p is None else p.op

    def resolve(self, rid: Any, res: Any) -> None:
        p = self._pending.pop(rid, None) if isinstance(rid, int) else None
        if p is None or p.future.done():
            return
        if isinstance(res, StoreError):
            p.future.set_exception(to_wire_error(res))
        elif res is None:
            p.future.set_exception(wire.OutcomeUnknown("the entry applied without a result"))
        else:
            p.future.set_result(res)

    def expire(self, now: float) -> None:
        """Requests older than the timeout have an unknown fate."""
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            p = self._pending.pop(deadlines.popleft()[1], None)
            if p is not None and not p.future.done():
                p.future.set_exception(wire.OutcomeUnknown(
                    f"the request did not apply within {self._timeout:g}s; it may or may not take effect"))
        if not self._pending:
            deadlines.clear()

    def check(self, leading: bool, term: int) -> None:
        """Proposals of a term this replica no longer leads have an unknown fate."""
        if not self._pending or (leading and term == self._term_checked):
            return
        stale = [rid for rid, p in self._pending.items() if not leading or p.term != term]
        for rid in stale:
            fut = self._pending.pop(rid).future
            if not fut.done():
                fut.set_exception(wire.OutcomeUnknown(
                    "leadership was lost before the request applied; it may or may not take effect"))
        self._term_checked = term if leading else -1

    def fail_all(self, err: wire.WireError) -> None:
        pending, self._pending = self._pending, {}
        self._deadlines.clear()
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(err)
