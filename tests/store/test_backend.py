"""store/backend.py: MemoryBackend and LevelDBBackend behave the same (one parametrized suite)."""
from __future__ import annotations

import itertools
import os

import plyvel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.backend import LevelDBBackend, MemoryBackend, defragment, key_bounds, next_prefix

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory):
    """One LevelDB for the module; each LevelDB-backed test gets its own prefix in it, which
    also exercises prefix isolation."""
    db = plyvel.DB(str(tmp_path_factory.mktemp("backend") / "db"), create_if_missing=True)
    try:
        yield db
    finally:
        db.close()


def fresh(kind: str, shared_db):
    if kind == "memory":
        return MemoryBackend()
    return LevelDBBackend(shared_db, prefix=b"t%d/" % next(_prefixes))


@pytest.fixture(params=["memory", "leveldb"])
def backend(request, shared_db):
    b = fresh(request.param, shared_db)
    try:
        yield b
    finally:
        b.close()


def fill(backend, keys):
    backend.write([(k, b"v" + k) for k in keys], [])


def keys_of(pairs):
    return [k for k, _ in pairs]


def test_get_put_delete(backend):
    assert backend.get(b"a") is None
    backend.write([(b"a", b"1"), (b"b", b"2")], [])
    assert backend.get(b"a") == b"1"
    backend.write([(b"a", b"3")], [b"b"])
    assert (backend.get(b"a"), backend.get(b"b")) == (b"3", None)
    backend.write([], [b"missing"])  # deleting a missing key is fine
    assert list(backend.iterate()) == [(b"a", b"3")]


def test_delete_then_put_of_one_key_in_one_batch_puts(backend):
    backend.write([(b"k", b"1")], [])
    backend.write([(b"k", b"2")], [b"k"])
    assert backend.get(b"k") == b"2"


def test_iterate_bounds_prefix_reverse(backend):
    fill(backend, [b"a", b"ab", b"abc", b"ac", b"b", b"\xff", b"\xff\xff"])
    assert keys_of(backend.iterate()) == [b"a", b"ab", b"abc", b"ac", b"b", b"\xff", b"\xff\xff"]
    assert keys_of(backend.iterate(b"ab", b"b")) == [b"ab", b"abc", b"ac"]
    assert keys_of(backend.iterate(b"ab", b"b", reverse=True)) == [b"ac", b"abc", b"ab"]
    assert keys_of(backend.iterate(prefix=b"ab")) == [b"ab", b"abc"]
    assert keys_of(backend.iterate(b"abb", prefix=b"ab")) == [b"abc"]
    assert keys_of(backend.iterate(prefix=b"a", stop=b"ac")) == [b"a", b"ab", b"abc"]
    assert keys_of(backend.iterate(prefix=b"\xff")) == [b"\xff", b"\xff\xff"]
    assert keys_of(backend.iterate(prefix=b"\xff", reverse=True)) == [b"\xff\xff", b"\xff"]
    assert keys_of(backend.iterate(b"b", b"a")) == []  # start >= stop: empty
    assert keys_of(backend.iterate(prefix=b"zz")) == []
    assert list(backend.iterate(b"b", b"c")) == [(b"b", b"vb")]


def test_iterator_is_a_snapshot(backend):
    fill(backend, [b"a", b"b", b"c"])
    it = backend.iterate()
    rev = backend.iterate(reverse=True)  # not started yet: the snapshot is still taken at the call
    assert next(it) == (b"a", b"va")
    backend.write([(b"bb", b"new"), (b"c", b"changed")], [b"b"])
    assert list(it) == [(b"b", b"vb"), (b"c", b"vc")]
    assert list(rev) == [(b"c", b"vc"), (b"b", b"vb"), (b"a", b"va")]
    assert list(backend.iterate()) == [(b"a", b"va"), (b"bb", b"new"), (b"c", b"changed")]


def test_bad_types_reject_the_whole_batch(backend):
    backend.write([(b"a", b"1")], [])
    with pytest.raises(TypeError):
        backend.write([(b"b", b"2"), ("c", b"3")], [b"a"])
    with pytest.raises(TypeError):
        backend.write([(b"b", "text")], [])
    with pytest.raises(TypeError):
        backend.get("a")
    assert list(backend.iterate()) == [(b"a", b"1")]


