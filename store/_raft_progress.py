"""Leader-side bookkeeping: per-follower replication progress and pending ReadIndex requests."""
from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field


class ProgressState(enum.IntEnum):
    # Probe: we do not know where the follower's log matches ours; send one APP at a time
    # and wait for its answer (or a heartbeat answer) before the next.
    PROBE = 0
    # Replicate: the follower is known to match; stream APPs optimistically (pipelining),
    # advancing `next` as soon as a message is sent, bounded by the in-flight window.
    REPLICATE = 1
    # Snapshot: the follower needs entries we compacted; an InstallSnapshot is on its way.
    SNAPSHOT = 2


class Inflights:
    """The last indexes of APP messages sent but not yet acknowledged, oldest first."""

    __slots__ = ("capacity", "_q")

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._q: deque[int] = deque()

    def __len__(self) -> int:
        return len(self._q)

    def full(self) -> bool:
        return len(self._q) >= self.capacity

    def add(self, last_index: int) -> None:
        self._q.append(last_index)

    def free_le(self, index: int) -> None:
        """An acknowledgement up to `index` covers every message ending at or before it."""
        q = self._q
        while q and q[0] <= index:
            q.popleft()

    def free_first(self) -> None:
        if self._q:
            self._q.popleft()

    def reset(self) -> None:
        self._q.clear()


class Progress:
    """What the leader knows of one follower's log (paper Figure 2: nextIndex, matchIndex)."""

    __slots__ = ("match", "next", "state", "probe_sent", "pending_snapshot", "recent_active",
                 "inflights", "snapshot_elapsed", "stalled_heartbeats")

    def __init__(self, next_index: int, max_inflight: int):
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        # Set by any response from the follower; CheckQuorum reads and clears it.
        self.recent_active = False
        self.inflights = Inflights(max_inflight)
        self.snapshot_elapsed = 0
        self.stalled_heartbeats = 0

    def __repr__(self) -> str:
        return (f"Progress({self.state.name}, match={self.match}, next={self.next}, "
                f"inflight={len(self.inflights)}, probe_sent={self.probe_sent})")

    def _reset_state(self, state: ProgressState) -> None:
        self.state = state
        self.probe_sent = False
        self.pending_snapshot = 0
        self.snapshot_elapsed = 0
        self.stalled_heartbeats = 0
        self.inflights.reset()

    def become_probe(self) -> None:
        # Coming back from a snapshot, the follower most likely has it by now: probe right
        # after it rather than from scratch.
        floor = self.pending_snapshot + 1 if self.state == ProgressState.SNAPSHOT else 0
        self._reset_state(ProgressState.PROBE)
        self.next = max(self.match + 1, floor)

    def become_replicate(self) -> None:
        self._reset_state(ProgressState.REPLICATE)
        self.next = self.match + 1

    def become_snapshot(self, snap_index: int) -> None:
        self._reset_state(ProgressState.SNAPSHOT)
        self.pending_snapshot = snap_index

    def lost_log(self, last_index: int) -> None:
        """The follower lost entries it had acknowledged (wiped storage): start over from what
        it still has. Lowering match is always safe: it only delays commits."""
        self.match = last_index
        self._reset_state(ProgressState.PROBE)
        self.next = last_index + 1

    def maybe_update(self, n: int) -> bool:
        """An APP_RESP acknowledged everything up to n. Returns whether match advanced."""
        updated = n > self.match
        if updated:
            self.match = n
            self.probe_sent = False
        if self.next < n + 1:
            self.next = n + 1
        return updated

    def sent_entries(self, last: int) -> None:
        """An APP ending at `last` left: optimistic in replicate state, one-at-a-time in probe."""
        if self.state == ProgressState.REPLICATE:
            self.next = last + 1
            self.inflights.add(last)
        elif self.state == ProgressState.PROBE:
            self.probe_sent = True

    def maybe_decr_to(self, rejected: int, hint: int) -> bool:
        """An APP with prev index `rejected` was refused; `hint` is the next index worth trying
        minus one. Returns False if the rejection is stale (out of order) and was ignored."""
        if self.state == ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            # Everything in flight after match is suspect: fall back to match+1 and probe.
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False  # answers an older probe
        self.next = max(min(rejected, hint + 1), self.match + 1)
        self.probe_sent = False
        return True

    def is_paused(self) -> bool:
        if self.state == ProgressState.PROBE:
            return self.probe_sent
        if self.state == ProgressState.REPLICATE:
            return self.inflights.full()
        return True


@dataclass(slots=True)
class _ReadRequest:
    ctx: bytes
    index: int  # the leader's commit index when the request arrived
    requester: str  # whom to answer: the leader itself or a forwarding follower
    acks: set[str] = field(default_factory=set)


class ReadIndexQueue:
    """ReadIndex requests waiting for a heartbeat round to confirm leadership (thesis §6.4).

    Requests are confirmed in arrival order: a heartbeat carries the newest ctx, and a
    quorum acknowledging a heartbeat sent after request k also vouches for all requests
    before k, so they are released together.
    """

    __slots__ = ("_pending", "_order")

    def __init__(self) -> None:
        self._pending: dict[bytes, _ReadRequest] = {}
        self._order: list[bytes] = []

    def __len__(self) -> int:
        return len(self._order)

    def add(self, ctx: bytes, index: int, requester: str) -> bool:
        if ctx in self._pending:
            return False  # a duplicate ctx is already waiting; keep the first
        self._pending[ctx] = _ReadRequest(ctx, index, requester)
        self._order.append(ctx)
        return True

    def ack(self, ctx: bytes, frm: str) -> set[str] | None:
        req = self._pending.get(ctx)
        if req is None:
            return None
        req.acks.add(frm)
        return req.acks

    def release_through(self, ctx: bytes) -> list[_ReadRequest]:
        k = self._order.index(ctx) + 1
        done, self._order = self._order[:k], self._order[k:]
        return [self._pending.pop(c) for c in done]

    def last_ctx(self) -> bytes:
        return self._order[-1] if self._order else b""
