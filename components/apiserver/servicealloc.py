"""Services' clusterIPs and NodePorts held in the store, so every apiserver of a control plane
shares them (kube-apiserver >= 1.31): the I/O around servicestrategy's decisions and
servicerepair's.

    allocator = ServiceAllocator(storage, Allocations(cidr, ports), clock=)
    out, held = await allocator.update(old, new, dry_run=)  # as Allocations.update, in the store
    await held.revert()     the Service write failed: give back what was taken
    await held.commit()     it succeeded: give back what the old object held and the new does not
    await allocator.release(svc)     a deleted Service's
    await allocator.repair()         one pass of both repair loops (also run before the first
                                     allocation of this apiserver)
    await allocator.run(interval)    the repair loops, every `interval` seconds

Where the allocations live, as upstream keeps them:
- a ClusterIP is held by the networking.k8s.io/v1 IPAddress named by it
  (`/registry/ipaddresses/<ip>`, spec.parentRef naming the Service, the allocator's labels);
- the NodePorts (healthCheckNodePorts too) by one bitmap, a RangeAllocation at
  `/registry/ranges/servicenodeports` ({range, data}: serviceips.PortAllocator.snapshot).

Each allocation reads what the store holds (the IPAddresses' names, the bitmap), lets
Allocations decide, and writes everything it took in one store transaction conditional on the
bitmap's revision and on each new IPAddress not existing. If another apiserver (or another
request) got there first, the transaction fails as a whole and the allocation is decided again
from a fresh read, so a value asked for that went meanwhile is refused in kube's words and a
value picked at random is picked again: two apiservers never hand out one address or port. A dry
run reads and decides, and writes nothing. Giving back is the same conditional transaction
(an IPAddress only while it still names the Service). What a crash leaves taken between the
allocation and the Service write is freed by the repair loops after their grace.
"""
from __future__ import annotations

import asyncio
import datetime
import logging
import random
from dataclasses import dataclass, field
from typing import Callable

from kubemu.api import ipaddress
from kubemu.api.resources import registry_key, registry_prefix, resolve
from kubemu.wire import Conflict, WireError
from store.mvcc import compare, delete_op, put_op

from . import servicerepair
from . import strategy as st
from .serviceips import PortAllocator, cluster_ips, node_ports
from .servicestrategy import Allocations
from .storage import encode

log = logging.getLogger("kubemu.apiserver")

RANGE_KEY = "/registry/ranges/servicenodeports"
IP_PREFIX = registry_prefix("ipaddresses")
SERVICE_PREFIX = registry_prefix("services")
ATTEMPTS = 50  # conflicting allocations decided again (each conflict means another one succeeded)
REPAIR_INTERVAL = 180.0  # kube-apiserver's repairLoopInterval


def _b(key: str) -> bytes:
    return key.encode()


def _owner(svc: dict) -> tuple[str, str]:
    meta = svc.get("metadata") if isinstance(svc.get("metadata"), dict) else {}
    return meta.get("namespace") or "", meta.get("name") or ""


@dataclass
class Held:
    """What one Service write took in the store and what it gives back once written."""
    allocator: "ServiceAllocator"
    owner: tuple[str, str]
    dry_run: bool = False
    ips: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    freed_ips: list[str] = field(default_factory=list)
    freed_ports: list[int] = field(default_factory=list)

    async def revert(self) -> None:
        if not self.dry_run:
            await self.allocator.give_back(self.owner, self.ips, self.ports)
        self.ips, self.ports = [], []

    async def commit(self) -> None:
        if self.dry_run:
            raise RuntimeError("a dry run's allocations are never committed")
        await self.allocator.give_back(self.owner, self.freed_ips, self.freed_ports)
        self.ips, self.ports, self.freed_ips, self.freed_ports = [], [], [], []


