"""The Service allocators of kube-apiserver (pkg/registry/core/service/ipallocator and
portallocator), as pure, in-memory bitmaps: each request fills them from what the store holds
(servicealloc.py) and decides on them.

    IPAllocator(cidr, rand=)            ClusterIPs of --service-cluster-ip-range
    PortAllocator(PortRange, rand=)     NodePorts of --service-node-port-range
      .allocate(value)                  take a given IP / port, or raise AllocationError
      .allocate_next()                  take a free one, or raise AllocationError (range is full)
      .check(value)                     what allocate would say, taking nothing (a dry run)
      .next_free(exclude)               a free value allocate_next could give, taking nothing
      .release(value)                   give one back (anything not held: nothing happens)
      .has(value)
    PortAllocator.snapshot() / .restore(range, data)   the bitmap as a RangeAllocation stores it
    parse_port_range("30000-32767")  -> PortRange (ValueError if it is not one)
    rebuild(ips, ports, services)    -> [warning, ...]  what the repair loops (servicerepair.py)
        start from: the allocators hold exactly what the Services hold; an IP or port outside its
        range, or one two Services claim, is left out with one warning ("please recreate", as the
        repair says).

Both split their range in two bands, as the real allocators do since 1.24/1.27: the lower
"static" band (min(max(16, size/16), 256) addresses; min(max(16, size/32), 128) ports) is
where users and installers pick fixed values (the `kubernetes` Service's first address, kube-dns'
tenth), so dynamic allocation takes a random free value of the upper band, and the lower band
only once the upper is full. An IPv4 range never gives out its network or broadcast address.
"""
from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass
from typing import Iterable

from kubemu.api.service import needs_health_check
from kubemu.netplan import DEFAULT_SERVICE_CIDR

DEFAULT_NODE_PORT_RANGE = "30000-32767"
RANGE_FULL = "range is full"


class AllocationError(Exception):
    """Why a value cannot be allocated, in the allocators' words."""


@dataclass(frozen=True)
class PortRange:
    base: int
    size: int

    def __str__(self) -> str:
        return f"{self.base}-{self.base + self.size - 1}"

    def contains(self, port: int) -> bool:
        return self.base <= port < self.base + self.size


def parse_port_range(text: str) -> PortRange:
    """net.ParsePortRange: "30000-32767" (or a single port); ValueError if it is not a range."""
    low, sep, high = str(text).strip().partition("-")
    try:
        first = int(low)
        last = int(high) if sep else first
    except ValueError:
        raise ValueError(f"{text!r}: not a port range (e.g. 30000-32767)") from None
    if not 0 < first <= last <= 65535:
        raise ValueError(f"{text!r}: not a port range (e.g. 30000-32767)")
    return PortRange(first, last - first + 1)


