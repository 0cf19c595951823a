"""store.raftlog: Raft's persistent storage in LevelDB."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import plyvel
import pytest

from store.backend import LevelDBBackend
from store.raft import (Config, Entry, EntryKind, HardState, PersistentState, Raft, Ready, Snapshot,
                        SnapshotMeta)
from store.raftlog import CorruptLog, RaftStorage


def E(term: int, index: int, data: bytes = b"") -> Entry:
    return Entry(term, index, EntryKind.NORMAL, data or b"v%d" % index)


@pytest.fixture
def dbpath(tmp_path):
    return str(tmp_path / "db")


def open_storage(path: str) -> tuple[plyvel.DB, RaftStorage]:
    db = plyvel.DB(path, create_if_missing=True)
    return db, RaftStorage(db)


def test_empty(dbpath):
    db, st = open_storage(dbpath)
    assert st.is_empty()
    ps = st.load()
    assert ps.is_empty() and ps.hard_state == HardState() and list(ps.entries) == []
    assert st.save(Ready()) is False and st.fsyncs == 0
    db.close()


def test_round_trip_and_reopen(dbpath):
    db, st = open_storage(dbpath)
    ents = [E(1, i) for i in range(1, 6)]
    assert st.save(Ready(hard_state=HardState(1, "a", 3), entries=ents))
    ps = st.load(applied=2)
    assert list(ps.entries) == ents and ps.hard_state == HardState(1, "a", 3) and ps.applied == 2
    assert (st.first_index, st.last_index) == (1, 5)
    db.close()
    db, st = open_storage(dbpath)  # everything is back after a reopen
    assert not st.is_empty()
    assert (st.first_index, st.last_index) == (1, 5)
    assert list(st.load().entries) == ents and st.load().hard_state == HardState(1, "a", 3)
    assert st.entry(3) == ents[2] and st.entry(9) is None
    db.close()


def test_fsync_once_per_ready(dbpath):
    db, st = open_storage(dbpath)
    for n in range(1, 11):
        batch = [E(1, i) for i in range((n - 1) * 50 + 1, n * 50 + 1)]
        st.save(Ready(hard_state=HardState(1, None, n), entries=batch))
        assert st.fsyncs == n  # 50 entries and a hard state: one fsync
    st.save(Ready(messages=[]))  # nothing to persist: no write, no fsync
    assert st.fsyncs == 10 and st.entries_written == 500
    db.close()


def test_commit_only_change_is_written_without_fsync(dbpath):
    db, st = open_storage(dbpath)
    st.save(Ready(hard_state=HardState(2, "b", 0), entries=[E(2, 1), E(2, 2)]))
    assert st.fsyncs == 1
    rd = Ready(hard_state=HardState(2, "b", 2))  # like etcd's MustSync: commit is volatile
    assert not st.needs_sync(rd)
    assert st.save(rd) is False and st.fsyncs == 1 and st.unsynced_writes == 1
    assert st.load().hard_state == HardState(2, "b", 2)
    for hs in (HardState(3, None, 2), HardState(2, "c", 2)):  # a new term or vote must be synced
        assert st.needs_sync(Ready(hard_state=hs))
    assert st.needs_sync(Ready(entries=[E(2, 3)]))
    assert st.save(Ready(hard_state=HardState(3, None, 2))) is True and st.fsyncs == 2
    db.close()
    db, st = open_storage(dbpath)  # the last persisted term/vote is known after a reopen
    assert not st.needs_sync(Ready(hard_state=HardState(3, None, 5)))
    db.close()


def test_unsafe_no_fsync_writes_the_same_but_never_syncs(dbpath):
    db = plyvel.DB(dbpath, create_if_missing=True)
    st = RaftStorage(db, fsync=False)
    assert st.save(Ready(hard_state=HardState(2, "b", 0), entries=[E(2, 1), E(2, 2)])) is False
    st.compact(SnapshotMeta(1, 2, ("a",)))
    assert st.fsyncs == 0 and st.unsynced_writes == 1
    ps = st.load(applied=1)
    assert ps.hard_state == HardState(2, "b", 0) and [e.index for e in ps.entries] == [2]
    db.close()


def test_truncation_of_conflicting_suffix(dbpath):
    db, st = open_storage(dbpath)
    st.save(Ready(entries=[E(1, i) for i in range(1, 8)]))
    # A new leader overwrites from index 4 with a shorter suffix: 5..7 must go too.
    new = [E(2, 4, b"x"), E(2, 5, b"y")]
    st.save(Ready(entries=new, hard_state=HardState(2, None, 3)))
    ents = list(st.load().entries)
    assert [e.index for e in ents] == [1, 2, 3, 4, 5]
    assert ents[3:] == new and st.last_index == 5
    db.close()
    db, st = open_storage(dbpath)
    assert st.last_index == 5 and [e.term for e in st.load().entries] == [1, 1, 1, 2, 2]
    with pytest.raises(CorruptLog):  # a gap would break the invariant
        st.save(Ready(entries=[E(2, 9)]))
    db.close()


def test_snapshot_from_leader_replaces_log(dbpath):
    db, st = open_storage(dbpath)
    st.save(Ready(entries=[E(1, i) for i in range(1, 4)], hard_state=HardState(1, None, 2)))
    snap = Snapshot(SnapshotMeta(10, 3, ("a", "b", "c")), b"state@10")
    st.save(Ready(snapshot=snap, entries=[E(3, 11)], hard_state=HardState(3, None, 10)))
    ps = st.load(applied=10)
    assert ps.snapshot_meta == snap.meta and ps.snapshot_data == b"state@10"
    assert list(ps.entries) == [E(3, 11)]
    assert (st.first_index, st.last_index, st.snapshot_index) == (11, 11, 10)
    assert st.entry(2) is None
    db.close()


def test_compaction_deletes_covered_entries(dbpath):
    db, st = open_storage(dbpath)
    st.save(Ready(entries=[E(1, i) for i in range(1, 21)], hard_state=HardState(1, None, 20)))
    before = st.fsyncs
    meta = SnapshotMeta(15, 1, ("a",))
    assert st.compact(meta, [(b"members", b"m")]) == 15
    assert st.fsyncs == before + 1
    assert st.get_meta(b"members") == b"m"
    ps = st.load(applied=15)
    assert ps.snapshot_meta == meta and ps.snapshot_data is None  # the state machine has it
    assert [e.index for e in ps.entries] == list(range(16, 21))
    db.close()
    db, st = open_storage(dbpath)
    assert (st.first_index, st.last_index, st.snapshot_index) == (16, 20, 15)
    # The persisted state restarts a Raft node at the right place.
    r = Raft("a", [], st.load(applied=15), Config())
    assert (r.log.snap_index, r.last_index, r.commit_index, r.applied) == (15, 20, 20, 15)
    with pytest.raises(ValueError):
        st.compact(SnapshotMeta(10, 1, ("a",)))
    db.close()


def test_compaction_drops_the_data_of_a_snapshot_received_earlier(dbpath):
    db, st = open_storage(dbpath)
    snap = Snapshot(SnapshotMeta(10, 3, ("a", "b", "c")), b"state@10")
    st.save(Ready(snapshot=snap, entries=[E(3, i) for i in range(11, 21)], hard_state=HardState(3, None, 20)))
    assert st.load(applied=10).snapshot_data == b"state@10"  # kept until the state machine has moved on
    st.compact(SnapshotMeta(15, 3, ("a", "b", "c")))
    ps = st.load(applied=20)
    assert ps.snapshot_meta.index == 15 and ps.snapshot_data is None
    assert [e.index for e in ps.entries] == list(range(16, 21))
    db.close()


def test_raft_bootstrap_state_round_trip(dbpath):
    db, st = open_storage(dbpath)
    r = Raft("a", ["a", "b", "c"], None, Config())
    rd = r.ready()
    st.save(rd)
    r.advance(rd)
    r2 = Raft("a", ["a", "b", "c"], st.load(), Config())
    assert r2.voters == ("a", "b", "c") and r2.last_index == 3 and r2.commit_index == 3
    db.close()


def test_shares_one_db_with_the_kv_backend(dbpath):
    db, st = open_storage(dbpath)
    kv = LevelDBBackend(db, prefix=b"kv/")
    kv.write([(b"e/\0\0\0\0\0\0\0\1", b"not an entry")])  # same key, other prefix: no clash
    st.save(Ready(entries=[E(1, 1)]))
    assert list(st.load().entries) == [E(1, 1)]
    assert kv.get(b"e/\0\0\0\0\0\0\0\1") == b"not an entry"
    kv.close()  # does not close a db it does not own
    assert not db.closed
    db.close()


CRASHER = textwrap.dedent("""
    import os, sys, plyvel
    from store.raft import Entry, HardState, Ready
    from store.raftlog import RaftStorage
    from store.backend import LevelDBBackend
    db = plyvel.DB(sys.argv[1], create_if_missing=True)
    st = RaftStorage(db)
    kv = LevelDBBackend(db, prefix=b"kv/")
    n = int(sys.argv[2])
    for i in range(1, n + 1):
        kv.write([(b"applied", str(i - 1).encode())])  # unsynced, before the synced log write
        st.save(Ready(entries=[Entry(1, i, data=b"x" * 100)], hard_state=HardState(1, None, i)))
    sys.stdout.write("done\\n"); sys.stdout.flush()
    os.kill(os.getpid(), 9)
""")


def test_crash_consistency_after_kill_9(dbpath):
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    out = subprocess.run([sys.executable, "-c", CRASHER, dbpath, "300"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.stdout == "done\n" and out.returncode == -9
    db, st = open_storage(dbpath)
    ps = st.load()
    assert [e.index for e in ps.entries] == list(range(1, 301))
    assert ps.hard_state == HardState(1, None, 300)
    # the unsynced KV write made before the last synced log write is durable too (one WAL)
    assert LevelDBBackend(db, prefix=b"kv/").get(b"applied") == b"299"
    db.close()


def test_load_rejects_a_gap(dbpath):
    db, st = open_storage(dbpath)
    st.save(Ready(entries=[E(1, i) for i in range(1, 4)]))
    db.delete(b"raft/e/" + (2).to_bytes(8, "big"))
    with pytest.raises(CorruptLog):
        st.load()
    db.close()


def test_persistent_state_type(dbpath):
    db, st = open_storage(dbpath)
    assert isinstance(st.load(), PersistentState)
    db.close()
