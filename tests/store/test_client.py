"""store/client.py against in-process fake replicas (wire.Servers whose behaviour each test
controls): leader discovery, redirects, retries that are safe and none that are not, reads that
move on, watches that resume without gaps or duplicates, many calls at once.

`FakeCluster` keeps one real KVStore (memory backend) shared by its replicas, as if Raft had
replicated every entry instantly; `ThreadedCluster` runs one on its own loop for blocking callers
(SyncStoreClient, the CLI's tests). Async tests drive their coroutine with `run()`."""
from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import shutil
import tempfile
import threading
from typing import Callable

import pytest
import zmq
import zmq.asyncio

from kubemu import wire
from store import client as sc
from store.backend import MemoryBackend
from store.mvcc import (Compacted as StoreCompacted, KVStore, StoreError, compact_op, compare, delete_op,
                        lease_grant_op, lease_revoke_op, put_op, range_op, txn_op)
from tests.store.cluster import StoreCluster
from tests.store.linearizability import History

DEADLINE = 20.0  # upper bound for anything that should happen "soon"; never a speed claim
FALLTHROUGH = object()  # a hook's "carry on as usual"
WRITES = ("put", "delete_range", "txn", "compact", "lease_grant", "lease_revoke", "lease_keepalive",
          "member_add", "member_remove", "move_leader")
READS = ("range", "status", "member_list", "lease_leases", "defragment")


