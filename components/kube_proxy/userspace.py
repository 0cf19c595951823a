"""kube-proxy's userspace mode, the sockets (the decisions are in `userspace_plan.py`).

    proxier = UserspaceProxier(nodeport_addresses=["127.0.0.1/32"], recorder=recorder,
                               service_lookup=lambda ns, name: services.get(f"{ns}/{name}"))
    await proxier.sync(endpoints.service_ports(services.list(), slices.list(), node))  # each sync
    await proxier.close()                                                              # at SIGTERM

One listener per `<clusterIP>:<port>` (SO_REUSEPORT: every node's proxy holds the same one) and
per `<nodeport address>:<nodePort>` (no SO_REUSEPORT: one proxy's alone, another cluster's
proxy that allocated the same NodePort cannot join it), loopback only. TCP: the accepted
connection is spliced to an endpoint (round-robin, ClientIP affinity), each way copied until its
EOF, which is passed on as a half-close; an endpoint that does not answer within the dial
timeout is skipped for the next (the old userspace proxier's 250 ms, 500 ms, 1 s, 2 s). With no endpoint the accepted connection
is reset at once: the client sees its connect succeed and then "connection reset by peer" (the
nftables mode's REJECT gives "connection refused"; a listener cannot refuse). UDP: one socket
per client towards its endpoint, closed after `udp_idle_timeout` without traffic either way or
when its endpoint leaves the service; with no endpoint a datagram is dropped. Connections
already spliced outlive their Service's listener, as conntrack entries outlive rules, but not
their proxy's process. ClientIP affinity is each proxy's own: where several nodes' proxies
share a ClusterIP the kernel picks the proxy per connection (by its 4-tuple), so a client may
meet a different endpoint through another proxy.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import time
from collections.abc import Callable, Iterable

from components.kube_proxy.endpoints import ServicePort
from components.kube_proxy.userspace_plan import Balancer, Listener, Notice, Planner, Target, privileged_port_start
from kubemu.network import cap_eff

log = logging.getLogger("kubemu.kube_proxy.userspace")

DIAL_TIMEOUTS = (0.25, 0.5, 1.0, 2.0)  # one per attempt, each to the next endpoint
UDP_IDLE_TIMEOUT = 0.25                # kube-proxy's --udp-timeout default
CHUNK = 65536
UNPRIVILEGED_PORT_START = "/proc/sys/net/ipv4/ip_unprivileged_port_start"


def probe_privileged_below() -> int:
    """Ports below this cannot be bound by this process (see `privileged_port_start`)."""
    try:
        with open(UNPRIVILEGED_PORT_START) as f:
            start = int(f.read())
    except (OSError, ValueError):
        start = 1024
    return privileged_port_start(cap_eff(), start)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a RST (SO_LINGER 0): the client learns at once there is nothing behind."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.transport.abort()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """One direction until EOF, then a half-close of the other side's write end."""
    while data := await reader.read(CHUNK):
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof() and not writer.is_closing():
        writer.write_eof()


