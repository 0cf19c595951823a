"""Raft's persistent storage for one replica, in the replica's one LevelDB (plyvel).

The replica keeps everything in ONE LevelDB: the MVCC state under ``kv/`` (a
`store.backend.LevelDBBackend` with that prefix) and this log under ``raft/``. LevelDB has one
write-ahead log for the whole database, so the fsync of a Raft write also makes every earlier
(unsynced) write of the state machine durable: the state machine never needs an fsync of its own.

Layout under the prefix (integers unsigned big-endian)::

    e/<index 8B>      one log entry: msgpack [term, kind, data]; byte order is index order
    hardstate         msgpack [term, vote or "", commit]          (HardState.to_wire)
    snapshot/meta     msgpack {"index", "term", "voters"}          (SnapshotMeta.to_wire)
    snapshot/data     a snapshot received from the leader, until the next compaction
    meta/<name>       the shell's own small records (e.g. the members' endpoints)

The persisted entries are always contiguous, `first_index .. last_index`, right after the
snapshot (if any): every write keeps that invariant, and `load()` checks it.

`save(ready)` persists one Ready exactly as `store.raft.Ready` prescribes, in ONE
`write_batch(sync=True)`: the snapshot (replacing the whole log), then the entries (after
deleting the persisted suffix they overwrite), then the hard state. That is group commit: every
entry a leader appended and every term or vote change since the previous Ready costs one fsync
together, so under load fsyncs are far fewer than writes. `fsyncs` counts them.

Like etcd (raft.MustSync), a Ready whose only change is the commit index is written WITHOUT an
fsync: the commit index is volatile state in Raft (paper Figure 2), a restarted node learns it
again from the leader, and LevelDB's single ordered WAL means the persisted value never refers
to entries that did not reach the disk. (The state machine may then be durable a little ahead of
the persisted commit index; Raft hands out those entries again and the KV store skips them.)
`needs_sync(ready)` tells whether save() fsyncs. `fsync=False` (`--unsafe-no-fsync`, as etcd's
flag of that name) writes the same batches without ever syncing: for measuring what the fsyncs
cost, never for data anyone wants back after a crash of the machine. Every synced write reports
to the replica's `store.backend.Disk` when one is given (injected faults: a failing fsync, and
what a power loss keeps).

`compact(meta)` records a compaction (after `Raft.compact`) and deletes the entries it covers,
in one synced batch as well. No snapshot data is written: recovery does not need it, since the
state machine's own state in this database is at least as new (and durable by the same fsync);
it only serves followers that need a snapshot, and the shell makes one when that happens (etcd,
likewise, sends a follower its backend database rather than a stored copy). Written here, the
tens of megabytes of a busy store's snapshot went through LevelDB's log, memtable and
compactions at every compaction. A snapshot received from the leader is the exception: its data
is written with it (see save), because the state machine is restored from it only after that
write, and a crash in between needs it again.

Thread safety: `save` and `compact` may run in a worker thread (plyvel releases the GIL while
LevelDB writes and fsyncs), one call at a time; the counters are plain ints read by the loop.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

import msgpack
import plyvel

from kubemu.packer import packb

from .raft import Entry, EntryKind, HardState, PersistentState, Ready, SnapshotMeta

if TYPE_CHECKING:
    from .backend import Disk

__all__ = ["RaftStorage", "CorruptLog"]

_ENTRY = b"e/"
_HARD = b"hardstate"
_SNAP_META = b"snapshot/meta"
_SNAP_DATA = b"snapshot/data"
_META = b"meta/"


class CorruptLog(Exception):
    """The persisted log breaks its invariants (not contiguous, undecodable)."""


def _ekey(index: int) -> bytes:
    return _ENTRY + index.to_bytes(8, "big")


def _encode_entry(e: Entry) -> bytes:
    return packb([e.term, int(e.kind), e.data])


def _decode_entry(key: bytes, value: bytes) -> Entry:
    try:
        term, kind, data = msgpack.unpackb(value, raw=False)
        return Entry(term, int.from_bytes(key[len(_ENTRY):], "big"), EntryKind(kind), data)
    except Exception as exc:
        raise CorruptLog(f"undecodable entry at {key!r}: {exc}") from None


class RaftStorage:
    """The durable half of one Raft node (see the module docstring)."""

    def __init__(self, db: plyvel.DB, prefix: bytes = b"raft/", fsync: bool = True, disk: Disk | None = None):
        self._db = db
        self._disk = disk
        self._fsync = fsync
        self._prefix = prefix
        self._view = db.prefixed_db(prefix)
        self.fsyncs = 0  # synced writes (one per Ready that had something to persist, plus compactions)
        self.saves = 0  # Readys handed to save()
        self.entries_written = 0
        self.unsynced_writes = 0  # commit-index-only hard state writes
        meta = self._view.get(_SNAP_META)
        self._snap_index = SnapshotMeta.from_wire(msgpack.unpackb(meta, raw=False)).index if meta else 0
        # Persisted entries are [first_index, last_index]; empty when last < first.
        self.first_index, self.last_index = self._snap_index + 1, self._snap_index
        with self._view.iterator(prefix=_ENTRY, include_value=False) as it:
            for key in it:
                self.first_index = int.from_bytes(key[len(_ENTRY):], "big")
                break
        with self._view.iterator(prefix=_ENTRY, include_value=False, reverse=True) as it:
            for key in it:
                self.last_index = int.from_bytes(key[len(_ENTRY):], "big")
                break
        hs = self._view.get(_HARD)
        self._hard = HardState.from_wire(msgpack.unpackb(hs, raw=False)) if hs else HardState()

    # --- reading ---------------------------------------------------------------------------

    @property
    def snapshot_index(self) -> int:
        return self._snap_index

    def is_empty(self) -> bool:
        """Nothing of Raft was ever persisted here (a fresh or wiped data directory)."""
        return (self._view.get(_HARD) is None and self._view.get(_SNAP_META) is None
                and self.last_index < self.first_index)

    def load(self, applied: int = 0) -> PersistentState:
        """Everything persisted, for `Raft(..., storage_state=...)`; `applied` is the state
        machine's durable applied index (PersistentState.applied)."""
        hs = self._view.get(_HARD)
        try:
            hard = HardState.from_wire(msgpack.unpackb(hs, raw=False)) if hs else HardState()
            raw_meta = self._view.get(_SNAP_META)
            meta = SnapshotMeta.from_wire(msgpack.unpackb(raw_meta, raw=False)) if raw_meta else None
        except (ValueError, msgpack.UnpackException) as exc:
            raise CorruptLog(f"undecodable hard state or snapshot metadata: {exc}") from None
        data = self._view.get(_SNAP_DATA) if meta is not None else None
        snap_index = meta.index if meta else 0
        entries = []
        with self._view.iterator(prefix=_ENTRY) as it:
            for key, value in it:
                e = _decode_entry(key, value)
                if e.index <= snap_index:
                    continue  # covered by the snapshot (a compaction that kept a tail)
                if e.index != snap_index + 1 + len(entries):
                    raise CorruptLog(f"log not contiguous: entry {e.index} after "
                                     f"{snap_index + len(entries)}")
                entries.append(e)
        return PersistentState(hard, entries, meta, data, applied)

    def entry(self, index: int) -> Entry | None:
        value = self._view.get(_ekey(index))
        return None if value is None else _decode_entry(_ekey(index), value)

    def get_meta(self, name: bytes) -> bytes | None:
        return self._view.get(_META + name)

    def put_meta(self, name: bytes, value: bytes, sync: bool = False) -> None:
        self._view.put(_META + name, value, sync=sync)
        if sync:
            self.fsyncs += 1
            if self._disk is not None:
                self._disk.synced()

    # --- writing ---------------------------------------------------------------------------

    def needs_sync(self, rd: Ready) -> bool:
        """Whether save(rd) fsyncs: new entries, a snapshot, or a new term or vote."""
        hs = rd.hard_state
        return self._fsync and (bool(rd.entries) or rd.snapshot is not None or (
            hs is not None and (hs.term, hs.vote) != (self._hard.term, self._hard.vote)))

    def save(self, rd: Ready) -> bool:
        """Persist a Ready's snapshot, entries and hard state in one batch, synced unless only
        the commit index changed. Returns whether it fsynced."""
        self.saves += 1
        if not rd.must_sync:
            return False
        sync = self.needs_sync(rd)
        first, last = self.first_index, self.last_index
        with self._view.write_batch(transaction=True, sync=sync) as batch:
            if rd.snapshot is not None:
                meta = rd.snapshot.meta
                self._delete_entries(batch, first, last)  # a snapshot replaces the whole log
                batch.put(_SNAP_META, packb(meta.to_wire()))
                batch.put(_SNAP_DATA, rd.snapshot.data)
                first, last = meta.index + 1, meta.index
                snap_index = meta.index
            else:
                snap_index = self._snap_index
            if rd.entries:
                lo = rd.entries[0].index
                if lo > last + 1 or lo <= snap_index:
                    raise CorruptLog(f"entries from {lo} do not follow the persisted log "
                                     f"[{first}, {last}] (snapshot {snap_index})")
                self._delete_entries(batch, lo, last)  # overwritten by a new leader
                for e in rd.entries:
                    batch.put(_ekey(e.index), _encode_entry(e))
                if last < first:
                    first = lo
                last = rd.entries[-1].index
            if rd.hard_state is not None:
                batch.put(_HARD, packb(rd.hard_state.to_wire()))
        if rd.hard_state is not None:
            self._hard = rd.hard_state
        self._snap_index = snap_index
        self.first_index, self.last_index = first, last
        self.entries_written += len(rd.entries)
        if sync:
            self.fsyncs += 1
            if self._disk is not None:
                self._disk.synced()
        else:
            self.unsynced_writes += 1
        return sync

    def compact(self, meta: SnapshotMeta, extra_meta: Iterable[tuple[bytes, bytes]] = ()) -> int:
        """Record that the log now starts after meta.index (what `Raft.compact` returned) and
        delete the entries up to it, in one synced batch; no snapshot data is written (see the
        module docstring). Returns how many entries were deleted."""
        if meta.index < self._snap_index:
            raise ValueError(f"snapshot at {meta.index} is older than the persisted one at {self._snap_index}")
        first, last = self.first_index, self.last_index
        upto = min(meta.index, last)
        with self._view.write_batch(transaction=True, sync=self._fsync) as batch:
            batch.put(_SNAP_META, packb(meta.to_wire()))
            batch.delete(_SNAP_DATA)  # an older snapshot's, received from a leader
            deleted = self._delete_entries(batch, first, upto)
            for name, value in extra_meta:
                batch.put(_META + name, value)
        self._snap_index = meta.index
        if last <= meta.index:
            self.first_index, self.last_index = meta.index + 1, meta.index
        else:
            self.first_index = meta.index + 1
        self.fsyncs += self._fsync
        if self._fsync and self._disk is not None:
            self._disk.synced()
        return deleted

    @staticmethod
    def _delete_entries(batch, lo: int, hi: int) -> int:
        for i in range(lo, hi + 1):
            batch.delete(_ekey(i))
        return max(0, hi - lo + 1)

    def status(self) -> dict:
        return {"fsyncs": self.fsyncs, "saves": self.saves, "entries_written": self.entries_written,
                "unsynced_writes": self.unsynced_writes,
                "first_index": self.first_index, "last_index": self.last_index,
                "snapshot_index": self._snap_index}
