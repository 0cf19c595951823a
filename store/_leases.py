"""The leader's lease expiry: `LeaseExpiry` keeps the `LeaseClock` in step with the applied
lease grants and revocations, answers keepalives, and proposes lease_revoke for expired leases
from one loop timer armed at the earliest expiry (again after LEASE_REVOKE_RETRY_S if the
revocation has not applied by then). It acts only while the replica leads."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from kubemu import wire

from .errors import to_wire_error
from .mvcc import KVStore, LeaseClock, StoreError, lease_revoke_op

log = logging.getLogger("store.server")

LEASE_REVOKE_RETRY_S = 2.0


class LeaseExpiry:
    """Owned by the replica, which says whether it leads (`leading`) or has halted (`halted`),
    calls `on_become_leader` / `on_lose_leadership` as its role changes and `applied` for each
    applied request; `propose` proposes a request nobody waits for."""

    def __init__(self, loop: asyncio.AbstractEventLoop, kv: KVStore, propose: Callable[[dict], None],
                 leading: Callable[[], bool], halted: Callable[[], bool]):
        self._loop = loop
        self._kv = kv
        self._propose = propose
        self._leading = leading
        self._halted = halted
        self._clock = LeaseClock()
        self._timer: asyncio.TimerHandle | None = None
        self._revoking: dict[int, float] = {}

    def on_become_leader(self, now: float) -> None:
        self._revoking.clear()
        self._clock.on_become_leader(now, self._kv.leases())
        self._rearm()

    def on_lose_leadership(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def applied(self, req: dict, res: Any) -> None:
        """`res`: the entry's result, a response or APPLIED (not built: an entry another
        replica proposed) or a StoreError; a granted lease's id and TTL are the request's."""
        op = req.get("op") if isinstance(req, dict) else None
        if op == "lease_grant" and not isinstance(res, StoreError):
            if self._leading():
                now = self._loop.time()
                self._clock.grant(req["id"], req["ttl"], now)
                self._timer_at(now + req["ttl"])
        elif op == "lease_revoke":
            lid = req.get("id")
            self._clock.revoke(lid)
            self._revoking.pop(lid, None)

    def keepalive(self, id: int) -> int:
        """The lease's TTL, its expiry moved to a full TTL from now."""
        if id in self._revoking:
            raise wire.NotFound("requested lease not found (expired)", {"id": id, "reason": "LeaseNotFound"})
        try:
            return self._clock.refresh(id, self._loop.time())
        except StoreError as err:
            raise to_wire_error(err) from None

    def _timer_at(self, when: float) -> None:
        if not self._leading():
            return
        if self._timer is not None:
            if self._timer.when() <= when:
                return
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._on_timer)

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._leading():
            return
        now = self._loop.time()
        soonest = None
        for lid, _, _ in self._kv.leases():
            if lid not in self._clock:
                continue
            at = self._revoking[lid] if lid in self._revoking else now + self._clock.remaining(lid, now)
            soonest = at if soonest is None else min(soonest, at)
        if soonest is not None:
            self._timer = self._loop.call_at(soonest, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if not self._leading() or self._halted():
            return
        now = self._loop.time()
        for lid in self._clock.expired(now):
            if self._revoking.get(lid, 0) > now:
                continue
            self._revoking[lid] = now + LEASE_REVOKE_RETRY_S
            log.info("lease %d expired: revoking it", lid)
            self._propose(lease_revoke_op(lid))
        self._rearm()