class ServiceAllocator:
    def __init__(self, storage, allocations: Allocations, *,
                 clock: Callable[[], datetime.datetime], rand: random.Random | None = None):
        self.storage = storage
        self.allocations = allocations  # the ranges and the randomness; a fresh view per request
        self.clock = clock
        self.rand = rand or random.SystemRandom()
        self.leaks: dict[int, int] = {}  # the port repair's leak counts (kept per apiserver, as upstream)
        self._repaired = False
        self._lock = asyncio.Lock()

    # --- reads

    async def view(self) -> tuple[Allocations, int]:
        """Allocations holding what the store holds now, and the bitmap's revision (0: none yet)."""
        view = self.allocations.blank()
        resp = await self.storage.client.range(IP_PREFIX, prefix=True, keys_only=True)
        for kv in resp.get("kvs") or ():
            ip = kv["key"].decode()[len(IP_PREFIX):]
            if view.ips.contains(ip):
                view.ips.allocate(ip)
        rev = await self._ports(view.ports)
        return view, rev

    async def _ports(self, into: PortAllocator) -> int:
        obj, rev = await self.storage.get(RANGE_KEY)
        if obj is not None:
            into.restore(obj.get("range"), obj.get("data"))
        return rev

    # --- allocation

    async def update(self, old: dict | None, new: dict, *, dry_run: bool = False) -> tuple[dict, Held]:
        """`new` with what it needs allocated (Allocations.update's rules) and what was taken; a
        ValidationError if that cannot be (nothing is then held)."""
        await self.ensure_repaired()
        owner = _owner(new)
        for attempt in range(ATTEMPTS):
            view, rev = await self.view()
            out, txn = view.update(old, new, dry_run=dry_run)
            held = Held(self, owner, dry_run, list(txn.ips), list(txn.ports), list(txn.freed_ips),
                        list(txn.freed_ports))
            if dry_run or await self._take(held, view.ports, rev):
                return out, held
            await asyncio.sleep(self.rand.uniform(0, 0.002 * (attempt + 1)))  # de-synchronize contenders
        raise Conflict("the Service allocations kept changing under this request; please try again",
                       {"reason": "Conflict"})

    async def _take(self, held: Held, ports: PortAllocator, rev: int) -> bool:
        """Write what `held` took (the bitmap `ports` already holds its ports), if nobody else
        wrote the bitmap or one of its addresses since the read."""
        compares, ops = [], []
        if held.ports:
            compares.append(compare(_b(RANGE_KEY), "mod_revision", "=", rev))
            ops.append(put_op(_b(RANGE_KEY), self._range_value(ports)))
        for ip in held.ips:
            key = _b(registry_key("ipaddresses", None, ip))
            compares.append(compare(key, "mod_revision", "=", 0))
            ops.append(put_op(key, encode(self._ipaddress(ip, *held.owner))))
        if not ops:
            return True
        return bool((await self.storage.client.txn(compares, ops, [])).get("succeeded"))

    def _ipaddress(self, ip: str, namespace: str, name: str) -> dict:
        return st.prepare_create(resolve("ipaddresses"), ipaddress.for_service(ip, namespace, name), None,
                                 now=self.clock(), rand=self.rand)

    def _range_value(self, ports: PortAllocator) -> bytes:
        text, data = ports.snapshot()
        return encode({"apiVersion": "v1", "kind": "RangeAllocation", "metadata": {}, "range": text, "data": data})

    async def release(self, svc: dict) -> None:
        await self.give_back(_owner(svc), cluster_ips(svc), node_ports(svc))

    async def give_back(self, owner: tuple[str, str], ips: list[str], ports: list[int]) -> None:
        """Free `ips` (those whose IPAddress still names `owner`) and `ports`, in one conditional
        write, read again after a conflict. A store that cannot be reached is said in the log:
        the repair loops free them after their grace."""
        if not ips and not ports:
            return
        try:
            await self._give_back(owner, ips, ports)
        except (WireError, OSError) as err:
            log.warning("could not give back %s of service %s/%s (%s); the repair loops will",
                        ", ".join(map(str, [*ips, *ports])), *owner, err)

    async def _give_back(self, owner: tuple[str, str], ips: list[str], ports: list[int]) -> None:
        ref = ipaddress.service_ref(*owner)
        for attempt in range(ATTEMPTS):
            compares, ops = [], []
            for ip in ips:
                key = registry_key("ipaddresses", None, ip)
                obj, rev = await self.storage.get(key)
                if obj is not None and ipaddress.parent_ref(obj) == ref:
                    compares.append(compare(_b(key), "mod_revision", "=", rev))
                    ops.append(delete_op(_b(key)))
            if ports:
                bitmap = self.allocations.blank().ports
                rev = await self._ports(bitmap)
                if any(bitmap.has(p) for p in ports):
                    for port in ports:
                        bitmap.release(port)
                    compares.append(compare(_b(RANGE_KEY), "mod_revision", "=", rev))
                    ops.append(put_op(_b(RANGE_KEY), self._range_value(bitmap)))
            if not ops or (await self.storage.client.txn(compares, ops, [])).get("succeeded"):
                return
            await asyncio.sleep(self.rand.uniform(0, 0.002 * (attempt + 1)))
        log.warning("could not give back %s of service %s/%s: the store kept changing; the repair "
                    "loops will", ", ".join(map(str, [*ips, *ports])), *owner)

    # --- repair

    async def ensure_repaired(self) -> None:
        """One repair pass before this apiserver's first allocation (the allocations of Services
        stored before the store kept them are taken then)."""
        if self._repaired:
            return
        async with self._lock:
            if not self._repaired:
                await self.repair()
                self._repaired = True

    async def repair(self) -> None:
        """One pass of both loops: the bitmap is read before the Services are listed (see
        servicerepair.repair_ports) and written only if unchanged since; a conflict starts the
        port pass again."""
        for attempt in range(ATTEMPTS):
            stored = self.allocations.blank().ports
            rev = await self._ports(stored)
            addresses = {obj["metadata"]["name"]: obj for _, obj in await self._list(IP_PREFIX)}
            services = [obj for _, obj in await self._list(SERVICE_PREFIX)]
            rebuilt = self.allocations.blank()
            messages = rebuilt.rebuild(services)
            ips = servicerepair.repair_ips(self.allocations.blank().ips, services, addresses, now=self.clock())
            ports = servicerepair.repair_ports(stored, rebuilt.ports, self.leaks)
            if attempt == 0:
                for message in (*messages, *ips.messages):
                    log.warning("service allocation repair: %s", message)
                await self._repair_ips(ips, addresses)
            if ports.changed:
                key = _b(RANGE_KEY)
                done = await self.storage.client.txn([compare(key, "mod_revision", "=", rev)],
                                                     [put_op(key, self._range_value(ports.ports))], [])
                if not done.get("succeeded"):
                    await asyncio.sleep(self.rand.uniform(0, 0.002 * (attempt + 1)))
                    continue
            for message in ports.messages:
                log.warning("service allocation repair: %s", message)
            self.leaks = ports.leaks
            return
        log.warning("service allocation repair: the node port bitmap kept changing; next pass later")

    async def _repair_ips(self, plan: servicerepair.IPRepair, addresses: dict[str, dict]) -> None:
        for ip in plan.delete:
            rev = int(addresses[ip]["metadata"]["resourceVersion"])
            await self.storage.delete(registry_key("ipaddresses", None, ip), rev)  # changed meanwhile: left
        for ip, namespace, name in plan.create:
            await self.storage.create(registry_key("ipaddresses", None, ip),
                                      encode(self._ipaddress(ip, namespace, name)))  # there by now: left

    async def _list(self, prefix: str) -> list[tuple[bytes, dict]]:
        items, _, _ = await self.storage.list(prefix)
        return items

    async def run(self, interval: float = REPAIR_INTERVAL) -> None:
        """The repair loops, until cancelled; a pass the store cannot answer is tried next time."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.repair()
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the store away: the next pass repairs
                log.warning("service allocation repair: %s; next pass in %.0fs", err, interval)

