"""store.server: real replica processes (3 by default) driven over the wire."""
from __future__ import annotations

import asyncio
import os
import random
import signal
import threading
import time

import msgpack
import pytest
import zmq

from kubemu import wire
from store.errors import NotLeader
from store.mvcc import compare, put_op, range_op

from ..conftest import DEADLINE, wait_for
from .cluster import StoreCluster

FAST = {"tick_ms": 20, "election_ticks": 10}


@pytest.fixture
def make_cluster(state_dir):
    made = []

    def make(n: int = 3, **flags) -> StoreCluster:
        c = StoreCluster(state_dir, n=n, **{**FAST, **flags})
        made.append(c)
        return c
    yield make
    for c in made:
        c.stop()


def kvs(resp) -> dict[bytes, bytes]:
    return {kv["key"]: kv["value"] for kv in resp["kvs"]}


def test_elect_round_trips_not_leader_and_reads(make_cluster):
    c = make_cluster().start()
    leader = c.leader()
    sts = c.statuses()
    assert sorted(sts) == c.names
    assert [n for n, s in sts.items() if s["role"] == "leader"] == [leader]
    assert all(s["leader"] == leader and s["leader_endpoint"] == c.endpoints[leader] for s in sts.values())
    assert {m["name"] for m in c.call(leader, "member_list")} == set(c.names)

    # put / range / delete / txn round trips through the leader
    r = c.write("put", {"key": b"a", "value": b"1"})
    rev = r["header"]["revision"]
    got = c.write("range", {"key": b"a"})
    assert kvs(got) == {b"a": b"1"} and got["kvs"][0]["mod_revision"] == rev
    c.write("put", {"key": b"b", "value": b"2"})
    prev = c.write("put", {"key": b"a", "value": b"3", "prev_kv": True})
    assert prev["prev_kv"]["value"] == b"1"
    assert kvs(c.write("range", {"key": b"a", "range_end": b"c"})) == {b"a": b"3", b"b": b"2"}
    d = c.write("delete_range", {"key": b"b", "prev_kv": True})
    assert d["deleted"] == 1 and d["prev_kvs"][0]["value"] == b"2"
    t = c.write("txn", {"compare": [compare(b"a", "value", "=", b"3")],
                        "success": [put_op(b"t", b"ok"), range_op(b"a")], "failure": []})
    assert t["succeeded"] and t["responses"][1]["kvs"][0]["value"] == b"3"
    t = c.write("txn", {"compare": [compare(b"a", "value", "=", b"nope")], "success": [put_op(b"t", b"bad")],
                        "failure": [put_op(b"t", b"else")]})
    assert not t["succeeded"]
    assert kvs(c.write("range", {"key": b"t"})) == {b"t": b"else"}

    # a write to a follower: NotLeader naming the leader (definitely not executed)
    leader = c.leader()
    follower = next(n for n in c.names if n != leader)
    with pytest.raises(NotLeader) as exc:
        c.call(follower, "put", {"key": b"f", "value": b"x"})
    assert exc.value.endpoint == c.endpoints[exc.value.leader] and exc.value.leader != follower
    assert isinstance(exc.value, wire.Unavailable)

    # linearizable reads on a follower see every acknowledged write at once
    for i in range(20):
        c.write("put", {"key": b"lin", "value": b"%d" % i})
        assert kvs(c.call(follower, "range", {"key": b"lin"})) == {b"lin": b"%d" % i}
    # serializable reads are local (eventually up to date)
    wait_for(lambda: kvs(c.call(follower, "range", {"key": b"lin", "serializable": True})) == {b"lin": b"19"})

    # errors map to typed wire errors
    with pytest.raises(wire.TooLarge):
        c.write("put", {"key": b"big", "value": b"x" * (1536 * 1024)})
    with pytest.raises(wire.Invalid):
        c.write("range", {"key": b"a", "revision": 10_000})
    with pytest.raises(wire.Invalid):
        c.write("put", {"key": "not bytes", "value": b""})
    with pytest.raises(wire.NotFound):
        c.write("put", {"key": b"l", "value": b"", "lease": 12345})
    assert c.call(leader, "status")["fsyncs"] > 0


