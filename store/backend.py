"""The storage under the MVCC state machine: a small sorted byte-key store, in memory or LevelDB.

The interface is the least that `store.mvcc.KVStore` needs, and both implementations behave the
same (one parametrized test suite checks them against each other):

    get(key) -> bytes | None
    iterate(start=b"", stop=None, prefix=None, reverse=False) -> iterator of (key, value)
        keys with start <= key < stop (stop None: no upper bound) that begin with `prefix`,
        ascending by unsigned byte order, or descending with reverse=True. The iterator reads a
        snapshot taken when iterate() is called: writes made while it is being consumed are
        not seen (LevelDB iterators work this way; MemoryBackend copies on write to match).
    write(puts, deletes, sync=False)
        applies every delete, then every put (so a key in both ends up put), atomically: after
        a crash either all of the batch is there or none of it. sync=True also waits for the
        disk (fsync) before returning.
    approximate_size() -> int    bytes used, roughly (for status reports)
    close()

`LevelDBBackend` can share one plyvel database with other users (the Raft log) under its own key
prefix: pass an open `plyvel.DB` and a prefix; only a backend that opened the database itself
closes it.

`defragment(db)` rewrites a LevelDB database's files down to its live data (etcd's defragment).

`Disk` is the replica's data disk as the injected faults see it (`store.faults`): every synced
write to the database reports to it (`Disk.synced`), which is where an fsync fails on demand
and where the bytes each fsync covered are noted, so that a power loss can drop the rest.
"""
from __future__ import annotations

import bisect
import errno
import json
import logging
import os
import re
import threading
from typing import Iterable, Iterator

import plyvel

from .faults import DiskMode, truncation_plan

__all__ = ["Backend", "Disk", "FsyncFailed", "LevelDBBackend", "MemoryBackend", "defragment", "is_disk_failure",
           "key_bounds", "next_prefix"]

log = logging.getLogger("store.disk")

Pairs = Iterator[tuple[bytes, bytes]]


