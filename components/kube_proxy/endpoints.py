"""Which endpoints a proxy on one node sends each service port's traffic to, from the Services
and EndpointSlices as the API serves them — kube-proxy's service/endpoint change trackers and
its `CategorizeEndpoints` (pkg/proxy/topology.go), without topology hints. Both proxy modes
(nftables, userspace) use this one rule.

- Ready endpoints; if none is ready, the serving and terminating ones (kube-proxy's
  terminating-endpoint fallback, so a rolling update does not drop connections).
- `internalTrafficPolicy: Local`: ClusterIP traffic goes to this node's endpoints only.
- `externalTrafficPolicy: Local`: NodePort / external-IP traffic goes to this node's only, for
  every externally accessible Service (NodePort, LoadBalancer, or ClusterIP with externalIPs).
- Services with no ClusterIP (headless, ExternalName) get no rules, nor do those labelled
  `service.kubernetes.io/service-proxy-name` (another proxy's), as in kube-proxy.
"""
from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

from kubemu.api.service import DEFAULT_AFFINITY_TIMEOUT, SERVICE_NAME_LABEL

SERVICE_PROXY_NAME_LABEL = "service.kubernetes.io/service-proxy-name"  # another proxy's Service
LOCAL = "Local"
CLIENT_IP = "ClientIP"
# What the apiserver lets through as names (DNS labels/subdomains, IANA service names); anything
# else is skipped rather than handed to a proxy (an nft chain name is built from them)
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
PROTOCOLS = ("TCP", "UDP", "SCTP")


@dataclass(frozen=True, order=True)
class Endpoint:
    ip: str
    port: int
    node: str | None
    ready: bool
    serving: bool
    terminating: bool


@dataclass(frozen=True)
class ServicePort:
    """One port of one Service, as a proxy on `node` must serve it."""
    namespace: str
    name: str
    port_name: str          # "" for an unnamed port, as in the EndpointSlice
    protocol: str           # TCP | UDP | SCTP
    cluster_ip: str
    port: int
    node_port: int | None
    external_ips: tuple[str, ...]
    affinity_timeout: int | None  # seconds, ClientIP affinity; None without affinity
    internal_local: bool    # internalTrafficPolicy: Local
    external_local: bool    # externalTrafficPolicy: Local
    endpoints: tuple[Endpoint, ...]           # for ClusterIP traffic (after internal policy)
    external_endpoints: tuple[Endpoint, ...]  # for NodePort / external-IP traffic
    all_endpoints: tuple[Endpoint, ...]       # every endpoint of the slices (before any choice)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.namespace, self.name, self.protocol, self.port_name)

    @property
    def display(self) -> str:
        """kube-proxy's ServicePortName string: `ns/svc:port` (`ns/svc` when unnamed)."""
        base = f"{self.namespace}/{self.name}"
        return f"{base}:{self.port_name}" if self.port_name else base


def _meta(obj: dict) -> dict:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list:
    return value if isinstance(value, list) else []


