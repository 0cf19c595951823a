"""A deterministic simulator for store.raft: nodes, disks, a hostile network, clients.

Everything is driven by one seeded `random.Random` and a fake clock counted in ticks, so a
seed replays exactly. Each run has two phases:

1. chaos: messages are dropped, delayed, duplicated and reordered; the network is partitioned
   and healed; nodes crash (losing whatever they had not persisted yet) and restart from their
   disk; disks get slow (a node's Ready is persisted some ticks later, and only then are its
   messages sent, except a leader's early messages, which leave at once, while its disk
   works); clients propose values, ask for linearizable reads, transfer leadership, change
   membership; nodes compact their logs.
2. heal: the network becomes reliable, every node is up; a value proposed by a client must
   then be applied by every voter within a bounded number of ticks (progress).

Safety properties are checked continuously (Raft paper Figure 3):
Election Safety, Log Matching, Leader Completeness, State Machine Safety, plus linearizable
ReadIndex (a read's index covers every write committed before the read was requested) and
durable commits (when a leader commits an entry, a majority of its voters hold it on disk: the
leader's own copy, still being written while its APPs are out, must not count before that).
"""
from __future__ import annotations

import hashlib
import heapq
import os
import random
from dataclasses import dataclass, field

import msgpack

from store.raft import (ConfChange, ConfChangeType, Config, Entry, HardState, Message, MessageType,
                        PersistentState,
                        ProposalDropped, Raft, Ready, Role, Snapshot)


class SimFailure(AssertionError):
    """A safety or liveness property was violated."""


@dataclass
class SimParams:
    """The knobs of one run; `for_seed` draws a varied mix from the seed."""

    nodes: int = 3
    spares: int = 0  # extra nodes started empty, only ever joining through conf changes
    chaos_ticks: int = 200
    heal_ticks: int = 300  # the progress bound
    drop: float = 0.05
    dup: float = 0.02
    delay_p: float = 0.3  # chance a message gets extra delay (hence reordering)
    max_delay: int = 4
    partition_p: float = 0.02
    crash_p: float = 0.01
    pause_p: float = 0.0
    slow_disk_p: float = 0.02
    propose_p: float = 0.3
    read_p: float = 0.1
    transfer_p: float = 0.005
    conf_p: float = 0.0
    compact_after: int = 0  # compact when this many applied entries are after the snapshot (0: never)
    wire_p: float = 0.05  # chance a message goes through to_wire/msgpack/from_wire
    raft: Config = field(default_factory=Config)

    @classmethod
    def for_seed(cls, seed: int) -> SimParams:
        r = random.Random(seed ^ 0x5EED)
        membership = r.random() < 0.25
        return cls(
            nodes=r.choice((3, 5)) if not membership else 3,
            spares=2 if membership else 0,
            drop=r.choice((0.0, 0.02, 0.1, 0.25)),
            dup=r.choice((0.0, 0.02, 0.1)),
            delay_p=r.choice((0.0, 0.3, 0.8)),
            max_delay=r.choice((2, 4, 10)),
            partition_p=r.choice((0.0, 0.01, 0.04)),
            crash_p=r.choice((0.0, 0.005, 0.02)),
            pause_p=r.choice((0.0, 0.0, 0.01, 0.03)),
            slow_disk_p=r.choice((0.0, 0.02, 0.1)),
            propose_p=r.choice((0.1, 0.3, 0.8)),
            read_p=r.choice((0.0, 0.1, 0.3)),
            transfer_p=r.choice((0.0, 0.005, 0.02)),
            conf_p=0.02 if membership else 0.0,
            compact_after=r.choice((0, 3, 10, 30)),
            raft=Config(
                # Without both, a removed node that missed its removal disrupts the cluster
                # forever (thesis §4.2.3): membership seeds keep at least one of them.
                pre_vote=(pv := r.random() < 0.8),
                check_quorum=r.random() < 0.8 or (membership and not pv),
                heartbeat_ticks=r.choice((1, 1, 2, 3)),
                # (max_size_per_msg, max_inflight_msgs): one entry per APP, or batches; a tiny
                # in-flight window exercises pausing (never both, or the backlog never drains)
                **dict(zip(("max_size_per_msg", "max_inflight_msgs"),
                           r.choice(((1, 256), (64, 4), (1 << 20, 1), (1 << 20, 256))))),
            ),
        )


