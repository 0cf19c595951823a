"""The key-value state machine of store/, with etcd v3 semantics: what committed Raft entries are
applied to.

`KVStore(backend)` is deterministic and pure: no clock, no threads, no I/O but its `Backend`.
Every replica that applies the same entries in the same order holds the same state, down to the
bytes in its backend. Requests and responses are plain msgpack-friendly dicts (they travel in
Raft entries and over the wire); build requests with the helpers at the bottom (`put_op`, ...).

Semantics (etcd's mvcc package and v3 API)
-----------------------------------------
* The store revision starts at 1 (an empty store) and grows by exactly one per request that
  changes something; all changes of one request share it, with increasing sub-revisions. A
  delete that matches nothing, a failed compare with only reads, a lease grant: no new revision.
* Each key carries create_revision, mod_revision, version (1 at creation, +1 per put, gone with
  a delete: a re-put starts a new generation at version 1) and lease (0: none).
* Ranges use etcd's range_end conventions (None: one key; b"\\0": every key >= key; else
  [key, range_end); `prefix_end(p)` for prefixes) and may read any revision from the compact
  revision to the current one.
* txn: compares see the state before the txn; then the chosen branch's ops run in order, each
  seeing the previous ones' writes. A branch may not put one key twice or put a key it deletes.
* compact(rev) keeps, per key, the latest version at or below rev (dropped if a tombstone) and
  everything newer; reads below rev fail with Compacted, and so do watches from rev or below
  (the deletes at rev itself are gone).
* Leases: granted and revoked through Raft (the id is in the request, chosen by the leader);
  expiry is the leader's business (`store.lease_clock.LeaseClock`), which proposes a revoke.
  Revoking deletes the lease's keys in one revision.

Entry points
------------
    apply_batch([(index, request), ...], answered=None)
        -> [(response | APPLIED | StoreError | None, [Event])]
    apply(index, request)                 the same for one entry
applies committed entries in order and persists their effects together with the applied index in
ONE backend write. `answered` (a container of indexes; None: all) limits the responses built to
those entries: any other that succeeds gets `APPLIED` in place of its response, and the reads in
its txn branch are not done (a replica answers only the requests proposed through it). What an
entry changes, its events and its StoreError never depend on it. An entry whose index is
<= applied_index was applied already: it is skipped and its result is (None, []), as is the
result of a request None (an entry with nothing for the state machine, e.g. a Raft
configuration change, which still advances applied_index). A request that fails (StoreError)
changes nothing but still counts as applied: it fails the same way on every replica. The events
of a request always carry prev_kv (it is at hand when writing); the watch layer drops it for
watchers that did not ask.

Reads that need not go through Raft (the shell makes them linearizable with ReadIndex):
`range(...)`, `events(start_revision, ...)` (watch history), `leases()`, `status()`.

Durability: `sync` (default False) is passed to each backend write. fsync per batch is not
needed because the Raft log is durable first: after a crash the store reopens at the last
applied index that reached the disk and the shell re-applies the log from there, each entry
exactly once. What the shell must keep is enough log to do so: before it compacts the Raft log up
to index i, either the store's applied_index up to i must be durable (call `sync()`), or the
shell must keep a Raft snapshot at i and `restore()` it when it finds applied_index < i on start.
(When the Raft log lives in the same LevelDB, each of its synced writes also makes every earlier
write of this store durable: LevelDB has one write-ahead log.) `restore()` always syncs.

If a backend write raises, memory and disk disagree: the instance refuses further use
(RuntimeError); reopen a KVStore over the backend to recover.

On-disk layout (keys of the backend; integers are unsigned big-endian)
---------------------------------------------------------------------
    r/<rev 8B><sub 4B>   one version of a key: msgpack [key, value, create_revision, version,
                         lease]; version 0 marks a tombstone (a delete). Byte order is revision
                         order, so history scans are range scans.
    l/<lease id 8B>      msgpack [ttl]; the attached keys are derived from the latest versions
    m/applied            8B: index of the last applied Raft entry
    m/revision           8B: the current store revision
    m/compact            8B: the compact revision (0: never compacted)
    m/format             b"1": layout version
The in-memory index (key -> revisions, etcd's treeIndex) is rebuilt from r/ when the store opens.

Snapshots (`snapshot()`) are msgpack {"format": 1, "pairs": [[backend key, value], ...]}: the
exact contents of the three keyspaces, so a restored replica is byte-identical.
"""
from __future__ import annotations