def _port(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536 else None


def _ipv4(value: object) -> str | None:
    """The address in canonical form, None unless it is an IPv4 address."""
    return _parse_ipv4(value) if isinstance(value, str) else None


@functools.lru_cache(maxsize=1 << 16)  # every sync reads every address again
def _parse_ipv4(text: str) -> str | None:
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        return None


def _condition(conditions: dict, name: str, default: bool) -> bool:
    """One EndpointSlice condition, `default` when absent (discovery/v1): `ready` true,
    `terminating` false, and `serving` the endpoint's `ready` (the API's "defer to ready")."""
    value = conditions.get(name)
    return default if value is None else bool(value)


def slice_endpoints(slice_: dict) -> dict[tuple[str, str], list[Endpoint]]:
    """(port name, protocol) → the endpoints of one IPv4 EndpointSlice."""
    if slice_.get("addressType", "IPv4") != "IPv4":
        return {}
    out: dict[tuple[str, str], list[Endpoint]] = {}
    for port in _list(slice_.get("ports")):
        port = _dict(port)
        number = _port(port.get("port"))
        if number is None:
            continue
        key = (str(port.get("name") or ""), str(port.get("protocol") or "TCP"))
        for ep in _list(slice_.get("endpoints")):
            ep = _dict(ep)
            addresses = [a for a in map(_ipv4, _list(ep.get("addresses"))) if a]
            if not addresses:
                continue
            conditions = _dict(ep.get("conditions"))
            ready = _condition(conditions, "ready", True)
            node = ep.get("nodeName")
            out.setdefault(key, []).append(Endpoint(
                ip=addresses[0], port=number, node=node if isinstance(node, str) else None,
                ready=ready, serving=_condition(conditions, "serving", ready),
                terminating=_condition(conditions, "terminating", False)))
    return out


def usable(endpoints: Iterable[Endpoint]) -> tuple[Endpoint, ...]:
    """Ready endpoints; if there are none, the serving and terminating ones."""
    eps = sorted(set(endpoints))
    ready = [e for e in eps if e.ready]
    return tuple(ready or [e for e in eps if e.serving and e.terminating])


def _affinity(spec: dict) -> int | None:
    if spec.get("sessionAffinity") != CLIENT_IP:
        return None
    timeout = _dict(_dict(spec.get("sessionAffinityConfig")).get("clientIP")).get("timeoutSeconds")
    return timeout if isinstance(timeout, int) and not isinstance(timeout, bool) and timeout > 0 \
        else DEFAULT_AFFINITY_TIMEOUT


def service_ports(services: Iterable[dict], slices: Iterable[dict], node: str) -> list[ServicePort]:
    """Every proxied service port, sorted by (namespace, name, protocol, port name)."""
    by_service: dict[tuple[str, str], dict[tuple[str, str], list[Endpoint]]] = {}
    for slice_ in slices:
        meta = _meta(slice_)
        owner = _dict(meta.get("labels")).get(SERVICE_NAME_LABEL)
        if not isinstance(owner, str) or meta.get("deletionTimestamp"):
            continue
        merged = by_service.setdefault((str(meta.get("namespace") or ""), owner), {})
        for key, eps in slice_endpoints(slice_).items():
            merged.setdefault(key, []).extend(eps)

    out: list[ServicePort] = []
    for svc in services:
        meta, spec = _meta(svc), _dict(svc.get("spec"))
        cluster_ip = _ipv4(spec.get("clusterIP"))  # None also for headless ("None") and unset
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        if cluster_ip is None or spec.get("type") == "ExternalName" \
                or not _NAME.fullmatch(namespace) or not _NAME.fullmatch(name) \
                or SERVICE_PROXY_NAME_LABEL in _dict(meta.get("labels")):
            continue
        has_node_ports = spec.get("type") in ("NodePort", "LoadBalancer")
        internal_local = spec.get("internalTrafficPolicy") == LOCAL
        external_ips = tuple(sorted(ip for ip in map(_ipv4, _list(spec.get("externalIPs"))) if ip))
        # upstream's ExternalPolicyLocal: the policy holds for any externally accessible Service,
        # a ClusterIP one with externalIPs included
        external_local = (has_node_ports or bool(external_ips)) and spec.get("externalTrafficPolicy") == LOCAL
        for port in _list(spec.get("ports")):
            port = _dict(port)
            number = _port(port.get("port"))
            if number is None:
                continue
            port_name, protocol = str(port.get("name") or ""), str(port.get("protocol") or "TCP")
            if (port_name and not _NAME.fullmatch(port_name)) or protocol not in PROTOCOLS:
                continue
            candidates = by_service.get((namespace, name), {}).get((port_name, protocol), [])
            everywhere = usable(candidates)
            here = usable(e for e in candidates if e.node == node)
            out.append(ServicePort(
                namespace=namespace, name=name, port_name=port_name, protocol=protocol,
                cluster_ip=cluster_ip, port=number,
                node_port=_port(port.get("nodePort")) if has_node_ports else None,
                external_ips=external_ips, affinity_timeout=_affinity(spec),
                internal_local=internal_local, external_local=external_local,
                endpoints=here if internal_local else everywhere,
                external_endpoints=here if external_local else everywhere,
                all_endpoints=tuple(sorted(set(candidates)))))
    out.sort(key=lambda sp: sp.key)
    return out