class Disk:
    """What one node persisted: hard state, log entries, last snapshot (whose data, like the
    store's, may be absent), and the state machine as of that snapshot (`sm`: applied, digest),
    which the store keeps in its own database."""

    def __init__(self) -> None:
        self.hard = HardState()
        self.entries: list[Entry] = []
        self.snap: Snapshot | None = None
        self.sm: tuple[int, bytes] = (0, b"")

    def persist(self, rd: Ready) -> None:
        if rd.snapshot is not None:
            self.snap = rd.snapshot
            self.sm = (rd.snapshot.meta.index, rd.snapshot.data[8:])
            self.entries = []  # a snapshot replaces the whole log
        if rd.entries:
            first = rd.entries[0].index
            self.entries = [e for e in self.entries if e.index < first] + list(rd.entries)
        if rd.hard_state is not None:
            self.hard = rd.hard_state

    def compact(self, snap: Snapshot, sm: tuple[int, bytes] | None = None) -> None:
        self.snap = snap
        if sm is not None:
            self.sm = sm
        self.entries = [e for e in self.entries if e.index > snap.meta.index]

    def holds(self, index: int, term: int) -> bool:
        """Whether entry (index, term) is on this disk, or covered by its snapshot (which holds
        committed entries only, and so the same entry by Log Matching)."""
        if self.snap is not None and index <= self.snap.meta.index:
            return True
        if not self.entries or index < self.entries[0].index:
            return False
        off = index - self.entries[0].index
        return off < len(self.entries) and self.entries[off].term == term

    def state(self) -> PersistentState:
        snap = self.snap
        return PersistentState(self.hard, list(self.entries), snap.meta if snap else None,
                               snap.data if snap else None, snap.meta.index if snap else 0)


def _digest(prev: bytes, e: Entry) -> bytes:
    h = hashlib.blake2b(prev, digest_size=16)
    h.update(b"%d/%d/%d/" % (e.term, e.index, e.kind))
    h.update(e.data)
    return h.digest()


@dataclass(eq=False)
class SimNode:
    id: str
    peers: list[str]  # bootstrap peers ([] for a node that joins later)
    raft: Raft
    disk: Disk = field(default_factory=Disk)
    up: bool = True
    down_until: int = 0
    paused_until: int = 0  # a stalled process (GC pause, SIGSTOP): no ticks, no messages, memory kept
    disk_delay: int = 0
    pending: tuple[Ready, int] | None = None  # a Ready being persisted, due at that tick
    applied: int = 0  # state machine: last applied index and digest of everything applied
    digest: bytes = b""
    seen_commit: int = 0
    reads: dict[bytes, int] = field(default_factory=dict)  # ctx -> commit floor at request time


