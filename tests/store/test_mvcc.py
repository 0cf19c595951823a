"""store/mvcc.py: the key-value state machine with etcd v3 semantics, over both backends."""
from __future__ import annotations

import itertools
import operator

import msgpack
import plyvel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.backend import LevelDBBackend, MemoryBackend
from store.mvcc import (APPLIED, DELETE, MAX_REQUEST_BYTES, PUT, Compacted, DuplicateKey, Event, FutureRevision,
                        InvalidRequest, KeyNotFound, KVStore, LeaseClock, LeaseExists, LeaseNotFound,
                        StoreError, TooLarge, check_request_size, compact_op, compare, delete_op,
                        lease_grant_op, lease_revoke_op, prefix_end, put_op, range_op, txn_op)

ALL = b"\0"  # as range_end: every key >= key


class Harness:
    """A KVStore fed one Raft entry per request, with consecutive indexes."""

    def __init__(self, store: KVStore) -> None:
        self.store = store
        self.index = store.applied_index
        self.events: list[Event] = []

    def apply(self, req):
        self.index += 1
        return self.store.apply(self.index, req)

    def ok(self, req) -> dict:
        resp, self.events = self.apply(req)
        if isinstance(resp, StoreError):
            raise resp
        return resp

    def err(self, req) -> StoreError:
        resp, events = self.apply(req)
        assert isinstance(resp, StoreError), resp
        assert events == []
        return resp

    def get(self, key: bytes, revision: int = 0) -> dict | None:
        kvs = self.store.range(key, revision=revision)["kvs"]
        return kvs[0] if kvs else None

    def keys(self, key: bytes = b"\0", range_end: bytes | None = ALL, **kw) -> list[bytes]:
        return [kv["key"] for kv in self.store.range(key, range_end, **kw)["kvs"]]

    @property
    def rev(self) -> int:
        return self.store.revision


@pytest.fixture(params=["memory", "leveldb"])
def open_backend(request, tmp_path):
    """A factory of backends: memory ones are fresh, LevelDB ones reopen the same directory."""
    opened = []

    def make():
        b = MemoryBackend() if request.param == "memory" else LevelDBBackend(tmp_path / "db")
        opened.append(b)
        return b
    try:
        yield make
    finally:
        for b in opened:
            b.close()


@pytest.fixture
def h(open_backend) -> Harness:
    return Harness(KVStore(open_backend()))


@pytest.fixture(scope="module")
def shared_db(tmp_path_factory):
    db = plyvel.DB(str(tmp_path_factory.mktemp("mvcc") / "db"), create_if_missing=True)
    try:
        yield db
    finally:
        db.close()


_prefixes = itertools.count()


def fresh_backend(kind: str, shared_db):
    return MemoryBackend() if kind == "memory" else LevelDBBackend(shared_db, prefix=b"p%d/" % next(_prefixes))


def kv(key, value, create, mod, version, lease=0) -> dict:
    return {"key": key, "value": value, "create_revision": create, "mod_revision": mod,
            "version": version, "lease": lease}


# ------------------------------------------------------------------------- revisions, bookkeeping

def test_empty_store_is_at_revision_1(h):
    assert h.rev == 1
    assert h.store.status()["revision"] == 1 and h.store.status()["applied_index"] == 0
    assert h.store.range(b"a") == {"header": {"revision": 1}, "kvs": [], "count": 0, "more": False}


def test_revision_bumps_once_per_changing_request(h):
    assert h.ok(put_op(b"a", b"1"))["header"]["revision"] == 2
    r = h.ok(txn_op(success=[put_op(b"b", b"1"), put_op(b"c", b"1"), delete_op(b"a")]))
    assert r["header"]["revision"] == 3 and h.rev == 3
    assert [e.kv["mod_revision"] for e in h.events] == [3, 3, 3]
    assert h.ok(delete_op(b"missing")) == {"header": {"revision": 3}, "deleted": 0}
    assert h.events == []
    assert h.ok(txn_op(success=[range_op(b"b")]))["header"]["revision"] == 3  # reads only
    assert h.ok(lease_grant_op(5, 10))["header"]["revision"] == 3  # grants change no key
    assert h.ok(delete_op(b"b"))["header"]["revision"] == 4


def test_key_bookkeeping_through_put_delete_reput(h):
    h.ok(lease_grant_op(9, 60))
    h.ok(put_op(b"k", b"1"))                              # rev 2
    assert h.get(b"k") == kv(b"k", b"1", 2, 2, 1)
    h.ok(put_op(b"other", b"x"))                          # rev 3
    h.ok(put_op(b"k", b"2", lease=9))                     # rev 4
    assert h.get(b"k") == kv(b"k", b"2", 2, 4, 2, lease=9)
    assert h.ok(delete_op(b"k"))["deleted"] == 1          # rev 5
    assert h.get(b"k") is None
    assert h.events == [Event(DELETE, kv(b"k", b"", 0, 5, 0), kv(b"k", b"2", 2, 4, 2, lease=9))]
    h.ok(put_op(b"k", b"3"))                              # rev 6: a new generation
    assert h.get(b"k") == kv(b"k", b"3", 6, 6, 1)
    assert h.events == [Event(PUT, kv(b"k", b"3", 6, 6, 1), None)]


def test_put_prev_kv_ignore_value_ignore_lease(h):
    h.ok(lease_grant_op(3, 60))
    assert "prev_kv" not in h.ok(put_op(b"k", b"v1", lease=3, prev_kv=True))
    r = h.ok(put_op(b"k", b"v2", prev_kv=True, ignore_lease=True))
    assert r["prev_kv"] == kv(b"k", b"v1", 2, 2, 1, lease=3)
    assert h.get(b"k") == kv(b"k", b"v2", 2, 3, 2, lease=3)
    h.ok(put_op(b"k", ignore_value=True))
    assert h.get(b"k") == kv(b"k", b"v2", 2, 4, 3, lease=0)
    assert isinstance(h.err(put_op(b"nope", ignore_value=True)), KeyNotFound)
    assert h.err(put_op(b"k", b"x", ignore_value=True)).details == {"field": "value"}
    assert h.err(put_op(b"k", lease=3, ignore_lease=True)).details == {"field": "lease"}


