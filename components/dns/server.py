"""The cluster DNS process (CoreDNS's role): informers on Services, EndpointSlices and Namespaces
feed the zone (components/dns/zone.py), asyncio serves it over UDP and TCP, and two small HTTP
doors answer the probes kubeadm's CoreDNS Deployment has: `/health` (liveness, 200 while the
process serves) and `/ready` (readiness, 200 once every informer has listed, 503 before).

The view is rebuilt lazily: an informer event only marks it stale, the next query rebuilds it,
so a burst of changes costs one rebuild. Answers are cached by the query's bytes (its id aside)
until the view changes, as kubeadm's Corefile puts CoreDNS's `cache` plugin in front of the
zone; a change is seen by the next query, never later."""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import struct
import time
from dataclasses import dataclass

from kubemu.apiclient import ApiClient
from kubemu.informer import Informer
from kubemu.ratelimit import LogThrottle

from . import zone

log = logging.getLogger("dns")

CACHE_ENTRIES = 4096          # answers kept per view (the cache is emptied when full)
TCP_IDLE = 10.0               # seconds a TCP client may keep a connection idle
HTTP_TIMEOUT = 5.0            # seconds an HTTP probe gets to send its request
HTTP_MAX_HEADER_LINES = 64
PORT_ZERO_TRIES = 8           # --port 0: UDP ports tried until TCP can have the same number


@dataclass(frozen=True)
class Addresses:
    """Where the process listens (the ports actually bound, when 0 was asked)."""
    host: str
    dns: int
    health: int
    ready: int


class Zone:
    """The view the informers feed, rebuilt on the first query after a change, and the cache
    of wire answers for that view."""

    def __init__(self, domain: str, ttl: int, services: Informer, slices: Informer, namespaces: Informer):
        self.domain, self.ttl = domain, ttl
        self.informers = (services, slices, namespaces)
        self._view = zone.build_view(domain, (), (), (), ttl=ttl, synced=False)
        self._stale = True
        self._cache: dict[tuple[bytes, bool], bytes] = {}
        for inf in self.informers:
            inf.add_event_handler(self._changed, lambda old, new: self._changed(new), self._changed)

    def _changed(self, _obj) -> None:
        self._stale = True

    def synced(self) -> bool:
        return all(inf.has_synced() for inf in self.informers)

    def view(self) -> zone.ClusterView:
        if self._stale:
            synced = self.synced()
            services, slices, namespaces = self.informers
            self._view = zone.build_view(
                self.domain, services.list(), slices.list(),
                [(ns.get("metadata") or {}).get("name", "") for ns in namespaces.list()],
                serial=int(time.time()), ttl=self.ttl, synced=synced)
            self._cache.clear()
            self._stale = not synced    # until synced, each query looks again
        return self._view

    def respond(self, wire: bytes, tcp: bool) -> zone.Outcome:
        """The outcome of one datagram or TCP message; never raises (zone.respond does not
        either), so a protocol callback never sees an exception."""
        try:
            view = self.view()
        except Exception as err:  # noqa: BLE001  (a query must never take the server down)
            return zone.failure(wire, f"cannot build the view of the cluster ({type(err).__name__}: {err}): SERVFAIL")
        key = (wire[2:], tcp)
        cached = self._cache.get(key)
        if cached is not None:
            return zone.Outcome(wire[:2] + cached)
        outcome = zone.respond(wire, view, tcp=tcp)
        if outcome.reply is not None and not outcome.problem:
            if len(self._cache) >= CACHE_ENTRIES:
                self._cache.clear()
            self._cache[key] = outcome.reply[2:]
        return outcome


class _UDP(asyncio.DatagramProtocol):
    def __init__(self, server: DNSServer):
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr) -> None:
        reply = self.server.handle(data, addr, tcp=False)
        if reply is not None:
            self.transport.sendto(reply, addr)

    def error_received(self, exc: Exception) -> None:
        pass    # an ICMP error for an earlier answer: the client is gone, nothing to do


