"""What the apiserver does to a Service beyond validation (pkg/registry/core/service/storage's
REST and its allocators), as pure functions over serviceips' allocators (a view of what the
store holds: servicealloc.py reads it, writes what was taken, and gives back).

    prepare_for_create(svc)              the server's status (no load balancer yet)
    prepare_for_update(old, new)         the values the server allocated, kept when the update
        leaves them out (patchAllocatedValues: nodePorts by port name, "" included, and the
        healthCheckNodePort), and dropped when the type no longer needs them and the update left
        them as they were (dropTypeDependentFields): NodePort -> ClusterIP loses its nodePorts,
        anything -> ExternalName its clusterIP
    Allocations(cidr, ports, rand=)
      .update(old, new, dry_run=)
                          -> (new with what it newly needs and `old` (None on create) does not
                              hold allocated: its clusterIP, its nodePorts, its
                              healthCheckNodePort; Transaction). A dry run takes nothing: it
                              checks the values asked for are free and fills in free ones
                              (kube-apiserver's dry-run allocators), so a real request meanwhile
                              is never refused for what a dry run only looked at.
      .release(svc)       give back what a deleted Service held
      .blank()            empty allocators over the same ranges and randomness
      .rebuild(services)  -> [warning, ...]   what the Services hold (serviceips.rebuild)
    Transaction.revert()  the write failed: give back what was taken (a dry run took nothing)
    Transaction.commit()  the write succeeded: give back what the old object held and the new
                          one does not

An allocation error is a ValidationError (422) in kube-apiserver's words, at the field's path:
`spec.clusterIPs[0]: Invalid value: "10.0.0.1": failed to allocate IP 10.0.0.1: the provided IP
(10.0.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/12`,
`spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated`. (A
healthCheckNodePort that cannot be had is kube-apiserver's 500 InternalError; here it is a 422 at
spec.healthCheckNodePort with the same words: the request is what is wrong.)
"""
from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Iterable

from kubemu.api.fielderrors import FieldError, ValidationError, child, index, invalid
from kubemu.api.service import NODE_PORT_TYPES, NONE, externally_accessible, needs_health_check

from .serviceips import (AllocationError, IPAllocator, PortAllocator, PortRange, cluster_ips,
                         is_port, node_ports, rebuild)


def _spec(svc: dict | None) -> dict:
    spec = svc.get("spec") if isinstance(svc, dict) else None
    return spec if isinstance(spec, dict) else {}


def _ports(spec: dict) -> list[dict]:
    ports = spec.get("ports")
    return [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


def _type(spec: dict) -> str:
    return spec.get("type") or "ClusterIP"


def needs_cluster_ip(spec: dict) -> bool:
    return _type(spec) != "ExternalName"


def needs_node_ports(spec: dict) -> bool:
    return _type(spec) in NODE_PORT_TYPES


def _allocates_node_ports(spec: dict) -> bool:
    """A LoadBalancer Service with allocateLoadBalancerNodePorts false gets only those asked for."""
    return needs_node_ports(spec) and not (_type(spec) == "LoadBalancer"
                                           and spec.get("allocateLoadBalancerNodePorts") is False)


def prepare_for_create(svc: dict) -> None:
    svc["status"] = {"loadBalancer": {}}


def prepare_for_update(old: dict, new: dict) -> None:
    """Changes `new` (a shallow copy whose spec may be replaced) in place."""
    old_spec, new_spec = _spec(old), _spec(new)
    if not isinstance(new.get("spec"), dict):
        return
    spec = new["spec"] = dict(new_spec)
    if needs_cluster_ip(old_spec) and needs_cluster_ip(spec):
        if spec.get("clusterIP") in (None, "") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
        if not spec.get("clusterIPs") and old_spec.get("clusterIPs"):
            spec["clusterIPs"] = list(old_spec["clusterIPs"])
    elif needs_cluster_ip(old_spec) and not needs_cluster_ip(spec):
        if (spec.get("clusterIP"), spec.get("clusterIPs")) == (old_spec.get("clusterIP"),
                                                                 old_spec.get("clusterIPs")):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
    if isinstance(spec.get("ports"), list):
        spec["ports"] = [dict(p) if isinstance(p, dict) else p for p in spec["ports"]]
    ports = _ports(spec)
    if needs_node_ports(old_spec) and needs_node_ports(spec):
        by_name = {p.get("name") or "": p.get("nodePort") for p in _ports(old_spec)}
        used = {p.get("nodePort") for p in ports if p.get("nodePort")}
        for port in ports:
            if port.get("nodePort"):
                continue
            kept = by_name.get(port.get("name") or "")
            if kept and kept not in used:
                port["nodePort"] = kept
                used.add(kept)
    elif needs_node_ports(old_spec) and not needs_node_ports(spec):
        if _node_port_set(spec) == _node_port_set(old_spec):
            for port in ports:
                port.pop("nodePort", None)
        if spec.get("allocateLoadBalancerNodePorts") == old_spec.get("allocateLoadBalancerNodePorts"):
            spec.pop("allocateLoadBalancerNodePorts", None)
    if externally_accessible(old_spec) and not externally_accessible(spec) and \
            spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)
    if needs_health_check(old_spec):
        if needs_health_check(spec) and not spec.get("healthCheckNodePort"):
            if old_spec.get("healthCheckNodePort"):
                spec["healthCheckNodePort"] = old_spec["healthCheckNodePort"]
        elif not needs_health_check(spec) and \
                spec.get("healthCheckNodePort") == old_spec.get("healthCheckNodePort"):
            spec.pop("healthCheckNodePort", None)