import itertools
import operator
from collections import OrderedDict
from typing import Callable, Container, Iterable, Iterator

import msgpack

from . import _mvcc_requests as rq
from ._mvcc_index import Index
from ._mvcc_types import (DELETE, MAX_REQUEST_BYTES, MAX_TXN_OPS, PUT, Compacted, DuplicateKey, Event,
                          FutureRevision, InvalidRequest, KeyNotFound, LeaseExists, LeaseNotFound, Record,
                          StoreError, TooLarge, check_request_size, invalid, make_kv, main_of, pack_rev,
                          tombstone)
from .backend import Backend, next_prefix
from .lease_clock import LeaseClock

__all__ = [
    "APPLIED", "DELETE", "MAX_REQUEST_BYTES", "MAX_TXN_OPS", "PUT", "Compacted", "DuplicateKey", "Event",
    "FutureRevision", "InvalidRequest", "KVStore", "KeyNotFound", "LeaseClock", "LeaseExists",
    "LeaseNotFound", "StoreError", "TooLarge", "check_request_size", "compact_op", "compare",
    "delete_op", "lease_grant_op", "lease_revoke_op", "make_kv", "prefix_end", "put_op", "range_op",
    "txn_op",
]

REV_PREFIX = b"r/"
LEASE_PREFIX = b"l/"
META_PREFIX = b"m/"
META_APPLIED = b"m/applied"
META_REVISION = b"m/revision"
META_COMPACT = b"m/compact"
META_FORMAT = b"m/format"
FORMAT = b"1"
KEYSPACES = (LEASE_PREFIX, META_PREFIX, REV_PREFIX)
# Decoded records of the newest versions written, by packed revision: a put reads its key's
# previous version, which is most often a recent one (a read of LevelDB plus a decode saved).
# Bounded by size, not count: 16 MiB holds ~5,000 pods' objects or 50,000 small values.
RECENT_RECORD_BYTES = 16 << 20
_RECORD_OVERHEAD = 96  # bytes a cached record costs beyond its key and value (tuple, ints, dict slot)


def prefix_end(prefix: bytes) -> bytes:
    """The range_end that makes [prefix, range_end) every key starting with `prefix` (etcd's
    GetPrefixRangeEnd): b"\\0", meaning no upper bound, when no such key exists."""
    end = next_prefix(prefix)
    return b"\0" if end is None else end


def _rev_key(packed: int) -> bytes:
    return REV_PREFIX + packed.to_bytes(12, "big")


def _lease_key(lease_id: int) -> bytes:
    return LEASE_PREFIX + lease_id.to_bytes(8, "big")


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "big")


class _Lease:
    __slots__ = ("ttl", "keys")

    def __init__(self, ttl: int) -> None:
        self.ttl = ttl
        self.keys: set[bytes] = set()