def test_kill_leader_new_leader_and_catch_up(make_cluster):
    c = make_cluster().start()
    for i in range(20):
        c.write("put", {"key": b"k%02d" % i, "value": b"v"})
    old = c.leader()
    old_term = c.status(old)["term"]
    c.kill(old, signal.SIGKILL)
    new = c.leader(exclude=(old,))
    assert new != old and c.status(new)["term"] > old_term
    for i in range(20, 40):
        c.write("put", {"key": b"k%02d" % i, "value": b"v"})
    c.restart(old)
    wait_for(lambda: (c.status(old) or {}).get("applied_index", 0) >= c.status(new)["commit_index"])
    got = c.call(old, "range", {"key": b"k", "range_end": b"l", "serializable": True})
    assert sorted(kvs(got)) == [b"k%02d" % i for i in range(40)]
    assert c.status(old)["mode"] == "restart"


def _writer(c: StoreCluster, acked: list, stop: threading.Event) -> None:
    clients = {n: wire.SyncClient(ep, timeout=2) for n, ep in c.endpoints.items()}
    target = c.names[0]
    i = 0
    try:
        while not stop.is_set():
            key = b"w/%06d" % i
            try:
                clients[target].call("put", {"key": key, "value": b"%d" % i})
                acked.append(key)
                i += 1
            except NotLeader as err:
                target = err.leader or random.choice(c.names)
            except wire.WireError:
                i += 1  # outcome unknown or unavailable: never counted as acknowledged
                target = random.choice(c.names)
                time.sleep(0.01)
    finally:
        for cl in clients.values():
            cl.close()


def test_kill_all_under_writer_loses_no_acknowledged_write(make_cluster):
    c = make_cluster().start()
    acked: list[bytes] = []
    stop = threading.Event()
    th = threading.Thread(target=_writer, args=(c, acked, stop), daemon=True)
    th.start()
    try:
        wait_for(lambda: len(acked) >= 60, message="60 acknowledged writes")
        for name in c.names:
            c.kill(name, signal.SIGKILL, wait=False)
        for name in c.names:
            c.kill(name)
    finally:
        stop.set()
        th.join(DEADLINE)
    snapshot = list(acked)
    assert len(snapshot) >= 60
    for name in c.names:
        c.restart(name)
    c.leader()
    got = kvs(c.write("range", {"key": b"w/", "range_end": b"w0"}))
    missing = [k for k in snapshot if k not in got]
    assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
    for name in c.names:  # every replica re-applied its log
        wait_for(lambda: set(snapshot) <= set(kvs(c.call(name, "range", {"key": b"w/", "range_end": b"w0",
                                                                           "serializable": True}))))


def test_unsafe_no_fsync_serves_without_syncing_and_says_so(make_cluster):
    c = make_cluster(unsafe_no_fsync=True).start()
    for i in range(20):
        c.write("put", {"key": b"n%02d" % i, "value": b"v"})
    leader = c.leader()
    st = c.status(leader)
    assert st["unsafe_no_fsync"] is True and st["fsyncs"] == 0 and st["persisted_entries"] >= 20
    assert "--unsafe-no-fsync" in c.log_text(leader)


def test_wiped_follower_rejoins_via_snapshot(make_cluster):
    c = make_cluster(snapshot_count=10).start()
    for i in range(60):
        c.write("put", {"key": b"s%02d" % i, "value": b"v%d" % i})
    leader = c.leader()
    wait_for(lambda: c.status(leader)["snapshot_index"] > 0, message="a compacted log on the leader")
    victim = next(n for n in c.names if n != leader)
    c.kill(victim)
    c.wipe(victim)
    assert not c.data_dir(victim).exists()
    for i in range(60, 70):
        c.write("put", {"key": b"s%02d" % i, "value": b"v%d" % i})
    c.restart(victim, join=True)
    want = {b"s%02d" % i: b"v%d" % i for i in range(70)}
    wait_for(lambda: kvs(c.call(victim, "range", {"key": b"s", "range_end": b"t", "serializable": True})) == want)
    st = c.status(victim)
    assert st["mode"] == "join" and st["snapshots_restored"] >= 1
    assert "restoring from the leader's snapshot" in c.log_text(victim)
    c.write("put", {"key": b"after", "value": b"x"})  # and it keeps up afterwards
    assert kvs(c.call(victim, "range", {"key": b"after"})) == {b"after": b"x"}