async def _splice(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                  up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> bool:
    """Both directions until both ended; False when one failed (a reset), which stops the other."""
    copies = [asyncio.ensure_future(_copy(reader, up_writer)), asyncio.ensure_future(_copy(up_reader, writer))]
    try:
        done, _ = await asyncio.wait(copies, return_when=asyncio.FIRST_EXCEPTION)
        return not any(not c.cancelled() and c.exception() is not None for c in done)
    finally:
        for copy in copies:
            copy.cancel()
        await asyncio.gather(*copies, return_exceptions=True)


class _UdpSession(asyncio.DatagramProtocol):
    """One client's socket towards its endpoint; replies go back through the listener."""

    def __init__(self, proxier: "UserspaceProxier", listener: Listener, client: tuple, endpoint: tuple[str, int]):
        self.proxier, self.listener, self.client, self.endpoint = proxier, listener, client, endpoint
        self.transport: asyncio.DatagramTransport | None = None
        self.pending: list[bytes] = []   # datagrams that came before the socket was made
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False

    def touch(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = asyncio.get_running_loop().call_later(self.proxier.udp_idle_timeout, self.close)

    def send(self, data: bytes) -> None:
        self.touch()
        if self.transport is None:
            self.pending.append(data)
        else:
            self.transport.sendto(data)

    def connection_made(self, transport) -> None:
        self.transport = transport
        if self.closed:     # idle, or its listener closed, while the socket was being made
            transport.close()
            return
        for data in self.pending:
            transport.sendto(data)
        self.pending.clear()

    def datagram_received(self, data: bytes, addr) -> None:
        front = self.proxier._udp_fronts.get(self.listener)
        if front is None or self.closed:
            return
        self.touch()
        front.sendto(data, self.client)

    def error_received(self, exc: Exception) -> None:
        self.close()  # e.g. the endpoint's port unreachable: the next datagram picks again

    def connection_lost(self, exc) -> None:
        self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        if self.transport is not None:
            self.transport.close()
        sessions = self.proxier._udp_sessions.get(self.listener, {})
        if sessions.get(self.client) is self:
            del sessions[self.client]


class _UdpFront(asyncio.DatagramProtocol):
    def __init__(self, proxier: "UserspaceProxier", listener: Listener):
        self.proxier, self.listener = proxier, listener

    def datagram_received(self, data: bytes, addr) -> None:
        self.proxier._udp_datagram(self.listener, data, addr)

    def error_received(self, exc: Exception) -> None:
        pass  # a client gone away: nothing to do for the others


class UserspaceProxier:
    """The userspace forwarders of one kube-proxy; `sync` after every change, `close` at exit."""

    def __init__(self, *, nodeport_addresses: Iterable[str] = (), recorder=None,
                 service_lookup: Callable[[str, str], dict | None] | None = None,
                 privileged_below: int | None = None, udp_idle_timeout: float = UDP_IDLE_TIMEOUT,
                 dial_timeouts: tuple[float, ...] = DIAL_TIMEOUTS, clock: Callable[[], float] = time.monotonic):
        self._planner = Planner(nodeport_addresses, probe_privileged_below() if privileged_below is None
                                else privileged_below)
        self._balancer = Balancer()
        self._recorder = recorder
        self._service_lookup = service_lookup
        self.udp_idle_timeout = udp_idle_timeout
        self._dial_timeouts = dial_timeouts
        self._clock = clock
        self._routes: dict[Listener, Target] = {}
        self._ports: dict[tuple, ServicePort] = {}
        self._tcp_servers: dict[Listener, asyncio.Server] = {}
        self._udp_fronts: dict[Listener, asyncio.DatagramTransport] = {}
        self._udp_sessions: dict[Listener, dict[tuple, _UdpSession]] = {}
        self._connections: set[asyncio.Task] = set()

    @property
    def listening(self) -> set[Listener]:
        return set(self._tcp_servers) | set(self._udp_fronts)

    @property
    def unopened(self) -> set[Listener]:
        """Listeners wanted but not open (a bind failed): the next sync tries them again."""
        return set(self._routes) - self.listening

    def udp_sessions(self) -> int:
        return sum(len(s) for s in self._udp_sessions.values())

    def connections(self) -> int:
        """TCP connections being served (and UDP sockets being made)."""
        return len(self._connections)

    async def sync(self, ports: Iterable[ServicePort]) -> None:
        """Listeners and endpoints as `ports` (every proxied service port) want them."""
        ports = list(ports)
        self._ports = {sp.key: sp for sp in ports}
        plan = self._planner.plan(ports, self.listening)
        self._routes = dict(plan.routes)
        for target in set(plan.routes.values()):
            sp = self._ports[target.key]
            chosen = sp.external_endpoints if target.external else sp.endpoints
            self._balancer.update(target, [(e.ip, e.port) for e in chosen], sp.affinity_timeout)
        self._balancer.retain(set(plan.routes.values()))
        self._balancer.expire(self._clock())
        for notice in plan.notices:
            self._say(notice)
        for listener in plan.close:
            self._close_listener(listener)
        for listener, sessions in self._udp_sessions.items():
            target = self._routes.get(listener)
            for session in list(sessions.values()):
                if target is None or session.endpoint not in self._balancer.endpoints(target):
                    session.close()
        for listener in plan.open:
            try:
                await self._open(listener, plan.routes[listener].reuse_port)
            except OSError as err:
                # asyncio's bind error repeats the address: the errno's words say enough
                notice = self._planner.failed(listener, self._ports[plan.routes[listener].key],
                                              os.strerror(err.errno) if err.errno else str(err))
                if notice is not None:
                    self._say(notice)

    async def close(self) -> None:
        """Every listener, client socket and connection closed (SIGTERM)."""
        for listener in list(self.listening):
            self._close_listener(listener)
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- saying things once --

    def _say(self, notice: Notice) -> None:
        log.warning("%s", notice.message)
        if self._recorder is None:
            return
        service = self._service_lookup(notice.namespace, notice.name) if self._service_lookup else None
        if service is None:
            service = {"kind": "Service", "apiVersion": "v1",
                       "metadata": {"namespace": notice.namespace, "name": notice.name}}
        self._recorder.event(service, "Warning", notice.reason, notice.message)

    # -- listeners --

    async def _open(self, listener: Listener, reuse_port: bool) -> None:
        loop = asyncio.get_running_loop()
        if listener.protocol == "TCP":
            self._tcp_servers[listener] = await asyncio.start_server(
                lambda r, w: self._serve_tcp(listener, r, w), listener.address, listener.port,
                reuse_port=reuse_port, family=socket.AF_INET)
        else:
            transport, _ = await loop.create_datagram_endpoint(
                lambda: _UdpFront(self, listener), local_addr=(listener.address, listener.port),
                reuse_port=reuse_port, family=socket.AF_INET)
            self._udp_fronts[listener] = transport
            self._udp_sessions[listener] = {}
        log.info("listening on %s", listener)

    def _close_listener(self, listener: Listener) -> None:
        server = self._tcp_servers.pop(listener, None)
        if server is not None:
            server.close()
        front = self._udp_fronts.pop(listener, None)
        if front is not None:
            front.close()
        for session in list(self._udp_sessions.pop(listener, {}).values()):
            session.close()
        log.info("closed %s", listener)

    # -- TCP --

    async def _serve_tcp(self, listener: Listener, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        try:
            upstream = await self._dial(listener, writer)
            if upstream is None:
                _reset(writer)
                return
            up_reader, up_writer = upstream
            try:
                if not await _splice(reader, writer, up_reader, up_writer):
                    _reset(writer)      # one side reset: so is the other
                    _reset(up_writer)
            finally:
                up_writer.close()
        except asyncio.CancelledError:
            _reset(writer)
        except Exception as err:   # never a traceback for one connection; the proxy serves on
            log.warning("%s: connection failed: %s", listener, err)
            _reset(writer)
        finally:
            writer.close()
            self._connections.discard(task)

    async def _dial(self, listener: Listener, writer: asyncio.StreamWriter):
        """A connection to an endpoint of the listener's service port, None when none answers."""
        client_ip = (writer.get_extra_info("peername") or ("",))[0]
        tried: set[tuple[str, int]] = set()
        for timeout in self._dial_timeouts:
            target = self._routes.get(listener)
            endpoint = self._balancer.pick(target, client_ip, self._clock(), tried) if target else None
            if endpoint is None:
                return None
            tried.add(endpoint)
            try:
                return await asyncio.wait_for(asyncio.open_connection(*endpoint), timeout)
            except (OSError, asyncio.TimeoutError) as err:
                log.info("%s: endpoint %s:%d: %s", listener, *endpoint, err or "timed out")
        return None

    # -- UDP --

    def _udp_datagram(self, listener: Listener, data: bytes, client: tuple) -> None:
        sessions = self._udp_sessions.get(listener)
        if sessions is None:
            return
        session = sessions.get(client)
        if session is None:
            target = self._routes.get(listener)
            endpoint = self._balancer.pick(target, client[0], self._clock()) if target else None
            if endpoint is None:
                return  # no endpoint: dropped
            session = sessions[client] = _UdpSession(self, listener, client, endpoint)
            task = asyncio.get_running_loop().create_task(self._connect_udp(session))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)
        session.send(data)

    async def _connect_udp(self, session: _UdpSession) -> None:
        try:
            await asyncio.get_running_loop().create_datagram_endpoint(
                lambda: session, remote_addr=session.endpoint, family=socket.AF_INET)
        except OSError as err:
            log.info("%s: endpoint %s:%d: %s", session.listener, *session.endpoint, err)
            session.close()