class _State:
    """Everything KVStore keeps in memory, as rebuilt from backend pairs."""

    def __init__(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        meta: dict[bytes, bytes] = {}
        versions: list[tuple[bytes, int, bool]] = []
        last_lease: dict[bytes, int] = {}
        self.leases: dict[int, _Lease] = {}
        for key, value in pairs:
            if key.startswith(REV_PREFIX):
                rec = Record.decode(value)
                versions.append((rec.key, int.from_bytes(key[len(REV_PREFIX):], "big"), rec.tombstone))
                last_lease[rec.key] = rec.lease
            elif key.startswith(LEASE_PREFIX):
                (ttl,) = msgpack.unpackb(value)
                self.leases[int.from_bytes(key[len(LEASE_PREFIX):], "big")] = _Lease(ttl)
            elif key.startswith(META_PREFIX):
                meta[key] = value
        if meta.get(META_FORMAT, FORMAT) != FORMAT:
            raise ValueError(f"unknown store format {meta[META_FORMAT]!r}")
        versions.sort(key=lambda v: v[1])
        self.index = Index.build(versions)
        for key, lease in last_lease.items():  # a tombstone's lease is 0
            if lease:
                self.leases[lease].keys.add(key)
        self.applied = int.from_bytes(meta.get(META_APPLIED, b""), "big")
        self.revision = int.from_bytes(meta.get(META_REVISION, b""), "big") or 1  # etcd starts at 1
        self.compact = int.from_bytes(meta.get(META_COMPACT, b""), "big")


# The result of an entry that succeeded but whose response was not asked for (apply_batch's
# `answered`): a follower applies every entry but answers only its own proposals, and building
# the others' responses (headers, txn branch reads) was ~10% of its apply, parsing aside.
APPLIED = "applied"


class _Write:
    """One request's changes: all share the revision `rev`, with sub-revisions 0, 1, 2, ...
    `answered`: whether anyone reads the response (when not, the handlers may skip building it;
    what they change and the events are the same)."""

    __slots__ = ("rev", "sub", "events", "answered")

    def __init__(self, rev: int, answered: bool) -> None:
        self.rev, self.sub = rev, 0
        self.events: list[Event] = []
        self.answered = answered

    def next(self) -> int:
        packed = pack_rev(self.rev, self.sub)
        self.sub += 1
        return packed


# A compare's result -> how actual and operand must relate (bytes compare as etcd's bytes.Compare).
_RESULTS: dict[str, Callable] = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}


