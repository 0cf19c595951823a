"""The pure Raft consensus core of store/ (the etcd analog), in the style of etcd-io/raft.

`Raft` is a deterministic state machine: no I/O, no clock, no threads, and no randomness but
the `random.Random` it is given. The shell around it (the store server) drives it:

    tick()                         every tick interval (100 ms in kubemu: heartbeat = 1 tick,
                                   election timeout = 10..20 ticks, like etcd's defaults)
    step(Message.from_wire(obj))   for every message received from a peer
    propose / read_index / transfer_leadership / propose_conf_change   for local requests
    if has_ready(): rd = ready(); persist, send, apply (see `Ready`); advance(rd)
    compact(index, data)           after taking a state-machine snapshot at `index`

Each Ready is processed in the order etcd-io/raft prescribes: (1) persist its snapshot, entries
and hard state, (2) only then send its messages, (3) then apply its committed entries (and serve
its read states), (4) advance(). Persisting before sending is what makes a vote or an
acknowledgement durable before anyone relies on it. The exception is the leader's own traffic
(`Ready.early_messages`: APPs, heartbeats ...), which may leave before or while step 1 runs, so
that the leader's fsync and its followers' overlap instead of running in series (Raft thesis
§10.2.1, etcd's "the leader can write to its disk in parallel"). That is safe because the
leader counts itself toward a commit only for entries it has persisted (its own match index is
the log's stable index, advanced by advance()), so a commit still means a majority of durable
copies; and because it holds only while the leader's term and vote are themselves durable.
Only one Ready is outstanding at a time: between ready() and advance() the shell may keep
calling tick/step/propose; what they produce waits for the next Ready.

Decisions worth knowing:

* Membership: single-member add/remove (thesis §4.1). A configuration takes effect on a node
  as soon as its conf-change entry is *appended* to that node's log, not when applied, so the
  configuration is a pure function of the log (and survives restarts and truncations without
  help from the shell). The leader accepts a new change only once the previous one committed
  and once it has committed an entry of its own term (the fix for the single-server-change
  bug found after the thesis). A leader that removes itself keeps leading, without counting
  itself, until the removal commits; then it steps down and hands off with TimeoutNow.
* Bootstrap: a node created with `peers` and no persisted state writes one committed
  ADD_NODE entry per peer (sorted, term 1), so every bootstrap member starts with the same
  log and joiners (created with `peers=[]`) learn the membership by replication.
* ReadIndex (thesis §6.4): the leader records its commit index, confirms it still leads with a
  heartbeat round carrying the request's ctx, and then emits ReadState(ctx, index). A leader
  that has not yet committed an entry of its term queues reads until it has (its commit
  index may lag the true one before that). Followers forward read_index() to the leader and
  get the ReadState back; a request lost on the way is simply never answered (the shell
  times out and retries). No lease-based reads.
* CheckQuorum + leader lease (thesis §4.2.3, §6.2): a leader that heard from no quorum for an
  election timeout steps down, and a node that heard from a leader within the election
  timeout ignores (pre-)vote requests, except those of a leadership-transfer campaign.
* PreVote (thesis §9.6): a node first asks whether it could win, without bumping its term.
  The election timer restarts only on hearing from the current leader or granting a vote
  (paper Figure 2), not on merely adopting a higher term from a candidate we refused.
* Replication: APPs are pipelined (up to max_inflight_msgs per follower) and batched (up to
  max_size_per_msg bytes); proposals are appended at once but the APPs for them are built
  when ready() is called, so all proposals between two Readys share one message.
* Snapshots: the leader keeps the latest snapshot it took or received and sends it when a
  follower needs compacted entries. If the SNAP message or its answer is lost, the leader
  falls back to probing after snapshot_retry_ticks.
* Lost messages without transport feedback: a replicating follower whose acknowledgements stop
  while heartbeats still get answered is probed again after `stall_heartbeats` answers. A
  follower whose storage was wiped answers a heartbeat whose commit index it no longer holds
  with a reject carrying its last index, and the leader starts over from there (usually with
  a snapshot), instead of trusting a match index the follower lost.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from ._raft_elections import ElectionMixin
from ._raft_follower import FollowerMixin
from ._raft_leader import LeaderMixin
from ._raft_log import RaftLog
from ._raft_progress import Progress, ReadIndexQueue
from ._raft_types import (CAMPAIGN_TRANSFER, ConfChange, ConfChangeType, Entry, EntryKind, HardState,
                          Message, MessageType, NotLeader, PersistentState, ProposalDropped, RaftError,
                          ReadState, Ready, Role, Snapshot, SnapshotMeta, SoftState)

__all__ = [
    "CAMPAIGN_TRANSFER", "Config", "ConfChange", "ConfChangeType", "Entry", "EntryKind", "HardState",
    "Message", "MessageType", "NotLeader", "PersistentState", "ProposalDropped", "Raft", "RaftError",
    "ReadState", "Ready", "Role", "Snapshot", "SnapshotMeta", "SoftState",
]

MT = MessageType


@dataclass(frozen=True)
class Config:
    election_ticks: int = 10  # randomized timeout is drawn in [election_ticks, 2*election_ticks)
    heartbeat_ticks: int = 1
    pre_vote: bool = True
    check_quorum: bool = True
    max_size_per_msg: int = 1 << 20
    max_inflight_msgs: int = 256
    max_committed_size_per_ready: int = 16 << 20
    # A follower in snapshot state that has not answered within this many ticks is probed
    # again (the SNAP or its answer was lost; there is no transport feedback in a pure core).
    snapshot_retry_ticks: int = 50
    # Heartbeat answers from a replicating follower that has not acknowledged our last entry
    # before we assume the APPs in flight were lost and fall back to probing.
    stall_heartbeats: int = 3

    def __post_init__(self) -> None:
        if self.heartbeat_ticks < 1 or self.election_ticks <= self.heartbeat_ticks:
            raise ValueError("need 1 <= heartbeat_ticks < election_ticks")
        if self.max_inflight_msgs < 1 or self.max_size_per_msg < 1 or self.snapshot_retry_ticks < 1:
            raise ValueError("max_inflight_msgs, max_size_per_msg, snapshot_retry_ticks must be >= 1")


def _apply_change(voters: set[str], data: bytes) -> None:
    cc = ConfChange.decode(data)
    if cc.type == ConfChangeType.ADD_NODE:
        voters.add(cc.node_id)
    else:
        voters.discard(cc.node_id)


class Raft(ElectionMixin, FollowerMixin, LeaderMixin):
    """One Raft node. The handlers live in the mixins (one module per role family); this class
    holds the state, the public API, role transitions and the membership bookkeeping."""

    def __init__(self, id: str, peers: list[str], storage_state: PersistentState | None,
                 config: Config | None = None, rng: random.Random | None = None):
        self.id = id
        self.cfg = config or Config()
        self._rng = rng or random.Random(0)
        self.term = 0
        self.vote: str | None = None
        self.leader_id: str | None = None
        self.state = Role.FOLLOWER
        self.invalid_messages = 0  # well-formed messages we refused because they broke Raft's rules
        self._msgs: list[Message] = []
        self._early_msgs: list[Message] = []  # the leader's, sendable before persisting (see _send)
        self._read_states: list[ReadState] = []
        self._prs: dict[str, Progress] = {}
        self._votes: dict[str, bool] = {}
        self._read_only = ReadIndexQueue()
        self._reads_waiting: list[tuple[bytes, str]] = []  # until the leader commits in its term
        self._lead_transferee: str | None = None
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._randomized_timeout = self.cfg.election_ticks
        self._bcast_append_pending = False
        self._bcast_heartbeat_pending = False
        self._outstanding: Ready | None = None
        self._snapshot: Snapshot | None = None  # what we would send in InstallSnapshot
        self._snapshot_wanted = False  # a follower needs one and _snapshot is None
        self._snap_voters: set[str] = set()  # voters as of log.snap_index
        self._voter_set: frozenset[str] = frozenset()
        self._voters: tuple[str, ...] = ()
        self._conf_index = 0  # index of the configuration in force (latest conf entry)
        if storage_state is None or storage_state.is_empty():
            self._bootstrap(peers)
            self._prev_hard = HardState()
        else:
            self._restore_persistent(storage_state)
            self._prev_hard = storage_state.hard_state
        self._durable_term = self._prev_hard.term  # the term of the hard state known to be on disk
        self._prev_soft = SoftState(None, Role.FOLLOWER)
        self._recompute_conf()
        self._reset_randomized_timeout()

    def _bootstrap(self, peers: list[str]) -> None:
        ids = sorted(set(peers))
        ents = [Entry(1, i + 1, EntryKind.CONF_CHANGE, ConfChange(ConfChangeType.ADD_NODE, p).encode())
                for i, p in enumerate(ids)]
        self.log = RaftLog(0, 0, ents)
        self.log.stable = 0  # nothing of it is persisted yet: the first Ready carries it
        if ents:
            self.term = 1
            self.log.committed = len(ents)

    def _restore_persistent(self, ps: PersistentState) -> None:
        meta = ps.snapshot_meta
        si, st = (meta.index, meta.term) if meta else (0, 0)
        ents = [e for e in ps.entries if e.index > si]
        for k, e in enumerate(ents):
            if e.index != si + 1 + k or e.term < (ents[k - 1].term if k else st):
                raise ValueError("persisted entries are not contiguous after the snapshot")
        self.log = RaftLog(si, st, ents)
        hs = ps.hard_state
        if hs.commit > self.log.last_index:
            raise ValueError("persisted commit index is beyond the persisted log")
        self.log.committed = max(hs.commit, si)
        self.log.applied = max(min(ps.applied, self.log.committed), si)
        self.term, self.vote = hs.term, hs.vote
        if meta is not None:
            self._snap_voters = set(meta.voters)
            if ps.snapshot_data is not None:
                self._snapshot = Snapshot(meta, ps.snapshot_data)

    # --- introspection ------------------------------------------------------------------

    @property
    def commit_index(self) -> int:
        return self.log.committed

    @property
    def applied(self) -> int:
        return self.log.applied

    @property
    def snapshot_wanted(self) -> bool:
        """A follower needs entries that were compacted away, and we hold no snapshot data to
        send it: the shell should take a snapshot and hand it over with compact(). (Like
        etcd-io/raft's ErrSnapshotTemporarilyUnavailable: we retry on the follower's next
        response.)"""
        return self._snapshot_wanted

    @property
    def last_index(self) -> int:
        return self.log.last_index

    @property
    def voters(self) -> tuple[str, ...]:
        return self._voters

    @property
    def lead_transferee(self) -> str | None:
        return self._lead_transferee

    def __repr__(self) -> str:
        return (f"Raft({self.id} {self.state} term={self.term} lead={self.leader_id} "
                f"last={self.log.last_index} commit={self.log.committed} applied={self.log.applied})")

    # --- public API: time and messages ---------------------------------------------------

    def tick(self) -> None:
        if self.state == Role.LEADER:
            self._tick_leader()
        else:
            self._tick_election()

    def step(self, m: Message) -> None:
        """Handle a message from a peer. Messages not addressed to us are dropped."""
        if m.to != self.id or m.frm == self.id:
            return
        if not self._step_term(m):
            return
        handler = self._HANDLERS[self.state].get(m.type)
        if handler is not None:
            handler(self, m)

    # --- public API: requests -------------------------------------------------------------

    def propose(self, data: bytes) -> None:
        self._check_can_propose()
        self._append_entry(EntryKind.NORMAL, data)

    def propose_conf_change(self, change: ConfChange) -> None:
        self._check_can_propose()
        if self._conf_index > self.log.committed:
            raise ProposalDropped("a configuration change is still pending")
        if not self._committed_in_term():
            raise ProposalDropped("the leader has not committed an entry of its term yet")
        if change.type == ConfChangeType.ADD_NODE and change.node_id in self._voter_set:
            raise ValueError(f"{change.node_id} is already a voter")
        if change.type == ConfChangeType.REMOVE_NODE:
            if change.node_id not in self._voter_set:
                raise ValueError(f"{change.node_id} is not a voter")
            if len(self._voter_set) == 1:
                raise ValueError("cannot remove the last voter")
        self._append_entry(EntryKind.CONF_CHANGE, change.encode())

    def read_index(self, ctx: bytes) -> None:
        """Ask for a linearizable read; it completes as a ReadState(ctx, index) in a later Ready.
        `ctx` must be unique among the requests in flight."""
        if self.state == Role.LEADER:
            self._leader_read_index(ctx, self.id)
        elif self.leader_id is not None:
            self._send(Message(MT.READ_INDEX, self.leader_id, self.id, self.term, context=ctx))
        else:
            raise NotLeader(None)

    def transfer_leadership(self, to: str) -> None:
        """Hand leadership to `to` (thesis §3.10): stop taking proposals, bring `to` up to date,
        then tell it to campaign at once. Aborted if not done within an election timeout."""
        if self.state != Role.LEADER:
            raise NotLeader(self.leader_id)
        if to == self.id:
            self._lead_transferee = None
            return
        if to not in self._voter_set:
            raise ValueError(f"{to} is not a voter")
        if self._lead_transferee == to:
            return
        self._lead_transferee = to
        self._election_elapsed = 0
        if self._prs[to].match == self.log.last_index:
            self._send_timeout_now(to)
        else:
            self._send_append(to)

    def compact(self, index: int, snapshot_data: bytes | None = None) -> SnapshotMeta:
        """Drop the entries up to `index` (<= applied): the shell's state machine holds them.
        With `snapshot_data` (the state machine at `index`), keep it to bring up followers
        that need the dropped entries; without, such a follower makes `snapshot_wanted` true
        (a snapshot of ours at or after `index` is kept). Calling it again at the current
        snapshot index just supplies the data. Returns the metadata to persist."""
        log = self.log
        if index < max(log.snap_index, 1) or index > log.applied:
            raise ValueError(f"cannot compact at {index}: snapshot is at {log.snap_index}, "
                             f"applied is {log.applied}")
        voters = self._voters_at(index)
        meta = SnapshotMeta(index, log.term(index) or 0, tuple(sorted(voters)))
        log.compact(index)
        self._snap_voters = voters
        if snapshot_data is not None:
            self._snapshot = Snapshot(meta, snapshot_data)
            self._snapshot_wanted = False
        elif self._snapshot is not None and self._snapshot.meta.index < index:
            self._snapshot = None  # it no longer reaches the log
        return meta

    # --- public API: Ready ----------------------------------------------------------------

    def has_ready(self) -> bool:
        """Whether ready() has work. False while a Ready is outstanding (not yet advanced).
        It builds the deferred (batched) APPs and heartbeats first, so it is not free."""
        if self._outstanding is not None:
            return False
        self._flush_broadcasts()
        log = self.log
        return bool(self._msgs or self._early_msgs or self._read_states or log.pending_snapshot is not None
                    or log.stable < log.last_index or log.committed > self._apply_floor()
                    or self._hard_state_changed() or self._soft_state_changed())

    def ready(self) -> Ready:
        """Collect the work accumulated since the previous Ready. The shell must persist it,
        then send its messages, then apply it, in that order (see `Ready`), then advance()."""
        if self._outstanding is not None:
            raise RuntimeError("advance() the previous Ready before asking for another")
        self._flush_broadcasts()
        log = self.log
        rd = Ready(entries=log.unstable_entries(), snapshot=log.pending_snapshot,
                   committed_entries=log.next_committed(self.cfg.max_committed_size_per_ready),
                   messages=self._msgs, early_messages=self._early_msgs, read_states=self._read_states)
        self._msgs, self._early_msgs, self._read_states = [], [], []
        if self._hard_state_changed():
            rd.hard_state = self._prev_hard = HardState(self.term, self.vote, log.committed)
        if self._soft_state_changed():
            rd.soft_state = self._prev_soft = SoftState(self.leader_id, self.state)
        self._outstanding = rd
        return rd

    def advance(self, rd: Ready) -> None:
        """The shell persisted, sent and applied `rd`."""
        if rd is not self._outstanding:
            raise RuntimeError("advance() must be given the outstanding Ready")
        self._outstanding = None
        log = self.log
        if rd.snapshot is not None:
            if log.pending_snapshot is rd.snapshot:
                log.pending_snapshot = None
            log.applied = max(log.applied, rd.snapshot.meta.index)
        if rd.hard_state is not None:
            self._durable_term = rd.hard_state.term
        if rd.entries:
            last = rd.entries[-1]
            log.stable_to(last.index, last.term)
            if self.state == Role.LEADER:
                self._maybe_commit()  # our own copy is durable now: it counts toward the quorum
        if rd.committed_entries:
            log.applied = max(log.applied, rd.committed_entries[-1].index)

    # Field by field rather than by building a HardState/SoftState to compare: the shell asks
    # has_ready() after every message batch, and most of the time nothing changed.
    def _hard_state_changed(self) -> bool:
        prev = self._prev_hard
        return prev.commit != self.log.committed or prev.term != self.term or prev.vote != self.vote

    def _soft_state_changed(self) -> bool:
        prev = self._prev_soft
        return prev.role != self.state or prev.leader_id != self.leader_id

    def _apply_floor(self) -> int:
        log = self.log
        floor = max(log.applied, log.snap_index)
        if log.pending_snapshot is not None:
            floor = max(floor, log.pending_snapshot.meta.index)
        return floor

    def _flush_broadcasts(self) -> None:
        # Deferred until the shell collects a Ready, so that every proposal and read made since
        # the previous Ready shares one APP / one heartbeat round per follower (batching).
        if self.state == Role.LEADER:
            if self._bcast_append_pending:
                for to in self._prs:
                    if self._send_append(to):
                        while self._send_append(to, send_if_empty=False):
                            pass  # fill the in-flight window (pipelining)
            if self._bcast_heartbeat_pending:
                self._bcast_heartbeat()
        self._bcast_append_pending = self._bcast_heartbeat_pending = False

    # --- role transitions ------------------------------------------------------------------

    def _reset_randomized_timeout(self) -> None:
        # Randomized timeouts make split votes rare (paper §5.2).
        self._randomized_timeout = self.cfg.election_ticks + self._rng.randrange(self.cfg.election_ticks)

    def _reset(self, term: int) -> None:
        if term != self.term:
            self.term = term
            self.vote = None
        self.leader_id = None
        self._election_elapsed = 0
        self._heartbeat_elapsed = 0
        self._reset_randomized_timeout()
        self._lead_transferee = None
        self._votes = {}
        self._prs = {}
        self._read_only = ReadIndexQueue()
        self._reads_waiting = []
        self._bcast_append_pending = self._bcast_heartbeat_pending = False
        self._snapshot_wanted = False

    def _become_follower(self, term: int, leader: str | None) -> None:
        self._reset(term)
        self.state = Role.FOLLOWER
        self.leader_id = leader

    def _become_pre_candidate(self) -> None:
        # Neither the term nor the vote change: that is the point of PreVote.
        self.state = Role.PRE_CANDIDATE
        self.leader_id = None
        self._votes = {}
        self._reset_randomized_timeout()

    def _become_candidate(self) -> None:
        self._reset(self.term + 1)
        self.vote = self.id
        self.state = Role.CANDIDATE

    def _become_leader(self) -> None:
        self._reset(self.term)
        self.state = Role.LEADER
        self.leader_id = self.id
        for v in self._voters:
            if v != self.id:
                self._prs[v] = Progress(self.log.last_index + 1, self.cfg.max_inflight_msgs)
        # A no-op of the new term lets the leader commit (and learn the commit index of) all
        # entries of earlier terms (paper §5.4.2 and §8).
        self._append_entry(EntryKind.NOOP, b"")

    # --- configuration -------------------------------------------------------------------

    def _promotable(self) -> bool:
        return self.id in self._voter_set

    def _quorum(self) -> int:
        return len(self._voters) // 2 + 1

    def _voters_at(self, index: int) -> set[str]:
        voters = set(self._snap_voters)
        for e in self.log.entries_after(self.log.snap_index):
            if e.index > index:
                break
            if e.kind == EntryKind.CONF_CHANGE:
                _apply_change(voters, e.data)
        return voters

    def _recompute_conf(self) -> None:
        """The configuration is the latest one in the log (thesis §4.1)."""
        voters = set(self._snap_voters)
        self._conf_index = self.log.snap_index
        for e in self.log.entries_after(self.log.snap_index):
            if e.kind == EntryKind.CONF_CHANGE:
                _apply_change(voters, e.data)
                self._conf_index = e.index
        self._set_voters(voters)

    def _apply_conf_entry(self, e: Entry) -> None:
        voters = set(self._voter_set)
        _apply_change(voters, e.data)
        self._conf_index = e.index
        self._set_voters(voters)

    def _set_voters(self, voters: set[str]) -> None:
        self._voter_set = frozenset(voters)
        self._voters = tuple(sorted(voters))
        if self.state != Role.LEADER:
            return
        for v in self._voters:
            if v != self.id and v not in self._prs:
                pr = self._prs[v] = Progress(self.log.last_index + 1, self.cfg.max_inflight_msgs)
                pr.recent_active = True  # give a new member one quorum-check period to answer
        for v in [v for v in self._prs if v not in self._voter_set]:
            del self._prs[v]
        if self._lead_transferee is not None and self._lead_transferee not in self._voter_set:
            self._lead_transferee = None

    # --- sending ---------------------------------------------------------------------------

    def _send(self, m: Message) -> None:
        # What a leader sends vouches for nothing it has yet to persist: its entries count toward
        # a commit only once durable (_maybe_commit), and a commit index or read index it
        # announces was reached that way. So it may leave before the Ready is persisted, but only
        # once the term it is sent in is durable: a leader that crashed before persisting its
        # term could come back in the term before and win this term again with a different log.
        # Everything else (votes, acknowledgements) waits for the disk (Raft paper Figure 2).
        if self.state == Role.LEADER and self._durable_term == self.term:
            self._early_msgs.append(m)
        else:
            self._msgs.append(m)

    def _reply(self, m: Message, type: MessageType, **fields) -> None:
        self._send(Message(type, m.frm, self.id, fields.pop("term", self.term), **fields))

    _HANDLERS: dict[Role, dict[MessageType, Callable[[Raft, Message], None]]]  # set below

# --- dispatch tables: message type -> handler, one table per role ---------------------------

_Handler = Callable[[Raft, Message], None]

_FOLLOWER: dict[MessageType, _Handler] = {
    MT.APP: Raft._on_append,
    MT.HEARTBEAT: Raft._on_heartbeat,
    MT.SNAP: Raft._on_snapshot,
    MT.PRE_VOTE: Raft._on_vote_request,
    MT.VOTE: Raft._on_vote_request,
    MT.TIMEOUT_NOW: Raft._on_timeout_now,
    MT.READ_INDEX_RESP: Raft._on_read_index_resp,
}

_CANDIDATE: dict[MessageType, _Handler] = {
    MT.APP: Raft._candidate_on_leader_msg,
    MT.HEARTBEAT: Raft._candidate_on_leader_msg,
    MT.SNAP: Raft._candidate_on_leader_msg,
    MT.PRE_VOTE: Raft._on_vote_request,
    MT.VOTE: Raft._on_vote_request,
    MT.PRE_VOTE_RESP: Raft._on_vote_response,
    MT.VOTE_RESP: Raft._on_vote_response,
    MT.READ_INDEX_RESP: Raft._on_read_index_resp,
}

_LEADER: dict[MessageType, _Handler] = {
    MT.APP_RESP: Raft._on_append_resp,
    MT.HEARTBEAT_RESP: Raft._on_heartbeat_resp,
    MT.PRE_VOTE: Raft._on_vote_request,
    MT.VOTE: Raft._on_vote_request,
    MT.READ_INDEX: Raft._on_read_index_req,
}

Raft._HANDLERS = {
    Role.FOLLOWER: _FOLLOWER,
    Role.PRE_CANDIDATE: _CANDIDATE,
    Role.CANDIDATE: _CANDIDATE,
    Role.LEADER: _LEADER,
}