def run(coro, timeout: float = 60.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


# what store/errors.py sends for each StoreError code: the wire class, the code as "reason"
WIRE_CLASS = {"Compacted": wire.Gone, "FutureRevision": wire.Invalid, "LeaseNotFound": wire.NotFound,
              "KeyNotFound": wire.NotFound, "LeaseExists": wire.Conflict, "TooLarge": wire.TooLarge,
              "InvalidRequest": wire.Invalid, "DuplicateKey": wire.Invalid}


def wire_error(err: StoreError) -> wire.WireError:
    """A StoreError as a replica sends it (Compacted: Gone with {"compact_revision": N})."""
    return WIRE_CLASS.get(err.code, wire.Invalid)(err.message, {**err.details, "reason": err.code})


class FakeReplica:
    """One replica: a wire.Server whose methods count their calls, run the test's hook for the
    method if there is one (a hook returns FALLTHROUGH to carry on as usual), and otherwise do
    what a replica does, on the cluster's shared KVStore."""

    def __init__(self, cluster: FakeCluster, name: str, endpoint: str):
        self.cluster, self.name, self.endpoint = cluster, name, endpoint
        self.calls: collections.Counter = collections.Counter()
        self.hooks: dict[str, Callable] = {}
        self.hint = True  # NotLeader names the leader
        self.server: wire.Server | None = None
        self.watch_repeats = 0  # a sloppy replica: resend this many revisions before the start
        self.refuse_watches = False  # answer watches with Unavailable (catching up, say)

    @property
    def role(self) -> str:
        leader = self.cluster.leader
        return "leader" if leader is self else "follower"

    async def start(self) -> None:
        handlers = {m: self._unary(m) for m in WRITES + READS}
        handlers["watch"] = self._watch
        self.server = wire.Server(self.endpoint, handlers, context=self.cluster.context, name=self.name)
        await self.server.start()

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.close()
            self.server = None

    def _unary(self, method: str):
        async def handler(**params):
            self.calls[method] += 1
            hook = self.hooks.get(method)
            if hook is not None:
                result = await hook(**params)
                if result is not FALLTHROUGH:
                    return result
            if method in WRITES and self.cluster.leader is not self:
                leader = self.cluster.leader
                known = leader is not None and self.hint
                raise wire.WireError("not the leader", {"leader": leader.name if known else None,
                                                        "endpoint": leader.endpoint if known else None},
                                     code="NotLeader")
            return getattr(self, "do_" + method)(**params)
        return handler

    # --- what a replica does

    def do_put(self, key, value, lease=0, prev_kv=False):
        return self.cluster.apply(put_op(key, value, lease=lease, prev_kv=prev_kv))

    def do_delete_range(self, key, range_end=None, prev_kv=False):
        return self.cluster.apply(delete_op(key, range_end, prev_kv))

    def do_txn(self, compare, success, failure):
        return self.cluster.apply(txn_op(compare, success, failure))

    def do_compact(self, revision):
        return self.cluster.apply(compact_op(revision))

    def do_lease_grant(self, ttl, id=0):
        lease_id = id or self.cluster.next_lease()
        self.cluster.apply(lease_grant_op(lease_id, ttl))
        return {"id": lease_id, "ttl": ttl}

    def do_lease_revoke(self, id):
        return self.cluster.apply(lease_revoke_op(id))

    def do_lease_keepalive(self, id):
        for lease_id, ttl, _keys in self.cluster.kv.leases():
            if lease_id == id:
                return {"id": id, "ttl": ttl, "header": {"revision": self.cluster.kv.revision}}
        raise wire.NotFound("requested lease not found", {"id": id, "reason": "LeaseNotFound"})

    def do_lease_leases(self):
        return {"header": {"revision": self.cluster.kv.revision},
                "leases": [{"id": i, "ttl": ttl} for i, ttl, _keys in self.cluster.kv.leases()]}

    def do_range(self, key, range_end=None, revision=0, limit=0, count_only=False, keys_only=False,
                 serializable=False):
        try:
            return self.cluster.kv.range(key, range_end, revision, limit, count_only, keys_only)
        except StoreError as err:
            raise wire_error(err) from None

    def do_status(self):
        kv, leader = self.cluster.kv, self.cluster.leader
        return {"name": self.name, "endpoint": self.endpoint, "role": self.role, "term": self.cluster.term,
                "leader": leader.name if leader else None, "leader_endpoint": leader.endpoint if leader else None,
                "commit_index": self.cluster.index, "applied_index": self.cluster.index,
                "raft_index": self.cluster.index, "revision": kv.revision, "compact_revision": kv.compact_revision,
                "db_size": 4096 * 5, "fsyncs": 0, "members": self.do_member_list()}

    def do_defragment(self):
        return {"name": self.name, "db_size_before": 4096 * 5, "db_size_after": 4096 * 2}

    def do_member_list(self):
        return [dict(m) for m in self.cluster.members]

    def do_member_add(self, name, endpoint):
        if any(m["name"] == name for m in self.cluster.members):
            raise wire.Conflict(f"member {name} exists")
        self.cluster.members.append({"name": name, "endpoint": endpoint})
        return {"members": self.do_member_list()}

    def do_member_remove(self, name):
        if not any(m["name"] == name for m in self.cluster.members):
            raise wire.NotFound(f"no member {name}")
        self.cluster.members[:] = [m for m in self.cluster.members if m["name"] != name]
        return {"members": self.do_member_list()}

    def do_move_leader(self, to):
        target = next((r for r in self.cluster.replicas if r.name == to), None)
        if target is None:
            raise wire.NotFound(f"no member {to}")
        self.cluster.set_leader(target)
        return {"leader": to}

    async def _watch(self, key, range_end=None, start_revision=0, prev_kv=False):
        self.calls["watch"] += 1
        hook = self.hooks.get("watch")
        if hook is not None:
            async for item in hook(key=key, range_end=range_end, start_revision=start_revision, prev_kv=prev_kv):
                yield item
            return
        async for item in self.default_watch(key, range_end, start_revision, prev_kv):
            yield item

    async def default_watch(self, key, range_end=None, start_revision=0, prev_kv=False):
        if self.refuse_watches:
            raise wire.Unavailable("not serving watches right now")
        cluster = self.cluster
        kv = cluster.kv
        if start_revision and start_revision <= kv.compact_revision:
            raise wire.Gone("required revision has been compacted", {"compact_revision": kv.compact_revision})
        yield {"created": True, "header": {"revision": kv.revision}}
        nxt = max(1, start_revision - self.watch_repeats) if start_revision else kv.revision + 1
        while True:
            changed = cluster.changed
            if nxt <= kv.revision:
                try:
                    events = list(kv.events(nxt, key, range_end, prev_kv))
                except StoreError as err:
                    raise wire_error(err) from None
                nxt = kv.revision + 1
                by_rev: dict[int, list] = {}
                for ev in events:
                    by_rev.setdefault(ev.revision, []).append(ev.to_wire())
                for rev, evs in by_rev.items():
                    yield {"header": {"revision": rev}, "events": evs}
                continue
            await changed.wait()


class FakeCluster:
    """N fake replicas over one KVStore; `leader` is whichever replica leads (or None)."""

    def __init__(self, sockdir: str, n: int = 3, context: zmq.Context | None = None):
        self.context = context or zmq.asyncio.Context()
        self._own_context = context is None
        self.kv = KVStore(MemoryBackend())
        self.index = 0
        self.term = 1
        self._lease_ids = 0
        self.replicas = [FakeReplica(self, f"store-{i}", wire.ipc_endpoint(sockdir, f"s{i}.sock"))
                         for i in range(n)]
        self.members = [{"name": r.name, "endpoint": r.endpoint} for r in self.replicas]
        self.leader: FakeReplica | None = self.replicas[0]
        self.changed = asyncio.Event()

    @property
    def endpoints(self) -> list[str]:
        return [r.endpoint for r in self.replicas]

    def by_endpoint(self, endpoint: str) -> FakeReplica:
        return next(r for r in self.replicas if r.endpoint == endpoint)

    def set_leader(self, replica: FakeReplica | None) -> None:
        self.leader = replica
        self.term += 1

    def next_lease(self) -> int:
        self._lease_ids += 1
        return 0x1000 + self._lease_ids

    def apply(self, request: dict) -> dict:
        self.index += 1
        resp, events = self.kv.apply(self.index, request)
        if isinstance(resp, StoreError):
            raise wire_error(resp)
        if events or request.get("op") == "compact":
            self.changed.set()
            self.changed = asyncio.Event()
        return resp

    async def start(self) -> FakeCluster:
        self.changed = asyncio.Event()  # bound to the running loop
        for r in self.replicas:
            await r.start()
        return self

    async def close(self) -> None:
        for r in self.replicas:
            await r.stop()
        if self._own_context:
            self.context.destroy(linger=0)


@pytest.fixture
def sockdir():
    # short on purpose: pytest's tmp_path can push an ipc path past the 107-byte limit
    path = tempfile.mkdtemp(prefix="ksc-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.asynccontextmanager
async def cluster_and_client(sockdir, n: int = 3, **client_kwargs):
    ctx = zmq.asyncio.Context()
    cluster = FakeCluster(sockdir, n, context=ctx)
    client = sc.StoreClient(cluster.endpoints, context=ctx, **client_kwargs)
    try:
        await cluster.start()
        yield cluster, client
    finally:
        try:
            await client.close()
        finally:
            await cluster.close()
            ctx.destroy(linger=0)


class ThreadedCluster:
    """A FakeCluster on its own event loop in a background thread, for blocking callers."""

    def __init__(self, sockdir: str, n: int = 3):
        self.loop = asyncio.new_event_loop()
        self.sockdir = sockdir
        self.n = n
        self.cluster: FakeCluster | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, name="fake-store", daemon=True)

    def __enter__(self) -> ThreadedCluster:
        self._thread.start()
        try:
            self.cluster = self.run(self._start())
        except BaseException:
            self._stop_loop()
            raise
        return self

    async def _start(self) -> FakeCluster:
        return await FakeCluster(self.sockdir, self.n).start()

    def __exit__(self, *exc) -> None:
        try:
            if self.cluster is not None:
                self.run(self.cluster.close())
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(DEADLINE)
        if not self._thread.is_alive():
            self.loop.close()

    @property
    def endpoints(self) -> list[str]:
        return self.cluster.endpoints

    def run(self, coro, timeout: float = DEADLINE):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn, *args):
        """Run a plain function on the cluster's loop (its state belongs to that loop)."""
        async def go():
            return fn(*args)
        return self.run(go())


