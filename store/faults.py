"""The faults a Jepsen review injects into the store, as pure decisions: no I/O, no clock; the
shells (`store._peers` for Raft traffic, `store.backend.Disk` for the disk, `store.server` for
the `fault` wire method) ask these functions what to do.

A replica keeps one `FaultState` for its process's life (a restart forgets it, as a replaced
machine would), changed by `fault` requests (`parse_request` then `apply`):

    {"action": "partition", "from": [A, ...], "to": [B, ...], "symmetric": False}
        drop every Raft message from each A to each B (and B to A with symmetric); partitions
        add up until healed
    {"action": "delay", "ms": N, "jitter_ms": J, "from": [..] | None, "to": [..] | None}
        hold each batch of Raft messages on those links (None: every member) for a time drawn
        uniformly from [N - J, N + J] (at least 0), as netem's `delay N J`; batches drawn
        apart overtake each other, which is how the links reorder messages. ms=0 removes it
    {"action": "disk", "mode": "ok" | "full" | "fsync-fail"}
    {"action": "power-loss"}      drop what was not synced and stop at once (the shell's)
    {"action": "heal"}            every fault off
    {"action": "list"}            change nothing (answers the current faults)

Every member is told every partition (the CLI sends it to all): a member drops what it would
send on a cut link (`PeerFaults.hold`) and what arrives on one (`PeerFaults.accepts`), so a
link stays cut while either end remembers it, as a network partition outlives a process
restart on one side.

The disk modes (see `store.backend.Disk` and README "store faults" for the etcd behaviour each
one reproduces): `full` is etcd's NOSPACE alarm, kept as the member's own: while that member
leads, the writes that would grow the store are refused (`grows_store`), reads, deletes and
compaction go on; a follower with a full disk changes nothing until it leads (etcd replicates
the alarm through Raft, so every member refuses those writes whichever one leads).
`fsync-fail` makes the next synced write fail, and a member whose fsync fails stops (etcd's
fatal WAL error).
Power loss keeps, of each LevelDB log file, what the last fsync covered (`truncation_plan`).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import Enum
from typing import Mapping

from ._mvcc_requests import LeaseGrant, Op, Put, Txn

__all__ = ["ACTIONS", "DiskMode", "FaultRequest", "FaultState", "PeerFaults", "apply", "describe",
           "grows_store", "parse_request", "peer_faults", "truncation_plan"]

ACTIONS = ("partition", "delay", "disk", "power-loss", "heal", "list")
MAX_DELAY_MS = 60_000.0  # a minute: beyond it a "delay" is a partition, say so instead


class DiskMode(str, Enum):
    OK = "ok"
    FULL = "full"
    FSYNC_FAIL = "fsync-fail"


Link = tuple[str, str]  # (from, to)


@dataclass(frozen=True)
class FaultRequest:
    action: str
    links: frozenset[Link] = frozenset()  # partition: the cut links; delay: the delayed ones
    senders: frozenset[str] | None = None  # delay: None means every member
    receivers: frozenset[str] | None = None
    delay_s: float = 0.0
    jitter_s: float = 0.0
    disk: DiskMode = DiskMode.OK


@dataclass(frozen=True)
class Delay:
    senders: frozenset[str] | None  # None: every member
    receivers: frozenset[str] | None
    delay_s: float
    jitter_s: float

    def covers(self, frm: str, to: str) -> bool:
        return (self.senders is None or frm in self.senders) and (self.receivers is None or to in self.receivers)


@dataclass(frozen=True)
class FaultState:
    cut: frozenset[Link] = frozenset()
    delays: tuple[Delay, ...] = ()  # later ones win on a link both cover
    disk: DiskMode = DiskMode.OK

    @property
    def healthy(self) -> bool:
        return not self.cut and not self.delays and self.disk is DiskMode.OK


@dataclass(frozen=True)
class PeerFaults:
    """What one member does to its own Raft traffic; None stands for "nothing" (the shell's
    hot path checks only that)."""

    drop_to: frozenset[str] = frozenset()
    drop_from: frozenset[str] = frozenset()
    delay_to: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # peer -> (delay, jitter)

    def hold(self, to: str, rng: random.Random) -> float | None:
        """Seconds to hold a batch for `to` before sending it (0: now); None: drop it."""
        if to in self.drop_to:
            return None
        spec = self.delay_to.get(to)
        if spec is None:
            return 0.0
        delay, jitter = spec
        return max(0.0, delay + rng.uniform(-jitter, jitter)) if jitter else delay

    def accepts(self, frm: str) -> bool:
        return frm not in self.drop_from


def _names(value, what: str, allow_all: bool = False) -> frozenset[str] | None:
    if value is None and allow_all:
        return None
    if isinstance(value, str):
        value = [value]
    if (not isinstance(value, (list, tuple)) or not value
            or not all(isinstance(v, str) and v and len(v) <= 256 for v in value)):
        raise ValueError(f"{what}: expected a list of member names")
    return frozenset(value)


def _number(value, what: str, lo: float, hi: float) -> float:
    if type(value) not in (int, float) or not lo <= value <= hi:
        raise ValueError(f"{what}: expected a number from {lo:g} to {hi:g}")
    return float(value)


def parse_request(params) -> FaultRequest:
    """A `fault` request's parameters as a FaultRequest; ValueError says what is wrong."""
    if not isinstance(params, dict):
        raise ValueError("fault: expected a map of parameters")
    action = params.get("action")
    if action not in ACTIONS:
        raise ValueError(f"action: expected one of {', '.join(ACTIONS)}")
    known = {"partition": {"from", "to", "symmetric"}, "delay": {"ms", "jitter_ms", "from", "to"},
             "disk": {"mode"}}.get(action, set())
    extra = set(params) - known - {"action"}
    if extra:
        raise ValueError(f"{action}: unexpected parameter(s) {', '.join(sorted(map(str, extra)))}")
    if action == "partition":
        frm, to = _names(params.get("from"), "from"), _names(params.get("to"), "to")
        symmetric = params.get("symmetric", False)
        if type(symmetric) is not bool:
            raise ValueError("symmetric: expected a boolean")
        if frm & to:
            raise ValueError(f"from and to share {', '.join(sorted(frm & to))}: a member is not cut from itself")
        links = {(a, b) for a in frm for b in to}
        if symmetric:
            links |= {(b, a) for a, b in links}
        return FaultRequest(action, links=frozenset(links))
    if action == "delay":
        ms = _number(params.get("ms"), "ms", 0, MAX_DELAY_MS)
        jitter = _number(params.get("jitter_ms", 0), "jitter_ms", 0, MAX_DELAY_MS)
        return FaultRequest(action, senders=_names(params.get("from"), "from", allow_all=True),
                            receivers=_names(params.get("to"), "to", allow_all=True),
                            delay_s=ms / 1000.0, jitter_s=jitter / 1000.0)
    if action == "disk":
        try:
            mode = DiskMode(params.get("mode"))
        except ValueError:
            raise ValueError(f"mode: expected one of {', '.join(m.value for m in DiskMode)}") from None
        return FaultRequest(action, disk=mode)
    return FaultRequest(action)


