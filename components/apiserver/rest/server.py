"""The HTTPS listener: Python's ssl and aiohttp's HTTP/1.1 server, with bounds on what clients may hold.

TLS 1.2 or later with the apiserver's serving certificate; a client certificate is asked for
(CERT_OPTIONAL) and verified against the client CA when one is given, so certificate users and
token users share the port; with --permit-port-sharing it is bound with SO_REUSEPORT, so the
apiservers of an HA cluster share it too (the kernel hands each connection to one of them).
Bounds: at most MAX_CONNECTIONS open connections (one over it is closed at once, and one line
says so, at most every LOG_EVERY seconds); a TLS handshake must end within HANDSHAKE_TIMEOUT;
a connection that has not sent a whole request head within IDLE_TIMEOUT of opening or of its
last answer is closed (aiohttp's keep-alive timer: slowloris clients); request lines and header
fields of at most MAX_FIELD bytes, MAX_HEADERS of them; bodies as app.MAX_BODY_BYTES says. A
client that goes away cancels its request's handler (a watch, a followed log); writes are
shielded in the app.

aiohttp's low-level server calls the one handler for every request: the app routes by itself.
aiohttp's Application (its router matching every path to that one handler, its Request) cost
5-10 % of an HTTPS GET's Python time in a profile.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import time
from typing import Awaitable, Callable

from aiohttp import web

from kubemu.ratelimit import LogThrottle

from .app import MAX_BODY_BYTES

log = logging.getLogger("kubemu.apiserver.rest")

MAX_CONNECTIONS = 2048
HANDSHAKE_TIMEOUT = 10.0
IDLE_TIMEOUT = 30.0
MAX_FIELD = 16 * 1024
MAX_HEADERS = 100
SHUTDOWN_TIMEOUT = 5.0
LOG_EVERY = 10.0


def ssl_context(cert_file: str, key_file: str, client_ca_file: str | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        ctx.load_verify_locations(client_ca_file)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


class _BriefLog(logging.LoggerAdapter):
    """aiohttp's server logger, for what it reports itself (a request it could not parse, a
    client gone mid-answer): one WARNING line without the traceback, throttled per peer."""

    def __init__(self, logger: logging.Logger):
        super().__init__(logger, {})
        self.throttle = LogThrottle()

    def exception(self, msg, *args, exc_info=True, **kwargs) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else None
        text = msg % args if args else str(msg)
        quiet = self.throttle.allow(text, time.monotonic())
        if quiet is None:
            return
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300] if exc is not None else ""
        more = f" ({quiet} more not logged)" if quiet else ""
        self.logger.warning("%s%s%s", text, f": {detail}" if detail else "", more)


class _Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.abort()


class HTTPSServer:
    """Serves `handler(request)` for every request (RestAPI.serve)."""

    def __init__(self, handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]], host: str | list[str],
                 port: int,
                 context: ssl.SSLContext, *, max_connections: int = MAX_CONNECTIONS,
                 idle_timeout: float = IDLE_TIMEOUT, handshake_timeout: float = HANDSHAKE_TIMEOUT,
                 on_close: Callable[[], Awaitable[None]] | None = None, reuse_port: bool = False):
        self.handler = handler
        self.reuse_port = reuse_port  # kube-apiserver's --permit-port-sharing
        self.on_close = on_close  # after the listener: what the handler holds (RestAPI.close)
        self.idle_timeout = idle_timeout
        self.handshake_timeout = handshake_timeout
        self.host = host
        self.port = port
        self.context = context
        self.max_connections = max_connections
        self._runner: web.ServerRunner | None = None
        self._server: asyncio.AbstractServer | None = None
        self._last_refusal_log = float("-inf")

    async def start(self) -> int:
        """Listen; returns the port (the one chosen when asked for 0)."""
        loop = asyncio.get_running_loop()

        def request(message, payload, protocol, writer, task) -> web.BaseRequest:
            return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY_BYTES)

        http = web.Server(self.handler, request_factory=request, handler_cancellation=True, access_log=None,
                          keepalive_timeout=self.idle_timeout, max_line_size=MAX_FIELD,
                          max_field_size=MAX_FIELD, max_headers=MAX_HEADERS, logger=_BriefLog(log))
        self._runner = web.ServerRunner(http, handle_signals=False, shutdown_timeout=SHUTDOWN_TIMEOUT)
        await self._runner.setup()

        def protocol() -> asyncio.Protocol:
            if len(http.connections) >= self.max_connections:
                now = loop.time()
                if now - self._last_refusal_log >= LOG_EVERY:
                    self._last_refusal_log = now
                    log.warning("refusing HTTPS connections: %d are open (the limit)", len(http.connections))
                return _Refused()
            return http()

        try:
            self._server = await loop.create_server(protocol, self.host, self.port, ssl=self.context,
                                                    ssl_handshake_timeout=self.handshake_timeout,
                                                    reuse_address=True, reuse_port=self.reuse_port, backlog=1024)
        except BaseException:
            await self._runner.cleanup()
            self._runner = None
            raise
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self.on_close is not None:
            await self.on_close()