def _node_port_set(spec: dict) -> set:
    return {p.get("nodePort") for p in _ports(spec) if p.get("nodePort")}


# --- allocation ---------------------------------------------------------------------------------

@dataclass
class Transaction:
    allocations: "Allocations"
    dry_run: bool = False  # then `ips` and `ports` were only found free, not taken
    ips: list[str] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)
    freed_ips: list[str] = field(default_factory=list)    # released on commit
    freed_ports: list[int] = field(default_factory=list)

    def take_ip(self, ip: str | None = None) -> str:
        """Take `ip` (None: a free one), or only check it could be on a dry run."""
        ips = self.allocations.ips
        if ip is None:
            ip = ips.next_free(self.ips) if self.dry_run else ips.allocate_next()
        elif self.dry_run:
            ips.check(ip)
        else:
            ips.allocate(ip)
        self.ips.append(ip)
        return ip

    def take_port(self, port: int | None = None) -> int:
        ports = self.allocations.ports
        if port is None:
            port = ports.next_free(self.ports) if self.dry_run else ports.allocate_next()
        elif port in self.ports:
            raise AllocationError("provided port is already allocated")
        elif self.dry_run:
            ports.check(port)
        else:
            ports.allocate(port)
        self.ports.append(port)
        return port

    def revert(self) -> None:
        if self.dry_run:
            self.ips, self.ports = [], []
            return
        for ip in self.ips:
            self.allocations.ips.release(ip)
        for port in self.ports:
            self.allocations.ports.release(port)
        self.ips, self.ports = [], []

    def commit(self) -> None:
        if self.dry_run:
            raise RuntimeError("a dry run's transaction is never committed")
        for ip in self.freed_ips:
            self.allocations.ips.release(ip)
        for port in self.freed_ports:
            self.allocations.ports.release(port)
        self.ips, self.ports, self.freed_ips, self.freed_ports = [], [], [], []


