"""kube-apiserver's Service allocation repair loops (ipallocator/controller/repairip.go and
portallocator/controller/repair.go), as pure decisions over what the store holds.

    repair_ips(ips, services, addresses, now=, grace=)  -> IPRepair(create, delete, messages)
        `ips` (an empty IPAllocator of the service CIDR) is filled by serviceips.rebuild's rules;
        every address a Service validly holds gets an IPAddress naming it (created when missing,
        recreated when it names something else that does not hold it); an IPAddress of the
        Service allocator that no Service holds is deleted once it is older than `grace`: a
        create or update puts the IPAddress before the Service, so a young one may be a
        request still under way.
    repair_ports(stored, rebuilt, leaks)                 -> PortRepair(ports, leaks, messages)
        `rebuilt` holds the Services' NodePorts (serviceips.rebuild); a port the store's bitmap
        holds and no Service does is a leak, still kept for LEAK_ROUNDS repairs (a Service may be
        on its way to the store with it) and then freed; a port a Service holds and the bitmap
        does not is taken. The caller reads the bitmap before it lists the Services, and writes
        the result conditionally on the bitmap's revision, so an allocation made meanwhile is never
        lost.
"""
from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Iterable

from kubemu.api.ipaddress import LABEL_MANAGED_BY, SERVICE_ALLOCATOR, parent_ref

from .serviceips import IPAllocator, PortAllocator, cluster_ips

LEAK_ROUNDS = 3  # numRepairsBeforeLeakCleanup
IP_LEAK_GRACE = datetime.timedelta(seconds=60)  # a request's longest life in kube-apiserver


@dataclass(frozen=True)
class IPRepair:
    create: tuple[tuple[str, str, str], ...]  # (address, Service namespace, Service name)
    delete: tuple[str, ...]                   # IPAddress names, deleted before the creates
    messages: tuple[str, ...]


@dataclass(frozen=True)
class PortRepair:
    ports: PortAllocator   # what the bitmap should hold
    leaks: dict[int, int]  # port -> repairs left before it is freed
    messages: tuple[str, ...]
    changed: bool          # whether `ports` differs from the stored bitmap


def _meta(obj: dict) -> dict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _holder(svc: dict) -> tuple[str, str]:
    return _meta(svc).get("namespace") or "", _meta(svc).get("name") or ""


def owners(ips: IPAllocator, services: Iterable[dict]) -> dict[str, tuple[str, str]]:
    """address -> (namespace, name) of the first Service validly holding it (rebuild's order)."""
    out: dict[str, tuple[str, str]] = {}
    for svc in services:
        for ip in cluster_ips(svc):
            if ips.contains(ip) and ip not in out:
                out[ip] = _holder(svc)
    return out


def _service_ref(ref: dict | None) -> tuple[str, str] | None:
    """(namespace, name) of the Service an IPAddress names, None if it names something else."""
    if not ref or ref.get("group") not in (None, "") or ref.get("resource") != "services":
        return None
    return ref.get("namespace") or "", ref.get("name") or ""


def _older_than(obj: dict, now: datetime.datetime, grace: datetime.timedelta) -> bool:
    created = _meta(obj).get("creationTimestamp")
    try:
        return now - datetime.datetime.fromisoformat(created.replace("Z", "+00:00")) > grace
    except (AttributeError, TypeError, ValueError):
        return True  # no readable creation time: nothing to wait for


def repair_ips(ips: IPAllocator, services: list[dict], addresses: dict[str, dict], *,
               now: datetime.datetime, grace: datetime.timedelta = IP_LEAK_GRACE) -> IPRepair:
    held = owners(ips, services)
    holds = {_holder(svc): set(cluster_ips(svc)) for svc in services}
    create, delete, messages = [], [], []
    for ip, (ns, name) in held.items():
        addr = addresses.get(ip)
        if addr is None:
            create.append((ip, ns, name))
            messages.append(f"the cluster IP {ip} for service {ns}/{name} is not allocated; repairing")
            continue
        ref = _service_ref(parent_ref(addr))
        if ref == (ns, name) or (ref is not None and ip in holds.get(ref, ())):
            continue  # its own, or another Service's that holds it too (rebuild said so)
        delete.append(ip)
        create.append((ip, ns, name))
        messages.append(f"the cluster IP {ip} for service {ns}/{name} has a wrong reference; repairing")
    for ip, addr in addresses.items():
        if ip in held or _meta(addr).get("labels", {}).get(LABEL_MANAGED_BY) != SERVICE_ALLOCATOR:
            continue  # the loop above checked it; or not the Service allocator's to clean up
        ref = _service_ref(parent_ref(addr))
        if ref is not None and ip in holds.get(ref, ()):
            continue  # held by a Service outside the range: rebuild said so
        if ref is not None and not _older_than(addr, now, grace):
            continue  # maybe a create or update under way
        delete.append(ip)
        messages.append(f"the IPAddress {ip} appears to have leaked: cleaning up")
    return IPRepair(tuple(create), tuple(delete), tuple(messages))


def repair_ports(stored: PortAllocator, rebuilt: PortAllocator, leaks: dict[int, int]) -> PortRepair:
    messages: list[str] = []
    kept: dict[int, int] = {}
    base = rebuilt.range.base
    for offset in sorted(rebuilt.bits.used - stored.bits.used):
        messages.append(f"the node port {base + offset} is not allocated; repairing")
    for offset in sorted(stored.bits.used - rebuilt.bits.used):
        port = base + offset
        left = leaks.get(port, LEAK_ROUNDS)
        if left > 1:
            if port not in leaks:
                messages.append(f"the node port {port} may have leaked: flagging for later clean up")
            kept[port] = left - 1
            rebuilt.allocate(port)
        else:
            messages.append(f"the node port {port} appears to have leaked: cleaning up")
    return PortRepair(rebuilt, kept, tuple(messages), rebuilt.bits.used != stored.bits.used)
