"""The leader election shell over a real wire: electors on one in-process apiserver (the API's
handlers over the in-memory storage, behind an authenticated wire server with an audit log).
One leads, the other waits; a leader that stops renewing is replaced after the lease and its
guarded client sends nothing more; a graceful release hands over at once; the user agent each
client names reaches the audit log."""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import tempfile

import pytest

from components.apiserver.audit import AuditLog
from components.apiserver.handlers import API
from components.apiserver.memstorage import MemStorage
from components.apiserver.watchcache import WatchCache
from kubemu import _wire_auth as wa
from kubemu import leaderelector, wire
from kubemu.apiclient import ApiClient, Unavailable
from kubemu.leaderelection import Timings
from kubemu.leaderelector import LeaderElector
from tests.conftest import DEADLINE

FAST = Timings(lease_duration=2.0, renew_deadline=1.0, retry_period=0.25)


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


def test_one_leads_a_stalled_leader_is_replaced_and_its_guarded_writes_are_not_sent(tmp):
    async def body(connect):
        stop = asyncio.Event()
        a = LeaderElector(connect("cm/a/leader-election"), "kube-system", "kube-controller-manager", "node-0_1", FAST)
        b = LeaderElector(connect("cm/b/leader-election"), "kube-system", "kube-controller-manager", "node-1_2", FAST)
        work_a = connect("cm/a", a.is_leader)
        assert await a.acquire(stop)
        holding = asyncio.create_task(a.hold())
        campaign = asyncio.create_task(b.acquire(stop))
        await work_a.create("configmaps", configmap("by-a"))
        await asyncio.sleep(FAST.lease_duration * 2)  # a renews all along: b keeps waiting
        assert not campaign.done() and a.is_leader()
        lease = await work_a.get("leases", "kube-controller-manager", "kube-system")
        assert lease["spec"]["holderIdentity"] == "node-0_1" and lease["spec"]["leaseDurationSeconds"] == 2

        holding.cancel()  # a stalls (as if stopped): it renews no more
        await until(lambda: not a.is_leader(), "a to stop leading at its renew deadline")
        assert not b.is_leader()  # ... before b may take over
        with pytest.raises(Unavailable, match="not the leader"):
            await work_a.create("configmaps", configmap("late"))
        assert await campaign and b.is_leader()
        await a.hold()  # a resumed elector finds leadership lost at once, and writes nothing
        lease = await work_a.get("leases", "kube-controller-manager", "kube-system")
        assert lease["spec"]["holderIdentity"] == "node-1_2" and lease["spec"]["leaseTransitions"] == 1
        return [line["name"] for line in audit(tmp) if line["resource"] == "configmaps"]

    assert serve(tmp, body) == ["by-a"]


def test_a_released_lease_is_taken_without_waiting_out_the_lease(tmp):
    slow = Timings(lease_duration=30.0, renew_deadline=20.0, retry_period=0.25)

    async def body(connect):
        stop = asyncio.Event()
        a = LeaderElector(connect(), "kube-system", "kube-scheduler", "node-0_1", slow)
        b = LeaderElector(connect(), "kube-system", "kube-scheduler", "node-1_2", slow)
        assert await a.acquire(stop)
        campaign = asyncio.create_task(b.acquire(stop))
        await asyncio.sleep(0.5)
        assert not campaign.done()
        await a.release()
        assert not a.is_leader()
        await asyncio.wait_for(campaign, 10)  # far less than the 30 s lease
        assert b.is_leader()
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
