"""kube-proxy's nftables rules for one node, decided without touching the kernel: the desired
state (`desired`) and the `nft -f` transaction that takes the table from what was programmed
to it (`transaction`), whole (a full sync) or only the changed services (a partial sync).

The layout mirrors kube-proxy's nftables mode (pkg/proxy/nftables/proxier.go): a `services`
chain looking ClusterIPs up in the `service-ips` verdict map, per service port a `service-…`
chain choosing an endpoint with `numgen random`, per endpoint an `endpoint-…` chain with the
hairpin masquerade mark and the `dnat`, ClientIP affinity sets, `service-nodeports`, and
`no-endpoint-services`/`no-endpoint-nodeports` answering with `reject` (or `drop` when a Local
policy has endpoints elsewhere only).

kubemu's differences, all because N proxies share one fabric namespace (README "Services"):
- the table is `ip kube-proxy-<i>` (i = the node's bridge index), and it only takes packets
  that arrive from its node's bridge (node-0's also from the host link) or are addressed to its
  node's NodePort addresses — so the tables of two nodes never match the same packet;
- NodePorts answer on the node's bridge gateway (and on node-0 the fabric's host-link address),
  as a fixed `nodeport-ips` set: kube-proxy's `fib daddr type local` would match every node's;
- the no-endpoint check runs in `filter-prerouting`, not `filter-forward`: the fabric's
  `unreachable` route for the service CIDR answers before the forward hook would see it; for
  the same reason a port a ClusterIP does not serve is refused there, before DNAT, by a
  negated lookup in a plain `service-ports` set (kube-proxy rejects `@cluster-ips` after DNAT);
- the fabric runs no processes, so there is no `nat-output`/`filter-output`.

Stale service and endpoint chains are flushed at once and deleted only a second later, as
kube-proxy does (kernels before 6.2 may still be using a just-removed vmap element's chain).
"""
from __future__ import annotations

import base64
import functools
import hashlib
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from components.kube_proxy.endpoints import Endpoint, ServicePort, usable
from kubemu import netplan

FAMILY = "ip"
TABLE_PREFIX = "kube-proxy-"
STALE_CHAIN_DELAY = 1.0  # seconds between flushing a stale chain and deleting it
FILTER_PRIORITY = -110   # dstnat - 10, kube-proxy's filter chains
NAT_PRE, NAT_POST = -100, 100  # dstnat, srcnat

MARK_FOR_MASQUERADE = "mark-for-masquerade"
MASQUERADING = "masquerading"
SERVICES = "services"
ENDPOINTS_CHECK = "endpoints-check"
REJECT_CHAIN = "reject-chain"
SERVICE_IPS = "service-ips"
SERVICE_NODEPORTS = "service-nodeports"
NO_ENDPOINT_SERVICES = "no-endpoint-services"
NO_ENDPOINT_NODEPORTS = "no-endpoint-nodeports"
NODEPORT_IPS = "nodeport-ips"
CLUSTER_IPS = "cluster-ips"
SERVICE_PORTS = "service-ports"
# chain → (type, hook, priority)
BASE_HOOKS = {
    "filter-prerouting": ("filter", "prerouting", FILTER_PRIORITY),
    "nat-prerouting": ("nat", "prerouting", NAT_PRE),
    "nat-postrouting": ("nat", "postrouting", NAT_POST),
}
BASE_CHAINS = (*BASE_HOOKS, MARK_FOR_MASQUERADE, MASQUERADING, SERVICES, ENDPOINTS_CHECK, REJECT_CHAIN)
ADDR_KEY = "ipv4_addr . inet_proto . inet_service"
PORT_KEY = "inet_proto . inet_service"
MAPS = {SERVICE_IPS: ADDR_KEY, SERVICE_NODEPORTS: PORT_KEY,
        NO_ENDPOINT_SERVICES: ADDR_KEY, NO_ENDPOINT_NODEPORTS: PORT_KEY,
        # plain sets (elements without a verdict): every ClusterIP, and every port it serves
        CLUSTER_IPS: "ipv4_addr", SERVICE_PORTS: ADDR_KEY}
PLAIN_SETS = (CLUSTER_IPS, SERVICE_PORTS)
REJECT, DROP = f"goto {REJECT_CHAIN}", "drop"


# --- where this node's table applies ---------------------------------------------------------

