"""kube-proxy's userspace mode, the decisions (pure; the sockets are in `userspace.py`).

Without nftables (no pod networks, or no `nft`, or no privileges) kubemu's proxy forwards in
userspace, as kube-proxy's historical userspace proxier did, but without its iptables REDIRECT:
in host mode the service CIDR is a loopback range and all of 127/8 is local on Linux, so the
proxy listens on the ClusterIP itself, with SO_REUSEPORT so that every node's proxy holds the
same `<clusterIP>:<port>` (the kernel spreads connections over them; one gone, the others keep
serving; each cluster has a loopback block of its own, so only its own nodes' proxies meet
there). NodePorts listen on the `--nodeport-addresses` (kube-proxy's flag; here single loopback
addresses, `kubemu up` gives node-0's proxy 127.0.0.1/32), WITHOUT SO_REUSEPORT: the host's
127.0.0.1 is every cluster's, and SO_REUSEPORT joins any same-user sockets, so two clusters that
allocated the same NodePort would silently split each other's connections; the second proxy
gets EADDRINUSE instead, said once (ListenFailed). Without `--nodeport-addresses` no NodePort is
served (kube-proxy's default, every node address, is all of 127/8 here: every node's and every
cluster's).

- `Planner.plan(ports, listening)`: which listeners to open and close, which service port each
  one serves, and what to say once (a port this process may not bind, an address that is not
  loopback, a protocol it cannot forward).
- `Balancer`: the endpoint for a new connection - round-robin, with ClientIP session affinity
  that expires `timeoutSeconds` after the client's last connection (the userspace proxier's
  LoadBalancerRR), and the next endpoint when one could not be reached.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from components.kube_proxy.endpoints import ServicePort

LOOPBACK = ipaddress.IPv4Network("127.0.0.0/8")
PROTOCOLS = ("TCP", "UDP")  # SCTP: not in userspace (nor was it in kube-proxy's userspace mode)
CAP_NET_BIND_SERVICE = 10


@dataclass(frozen=True, order=True)
class Listener:
    protocol: str   # TCP | UDP
    address: str
    port: int

    def __str__(self) -> str:
        return f"{self.address}:{self.port}/{self.protocol}"


@dataclass(frozen=True, order=True)
class Target:
    """What a listener serves: one service port's ClusterIP traffic, or its NodePort traffic
    (`external`: the endpoints after externalTrafficPolicy)."""
    key: tuple[str, str, str, str]  # ServicePort.key
    external: bool = False

    @property
    def reuse_port(self) -> bool:
        """Whether its listener is bound with SO_REUSEPORT: a ClusterIP's is shared by the
        cluster's nodes' proxies; a NodePort's is one proxy's alone (see the module's doc)."""
        return not self.external


@dataclass(frozen=True)
class Notice:
    """Said once: one log line and a Warning Event on the Service."""
    namespace: str
    name: str
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    open: tuple[Listener, ...]
    close: tuple[Listener, ...]
    routes: Mapping[Listener, Target]   # every desired listener → what it serves
    notices: tuple[Notice, ...]


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.IPv4Address(address) in LOOPBACK
    except ValueError:
        return False


def nodeport_listen_addresses(cidrs: Iterable[str]) -> tuple[str, ...]:
    """The addresses NodePorts listen on, from `--nodeport-addresses` (CIDRs, kube-proxy's flag):
    a listener binds one address, so each must be a single loopback address (a /32, or bare)."""
    out: list[str] = []
    for cidr in cidrs:
        try:
            net = ipaddress.IPv4Network(cidr)
        except ValueError:
            net = None
        if net is None or net.prefixlen != 32 or net.network_address not in LOOPBACK:
            raise ValueError(f"--nodeport-addresses {cidr}: the userspace proxy listens on single "
                             "loopback addresses (127.x.y.z/32) only")
        if str(net.network_address) not in out:
            out.append(str(net.network_address))
    return tuple(out)


def privileged_port_start(cap_eff: int, unprivileged_port_start: int) -> int:
    """Ports below this need privileges this process lacks: none with CAP_NET_BIND_SERVICE,
    else the kernel's net.ipv4.ip_unprivileged_port_start (1024 by default)."""
    return 0 if cap_eff >> CAP_NET_BIND_SERVICE & 1 else unprivileged_port_start


def _notice(sp: ServicePort, reason: str, message: str) -> Notice:
    return Notice(sp.namespace, sp.name, reason, f"{sp.display}: {message}")


class Planner:
    """Listeners for the desired service ports, and what to say about them - once per
    (listener, reason) while the listener stays desired, never once per sync."""

    def __init__(self, nodeport_addresses: Iterable[str], privileged_below: int):
        self.nodeport_addresses = nodeport_listen_addresses(nodeport_addresses)
        self.privileged_below = privileged_below
        self._said: set[tuple[object, str]] = set()

    def _say_once(self, subject: object, notice: Notice, out: list[Notice]) -> None:
        if (subject, notice.reason) not in self._said:
            self._said.add((subject, notice.reason))
            out.append(notice)

    def plan(self, ports: Iterable[ServicePort], listening: Collection[Listener]) -> Plan:
        routes: dict[Listener, Target] = {}
        notices: list[Notice] = []
        subjects: set[object] = set()
        for sp in ports:
            if sp.protocol not in PROTOCOLS:
                subjects.add(sp.key)
                self._say_once(sp.key, _notice(
                    sp, "UnsupportedProtocol",
                    f"protocol {sp.protocol} is not forwarded in userspace mode"), notices)
                continue
            wanted = [(Listener(sp.protocol, sp.cluster_ip, sp.port), Target(sp.key))]
            if sp.node_port is not None:
                wanted += [(Listener(sp.protocol, address, sp.node_port), Target(sp.key, True))
                           for address in self.nodeport_addresses]
            for listener, target in wanted:
                subjects.add(listener)
                if not is_loopback(listener.address):
                    self._say_once(listener, _notice(
                        sp, "NotLoopback", f"cannot serve {listener} in userspace mode: "
                        "it listens on loopback addresses (127.0.0.0/8) only"), notices)
                elif listener.port < self.privileged_below:
                    self._say_once(listener, _notice(
                        sp, "PrivilegedPort", f"cannot serve {listener}: ports below "
                        f"{self.privileged_below} need CAP_NET_BIND_SERVICE"), notices)
                elif listener in routes:
                    # The API's allocators keep ClusterIPs and NodePorts unique; should two
                    # service ports still meet on one listener, the first keeps it.
                    self._say_once(listener, _notice(
                        sp, "PortConflict", f"{listener} is already served for another service port"),
                        notices)
                else:
                    routes[listener] = target
        self._said = {(s, r) for s, r in self._said if s in subjects}
        return Plan(open=tuple(sorted(set(routes) - set(listening))),
                    close=tuple(sorted(set(listening) - set(routes))),
                    routes=routes, notices=tuple(notices))

    def failed(self, listener: Listener, sp: ServicePort, error: str) -> Notice | None:
        """The shell could not open `listener` (it retries at the next sync): the notice, the
        first time only."""
        out: list[Notice] = []
        self._say_once(listener, _notice(sp, "ListenFailed", f"cannot listen on {listener}: {error}"), out)
        return out[0] if out else None


@dataclass
class _Balance:
    endpoints: tuple[tuple[str, int], ...]
    affinity_timeout: float | None
    index: int = 0
    # client IP → (endpoint, last used)
    affinity: dict[str, tuple[tuple[str, int], float]] = field(default_factory=dict)


class Balancer:
    """Round-robin over each target's endpoints, with ClientIP affinity."""

    def __init__(self) -> None:
        self._targets: dict[Target, _Balance] = {}

    def update(self, target: Target, endpoints: Sequence[tuple[str, int]], affinity_timeout: float | None) -> None:
        """New endpoints (or affinity setting) for `target`; the rotation goes on, a client keeps
        its endpoint if that one remains."""
        eps = tuple(endpoints)
        state = self._targets.get(target)
        if state is None:
            self._targets[target] = _Balance(eps, affinity_timeout)
            return
        state.endpoints = eps
        if affinity_timeout != state.affinity_timeout:
            state.affinity.clear()
        state.affinity_timeout = affinity_timeout
        state.affinity = {c: a for c, a in state.affinity.items() if a[0] in eps}

    def retain(self, targets: Collection[Target]) -> None:
        for target in [t for t in self._targets if t not in targets]:
            del self._targets[target]

    def endpoints(self, target: Target) -> tuple[tuple[str, int], ...]:
        state = self._targets.get(target)
        return state.endpoints if state else ()

    def pick(self, target: Target, client_ip: str, now: float,
             exclude: Collection[tuple[str, int]] = ()) -> tuple[str, int] | None:
        """The endpoint for a new connection from `client_ip`, None when there is none left
        (`exclude`: the endpoints this connection already failed to reach)."""
        state = self._targets.get(target)
        if state is None:
            return None
        if state.affinity_timeout is not None:
            sticky = state.affinity.get(client_ip)
            if sticky is not None and sticky[0] not in exclude and now - sticky[1] < state.affinity_timeout:
                state.affinity[client_ip] = (sticky[0], now)
                return sticky[0]
        if all(e in exclude for e in state.endpoints):
            return None
        # Round-robin over the full list so that skipping a failed endpoint does not change
        # which endpoint the next connection gets.
        n = len(state.endpoints)
        for step in range(n):
            endpoint = state.endpoints[(state.index + step) % n]
            if endpoint not in exclude:
                state.index = (state.index + step + 1) % n
                break
        if state.affinity_timeout is not None:
            state.affinity[client_ip] = (endpoint, now)
        return endpoint

    def expire(self, now: float) -> None:
        """Forget affinities older than their timeout (the proxier's sticky-session cleanup)."""
        for state in self._targets.values():
            if state.affinity_timeout is not None:
                state.affinity = {c: a for c, a in state.affinity.items() if now - a[1] < state.affinity_timeout}
