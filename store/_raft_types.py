"""Plain data of the Raft core: entries, configuration changes, snapshots, messages, Ready.

Everything here is a value: no behaviour beyond (de)serialisation and validation.
`Message.to_wire()` produces plain dicts/lists of ints, bytes and str (msgpack-able);
`Message.from_wire()` is the only door for bytes that came from the network, so it validates
everything and raises ValueError, and nothing else, on malformed input.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Sequence

# Upper bounds used by validation. They are generous; they only keep garbage from turning
# into huge allocations or absurd numbers inside the state machine.
MAX_U64 = (1 << 64) - 1
MAX_ID_LEN = 256
MAX_VOTERS = 1024


class Role(enum.StrEnum):
    FOLLOWER = "follower"
    PRE_CANDIDATE = "pre-candidate"
    CANDIDATE = "candidate"
    LEADER = "leader"


class EntryKind(enum.IntEnum):
    NORMAL = 0
    CONF_CHANGE = 1
    NOOP = 2  # appended by every new leader (Raft paper §5.4.2 / §8)


class MessageType(enum.IntEnum):
    PRE_VOTE = 1
    PRE_VOTE_RESP = 2
    VOTE = 3
    VOTE_RESP = 4
    APP = 5  # AppendEntries
    APP_RESP = 6
    HEARTBEAT = 7
    HEARTBEAT_RESP = 8
    SNAP = 9  # InstallSnapshot
    TIMEOUT_NOW = 10
    READ_INDEX = 11  # a follower forwarding a linearizable-read request to the leader
    READ_INDEX_RESP = 12


class ConfChangeType(enum.IntEnum):
    ADD_NODE = 0
    REMOVE_NODE = 1


# Context attached to Vote requests of a campaign started by TimeoutNow: receivers then
# skip the leader-lease check (thesis §3.10 / §4.2.3).
CAMPAIGN_TRANSFER = b"transfer"


class RaftError(Exception):
    """Base of the errors raised by the public API."""


class ProposalDropped(RaftError):
    """The proposal was not accepted now (e.g. a leadership transfer or a configuration
    change is in progress); the caller may retry later."""


class NotLeader(ProposalDropped):
    """This node is not the leader. `leader_hint` is the leader it knows of, or None."""

    def __init__(self, leader_hint: str | None):
        super().__init__(f"not the leader (leader hint: {leader_hint})")
        self.leader_hint = leader_hint


# --- validation helpers -------------------------------------------------------------------

def _int(v: Any, what: str) -> int:
    if type(v) is not int or v < 0 or v > MAX_U64:
        raise ValueError(f"{what}: expected an unsigned 64-bit int, got {type(v).__name__}")
    return v


def _bytes(v: Any, what: str) -> bytes:
    if type(v) is not bytes:
        raise ValueError(f"{what}: expected bytes, got {type(v).__name__}")
    return v


def _node_id(v: Any, what: str) -> str:
    if type(v) is not str or not v or len(v) > MAX_ID_LEN:
        raise ValueError(f"{what}: expected a non-empty node id string")
    return v


def _seq(v: Any, what: str) -> Sequence[Any]:
    if type(v) not in (list, tuple):
        raise ValueError(f"{what}: expected a list")
    return v


def _enum(members: dict[int, enum.IntEnum], v: Any, what: str) -> Any:
    """The member of `members` (an `_members` table) with value v. A dict lookup, not cls(v):
    EnumType.__call__ costs ~0.5 us, and every message and entry off the wire has one."""
    if type(v) is not int:
        raise ValueError(f"{what}: expected an int enum value")
    member = members.get(v)
    if member is None:
        raise ValueError(f"{what}: unknown value {v}")
    return member


def _members(cls: type[enum.IntEnum]) -> dict[int, enum.IntEnum]:
    return {int(m): m for m in cls}


_ENTRY_KINDS = _members(EntryKind)
_CONF_CHANGE_TYPES = _members(ConfChangeType)
_MESSAGE_TYPES = _members(MessageType)


# --- log entries and configuration --------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Entry:
    term: int
    index: int
    kind: EntryKind = EntryKind.NORMAL
    data: bytes = b""

    def size(self) -> int:
        # A rough encoded size, used for max_size_per_msg batching.
        return len(self.data) + 16

    def to_wire(self) -> list[Any]:
        return [self.term, self.index, int(self.kind), self.data]

    @classmethod
    def from_wire(cls, obj: Any) -> Entry:
        seq = _seq(obj, "entry")
        if len(seq) != 4:
            raise ValueError("entry: expected [term, index, kind, data]")
        kind = _enum(_ENTRY_KINDS, seq[2], "entry.kind")
        e = cls(_int(seq[0], "entry.term"), _int(seq[1], "entry.index"), kind, _bytes(seq[3], "entry.data"))
        if kind == EntryKind.CONF_CHANGE:
            ConfChange.decode(e.data)  # an undecodable change must not reach the log
        return e


@dataclass(frozen=True, slots=True)
class ConfChange:
    """A single-member configuration change (Raft thesis §4.1). `context` is opaque to
    Raft (the shell can carry e.g. the new member's address in it)."""

    type: ConfChangeType
    node_id: str
    context: bytes = b""

    def encode(self) -> bytes:
        nid = self.node_id.encode()
        return bytes([int(self.type)]) + len(nid).to_bytes(2, "big") + nid + self.context

    @classmethod
    def decode(cls, data: bytes) -> ConfChange:
        if len(data) < 3:
            raise ValueError("conf change: too short")
        ctype = _enum(_CONF_CHANGE_TYPES, data[0], "conf change type")
        n = int.from_bytes(data[1:3], "big")
        if len(data) < 3 + n:
            raise ValueError("conf change: truncated node id")
        try:
            nid = data[3:3 + n].decode()
        except UnicodeDecodeError:
            raise ValueError("conf change: node id is not UTF-8") from None
        return cls(ctype, _node_id(nid, "conf change node id"), bytes(data[3 + n:]))


@dataclass(frozen=True, slots=True)
class SnapshotMeta:
    """Where a state-machine snapshot sits in the log, and the voters as of that index."""

    index: int
    term: int
    voters: tuple[str, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"index": self.index, "term": self.term, "voters": list(self.voters)}

    @classmethod
    def from_wire(cls, obj: Any) -> SnapshotMeta:
        if type(obj) is not dict:
            raise ValueError("snapshot meta: expected a dict")
        voters = _seq(obj.get("voters"), "snapshot.voters")
        if len(voters) > MAX_VOTERS:
            raise ValueError("snapshot.voters: too many")
        vs = tuple(sorted({_node_id(v, "snapshot voter") for v in voters}))
        return cls(_int(obj.get("index"), "snapshot.index"), _int(obj.get("term"), "snapshot.term"), vs)


@dataclass(frozen=True, slots=True)
class Snapshot:
    meta: SnapshotMeta
    data: bytes

    def to_wire(self) -> dict[str, Any]:
        w = self.meta.to_wire()
        w["data"] = self.data
        return w

    @classmethod
    def from_wire(cls, obj: Any) -> Snapshot:
        meta = SnapshotMeta.from_wire(obj)
        if set(obj) - {"index", "term", "voters", "data"}:
            raise ValueError("snapshot: unknown keys")
        return cls(meta, _bytes(obj.get("data"), "snapshot.data"))


# --- what the shell persists and gets back -------------------------------------------------

@dataclass(frozen=True, slots=True)
class HardState:
    """The state Raft requires on stable storage before answering (paper Figure 2)."""

    term: int = 0
    vote: str | None = None
    commit: int = 0

    def to_wire(self) -> list[Any]:
        return [self.term, self.vote or "", self.commit]

    @classmethod
    def from_wire(cls, obj: Any) -> HardState:
        seq = _seq(obj, "hard state")
        if len(seq) != 3 or type(seq[1]) is not str:
            raise ValueError("hard state: expected [term, vote, commit]")
        vote = _node_id(seq[1], "hard state vote") if seq[1] else None
        return cls(_int(seq[0], "hard state term"), vote, _int(seq[2], "hard state commit"))


@dataclass(frozen=True, slots=True)
class SoftState:
    """Volatile state the shell may want to observe (who leads, our role)."""

    leader_id: str | None
    role: Role


@dataclass(frozen=True, slots=True)
class ReadState:
    """A linearizable read `ctx` may be served once the state machine has applied `index`."""

    ctx: bytes
    index: int


@dataclass(slots=True)
class PersistentState:
    """Everything the shell had persisted, handed back to the constructor on restart.

    `entries` must be contiguous; entries at or below the snapshot index are ignored.
    `snapshot_data` is only needed to send InstallSnapshot to lagging followers; when it is
    None and one needs it, `Raft.snapshot_wanted` asks the shell for one.
    `applied` is how far the shell's durable state machine already got (etcd's
    Config.Applied): committed entries up to it are not handed out again.
    """

    hard_state: HardState = HardState()
    entries: Sequence[Entry] = ()
    snapshot_meta: SnapshotMeta | None = None
    snapshot_data: bytes | None = None
    applied: int = 0

    def is_empty(self) -> bool:
        return self.hard_state == HardState() and not self.entries and self.snapshot_meta is None


# --- messages ----------------------------------------------------------------------------

_MSG_INT_FIELDS = ("log_term", "index", "commit", "hint", "hint_term")
_MSG_KEYS = frozenset(("type", "to", "from", "term", "reject", "entries", "context", "snapshot") + _MSG_INT_FIELDS)
MAX_CONTEXT = 1 << 16


@dataclass(slots=True)
class Message:
    """A Raft message. Field use by type:

    - PRE_VOTE/VOTE: term (the campaign's term), index/log_term (candidate's last entry),
      context == CAMPAIGN_TRANSFER for a leadership-transfer campaign.
    - *_RESP of votes: term, reject.
    - APP: index/log_term (the entry preceding `entries`), entries, commit.
    - APP_RESP: index (last matching index) or, with reject, index = the rejected APP's index
      and hint/hint_term = the follower's guess at the last index that may match.
    - HEARTBEAT: commit, context (the newest pending ReadIndex ctx). HEARTBEAT_RESP echoes
      context; with reject, index = the follower's last index, which is below the commit the
      leader announced (the follower lost entries it had acknowledged: wiped storage).
    - SNAP: snapshot.  READ_INDEX: context.  READ_INDEX_RESP: context, index.
    """

    type: MessageType
    to: str
    frm: str
    term: int = 0
    log_term: int = 0
    index: int = 0
    entries: Sequence[Entry] = ()
    commit: int = 0
    reject: bool = False
    hint: int = 0
    hint_term: int = 0
    context: bytes = b""
    snapshot: Snapshot | None = None

    def to_wire(self) -> dict[str, Any]:
        """A plain dict; fields holding their default value are left out."""
        w: dict[str, Any] = {"type": int(self.type), "to": self.to, "from": self.frm, "term": self.term}
        for name in _MSG_INT_FIELDS:
            v = getattr(self, name)
            if v:
                w[name] = v
        if self.reject:
            w["reject"] = 1
        if self.entries:
            w["entries"] = [e.to_wire() for e in self.entries]
        if self.context:
            w["context"] = self.context
        if self.snapshot is not None:
            w["snapshot"] = self.snapshot.to_wire()
        return w

    @classmethod
    def from_wire(cls, obj: Any) -> Message:
        """Decode and validate; raises ValueError (only) on anything malformed."""
        if type(obj) is not dict:
            raise ValueError("message: expected a dict")
        if not obj.keys() <= _MSG_KEYS:
            raise ValueError("message: unknown keys")
        for key in ("type", "to", "from", "term"):
            if key not in obj:
                raise ValueError(f"message: missing {key}")
        m = cls(_enum(_MESSAGE_TYPES, obj["type"], "message.type"), _node_id(obj["to"], "message.to"),
                _node_id(obj["from"], "message.from"), _int(obj["term"], "message.term"))
        for name in _MSG_INT_FIELDS:
            if name in obj:
                setattr(m, name, _int(obj[name], f"message.{name}"))
        if "reject" in obj:
            if obj["reject"] not in (0, 1) or type(obj["reject"]) not in (int, bool):
                raise ValueError("message.reject: expected 0 or 1")
            m.reject = bool(obj["reject"])
        if "context" in obj:
            m.context = _bytes(obj["context"], "message.context")
            if len(m.context) > MAX_CONTEXT:
                raise ValueError("message.context: too long")
        if "entries" in obj:
            m.entries = [Entry.from_wire(e) for e in _seq(obj["entries"], "message.entries")]
        if "snapshot" in obj:
            m.snapshot = Snapshot.from_wire(obj["snapshot"])
        _check_semantics(m)
        return m


def _check_semantics(m: Message) -> None:
    """Reject shapes a correct peer never sends, so the core can trust its invariants."""
    if m.entries:
        if m.type != MessageType.APP:
            raise ValueError("message: only APP carries entries")
        prev_term = m.log_term
        for i, e in enumerate(m.entries):
            if e.index != m.index + 1 + i:
                raise ValueError("message.entries: indexes must follow message.index contiguously")
            if e.term < prev_term or e.term > m.term:
                raise ValueError("message.entries: terms must be non-decreasing and <= message.term")
            prev_term = e.term
    if m.type == MessageType.APP and m.log_term > m.term:
        raise ValueError("message.log_term: greater than message.term")
    if (m.snapshot is not None) != (m.type == MessageType.SNAP):
        raise ValueError("message: SNAP, and only SNAP, carries a snapshot")
    if m.snapshot is not None and (m.snapshot.meta.term > m.term or m.snapshot.meta.index == 0):
        raise ValueError("message.snapshot: bad index or term")
    if m.type in (MessageType.VOTE, MessageType.PRE_VOTE) and m.log_term > m.term:
        raise ValueError("message.log_term: greater than the campaign term")


# --- Ready -------------------------------------------------------------------------------

@dataclass(slots=True)
class Ready:
    """A batch of work for the shell. Process it strictly in this order (persist, send, apply):

    0. `early_messages` (the leader's APPs, heartbeats ...) may be sent at once, before or while
       step 1 runs: the leader counts its own copy of an entry toward a commit only after
       advance() says it is persisted (Raft thesis §10.2.1).
    1. Persist, atomically if possible: `snapshot` first (it replaces the whole persisted log:
       drop every persisted entry), then `entries` (first delete every persisted entry with
       index >= entries[0].index: they were overwritten by a new leader), then `hard_state`.
    2. Only then send `messages`: a vote granted or an entry acknowledged must already be
       durable when the peer learns of it (Raft paper Figure 2, "respond after persisting").
    3. Restore the state machine from `snapshot` if any, then apply `committed_entries` in order.
    4. Serve reads whose `read_states` index is <= the applied index.
    5. Call `Raft.advance(ready)`.

    `soft_state` (leader/role), when not None, changed since the previous Ready.
    """

    hard_state: HardState | None = None
    entries: list[Entry] = field(default_factory=list)
    snapshot: Snapshot | None = None
    messages: list[Message] = field(default_factory=list)
    early_messages: list[Message] = field(default_factory=list)
    committed_entries: list[Entry] = field(default_factory=list)
    read_states: list[ReadState] = field(default_factory=list)
    soft_state: SoftState | None = None

    @property
    def must_sync(self) -> bool:
        """Whether step 1 has anything to write (and so must fsync before step 2)."""
        return bool(self.entries) or self.snapshot is not None or self.hard_state is not None