class KVStore:
    """The MVCC key-value state machine over a `Backend` (see the module docstring)."""

    def __init__(self, backend: Backend, sync: bool = False) -> None:
        self._backend = backend
        self._sync = sync
        self._pending: dict[bytes, bytes | None] = {}  # staged writes of the current batch
        self._broken: BaseException | None = None
        self._epoch = 0  # bumped by restore(): open event streams stop
        self._install(_State(self._iterate_all()))

    # ------------------------------------------------------------------------------ accessors

    @property
    def backend(self) -> Backend:
        return self._backend

    @property
    def revision(self) -> int:
        return self._rev

    @property
    def compact_revision(self) -> int:
        return self._compact

    @property
    def applied_index(self) -> int:
        return self._applied

    def status(self) -> dict:
        self._check_usable()
        return {"revision": self._rev, "compact_revision": self._compact, "applied_index": self._applied,
                "keys": self._index.live_count(), "leases": len(self._leases),
                "db_size": self._backend.approximate_size()}

    def leases(self) -> list[tuple[int, int, list[bytes]]]:
        """Every lease as (id, ttl, attached keys sorted), by id."""
        return [(lid, lease.ttl, sorted(lease.keys)) for lid, lease in sorted(self._leases.items())]

    # ------------------------------------------------------------------------------ Raft apply

    def apply(self, index: int, request: dict | rq.Op | None) -> tuple[dict | StoreError | None, list[Event]]:
        return self.apply_batch([(index, request)])[0]

    def apply_batch(self, entries: Iterable[tuple[int, dict | rq.Op | None]],
                    answered: Container[int] | None = None) -> list[tuple[dict | str | StoreError | None, list[Event]]]:
        """Apply committed entries in order and persist them with one backend write. With
        `answered`, only the entries whose index is in it get their response built (the others
        that succeed get APPLIED; see the module docstring)."""
        self._check_usable()
        applied_before = self._applied
        try:
            results = [self._apply_entry(index, request, answered is None or index in answered)
                       for index, request in entries]
            if self._applied != applied_before:
                self._flush()
        except BaseException as exc:  # memory is ahead of the disk now: refuse further use
            self._broken = exc
            raise
        return results

    def _apply_entry(self, index: int, request, answered: bool) -> tuple[dict | str | StoreError | None, list[Event]]:
        if type(index) is not int:
            raise TypeError(f"entry index must be an int, not {type(index).__name__}")
        if index <= self._applied:
            return None, []  # applied before (entries are applied exactly once)
        self._applied = index
        if request is None:
            return None, []
        try:
            # the proposing leader hands over the op it parsed already (see store.server)
            op = request if isinstance(request, rq.Op) else rq.parse_request(request)
            write = _Write(self._rev + 1, answered)
            body = self._HANDLERS[type(op)](self, write, op)
        except StoreError as err:
            return err, []  # handlers check everything before they change anything
        if write.sub:
            self._rev = write.rev
        return (self._with_header(body) if answered else APPLIED), write.events

    def sync(self) -> None:
        """Make every applied entry durable now (an fsync'd write of the metadata)."""
        self._check_usable()
        self._flush(sync=True)

    # ------------------------------------------------------------------------------ reads

    def range(self, key: bytes, range_end: bytes | None = None, revision: int = 0, limit: int = 0,
              count_only: bool = False, keys_only: bool = False, serializable: bool = False) -> dict:
        """A range read outside Raft (the response of a range request); raises StoreError."""
        self._check_usable()
        op = rq.parse_range_args({"key": key, "range_end": range_end, "revision": revision, "limit": limit,
                                  "count_only": count_only, "keys_only": keys_only,
                                  "serializable": serializable})
        self._check_range(op)
        return self._with_header(self._read(op, self._rev))

    def events(self, start_revision: int, key: bytes = b"\0", range_end: bytes | None = b"\0",
               prev_kv: bool = False) -> Iterator[Event]:
        """Every event at revision >= start_revision on keys in the range (etcd conventions; by
        default every key), in revision then sub-revision order, lazily from the stored history.
        Raises Compacted at once if start_revision <= compact revision, or later if a compaction
        overtakes the iteration or a restore replaces the state (etcd cancels such a watch)."""
        self._check_usable()
        if type(start_revision) is not int:
            raise invalid("start_revision", f"expected an integer, got {type(start_revision).__name__}")
        keys = rq.parse_key_range(key, range_end)
        if start_revision <= self._compact:
            raise Compacted(self._compact)
        return self._event_stream(max(start_revision, 1), keys, prev_kv)

    def _event_stream(self, start: int, keys: rq.KeyRange, prev_kv: bool) -> Iterator[Event]:
        epoch = self._epoch
        for bkey, data in self._backend.iterate(_rev_key(pack_rev(start, 0)), prefix=REV_PREFIX):
            packed = int.from_bytes(bkey[len(REV_PREFIX):], "big")
            # The backend iterator reads a snapshot, but prev_kv lookups use the live index: a
            # compaction past this point (or a restore) ends the stream, as in etcd.
            if main_of(packed) <= self._compact or self._epoch != epoch:
                raise Compacted(self._compact)
            rec = Record.decode(data)
            if rec.key in keys:
                yield Event(DELETE if rec.tombstone else PUT, rec.kv(packed),
                            self._prev_kv(rec.key, packed) if prev_kv else None)

    def _prev_kv(self, key: bytes, packed: int) -> dict | None:
        hist = self._index.get(key)
        prev = None if hist is None else hist.before(packed)
        return None if prev is None else self._record(prev).kv(prev)

    # ------------------------------------------------------------------------------ snapshots

    def snapshot(self) -> bytes:
        """The whole state as of applied_index (for Raft's InstallSnapshot)."""
        return self.snapshot_encoder()()

    def snapshot_encoder(self) -> Callable[[], bytes]:
        """`snapshot()` in two steps: the state is pinned now (backend iterators read from the
        moment they are made), and the returned function encodes it later, on any thread, while
        this store goes on applying: the encoding is O(state), ~0.2 s per 100,000 records."""
        self._check_usable()
        pairs = self._iterate_all()
        return lambda: msgpack.packb({"format": int(FORMAT), "pairs": list(pairs)}, use_bin_type=True)

    def restore(self, data: bytes) -> None:
        """Replace the whole state with a snapshot's, atomically and durably (sync)."""
        self._check_usable()
        pairs, state = self._decode_snapshot(data)
        old_keys = [k for k, _ in self._iterate_all()]
        try:
            self._backend.write(pairs, old_keys, sync=True)
        except BaseException as exc:
            self._broken = exc
            raise
        self._install(state)
        self._epoch += 1

    @staticmethod
    def _decode_snapshot(data) -> tuple[list[tuple[bytes, bytes]], _State]:
        try:
            obj = msgpack.unpackb(data, raw=False)
            if obj.get("format") != int(FORMAT):
                raise ValueError(f"unknown snapshot format {obj.get('format')!r}")
            pairs = [(k, v) for k, v in obj["pairs"]]
            if len({k for k, _ in pairs}) != len(pairs):
                raise ValueError("duplicate keys")
            for k, v in pairs:
                if not (isinstance(k, bytes) and isinstance(v, bytes) and k.startswith(KEYSPACES)):
                    raise ValueError(f"bad pair for key {k!r}")
            return pairs, _State(sorted(pairs))
        except Exception as exc:  # whatever the bytes are, a bad snapshot is a typed error
            raise InvalidRequest(f"snapshot: {exc}", field="snapshot") from None

    # ------------------------------------------------------------------------------ internals

    def _install(self, state: _State) -> None:
        # A revision's record never changes, so the cache needs no invalidation; it starts
        # empty with each state all the same.
        self._recent: OrderedDict[int, Record] = OrderedDict()
        self._recent_bytes = 0
        self._index, self._leases = state.index, state.leases
        self._applied, self._rev, self._compact = state.applied, state.revision, state.compact

    def _iterate_all(self) -> Iterator[tuple[bytes, bytes]]:
        """Every pair of the three keyspaces, as of this call (the iterators are made now)."""
        return itertools.chain.from_iterable([self._backend.iterate(prefix=prefix) for prefix in KEYSPACES])

    def _check_usable(self) -> None:
        if self._broken is not None:
            raise RuntimeError("KVStore is unusable after a failed apply; reopen it from the backend") \
                from self._broken

    def _header(self) -> dict:
        return {"revision": self._rev}

    def _with_header(self, body: dict) -> dict:
        for nested in body.get("responses", ()):
            nested["header"] = self._header()
        return {"header": self._header(), **body}

    def _flush(self, sync: bool | None = None) -> None:
        staged, self._pending = self._pending, {}
        puts = [(k, v) for k, v in staged.items() if v is not None]
        puts += [(META_APPLIED, _u64(self._applied)), (META_REVISION, _u64(self._rev)),
                 (META_COMPACT, _u64(self._compact)), (META_FORMAT, FORMAT)]
        deletes = [k for k, v in staged.items() if v is None]
        self._backend.write(puts, deletes, sync=self._sync if sync is None else sync)

    def _stage(self, key: bytes, value: bytes | None) -> None:
        self._pending[key] = value

    def _record(self, packed: int) -> Record:
        rec = self._recent.get(packed)
        if rec is not None:
            return rec
        key = _rev_key(packed)
        data = self._pending[key] if key in self._pending else self._backend.get(key)
        if data is None:
            raise RuntimeError(f"index points at missing record {key!r}")
        return Record.decode(data)

    def _write_version(self, write: _Write, rec: Record, prev: Record | None, prev_packed: int | None) -> None:
        """Store a new version of rec.key (a tombstone for a delete), index it, keep lease
        attachments in step and record the event."""
        packed = write.next()
        self._stage(_rev_key(packed), rec.encode())
        recent = self._recent
        recent[packed] = rec
        self._recent_bytes += len(rec.key) + len(rec.value) + _RECORD_OVERHEAD
        while self._recent_bytes > RECENT_RECORD_BYTES and recent:
            _, old = recent.popitem(last=False)
            self._recent_bytes -= len(old.key) + len(old.value) + _RECORD_OVERHEAD
        self._index.append(rec.key, packed, rec.tombstone)
        old_lease = prev.lease if prev else 0
        if old_lease != rec.lease:  # a put that moves a key to another lease detaches it
            if old_lease:
                self._leases[old_lease].keys.discard(rec.key)
            if rec.lease:
                self._leases[rec.lease].keys.add(rec.key)
        prev_kv = prev.kv(prev_packed) if prev else None
        write.events.append(Event(DELETE if rec.tombstone else PUT, rec.kv(packed), prev_kv))

    def _check_readable(self, revision: int) -> None:
        if revision < self._compact:
            raise Compacted(self._compact)
        if revision > self._rev:
            raise FutureRevision("required revision is a future revision", revision=revision,
                                 current_revision=self._rev)

    # --- put

    def _check_put(self, op: rq.Put) -> None:
        if (op.ignore_value or op.ignore_lease) and self._index.latest(op.key) is None:
            raise KeyNotFound("key not found", key=op.key)
        if op.lease and op.lease not in self._leases:
            raise LeaseNotFound("requested lease not found", id=op.lease)

    def _put(self, write: _Write, op: rq.Put) -> dict:
        prev_packed = self._index.latest(op.key)
        prev = None if prev_packed is None else self._record(prev_packed)
        if prev is None:
            create, version = write.rev, 1
        else:
            create, version = prev.create_revision, prev.version + 1
        rec = Record(op.key, prev.value if op.ignore_value else op.value, create, version,
                     prev.lease if op.ignore_lease else op.lease)
        self._write_version(write, rec, prev, prev_packed)
        return {"prev_kv": prev.kv(prev_packed)} if op.prev_kv and prev else {}

    def _do_put(self, write: _Write, op: rq.Put) -> dict:
        self._check_put(op)
        return self._put(write, op)

    # --- range

    def _check_range(self, op: rq.Range) -> None:
        if op.revision:
            self._check_readable(op.revision)

    def _read(self, op: rq.Range, latest: int) -> dict:
        count, kvs = 0, []
        for _, packed in self._index.visible(op.keys, op.revision or latest):
            count += 1
            if not op.count_only and (not op.limit or len(kvs) < op.limit):
                kvs.append(self._record(packed).kv(packed, keys_only=op.keys_only))
        return {"kvs": kvs, "count": count, "more": not op.count_only and 0 < op.limit < count}

    def _range_in(self, write: _Write, op: rq.Range) -> dict:
        # Reading at the txn's own revision makes a range see the txn's earlier writes (etcd).
        return self._read(op, write.rev)

    def _do_range(self, write: _Write, op: rq.Range) -> dict:
        self._check_range(op)
        return self._range_in(write, op)

    # --- delete

    def _delete(self, write: _Write, op: rq.DeleteRange) -> dict:
        victims = list(self._index.visible(op.keys, write.rev))
        prev_kvs = [self._delete_key(write, key, packed) for key, packed in victims]
        return {"deleted": len(victims), **({"prev_kvs": prev_kvs} if op.prev_kv else {})}

    def _delete_key(self, write: _Write, key: bytes, packed: int) -> dict:
        prev = self._record(packed)
        self._write_version(write, tombstone(key), prev, packed)
        return prev.kv(packed)

    # --- txn

    def _compare(self, c: rq.Compare) -> bool:
        found = list(self._index.visible(c.keys, self._rev))
        if not found:
            # etcd compares a missing key as a zero KeyValue, except on its value: that fails.
            return c.target != "value" and _RESULTS[c.result](0, c.operand)
        holds = _RESULTS[c.result]
        return all(holds(self._target(c.target, packed), c.operand) for _, packed in found)

    def _target(self, target: str, packed: int):
        if target == "mod_revision":
            return main_of(packed)
        return getattr(self._record(packed), target)

    def _do_txn(self, write: _Write, op: rq.Txn) -> dict:
        succeeded = all(self._compare(c) for c in op.compare)
        ops = op.success if succeeded else op.failure
        for o in ops:  # etcd checks the chosen branch before running any of it
            _TXN_OPS[type(o)][1](self, o)
        if not write.answered:  # no response: only the writes matter, a read changes nothing
            for o in ops:
                if type(o) is not rq.Range:
                    _TXN_OPS[type(o)][2](self, write, o)
            return {}
        responses = [{"op": _TXN_OPS[type(o)][0], **_TXN_OPS[type(o)][2](self, write, o)} for o in ops]
        return {"succeeded": succeeded, "responses": responses}

    # --- compaction

    def _do_compact(self, write: _Write, op: rq.Compact) -> dict:
        if op.revision <= self._compact:
            raise Compacted(self._compact)
        if op.revision > self._rev:
            raise FutureRevision("required revision is a future revision", revision=op.revision,
                                 current_revision=self._rev)
        for packed in self._index.compact(op.revision):
            self._stage(_rev_key(packed), None)
        self._compact = op.revision
        return {}

    # --- leases

    def _do_lease_grant(self, write: _Write, op: rq.LeaseGrant) -> dict:
        if op.id in self._leases:
            raise LeaseExists("lease already exists", id=op.id)
        self._leases[op.id] = _Lease(op.ttl)
        self._stage(_lease_key(op.id), msgpack.packb([op.ttl]))
        return {"id": op.id, "ttl": op.ttl}

    def _do_lease_revoke(self, write: _Write, op: rq.LeaseRevoke) -> dict:
        lease = self._leases.get(op.id)
        if lease is None:
            raise LeaseNotFound("requested lease not found", id=op.id)
        for key in sorted(lease.keys):  # sorted: sub-revisions must not depend on set order
            self._delete_key(write, key, self._index.latest(key))
        del self._leases[op.id]
        self._stage(_lease_key(op.id), None)
        return {}

    _HANDLERS: dict[type, Callable] = {
        rq.Put: _do_put, rq.Range: _do_range, rq.DeleteRange: _delete, rq.Txn: _do_txn,
        rq.Compact: _do_compact, rq.LeaseGrant: _do_lease_grant, rq.LeaseRevoke: _do_lease_revoke,
    }