class Checker:
    """The safety properties, fed by the simulator as things happen."""

    def __init__(self) -> None:
        self.leaders: dict[int, str] = {}  # term -> leader (Election Safety)
        self.entries: dict[tuple[int, int], tuple[int, bytes, int]] = {}  # (index, term) -> kind, data, prev term
        # index -> (entry term, commit term) of every entry known committed. The commit term is
        # the term of the first node seen knowing it committed (usually the leader that did it).
        self.committed: dict[int, tuple[int, int]] = {}
        self.max_commit = 0
        self.digests: dict[int, bytes] = {}  # index -> digest of the applied prefix
        self.reads_checked = 0

    def on_leader(self, r: Raft) -> None:
        known = self.leaders.get(r.term)
        if known is None:
            self.leaders[r.term] = r.id
            self._check_leader_completeness(r)
        elif known != r.id:
            raise SimFailure(f"Election Safety: {known} and {r.id} both lead term {r.term}")

    def _check_leader_completeness(self, r: Raft) -> None:
        """Every entry committed in a term before r's is in r's log (Raft paper Figure 3). A
        leader of an older term can be elected late (its votes were delayed): entries committed
        in later terms are no concern of it."""
        log = r.log
        for i in range(log.snap_index + 1, self.max_commit + 1):
            known = self.committed.get(i)
            if known is None or known[1] >= r.term:
                continue
            if log.term(i) != known[0]:
                raise SimFailure(f"Leader Completeness: {r.id} (term {r.term}) has term {log.term(i)} "
                                 f"at index {i}, committed with term {known[0]} in term {known[1]}")

    def on_commit(self, r: Raft, lo: int, hi: int) -> None:
        log = r.log
        for i in range(max(lo, log.snap_index) + 1, hi + 1):
            t = log.term(i)
            known = self.committed.get(i)
            if known is None or r.term < known[1]:
                if known is not None and known[0] != t:
                    raise SimFailure(f"committed index {i} has term {t} on {r.id}, {known[0]} elsewhere")
                self.committed[i] = (t, r.term)
            elif known[0] != t:
                raise SimFailure(f"committed index {i} has term {t} on {r.id}, {known[0]} elsewhere")
        self.max_commit = max(self.max_commit, hi)

    def on_persist(self, r: Raft, entries: list[Entry]) -> None:
        """Log Matching: (index, term) identifies the entry and, inductively, its prefix."""
        prev_term = r.log.term(entries[0].index - 1)
        for e in entries:
            key = (e.index, e.term)
            val = (int(e.kind), e.data, prev_term)
            known = self.entries.setdefault(key, val)
            if known != val:
                raise SimFailure(f"Log Matching: two different entries at index {e.index} term {e.term}")
            prev_term = e.term

    def on_apply(self, node: SimNode, e: Entry) -> None:
        if e.index != node.applied + 1:
            raise SimFailure(f"{node.id} applied {e.index} after {node.applied}")
        node.digest = _digest(node.digest, e)
        node.applied = e.index
        known = self.digests.setdefault(e.index, node.digest)
        if known != node.digest:
            raise SimFailure(f"State Machine Safety: {node.id} applied a different entry at {e.index}")

    def on_restore(self, node: SimNode, snap: Snapshot) -> None:
        index = int.from_bytes(snap.data[:8], "big")
        digest = snap.data[8:]
        if index != snap.meta.index or self.digests.get(index) != digest:
            raise SimFailure(f"State Machine Safety: {node.id} restored a snapshot unlike the applied state")
        node.applied, node.digest = index, digest

    def on_read(self, node: SimNode, ctx: bytes, index: int) -> None:
        floor = node.reads.pop(ctx, None)
        if floor is None:
            return  # a duplicate answer, or one for a request made before a restart
        if index < floor:
            raise SimFailure(f"linearizability: read {ctx!r} at {node.id} got index {index} but "
                             f"{floor} was committed before it was requested")
        if index > self.max_commit:
            raise SimFailure(f"read {ctx!r} got index {index} beyond any commit ({self.max_commit})")
        self.reads_checked += 1