# ----------------------------------------------------------------------------------------- range

@pytest.fixture
def abc(h) -> Harness:
    for key in (b"a", b"ab", b"abc", b"b", b"c\xff", b"d"):
        h.ok(put_op(key, b"v-" + key))
    return h  # revisions 2..7


def test_range_single_prefix_interval_and_from_key(abc):
    h = abc
    assert h.keys(b"ab", None) == [b"ab"]
    assert h.keys(b"zz", None) == []
    assert h.keys(b"a", prefix_end(b"a")) == [b"a", b"ab", b"abc"]
    assert h.keys(b"ab", b"c") == [b"ab", b"abc", b"b"]
    assert h.keys(b"b", ALL) == [b"b", b"c\xff", b"d"]
    assert h.keys(b"\0", ALL) == [b"a", b"ab", b"abc", b"b", b"c\xff", b"d"]
    assert h.keys(b"c", b"a") == []  # range_end <= key: nothing
    assert h.keys(b"c\xff", prefix_end(b"c\xff")) == [b"c\xff"]


def test_single_key_reads_see_that_key_alone_at_the_revision_asked(h):
    # A single-key range [k, k+"\0") is answered by a lookup of k, not a scan: it must still
    # see neither its neighbours (k+"\0" is the very next key) nor a later version of k.
    h.ok(put_op(b"a\0", b"next"))  # 2
    h.ok(put_op(b"a\0\0", b"after"))  # 3
    assert h.keys(b"a", None) == [] and h.keys(b"a", b"a\0") == []
    assert h.ok(txn_op([compare(b"a", "mod_revision", "=", 0)]))["succeeded"] is True
    h.ok(put_op(b"a", b"v1"))  # 4
    h.ok(put_op(b"a", b"v2"))  # 5
    assert h.keys(b"a", None) == [b"a"] and h.keys(b"a\0", None) == [b"a\0"]
    assert h.get(b"a", revision=4)["value"] == b"v1" and h.get(b"a", revision=3) is None
    r = h.ok(txn_op(success=[range_op(b"a", revision=4), range_op(b"a", b"a\0")]))
    assert [kv["value"] for kv in r["responses"][0]["kvs"]] == [b"v1"]
    assert [kv["value"] for kv in r["responses"][1]["kvs"]] == [b"v2"]
    assert h.ok(txn_op([compare(b"a", "mod_revision", "=", 5)]))["succeeded"] is True
    h.ok(delete_op(b"a"))  # 6
    assert h.keys(b"a", None) == [] and h.get(b"a", revision=5)["value"] == b"v2"
    assert h.ok(txn_op([compare(b"a", "version", "=", 0)]))["succeeded"] is True


def test_prefix_end():
    assert prefix_end(b"a") == b"b"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") == b"\0"
    assert prefix_end(b"") == b"\0"


def test_range_limit_count_only_keys_only(abc):
    r = abc.store.range(b"a", ALL, limit=2)
    assert [x["key"] for x in r["kvs"]] == [b"a", b"ab"] and r["count"] == 6 and r["more"] is True
    r = abc.store.range(b"a", ALL, limit=6)
    assert len(r["kvs"]) == 6 and r["more"] is False
    r = abc.store.range(b"a", prefix_end(b"a"), count_only=True)
    assert r == {"header": {"revision": 7}, "kvs": [], "count": 3, "more": False}
    r = abc.store.range(b"ab", keys_only=True)
    assert r["kvs"] == [kv(b"ab", b"", 3, 3, 1)]


def test_range_at_past_revisions(h):
    h.ok(put_op(b"k", b"1"))   # 2
    h.ok(put_op(b"k", b"2"))   # 3
    h.ok(delete_op(b"k"))      # 4
    h.ok(put_op(b"j", b"1"))   # 5
    assert h.get(b"k", revision=1) is None
    assert h.get(b"k", revision=2) == kv(b"k", b"1", 2, 2, 1)
    assert h.get(b"k", revision=3) == kv(b"k", b"2", 2, 3, 2)
    assert h.get(b"k", revision=4) is None  # deleted, but...
    assert h.keys(revision=3) == [b"k"]     # ...visible in the past
    assert h.keys(revision=5) == [b"j"]
    r = h.store.range(b"k", revision=3)
    assert r["header"]["revision"] == 5  # the header is always the current revision
    err = pytest.raises(FutureRevision, h.store.range, b"k", revision=6).value
    assert err.code == "FutureRevision"
    h.ok(compact_op(3))
    assert h.get(b"k", revision=3) == kv(b"k", b"2", 2, 3, 2)  # the compact revision itself is readable
    err = pytest.raises(Compacted, h.store.range, b"k", revision=2).value
    assert err.compact_revision == 3 and err.code == "Compacted"
    assert isinstance(h.err(range_op(b"k", revision=2)), Compacted)


def test_range_request_through_apply(abc):
    r = abc.ok(range_op(b"a", prefix_end(b"a"), limit=1))
    assert r == {"header": {"revision": 7}, "kvs": [kv(b"a", b"v-a", 2, 2, 1)], "count": 3, "more": True}
    assert abc.events == []


def test_range_arguments_are_validated(h):
    with pytest.raises(InvalidRequest):
        h.store.range("text")
    with pytest.raises(InvalidRequest):
        h.store.range(b"")  # etcd: key is not provided
    with pytest.raises(InvalidRequest):
        h.store.range(b"a", limit=-1)


# ------------------------------------------------------------------------------------------- txn