def apply(state: FaultState, req: FaultRequest) -> FaultState:
    """The state after a request (power-loss and list change nothing here)."""
    if req.action == "partition":
        return FaultState(state.cut | req.links, state.delays, state.disk)
    if req.action == "delay":
        delays = tuple(d for d in state.delays if (d.senders, d.receivers) != (req.senders, req.receivers))
        if req.delay_s or req.jitter_s:
            delays += (Delay(req.senders, req.receivers, req.delay_s, req.jitter_s),)
        return FaultState(state.cut, delays, state.disk)
    if req.action == "disk":
        return FaultState(state.cut, state.delays, req.disk)
    if req.action == "heal":
        return FaultState()
    return state


def peer_faults(state: FaultState, me: str, members) -> PeerFaults | None:
    """What member `me` does to its Raft traffic with `members`; None when nothing."""
    drop_to = frozenset(b for a, b in state.cut if a == me)
    drop_from = frozenset(a for a, b in state.cut if b == me)
    delay_to: dict[str, tuple[float, float]] = {}
    for d in state.delays:
        for peer in members:
            if peer != me and d.covers(me, peer):
                delay_to[peer] = (d.delay_s, d.jitter_s)
    if not (drop_to or drop_from or delay_to):
        return None
    return PeerFaults(drop_to, drop_from, delay_to)


def describe(state: FaultState) -> dict:
    """The state as the wire answers it (and `kubemu store fault list` shows it)."""
    def names(s):
        return sorted(s) if s is not None else "*"
    return {"partitions": [{"from": a, "to": b} for a, b in sorted(state.cut)],
            "delays": [{"from": names(d.senders), "to": names(d.receivers), "ms": d.delay_s * 1000,
                        "jitter_ms": d.jitter_s * 1000} for d in state.delays],
            "disk": state.disk.value}


def grows_store(op: Op) -> bool:
    """Whether etcd's NOSPACE alarm refuses this request: what its quota charges for (a put,
    a txn with a put in either branch, a lease grant); deletes, reads, compaction and lease
    revocations go on, since they are how space is won back."""
    if isinstance(op, (Put, LeaseGrant)):
        return True
    if isinstance(op, Txn):
        return any(isinstance(o, Put) for o in op.success + op.failure)
    return False


def truncation_plan(sizes: Mapping[str, int], synced: Mapping[str, int]) -> dict[str, int]:
    """What a power loss leaves of each write-ahead log file: `sizes` are the files' sizes now,
    `synced` the bytes each one's last fsync covered (a file never synced keeps nothing).
    Only the files that lose bytes are listed, with the size they keep."""
    plan = {}
    for name, size in sizes.items():
        keep = min(size, synced.get(name, 0))
        if keep < size:
            plan[name] = keep
    return plan
