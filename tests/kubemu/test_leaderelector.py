"""The leader election shell over a real wire: electors on one in-process apiserver (the API's
handlers over the in-memory storage, behind an authenticated wire server with an audit log).
One leads, the other waits; a leader that stops renewing is replaced after the lease and its
guarded client sends nothing more; a lease is waited out for the duration its holder declared; a
graceful release hands over at once, and so does a holder of the same node that has exited (only
one certainly gone); the user agent each client names reaches the audit log.

Leases and renew deadlines are long and the retry period short, so a renewal many seconds late
changes nothing; where a test needs a deadline to pass it moves that elector's clock on (`Clock`)
rather than waiting it out."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import tempfile
import time

import pytest

from components.apiserver.audit import AuditLog
from components.apiserver.handlers import API
from components.apiserver.memstorage import MemStorage
from components.apiserver.watchcache import WatchCache
from kubemu import _wire_auth as wa
from kubemu import leaderelection, leaderelector, wire
from kubemu.apiclient import ApiClient, Unavailable
from kubemu.leaderelection import Timings, record_from_lease
from kubemu.leaderelector import LeaderElector
from tests.conftest import DEADLINE

SLOW = Timings(lease_duration=30.0, renew_deadline=20.0, retry_period=0.25)


class Clock:
    """An elector's monotonic clock: time.monotonic, plus what the test skips forward, or stopped
    (then no lease it sees can expire for it)."""

    def __init__(self, stopped: bool = False):
        self.skipped = 0.0
        self.stopped_at = time.monotonic() if stopped else None

    def __call__(self) -> float:
        return (self.stopped_at if self.stopped_at is not None else time.monotonic()) + self.skipped


@pytest.fixture
def tmp():
    path = tempfile.mkdtemp(prefix="kle-")  # short: ipc paths are limited to 107 bytes
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def serve(tmp: str, test):
    """Run `test(connect)` against an apiserver; connect(user_agent, guard) -> ApiClient."""
    secrets = os.path.join(tmp, "wire")
    creds = wa.load_credentials(wa.ensure_secret(secrets, "system:kube-controller-manager"))
    endpoint = wire.ipc_endpoint(tmp, "api.sock")

    async def main():
        storage = MemStorage()
        cache = WatchCache(storage.client)
        api = API(storage, cache, AuditLog(os.path.join(tmp, "audit.log")), rand=random.Random(1))
        await api.ensure_system_namespaces()
        clients: list[ApiClient] = []

        def connect(user_agent: str | None = None, guard=None) -> ApiClient:
            client = ApiClient(endpoint, credentials=creds, user_agent=user_agent, write_guard=guard, timeout=5)
            clients.append(client)
            return client

        try:
            async with wire.Server(endpoint, api.handlers(), auth=wire.ServerAuth(secrets)):
                return await asyncio.wait_for(test(connect), DEADLINE)
        finally:
            for client in clients:
                await client.close()
            await api.namespaces.close()
            await cache.close()
    return asyncio.run(main())


def audit(tmp: str) -> list[dict]:
    with open(os.path.join(tmp, "audit.log")) as f:
        return [json.loads(line) for line in f]


async def until(condition, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


def configmap(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}


async def seen_by(elector: LeaderElector, client: ApiClient, name: str) -> None:
    """Wait until `elector` has observed the Lease as it is now (nobody writes it meanwhile)."""
    current = record_from_lease(await client.get("leases", name, "kube-system"))
    await until(lambda: elector.core.observed == current, f"{elector.identity} to read the current lease")



def count_attempts(elector: LeaderElector) -> list:
    """The decisions `elector`'s core is asked for, recorded as they are made."""
    attempts = []
    decide = elector.core.attempt

    def counted(*args):
        attempts.append(args)
        return decide(*args)
    elector.core.attempt = counted
    return attempts