@dataclass(frozen=True)
class Scope:
    """What one node's table is, and which packets it takes."""
    table: str                            # kube-proxy-<i>
    interfaces: tuple[str, ...]           # iifname of this node's clients
    nodeport_addresses: tuple[str, ...]   # where this node's NodePorts answer
    cluster_cidr: str                     # sources outside it are masqueraded
    mark: int                             # 1 << --masquerade-bit
    # Without br_netfilter a reply between two pods of this bridge is bridged past conntrack,
    # which cannot un-DNAT it: then every client from this podCIDR is masqueraded to a local
    # endpoint (the reply is routed back), not only the endpoint itself (hairpin).
    masquerade_pod_cidr: str | None = None


def scope(pod_cidr: str, cluster_cidr: str, masquerade_bit: int = 14,
          host_interface: str | None = None, host_address: str | None = None,
          br_netfilter: bool = True) -> Scope:
    """The scope of the node whose podCIDR is `pod_cidr`: its bridge `kmbr<i>` (plus the host
    link on node-0) and its bridge gateway, the podCIDR's first host, as a NodePort address."""
    bridge = netplan.bridge_name(pod_cidr, cluster_cidr)  # ValueError when not inside
    gateway = str(next(ipaddress.IPv4Network(pod_cidr).hosts()))
    if not 0 <= masquerade_bit <= 31:
        raise ValueError(f"--masquerade-bit {masquerade_bit} must be within 0..31")
    interfaces = (bridge,) + ((host_interface,) if host_interface else ())
    addresses = (gateway,) + ((str(ipaddress.IPv4Address(host_address)),) if host_address else ())
    return Scope(table=TABLE_PREFIX + bridge.removeprefix("kmbr"), interfaces=interfaces,
                 nodeport_addresses=addresses, cluster_cidr=str(ipaddress.IPv4Network(cluster_cidr)),
                 mark=1 << masquerade_bit,
                 masquerade_pod_cidr=None if br_netfilter else str(ipaddress.IPv4Network(pod_cidr)))


# --- names (kube-proxy's) --------------------------------------------------------------------

@functools.lru_cache(maxsize=1 << 16)  # every sync names every chain again
def hash_and_truncate(name: str) -> str:
    """`<H>-<name>`, H the first 8 characters of base32(sha256(name)) (= of its first 5 bytes):
    names that differ only in characters nft would fold stay distinct."""
    digest = base64.b32encode(hashlib.sha256(name.encode()).digest()[:5]).decode()
    return f"{digest}-{name}"[:255]


def _base(sp: ServicePort) -> str:
    return f"{sp.namespace}/{sp.name}/{sp.protocol.lower()}/{sp.port_name}"


def service_chain(sp: ServicePort) -> str:
    return "service-" + hash_and_truncate(_base(sp))


def local_chain(sp: ServicePort) -> str:
    return "local-" + hash_and_truncate(_base(sp))


def external_chain(sp: ServicePort) -> str:
    return "external-" + hash_and_truncate(_base(sp))


def _endpoint_base(sp: ServicePort, ep: Endpoint) -> str:
    return f"{_base(sp)}__{ep.ip}/{ep.port}"


def endpoint_chain(sp: ServicePort, ep: Endpoint) -> str:
    return "endpoint-" + hash_and_truncate(_endpoint_base(sp, ep))


def affinity_set(sp: ServicePort, ep: Endpoint) -> str:
    return "affinity-" + hash_and_truncate(_endpoint_base(sp, ep))


# --- the desired state -----------------------------------------------------------------------

@dataclass(frozen=True)
class ProxyState:
    """Everything a node's table holds. `chains` are the per-service chains (name → rules;
    rules None when only the name is known, e.g. read back from the kernel); the base chains
    follow from `scope`. Elements are `key text → verdict text` ("" in the plain sets)."""
    scope: Scope
    chains: Mapping[str, tuple[str, ...] | None] = field(default_factory=dict)
    affinity_sets: Mapping[str, int | None] = field(default_factory=dict)  # name → timeout (s)
    maps: Mapping[str, Mapping[str, str]] = field(default_factory=dict)    # map → key → verdict


def _l4(protocol: str) -> str:
    return protocol.lower()


def _balance(sp: ServicePort, endpoints: tuple[Endpoint, ...]) -> tuple[str, ...]:
    """A chain choosing one endpoint: a client with affinity back to its endpoint, else a
    random one."""
    rules = []
    if sp.affinity_timeout is not None:
        rules += [f"ip saddr @{affinity_set(sp, ep)} goto {endpoint_chain(sp, ep)}" for ep in endpoints]
    choices = " , ".join(f"{i} : goto {endpoint_chain(sp, ep)}" for i, ep in enumerate(endpoints))
    rules.append(f"numgen random mod {len(endpoints)} vmap {{ {choices} }}")
    return tuple(rules)