async def hang(**_params):
    await asyncio.sleep(3600)


async def kill(cluster: FakeCluster, client: sc.StoreClient, victim: FakeReplica) -> None:
    """Stop a replica (handing leadership on first) and wait until `client` has noticed: a
    request sent in the instant before the client sees the disconnect is (rightly)
    OutcomeUnknown, which is not what these tests are about. A failed probe means it has."""
    if cluster.leader is victim:
        cluster.set_leader(next(r for r in cluster.replicas if r is not victim and r.server is not None))
    await victim.stop()
    with pytest.raises(wire.Unavailable):
        await client.status(victim.endpoint, timeout=1.0)


# ------------------------------------------------------------------------------ routing


def test_leader_discovery_and_basic_kv(sockdir):
    async def main():
        async with cluster_and_client(sockdir) as (cluster, client):
            cluster.set_leader(cluster.replicas[1])
            resp = await client.put("k", "v1")
            assert resp["header"]["revision"] == 2
            assert client.leader == cluster.replicas[1].endpoint
            assert [r.calls["put"] for r in cluster.replicas] == [0, 1, 0]
            assert (await client.get(b"k"))["value"] == b"v1"
            assert await client.get("missing") is None
            await client.put("k2", b"v2")
            resp = await client.range("k", prefix=True)
            assert [kv["key"] for kv in resp["kvs"]] == [b"k", b"k2"] and resp["count"] == 2
            assert (await client.range("k", "k2"))["count"] == 1
            assert (await client.get("k", revision=2))["value"] == b"v1"
            resp = await client.delete("k", prefix=True, prev_kv=True)
            assert resp["deleted"] == 2 and [kv["value"] for kv in resp["prev_kvs"]] == [b"v1", b"v2"]
            resp = await client.txn([compare(b"a", "version", "=", 0)], [put_op(b"a", b"1")], [range_op(b"a")])
            assert resp["succeeded"]
            resp = await client.txn([compare(b"a", "version", "=", 0)], [put_op(b"a", b"2")], [range_op(b"a")])
            assert not resp["succeeded"] and resp["responses"][0]["kvs"][0]["value"] == b"1"
            with pytest.raises(ValueError):
                await client.range("k", "z", prefix=True)
    run(main())


def test_not_leader_redirect_with_endpoint_hint(sockdir):
    async def main():
        async with cluster_and_client(sockdir) as (cluster, client):
            r0, _r1, r2 = cluster.replicas
            await client.put("a", "1")  # finds r0
            assert client.leader == r0.endpoint
            cluster.set_leader(r2)
            status_calls = sum(r.calls["status"] for r in cluster.replicas)
            await client.put("a", "2")
            assert r0.calls["put"] == 2 and r2.calls["put"] == 1  # one refused, one done
            assert sum(r.calls["status"] for r in cluster.replicas) == status_calls  # followed the hint
            assert client.leader == r2.endpoint
            assert (await client.get("a"))["version"] == 2  # applied exactly twice in all
    run(main())