def test_a_wiped_follower_rejoins_from_a_leader_restarted_after_compacting(make_cluster):
    # A replica keeps no snapshot data of its own on disk (the state machine is there): a
    # restarted leader encodes one when a follower turns out to need it.
    c = make_cluster(snapshot_count=10).start()
    for i in range(40):
        c.write("put", {"key": b"s%02d" % i, "value": b"v%d" % i})
    wait_for(lambda: all((c.status(n) or {}).get("snapshot_index", 0) > 0 for n in c.names),
             message="every replica compacted its log")
    for name in c.names:
        c.kill(name)
    for name in c.names:
        c.restart(name)
    leader = c.leader()
    victim = next(n for n in c.names if n != leader)
    c.kill(victim)
    c.wipe(victim)
    c.write("put", {"key": b"s40", "value": b"v40"})
    c.restart(victim, join=True)
    want = {b"s%02d" % i: b"v%d" % i for i in range(41)}
    wait_for(lambda: kvs(c.call(victim, "range", {"key": b"s", "range_end": b"t", "serializable": True})) == want)
    assert c.status(victim)["snapshots_restored"] >= 1
    assert c.status(leader)["snapshots_taken"] >= 1


async def _next(stream: wire.Stream, timeout: float = DEADLINE):
    return await asyncio.wait_for(stream.__anext__(), timeout)


async def _collect_events(stream: wire.Stream, n: int) -> list[dict]:
    events = []
    while len(events) < n:
        item = await _next(stream)
        assert "events" in item, item
        assert item["header"]["revision"] >= item["events"][-1]["kv"]["mod_revision"]
        events += item["events"]
    return events


def test_watch_replays_history_then_live_and_compacted_is_gone(make_cluster):
    c = make_cluster().start()
    revs = [c.write("put", {"key": b"w/%d" % i, "value": b"%d" % i})["header"]["revision"] for i in range(10)]
    c.write("put", {"key": b"other", "value": b"x"})  # outside the watched range
    follower = next(n for n in c.names if n != c.leader())

    async def watch_from(start: int):
        async with wire.Client(c.endpoints[follower], timeout=10) as cl:
            stream = cl.stream("watch", {"key": b"w/", "range_end": b"w0", "start_revision": start,
                                         "prev_kv": True})
            created = await _next(stream)
            assert created["created"] is True and created["header"]["revision"] >= revs[-1]
            history = await _collect_events(stream, 10 - revs.index(start))
            live_revs = []
            for i in range(10, 15):
                r = await asyncio.to_thread(c.write, "put", {"key": b"w/%d" % (i % 3), "value": b"live%d" % i})
                live_revs.append(r["header"]["revision"])
            await asyncio.to_thread(c.write, "delete_range", {"key": b"w/9"})
            live = await _collect_events(stream, 6)
            await stream.aclose()
            return history, live, live_revs

    history, live, live_revs = asyncio.run(watch_from(revs[3]))
    assert [e["kv"]["mod_revision"] for e in history] == revs[3:]
    assert [e["kv"]["key"] for e in history] == [b"w/%d" % i for i in range(3, 10)]
    assert all(e["type"] == "PUT" and e["prev_kv"] is None for e in history)
    assert [e["kv"]["mod_revision"] for e in live[:5]] == live_revs
    assert [e["kv"]["value"] for e in live[:5]] == [b"live%d" % i for i in range(10, 15)]
    assert live[0]["prev_kv"]["value"] == b"1"  # w/1 was "1" before the first live put
    assert live[5]["type"] == "DELETE" and live[5]["kv"]["key"] == b"w/9"

    c.write("compact", {"revision": revs[5]})

    async def watch_compacted(start: int):
        async with wire.Client(c.endpoints[follower], timeout=10) as cl:
            stream = cl.stream("watch", {"key": b"w/", "range_end": b"w0", "start_revision": start})
            with pytest.raises(wire.Gone) as exc:
                await _next(stream)
            return exc.value

    err = asyncio.run(watch_compacted(revs[2]))
    assert err.details["compact_revision"] == revs[5]
    err = asyncio.run(watch_compacted(revs[5]))
    assert err.details["compact_revision"] == revs[5]
    with pytest.raises(wire.Gone):
        c.write("range", {"key": b"w/0", "revision": revs[1]})