def test_approximate_size_is_an_int(backend):
    fill(backend, [b"k%d" % i for i in range(10)])
    assert isinstance(backend.approximate_size(), int)


def test_next_prefix_and_bounds():
    assert next_prefix(b"a") == b"b"
    assert next_prefix(b"a\xff\xff") == b"b"
    assert next_prefix(b"\xff") is None
    assert next_prefix(b"") is None
    assert key_bounds(b"", None, b"ab") == (b"ab", b"ac")
    assert key_bounds(b"abz", b"ab5", b"ab") == (b"abz", b"ab5")


def test_leveldb_prefixes_share_one_db_in_isolation(tmp_path):
    db = plyvel.DB(str(tmp_path / "db"), create_if_missing=True)
    try:
        raft, kv = LevelDBBackend(db, prefix=b"raft/"), LevelDBBackend(db, prefix=b"kv/")
        raft.write([(b"k", b"raft")], [])
        kv.write([(b"k", b"kv"), (b"z", b"1")], [])
        assert raft.get(b"k") == b"raft" and kv.get(b"k") == b"kv"
        assert list(raft.iterate()) == [(b"k", b"raft")]
        kv.close()  # a backend over a DB it did not open leaves it open
        assert not db.closed
        assert db.get(b"kv/z") == b"1"
    finally:
        db.close()


def test_leveldb_path_is_owned_and_durable(tmp_path):
    b = LevelDBBackend(tmp_path / "db")
    try:
        b.write([(b"a", b"1")], [], sync=True)
    finally:
        b.close()
    assert b.db.closed
    b = LevelDBBackend(str(tmp_path / "db"))
    try:
        assert b.get(b"a") == b"1"
    finally:
        b.close()


def test_leveldb_rejects_other_things():
    with pytest.raises(TypeError):
        LevelDBBackend(42)


# --------------------------------------------------------------------------------- hypothesis

small_keys = st.binary(max_size=3).map(lambda b: bytes(x % 4 * 0x55 for x in b))  # 0x00 0x55 0xaa 0xff
batches = st.lists(st.tuples(st.lists(st.tuples(small_keys, st.binary(max_size=4)), max_size=5),
                             st.lists(small_keys, max_size=3)), max_size=8)
queries = st.tuples(small_keys, st.one_of(st.none(), small_keys), st.one_of(st.none(), small_keys),
                    st.booleans())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches, queries=st.lists(queries, max_size=6))
def test_both_backends_agree_with_a_dict(shared_db, batches, queries):
    mem, ldb = MemoryBackend(), fresh("leveldb", shared_db)
    model: dict[bytes, bytes] = {}
    try:
        for puts, deletes in batches:
            for b in (mem, ldb):
                b.write(puts, deletes)
            for k in deletes:
                model.pop(k, None)
            model.update(puts)
        assert list(mem.iterate()) == list(ldb.iterate()) == sorted(model.items())
        for start, stop, prefix, reverse in queries:
            lo, hi = key_bounds(start, stop, prefix)
            expected = sorted((k, v) for k, v in model.items()
                              if k >= lo and (hi is None or k < hi) and k.startswith(prefix or b""))
            if reverse:
                expected.reverse()
            got = [list(b.iterate(start, stop, prefix, reverse)) for b in (mem, ldb)]
            assert got[0] == got[1] == expected
        for k in {k for puts, _ in batches for k, _ in puts}:
            assert mem.get(k) == ldb.get(k) == model.get(k)
    finally:
        ldb.close()


# --- Disk: injected disk faults under the replica's LevelDB -------------------------------------

def _open_with_disk(data_dir):
    from store.backend import Disk
    db_dir = str(data_dir / "db")
    Disk.recover(db_dir)
    db = plyvel.DB(db_dir, create_if_missing=True)
    return db, Disk(db_dir)