def _endpoint_rules(sp: ServicePort, ep: Endpoint, sc: Scope) -> tuple[str, ...]:
    local_net = sc.masquerade_pod_cidr
    if local_net and ipaddress.IPv4Address(ep.ip) in ipaddress.IPv4Network(local_net):
        rules = [f"ip saddr {local_net} jump {MARK_FOR_MASQUERADE}"]
    else:
        rules = [f"ip saddr {ep.ip} jump {MARK_FOR_MASQUERADE}"]  # hairpin: a pod reaching itself
    if sp.affinity_timeout is not None:
        rules.append(f"update @{affinity_set(sp, ep)} {{ ip saddr }}")
    rules.append(f"meta l4proto {_l4(sp.protocol)} dnat to {ep.ip}:{ep.port}")
    return tuple(rules)


def desired(service_ports: Iterable[ServicePort], sc: Scope) -> ProxyState:
    """The table a node's proxy wants, from endpoints.service_ports for that node."""
    chains: dict[str, tuple[str, ...]] = {}
    sets: dict[str, int | None] = {}
    maps: dict[str, dict[str, str]] = {name: {} for name in MAPS}
    for sp in service_ports:
        proto = _l4(sp.protocol)
        has_any = bool(usable(sp.all_endpoints))

        def traffic_chain(eps: tuple[Endpoint, ...], local: bool) -> str:
            name = local_chain(sp) if local else service_chain(sp)
            masquerade = () if local else (
                # off-cluster clients (not pods, not the host link) are masqueraded
                f"ip daddr {sp.cluster_ip} {proto} dport {sp.port} "
                f"ip saddr != {sc.cluster_cidr} jump {MARK_FOR_MASQUERADE}",)
            chains[name] = masquerade + _balance(sp, eps)
            for ep in eps:
                chains[endpoint_chain(sp, ep)] = _endpoint_rules(sp, ep, sc)
                if sp.affinity_timeout is not None:
                    sets[affinity_set(sp, ep)] = sp.affinity_timeout
            return name

        def no_endpoints(local: bool) -> str:
            # a Local policy whose endpoints are all elsewhere drops; none anywhere refuses
            return DROP if local and has_any else REJECT

        cip_key = f"{sp.cluster_ip} . {proto} . {sp.port}"
        maps[CLUSTER_IPS][sp.cluster_ip] = maps[SERVICE_PORTS][cip_key] = ""
        if sp.endpoints:
            internal = traffic_chain(sp.endpoints, sp.internal_local)
            maps[SERVICE_IPS][cip_key] = f"goto {internal}"
        else:
            maps[NO_ENDPOINT_SERVICES][cip_key] = no_endpoints(sp.internal_local)

        if sp.node_port is None and not sp.external_ips:
            continue
        if sp.external_endpoints:
            target = traffic_chain(sp.external_endpoints, sp.external_local)
            # Cluster policy masquerades (the reply must come back through this node); Local
            # keeps the client's address, which is why it only uses this node's endpoints
            chains[external_chain(sp)] = ((f"goto {target}",) if sp.external_local
                                          else (f"jump {MARK_FOR_MASQUERADE}", f"goto {target}"))
            verdict, entry = f"goto {external_chain(sp)}", (SERVICE_IPS, SERVICE_NODEPORTS)
        else:
            verdict, entry = no_endpoints(sp.external_local), (NO_ENDPOINT_SERVICES, NO_ENDPOINT_NODEPORTS)
        for ip in sp.external_ips:
            maps[entry[0]][f"{ip} . {proto} . {sp.port}"] = verdict
        if sp.node_port is not None:
            maps[entry[1]][f"{proto} . {sp.node_port}"] = verdict
    return ProxyState(sc, chains, sets, maps)


# --- what was programmed, and the transaction to the desired state ---------------------------

@dataclass(frozen=True)
class Programmed:
    """The table as the last successful transaction left it, and the stale chains waiting
    for their deletion (name → when it is due)."""
    state: ProxyState
    pending_delete: Mapping[str, float] = field(default_factory=dict)

    def next_due(self) -> float | None:
        return min(self.pending_delete.values(), default=None)


