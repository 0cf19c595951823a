"""components.apiserver.servicealloc: Service allocations kept in the store, shared by every
apiserver on it (IPAddress objects, the NodePort bitmap), and the repair loops that free what
a crash left taken. Several API handler stacks on one in-memory store stand for several
apiservers; the store client yields to the event loop at every call, as one across a socket
does, so their requests interleave."""
from __future__ import annotations

import asyncio
import datetime
import logging
import os
import random
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from click.testing import CliRunner

from components.apiserver.audit import AuditLog
from components.apiserver.handlers import API
from components.apiserver.memstorage import MemoryStoreClient
from components.apiserver.servicealloc import RANGE_KEY, ServiceAllocator
from components.apiserver.serviceips import parse_port_range
from components.apiserver.servicerepair import LEAK_ROUNDS
from components.apiserver.servicestrategy import Allocations
from components.apiserver.storage import Storage, encode
from components.apiserver.watchcache import WatchCache
from kubemu import wire
from kubemu.api.ipaddress import for_service
from kubemu.cli import main as kubemu
from tests.conftest import DEADLINE, wait_for

from . import REPO, APIServerEnv, running

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
CIDR, PORTS = "10.96.0.0/27", "30000-30029"  # 30 addresses, 30 ports


class Interleaving(MemoryStoreClient):
    """Every call first yields to the event loop a few times (seeded), as a call across a
    socket does: concurrent requests interleave between their reads and their writes."""

    def __init__(self, seed: int = 0):
        super().__init__()
        self.rand = random.Random(seed)

    async def _yield(self) -> None:
        for _ in range(self.rand.randrange(4)):
            await asyncio.sleep(0)

    async def range(self, *args, **kwargs):
        await self._yield()
        return await super().range(*args, **kwargs)

    async def txn(self, *args, **kwargs):
        await self._yield()
        return await super().txn(*args, **kwargs)


class Clock:
    def __init__(self):
        self.now = NOW

    def __call__(self) -> datetime.datetime:
        return self.now


def run(test, *, apiservers: int = 2, seed: int = 0):
    """`test(apis, clock)` with `apiservers` API stacks on one store, each allocating from the same
    ranges with the same randomness (so they race for the same values)."""
    async def main():
        storage = Storage(Interleaving(seed))
        clock = Clock()
        caches = [WatchCache(storage.client) for _ in range(apiservers)]
        apis = [API(storage, cache, AuditLog(None), clock=clock, rand=random.Random(i),
                    services=Allocations(CIDR, parse_port_range(PORTS), rand=random.Random(seed)))
                for i, cache in enumerate(caches)]
        await apis[0].ensure_system_namespaces()
        try:
            return await asyncio.wait_for(test(apis, clock), DEADLINE)
        finally:
            for api, cache in zip(apis, caches):
                await api.namespaces.close()
                await cache.close()
    return asyncio.run(main())


def service(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}], **spec}}


async def stored(api: API) -> tuple[dict[str, dict], set[int]]:
    """The IPAddresses (by name) and the bitmap's ports, as the store holds them."""
    items, _, _ = await api.storage.list("/registry/ipaddresses/")
    view, _ = await api.service_allocator.view()
    return ({obj["metadata"]["name"]: obj for _, obj in items},
            {view.ports.range.base + offset for offset in view.ports.bits.used})


def held_by(services: list[dict]) -> tuple[dict[str, str], set[int]]:
    ips = {s["spec"]["clusterIP"]: s["metadata"]["name"] for s in services}
    return ips, {p["nodePort"] for s in services for p in s["spec"]["ports"]}


@pytest.mark.parametrize("seed", range(3))
def test_two_apiservers_creating_services_at_once_never_share_an_address_or_a_port(seed):
    async def body(apis, clock):
        made = await asyncio.gather(*(apis[i % 2].create("services", service(f"s{i}", type="NodePort"))
                                      for i in range(30)))
        ips = [m["spec"]["clusterIP"] for m in made]
        ports = [m["spec"]["ports"][0]["nodePort"] for m in made]
        assert len(set(ips)) == 30 and len(set(ports)) == 30
        addresses, bitmap = await stored(apis[0])
        want_ips, want_ports = held_by(made)
        assert {ip: a["spec"]["parentRef"]["name"] for ip, a in addresses.items()} == want_ips
        assert bitmap == want_ports
        for api in apis:  # both see the ranges full
            with pytest.raises(wire.Invalid, match=r"failed to allocate a serviceIP: range is full$"):
                await api.create("services", service("one-too-many"))
        with pytest.raises(wire.Invalid, match="provided IP is already allocated"):
            await apis[1].create("services", service("copy", clusterIP=ips[0]))
    run(body, seed=seed)