def test_lease_expiry_deletes_and_keepalive_keeps(make_cluster):
    c = make_cluster().start()
    leader = c.leader()
    g = c.write("lease_grant", {"ttl": 1})
    lid = g["id"]
    assert lid > 0 and g["ttl"] == 1
    put = c.write("put", {"key": b"leased", "value": b"v", "lease": lid})
    assert {x["id"] for x in c.call(leader, "lease_leases")["leases"]} == {lid}

    async def wait_delete():
        async with wire.Client(c.endpoints[leader], timeout=10) as cl:
            stream = cl.stream("watch", {"key": b"leased", "start_revision": put["header"]["revision"]})
            await _next(stream)  # created
            events = await _collect_events(stream, 2)
            await stream.aclose()
            return events

    events = asyncio.run(wait_delete())
    assert [e["type"] for e in events] == ["PUT", "DELETE"]
    assert c.write("range", {"key": b"leased"})["kvs"] == []
    wait_for(lambda: c.write("lease_leases", {})["leases"] == [])
    with pytest.raises(wire.NotFound):
        c.call(c.leader(), "lease_keepalive", {"id": lid})

    # with keepalives the key outlives its TTL several times over
    lid2 = c.write("lease_grant", {"ttl": 1, "id": 4242})["id"]
    assert lid2 == 4242
    c.write("put", {"key": b"kept", "value": b"v", "lease": lid2})
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        r = c.write("lease_keepalive", {"id": lid2})
        assert r["id"] == lid2 and r["ttl"] == 1
        time.sleep(0.2)
    assert kvs(c.write("range", {"key": b"kept"})) == {b"kept": b"v"}
    wait_for(lambda: c.write("range", {"key": b"kept"})["kvs"] == [], message="expiry once keepalives stop")
    revoked = c.write("lease_grant", {"ttl": 60})["id"]
    c.write("put", {"key": b"rv", "value": b"v", "lease": revoked})
    c.write("lease_revoke", {"id": revoked})
    assert c.write("range", {"key": b"rv"})["kvs"] == []


def _garbage_frames() -> list[bytes]:
    p = lambda obj: msgpack.packb(obj, use_bin_type=True)  # noqa: E731
    rng = random.Random(7)
    frames = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 300))) for _ in range(30)]
    frames += [b"", p({"a": 1}), p([1]), p([1, 2, "raft"]), p([1, 3, "raft", "notamap"]), p([2, 4, "raft", {}]),
               p([1, 5, "raft", {"msgs": "x"}]), p([1, 6, "nosuch", {}]), p([99, 7, "raft", {}]), p("str")]
    return frames


def _bogus_raft_calls(target: str, other: str) -> list[tuple[str, dict]]:
    big = (1 << 63)
    calls = [
        ("raft", {"msgs": [{"type": 99, "to": target, "from": other, "term": 1}]}),
        ("raft", {"msgs": [{"type": 7, "to": target, "from": "intruder", "term": 5}]}),
        ("raft", {"msgs": [{"type": 7, "to": "someone-else", "from": other, "term": 5}]}),
        ("raft", {"msgs": [{"type": 7, "to": target, "from": other, "term": big}]}),
        ("raft", {"msgs": [{"type": 5, "to": target, "from": other, "term": 3, "index": 1,
                            "entries": [[3, 7, 0, b"x"]]}]}),  # entries not contiguous
        ("raft", {"msgs": [{"type": 5, "to": target, "from": other, "term": 1, "entries": [[1, 1, 1, b"\x00"]]}]}),
        ("raft", {"msgs": [{"type": 9, "to": target, "from": other, "term": 1,
                            "snapshot": {"index": 5, "term": 1, "voters": [other], "data": b"junk"}}]}),
        ("raft", {"msgs": [{"type": 1, "to": target, "from": other, "term": 1, "bogus": 1}]}),
        ("raft", {"msgs": [None, 1, "x"]}),
        ("raft", {"msgs": []}),
        ("raft_snapshot", {"sender": other, "id": 1, "seq": 3, "last": True, "data": b"x"}),
        ("raft_snapshot", {"sender": other, "id": 1, "seq": 0, "last": True, "data": b"\xc1"}),
        ("raft_snapshot", {"sender": other, "id": 2, "seq": 0, "last": True, "data": msgpack.packb(
            {"type": 9, "to": target, "from": other, "term": 1,
             "snapshot": {"index": 5, "term": 1, "voters": [other], "data": b"not an envelope"}})}),
        ("raft_snapshot", {"sender": "intruder", "id": 1, "seq": 0, "last": True, "data": b""}),
        ("raft_snapshot", {"sender": other, "id": "x", "seq": 0, "last": True, "data": b""}),
        ("raft", {"bogus": 1}),
    ]
    return calls