def test_one_leads_a_stalled_leader_is_replaced_and_its_guarded_writes_are_not_sent(tmp):
    async def body(connect):
        stop = asyncio.Event()
        clock_a, clock_b = Clock(), Clock()
        name = "kube-controller-manager"
        a = LeaderElector(connect("cm/a/leader-election"), "kube-system", name, "node-0_1", SLOW, clock=clock_a)
        b = LeaderElector(connect("cm/b/leader-election"), "kube-system", name, "node-1_2", SLOW, clock=clock_b)
        work_a = connect("cm/a", a.is_leader)
        assert await a.acquire(stop)
        acquired = a.core.observed
        holding = asyncio.create_task(a.hold())
        campaign = asyncio.create_task(b.acquire(stop))
        await work_a.create("configmaps", configmap("by-a"))
        # a renews all along (b sees renewals) and b keeps waiting
        await until(lambda: b.core.leader() == "node-0_1" and b.core.observed.renew_time != acquired.renew_time,
                    "b to see a renewal by a")
        assert not campaign.done() and a.is_leader()
        lease = await work_a.get("leases", name, "kube-system")
        assert lease["spec"]["holderIdentity"] == "node-0_1" and lease["spec"]["leaseDurationSeconds"] == 30

        holding.cancel()  # a stalls (as if stopped): it renews no more
        await asyncio.gather(holding, return_exceptions=True)
        await seen_by(b, work_a, name)
        clock_a.skipped = SLOW.renew_deadline  # a's renew deadline passes: it stops leading...
        assert not a.is_leader()
        assert not b.is_leader()  # ... before b may take over
        with pytest.raises(Unavailable, match="not the leader"):
            await work_a.create("configmaps", configmap("late"))
        clock_b.skipped = SLOW.lease_duration  # the lease expires for b
        assert await campaign and b.is_leader()
        await a.hold()  # a resumed elector finds leadership lost at once, and writes nothing
        lease = await work_a.get("leases", name, "kube-system")
        assert lease["spec"]["holderIdentity"] == "node-1_2" and lease["spec"]["leaseTransitions"] == 1
        return [line["name"] for line in audit(tmp) if line["resource"] == "configmaps"]

    assert serve(tmp, body) == ["by-a"]


def test_an_elector_with_a_shorter_lease_waits_out_the_duration_the_holder_declared(tmp):
    async def body(connect):
        stop = asyncio.Event()
        clock_b = Clock()
        a = LeaderElector(connect(), "kube-system", "kube-scheduler", "node-0_1", SLOW)
        b = LeaderElector(connect(), "kube-system", "kube-scheduler", "node-1_2",
                          Timings(lease_duration=6.0, renew_deadline=4.0, retry_period=0.25), clock=clock_b)
        attempts = count_attempts(b)
        assert await a.acquire(stop)  # a declares 30 s and does not renew: it leads for 20 s
        campaign = asyncio.create_task(b.acquire(stop))
        await seen_by(b, a.api, "kube-scheduler")
        clock_b.skipped = 7.0  # past b's own 6 s lease, not a's 30 s
        tried = len(attempts)
        await until(lambda: campaign.done() or len(attempts) >= tried + 2, "b to try again")
        assert not campaign.done() and not b.is_leader()
        clock_b.skipped = SLOW.lease_duration
        assert await campaign and b.is_leader()
        stop.set()

    serve(tmp, body)


def test_a_released_lease_is_taken_without_waiting_out_the_lease(tmp):
    async def body(connect):
        stop = asyncio.Event()
        a = LeaderElector(connect(), "kube-system", "kube-scheduler", "node-0_1", SLOW)
        # b's clock is stopped: no lease expires for it, only a release lets it in
        b = LeaderElector(connect(), "kube-system", "kube-scheduler", "node-1_2", SLOW, clock=Clock(stopped=True))
        assert await a.acquire(stop)
        campaign = asyncio.create_task(b.acquire(stop))
        await until(lambda: b.core.leader() == "node-0_1", "b to see a lead")
        assert not campaign.done()
        await a.release()
        assert not a.is_leader()
        assert await campaign and b.is_leader()
        stop.set()

    serve(tmp, body)


def test_the_audit_log_names_each_clients_user_agent(tmp):
    async def body(connect):
        await connect("kube-controller-manager/node-0_7").create("configmaps", configmap("named"))
        await connect().create("configmaps", configmap("anonymous"))
        return {line["name"]: line.get("userAgent") for line in audit(tmp)}

    assert serve(tmp, body) == {"named": "kube-controller-manager/node-0_7", "anonymous": None}


