"""The clients waiting for their proposals to apply, by request id: `PendingRequests`.

A request is answered when its entry applies on this replica (`resolve`); it has an unknown
fate (OutcomeUnknown) if the replica stops leading the term it was proposed in (`check`), if it
does not apply within the request timeout, or if the replica stops (`fail_all`)."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from kubemu import wire

from .errors import to_wire_error
from .mvcc import StoreError


@dataclass(eq=False)
class _Pending:
    future: asyncio.Future
    term: int


class PendingRequests:
    def __init__(self, timeout: float):
        self._timeout = timeout
        self._pending: dict[int, _Pending] = {}
        self._term_checked = -1

    async def wait(self, rid: int, term: int) -> dict:
        """The result of request `rid`, proposed in `term`."""
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = _Pending(fut, term)
        try:
            return await asyncio.wait_for(fut, self._timeout)
        except asyncio.TimeoutError:
            raise wire.OutcomeUnknown(f"the request did not apply within {self._timeout:g}s; "
                                      f"it may or may not take effect") from None
        finally:
            self._pending.pop(rid, None)

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
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(err)