def test_garbage_at_endpoints_does_not_hurt(make_cluster):
    c = make_cluster().start()
    c.write("put", {"key": b"g", "value": b"before"})
    ctx = zmq.Context()
    try:
        for name in c.names:
            other = next(n for n in c.names if n != name)
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RCVTIMEO, 5000)
            sock.connect(c.endpoints[name])
            for frame in _garbage_frames():
                sock.send(frame)
            calls = _bogus_raft_calls(name, other)
            for i, (method, params) in enumerate(calls):
                sock.send(msgpack.packb([1, 1000 + i, method, params], use_bin_type=True))
            replies = {}
            while len(replies) < len(calls):
                msg = msgpack.unpackb(sock.recv(), raw=False)
                if isinstance(msg, list) and len(msg) >= 2 and isinstance(msg[1], int) and msg[1] >= 1000:
                    replies[msg[1]] = msg
            sock.close()
            for i, (method, params) in enumerate(calls):
                msg = replies[1000 + i]
                if params == {"msgs": []}:
                    assert msg[0] == wire.REPLY
                else:
                    assert msg[0] == wire.ERROR and msg[2] == "BadRequest", (method, params, msg)
            assert all(c.alive(n) for n in c.names)
    finally:
        ctx.destroy(linger=0)
    # the cluster still elects, serves and agrees
    for name in c.names:
        assert c.status(name)["bad_peer_input"] >= 10
    for i in range(10):
        c.write("put", {"key": b"g", "value": b"after%d" % i})
    for name in c.names:
        assert kvs(c.call(name, "range", {"key": b"g"})) == {b"g": b"after9"}
    old = c.leader()
    c.kill(old)
    c.leader(exclude=(old,))
    c.write("put", {"key": b"g", "value": b"final"})
    assert kvs(c.write("range", {"key": b"g"})) == {b"g": b"final"}


def test_sigterm_leader_hands_off_and_exits_0(make_cluster):
    c = make_cluster().start()
    c.write("put", {"key": b"x", "value": b"1"})
    old = c.leader()
    term = c.status(old)["term"]
    code = c.kill(old, signal.SIGTERM)
    assert code == 0
    text = c.log_text(old)
    moved = text.find("leadership moved to")
    assert moved != -1 and moved < text.find(f"{old} stopped"), text[-2000:]
    new = c.leader(exclude=(old,))
    assert new != old and c.status(new)["term"] > term
    c.write("put", {"key": b"x", "value": b"2"})
    # a follower's SIGTERM exits 0 as well
    follower = next(n for n in c.names if n not in (old, new))
    assert c.kill(follower, signal.SIGTERM) == 0


def test_member_add_join_move_leader_and_remove(make_cluster):
    c = make_cluster(snapshot_count=20).start()
    for i in range(30):
        c.write("put", {"key": b"m%02d" % i, "value": b"v"})
    c.add_member_process("store-3")
    ep = c.endpoints["store-3"]
    res = c.write("member_add", {"name": "store-3", "endpoint": ep})
    assert {"name": "store-3", "endpoint": ep} in res["members"]
    c.spawn("store-3", join=True)
    wait_for(lambda: len(kvs(c.call("store-3", "range", {"key": b"m", "range_end": b"n",
                                                           "serializable": True}))) == 30)
    with pytest.raises(wire.Conflict):
        c.write("member_add", {"name": "store-3", "endpoint": ep})
    leader = c.leader()
    moved = c.call(leader, "move_leader", {"to": "store-3"})
    assert moved["leader"] == "store-3"
    assert c.leader() == "store-3"
    c.write("put", {"key": b"m99", "value": b"v"})
    res = c.write("member_remove", {"name": "store-0"})
    assert "store-0" not in {m["name"] for m in res["members"]}
    for name in c.names[1:]:
        wait_for(lambda: "store-0" not in {m["name"] for m in c.call(name, "member_list")})
    c.kill("store-0")
    c.write("put", {"key": b"m98", "value": b"v"})
    assert len(kvs(c.write("range", {"key": b"m", "range_end": b"n"}))) == 32