def test_kubes_flags_and_their_checks():
    p = argparse.ArgumentParser()
    leaderelector.add_flags(p, "kube-scheduler")
    settings = leaderelector.settings_from(p, p.parse_args([]))
    assert settings == leaderelector.Settings(True, Timings(15, 10, 2), "kube-system", "kube-scheduler")
    fast = leaderelector.settings_from(p, p.parse_args(["--leader-elect-lease-duration=3s",
                                                        "--leader-elect-renew-deadline", "2s",
                                                        "--leader-elect-retry-period=500ms"]))
    assert fast.timings == Timings(3, 2, 0.5)
    assert not leaderelector.settings_from(p, p.parse_args(["--leader-elect=false"])).enabled
    assert leaderelector.settings_from(p, p.parse_args(["--leader-elect"])).enabled
    with pytest.raises(SystemExit):
        leaderelector.settings_from(p, p.parse_args(["--leader-elect-renew-deadline=20s"]))
    with pytest.raises(SystemExit):
        p.parse_args(["--leader-elect-retry-period=soon"])


def test_the_identity_is_the_node_and_the_pid(monkeypatch):
    monkeypatch.setenv("HOSTNAME", "node-2")
    assert leaderelector.identity() == f"node-2_{os.getpid()}"


HERE = leaderelector.own_pid_namespace()


def held_by(holder: str, stamp: str | None = HERE) -> dict:
    meta = {"name": "kube-controller-manager", "namespace": "kube-system"}
    if stamp is not None:
        meta["annotations"] = {leaderelection.HOLDER_PID_NAMESPACE: stamp}
    return {"metadata": meta, "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}}


def test_a_holder_is_judged_exited_only_when_it_is_certainly_gone():
    dead = {41}.__contains__

    def exited(lease, ident="node-0_7", namespace=HERE):
        return leaderelection.holder_exited(lease, ident, namespace, lambda pid: not dead(pid))

    assert HERE is not None and exited(held_by("node-0_41"))
    assert not exited(held_by("node-0_42"))                     # alive (or its pid reused): waited out
    assert not exited(held_by("node-1_41"))                     # another node's pid 41 is not ours
    assert not exited(held_by("node-0_41", stamp=None))         # written without the stamp
    assert not exited(held_by("node-0_41", stamp="other-boot/pid:[1]"))  # another pid namespace
    assert not exited(held_by("node-0_41"), namespace=None)     # ours unknown
    assert not exited(held_by("node-0_41"), ident="node-0_41")  # our own identity: client-go's rule
    for holder in ("", "41", "_41", "node-0_", "node-0_x41", "node-0_٤١", 41, None):
        assert not exited(held_by(holder)), holder


def test_pid_alive_tells_a_reaped_child_from_a_live_process():
    import subprocess
    child = subprocess.Popen(["true"])
    child.wait()
    assert not leaderelector.pid_alive(child.pid)
    assert leaderelector.pid_alive(os.getpid()) and leaderelector.pid_alive(1)
    assert leaderelector.pid_alive(2 ** 80)  # no pid at all: never judged gone


def test_a_holder_of_this_node_that_exited_is_replaced_at_once_and_a_live_one_is_waited_out(tmp):
    async def body(connect):
        stop = asyncio.Event()
        name = "kube-controller-manager"
        exited: set[int] = set()

        def alive(pid: int) -> bool:
            return pid not in exited

        a = LeaderElector(connect(), "kube-system", name, "node-0_101", SLOW, pid_namespace=HERE, alive=alive)
        assert await a.acquire(stop)  # and is killed -9: no release
        lease = await a.api.get("leases", name, "kube-system")
        assert lease["metadata"]["annotations"] == {leaderelection.HOLDER_PID_NAMESPACE: HERE}
        # its restart on the same node; its clock is stopped: no lease can expire for it
        b = LeaderElector(connect(), "kube-system", name, "node-0_102", SLOW, clock=Clock(stopped=True),
                          pid_namespace=HERE, alive=alive)
        # another node's elector that cannot see node-0's processes waits, whatever happens there
        c = LeaderElector(connect(), "kube-system", name, "node-1_101", SLOW, clock=Clock(stopped=True),
                          pid_namespace=HERE, alive=lambda pid: False)
        waiting = asyncio.create_task(c.acquire(stop))
        attempts = count_attempts(b)
        campaign = asyncio.create_task(b.acquire(stop))
        await until(lambda: len(attempts) >= 2, "b to try twice")
        assert not campaign.done() and not b.is_leader()  # node-0_101 lives: waited out
        exited.add(101)
        assert await campaign and b.is_leader()
        lease = await a.api.get("leases", name, "kube-system")
        assert lease["spec"]["holderIdentity"] == "node-0_102" and lease["spec"]["leaseTransitions"] == 1
        await seen_by(c, a.api, name)
        assert not waiting.done()
        stop.set()
        assert await waiting is False

    serve(tmp, body)