def test_a_value_asked_for_on_two_apiservers_at_once_goes_to_one():
    async def body(apis, clock):
        spec = dict(clusterIP="10.96.0.7", type="NodePort", ports=[{"port": 80, "nodePort": 30007}])
        results = await asyncio.gather(*(api.create("services", service(f"s{i}", **spec))
                                         for i, api in enumerate(apis)), return_exceptions=True)
        made = [r for r in results if isinstance(r, dict)]
        refused = [r for r in results if not isinstance(r, dict)]
        assert len(made) == 1 and len(refused) == 1 and isinstance(refused[0], wire.Invalid)
        assert "already allocated" in refused[0].message
        addresses, bitmap = await stored(apis[0])
        assert list(addresses) == ["10.96.0.7"] and bitmap == {30007}
        assert addresses["10.96.0.7"]["spec"]["parentRef"]["name"] == made[0]["metadata"]["name"]
    run(body)


def test_what_one_apiserver_gives_back_the_other_can_take():
    async def body(apis, clock):
        a, b = apis
        web = await a.create("services", service("web", type="NodePort", clusterIP="10.96.0.9",
                                                 ports=[{"port": 80, "nodePort": 30009}]))
        assert web["spec"]["clusterIP"] == "10.96.0.9"
        dry = await b.create("services", service("dry", type="NodePort"), dry_run=True)
        assert dry["spec"]["clusterIP"] != "10.96.0.9" and dry["spec"]["ports"][0]["nodePort"] != 30009
        assert await stored(a) == (await stored(b)) and set((await stored(a))[0]) == {"10.96.0.9"}
        await b.delete("services", "web", "default")
        assert await stored(a) == ({}, set())
        again = await a.create("services", service("again", type="NodePort", clusterIP="10.96.0.9",
                                                   ports=[{"port": 80, "nodePort": 30009}]))
        assert again["spec"]["clusterIP"] == "10.96.0.9"
        # a type change on one apiserver frees on the store what the other allocated
        await b.patch("services", "again", {"spec": {"type": "ClusterIP"}}, "default")
        addresses, bitmap = await stored(a)
        assert list(addresses) == ["10.96.0.9"] and bitmap == set()
    run(body)


def test_a_write_whose_outcome_is_unknown_keeps_its_allocations_for_the_repair_to_judge():
    async def body(apis, clock):
        api = apis[0]
        create = api.storage.create

        async def unknown(key, value):
            if key.endswith("/services/default/lost"):
                raise wire.OutcomeUnknown("the store went away during the write")
            return await create(key, value)
        api.storage.create = unknown
        with pytest.raises(wire.OutcomeUnknown):
            await api.create("services", service("lost", type="NodePort", clusterIP="10.96.0.11",
                                                 ports=[{"port": 80, "nodePort": 30011}]))
        api.storage.create = create
        addresses, bitmap = await stored(api)
        assert list(addresses) == ["10.96.0.11"] and bitmap == {30011}
        # the Service was not stored after all: the repair frees both after their grace
        for _ in range(LEAK_ROUNDS - 1):
            await api.service_allocator.repair()
        assert (await stored(api))[1] == {30011}  # a port is kept for LEAK_ROUNDS passes
        clock.now += datetime.timedelta(seconds=61)
        await api.service_allocator.repair()
        assert await stored(api) == ({}, set())
    run(body, apiservers=1)


def test_the_repair_takes_what_stored_services_hold_and_frees_leaks_after_their_grace(caplog):
    async def body(apis, clock):
        api = apis[0]
        web = await api.create("services", service("web", type="NodePort"))
        ip, port = web["spec"]["clusterIP"], web["spec"]["ports"][0]["nodePort"]
        # as a store written before the allocations were kept there: the Service alone
        await api.storage.client.txn([], [{"op": "delete_range", "key": f"/registry/ipaddresses/{ip}".encode()},
                                          {"op": "delete_range", "key": RANGE_KEY.encode()}], [])
        # a crash between allocating and writing: an IPAddress for nothing, a port for nothing
        leak = for_service("10.96.0.20", "default", "gone")
        leak["metadata"]["creationTimestamp"] = "2026-01-02T03:04:05Z"  # NOW
        await api.storage.create("/registry/ipaddresses/10.96.0.20", encode(leak))
        fresh = ServiceAllocator(api.storage, Allocations(CIDR, parse_port_range(PORTS)), clock=clock)
        caplog.set_level(logging.WARNING, "kubemu.apiserver")
        await fresh.repair()
        addresses, bitmap = await stored(api)
        assert set(addresses) == {ip, "10.96.0.20"} and bitmap == {port}  # the leak is young
        assert addresses[ip]["spec"]["parentRef"] == {"group": "", "resource": "services", "namespace": "default",
                                                       "name": "web"}
        messages = [r.getMessage() for r in caplog.records]
        assert f"service allocation repair: the cluster IP {ip} for service default/web is not allocated; " \
               "repairing" in messages
        assert f"service allocation repair: the node port {port} is not allocated; repairing" in messages
        clock.now += datetime.timedelta(seconds=60)
        await fresh.repair()
        assert set((await stored(api))[0]) == {ip, "10.96.0.20"}  # 60 s old: not past its grace yet
        clock.now += datetime.timedelta(seconds=1)
        await fresh.repair()
        assert set((await stored(api))[0]) == {ip}
        assert "service allocation repair: the IPAddress 10.96.0.20 appears to have leaked: cleaning up" in \
            [r.getMessage() for r in caplog.records]
    run(body, apiservers=1)


