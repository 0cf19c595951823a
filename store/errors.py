"""The store's wire errors: `NotLeader`, and how the state machine's `StoreError`s cross the wire.

Every error a replica answers with is a `kubemu.wire.WireError`; the codes clients see:

    NotLeader       a write (or keepalive, member change) sent to a replica that does not lead.
                    Definitely not executed: retry it at details["endpoint"] (the leader, when
                    known; None during an election). A subclass of Unavailable, so code that
                    only knows "try again later" handles it too.
    Unavailable     not executed: no leader, the proposal was dropped by Raft (a leadership
                    transfer or a configuration change in progress), a read barrier timed out.
    OutcomeUnknown  the write was proposed but its fate is unknown (leadership lost before it
                    applied, or it did not apply in time): it may still commit.
    Gone            a revision below the compact revision (details["compact_revision"]).
    NoSpace         etcd's NOSPACE alarm: the replica's disk is full, so a write that would grow
                    the store (a put, a txn with a put, a lease grant) is refused, not executed;
                    reads, deletes and compaction go on.
    Invalid, NotFound, Conflict, TooLarge   the state machine's answer (see `to_wire_error`).
"""
from __future__ import annotations

from kubemu import wire

from .mvcc import (Compacted, DuplicateKey, FutureRevision, InvalidRequest, KeyNotFound, LeaseExists,
                   LeaseNotFound, StoreError, TooLarge)

__all__ = ["NoSpace", "NotLeader", "to_wire_error"]


class NotLeader(wire.Unavailable):
    """This replica is not the leader; details {"leader": name | None, "endpoint": ep | None}."""

    code = "NotLeader"

    @classmethod
    def of(cls, leader: str | None, endpoint: str | None) -> NotLeader:
        where = f"the leader is {leader} at {endpoint}" if leader else "no leader is known right now"
        return cls(f"not the leader: {where}", {"leader": leader, "endpoint": endpoint})

    @property
    def leader(self) -> str | None:
        return self.details.get("leader")

    @property
    def endpoint(self) -> str | None:
        return self.details.get("endpoint")


class NoSpace(wire.WireError):
    """etcd's ErrGRPCNoSpace (see the module docstring)."""

    code = "NoSpace"

    @classmethod
    def alarm(cls, member: str) -> NoSpace:
        return cls("etcdserver: mvcc: database space exceeded", {"alarm": "NOSPACE", "member": member})


# StoreError class -> wire error class (etcd's gRPC codes, more or less)
_MAP: dict[type, type[wire.WireError]] = {
    Compacted: wire.Gone,
    FutureRevision: wire.Invalid,
    LeaseNotFound: wire.NotFound,
    KeyNotFound: wire.NotFound,
    LeaseExists: wire.Conflict,
    TooLarge: wire.TooLarge,
    InvalidRequest: wire.Invalid,
    DuplicateKey: wire.Invalid,
}


def to_wire_error(err: StoreError) -> wire.WireError:
    """The wire error for a state-machine error; details keep the StoreError's details plus
    its code under "reason" (Compacted -> Gone carries {"compact_revision": N})."""
    cls = _MAP.get(type(err), wire.Invalid)
    details = dict(err.details)
    details["reason"] = err.code
    return cls(err.message, details)