def test_not_leader_without_hint_rediscovers(sockdir):
    async def main():
        async with cluster_and_client(sockdir) as (cluster, client):
            r0, r1, _r2 = cluster.replicas
            await client.put("a", "1")
            r0.hint = False
            cluster.set_leader(r1)
            status_calls = sum(r.calls["status"] for r in cluster.replicas)
            await client.put("a", "2")
            assert r0.calls["put"] == 2 and r1.calls["put"] == 1
            assert sum(r.calls["status"] for r in cluster.replicas) > status_calls
            assert (await client.get("a"))["version"] == 2
    run(main())


def test_no_leader_yet_then_one_is_elected(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=DEADLINE) as (cluster, client):
            cluster.set_leader(None)
            put = asyncio.ensure_future(client.put("a", "1"))
            await asyncio.sleep(0.3)
            assert not put.done()
            cluster.set_leader(cluster.replicas[2])
            await asyncio.wait_for(put, DEADLINE)
            assert [r.calls["put"] for r in cluster.replicas] == [0, 0, 1]
    run(main())


def test_no_leader_at_all_is_unavailable_not_executed(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=0.5) as (cluster, client):
            cluster.set_leader(None)
            with pytest.raises(wire.Unavailable) as info:
                await client.put("a", "1")
            assert not isinstance(info.value, wire.OutcomeUnknown)
            assert cluster.kv.revision == 1
    run(main())


def test_unavailable_backs_off_and_retries(sockdir):
    async def main():
        async with cluster_and_client(sockdir) as (cluster, client):
            refusals = []

            async def refuse_twice(**_params):
                if len(refusals) < 2:
                    refusals.append(asyncio.get_running_loop().time())
                    raise wire.Unavailable("applying a snapshot; try again")
                return FALLTHROUGH

            cluster.replicas[0].hooks["put"] = refuse_twice
            await client.put("a", "1")
            assert cluster.replicas[0].calls["put"] == 3
            assert refusals[1] > refusals[0]  # it paused between attempts (no claim about how long)
            assert (await client.get("a"))["version"] == 1
    run(main())


# A dial timeout far beyond any deadline below: a client that waited one out would fail the
# test instead of merely being slow.
LONG = 3 * DEADLINE


def test_dead_cached_leader_costs_a_dial_timeout_not_the_write(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=DEADLINE, dial_timeout=0.3) as (cluster, client):
            r0, r1, _r2 = cluster.replicas
            await client.put("a", "1")
            cluster.set_leader(r1)
            await kill(cluster, client, r0)
            client._leader = r0.endpoint  # believed although dead (its death went unnoticed)
            await client.put("a", "2")
            assert r1.calls["put"] == 1
            assert (await client.get("a"))["version"] == 2
    run(main())


def test_a_dropped_connection_to_the_leader_is_noticed_before_any_write(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=LONG, dial_timeout=LONG) as (cluster, client):
            r0, r1, _r2 = cluster.replicas
            await client.put("a", "1")
            assert client.leader == r0.endpoint
            cluster.set_leader(r1)
            await r0.stop()
            await asyncio.wait_for(_until(lambda: client.leader is None), DEADLINE)
            await asyncio.wait_for(client.put("a", "2"), DEADLINE)
            assert r1.calls["put"] == 1 and client.leader == r1.endpoint
    run(main())


def test_discovery_neither_waits_for_the_dead_leader_nor_believes_hints_naming_it(sockdir):
    """After the leader's death the survivors still name it until they elect another: the
    client keeps asking them, without waiting out a dial timeout on the dead one or trying it."""
    async def main():
        async with cluster_and_client(sockdir, timeout=LONG, dial_timeout=LONG) as (cluster, client):
            r0, r1, r2 = cluster.replicas
            await client.put("a", "1")
            await r0.stop()  # still cluster.leader: r1 and r2 name it
            await asyncio.wait_for(_until(lambda: client.leader is None), DEADLINE)
            put = asyncio.ensure_future(client.put("a", "2"))
            asked = r1.calls["status"]
            await asyncio.wait_for(_until(lambda: r1.calls["status"] >= asked + 3), DEADLINE)  # rounds go on
            assert not put.done()
            cluster.set_leader(r2)
            await asyncio.wait_for(put, DEADLINE)
            assert r2.calls["put"] == 1 and (await client.get("a"))["version"] == 2
    run(main())