def test_restart_without_join_after_wipe_joins_instead_of_bootstrapping(make_cluster):
    c = make_cluster().start()
    c.write("put", {"key": b"z", "value": b"1"})
    victim = next(n for n in c.names if n != c.leader())
    c.kill(victim)
    c.wipe(victim)
    c.restart(victim)  # no --join: the peers answer that the cluster is not fresh
    wait_for(lambda: kvs(c.call(victim, "range", {"key": b"z", "serializable": True})) == {b"z": b"1"})
    assert c.status(victim)["mode"] == "join"
    assert "joining instead of bootstrapping" in c.log_text(victim)


def test_cli_rejects_bad_flags(state_dir):
    import subprocess
    import sys
    env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir))
    out = subprocess.run([sys.executable, "-m", "store", "--name", "a", "--data-dir", str(state_dir / "a"),
                          "--listen", f"ipc://{state_dir}/a.sock", "--peers", f"b=ipc://{state_dir}/b.sock"],
                         env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert out.returncode == 2 and "must list this replica" in out.stderr


def test_auto_compaction_periodic_keeps_recent_history(make_cluster):
    c = make_cluster(auto_compaction_retention="1s").start()
    first = c.write("put", {"key": b"ac", "value": b"0"})["header"]["revision"]
    for i in range(1, 20):
        c.write("put", {"key": b"ac", "value": b"%d" % i})
    leader = c.leader()
    wait_for(lambda: c.status(leader)["compact_revision"] >= first, message="an automatic compaction")
    assert "auto-compaction: compacting at revision" in c.log_text(leader)
    with pytest.raises(wire.Gone):
        c.write("range", {"key": b"ac", "revision": first - 1})
    assert kvs(c.write("range", {"key": b"ac"})) == {b"ac": b"19"}


def test_single_replica_notifies_ready_and_watchdog(make_cluster, state_dir):
    import socket
    path = str(state_dir / "n.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(DEADLINE)
    try:
        c = make_cluster(n=1)
        c.spawn("store-0", env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "200000"})
        got = []
        while not any(m.startswith("WATCHDOG=1") for m in got):
            got.append(sock.recv(4096).decode())
        assert got[0].startswith("READY=1")
    finally:
        sock.close()
    assert c.leader() == "store-0"  # a one-member cluster elects itself
    c.write("put", {"key": b"solo", "value": b"1"})
    assert kvs(c.call("store-0", "range", {"key": b"solo"})) == {b"solo": b"1"}


def test_five_replicas_survive_two_failures(make_cluster):
    c = make_cluster(n=5).start()
    c.write("put", {"key": b"five", "value": b"1"})
    leader = c.leader()
    down = [leader] + [n for n in c.names if n != leader][:1]
    for name in down:
        c.kill(name)
    c.leader(exclude=tuple(down))
    c.write("put", {"key": b"five", "value": b"2"})
    for name in c.running():
        assert kvs(c.call(name, "range", {"key": b"five"})) == {b"five": b"2"}


def test_parse_retention_and_peers():
    from store.server import parse_peers, parse_retention
    assert parse_retention("300s") == ("periodic", 300.0)
    assert parse_retention("5m") == ("periodic", 300.0)
    assert parse_retention("1h") == ("periodic", 3600.0)
    assert parse_retention("10000") == ("revision", 10000.0)
    assert parse_retention("0") == ("off", 0.0)
    with pytest.raises(ValueError):
        parse_retention("soon")
    assert parse_peers("a=ipc:///x,b=tcp://127.0.0.1:1") == {"a": "ipc:///x", "b": "tcp://127.0.0.1:1"}
    for bad in ("", "a", "a=x,a=y", "=x"):
        with pytest.raises(ValueError):
            parse_peers(bad)


def test_slow_watcher_is_cancelled():
    from store.mvcc import Event, make_kv
    from store.server import WATCH_QUEUE_ITEMS, KeyRange, _Watcher

    async def run():
        w = _Watcher(KeyRange.of(b"a", b"\0"), prev_kv=False, start=2)
        ev = lambda rev, key=b"a": Event("PUT", make_kv(key, b"v", rev, rev, 1, 0), None)  # noqa: E731
        w.offer([ev(1), ev(2, b"0")], 2)  # below start, and outside the range: nothing queued
        assert not w.items
        w.offer([ev(2)], 2)
        assert (await w.next())["events"][0]["kv"]["mod_revision"] == 2
        for rev in range(3, 3 + WATCH_QUEUE_ITEMS + 1):
            w.offer([ev(rev)], rev)
        with pytest.raises(wire.Unavailable):
            await w.next()

    asyncio.run(run())


def test_a_watcher_of_big_values_is_cancelled_by_bytes():
    from store._watch_hub import WATCH_QUEUE_BYTES
    from store.mvcc import Event, make_kv
    from store.server import KeyRange, _Watcher

    async def run():
        w = _Watcher(KeyRange.of(b"a", b"\0"), prev_kv=False, start=1)
        big = b"v" * (1024 * 1024)
        for rev in range(1, WATCH_QUEUE_BYTES // len(big)):  # just under the bound: all kept
            w.offer([Event("PUT", make_kv(b"a", big, rev, rev, 1, 0), None)], rev)
        assert (await w.next())["events"][0]["kv"]["mod_revision"] == 1
        for rev in range(100, 103):
            w.offer([Event("PUT", make_kv(b"a", big, rev, rev, 1, 0), None)], rev)
        with pytest.raises(wire.Unavailable, match="MiB behind"):
            await w.next()
        assert not w.items and w.queued_bytes == 0  # the memory is let go at once

        # one applied batch over the bound, to a watcher that has nothing queued, is no backlog
        idle = _Watcher(KeyRange.of(b"a", b"\0"), prev_kv=False, start=1)
        batch = [Event("PUT", make_kv(b"a", big, rev, rev, 1, 0), None)
                 for rev in range(1, WATCH_QUEUE_BYTES // len(big) + 3)]
        idle.offer(batch, len(batch))
        assert len((await idle.next())["events"]) == len(batch)

    asyncio.run(run())


STORE_CALLS = {
    "put": {"key": b"k", "value": b"v", "lease": 0, "prev_kv": False},
    "range": {"key": b"k", "range_end": b"l", "revision": 0, "limit": 0, "count_only": False, "keys_only": False,
              "serializable": False},
    "delete_range": {"key": b"zz", "range_end": b"zzz", "prev_kv": False},
    "txn": {"compare": [], "success": [], "failure": []},
    "compact": {"revision": 1, "physical": False},
    "lease_grant": {"ttl": 60, "id": 0},
    "lease_revoke": {"id": 1},
    "lease_keepalive": {"id": 1},
    "member_add": {"name": "x", "endpoint": "ipc:///nonexistent/x.sock"},
    "member_remove": {"name": "nobody"},
    "move_leader": {"to": "nobody"},
    "raft_snapshot": {"sender": "s1", "id": 1, "seq": 0, "last": True, "data": b""},
    "raft": {"msgs": []},
}


def test_wrong_typed_params_are_bad_input_and_the_replica_keeps_serving(make_cluster):
    from tests.kubemu.paramfuzz import BAD_INPUT, wrong_typed_calls
    c = make_cluster(1).start()
    name = c.leader()
    c.write("put", {"key": b"k", "value": b"before"})
    codes = {}
    for method, params in wrong_typed_calls(STORE_CALLS):
        try:
            c.call(name, method, params)
        except wire.WireError as err:
            codes[(method, repr(params))] = err.code
    assert codes and all(code in BAD_INPUT for code in codes.values()), \
        {k: v for k, v in codes.items() if v not in BAD_INPUT}
    with wire.SyncClient(c.endpoints[name], timeout=DEADLINE) as client:
        for method, params in wrong_typed_calls({"watch": {"key": b"k", "range_end": b"l", "start_revision": 0,
                                                          "prev_kv": False}}, frozenset({"range_end"})):
            with pytest.raises(wire.WireError) as info:
                with client.stream(method, params) as stream:
                    next(iter(stream))
            assert info.value.code in BAD_INPUT, (params, info.value)
    c.write("put", {"key": b"k", "value": b"after"})
    assert kvs(c.call(name, "range", {"key": b"k"})) == {b"k": b"after"}
    assert "Traceback" not in c.log_text(name)


def test_a_watcher_that_never_reads_pins_no_memory(make_cluster):
    """A raw client opens a watch and stops reading while 600 MiB of events flow: the
    replica's memory stays bounded, the watch ends with the slow-consumer error the client
    reads once it reads again, the replica keeps serving, and its memory comes back."""
    import psutil
    # the Raft log is compacted often, so it does not hold the events in memory itself
    c = make_cluster(1, unsafe_no_fsync=True, snapshot_count=20).start()
    name = c.leader()
    proc = psutil.Process(c.procs[name].pid)
    value = os.urandom(1024 * 1024)
    # the same writes first without the watcher: the write path's own memory (LevelDB, the
    # allocator's high-water mark) is then part of the baseline
    for i in range(600):
        c.call(name, "put", {"key": b"w/%d" % (i % 10), "value": value})
    baseline = proc.memory_info().rss
    ctx = zmq.Context()
    raw = ctx.socket(zmq.DEALER)
    raw.setsockopt(zmq.LINGER, 0)
    raw.setsockopt(zmq.RCVHWM, 1)  # the raw client itself holds next to nothing either
    raw.setsockopt(zmq.RCVBUF, 64 * 1024)
    raw.setsockopt(zmq.RCVTIMEO, int(DEADLINE * 1000))
    try:
        raw.connect(c.endpoints[name])
        raw.send(wire.encode_stream(1, "watch", {"key": b"w/", "range_end": b"w0"}))
        assert wire.decode_reply([raw.recv()])[0] == wire.STREAM_START
        assert wire.decode_reply([raw.recv()])[2]["created"]
        peak = baseline
        for i in range(600):  # 600 MiB of events for the watcher that does not read
            c.call(name, "put", {"key": b"w/%d" % (i % 10), "value": value})
            if i % 10 == 0:
                peak = max(peak, proc.memory_info().rss)
        # generous: LevelDB's two 64 MiB memtables come and go with the writes, and the
        # allocator keeps what they freed (measured 280-305 MiB on a loaded 2-core machine); a
        # watcher that pinned the events would hold all 600 MiB of them
        assert peak - baseline < 400 * 2**20, f"RSS grew {(peak - baseline) / 2**20:.0f} MiB"
        # reading again: what was queued, then the error that ended the watch
        while True:
            kind, rid, value_or_err = wire.decode_reply([raw.recv()])
            if kind in (wire.STREAM_ITEM, wire.PING):
                continue
            assert kind == wire.ERROR and rid == 1, (kind, value_or_err)
            assert isinstance(value_or_err, wire.Unavailable), value_or_err
            assert value_or_err.details["reason"] in ("SlowConsumer", "slow watcher"), value_or_err
            break
    finally:
        raw.close(0)
        ctx.term()
    c.call(name, "put", {"key": b"after", "value": b"1"})
    assert kvs(c.call(name, "range", {"key": b"after"})) == {b"after": b"1"}
    wait_for(lambda: proc.memory_info().rss - baseline < 150 * 2**20,
             message="the replica's memory to come back after the watcher left")
    assert "Traceback" not in c.log_text(name)


def test_defragment_shrinks_the_files_after_a_compaction_and_keeps_every_key(make_cluster):
    # 8 keys overwritten 40 times with 16 KiB that snappy cannot shrink: ~5 MB of history (and as
    # much again in the Raft log, which snapshot_count=20 lets the replicas compact). After a
    # compaction at the last revision only the 8 last values are live, but the files still hold
    # everything until LevelDB merges them: defragment must get the size down to the live data.
    c = make_cluster(snapshot_count=20).start()
    last = {}
    for i in range(320):
        key, value = b"d/%d" % (i % 8), os.urandom(16 << 10)
        last[key] = (value, c.write("put", {"key": key, "value": value})["header"]["revision"])
    c.write("put", {"key": b"e/kept", "value": b"small"})
    revision = c.status(c.leader())["revision"]
    c.write("compact", {"revision": revision})
    wait_for(lambda: all((c.status(n) or {}).get("compact_revision") == revision for n in c.names),
             message="the compaction applied everywhere")
    for name in c.names:
        resp = c.call(name, "defragment", timeout=DEADLINE)
        assert resp["name"] == name
        assert resp["db_size_before"] > 5_000_000, resp  # the history is still in the files
        assert resp["db_size_after"] < resp["db_size_before"] // 3, resp
        assert c.status(name)["db_size"] < resp["db_size_before"] // 3
        got = c.call(name, "range", {"key": b"d/", "range_end": b"d0", "serializable": True})
        assert {kv["key"]: (kv["value"], kv["mod_revision"]) for kv in got["kvs"]} == last
        assert c.call(name, "range", {"key": b"e/kept", "serializable": True})["kvs"][0]["value"] == b"small"
        assert c.status(name)["revision"] == revision
    c.write("put", {"key": b"after", "value": b"x"})  # the store goes on writing
    with pytest.raises(wire.Gone):
        c.write("range", {"key": b"d/0", "revision": revision - 1})