def next_prefix(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key that starts with `prefix` (None: no such key,
    the prefix is empty or all 0xff)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def key_bounds(start: bytes, stop: bytes | None, prefix: bytes | None) -> tuple[bytes, bytes | None]:
    """Fold a prefix into [start, stop) bounds; start >= stop means an empty range."""
    if prefix:
        start = max(start, prefix)
        end = next_prefix(prefix)
        if end is not None:
            stop = end if stop is None else min(stop, end)
    return start, stop


def _check_key(key) -> bytes:
    if not isinstance(key, bytes):
        raise TypeError(f"backend keys are bytes, not {type(key).__name__}")
    return key


def _check_pair(pair) -> tuple[bytes, bytes]:
    key, value = pair
    if not isinstance(value, bytes):
        raise TypeError(f"backend values are bytes, not {type(value).__name__}")
    return _check_key(key), value


class Backend:
    """The interface (see the module docstring). Subclasses implement every method."""

    def get(self, key: bytes) -> bytes | None:
        raise NotImplementedError

    def iterate(self, start: bytes = b"", stop: bytes | None = None, prefix: bytes | None = None,
                reverse: bool = False) -> Pairs:
        raise NotImplementedError

    def write(self, puts: Iterable[tuple[bytes, bytes]] = (), deletes: Iterable[bytes] = (),
              sync: bool = False) -> None:
        raise NotImplementedError

    def approximate_size(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MemoryBackend(Backend):
    """A dict plus a sorted key list (bisect). Iterators keep a reference to the current list
    and dict; a write while any iterator is alive copies both first (copy-on-write), so the
    iterator keeps seeing its snapshot, as a LevelDB iterator would."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self._readers = [0]  # live iterators over the current _data/_keys (a cell they share)
        self._closed = False

    def get(self, key: bytes) -> bytes | None:
        self._check_open()
        return self._data.get(_check_key(key))

    def iterate(self, start: bytes = b"", stop: bytes | None = None, prefix: bytes | None = None,
                reverse: bool = False) -> Pairs:
        self._check_open()
        start, stop = key_bounds(_check_key(start), stop, prefix)
        lo = bisect.bisect_left(self._keys, start)
        hi = len(self._keys) if stop is None else bisect.bisect_left(self._keys, stop)
        gen = self._scan(self._keys, self._data, self._readers, lo, max(lo, hi), reverse)
        next(gen)  # run up to the first yield, so the reader count is taken now and always released
        return gen

    @staticmethod
    def _scan(keys: list[bytes], data: dict[bytes, bytes], readers: list[int], lo: int, hi: int,
              reverse: bool) -> Pairs:
        readers[0] += 1
        try:
            yield None  # type: ignore[misc]  # priming step, consumed by iterate()
            positions = range(hi - 1, lo - 1, -1) if reverse else range(lo, hi)
            for i in positions:
                key = keys[i]
                yield key, data[key]
        finally:
            readers[0] -= 1

    def write(self, puts: Iterable[tuple[bytes, bytes]] = (), deletes: Iterable[bytes] = (),
              sync: bool = False) -> None:
        self._check_open()
        # Validate everything before changing anything: the batch is all or nothing.
        deletes = [_check_key(k) for k in deletes]
        puts = [_check_pair(p) for p in puts]
        if self._readers[0]:
            self._data, self._keys, self._readers = dict(self._data), list(self._keys), [0]
        for key in deletes:
            if self._data.pop(key, None) is not None:
                del self._keys[bisect.bisect_left(self._keys, key)]
        for key, value in puts:
            if key not in self._data:
                bisect.insort(self._keys, key)
            self._data[key] = value

    def approximate_size(self) -> int:
        self._check_open()
        return sum(len(k) + len(v) for k, v in self._data.items())

    def close(self) -> None:
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("backend is closed")


class LevelDBBackend(Backend):
    """A plyvel database, or the part of one under `prefix`.

    `path_or_db` is a directory (opened, created if missing, and closed by close()) or an open
    `plyvel.DB` that the caller owns and closes (so the Raft log and the KV state can live in
    one database, under different prefixes)."""

    def __init__(self, path_or_db, prefix: bytes = b"", disk: Disk | None = None) -> None:
        self._disk = disk
        if isinstance(path_or_db, plyvel.DB):
            self._db, self._owned = path_or_db, False
        elif isinstance(path_or_db, (str, bytes, os.PathLike)):
            self._db, self._owned = plyvel.DB(os.fsdecode(path_or_db), create_if_missing=True), True
        else:
            raise TypeError(f"LevelDBBackend needs a path or a plyvel.DB, not {type(path_or_db).__name__}")
        self._prefix = _check_key(prefix)
        self._view = self._db.prefixed_db(prefix)

    @property
    def db(self) -> plyvel.DB:
        return self._db

    def get(self, key: bytes) -> bytes | None:
        return self._view.get(_check_key(key))

    def iterate(self, start: bytes = b"", stop: bytes | None = None, prefix: bytes | None = None,
                reverse: bool = False) -> Pairs:
        start, stop = key_bounds(_check_key(start), stop, prefix)
        if stop is not None and stop <= start:
            return iter(())
        # plyvel refuses prefix= together with start/stop, hence key_bounds.
        if not reverse:
            return self._view.iterator(start=start, stop=stop)
        return self._reverse(self._db.raw_iterator(), start, stop)  # the snapshot is taken now

    def _reverse(self, it, start: bytes, stop: bytes | None) -> Pairs:
        """A reverse scan with LevelDB's own seek/prev: plyvel 1.5's reverse iterator drops
        keys at the low end in some cases (over a prefixed database holding only the key b"",
        iterator(reverse=True) yields nothing)."""
        n = len(self._prefix)
        low = self._prefix + start
        high = self._prefix + stop if stop is not None else next_prefix(self._prefix)
        try:
            if high is None:
                it.seek_to_last()
            else:
                it.seek(high)  # first key >= high, or invalid when there is none
                if it.valid():
                    it.prev()
                else:
                    it.seek_to_last()
            while it.valid():
                key = it.key()
                if key < low:
                    break
                yield key[n:], it.value()
                it.prev()
        finally:
            it.close()

    def write(self, puts: Iterable[tuple[bytes, bytes]] = (), deletes: Iterable[bytes] = (),
              sync: bool = False) -> None:
        deletes = [_check_key(k) for k in deletes]
        puts = [_check_pair(p) for p in puts]
        # transaction=True: an exception inside the block discards the batch instead of writing half
        with self._view.write_batch(transaction=True, sync=sync) as batch:  # one WriteBatch: atomic
            for key in deletes:
                batch.delete(key)
            for key, value in puts:
                batch.put(key, value)
        if sync and self._disk is not None:
            self._disk.synced()

    def approximate_size(self) -> int:
        end = next_prefix(self._prefix)
        return self._db.approximate_size(self._prefix, end if end is not None else b"\xff" * 16)

    def close(self) -> None:
        if self._owned and not self._db.closed:
            self._db.close()


# Below and above every key the store writes (they all begin with printable ASCII prefixes).
_LOWEST, _HIGHEST = b"\x00", b"\xff" * 16


def defragment(db: plyvel.DB) -> None:
    """Rewrite the database's files so they hold only live data: what deletions and
    overwrites hid is dropped. LevelDB drops it only when a compaction merges a file into the
    level below, and its CompactRange merges every level *into* the deepest one that had files
    when it began, never that level's files among themselves, so history that sits alone at
    the bottom (one memtable flushed there, say) would stay. Hence: a first compaction flushes
    the memtable into files; a fence (a put and delete at both ends of the key space, so
    nothing is visible) then lands above the deepest level and overlaps every key, so the
    second one merges every bottom file with it, dropping the dead entries. The range is
    explicit: plyvel's compact_range() without bounds hands LevelDB an empty range.
    Blocking (seconds on a big database); writes and reads may go on meanwhile."""
    db.compact_range(start=_LOWEST, stop=_HIGHEST)
    with db.write_batch() as batch:
        for key in (_LOWEST, _HIGHEST):
            batch.put(key, b"")
            batch.delete(key)
    db.compact_range(start=_LOWEST, stop=_HIGHEST)


class FsyncFailed(OSError):
    """An injected fsync failure (EIO, as Linux reports a failed writeback)."""

    def __init__(self) -> None:
        super().__init__(errno.EIO, "fsync failed (injected disk fault)")


_DISK_ERRNOS = frozenset({errno.EIO, errno.ENOSPC, errno.EROFS, errno.EDQUOT})


def is_disk_failure(exc: BaseException) -> bool:
    """Whether an error from a write to the database is the disk's (LevelDB's own errors, or
    an OSError a disk gives), as opposed to a bug or a timeout."""
    return isinstance(exc, plyvel.Error) or (isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS)


_LOG_FILE = re.compile(r"^\d+\.log$")  # LevelDB's write-ahead logs (its info log is "LOG")
PLAN_FILE = "power-loss.plan"


class Disk:
    """A replica's data disk under injected faults (`store.faults`).

    LevelDB appends every write to its log file and hands it to the kernel at once, so kill -9
    loses nothing (the page cache survives it); a sync write fsyncs that file. A power loss
    keeps of each log file only what an fsync covered: `synced()` notes, after each synced
    write, the log file's size then (one fstat; no cost at all on unsynced writes, and with
    --unsafe-no-fsync there are none). Concurrent unsynced writes that land before the fstat
    count as covered: the kernel may well have written them back, so what is kept is always a
    state a real power loss can leave.

    The loss itself happens when the process is gone: `lose_unsynced()` writes the plan
    (file -> bytes to keep) next to the database and the next start applies it before
    LevelDB opens (`recover`), so no LevelDB thread of the dying process writes after the
    cut. LevelDB replays a log cut at a record boundary as if the later writes never were;
    data it had moved into its table files (which it fsyncs itself) stays, as it would.

    `mode` is the injected disk fault (`DiskMode`): FSYNC_FAIL makes `synced()` raise
    FsyncFailed, FULL is read by the replica (etcd's NOSPACE alarm)."""

    def __init__(self, db_dir: str) -> None:
        self.db_dir = db_dir
        self.mode = DiskMode.OK
        self._synced: dict[str, int] = {}  # log file name -> bytes its last fsync covered
        self._fd: int | None = None  # the current log file, as last seen
        self._name = ""
        self._size = -1
        self._lock = threading.Lock()  # the I/O thread's compactions sync too
        # What is there now was replayed by LevelDB's open into table files, or is empty.
        for name, size in self._log_sizes().items():
            self._synced[name] = size

    def _log_sizes(self) -> dict[str, int]:
        sizes = {}
        with os.scandir(self.db_dir) as it:
            for entry in it:
                if _LOG_FILE.match(entry.name):
                    try:
                        sizes[entry.name] = entry.stat().st_size
                    except FileNotFoundError:
                        pass  # deleted meanwhile (its data is in a table file)
        return sizes

    def synced(self) -> None:
        """Called after each synced write (see the class docstring)."""
        if self.mode is DiskMode.FSYNC_FAIL:
            raise FsyncFailed()
        with self._lock:
            if self._fd is not None:
                size = os.fstat(self._fd).st_size
                if size != self._size:
                    self._size = self._synced[self._name] = size
                    return
            # A synced write always appends to the current log: one that did not grow the
            # file we hold went to a newer one (LevelDB switched logs with its memtable).
            self._reopen()

    def _reopen(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        sizes = self._log_sizes()
        if not sizes:
            return
        self._name = max(sizes, key=lambda n: int(n.split(".")[0]))
        try:
            self._fd = os.open(os.path.join(self.db_dir, self._name), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        self._size = self._synced[self._name] = os.fstat(self._fd).st_size

    def lose_unsynced(self) -> dict[str, int]:
        """Record (durably) what a power loss now drops; the next start drops it. Returns the
        plan (file -> bytes kept, for the files that lose bytes)."""
        with self._lock:
            plan = truncation_plan(self._log_sizes(), self._synced)
        _write_durably(os.path.join(os.path.dirname(self.db_dir), PLAN_FILE), json.dumps(plan).encode())
        return plan

    @staticmethod
    def recover(db_dir: str) -> dict[str, int] | None:
        """Apply a power loss recorded by `lose_unsynced` (before LevelDB opens `db_dir`);
        returns the bytes dropped per file, None when there was none."""
        path = os.path.join(os.path.dirname(db_dir), PLAN_FILE)
        try:
            with open(path, "rb") as f:
                plan = json.loads(f.read() or b"{}")
        except FileNotFoundError:
            return None
        dropped = {}
        for name, keep in plan.items():
            target = os.path.join(db_dir, name)
            try:
                size = os.path.getsize(target)
            except FileNotFoundError:
                continue
            if size > keep:
                os.truncate(target, keep)
                _fsync_path(target)
                dropped[name] = size - keep
        os.unlink(path)
        _fsync_path(os.path.dirname(path))
        log.warning("power loss: dropped what was not synced: %s",
                    ", ".join(f"{n} lost {b} bytes" for n, b in sorted(dropped.items())) or "nothing")
        return dropped

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: str, data: bytes) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_path(os.path.dirname(path))