def test_discovery_does_not_wait_for_a_replica_that_never_answers(sockdir):
    """A status call sent to a replica in the instant it dies may get neither an answer nor a
    disconnect: once the others have answered, a round waits STRAGGLER_GRACE for it, not the
    dial timeout, and the next round finds the new leader."""
    async def main():
        async with cluster_and_client(sockdir, timeout=LONG, dial_timeout=LONG) as (cluster, client):
            r0, r1, r2 = cluster.replicas
            await client.put("a", "1")
            r0.hooks["status"] = hang  # connected, but silent: the dead leader in that instant
            r0.hooks["put"] = hang
            cluster.set_leader(None)  # r1 and r2: no leader yet
            client._forget_leader(r0.endpoint)
            put = asyncio.ensure_future(client.put("a", "2"))
            asked = r1.calls["status"]
            await asyncio.wait_for(_until(lambda: r1.calls["status"] >= asked + 2), DEADLINE)  # rounds go on
            cluster.set_leader(r2)
            await asyncio.wait_for(put, DEADLINE)
            assert r2.calls["put"] == 1 and r0.calls["put"] == 1  # the first put only
    run(main())


def test_a_not_leader_hint_naming_a_replica_that_just_failed_is_not_followed(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=LONG, dial_timeout=LONG) as (cluster, client):
            r0, r1, _r2 = cluster.replicas
            await client.put("a", "1")
            cluster.set_leader(r1)
            await r0.stop()
            await asyncio.wait_for(_until(lambda: client.leader is None), DEADLINE)

            async def stale_hint(**_params):  # r1 has just been elected but answers from old news
                if r1.calls["put"] == 1:
                    raise wire.WireError("not the leader", {"leader": r0.name, "endpoint": r0.endpoint},
                                         code="NotLeader")
                return FALLTHROUGH

            r1.hooks["put"] = stale_hint
            await asyncio.wait_for(client.put("a", "2"), DEADLINE)
            assert r1.calls["put"] == 2 and (await client.get("a"))["version"] == 2
    run(main())


def test_write_timing_out_is_outcome_unknown_and_not_retried(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=0.5) as (cluster, client):
            await client.put("warm", "up")  # the leader is known
            cluster.replicas[0].hooks["put"] = hang
            with pytest.raises(sc.OutcomeUnknown) as info:
                await client.put("a", "1")
            assert isinstance(info.value, wire.OutcomeUnknown)
            await asyncio.sleep(0.5)  # a retry behind our back would show up by now
            assert [r.calls["put"] for r in cluster.replicas] == [2, 0, 0]
    run(main())


def test_write_losing_its_connection_is_outcome_unknown(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=DEADLINE) as (cluster, client):
            r0 = cluster.replicas[0]
            r0.hooks["put"] = hang
            put = asyncio.ensure_future(client.put("a", "1"))
            await asyncio.wait_for(_until(lambda: r0.calls["put"] == 1), DEADLINE)
            await r0.stop()
            with pytest.raises(sc.OutcomeUnknown):
                await asyncio.wait_for(put, DEADLINE)
            assert sum(r.calls["put"] for r in cluster.replicas) == 1
    run(main())


def test_keepalive_and_read_only_txn_are_retried_after_unknown_outcome(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=DEADLINE) as (cluster, client):
            lease = await client.lease_grant(30)
            r0 = cluster.replicas[0]
            lost = []

            async def lose_first(**_params):
                if not lost:
                    lost.append(1)
                    raise wire.OutcomeUnknown("the proposal was dropped")
                return FALLTHROUGH

            r0.hooks["lease_keepalive"] = lose_first
            assert (await client.lease_keepalive(lease["id"]))["ttl"] == 30
            assert r0.calls["lease_keepalive"] == 2
            lost.clear()
            r0.hooks["txn"] = lose_first
            await client.txn([], [range_op(b"x")], [])
            assert r0.calls["txn"] == 2
            lost.clear()
            with pytest.raises(sc.OutcomeUnknown):  # a txn that writes is not
                await client.txn([], [put_op(b"x", b"1")], [])
            assert r0.calls["txn"] == 3
    run(main())


def test_read_moves_to_another_replica_after_a_timeout(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=3.0) as (cluster, client):
            await client.put("a", "1")
            r0 = cluster.replicas[0]
            r0.hooks["range"] = hang
            kv = await client.get("a")
            assert kv["value"] == b"1"
            assert r0.calls["range"] == 1
            assert sum(r.calls["range"] for r in cluster.replicas[1:]) >= 1
    run(main())


def test_read_survives_a_dead_replica(sockdir):
    async def main():
        async with cluster_and_client(sockdir, dial_timeout=0.3) as (cluster, client):
            await client.put("a", "1")
            await cluster.replicas[0].stop()  # reads may meet the fresh death too: they retry
            for _ in range(3):
                assert (await client.get("a"))["value"] == b"1"
            assert (await client.status())["revision"] == 2
    run(main())


def test_read_with_every_replica_down_is_unavailable(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=0.5, dial_timeout=0.1) as (cluster, client):
            for r in cluster.replicas:
                await r.stop()
            with pytest.raises(wire.Unavailable):
                await client.get("a")
    run(main())