OPS = {"=": operator.eq, "!=": operator.ne, "<": operator.lt, ">": operator.gt}
TARGETS = ["value", "version", "create_revision", "mod_revision", "lease"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("result", list(OPS))
def test_txn_compare_every_target_and_operator(h, target, result):
    h.ok(lease_grant_op(7, 60))
    h.ok(put_op(b"k", b"x", lease=7))         # rev 2
    h.ok(put_op(b"k", b"m", lease=7))         # rev 3
    actual = {"value": b"m", "version": 2, "create_revision": 2, "mod_revision": 3, "lease": 7}[target]
    operands = [b"a", b"m", b"z"] if target == "value" else [actual - 1, actual, actual + 1]
    for operand in operands:
        r = h.ok(txn_op([compare(b"k", target, result, operand)], [range_op(b"k")], [range_op(b"nope")]))
        assert r["succeeded"] is OPS[result](actual, operand), (target, result, operand)
    # A missing key compares as zero on every number, and fails every compare on its value.
    for operand in ([b"", b"a"] if target == "value" else [-1, 0, 1]):
        r = h.ok(txn_op([compare(b"missing", target, result, operand)]))
        expected = False if target == "value" else OPS[result](0, operand)
        assert r["succeeded"] is expected, (target, result, operand)


def test_txn_branches_and_one_revision(h):
    h.ok(put_op(b"k", b"v"))  # 2
    cond = [compare(b"k", "value", "=", b"v"), compare(b"k", "version", "=", 1)]
    r = h.ok(txn_op(cond, success=[put_op(b"s1", b"1"), put_op(b"s2", b"2"), delete_op(b"k", prev_kv=True)],
                    failure=[put_op(b"f", b"1")]))
    assert r["succeeded"] is True and r["header"] == {"revision": 3}
    assert [x["op"] for x in r["responses"]] == ["put", "put", "delete_range"]
    assert r["responses"][2]["prev_kvs"] == [kv(b"k", b"v", 2, 2, 1)]
    assert all(x["header"] == {"revision": 3} for x in r["responses"])
    assert h.keys() == [b"s1", b"s2"]
    assert [(e.type, e.kv["key"], e.kv["mod_revision"]) for e in h.events] == \
        [(PUT, b"s1", 3), (PUT, b"s2", 3), (DELETE, b"k", 3)]
    r = h.ok(txn_op(cond, success=[put_op(b"s3", b"1")], failure=[put_op(b"f", b"1")]))
    assert r["succeeded"] is False and h.keys() == [b"f", b"s1", b"s2"] and h.rev == 4
    assert h.ok(txn_op())["succeeded"] is True  # no compares: success


def test_txn_compare_over_a_range_needs_every_key(h):
    h.ok(put_op(b"p/a", b"1"))
    h.ok(put_op(b"p/b", b"1"))
    h.ok(put_op(b"p/b", b"2"))
    end = prefix_end(b"p/")
    assert h.ok(txn_op([compare(b"p/", "version", ">", 0, range_end=end)]))["succeeded"] is True
    assert h.ok(txn_op([compare(b"p/", "version", "=", 1, range_end=end)]))["succeeded"] is False
    assert h.ok(txn_op([compare(b"q/", "version", "=", 0, range_end=prefix_end(b"q/"))]))["succeeded"] is True


def test_txn_reads_its_own_writes(h):
    h.ok(put_op(b"a", b"old"))  # 2
    r = h.ok(txn_op(success=[put_op(b"a", b"new"), range_op(b"a"), delete_op(b"b", ALL),
                             range_op(b"a", ALL, count_only=True), range_op(b"a", revision=2)]))
    assert r["responses"][1]["kvs"] == [kv(b"a", b"new", 2, 3, 2)]
    assert r["responses"][3]["count"] == 1
    assert r["responses"][4]["kvs"] == [kv(b"a", b"old", 2, 2, 1)]


def test_txn_duplicate_keys_are_refused(h):
    for ops in ([put_op(b"a"), put_op(b"a")], [put_op(b"b"), delete_op(b"a", b"c")],
                [delete_op(b"a", ALL), put_op(b"z")]):
        assert isinstance(h.err(txn_op(success=ops)), DuplicateKey)
        assert isinstance(h.err(txn_op(failure=ops)), DuplicateKey)  # either branch, as etcd
    h.ok(txn_op(success=[delete_op(b"a", b"c"), delete_op(b"b")]))  # overlapping deletes are fine
    assert h.rev == 1


def test_txn_checks_the_chosen_branch_before_running_it(h):
    h.ok(put_op(b"a", b"1"))
    h.ok(put_op(b"a", b"2"))
    h.ok(compact_op(3))
    bad_lease = txn_op(success=[put_op(b"x", b"1"), put_op(b"y", b"1", lease=99)])
    assert isinstance(h.err(bad_lease), LeaseNotFound)
    assert isinstance(h.err(txn_op(success=[put_op(b"x", b"1"), range_op(b"a", revision=2)])), Compacted)
    assert isinstance(h.err(txn_op(success=[put_op(b"x", b"1"), range_op(b"a", revision=9)])), FutureRevision)
    assert h.keys() == [b"a"] and h.rev == 3
    # The branch not taken is not checked against the state.
    r = h.ok(txn_op([compare(b"a", "version", "=", 2)], success=[put_op(b"x", b"1")],
                    failure=[put_op(b"y", b"1", lease=99)]))
    assert r["succeeded"] is True


# ------------------------------------------------------------------------------------ compaction

def test_compaction_keeps_latest_versions_and_drops_tombstones(h):
    h.ok(put_op(b"a", b"1"))    # 2
    h.ok(put_op(b"a", b"2"))    # 3
    h.ok(put_op(b"b", b"1"))    # 4
    h.ok(delete_op(b"b"))       # 5
    h.ok(put_op(b"c", b"1"))    # 6
    h.ok(put_op(b"a", b"3"))    # 7
    records_before = sum(1 for _ in h.store.backend.iterate(prefix=b"r/"))
    assert h.ok(compact_op(6)) == {"header": {"revision": 7}}
    assert h.rev == 7 and h.store.compact_revision == 6
    # Kept: a@3 (latest of a at 6), c@6, a@7. Dropped: a@2, b@4, the tombstone b@5.
    assert sum(1 for _ in h.store.backend.iterate(prefix=b"r/")) == records_before - 3 == 3
    assert h.store.range(b"\0", ALL, revision=6)["kvs"] == [kv(b"a", b"2", 2, 3, 2), kv(b"c", b"1", 6, 6, 1)]
    assert h.keys() == [b"a", b"c"]
    assert h.get(b"a") == kv(b"a", b"3", 2, 7, 3)  # versions continue after compaction
    with pytest.raises(Compacted):
        h.store.range(b"a", revision=5)
    err = pytest.raises(Compacted, h.store.events, 6).value
    assert err.compact_revision == 6
    assert [e.kv["mod_revision"] for e in h.store.events(7)] == [7]
    assert h.store.status()["keys"] == 2


def test_compact_to_compacted_or_future_revision_fails(h):
    h.ok(put_op(b"a", b"1"))
    h.ok(put_op(b"a", b"2"))
    assert isinstance(h.err(compact_op(4)), FutureRevision)
    h.ok(compact_op(3))  # compacting to the current revision is allowed
    err = h.err(compact_op(3))
    assert isinstance(err, Compacted) and err.compact_revision == 3
    assert isinstance(h.err(compact_op(2)), Compacted)
    assert h.err(compact_op(0)).details["field"] == "revision"


# ---------------------------------------------------------------------------------------- leases

def test_lease_grant_attach_move_and_revoke(h):
    assert h.ok(lease_grant_op(1, 30)) == {"header": {"revision": 1}, "id": 1, "ttl": 30}
    h.ok(lease_grant_op(2, 60))
    h.ok(put_op(b"a", b"1", lease=1))            # 2
    h.ok(put_op(b"b", b"1", lease=1))            # 3
    h.ok(put_op(b"c", b"1", lease=1))            # 4
    h.ok(put_op(b"free", b"1"))                  # 5
    h.ok(put_op(b"c", b"2", lease=2))            # 6: c moves to lease 2
    h.ok(put_op(b"d", b"1", lease=2))            # 7
    h.ok(delete_op(b"d"))                        # 8: a deleted key leaves its lease
    assert h.store.leases() == [(1, 30, [b"a", b"b"]), (2, 60, [b"c"])]
    assert h.ok(lease_revoke_op(1)) == {"header": {"revision": 9}}
    assert [(e.type, e.kv["key"], e.kv["mod_revision"], e.prev_kv["value"]) for e in h.events] == \
        [(DELETE, b"a", 9, b"1"), (DELETE, b"b", 9, b"1")]
    assert h.keys() == [b"c", b"free"]
    assert h.store.leases() == [(2, 60, [b"c"])]
    h.ok(put_op(b"c", b"3"))  # back to no lease
    assert h.store.leases() == [(2, 60, [])]
    assert h.ok(lease_revoke_op(2)) == {"header": {"revision": 10}}  # no keys: no new revision


def test_lease_errors(h):
    h.ok(lease_grant_op(1, 30))
    assert isinstance(h.err(lease_grant_op(1, 30)), LeaseExists)
    err = h.err(put_op(b"a", b"1", lease=42))
    assert isinstance(err, LeaseNotFound) and err.code == "LeaseNotFound"
    assert h.keys() == [] and h.rev == 1
    assert isinstance(h.err(lease_revoke_op(42)), LeaseNotFound)
    assert h.err(lease_grant_op(0, 30)).details["field"] == "id"  # the leader picks a non-zero id
    assert h.err(lease_grant_op(5, 0)).details["field"] == "ttl"


def test_lease_clock_expiry_and_leader_change():
    clock = LeaseClock()
    clock.grant(1, 10, now=100.0)
    clock.grant(2, 5, now=100.0)
    clock.grant(3, 10, now=101.0)
    assert clock.expired(104.9) == []
    assert clock.expired(105.0) == [2]
    assert clock.remaining(1, 104.0) == 6.0
    assert clock.refresh(1, now=109.0) == 10  # keepalive: a full TTL from now
    assert clock.expired(112.0) == [2, 3]     # soonest first
    clock.revoke(2)
    assert clock.expired(112.0) == [3] and clock.remaining(3, 112.0) == 0.0
    with pytest.raises(LeaseNotFound):
        clock.refresh(2, 112.0)
    with pytest.raises(LeaseNotFound):
        clock.remaining(2, 112.0)
    # A new leader knows nothing of the old one's keepalives: every lease gets a full TTL.
    clock.on_become_leader(200.0)
    assert clock.expired(209.0) == [] and clock.expired(210.0) == [1, 3]
    clock.on_become_leader(300.0, leases=[(1, 10, [b"k"]), (4, 2, [])])  # resync with the store
    assert 3 not in clock and len(clock) == 2
    assert clock.expired(302.0) == [4] and clock.remaining(1, 302.0) == 8.0


# ---------------------------------------------------------------------------------------- events

def test_events_are_ordered_filtered_and_carry_prev_kv(h):
    h.ok(put_op(b"p/a", b"1"))                                           # 2
    h.ok(txn_op(success=[put_op(b"p/b", b"1"), put_op(b"q", b"1")]))    # 3
    h.ok(put_op(b"p/a", b"2"))                                           # 4
    h.ok(delete_op(b"p/", prefix_end(b"p/")))                            # 5: p/a then p/b
    everything = list(h.store.events(1, prev_kv=True))
    assert [(e.type, e.kv["key"], e.kv["mod_revision"]) for e in everything] == [
        (PUT, b"p/a", 2), (PUT, b"p/b", 3), (PUT, b"q", 3), (PUT, b"p/a", 4),
        (DELETE, b"p/a", 5), (DELETE, b"p/b", 5)]
    assert everything[3].prev_kv == kv(b"p/a", b"1", 2, 2, 1)
    assert everything[4].prev_kv == kv(b"p/a", b"2", 2, 4, 2)
    assert everything[4].kv == kv(b"p/a", b"", 0, 5, 0)
    assert everything[0].prev_kv is None
    assert [e.prev_kv for e in h.store.events(1)] == [None] * 6  # only when asked
    prefixed = list(h.store.events(3, b"p/", prefix_end(b"p/"), prev_kv=True))
    assert [(e.kv["key"], e.kv["mod_revision"]) for e in prefixed] == \
        [(b"p/b", 3), (b"p/a", 4), (b"p/a", 5), (b"p/b", 5)]
    assert [e.kv["mod_revision"] for e in h.store.events(4, b"q")] == []
    assert list(h.store.events(6)) == []  # the future: nothing yet


def test_events_match_what_apply_returned(h):
    returned = []
    for req in (put_op(b"a", b"1"), put_op(b"b", b"1"), put_op(b"a", b"2"),
                txn_op(success=[delete_op(b"a"), put_op(b"c", b"1")]), delete_op(b"b")):
        h.ok(req)
        returned += h.events
    assert list(h.store.events(1, prev_kv=True)) == returned


def test_event_stream_is_cancelled_by_a_compaction(h):
    for i in range(4):
        h.ok(put_op(b"k", b"%d" % i))  # 2..5
    stream = h.store.events(2)
    assert next(stream).kv["mod_revision"] == 2
    h.ok(compact_op(4))
    err = pytest.raises(Compacted, next, stream).value
    assert err.compact_revision == 4
    h.ok(put_op(b"k", b"x"))  # 6
    ahead = h.store.events(5, prev_kv=True)
    assert next(ahead).kv["mod_revision"] == 5
    h.ok(compact_op(5))  # behind the stream's position: it goes on
    assert next(ahead).prev_kv == kv(b"k", b"3", 2, 5, 4)


def test_event_wire_round_trip():
    e = Event(PUT, kv(b"k", b"v", 2, 3, 2), None)
    assert Event.from_wire(msgpack.unpackb(msgpack.packb(e.to_wire()))) == e
    assert e.revision == 3


# ------------------------------------------------------------------------- durability, recovery

def plain_status(store: KVStore) -> dict:
    return {k: v for k, v in store.status().items() if k != "db_size"}  # db_size is approximate


def story() -> list[dict]:
    """A little of everything."""
    return [
        lease_grant_op(11, 30), put_op(b"a", b"1"), put_op(b"b", b"1", lease=11),
        txn_op([compare(b"a", "version", "=", 1)], [put_op(b"a", b"2"), put_op(b"c", b"1")]),
        delete_op(b"zz"), put_op(b"d", b"1", lease=11), put_op(b"bad", lease=12),
        compact_op(3), delete_op(b"a", prev_kv=True), lease_revoke_op(11), put_op(b"e", b"1"),
        txn_op([compare(b"e", "value", "=", b"nope")], [], [delete_op(b"\0", ALL)]), put_op(b"f", b"9"),
    ]


def test_reopen_recovers_state_and_applied_index(tmp_path):
    backend = LevelDBBackend(tmp_path / "db")
    try:
        h = Harness(KVStore(backend))
        for req in story():
            h.apply(req)
        h.ok(lease_grant_op(20, 5))
        h.ok(put_op(b"g", b"1", lease=20))
        expect = (plain_status(h.store), h.store.leases(), h.store.range(b"\0", ALL),
                  list(h.store.events(h.store.compact_revision + 1, prev_kv=True)), h.store.snapshot())
    finally:
        backend.close()
    backend = LevelDBBackend(tmp_path / "db")
    try:
        store = KVStore(backend)
        assert (plain_status(store), store.leases(), store.range(b"\0", ALL),
                list(store.events(store.compact_revision + 1, prev_kv=True)), store.snapshot()) == expect
        assert store.applied_index == len(story()) + 2
        # Re-applying an old entry is a no-op.
        assert store.apply(3, put_op(b"zzz", b"1")) == (None, [])
        assert store.apply_batch([(1, put_op(b"zzz", b"1")), (store.applied_index, None)]) == [(None, [])] * 2
        assert store.snapshot() == expect[-1]
        # A request None (e.g. a Raft conf change) advances the applied index only.
        assert store.apply(store.applied_index + 1, None) == (None, [])
        assert store.applied_index == len(story()) + 3 and store.revision == expect[0]["revision"]
    finally:
        backend.close()


class CrashingBackend(MemoryBackend):
    """Loses power at its n-th write: that write does not happen, nor does anything after."""

    def __init__(self, crash_at: int) -> None:
        super().__init__()
        self.crash_at, self.writes = crash_at, 0

    def write(self, puts=(), deletes=(), sync=False):
        self.writes += 1
        if self.writes == self.crash_at:
            raise OSError("power cut")
        super().write(puts, deletes, sync)


@pytest.mark.parametrize("batch", [1, 3])
def test_crash_at_any_write_then_reapply_the_log_gives_the_same_state(batch):
    entries = list(enumerate(story(), start=1))
    groups = [entries[i:i + batch] for i in range(0, len(entries), batch)]
    reference = KVStore(MemoryBackend())
    expected_results = [r for g in groups for r in reference.apply_batch(g)]
    for crash_at in range(1, len(groups) + 1):
        backend = CrashingBackend(crash_at)
        store = KVStore(backend)
        for n, group in enumerate(groups, start=1):
            if n == crash_at:
                with pytest.raises(OSError):
                    store.apply_batch(group)
                break
            store.apply_batch(group)
        with pytest.raises(RuntimeError):  # memory is ahead of the disk: the instance is done
            store.status()
        recovered = KVStore(backend)  # the restarted process
        assert recovered.applied_index == (groups[crash_at - 2][-1][0] if crash_at > 1 else 0)
        # The shell re-applies from the start of its log; what was applied is skipped.
        results = [r for g in groups for r in recovered.apply_batch(g)]
        fresh = [i for i, (index, _) in enumerate(entries) if index > (crash_at - 1) * batch]
        assert [results[i] for i in fresh] == [expected_results[i] for i in fresh]
        assert recovered.snapshot() == reference.snapshot()


class RecordingBackend(MemoryBackend):
    def __init__(self) -> None:
        super().__init__()
        self.batches = []

    def write(self, puts=(), deletes=(), sync=False):
        puts, deletes = list(puts), list(deletes)
        self.batches.append((puts, deletes, sync))
        super().write(puts, deletes, sync)


def test_apply_batch_is_one_backend_write_with_the_applied_index():
    backend = RecordingBackend()
    store = KVStore(backend)
    results = store.apply_batch([(1, put_op(b"a", b"1")), (2, put_op(b"b", b"1")), (3, delete_op(b"a"))])
    assert [r["header"]["revision"] for r, _ in results] == [2, 3, 4]
    assert len(backend.batches) == 1
    puts, deletes, sync = backend.batches[0]
    assert (b"m/applied", (3).to_bytes(8, "big")) in puts and sync is False
    assert sum(1 for k, _ in puts if k.startswith(b"r/")) == 3  # the data rides along
    assert store.apply_batch([(2, put_op(b"x", b"1"))]) == [(None, [])] and len(backend.batches) == 1
    store.sync()
    assert backend.batches[-1][2] is True
    assert KVStore(RecordingBackend(), sync=True).apply(1, put_op(b"a", b"1"))[0]["header"]["revision"] == 2


def test_unanswered_entries_change_the_same_and_answer_only_success_or_error():
    """A follower builds only its own proposals' responses (answered): the state, the stored
    bytes and the events never depend on it, and an error stays the error."""
    requests = story() + [
        # a txn branch reading around its writes: the reads are skipped, never the writes
        txn_op([compare(b"f", "value", "=", b"9")],
               [range_op(b"\0", ALL), put_op(b"f", b"10"), range_op(b"f"), delete_op(b"d", prev_kv=True)]),
        txn_op([compare(b"f", "mod_revision", "=", 1)], [put_op(b"nope", b"1")],
               [range_op(b"f"), put_op(b"g", b"1", prev_kv=True)]),
        txn_op([], [range_op(b"f", revision=1)]),  # a read of a compacted revision fails all the same
    ]
    entries = list(enumerate(requests, start=1))
    reference, store = KVStore(MemoryBackend()), KVStore(MemoryBackend())
    expected = reference.apply_batch(entries)
    answered = {5, 15}
    got = store.apply_batch(entries, answered)
    assert store.snapshot() == reference.snapshot() and plain_status(store) == plain_status(reference)
    assert [evs for _, evs in got] == [evs for _, evs in expected]
    assert any(isinstance(res, StoreError) for res, _ in expected)
    for (index, _), (res, _), (want, _) in zip(entries, got, expected):
        if index in answered or isinstance(want, StoreError):
            assert res == want
        else:
            assert res == APPLIED
    assert expected[-3][0]["responses"][2]["kvs"][0]["value"] == b"10"  # (the reads had something to skip)


def test_errors_advance_the_applied_index(h):
    h.err(put_op(b"a", lease=5))
    h.err({"op": "nope"})
    assert h.store.applied_index == 2 and h.rev == 1


# ------------------------------------------------------------------------------------ snapshots

def observe(store: KVStore):
    status = plain_status(store)
    past = [store.range(b"\0", ALL, revision=r) for r in range(max(1, store.compact_revision), store.revision + 1)]
    return status, past, store.leases(), list(store.events(store.compact_revision + 1, prev_kv=True))


@pytest.mark.parametrize("kinds", [("memory", "leveldb"), ("leveldb", "memory")])
def test_snapshot_restore_round_trip(shared_db, kinds):
    src = Harness(KVStore(fresh_backend(kinds[0], shared_db)))
    for req in story():
        src.apply(req)
    data = src.store.snapshot()
    dst = Harness(KVStore(fresh_backend(kinds[1], shared_db)))
    for i in range(30):  # something to replace
        dst.ok(put_op(b"old%d" % i, b"x"))
    dst.ok(lease_grant_op(99, 5))
    dst.store.restore(data)
    assert observe(dst.store) == observe(src.store)
    assert dst.store.snapshot() == data  # byte-identical
    assert KVStore(dst.store.backend).snapshot() == data  # and durable in the backend
    # Both go on identically.
    dst.index = src.index
    for req in (put_op(b"a", b"new"), lease_grant_op(5, 5), put_op(b"b", lease=5), compact_op(10)):
        assert dst.apply(req) == src.apply(req)
    assert dst.store.snapshot() == src.store.snapshot()


def test_a_snapshot_encoder_encodes_the_state_of_when_it_was_made(h):
    for req in story():
        h.apply(req)
    expect = h.store.snapshot()
    encode = h.store.snapshot_encoder()
    for req in (put_op(b"a", b"later"), delete_op(b"b"), compact_op(h.store.revision)):
        h.apply(req)
    assert h.store.snapshot() != expect
    assert encode() == expect


def test_restore_rejects_garbage_and_changes_nothing(h):
    h.ok(put_op(b"a", b"1"))
    before = h.store.snapshot()
    bad = [b"", b"\xc1", msgpack.packb({"format": 2, "pairs": []}), msgpack.packb([1, 2]),
           msgpack.packb({"format": 1, "pairs": [[b"x/other", b"1"]]}),
           msgpack.packb({"format": 1, "pairs": [[b"r/" + bytes(12), b"\x93"]]}),
           msgpack.packb({"format": 1, "pairs": [[b"r/" + bytes(12), msgpack.packb([b"k", b"v", 1, 1, 77])]]})]
    for data in bad:
        with pytest.raises(InvalidRequest):
            h.store.restore(data)
    assert h.store.snapshot() == before


def test_same_entries_give_byte_identical_backends(shared_db):
    stores = [KVStore(fresh_backend(kind, shared_db)) for kind in ("memory", "leveldb")]
    for store in stores:
        store.apply_batch(list(enumerate(story(), start=1)))
    assert stores[0].snapshot() == stores[1].snapshot()


# ---------------------------------------------------------------------------------- size, errors

def test_request_size_limit(h):
    check_request_size(MAX_REQUEST_BYTES)
    with pytest.raises(TooLarge):
        check_request_size(MAX_REQUEST_BYTES + 1)
    err = h.err(put_op(b"k", bytes(MAX_REQUEST_BYTES)))
    assert isinstance(err, TooLarge) and err.code == "TooLarge"
    h.ok(put_op(b"k", bytes(MAX_REQUEST_BYTES - 1)))


def test_errors_travel_on_the_wire():
    for err in (Compacted(7), LeaseNotFound("requested lease not found", id=3), InvalidRequest("x", field="key")):
        back = StoreError.from_wire(msgpack.unpackb(msgpack.packb(err.to_wire())))
        assert type(back) is type(err) and back == err
    assert StoreError.from_wire(Compacted(7).to_wire()).compact_revision == 7


def test_malformed_requests_name_the_field(h):
    cases = {
        "request": [1, 2],
        "op": {"key": b"a"},
        "key": {"op": "put", "key": "text"},
        "value": {"op": "put", "key": b"a", "value": 3},
        "lease": {"op": "put", "key": b"a", "lease": True},
        "extra": {"op": "put", "key": b"a", "extra": 1},
        "compare[0].target": txn_op([{"key": b"a", "target": "color", "result": "="}]),
        "compare[0].version": txn_op([{"key": b"a", "target": "version", "result": "="}]),
        "success[1].op": txn_op(success=[put_op(b"a"), txn_op()]),
        "failure[0].key": txn_op(failure=[delete_op(b"")]),
        "success": txn_op(success=[put_op(b"k%d" % i) for i in range(129)]),
    }
    for field, req in cases.items():
        err = h.err(req)
        assert isinstance(err, InvalidRequest) and err.details["field"] == field, (field, err)


# ----------------------------------------------------------------------------- hypothesis: model

KEYS = [b"a", b"b", b"c", b"d"]
keys = st.sampled_from(KEYS)
ends = st.sampled_from([None, b"b", b"c", b"d", b"\0"])
values = st.binary(max_size=2)
puts = st.builds(lambda k, v: ("put", k, v), keys, values)
deletes = st.builds(lambda k, e: ("delete", k, e), keys, ends)
txns = st.builds(lambda k, n, s, f: ("txn", k, n, s, f), keys, st.integers(0, 3),
                 st.lists(puts | deletes, max_size=3), st.lists(puts | deletes, max_size=3))
compacts = st.builds(lambda x: ("compact", x), st.floats(0, 1))
model_ops = st.lists(puts | deletes | txns | compacts, max_size=25)


def in_range(key, start, end) -> bool:
    if end is None:
        return key == start
    return key >= start and (end == b"\0" or key < end)


class Model:
    """etcd semantics the obvious way: a full copy of the key space per revision."""

    def __init__(self) -> None:
        self.rev, self.compact = 1, 0
        self.cur: dict[bytes, tuple] = {}
        self.history = {1: {}}

    def request(self, op) -> tuple[dict, object]:
        """(request, expected outcome: an exception type or a txn's succeeded flag)."""
        kind = op[0]
        if kind == "put":
            return put_op(op[1], op[2]), self.write([op])
        if kind == "delete":
            return delete_op(op[1], op[2]), self.write([op])
        if kind == "compact":
            # Always above the compacted revision; beyond the current one when nothing is left.
            rev = self.compact + 1 + int(op[1] * max(0, self.rev - self.compact - 1))
            if rev > self.rev:
                return compact_op(rev), FutureRevision
            self.compact = rev
            return compact_op(rev), None
        _, key, n, success, failure = op
        req = txn_op([compare(key, "version", "=", n)], [self.as_req(o) for o in success],
                     [self.as_req(o) for o in failure])
        if self.duplicates(success) or self.duplicates(failure):
            return req, DuplicateKey
        ok = self.cur.get(key, (0, 0, 0, 0))[3] == n
        self.write(success if ok else failure)
        return req, ok

    @staticmethod
    def as_req(o) -> dict:
        return put_op(o[1], o[2]) if o[0] == "put" else delete_op(o[1], o[2])

    @staticmethod
    def duplicates(ops) -> bool:
        put_keys = [o[1] for o in ops if o[0] == "put"]
        return len(set(put_keys)) < len(put_keys) or any(
            in_range(k, o[1], o[2]) for o in ops if o[0] == "delete" for k in put_keys)

    def write(self, ops) -> None:
        rev, new, changed = self.rev + 1, dict(self.cur), False
        for o in ops:
            if o[0] == "put":
                value, create, _, version = new.get(o[1], (b"", rev, 0, 0))
                new[o[1]] = (o[2], create, rev, version + 1)
                changed = True
            else:
                for k in [k for k in new if in_range(k, o[1], o[2])]:
                    del new[k]
                    changed = True
        if changed:
            self.rev, self.cur = rev, new
            self.history[rev] = new


def state_of(resp: dict) -> dict:
    return {x["key"]: (x["value"], x["create_revision"], x["mod_revision"], x["version"]) for x in resp["kvs"]}


@pytest.mark.parametrize("kind", ["memory", "leveldb"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=model_ops)
def test_store_matches_a_dict_model(shared_db, kind, ops):
    store, model = KVStore(fresh_backend(kind, shared_db)), Model()
    try:
        for index, op in enumerate(ops, start=1):
            req, expected = model.request(op)
            resp, events = store.apply(index, req)
            if isinstance(expected, type):
                assert isinstance(resp, expected), (op, resp)
            else:
                assert not isinstance(resp, StoreError), (op, resp)
                if isinstance(expected, bool):
                    assert resp["succeeded"] is expected
            assert store.revision == model.rev and store.compact_revision == model.compact
        for rev in range(max(1, model.compact), model.rev + 1):
            if rev in model.history:
                assert state_of(store.range(b"\0", ALL, revision=rev)) == model.history[rev]
        # Replaying the history from the compact revision rebuilds every later state.
        base = max(1, model.compact)
        state = {k: v[0] for k, v in model.history[max(r for r in model.history if r <= base)].items()}
        by_rev: dict[int, list[Event]] = {}
        for e in store.events(model.compact + 1, prev_kv=True):
            by_rev.setdefault(e.kv["mod_revision"], []).append(e)
        for rev, evs in by_rev.items():
            for e in evs:
                if e.type == PUT:
                    old = state.get(e.kv["key"])
                    assert (e.prev_kv and e.prev_kv["value"]) == old if old is not None else e.prev_kv is None
                    state[e.kv["key"]] = e.kv["value"]
                else:
                    assert e.prev_kv["value"] == state.pop(e.kv["key"])
            if rev > base:
                assert state == {k: v[0] for k, v in model.history[rev].items()}
    finally:
        store.backend.close()


# ------------------------------------------------------------------------- hypothesis: malformed

FIELDS = ["op", "key", "value", "range_end", "lease", "prev_kv", "revision", "limit", "count_only",
          "keys_only", "compare", "success", "failure", "target", "result", "id", "ttl", "ignore_value",
          "ignore_lease", "physical", "version", "create_revision", "mod_revision", "serializable"]
OP_NAMES = ["put", "range", "delete_range", "txn", "compact", "lease_grant", "lease_revoke"]
plausible = st.sampled_from([b"k", b"", b"\0", 0, 1, 2, -1, 2**64, True, False, None, "=", "<", "version",
                             "value", "put", 1.5, "k", [], {}])
anything = st.recursive(
    plausible | st.binary(max_size=3) | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=3), inner, max_size=4)
    | st.builds(lambda op, d: {**d, "op": op}, st.sampled_from(OP_NAMES),
                st.dictionaries(st.sampled_from(FIELDS), inner, max_size=4)),
    max_leaves=12)
