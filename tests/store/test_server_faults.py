"""Injected faults on real store replicas (3 processes): partitions, delays, a full disk, a
failing fsync and power loss, driven through the `fault` wire method and `kubemu store fault`."""
from __future__ import annotations

import signal

import pytest
from click.testing import CliRunner

from kubemu import wire
from kubemu.cli import main
from store.backend import PLAN_FILE
from store.errors import NoSpace

from ..conftest import wait_for
from .cluster import StoreCluster

FAST = {"tick_ms": 20, "election_ticks": 10}


@pytest.fixture
def cluster(state_dir):
    c = StoreCluster(state_dir, n=3, **FAST)
    try:
        yield c.start()
    finally:
        c.stop()


@pytest.fixture
def store_cli(cluster, tmp_path):
    def invoke(*args):
        base = ["--state-dir", str(tmp_path), "store", "--endpoints", ",".join(cluster.endpoints.values()),
                "--command-timeout", "10"]
        return CliRunner().invoke(main, base + list(args), env={"KUBEMU_STORE_ENDPOINTS": None},
                                  catch_exceptions=False)
    return invoke


def ok(result) -> str:
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def fault_all(c: StoreCluster, params: dict) -> None:
    for name in c.running():
        c.call(name, "fault", params)


def local_value(c: StoreCluster, name: str, key: bytes) -> bytes | None:
    kvs = c.call(name, "range", {"key": key, "serializable": True})["kvs"]
    return kvs[0]["value"] if kvs else None


def new_leader_among(c: StoreCluster, names: list[str], old_term: int) -> str | None:
    sts = {n: c.status(n) for n in names}
    leaders = [n for n, s in sts.items() if s and s["role"] == "leader" and s["term"] > old_term]
    if len(leaders) == 1 and all(s and s["leader"] == leaders[0] for s in sts.values()):
        return leaders[0]
    return None


def test_partitioning_the_leader_elects_a_new_one_and_healing_leaves_one(cluster, store_cli):
    c = cluster
    old = c.leader()
    term = c.status(old)["term"]
    others = [n for n in c.names if n != old]
    out = ok(store_cli("fault", "partition", "--from", old, "--to", ",".join(others), "--symmetric"))
    assert out.count("cut ") == 3 and f"{old}->{others[0]}" in out and f"{others[1]}->{old}" in out
    new = wait_for(lambda: new_leader_among(c, others, term), message="the majority side elects a leader")
    assert new != old
    c.call(new, "put", {"key": b"during", "value": b"partition"})
    # CheckQuorum: the old leader hears no one and steps down
    wait_for(lambda: c.status(old)["role"] != "leader", message="the cut-off leader steps down")
    assert local_value(c, old, b"during") is None
    assert "cut" in ok(store_cli("fault", "list"))

    assert ok(store_cli("fault", "heal")).count("no faults") == 3
    leader = c.leader()  # exactly one, every replica agrees
    assert leader != old or c.status(old)["term"] > term
    wait_for(lambda: local_value(c, old, b"during") == b"partition", message="the old leader catches up")


def test_asymmetric_partition_the_leader_is_heard_by_no_one(cluster):
    c = cluster
    old = c.leader()
    term = c.status(old)["term"]
    others = [n for n in c.names if n != old]
    fault_all(c, {"action": "partition", "from": [old], "to": others})  # old -> others only
    # The followers hear nothing, elect one of them; its messages still reach the old leader,
    # which follows it. One leader, agreed by all three.
    new = wait_for(lambda: new_leader_among(c, c.names, term), message="one new leader, agreed by all")
    assert new in others
    c.call(new, "put", {"key": b"k", "value": b"v"})  # committed by the two that hear each other
    # The old leader follows, but its answers are lost: the leader never learns what it holds
    # (so never tells it a commit index beyond), and its ReadIndex requests never arrive.
    assert c.status(old)["role"] == "follower"
    with pytest.raises(wire.WireError):
        c.call(old, "range", {"key": b"k"}, timeout=3)
    assert local_value(c, old, b"k") is None
    fault_all(c, {"action": "heal"})
    assert c.call(old, "range", {"key": b"k"})["kvs"][0]["value"] == b"v"


def test_delay_with_jitter_slows_and_reorders_but_loses_nothing(cluster, store_cli):
    c = cluster
    ok(store_cli("fault", "delay", "--ms", "15", "--jitter"))
    assert all(s["faults"]["delays"][0]["jitter_ms"] == 15 for s in c.statuses().values())
    for i in range(20):
        c.write("put", {"key": b"d%02d" % i, "value": b"%d" % i})
    ok(store_cli("fault", "heal"))
    for name in c.names:
        wait_for(lambda: local_value(c, name, b"d19") == b"19", message=f"{name} has every write")


def test_a_full_disk_refuses_writes_with_nospace_and_reads_go_on(cluster, store_cli):
    c = cluster
    leader = c.leader()
    c.write("put", {"key": b"a", "value": b"1"})
    out = ok(store_cli("fault", "disk", "full", "--member", leader))
    assert out.strip() == f"{leader}: disk full"
    with pytest.raises(NoSpace, match="etcdserver: mvcc: database space exceeded"):
        c.call(leader, "put", {"key": b"b", "value": b"2"})
    with pytest.raises(NoSpace):
        c.call(leader, "lease_grant", {"ttl": 10})
    assert c.call(leader, "range", {"key": b"a"})["kvs"][0]["value"] == b"1"
    assert c.call(leader, "delete_range", {"key": b"a"})["deleted"] == 1  # deleting wins space back
    assert c.status(leader)["alarms"] == ["NOSPACE"]
    assert "alarm:NOSPACE" in ok(store_cli("status", "-w", "table"))
    ok(store_cli("fault", "disk", "ok", "--member", leader))
    c.call(leader, "put", {"key": b"b", "value": b"2"})
    assert c.status(leader)["alarms"] == []