def test_typed_errors(sockdir):
    async def main():
        async with cluster_and_client(sockdir) as (cluster, client):
            for i in range(5):
                await client.put("k", str(i))
            await client.compact(4)
            with pytest.raises(sc.Compacted) as info:
                await client.get("k", revision=2)
            assert isinstance(info.value, wire.Gone) and info.value.compact_revision == 4
            with pytest.raises(sc.Compacted):
                await client.compact(3)
            with pytest.raises(sc.FutureRevision):
                await client.get("k", revision=100)
            with pytest.raises(sc.LeaseNotFound) as info:
                await client.lease_revoke(12345)
            assert isinstance(info.value, wire.NotFound) and info.value.code == "NotFound"
            with pytest.raises(sc.InvalidRequest) as info:
                await client.put("", "v")
            assert isinstance(info.value, wire.Invalid)
            with pytest.raises(sc.DuplicateKey):
                await client.txn([], [put_op(b"d", b"1"), put_op(b"d", b"2")], [])
            assert [r.calls["compact"] for r in cluster.replicas] == [2, 0, 0]  # definite: not retried
    run(main())


def test_leases_members_status_and_move_leader(sockdir):
    async def main():
        async with cluster_and_client(sockdir) as (cluster, client):
            lease = await client.lease_grant(10)
            await client.put("l", "v", lease=lease["id"])
            assert (await client.lease_leases())["leases"] == [{"id": lease["id"], "ttl": 10}]
            await client.lease_revoke(lease["id"])
            assert await client.get("l") is None
            assert [m["name"] for m in await client.member_list()] == ["store-0", "store-1", "store-2"]
            await client.member_add("store-3", "ipc:///nowhere/s3.sock")
            await client.member_remove("store-3")
            assert len(await client.member_list()) == 3
            statuses = await client.status_all()
            assert [s["role"] for s in statuses] == ["leader", "follower", "follower"]
            assert (await client.status(cluster.replicas[2].endpoint))["name"] == "store-2"
            await client.move_leader("store-1")
            await client.put("after", "move")
            assert cluster.replicas[1].calls["put"] == 1 and client.leader == cluster.replicas[1].endpoint
            await cluster.replicas[2].stop()
            statuses = await client.status_all(timeout=1.0)
            assert "error" in statuses[2] and statuses[2]["endpoint"] == cluster.replicas[2].endpoint
    run(main())


def test_many_calls_in_flight_at_once(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=DEADLINE) as (cluster, client):
            slow = asyncio.Event()

            async def slow_range(**_params):
                await slow.wait()
                return FALLTHROUGH

            for r in cluster.replicas:
                r.hooks["range"] = slow_range
            reads = [asyncio.ensure_future(client.get(f"k{i}")) for i in range(20)]
            puts = await asyncio.gather(*(client.put(f"k{i}", str(i)) for i in range(50)))
            assert sorted(p["header"]["revision"] for p in puts) == list(range(2, 52))
            slow.set()
            assert len(await asyncio.gather(*reads)) == 20  # waited alongside the puts
            values = await asyncio.gather(*(client.get(f"k{i}") for i in range(50)))
            assert [v["value"] for v in values] == [str(i).encode() for i in range(50)]
    run(main())


# ------------------------------------------------------------------------------ watches


async def _until(condition, interval: float = 0.01):
    while not condition():
        await asyncio.sleep(interval)


async def _collect(watch: sc.Watch, into: list, n: int):
    async for ev in watch:
        into.append(ev)
        if len(into) >= n:
            return


def test_watch_delivers_events_from_now_and_from_a_revision(sockdir):
    async def main():
        async with cluster_and_client(sockdir) as (cluster, client):
            await client.put("w/old", "x")  # revision 2
            async with client.watch("w/", prefix=True, prev_kv=True) as watch:
                assert watch.created_revision == 2
                await client.put("w/a", "1")
                await client.put("w/a", "2")
                await client.put("other", "no")
                await client.delete("w/a")
                got = []
                await asyncio.wait_for(_collect(watch, got, 3), DEADLINE)
            assert [(e.type, e.kv["key"], e.kv["value"]) for e in got] == [
                ("PUT", b"w/a", b"1"), ("PUT", b"w/a", b"2"), ("DELETE", b"w/a", b"")]
            assert got[1].prev_kv["value"] == b"1"
            assert [e.revision for e in got] == [3, 4, 6]
            got = []
            async with client.watch("w/", prefix=True, start_revision=2) as watch:
                await asyncio.wait_for(_collect(watch, got, 4), DEADLINE)
            assert [e.revision for e in got] == [2, 3, 4, 6]
    run(main())