class Allocations:
    def __init__(self, cidr: str, ports: PortRange, *, rand: random.Random | None = None):
        self.ips = IPAllocator(cidr, rand=rand)
        self.ports = PortAllocator(ports, rand=rand)

    def blank(self) -> "Allocations":
        """Empty allocators over the same ranges and randomness (a view to fill from the store)."""
        return Allocations(str(self.ips.network), self.ports.range, rand=self.ips.bits.rand)

    def rebuild(self, services: Iterable[dict]) -> list[str]:
        return rebuild(self.ips, self.ports, services)

    def release(self, svc: dict) -> None:
        for ip in cluster_ips(svc):
            self.ips.release(ip)
        for port in node_ports(svc):
            self.ports.release(port)

    def update(self, old: dict | None, new: dict, *, dry_run: bool = False) -> tuple[dict, Transaction]:
        """`new` with what it needs and `old` does not hold allocated; ValidationError if that
        cannot be (nothing is then held)."""
        txn = Transaction(self, dry_run)
        out = copy.copy(new)
        spec = out["spec"] = dict(_spec(new))
        errors: list[FieldError] = []
        held_ips = set(cluster_ips(old)) if old else set()
        held_ports = set(node_ports(old)) if old else set()
        if needs_cluster_ip(spec) and spec.get("clusterIP") != NONE:
            self._cluster_ip(spec, held_ips, txn, errors)
        if needs_node_ports(spec):
            spec["ports"] = [dict(p) if isinstance(p, dict) else p for p in spec.get("ports") or []]
            self._node_ports(spec, held_ports, txn, errors)
        if needs_health_check(spec):
            self._health_check_node_port(spec, held_ports, txn, errors)
        if errors:
            txn.revert()
            meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
            raise ValidationError(errors, kind="Service", name=meta.get("name") or "")
        txn.freed_ips = [ip for ip in held_ips if ip not in cluster_ips(out)]
        txn.freed_ports = [p for p in held_ports if p not in node_ports(out)]
        return out, txn

    def _cluster_ip(self, spec: dict, held: set[str], txn: Transaction, errors: list[FieldError]) -> None:
        ip = spec.get("clusterIP")
        if isinstance(ip, str) and ip:
            if ip in held:
                return
            try:
                txn.take_ip(ip)
            except AllocationError as err:
                errors.append(invalid(index("spec.clusterIPs", 0), ip, f"failed to allocate IP {ip}: {err}"))
                return
        else:
            try:
                ip = txn.take_ip()
            except AllocationError as err:
                errors.append(invalid("spec.clusterIPs", spec.get("clusterIPs") or [],
                                      f"failed to allocate a serviceIP: {err}"))
                return
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]

    def _node_ports(self, spec: dict, held: set[int], txn: Transaction, errors: list[FieldError]) -> None:
        by_port: dict = {}  # a port number served over two protocols shares its NodePort
        ports = [(i, p) for i, p in enumerate(spec["ports"]) if isinstance(p, dict)]
        for i, port in ports:  # the ones asked for first, then the rest
            wanted = port.get("nodePort")
            if not (isinstance(wanted, int) and not isinstance(wanted, bool) and wanted):
                continue
            path = child(index("spec.ports", i), "nodePort")
            if wanted not in held and wanted not in txn.ports:
                try:
                    txn.take_port(wanted)
                except AllocationError as err:
                    errors.append(invalid(path, wanted, str(err)))
                    continue
            by_port.setdefault(port.get("port"), wanted)
        if not _allocates_node_ports(spec):
            return
        for i, port in ports:
            if port.get("nodePort"):
                continue
            shared = by_port.get(port.get("port"))
            if shared is not None:
                port["nodePort"] = shared
                continue
            try:
                number = txn.take_port()
            except AllocationError as err:
                errors.append(invalid(child(index("spec.ports", i), "nodePort"), 0,
                                      f"failed to allocate a nodePort: {err}"))
                continue
            port["nodePort"] = number
            by_port[port.get("port")] = number

    def _health_check_node_port(self, spec: dict, held: set[int], txn: Transaction,
                                errors: list[FieldError]) -> None:
        """allocHealthCheckNodePort: the one asked for (kept if this Service holds it and none
        of its ports now uses it), else a free one."""
        path = "spec.healthCheckNodePort"
        wanted = spec.get("healthCheckNodePort")
        if not is_port(wanted):
            try:
                spec["healthCheckNodePort"] = txn.take_port()
            except AllocationError as err:
                errors.append(invalid(path, 0, f"failed to allocate a HealthCheck NodePort: {err}"))
            return
        if wanted in held and wanted not in _node_port_set(spec):
            return
        try:
            if wanted in _node_port_set(spec):
                raise AllocationError("provided port is already allocated")
            txn.take_port(wanted)
        except AllocationError as err:
            errors.append(invalid(path, wanted, f"failed to allocate requested HealthCheck NodePort "
                                                f"{wanted}: {err}"))