def test_a_full_disk_is_the_members_own_alarm_refusing_writes_only_while_it_leads(cluster):
    c = cluster
    leader = c.leader()
    follower = next(n for n in c.names if n != leader)
    c.call(follower, "fault", {"action": "disk", "mode": "full"})
    assert c.status(follower)["alarms"] == ["NOSPACE"] and c.status(leader)["alarms"] == []
    c.write("put", {"key": b"a", "value": b"1"})  # a follower's full disk changes nothing
    wait_for(lambda: local_value(c, follower, b"a") == b"1", message="the full follower applies it")
    c.call(leader, "move_leader", {"to": follower})
    with pytest.raises(NoSpace):
        c.call(follower, "put", {"key": b"b", "value": b"2"})


def test_a_failing_fsync_stops_the_member_and_the_others_serve(cluster, store_cli):
    c = cluster
    leader = c.leader()
    victim = next(n for n in c.names if n != leader)
    ok(store_cli("fault", "disk", "fsync-fail", "--member", victim))
    c.write("put", {"key": b"k1", "value": b"1"})  # the victim's next fsync (these entries) fails
    assert c.procs[victim].wait(30) == 1
    log = c.log_text(victim)
    assert "failed to save Raft hard state and entries" in log and "Traceback" not in log
    assert c.leader() == leader
    c.write("put", {"key": b"k2", "value": b"2"})
    c.restart(victim)  # a new disk: the member catches up
    wait_for(lambda: c.status(victim) and local_value(c, victim, b"k2") == b"2", message="the victim catches up")


def test_power_loss_of_an_unsafe_follower_loses_its_unsynced_tail_and_it_catches_up(cluster, store_cli):
    c = cluster
    leader = c.leader()
    victim = next(n for n in c.names if n != leader)
    c.write("put", {"key": b"old", "value": b"durable"})
    wait_for(lambda: local_value(c, victim, b"old") == b"durable")
    c.restart(victim, unsafe_no_fsync=True)  # from now on it never fsyncs
    wait_for(lambda: c.status(victim) and c.status(victim)["leader"] == leader)
    for i in range(20):
        c.write("put", {"key": b"k%02d" % i, "value": b"%d" % i})
    wait_for(lambda: local_value(c, victim, b"k19") == b"19", message="the follower has every write")
    before = c.status(victim)["raft_index"]
    out = ok(store_cli("fault", "power-loss", "--member", victim))
    assert "power lost" in out
    assert c.procs[victim].wait(30) == -signal.SIGKILL
    assert "Traceback" not in c.log_text(victim)

    # Alone (the others down), the victim shows what it kept: the state of its last start.
    for name in c.names:
        if name != victim:
            c.kill(name)
    c.restart(victim)
    wait_for(lambda: c.status(victim), message="the victim restarts")
    assert c.status(victim)["raft_index"] < before
    assert local_value(c, victim, b"k00") is None
    assert local_value(c, victim, b"old") == b"durable"
    assert "power loss: dropped what was not synced" in c.log_text(victim)

    for name in c.names:
        if name != victim:
            c.restart(name)
    c.leader()
    wait_for(lambda: local_value(c, victim, b"k19") == b"19", message="the victim catches up from the leader")


def test_a_member_that_cannot_record_what_it_loses_still_stops(cluster):
    # A power loss halts the Raft loop before it writes the record of the unsynced tail; if
    # that write fails, the member must stop all the same, never keep answering unstepped.
    c = cluster
    leader = c.leader()
    fsync_victim, power_victim = (n for n in c.names if n != leader)
    for name in (fsync_victim, power_victim):
        (c.data_dir(name) / f"{PLAN_FILE}.tmp").mkdir()  # where the record is written first
    c.call(fsync_victim, "fault", {"action": "disk", "mode": "fsync-fail"})
    c.write("put", {"key": b"k", "value": b"v"})  # the victim's fsync of this entry fails
    assert c.procs[fsync_victim].wait(30) == 1
    c.call(power_victim, "fault", {"action": "power-loss"})
    assert c.procs[power_victim].wait(30) == -signal.SIGKILL
    for name in (fsync_victim, power_victim):
        log = c.log_text(name)
        assert "could not record the unsynced tail" in log and "Traceback" not in log, log


def test_bad_fault_requests_get_one_clear_error(cluster, store_cli):
    c = cluster
    with pytest.raises(wire.Invalid, match="fault: mode: expected one of ok, full, fsync-fail"):
        c.call(c.names[0], "fault", {"action": "disk", "mode": "wet"})
    result = store_cli("fault", "partition", "--from", "store-0", "--to", "store-9")
    assert result.exit_code != 0
    assert result.stderr.strip().splitlines() == [
        "error: store-9 is not a member of the store (members: store-0, store-1, store-2)"]
    assert c.status(c.names[0])["faults"] is None


def test_power_loss_of_a_leader_that_fsyncs_keeps_everything_it_acknowledged(cluster):
    c = cluster
    leader = c.leader()
    for i in range(30):
        c.write("put", {"key": b"k%02d" % i, "value": b"%d" % i})
    acked = c.status(leader)["commit_index"]
    c.call(leader, "fault", {"action": "power-loss"})
    assert c.procs[leader].wait(30) == -signal.SIGKILL
    for name in c.names:
        if name != leader:
            c.kill(name)
    c.restart(leader)  # alone: what it shows is what its disk kept
    wait_for(lambda: c.status(leader), message="the leader restarts")
    assert c.status(leader)["raft_index"] >= acked  # every entry it counted toward a commit was synced
    assert "power loss: dropped what was not synced" in c.log_text(leader)