def _no_check(store: KVStore, op) -> None:
    return None


# txn op type -> (response "op" name, check before the branch runs, run)
_TXN_OPS: dict[type, tuple[str, Callable, Callable]] = {
    rq.Put: ("put", KVStore._check_put, KVStore._put),
    rq.Range: ("range", KVStore._check_range, KVStore._range_in),
    rq.DeleteRange: ("delete_range", _no_check, KVStore._delete),
}


# ---------------------------------------------------------------------------- request builders

def put_op(key: bytes, value: bytes = b"", lease: int = 0, prev_kv: bool = False,
           ignore_value: bool = False, ignore_lease: bool = False) -> dict:
    req = {"op": "put", "key": key, "value": value}
    for name, val in (("lease", lease), ("prev_kv", prev_kv), ("ignore_value", ignore_value),
                      ("ignore_lease", ignore_lease)):
        if val:
            req[name] = val
    return req


def range_op(key: bytes, range_end: bytes | None = None, revision: int = 0, limit: int = 0,
             count_only: bool = False, keys_only: bool = False) -> dict:
    req = {"op": "range", "key": key}
    for name, val in (("range_end", range_end), ("revision", revision), ("limit", limit),
                      ("count_only", count_only), ("keys_only", keys_only)):
        if val:
            req[name] = val
    return req


def delete_op(key: bytes, range_end: bytes | None = None, prev_kv: bool = False) -> dict:
    req = {"op": "delete_range", "key": key}
    if range_end:
        req["range_end"] = range_end
    if prev_kv:
        req["prev_kv"] = True
    return req


def compare(key: bytes, target: str, result: str, operand, range_end: bytes | None = None) -> dict:
    """A txn compare, e.g. compare(k, "mod_revision", "=", 0): k does not exist."""
    cmp = {"key": key, "target": target, "result": result, target: operand}
    if range_end:
        cmp["range_end"] = range_end
    return cmp


def txn_op(compare: list[dict] = (), success: list[dict] = (), failure: list[dict] = ()) -> dict:
    return {"op": "txn", "compare": list(compare), "success": list(success), "failure": list(failure)}


def compact_op(revision: int) -> dict:
    return {"op": "compact", "revision": revision}


def lease_grant_op(lease_id: int, ttl: int) -> dict:
    return {"op": "lease_grant", "id": lease_id, "ttl": ttl}


def lease_revoke_op(lease_id: int) -> dict:
    return {"op": "lease_revoke", "id": lease_id}
