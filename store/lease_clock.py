"""Lease expiry, kept by the Raft leader only.

In etcd, lease grants and revocations are replicated but keepalives are not: only the leader's
lessor knows when each lease expires, and when it does the leader proposes a revoke. A new
leader knows no expiry times, so it "promotes" its lessor: every lease gets a full TTL from the
moment of the takeover (an old leader's keepalives are never lost that way; a lease can only
live longer than its TTL across a leader change, never shorter).

`LeaseClock` is that bookkeeping, pure: time is a number passed in (seconds, any monotonic
origin). The shell keeps it in step with the state machine (grant/revoke as entries apply, or
`on_become_leader(now, store.leases())` to resynchronise) and asks `expired(now)` on each tick.
"""
from __future__ import annotations

from typing import Iterable

from ._mvcc_types import LeaseNotFound

__all__ = ["LeaseClock"]


class LeaseClock:
    def __init__(self) -> None:
        self._ttl: dict[int, int] = {}
        self._expiry: dict[int, float] = {}

    def __contains__(self, lease_id: int) -> bool:
        return lease_id in self._ttl

    def __len__(self) -> int:
        return len(self._ttl)

    def grant(self, lease_id: int, ttl: int, now: float) -> None:
        """A lease was granted (its grant entry applied): it expires ttl seconds from now."""
        self._ttl[lease_id] = ttl
        self._expiry[lease_id] = now + ttl

    def revoke(self, lease_id: int) -> None:
        """A lease is gone (its revoke entry applied); unknown ids are ignored."""
        self._ttl.pop(lease_id, None)
        self._expiry.pop(lease_id, None)

    def refresh(self, lease_id: int, now: float) -> int:
        """A keepalive: the lease expires a full TTL from now. Returns the TTL (etcd's
        LeaseKeepAliveResponse.TTL); LeaseNotFound if the lease is unknown."""
        ttl = self._lookup(lease_id)
        self._expiry[lease_id] = now + ttl
        return ttl

    def remaining(self, lease_id: int, now: float) -> float:
        """Seconds left before expiry, never negative (etcd's TimeToLive); LeaseNotFound if
        unknown."""
        self._lookup(lease_id)
        return max(0.0, self._expiry[lease_id] - now)

    def expired(self, now: float) -> list[int]:
        """Leases whose time is up, soonest first (then by id), still listed until revoked: the
        leader proposes their revocation and calls revoke() when it applies."""
        due = [(at, lid) for lid, at in self._expiry.items() if at <= now]
        return [lid for _, lid in sorted(due)]

    def on_become_leader(self, now: float, leases: Iterable | None = None) -> None:
        """This node just became leader: every lease gets a full TTL from now (etcd's
        lessor.Promote). `leases`, if given, is the state machine's view ((id, ttl, ...) tuples,
        as `KVStore.leases()` returns) and replaces what this clock knew."""
        if leases is not None:
            self._ttl = {lease[0]: lease[1] for lease in leases}
        self._expiry = {lid: now + ttl for lid, ttl in self._ttl.items()}

    def _lookup(self, lease_id: int) -> int:
        try:
            return self._ttl[lease_id]
        except KeyError:
            raise LeaseNotFound("requested lease not found", id=lease_id) from None