def from_listing(sc: Scope, chains: Iterable[str], sets: Mapping[str, int | None],
                 pending_delete: Mapping[str, float] | None = None) -> Programmed:
    """What an existing table (read back before a full sync) holds, as far as that sync needs:
    its per-service chain and set names, rules unknown; of the chains waiting for deletion, those
    still there (a transaction must not name a chain the kernel does not have)."""
    chains = [c for c in chains if c not in BASE_CHAINS]
    pending = {c: due for c, due in (pending_delete or {}).items() if c in chains}
    return Programmed(ProxyState(sc, {c: None for c in chains if c not in pending},
                                 {s: t for s, t in sets.items() if s.startswith("affinity-")}), pending)


@dataclass(frozen=True)
class Transaction:
    text: str
    after: Programmed     # what the table holds once `text` applied
    full: bool
    changed_chains: int   # per-service chains written


def _q(iface: str) -> str:
    return f'"{iface}"'


def _anon(items: Iterable[str]) -> str:
    items = list(items)
    return items[0] if len(items) == 1 else "{ " + ", ".join(items) + " }"


def _base_lines(sc: Scope) -> list[str]:
    t = f"{FAMILY} {sc.table}"
    ifaces = _anon(_q(i) for i in sc.interfaces)
    mark = f"0x{sc.mark:x}"
    lines = [f'add table {t} {{ comment "rules for kube-proxy" ; }}']
    for chain, (kind, hook, prio) in BASE_HOOKS.items():
        lines.append(f"add chain {t} {chain} {{ type {kind} hook {hook} priority {prio} ; }}")
    for chain in BASE_CHAINS[len(BASE_HOOKS):]:
        lines.append(f"add chain {t} {chain}")
    for name, key in MAPS.items():
        lines.append(f"add set {t} {name} {{ type {key} ; }}" if name in PLAIN_SETS
                     else f"add map {t} {name} {{ type {key} : verdict ; }}")
    lines.append(f"add set {t} {NODEPORT_IPS} {{ type ipv4_addr ; }}")
    for chain in BASE_CHAINS:
        lines.append(f"flush chain {t} {chain}")
    for name in (*MAPS, NODEPORT_IPS):
        lines.append(f"flush set {t} {name}" if name in (*PLAIN_SETS, NODEPORT_IPS) else f"flush map {t} {name}")
    rules = {
        "filter-prerouting": ["ct state new jump endpoints-check"],
        ENDPOINTS_CHECK: [f"iifname {ifaces} ip daddr . meta l4proto . th dport vmap @{NO_ENDPOINT_SERVICES}",
                          f"ip daddr @{NODEPORT_IPS} meta l4proto . th dport vmap @{NO_ENDPOINT_NODEPORTS}",
                          f"iifname {ifaces} ip daddr @{CLUSTER_IPS} "
                          f"ip daddr . meta l4proto . th dport != @{SERVICE_PORTS} reject"],
        REJECT_CHAIN: ["reject"],
        "nat-prerouting": [f"iifname {ifaces} jump {SERVICES}",
                           f"ip daddr @{NODEPORT_IPS} meta l4proto . th dport vmap @{SERVICE_NODEPORTS}"],
        SERVICES: [f"ip daddr . meta l4proto . th dport vmap @{SERVICE_IPS}"],
        "nat-postrouting": [f"jump {MASQUERADING}"],
        MASQUERADING: [f"mark and {mark} == 0 return", f"mark set mark xor {mark}",
                       "masquerade fully-random"],
        MARK_FOR_MASQUERADE: [f"mark set mark or {mark}"],
    }
    for chain, chain_rules in rules.items():
        lines += [f"add rule {t} {chain} {rule}" for rule in chain_rules]
    lines.append(f"add element {t} {NODEPORT_IPS} {{ {', '.join(sc.nodeport_addresses)} }}")
    return lines