requests = st.builds(lambda op, d: {**d, "op": op}, st.sampled_from(OP_NAMES) | anything,
                     st.dictionaries(st.sampled_from(FIELDS), anything, max_size=5)) | anything


@settings(max_examples=300, deadline=None)
@given(reqs=st.lists(requests, min_size=1, max_size=5))
def test_malformed_requests_only_ever_yield_store_errors(reqs):
    store = KVStore(MemoryBackend())
    store.apply(1, lease_grant_op(1, 10))
    store.apply(2, put_op(b"k", b"v", lease=1))
    for index, req in enumerate(reqs, start=3):
        resp, events = store.apply(index, req)
        if req is None:  # a Raft entry with no request (a conf change) applies as nothing
            assert resp is None and events == []
            continue
        assert isinstance(resp, (dict, StoreError))
        if isinstance(resp, StoreError):
            assert resp.code in {"InvalidRequest", "Compacted", "FutureRevision", "LeaseNotFound",
                                 "LeaseExists", "KeyNotFound", "DuplicateKey", "TooLarge"}
            assert events == []
    assert store.applied_index == len(reqs) + 2
    assert store.status()["revision"] >= 1
    assert KVStore(store.backend).snapshot() == store.snapshot()  # memory and disk agree


def test_recent_record_cache_answers_as_the_backend_does(monkeypatch, tmp_path):
    """Puts read their key's previous version through a small cache of recent records; what
    they answer (prev_kv, version, create_revision) and what later reads see must be what a
    store without that cache (reopened from the same LevelDB) answers."""
    import random

    from store import mvcc
    monkeypatch.setattr(mvcc, "RECENT_RECORD_BYTES", 8 * 110)  # ~8 records of 40 keys: evictions all along
    rng = random.Random(7)
    b = LevelDBBackend(tmp_path / "db")
    try:
        cached = Harness(KVStore(b))
        answers = []
        for i in range(300):
            key = b"k%02d" % rng.randrange(40)
            if rng.random() < 0.15:
                answers.append(cached.ok(delete_op(key, prev_kv=True)))
            else:
                answers.append(cached.ok(put_op(key, b"v%d" % i, prev_kv=True)))
        recent = cached.store._recent
        assert 4 <= len(recent) <= 8 and cached.store._recent_bytes <= mvcc.RECENT_RECORD_BYTES
        assert cached.store._recent_bytes == sum(len(r.key) + len(r.value) + mvcc._RECORD_OVERHEAD
                                                 for r in recent.values())
        fresh = KVStore(b)  # reopened: an empty cache, every record read from LevelDB
        for rev in range(1, cached.rev + 1, 7):
            assert fresh.range(b"k", b"l", revision=rev) == cached.store.range(b"k", b"l", revision=rev)
        monkeypatch.setattr(mvcc, "RECENT_RECORD_BYTES", 0)  # no cache: every previous version read back
        replay = Harness(KVStore(MemoryBackend()))
        rng = random.Random(7)
        for i, answer in enumerate(answers):
            key = b"k%02d" % rng.randrange(40)
            req = delete_op(key, prev_kv=True) if rng.random() < 0.15 else put_op(key, b"v%d" % i, prev_kv=True)
            assert replay.ok(req) == answer
    finally:
        b.close()