def _static_band(size: int, step: int, cap: int) -> int:
    """calculateRangeOffset: how many of the range's first values form the static band."""
    if size < 16:
        return 0
    return min(max(16, size // step), cap)


class _Bitmap:
    """Offsets 0..size-1; dynamic allocation random in [band, size), then in [0, band)."""

    def __init__(self, size: int, band: int, rand: random.Random | None):
        self.size = size
        self.band = band
        self.rand = rand or random.Random()
        self.used: set[int] = set()

    def take(self, offset: int) -> None:
        self.used.add(offset)

    def pick(self, exclude: frozenset[int] = frozenset()) -> int | None:
        """A free offset, neither used nor in `exclude`, taking nothing."""
        busy = self.used | exclude
        for low, high in ((self.band, self.size), (0, self.band)):
            span = high - low
            if span <= 0 or sum(1 for o in busy if low <= o < high) >= span:
                continue
            start = self.rand.randrange(span)
            for step in range(span):
                offset = low + (start + step) % span
                if offset not in busy:
                    return offset
        return None


class IPAllocator:
    def __init__(self, cidr: str, *, rand: random.Random | None = None):
        self.network = ipaddress.ip_network(cidr, strict=True)
        size = self.network.num_addresses
        if self.network.version == 4:
            size -= 2 if size > 2 else 0  # not the network nor the broadcast address
            self.base = int(self.network.network_address) + (1 if self.network.num_addresses > 2 else 0)
        else:
            size -= 1  # not the subnet-router anycast address
            self.base = int(self.network.network_address) + 1
        self.bits = _Bitmap(max(size, 0), _static_band(size, 16, 256), rand)

    def _offset(self, ip: str) -> int | None:
        try:
            addr = ipaddress.ip_address(ip)
        except ValueError:
            return None
        offset = int(addr) - self.base
        if addr.version != self.network.version or not 0 <= offset < self.bits.size:
            return None
        return offset

    def contains(self, ip: str) -> bool:
        return self._offset(ip) is not None

    def check(self, ip: str) -> int:
        """The offset `allocate(ip)` would take, or its AllocationError."""
        offset = self._offset(ip)
        if offset is None:
            raise AllocationError(f"the provided IP ({ip}) is not in the valid range. "
                                  f"The range of valid IPs is {self.network}")
        if offset in self.bits.used:
            raise AllocationError("provided IP is already allocated")
        return offset

    def allocate(self, ip: str) -> None:
        self.bits.take(self.check(ip))

    def allocate_next(self) -> str:
        ip = self.next_free()
        self.allocate(ip)
        return ip

    def next_free(self, exclude: Iterable[str] = ()) -> str:
        offsets = frozenset(o for o in map(self._offset, exclude) if o is not None)
        offset = self.bits.pick(offsets)
        if offset is None:
            raise AllocationError(RANGE_FULL)
        return str(ipaddress.ip_address(self.base + offset))

    def release(self, ip: str) -> None:
        offset = self._offset(ip)
        if offset is not None:
            self.bits.used.discard(offset)

    def has(self, ip: str) -> bool:
        offset = self._offset(ip)
        return offset is not None and offset in self.bits.used

    def free(self) -> int:
        return self.bits.size - len(self.bits.used)


class PortAllocator:
    def __init__(self, ports: PortRange, *, rand: random.Random | None = None):
        self.range = ports
        self.bits = _Bitmap(ports.size, _static_band(ports.size, 32, 128), rand)

    def check(self, port: int) -> int:
        """The offset `allocate(port)` would take, or its AllocationError."""
        if not self.range.contains(port):
            raise AllocationError("provided port is not in the valid range. "
                                  f"The range of valid ports is {self.range}")
        if port - self.range.base in self.bits.used:
            raise AllocationError("provided port is already allocated")
        return port - self.range.base

    def allocate(self, port: int) -> None:
        self.bits.take(self.check(port))

    def allocate_next(self) -> int:
        port = self.next_free()
        self.allocate(port)
        return port

    def next_free(self, exclude: Iterable[int] = ()) -> int:
        offsets = frozenset(p - self.range.base for p in exclude if self.range.contains(p))
        offset = self.bits.pick(offsets)
        if offset is None:
            raise AllocationError(RANGE_FULL)
        return self.range.base + offset

    def release(self, port: int) -> None:
        if self.range.contains(port):
            self.bits.used.discard(port - self.range.base)

    def has(self, port: int) -> bool:
        return self.range.contains(port) and port - self.range.base in self.bits.used

    def free(self) -> int:
        return self.bits.size - len(self.bits.used)

    def snapshot(self) -> tuple[str, bytes]:
        """(range, data) of a RangeAllocation: bit i of the big-endian number `data` is the
        range's i-th port, as upstream's allocation bitmap."""
        number = 0
        for offset in self.bits.used:
            number |= 1 << offset
        return str(self.range), number.to_bytes((number.bit_length() + 7) // 8, "big")

    def restore(self, range_text, data) -> None:
        """Hold exactly the ports a snapshot holds within this range (a snapshot of another range,
        from an apiserver configured otherwise, is read port by port; anything unreadable holds
        nothing)."""
        self.bits.used.clear()
        try:
            stored = parse_port_range(range_text)
        except ValueError:
            return
        number = int.from_bytes(data, "big") if isinstance(data, bytes) else 0
        offset = 0
        while number:
            if number & 1 and self.range.contains(stored.base + offset):
                self.bits.used.add(stored.base + offset - self.range.base)
            number >>= 1
            offset += 1


# --- what a Service holds -----------------------------------------------------------------------

def cluster_ips(svc: dict) -> list[str]:
    """The addresses a Service holds: its clusterIPs (else clusterIP), without None and ""."""
    spec = svc.get("spec") if isinstance(svc.get("spec"), dict) else {}
    ips = spec.get("clusterIPs")
    if not isinstance(ips, list) or not ips:
        ips = [spec.get("clusterIP")]
    return [ip for ip in ips if isinstance(ip, str) and ip not in ("", "None")]


def node_ports(svc: dict) -> list[int]:
    """The NodePorts a Service holds, each once: its ports', and its healthCheckNodePort when it
    needs one (releaseAllocatedResources: a value left on another Service is not its own)."""
    spec = svc.get("spec") if isinstance(svc.get("spec"), dict) else {}
    out: list[int] = []
    for port in spec.get("ports") if isinstance(spec.get("ports"), list) else []:
        n = port.get("nodePort") if isinstance(port, dict) else None
        if is_port(n) and n not in out:
            out.append(n)
    health = spec.get("healthCheckNodePort")
    if needs_health_check(spec) and is_port(health) and health not in out:
        out.append(health)
    return out


def is_port(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _name(svc: dict) -> str:
    meta = svc.get("metadata") if isinstance(svc.get("metadata"), dict) else {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def rebuild(ips: IPAllocator, ports: PortAllocator, services: Iterable[dict]) -> list[str]:
    """Empty both allocators and take what `services` hold (repairip/repairport's rules); the
    warnings about what could not be taken, one per value."""
    ips.bits.used.clear()
    ports.bits.used.clear()
    warnings = []
    for svc in services:
        for ip in cluster_ips(svc):
            if not ips.contains(ip):
                warnings.append(f"the cluster IP {ip} for service {_name(svc)} is not within the "
                                f"service CIDR {ips.network}; please recreate")
            elif ips.has(ip):
                warnings.append(f"the cluster IP {ip} for service {_name(svc)} was assigned to "
                                "multiple services; please recreate")
            else:
                ips.allocate(ip)
        for port in node_ports(svc):
            if not ports.range.contains(port):
                warnings.append(f"the node port {port} for service {_name(svc)} is not within the "
                                f"port range {ports.range}; please recreate")
            elif ports.has(port):
                warnings.append(f"the node port {port} for service {_name(svc)} was assigned to "
                                "multiple services; please recreate")
            else:
                ports.allocate(port)
    return warnings