class Sim:
    def __init__(self, seed: int, params: SimParams | None = None, trace: bool = False):
        self.seed = seed
        self.p = params or SimParams.for_seed(seed)
        self.rng = random.Random(seed)
        self.now = 0
        self.cfg = self.p.raft
        self.check = Checker()
        self.trace: list[str] | None = [] if trace else None
        self._net: list[tuple[int, int, Message]] = []
        self._seq = 0
        self._group: dict[str, int] = {}
        self._oneway: tuple[str, str] | None = None  # (from, to): a link that only works one way
        self._counter = 0
        self.stats = {"msgs": 0, "delivered": 0, "crashes": 0, "proposals": 0, "reads": 0,
                      "elections": 0, "snapshots_sent": 0, "conf_changes": 0, "transfers": 0, "heal_ticks": 0}
        members = [f"n{i}" for i in range(self.p.nodes)]
        spares = [f"n{i}" for i in range(self.p.nodes, self.p.nodes + self.p.spares)]
        self.nodes: dict[str, SimNode] = {}
        for nid in members + spares:
            peers = members if nid in members else []
            self.nodes[nid] = SimNode(nid, peers, self._new_raft(nid, peers, None))
        self.ids = members + spares

    # --- plumbing ----------------------------------------------------------------------------

    def _new_raft(self, nid: str, peers: list[str], state: PersistentState | None) -> Raft:
        return Raft(nid, peers, state, self.cfg, random.Random(self.rng.getrandbits(64)))

    def _log(self, msg: str) -> None:
        if self.trace is not None:
            self.trace.append(f"[{self.now}] {msg}")

    def fail(self, msg: str) -> SimFailure:
        tail = "\n".join(self.trace[-60:]) if self.trace else ""
        return SimFailure(f"seed {self.seed} tick {self.now}: {msg}\n{tail}")

    def _observe(self, node: SimNode) -> None:
        r = node.raft
        if r.state is Role.LEADER:
            if r.term not in self.check.leaders:
                self.stats["elections"] += 1
                self._log(f"{r.id} leads term {r.term}")
            self.check.on_leader(r)
        c = r.log.committed
        if c != node.seen_commit:
            if c < node.seen_commit:
                raise SimFailure(f"{r.id} commit index went back from {node.seen_commit} to {c}")
            if r.state is Role.LEADER:
                self._check_durable_commit(r, node.seen_commit, c)
            self.check.on_commit(r, node.seen_commit, c)
            node.seen_commit = c

    def _check_durable_commit(self, r: Raft, lo: int, hi: int) -> None:
        """A leader that just committed up to `hi` did so on a majority of durable copies."""
        voters = r.voters
        for i in range(max(lo, r.log.snap_index) + 1, hi + 1):
            term = r.log.term(i)
            durable = [v for v in voters if v in self.nodes and self.nodes[v].disk.holds(i, term)]
            if len(durable) <= len(voters) // 2:
                raise SimFailure(f"{r.id} committed index {i} (term {term}) held on disk by only "
                                 f"{sorted(durable)} of voters {list(voters)}")

    def _connected(self, a: str, b: str) -> bool:
        return self._group.get(a, 0) == self._group.get(b, 0) and self._oneway != (a, b)

    def _send(self, m: Message) -> None:
        p, rng = self.p, self.rng
        self.stats["msgs"] += 1
        if rng.random() < p.drop:
            return
        if rng.random() < p.wire_p:
            back = Message.from_wire(msgpack.unpackb(msgpack.packb(m.to_wire())))
            if back != m:
                raise SimFailure(f"wire round trip changed {m} into {back}")
            m = back
        copies = 2 if rng.random() < p.dup else 1
        for _ in range(copies):
            delay = 1 + (rng.randrange(p.max_delay) if rng.random() < p.delay_p else 0)
            self._seq += 1
            heapq.heappush(self._net, (self.now + delay, self._seq, m))

    def _deliver(self) -> None:
        net = self._net
        while net and net[0][0] <= self.now:
            _, _, m = heapq.heappop(net)
            node = self.nodes.get(m.to)
            if node is None or not node.up or not self._connected(m.frm, m.to):
                continue
            if node.paused_until > self.now:
                self._seq += 1  # held by the stalled receiver, in order, until it resumes
                heapq.heappush(net, (node.paused_until, self._seq, m))
                continue
            self.stats["delivered"] += 1
            node.raft.step(m)
            self._observe(node)

    # --- Ready processing: persist, then send, then apply ------------------------------------

    def _process_readies(self) -> None:
        for node in self.nodes.values():
            if not node.up or node.paused_until > self.now:
                continue
            if node.pending is not None:
                rd, due = node.pending
                if self.now < due:
                    continue
                node.pending = None
                self._complete(node, rd)
            if node.raft.has_ready():
                rd = node.raft.ready()
                if rd.entries:
                    self.check.on_persist(node.raft, rd.entries)
                self._send_all(rd.early_messages)  # the leader's, while its own disk works
                if node.disk_delay:
                    node.pending = (rd, self.now + node.disk_delay)
                else:
                    self._complete(node, rd)

    def _complete(self, node: SimNode, rd: Ready) -> None:
        if rd.soft_state is not None and self.trace is not None:
            self._log(f"{node.id}: {rd.soft_state.role} term {node.raft.term} leader {rd.soft_state.leader_id}"
                      f" voters {node.raft.voters}")
        node.disk.persist(rd)
        self._send_all(rd.messages)
        if rd.snapshot is not None:
            self.check.on_restore(node, rd.snapshot)
        for e in rd.committed_entries:
            self.check.on_apply(node, e)
        for rs in rd.read_states:
            self.check.on_read(node, rs.ctx, rs.index)
        node.raft.advance(rd)
        self._maybe_compact(node)
        self._observe(node)

    def _send_all(self, msgs: list[Message]) -> None:
        for m in msgs:
            if m.type == MessageType.SNAP:
                self.stats["snapshots_sent"] += 1
            self._send(m)

    def _maybe_compact(self, node: SimNode) -> None:
        n = self.p.compact_after
        r = node.raft
        if r.snapshot_wanted or (n and r.applied - r.log.snap_index >= n):
            # Like the store, data only when the core asks for it; here also at every other
            # compaction, so that both kinds meet crashes and elections.
            data = r.applied.to_bytes(8, "big") + node.digest
            if not (r.snapshot_wanted or r.applied % 2):
                data = None
            meta = r.compact(r.applied, data)
            node.disk.compact(Snapshot(meta, data), (r.applied, node.digest))

    # --- faults --------------------------------------------------------------------------

    def _crash(self, node: SimNode) -> None:
        self.stats["crashes"] += 1
        node.up = False
        node.pending = None  # an unpersisted Ready is lost, and so are its (late) messages
        # Quick restarts hit the windows where only persisted state (votes!) saves the day.
        node.down_until = self.now + (self.rng.randrange(1, 4) if self.rng.random() < 0.5 else self.rng.randrange(5, 60))
        self._log(f"crash {node.id} until {node.down_until}")

    def _restart(self, node: SimNode) -> None:
        node.up = True
        node.raft = self._new_raft(node.id, node.peers, node.disk.state())
        node.applied, node.digest = node.disk.sm
        node.seen_commit = node.raft.log.committed
        self._log(f"restart {node.id}: {node.raft}")

    def _partition(self) -> None:
        if self.rng.random() < 0.4 or self._group or self._oneway:
            self._group, self._oneway = {}, None
            self._log("heal partition")
            return
        ids = self.ids[:]
        if self.rng.random() < 0.25:
            # An asymmetric fault: a hears b, b never hears a.
            a, b = self.rng.sample(ids, 2)
            self._oneway = (a, b)
            self._log(f"link {a} -> {b} down")
            return
        self.rng.shuffle(ids)
        k = self.rng.randrange(1, len(ids))
        self._group = {nid: (1 if i < k else 2) for i, nid in enumerate(ids)}
        self._log(f"partition {sorted(ids[:k])} | {sorted(ids[k:])}")

    def _running(self) -> list[SimNode]:
        return [n for n in self.nodes.values() if n.up and n.paused_until <= self.now]

    def _leader(self) -> SimNode | None:
        best = None
        for node in self._running():
            if node.raft.state is Role.LEADER and (best is None or node.raft.term > best.raft.term):
                best = node
        return best

    def _client_target(self) -> SimNode | None:
        """A client picks a random up node and follows its leader hint once."""
        up = self._running()
        if not up:
            return None
        node = self.rng.choice(up)
        hint = self.nodes.get(node.raft.leader_id)
        return hint if hint is not None and hint.up and hint.paused_until <= self.now else node

    def _propose(self, value: bytes | None = None) -> bool:
        node = self._client_target()
        if node is None:
            return False
        if value is None:
            self._counter += 1
            value = b"v%d" % self._counter
        try:
            node.raft.propose(value)
        except ProposalDropped:
            return False
        self.stats["proposals"] += 1
        self._observe(node)
        return True

    def _read(self) -> None:
        node = self._client_target()
        if node is None:
            return
        self._counter += 1
        ctx = b"r%d" % self._counter
        try:
            node.raft.read_index(ctx)
        except ProposalDropped:
            return
        self.stats["reads"] += 1
        node.reads[ctx] = self.check.max_commit

    def _transfer(self) -> None:
        leader = self._leader()
        if leader is not None and len(leader.raft.voters) > 1:
            to = self.rng.choice([v for v in leader.raft.voters if v != leader.id])
            self._log(f"transfer {leader.id} -> {to}")
            self.stats["transfers"] += 1
            leader.raft.transfer_leadership(to)

    def _conf_change(self) -> None:
        leader = self._leader()
        if leader is None:
            return
        voters = leader.raft.voters
        others = [n for n in self.ids if n not in voters]
        if others and (len(voters) < 3 or self.rng.random() < 0.5):
            cc = ConfChange(ConfChangeType.ADD_NODE, self.rng.choice(others))
        elif len(voters) > 1:
            cc = ConfChange(ConfChangeType.REMOVE_NODE, self.rng.choice(voters))
        else:
            return
        try:
            leader.raft.propose_conf_change(cc)
        except ProposalDropped:
            return
        self.stats["conf_changes"] += 1
        self._log(f"{leader.id} proposes {cc.type.name} {cc.node_id}")
        self._observe(leader)

    def _chaos(self) -> None:
        p, rng = self.p, self.rng
        for node in self.nodes.values():
            if not node.up and self.now >= node.down_until:
                self._restart(node)
        if rng.random() < p.partition_p:
            self._partition()
        if rng.random() < p.crash_p:
            up = [n for n in self.nodes.values() if n.up]
            if up:
                self._crash(rng.choice(up))
        if rng.random() < p.pause_p:
            node = self.nodes[rng.choice(self.ids)]
            node.paused_until = self.now + rng.randrange(3, 30)
            self._log(f"pause {node.id} until {node.paused_until}")
        if rng.random() < p.slow_disk_p:
            node = self.nodes[rng.choice(self.ids)]
            node.disk_delay = rng.choice((0, 0, 1, 2, 5))
        if rng.random() < p.propose_p:
            self._propose()
        if rng.random() < p.read_p:
            self._read()
        if rng.random() < p.transfer_p:
            self._transfer()
        if rng.random() < p.conf_p:
            self._conf_change()

    # --- the run -----------------------------------------------------------------------------

    def _step_world(self) -> None:
        self.now += 1
        for node in self.nodes.values():
            if node.up and node.paused_until <= self.now:
                node.raft.tick()
                self._observe(node)
        self._deliver()
        self._process_readies()

    def _heal(self) -> None:
        self._group, self._oneway = {}, None
        p = self.p
        # A healed network has a sane latency again: well below the election timeout, or
        # candidates keep splitting votes (liveness is only promised in such conditions).
        p.drop = p.dup = p.pause_p = p.delay_p = 0.0
        for node in self.nodes.values():
            node.disk_delay = 0
            node.paused_until = min(node.paused_until, self.now)
            if not node.up:
                self._restart(node)
        self._log("heal")

    def _value_done(self, value: bytes) -> bool:
        leader = self._leader()
        if leader is None:
            return False
        r = leader.raft
        idx = next((e.index for e in r.log.entries_after(r.log.snap_index) if e.data == value), None)
        if idx is None or r.log.committed < idx:
            return False
        return all(self.nodes[v].applied >= idx for v in r.voters)

    def run(self) -> dict[str, int]:
        try:
            for _ in range(self.p.chaos_ticks):
                self._chaos()
                self._step_world()
            self._heal()
            value = b"final-%d" % self.seed
            accepted_at = None
            for t in range(self.p.heal_ticks):
                # The client retries until a leader takes the value, and again if it was
                # accepted but got lost (e.g. the leader was deposed before replicating it).
                if accepted_at is None or t - accepted_at >= 50:
                    accepted_at = t if self._propose(value) else accepted_at
                self._step_world()
                if self._value_done(value):
                    self.stats["heal_ticks"] = t + 1
                    break
            else:
                raise SimFailure(f"no progress: {value!r} not applied by every voter "
                                 f"{self.p.heal_ticks} ticks after healing")
            self._final_checks()
        except SimFailure as exc:
            raise self.fail(str(exc)) from None
        self.stats["reads_checked"] = self.check.reads_checked
        return self.stats

    def _final_checks(self) -> None:
        """Log Matching across every pair of logs, and no message was refused as invalid."""
        nodes = list(self.nodes.values())
        for node in nodes:
            if node.raft.invalid_messages:
                raise SimFailure(f"{node.id} refused {node.raft.invalid_messages} invalid messages")
        for i, a in enumerate(nodes):
            for b in nodes[i + 1:]:
                _check_log_matching(a.raft, b.raft)


def _check_log_matching(a: Raft, b: Raft) -> None:
    la, lb = a.log, b.log
    lo = max(la.snap_index, lb.snap_index) + 1
    hi = min(la.last_index, lb.last_index)
    # Find the highest index where both logs have the same term: everything before must match.
    top = next((i for i in range(hi, lo - 1, -1) if la.term(i) == lb.term(i)), None)
    if top is None:
        return
    for i in range(lo, top + 1):
        if la.entry(i) != lb.entry(i):
            raise SimFailure(f"Log Matching: {a.id} and {b.id} agree at {top} but differ at {i}")


def replay(seed: int) -> dict[str, int]:
    """Run one seed with tracing on (what `-k replay` does)."""
    return Sim(seed, trace=True).run()


if __name__ == "__main__":
    print(replay(int(os.environ.get("KUBEMU_SIM_SEED", "0"))))