def transaction(prev: Programmed | None, new: ProxyState, now: float, full: bool = False) -> Transaction:
    """The one atomic `nft -f` transaction from `prev` (None: nothing known) to `new`. Full
    when asked, when nothing is known or the scope changed: every base chain, map and
    per-service chain rewritten. Partial otherwise: only the chains whose rules changed, and
    the map elements that changed. Either way chains no longer wanted are flushed now and
    deleted once STALE_CHAIN_DELAY has passed (a later transaction)."""
    full = full or prev is None or prev.state.scope != new.scope
    old = prev.state if prev is not None else ProxyState(new.scope)
    pending = dict(prev.pending_delete) if prev is not None else {}
    t = f"{FAMILY} {new.scope.table}"

    stale_sets = {s for s in old.affinity_sets if s not in new.affinity_sets}
    # a set whose timeout changed is made again: nft cannot change it in place
    remade_sets = {s for s, timeout in new.affinity_sets.items()
                   if s in old.affinity_sets and old.affinity_sets[s] != timeout}
    gone_sets = stale_sets | remade_sets
    if full:
        write = set(new.chains)
    else:
        write = {c for c, rules in new.chains.items()
                 if c not in old.chains or old.chains[c] != rules or c in pending
                 or any(f"@{s} " in r for r in rules for s in gone_sets)}
    newly_stale = sorted(c for c in old.chains if c not in new.chains and c not in pending)

    lines = _base_lines(new.scope) if full else []
    if not full:  # elements removed or re-pointed go first: nothing may point at a flushed chain
        for name in MAPS:
            before, after = old.maps.get(name, {}), new.maps.get(name, {})
            gone = [k for k, v in before.items() if after.get(k) != v]
            if gone:
                lines.append(f"delete element {t} {name} {{ {', '.join(sorted(gone))} }}")
    for chain in newly_stale:
        lines.append(f"flush chain {t} {chain}")
        pending[chain] = now + STALE_CHAIN_DELAY
    if full:  # also re-flush the chains still waiting: a full sync trusts nothing
        lines += [f"flush chain {t} {c}" for c in sorted(pending) if c not in new.chains and c not in newly_stale]
    ordered = sorted(write)
    for chain in ordered:
        lines += [f"add chain {t} {chain}", f"flush chain {t} {chain}"]
        pending.pop(chain, None)
    for s in sorted(gone_sets):
        lines.append(f"delete set {t} {s}")
    for s, timeout in sorted(new.affinity_sets.items()):
        if full or s not in old.affinity_sets or s in remade_sets:
            lines.append(f"add set {t} {s} {{ type ipv4_addr ; flags dynamic,timeout ; timeout {timeout}s ; }}")
    for chain in ordered:
        lines += [f"add rule {t} {chain} {rule}" for rule in new.chains[chain] or ()]
    for name in MAPS:
        before, after = old.maps.get(name, {}), new.maps.get(name, {})
        added = sorted(f"{k} : {v}" if v else k for k, v in after.items() if full or before.get(k) != v)
        if added:
            lines.append(f"add element {t} {name} {{ {', '.join(added)} }}")
    for chain, due in sorted(pending.items()):
        if due <= now and chain not in new.chains:
            lines.append(f"delete chain {t} {chain}")
    after_pending = {c: d for c, d in pending.items() if d > now and c not in new.chains}
    # chains still waiting are known to the table (flushed): keep them out of `chains`
    text = "\n".join(lines) + ("\n" if lines else "")
    return Transaction(text, Programmed(new, after_pending), full, len(write))


def cleanup(table: str) -> str:
    """Deleting this proxy's table (`--cleanup`); `add` first so a missing table is no error."""
    return f"add table {FAMILY} {table}\ndelete table {FAMILY} {table}\n"


def stale_udp_flows(old: Iterable[ServicePort], new: Iterable[ServicePort]) -> list[tuple[str, ...]]:
    """conntrack filters (`conntrack -D` arguments) for the UDP flows to endpoints a Service
    port no longer uses: UDP has no connection to end, so a client that keeps its source port
    (a DNS client's socket) would keep reaching a gone pod until the flow times out. kube-proxy
    deletes them after the sync that removed the endpoint; TCP needs nothing (the gone pod's
    resets end its connections)."""
    now = {sp.key: sp for sp in new}
    out: list[tuple[str, ...]] = []
    for sp in old:
        if sp.protocol != "UDP":
            continue
        kept = now.get(sp.key)
        still = set(kept.endpoints + kept.external_endpoints) if kept is not None else set()
        for ep in sorted({e.ip for e in sp.endpoints + sp.external_endpoints if e not in still}
                         - {e.ip for e in still}):
            out += [("-p", "udp", "--orig-dst", ip, "--orig-port-dst", str(sp.port), "--dst-nat", ep)
                    for ip in (sp.cluster_ip, *sp.external_ips)]
            if sp.node_port is not None:
                out.append(("-p", "udp", "--orig-port-dst", str(sp.node_port), "--dst-nat", ep))
    return out