@pytest.mark.parametrize("sloppy", [False, True])
def test_watch_resumes_on_another_replica_without_gaps_or_duplicates(sockdir, sloppy):
    async def main():
        async with cluster_and_client(sockdir, timeout=DEADLINE, dial_timeout=0.3) as (cluster, client):
            for r in cluster.replicas:
                r.watch_repeats = 3 if sloppy else 0  # resends a few old revisions on resume
            got: list = []
            async with client.watch("w/", prefix=True) as watch:
                collector = asyncio.ensure_future(_collect(watch, got, 40))
                for i in range(20):
                    await client.put(f"w/{i}", str(i))
                await asyncio.wait_for(_until(lambda: len(got) >= 10), DEADLINE)
                serving = cluster.by_endpoint(watch.endpoint)
                await kill(cluster, client, serving)
                for i in range(20, 40):
                    await client.put(f"w/{i}", str(i))
                await asyncio.wait_for(collector, DEADLINE)
                assert watch.resumes >= 1 and watch.endpoint != serving.endpoint
            assert [e.kv["key"] for e in got] == [f"w/{i}".encode() for i in range(40)]
            revisions = [e.revision for e in got]
            assert revisions == sorted(set(revisions))
    run(main())


def test_watch_resume_from_a_compacted_revision_raises_compacted(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=DEADLINE, dial_timeout=0.3) as (cluster, client):
            got: list = []
            async with client.watch("w", prefix=True) as watch:
                await client.put("w1", "1")
                await asyncio.wait_for(_collect(watch, got, 1), DEADLINE)
                serving = cluster.by_endpoint(watch.endpoint)
                # the stream dies; meanwhile the history it needs is compacted away
                for r in cluster.replicas:
                    r.refuse_watches = True
                await kill(cluster, client, serving)
                await client.put("w2", "2")
                await client.put("w3", "3")
                await client.compact(4)
                for r in cluster.replicas:
                    r.refuse_watches = False
                with pytest.raises(sc.Compacted) as info:
                    await asyncio.wait_for(watch.__anext__(), DEADLINE)
                assert info.value.compact_revision == 4
                with pytest.raises(StopAsyncIteration):  # and it is over
                    await watch.__anext__()
    run(main())


def test_watch_from_compacted_revision_fails_at_once(sockdir):
    async def main():
        async with cluster_and_client(sockdir) as (cluster, client):
            for i in range(3):
                await client.put("k", str(i))
            await client.compact(3)
            with pytest.raises(sc.Compacted):
                async with client.watch("k", start_revision=2):
                    pass
    run(main())


def test_watch_gives_up_when_no_replica_takes_it_back(sockdir):
    async def main():
        async with cluster_and_client(sockdir, timeout=0.5, dial_timeout=0.1, resume_timeout=0.5) as (cluster, client):
            async with client.watch("k") as watch:
                for r in cluster.replicas:
                    await r.stop()
                with pytest.raises(wire.Unavailable):
                    await asyncio.wait_for(watch.__anext__(), DEADLINE)
    run(main())


def test_closing_the_client_ends_its_watches(sockdir):
    async def main():
        async with cluster_and_client(sockdir) as (_cluster, client):
            watch = client.watch("k")
            await watch.__aenter__()
            waiter = asyncio.ensure_future(watch.__anext__())
            await asyncio.sleep(0.05)
            await client.close()
            with pytest.raises(StopAsyncIteration):
                await asyncio.wait_for(waiter, DEADLINE)
    run(main())


# ------------------------------------------------------------------------------ end to end


def test_concurrent_history_through_the_client_is_linearizable(sockdir):
    """Checker and client together: several clients' puts, gets and CASes on a few keys."""
    async def main():
        async with cluster_and_client(sockdir, timeout=DEADLINE) as (cluster, client):
            history = History()

            async def worker(wid: int):
                for i in range(25):
                    key = f"k{(wid + i) % 3}"
                    call = history.call(wid, ("put", "get", "cas")[i % 3], key,
                                        None if i % 3 == 1 else f"{wid}-{i}")
                    if i % 3 == 0:
                        await client.put(key, call.value)
                        history.ok(call)
                    elif i % 3 == 1:
                        kv = await client.get(key)
                        history.ok(call, None if kv is None else kv["value"].decode())
                    else:
                        kv = await client.get(key)
                        expected = None if kv is None else kv["value"].decode()
                        call = history.call(wid, "cas", key, (expected, f"{wid}-{i}"))
                        cmp = compare(key.encode(), "version", "=", 0) if expected is None else \
                            compare(key.encode(), "value", "=", expected.encode())
                        resp = await client.txn([cmp], [put_op(key.encode(), f"{wid}-{i}".encode())], [])
                        history.ok(call, resp["succeeded"])

            await asyncio.gather(*(worker(w) for w in range(5)))
            ok, info = history.check()
            assert ok, info and info["message"]
    run(main())