def test_the_repair_never_loses_an_allocation_made_while_it_runs():
    """The port repair reads the bitmap before it lists the Services and writes it back only if
    unchanged: a NodePort taken by another apiserver in between survives the repair's write."""
    async def body(apis, clock):
        a, b = apis
        await a.create("services", service("web", type="NodePort", ports=[{"port": 80, "nodePort": 30001}]))
        await b.service_allocator.ensure_repaired()
        await a.storage.client.txn([], [{"op": "delete_range", "key": RANGE_KEY.encode()}], [])  # to repair
        storage = a.storage  # the one store both apiservers use
        list_ = storage.list
        racing: list[dict] = []

        async def list_then_allocate(prefix, **kwargs):
            out = await list_(prefix, **kwargs)
            if prefix == "/registry/services/":
                storage.list = list_
                racing.append(await b.create("services", service("racer", type="NodePort",
                                                                 ports=[{"port": 80, "nodePort": 30002}])))
            return out
        storage.list = list_then_allocate
        await a.service_allocator.repair()
        assert racing and (await stored(a))[1] == {30001, 30002}
    run(body)


# --- two apiserver processes on one replicated store ----------------------------------------------

RANGES = ("--service-cluster-ip-range", "10.100.0.0/27", "--service-node-port-range", "31000-31029")


@pytest.fixture(scope="module")
def two_apiservers(tmp_path_factory):
    """A 3-replica store, the env's apiserver, and a second one on the same store."""
    path = tmp_path_factory.mktemp("s")
    env = APIServerEnv(path, extra_args=RANGES)
    for started in running(env, path):
        endpoint = f"ipc://{path}/api-2.sock"
        with open(path / "apiserver-2.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "components.apiserver", "--listen", endpoint, "--store-endpoints",
                 ",".join(env.store.endpoints.values()), *RANGES],
                env=dict(os.environ, KUBEMU_STATE_DIR=str(path), PYTHONPATH=str(REPO)), cwd=str(REPO),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        second = wire.SyncClient(endpoint, timeout=10.0)
        try:
            wait_for(lambda: _answers(second), message="the second apiserver")
            yield started, endpoint
        finally:
            second.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(DEADLINE)
        assert "Traceback" not in (path / "apiserver-2.log").read_text() + env.log_text()


def _answers(client: wire.SyncClient) -> bool:
    try:
        client.call("get", {"resource": "namespaces", "name": "default"}, timeout=2.0)
        return True
    except wire.WireError:
        return False


def test_two_apiserver_processes_hand_out_each_address_and_port_once(two_apiservers):
    env, second = two_apiservers

    def create(i: int) -> dict:
        client = wire.SyncClient(env.endpoint if i % 2 else second, timeout=15.0)
        try:
            return client.call("create", {"resource": "services", "namespace": "default",
                                          "object": service(f"s{i}", type="NodePort")}, timeout=15.0)
        finally:
            client.close()
    with ThreadPoolExecutor(6) as pool:
        made = list(pool.map(create, range(24)))
    want_ips, want_ports = held_by(made)
    assert len(want_ips) == 24 and len(want_ports) == 24
    listed = env.call("list", resource="ipaddresses")["items"]
    assert {a["metadata"]["name"]: a["spec"]["parentRef"]["name"] for a in listed} == want_ips
    shown = CliRunner().invoke(kubemu, ["--server", second, "get", "ipaddresses"], catch_exceptions=False)
    assert shown.exit_code == 0 and shown.stdout.splitlines()[0].split() == ["NAME", "PARENTREF", "AGE"]
    assert f"services/default/{made[0]['metadata']['name']}" in shown.stdout
    env.call("delete", resource="services", name="s0", namespace="default")  # created through the second
    again = env.call("create", resource="services", namespace="default", object=service(
        "again", type="NodePort", clusterIP=made[0]["spec"]["clusterIP"],
        ports=[{"port": 80, "nodePort": made[0]["spec"]["ports"][0]["nodePort"]}]))
    assert again["spec"]["clusterIP"] == made[0]["spec"]["clusterIP"]