class DNSServer:
    def __init__(self, api_endpoint: str, *, credentials=None, domain: str = zone.DEFAULT_DOMAIN,
                 ttl: int = zone.DEFAULT_TTL, host: str = "127.0.0.1", port: int = 53,
                 health_port: int = 8080, ready_port: int = 8181, reuse_port: bool = False):
        self.api = ApiClient(api_endpoint, credentials=credentials)
        self.services = Informer(self.api, "services")
        self.slices = Informer(self.api, "endpointslices")
        self.namespaces = Informer(self.api, "namespaces")
        self.zone = Zone(domain, ttl, self.services, self.slices, self.namespaces)
        self.host, self.port, self.health_port, self.ready_port = host, port, health_port, ready_port
        self.reuse_port = reuse_port
        self.throttle = LogThrottle()

    # -- DNS --

    def handle(self, wire: bytes, peer, tcp: bool) -> bytes | None:
        outcome = self.zone.respond(wire, tcp)
        if outcome.problem:
            quiet = self.throttle.allow(peer[0], time.monotonic())
            if quiet is not None:
                more = f" ({quiet} more from this peer not logged)" if quiet else ""
                log.warning("query from %s:%s over %s: %s%s", peer[0], peer[1], "tcp" if tcp else "udp",
                            outcome.problem, more)
        return outcome.reply

    async def _tcp_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        try:
            while True:
                size, = struct.unpack("!H", await asyncio.wait_for(reader.readexactly(2), TCP_IDLE))
                wire = await asyncio.wait_for(reader.readexactly(size), TCP_IDLE)
                reply = self.handle(wire, peer, tcp=True)
                if reply is not None:
                    writer.write(struct.pack("!H", len(reply)) + reply)
                    await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
            pass    # the client closed, went idle or sent half a message: end the connection
        finally:
            writer.close()

    # -- probes --

    async def _http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), HTTP_TIMEOUT)
            for _ in range(HTTP_MAX_HEADER_LINES):
                if (await asyncio.wait_for(reader.readline(), HTTP_TIMEOUT)).strip() == b"":
                    break
            parts = request.split()
            path = parts[1].split(b"?")[0] if len(parts) >= 2 else b""
            if path == b"/health":
                status, body = "200 OK", b"OK"
            elif path == b"/ready" and self.zone.synced():
                status, body = "200 OK", b"OK"
            elif path == b"/ready":
                status, body = "503 Service Unavailable", b"kubernetes"
            else:
                status, body = "404 Not Found", b"404 page not found"
            writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError, ValueError):
            pass    # a probe that did not finish its request (or a line past the reader's limit)
        finally:
            writer.close()

    # -- the process --

    async def _listen(self) -> tuple[list, Addresses]:
        """Bind everything; the transports and servers, and the addresses bound. SO_REUSEPORT
        (`reuse_port`, as CoreDNS binds) only in a network namespace of the process's own: in the
        machine's network it would let any process of the same user, another cluster's DNS,
        join these ports and answer this one's queries and probes. There a port in use is an
        error."""
        opened: list = []
        try:
            opened += await self._bind_dns()
            port = opened[0].get_extra_info("sockname")[1]
            ports = []
            for wanted in (self.health_port, self.ready_port):
                http = await asyncio.start_server(self._http, self.host, wanted, reuse_port=self.reuse_port,
                                                  family=socket.AF_INET)
                opened.append(http)
                ports.append(http.sockets[0].getsockname()[1])
        except BaseException:
            await _close(opened)
            raise
        return opened, Addresses(self.host, port, *ports)

    async def _bind_dns(self) -> list:
        """The UDP transport and the TCP server on one port. With port 0, UDP picks one and TCP
        takes the same number, which a TCP listener may hold: then try another."""
        loop = asyncio.get_running_loop()
        tries = 0
        while True:
            udp, _ = await loop.create_datagram_endpoint(lambda: _UDP(self), local_addr=(self.host, self.port),
                                                         reuse_port=self.reuse_port, family=socket.AF_INET)
            try:
                tcp = await asyncio.start_server(self._tcp_client, self.host, udp.get_extra_info("sockname")[1],
                                                 reuse_port=self.reuse_port, family=socket.AF_INET)
                return [udp, tcp]
            except OSError:
                udp.close()
                tries += 1
                if self.port or tries >= PORT_ZERO_TRIES:
                    raise

    async def run(self) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            opened, where = await self._listen()
        except OSError as err:
            log.error("cannot listen on %s (dns port %d, health %d, ready %d): %s", self.host, self.port,
                      self.health_port, self.ready_port, _reason(err))
            await self.api.close()
            return 1
        informers = [asyncio.create_task(inf.run(stop), name=f"{inf.resource} informer")
                     for inf in (self.services, self.slices, self.namespaces)]
        log.info("serving %s on %s:%d (udp, tcp); /health on %s:%d, /ready on %s:%d", self.zone.domain,
                 where.host, where.dns, where.host, where.health, where.host, where.ready)
        synced = asyncio.create_task(self._log_sync(), name="sync report")
        try:
            await stop.wait()
        finally:
            log.info("shutting down")
            stop.set()
            synced.cancel()
            await _close(opened)
            await asyncio.gather(synced, *informers, return_exceptions=True)
            await self.api.close()
        return 0

    async def _log_sync(self) -> None:
        for inf in (self.services, self.slices, self.namespaces):
            await inf.wait_for_sync()
        view = self.zone.view()
        log.info("synced: %d services, %d with endpoints, %d namespaces; ready", len(view.services),
                 len(view.endpoints), len(view.namespaces))


def _reason(err: OSError) -> str:
    """Why a bind failed, in the system's words (uvloop's UDP bind error leaves its errno to the
    error it was raised from; asyncio's TCP one rewords it)."""
    cause = err.__cause__ if isinstance(err.__cause__, OSError) else err
    return os.strerror(cause.errno) if cause.errno else str(cause)


async def _close(opened: list) -> None:
    for item in opened:
        item.close()
    for item in opened:
        if isinstance(item, asyncio.AbstractServer):
            await item.wait_closed()