def test_first_write_after_kill_9_of_the_leader_reaches_the_new_leader(state_dir):
    """Real replicas: kill -9 the leader while writers share one StoreClient. Writes in flight at
    the kill may end OutcomeUnknown and nothing else fails; a write sent after the kill is
    acknowledged by the new leader long before the dead one's dial timeout could have run out
    (the client neither waits for it nor trusts the survivors' stale word that it leads); and
    every acknowledged write is there afterwards."""
    with StoreCluster(state_dir, n=3, tick_ms=20, election_ticks=10) as cluster:
        cluster.start()
        name_of = {ep: name for name, ep in cluster.endpoints.items()}

        async def main():
            loop = asyncio.get_running_loop()
            async with sc.StoreClient(list(cluster.endpoints.values()), timeout=LONG,
                                      dial_timeout=LONG) as client:
                await client.put("warm", "up")
                dead = name_of[client.leader]
                acked: list[str] = []
                state = {"killed_at": None}
                after_kill = loop.create_future()

                async def writer(w: int) -> None:
                    for i in itertools.count():
                        if after_kill.done():
                            return
                        key, sent = f"w/{w}/{i}", loop.time()
                        try:
                            await client.put(key, "x")
                        except sc.OutcomeUnknown:
                            continue  # in flight at the kill: either way is right
                        acked.append(key)
                        killed_at = state["killed_at"]
                        if killed_at is not None and sent > killed_at and not after_kill.done():
                            after_kill.set_result(client.leader)

                writers = [loop.create_task(writer(w)) for w in range(3)]
                try:
                    await asyncio.wait_for(_until(lambda: len(acked) >= 30), DEADLINE)
                    state["killed_at"] = loop.time()
                    await loop.run_in_executor(None, cluster.kill, dead)
                    await asyncio.wait([after_kill, *writers], timeout=DEADLINE,
                                       return_when=asyncio.FIRST_COMPLETED)
                    for task in writers:
                        if task.done():
                            task.result()  # a writer's unexpected error, if that is what ended the wait
                    assert after_kill.done(), "no write sent after the kill was acknowledged in time"
                    await asyncio.gather(*writers)
                finally:
                    for task in writers:
                        task.cancel()
                    await asyncio.gather(*writers, return_exceptions=True)
                assert name_of[after_kill.result()] != dead
                stored = {kv["key"].decode() for kv in (await client.range("w/", prefix=True))["kvs"]}
                assert set(acked) <= stored
        run(main())


def test_sync_client(sockdir):
    with ThreadedCluster(sockdir) as tc:
        with sc.SyncStoreClient(",".join(tc.endpoints)) as client:
            client.put("a", "1")
            assert client.get("a")["value"] == b"1"
            with client.watch("a", start_revision=1) as watch:
                ev = next(watch)
                assert (ev.type, ev.kv["value"]) == ("PUT", b"1")
                client.put("a", "2")
                assert next(watch).kv["value"] == b"2"
            assert [s["role"] for s in client.status_all()] == ["leader", "follower", "follower"]
        with pytest.raises(RuntimeError):
            client.get("a")


def test_error_translation_understands_both_spellings():
    by_reason = sc._translate(wire.NotFound("requested lease not found", {"id": 7, "reason": "LeaseNotFound"}))
    assert isinstance(by_reason, sc.LeaseNotFound) and by_reason.code == "NotFound"
    by_code = sc._translate(wire.WireError("gone", {"compact_revision": 9}, code="Compacted"))
    assert isinstance(by_code, sc.Compacted) and isinstance(by_code, wire.Gone) and by_code.compact_revision == 9
    plain = wire.Unavailable("no leader", {"reason": "slow watcher"})
    assert sc._translate(plain) is plain
    other = wire.NotFound("no member x")
    assert sc._translate(other) is other


def test_bad_endpoints_are_refused_up_front():
    with pytest.raises(ValueError):
        sc.StoreClient([])
    with pytest.raises(ValueError):
        sc.StoreClient("udp://127.0.0.1:1")
    assert sc.StoreClient(" ipc:///tmp/a.sock, ipc:///tmp/a.sock,ipc:///tmp/b.sock").endpoints == [
        "ipc:///tmp/a.sock", "ipc:///tmp/b.sock"]


def test_a_request_waiting_for_a_connection_that_drops_goes_elsewhere_at_once():
    """libzmq removes a dead replica's connection before the loop hears of the drop, so a write
    can start waiting to be sent to a replica that just died. The drop ends that wait (not sent:
    Unavailable, so the StoreClient tries another replica) instead of the dial timeout."""
    sockdir = tempfile.mkdtemp(prefix="kd-")
    lost = []

    async def main():
        ctx = zmq.asyncio.Context()
        client = sc._ReplicaClient(wire.ipc_endpoint(sockdir, "gone.sock"), dial_timeout=600.0,
                                   on_lost=lost.append, timeout=600.0, context=ctx)
        try:
            call = asyncio.ensure_future(client.call("put", {"key": b"k"}))
            while not client.unreachable:  # nobody listens: the request waits to be sent
                await asyncio.sleep(0.01)
            client._on_monitor_event([zmq.EVENT_DISCONNECTED.to_bytes(2, "little") + bytes(4), b""])
            with pytest.raises(wire.Unavailable, match="not sent"):
                await asyncio.wait_for(call, DEADLINE)
            assert lost == [client.endpoint] and not client.unreachable
        finally:
            await client.close()
            ctx.destroy(linger=0)

    try:
        run(main())
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)