def test_power_loss_drops_exactly_what_no_fsync_covered(tmp_path):
    db, disk = _open_with_disk(tmp_path)
    kv = LevelDBBackend(db, prefix=b"kv/", disk=disk)
    kv.write([(b"before", b"1")])  # unsynced, then covered by the next fsync
    kv.write([(b"synced", b"2")], sync=True)
    kv.write([(b"after-1", b"3")])
    kv.write([(b"after-2", b"4")])
    plan = disk.lose_unsynced()
    assert len(plan) == 1
    db.close()
    disk.close()
    # kill -9 would keep every write (the page cache survives it); the next start applies the loss
    db, disk = _open_with_disk(tmp_path)
    assert [k for k, _ in LevelDBBackend(db, prefix=b"kv/").iterate()] == [b"before", b"synced"]
    assert not (tmp_path / "power-loss.plan").exists()
    db.close()
    disk.close()


def test_power_loss_without_any_fsync_loses_everything_since_the_open(tmp_path):
    db, disk = _open_with_disk(tmp_path)
    LevelDBBackend(db, disk=disk).write([(b"old", b"1")], sync=True)
    db.close()
    disk.close()
    db, disk = _open_with_disk(tmp_path)  # the open moved "old" into a table file
    LevelDBBackend(db, disk=disk).write([(b"new", b"2")])
    disk.lose_unsynced()
    db.close()
    disk.close()
    db, disk = _open_with_disk(tmp_path)
    assert [k for k, _ in LevelDBBackend(db).iterate()] == [b"old"]
    db.close()
    disk.close()


def test_an_injected_fsync_failure_raises_eio(tmp_path):
    import errno

    from store.backend import FsyncFailed
    from store.faults import DiskMode
    db, disk = _open_with_disk(tmp_path)
    kv = LevelDBBackend(db, disk=disk)
    disk.mode = DiskMode.FSYNC_FAIL
    kv.write([(b"a", b"1")])  # no fsync, no failure
    with pytest.raises(FsyncFailed) as info:
        kv.write([(b"b", b"2")], sync=True)
    assert info.value.errno == errno.EIO
    db.close()
    disk.close()


def test_disk_failures_are_told_from_other_errors():
    import errno

    from store.backend import FsyncFailed, is_disk_failure
    assert is_disk_failure(FsyncFailed())
    assert is_disk_failure(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_failure(plyvel.IOError("IO error: db/000005.log: Input/output error"))
    assert not is_disk_failure(TimeoutError())
    assert not is_disk_failure(ConnectionResetError(errno.ECONNRESET, "reset"))
    assert not is_disk_failure(ValueError("bug"))


def _files_size(path) -> int:
    return sum(f.stat().st_size for f in path.iterdir() if f.is_file())


@pytest.mark.parametrize("memtable_bytes", [64 << 20, 1 << 20])
def test_defragment_drops_overwritten_and_deleted_data_and_keeps_the_rest(tmp_path, memtable_bytes):
    # 64 MiB: all the history is in the memtable and lands in one file at the bottom, which
    # LevelDB's CompactRange alone never rewrites; 1 MiB: the history is spread over levels.
    path = tmp_path / "db"
    db = plyvel.DB(str(path), create_if_missing=True, write_buffer_size=memtable_bytes)
    try:
        kv = LevelDBBackend(db, prefix=b"kv/")
        live = {}
        for i in range(400):  # incompressible values: sizes reflect what is kept
            key, value = b"k%d" % (i % 8), os.urandom(16 << 10)
            kv.write(puts=[(key, value)])
            live[key] = value
        kv.write(deletes=[b"k7"])
        del live[b"k7"]
        db.put(b"raft/1", b"entry")
        before = _files_size(path)
        assert before > 6_000_000

        defragment(db)

        assert _files_size(path) < 1_000_000
        assert dict(kv.iterate()) == live
        assert list(db.iterator()) == sorted([*((b"kv/" + k, v) for k, v in live.items()), (b"raft/1", b"entry")])
        kv.write(puts=[(b"k7", b"back")])  # the database goes on as before
        assert kv.get(b"k7") == b"back"
    finally:
        db.close()
