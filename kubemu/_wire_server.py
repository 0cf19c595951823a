"""The wire's `Server`: one ROUTER socket, handler classification, replies and streams."""
from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
from contextvars import ContextVar
from typing import Callable, NamedTuple

import zmq
import zmq.asyncio

from . import _wire_auth
from ._wire_auth import CurveAuth, ServerAuth
from ._wire_codec import (CANCEL, NOTIFY, STREAM, USER_AGENT_PROPERTY, Batch, _describe, decode_request,
                          encode_error, encode_ping, encode_reply, encode_stream_end, encode_stream_item,
                          encode_stream_items, encode_stream_start)
from ._wire_backlog import PeerBacklog
from ._wire_endpoints import _clear_stale_ipc, _parse_bind_endpoint, _private_dir
from ._wire_errors import BadRequest, Cancelled, Internal, TooLarge, Unavailable, UnknownMethod, WireError
from ._wire_limits import DEFAULT_MAX_FRAME, HWM, MAXMSGSIZE_FACTOR
from ._wire_params import ParamSpec, handler_params
from ._wire_pump import _NOBLOCK, _SNDMORE_NOBLOCK, _Pump, _zmq_send
from .ratelimit import LogThrottle

log = logging.getLogger("kubemu.wire")

SERVER_LINGER_MS = 0
SLOW_PEER_TIMEOUT = 30.0
# A peer's stream messages that libzmq may hold at most (by bytes: the HWM counts messages),
# and how long a stream waits for its peer to take them before it is ended as too slow.
PEER_BUFFER_BYTES = 16 * 1024 * 1024
SLOW_STREAM_TIMEOUT = 10.0
KEEPALIVE = 5.0
_AGENTS_KEPT = 4096  # connections whose user agent is remembered
_YIELD_EVERY = 64  # a stream whose generator never waits yields to the event loop this often

_SYNC, _CORO, _GEN = 0, 1, 2

# The authenticated identity of the peer whose request a handler is running (a Server with
# `auth`), None without authentication. Set by the Server around each handler call; a
# handler's task copies it, so concurrent requests each see their own.
peer_identity: ContextVar[str | None] = ContextVar("peer_identity", default=None)
# What the peer named itself in its handshake (`Client(user_agent=...)`), read with the
# identity: on a Server with `auth` (its messages carry their connection's metadata); else None.
peer_user_agent: ContextVar[str | None] = ContextVar("peer_user_agent", default=None)
# handshakes a server socket refused before asking ZAP (e.g. a client without credentials)
_HANDSHAKE_REFUSED = int(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
_CRYPTOGRAPHIC = int(zmq.PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)


class _Handler(NamedTuple):
    fn: Callable
    kind: int  # _SYNC, _CORO or _GEN
    params: ParamSpec | None  # None: not knowable, the call itself complains


def _classify(name: str, fn: Callable) -> _Handler:
    if not isinstance(name, str) or not callable(fn):
        raise TypeError(f"handler {name!r} must be a callable registered under a str name")
    call = getattr(fn, "__call__", None)
    if inspect.isasyncgenfunction(fn) or inspect.isasyncgenfunction(call):
        kind = _GEN
    elif inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call):
        kind = _CORO
    else:
        kind = _SYNC
    return _Handler(fn, kind, handler_params(name, fn))


def _params_error(handler: _Handler, method: str, params: dict) -> BadRequest | None:
    """BadRequest if `params` do not fit the handler's signature (names and annotated types)."""
    spec = handler.params
    return None if spec is None else spec.error(method, params)


class _PeerGone(Exception):
    pass


class _SlowPeer(Exception):
    """A stream's peer did not take its messages in time (it is still connected)."""


class Server:
    """An asyncio RPC server on one ROUTER socket. See the module docstring for the protocol.

    `handlers` maps method names to ``async def f(**params) -> result`` (or a quick plain
    ``def``), or to an async generator function, which makes the method a stream. Handlers raise
    WireError subclasses for typed errors."""

    def __init__(self, endpoint: str, handlers: dict[str, Callable], *, max_frame: int = DEFAULT_MAX_FRAME,
                 name: str = "server",
                 context: zmq.Context | None = None, keepalive: float | None = KEEPALIVE,
                 auth: ServerAuth | CurveAuth | None = None):
        self._spec = _parse_bind_endpoint(endpoint, encrypted=isinstance(auth, CurveAuth))
        self.endpoint = endpoint
        self.name = name
        self.max_frame = max_frame
        self.keepalive = keepalive
        self._handlers = {method: _classify(method, fn) for method, fn in handlers.items()}
        self._throttle = LogThrottle()
        self._context = context
        self._auth = auth
        self._zap_domain: str | None = None
        self._monitor: zmq.Socket | None = None
        self._monitor_pump: _Pump | None = None
        self._sock: zmq.Socket | None = None
        self._pump: _Pump | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: dict[tuple[bytes, int], asyncio.Task] = {}
        self._futures: dict[tuple[bytes, int], asyncio.Future] = {}  # plain handlers' pending results
        self._streams: dict[bytes, dict[int, asyncio.Task]] = {}  # per peer, for peer loss
        self._backlogs: dict[bytes, PeerBacklog] = {}  # per peer with streams
        self._agents: dict[bytes, str | None] = {}  # per connection (_user_agent)
        self._aux: set[asyncio.Task] = set()
        self._background: list[asyncio.Task] = []
        self._ipc_ino: int | None = None
        self._started = False
        self._closed: asyncio.Event | None = None

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def start(self) -> None:
        if self._started:
            raise RuntimeError(f"{self.name}: already started")
        self._loop = asyncio.get_running_loop()
        self._closed = asyncio.Event()
        spec = self._spec
        ctx = self._context if self._context is not None else zmq.asyncio.Context.instance()
        sock = zmq.Socket(ctx, zmq.ROUTER)  # a plain socket: _Pump drives it
        try:
            if self._auth is not None:
                self._require_credentials(ctx, sock)
            sock.setsockopt(zmq.LINGER, SERVER_LINGER_MS)
            sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
            sock.setsockopt(zmq.SNDHWM, HWM)
            sock.setsockopt(zmq.RCVHWM, HWM)
            sock.setsockopt(zmq.MAXMSGSIZE, MAXMSGSIZE_FACTOR * self.max_frame)
            if spec.ipv6:
                sock.setsockopt(zmq.IPV6, 1)
            if spec.ipc_path is not None:
                # only we may connect (a shared sticky directory like /tmp is left alone)
                _private_dir(os.path.dirname(os.path.abspath(spec.ipc_path)))
                _clear_stale_ipc(spec.ipc_path)
            sock.bind(spec.endpoint)
            if spec.ipc_path is not None:
                self._ipc_ino = os.stat(spec.ipc_path).st_ino
            if spec.endpoint.startswith("tcp://"):
                self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        except BaseException:
            self._drop_auth(ctx)
            sock.close(0)
            raise
        self._sock = sock
        if self._auth is None:
            self._pump = _Pump(self._loop, sock, self._on_message)
        else:
            self._pump = _Pump(self._loop, sock, self._on_authenticated, metadata=True)
            self._monitor_pump = _Pump(self._loop, self._monitor, self._on_monitor_event)
        self._started = True
        if self.keepalive:
            self._background.append(self._loop.create_task(self._keepalive_loop(), name=f"{self.name}-wire-ping"))

    async def serve_forever(self) -> None:
        if not self._started:
            await self.start()
        await self._closed.wait()

    async def close(self) -> None:
        if not self._started or self._closed.is_set():
            return
        self._closed.set()
        self._pump.close()  # no new requests while the old ones are cancelled
        for task in self._background:
            task.cancel()
        pending = set(self._background) | set(self._tasks.values()) | self._aux
        for task in pending:
            if not task.done() and not task.cancelling():
                task.cancel()
        futures, self._futures = self._futures, {}
        for fut in futures.values():
            fut.cancel()
        if pending:
            _, stuck = await asyncio.wait(pending, timeout=10.0)
            if stuck:
                log.warning("%s: %d handler(s) ignored cancellation at close", self.name, len(stuck))
        self._tasks.clear()
        self._streams.clear()
        self._backlogs.clear()
        self._agents.clear()
        self._aux.clear()
        self._sock.close(SERVER_LINGER_MS)
        self._drop_auth(self._context if self._context is not None else zmq.asyncio.Context.instance())
        path = self._spec.ipc_path
        if path is not None:
            try:
                if os.stat(path).st_ino == self._ipc_ino:  # not a successor's socket
                    os.unlink(path)
            except FileNotFoundError:
                pass

    # -- authentication -----------------------------------------------------------------

    def _require_credentials(self, ctx: zmq.Context, sock: zmq.Socket) -> None:
        """PLAIN or CURVE with this server's ZAP domain (the responder must exist before the
        bind: without a ZAP handler libzmq would let any PLAIN client, or any CURVE key, in)."""
        self._zap_domain = _wire_auth.register(ctx, self._auth, self.name)
        if isinstance(self._auth, CurveAuth):
            sock.setsockopt(zmq.CURVE_SERVER, 1)
            sock.setsockopt(zmq.CURVE_SECRETKEY, self._auth.secret)
        else:
            sock.setsockopt(zmq.PLAIN_SERVER, 1)
        sock.setsockopt_string(zmq.ZAP_DOMAIN, self._zap_domain)
        address = f"inproc://kubemu-wire-server-monitor-{os.getpid()}-{id(self)}"
        sock.monitor(address, _HANDSHAKE_REFUSED)
        self._monitor = zmq.Socket(ctx, zmq.PAIR)
        self._monitor.setsockopt(zmq.LINGER, 0)
        self._monitor.connect(address)

    def _drop_auth(self, ctx: zmq.Context) -> None:
        if self._monitor_pump is not None:
            self._monitor_pump.close()
            self._monitor_pump = None
        if self._monitor is not None:
            self._monitor.close(0)
            self._monitor = None
        if self._zap_domain is not None:
            _wire_auth.unregister(ctx, self._zap_domain)
            self._zap_domain = None

    def _on_monitor_event(self, frames: list[bytes]) -> None:
        """One (rate-limited) line for a handshake refused before ZAP: a client without
        credentials, one speaking another mechanism, or (CURVE) one whose handshake does not
        decrypt, as when it holds another server key."""
        code = int.from_bytes(frames[0][2:6], "little")
        quiet = self._throttle.allow("no credentials", self._loop.time())
        if quiet is not None:
            more = f" (and {quiet} more, not logged)" if quiet else ""
            if code == _CRYPTOGRAPHIC:
                why = "whose CURVE handshake does not decrypt (does it hold this server's public key?)"
            else:
                why = f"without {self._auth.mechanism} credentials"
            log.warning("%s: refused a connection %s (handshake error %s)%s", self.name, why, hex(code), more)

    def _on_authenticated(self, frames: list) -> None:
        """A message of an authenticated connection ([routing id, zmq.Frame, ...]): its
        identity (ZAP's User-Id, stamped by libzmq on every message of the connection) is the
        handler's `peer_identity`."""
        frame = frames[1]
        try:
            user = frame.get("User-Id")
        except zmq.ZMQError:  # cannot happen after a PLAIN handshake, which sets it
            user = None
        if not user:
            self._warn_peer(frames[0], "dropped a message from %s: %s", "no authenticated identity")
            return
        agent = self._user_agent(frames[0], frame)
        frames[1] = frame.bytes
        token = peer_identity.set(user)
        agent_token = peer_user_agent.set(agent)
        try:
            self._on_message(frames, user)
        finally:
            peer_user_agent.reset(agent_token)
            peer_identity.reset(token)

    def _user_agent(self, ident: bytes, frame) -> str | None:
        """The X-User-Agent the connection's client named (None: none), read once per
        connection: reading an absent property raises, and kubelets name none. Only routing
        ids this socket made (a zero first byte, then a counter: never reused while the socket
        lives) are remembered; an id a client chose may come back on another connection."""
        made_here = ident[:1] == b"\0"
        if made_here and ident in self._agents:
            return self._agents[ident]
        try:
            agent = frame.get(USER_AGENT_PROPERTY)
        except zmq.ZMQError:  # the client named none
            agent = None
        if made_here:
            if len(self._agents) >= _AGENTS_KEPT:
                self._agents.clear()  # connections come and go: forget the gone ones at times
            self._agents[ident] = agent
        return agent

    def _authorized(self, ident: bytes, rid: int | None, user: str, method: str, params: dict,
                    notify: bool) -> bool:
        try:
            self._auth.authorize(user, method, params)
        except WireError as err:
            if notify:
                self._warn_peer(ident, "dropped a notification from %s: %s", f"{user}: {err}")
            else:
                self._reject(ident, rid, err)
            return False
        except Exception as exc:  # a bug in the hook must not open the door
            log.error("%s: authorizing %r for %s failed", self.name, method, user, exc_info=exc)
            if not notify:
                self._send(ident, encode_error(rid, Internal(f"authorizing {method!r} failed")))
            return False
        return True

    # -- receiving ----------------------------------------------------------------------

    def _on_message(self, frames: list[bytes], user: str | None = None) -> None:
        ident = frames[0]
        try:
            kind, rid, method, params = decode_request(frames[1:], self.max_frame)
        except WireError as err:
            self._reject(ident, err.request_id, err)
            return
        except Exception:  # a bug here must not kill the receive loop
            log.exception("%s: error decoding a message from %s", self.name, ident.hex())
            return
        # a method this server does not have is answered UnknownMethod, authorized or not
        if (user is not None and kind != CANCEL and self._auth.authorize is not None
                and method in self._handlers
                and not self._authorized(ident, rid, user, method, params, kind == NOTIFY)):
            return
        if kind == NOTIFY:
            self._on_notify(ident, method, params)
            return
        key = (ident, rid)
        if kind == CANCEL:
            fut = self._futures.pop(key, None)
            if fut is not None:
                fut.cancel()  # its owner sees it cancelled; nobody wants the reply
                return
            task = self._tasks.pop(key, None)
            if task is not None:
                self._forget_stream(ident, rid)
                if not task.cancelling():
                    task.cancel()
            return
        handler = self._handlers.get(method)
        if handler is None:
            shown = method if len(method) <= 100 else method[:100] + "..."  # it may be megabytes
            self._reject(ident, rid, UnknownMethod(f"unknown method {shown!r}", {"method": shown}))
            return
        if (handler.kind == _GEN) != (kind == STREAM):
            if kind == STREAM:
                self._reject(ident, rid, BadRequest(f"{method!r} is not a stream; use call()"))
            else:
                self._reject(ident, rid, BadRequest(f"{method!r} is a stream; use stream()"))
            return
        bad = _params_error(handler, method, params)
        if bad is not None:
            self._reject(ident, rid, bad)
            return
        if key in self._tasks or key in self._futures:
            self._reject(ident, rid, BadRequest(f"request id {rid} is already in flight"))
            return
        if handler.kind == _SYNC:
            self._run_inline(ident, rid, method, handler.fn, params)
        elif handler.kind == _CORO:
            self._tasks[key] = self._loop.create_task(self._run_call(ident, rid, method, handler.fn, params))
        else:
            task = self._loop.create_task(self._run_stream(ident, rid, method, handler.fn, params))
            self._tasks[key] = task
            self._streams.setdefault(ident, {})[rid] = task
            if ident not in self._backlogs:
                self._backlogs[ident] = PeerBacklog()

    def _on_notify(self, ident: bytes, method: str, params: dict) -> None:
        """Run a one-way message's handler inline; nothing is sent back, whatever happens."""
        handler = self._handlers.get(method)
        if handler is None or handler.kind != _SYNC:
            shown = method if len(method) <= 100 else method[:100] + "..."
            self._warn_peer(ident, "dropped a notification from %s: %r is not a plain (def) handler here", shown)
            return
        bad = _params_error(handler, method, params)
        if bad is not None:
            self._warn_peer(ident, "dropped a notification from %s: %s", bad)
            return
        try:
            result = handler.fn(**params)
        except WireError as err:  # the handler's answer to bad input: it logs what it must
            log.debug("%s: notification %r from %s: %s", self.name, method, ident.hex(), err)
            return
        except (Exception, asyncio.CancelledError):  # nothing may escape into the receive path
            log.exception("%s: notification %r failed", self.name, method)
            return
        if inspect.isawaitable(result):
            if inspect.iscoroutine(result):
                result.close()
            log.warning("%s: notification %r: its handler returned an awaitable, which was not run",
                        self.name, method)

    def _reject(self, ident: bytes, rid: int | None, err: WireError) -> None:
        self._warn_peer(ident, "rejected a message from peer %s: %s", err)
        self._send(ident, encode_error(rid, err, self.max_frame))

    def _warn_peer(self, ident: bytes, fmt: str, what: object) -> None:
        """One WARNING for a peer's bad message, rate-limited per peer (a server under attack
        must not flood its log): the rest are DEBUG, counted in the next WARNING."""
        quiet = self._throttle.allow(ident, self._loop.time())
        if quiet is None:
            log.debug("%s: " + fmt, self.name, ident.hex(), what)
        elif quiet:
            log.warning("%s: " + fmt + " (and %d more from it, not logged)", self.name, ident.hex(), what, quiet)
        else:
            log.warning("%s: " + fmt, self.name, ident.hex(), what)

    # -- running handlers -----------------------------------------------------------------

    def _run_inline(self, ident, rid, method, fn, params) -> None:
        try:
            result = fn(**params)
        except WireError as err:
            payload = encode_error(rid, err, self.max_frame)
        except Exception as exc:
            payload = self._internal(rid, method, exc)
        except asyncio.CancelledError:  # must not escape into the receive path
            payload = encode_error(rid, Cancelled(f"{method!r} was cancelled"))
        else:
            if isinstance(result, asyncio.Future) and not isinstance(result, asyncio.Task):
                # answered when it is done, without a task per request
                self._futures[(ident, rid)] = result
                result.add_done_callback(functools.partial(self._reply_when_done, ident, rid, method))
                return
            if inspect.isawaitable(result):
                # a plain function (a lambda, a partial) that hands back a coroutine
                self._tasks[(ident, rid)] = self._loop.create_task(
                    self._run_call(ident, rid, method, lambda: result, {}))
                return
            payload = self._reply_payload(rid, method, result)
        self._send(ident, payload)

    def _reply_when_done(self, ident, rid, method, fut: asyncio.Future) -> None:
        if self._futures.get((ident, rid)) is not fut:
            return  # cancelled by the client's CANCEL or by close(): nobody wants a reply
        del self._futures[(ident, rid)]
        if fut.cancelled():
            payload = encode_error(rid, Cancelled(f"{method!r} was cancelled"))
        elif (exc := fut.exception()) is None:
            payload = self._reply_payload(rid, method, fut.result())
        elif isinstance(exc, WireError):
            payload = encode_error(rid, exc, self.max_frame)
        else:
            payload = self._internal(rid, method, exc)
        self._send(ident, payload)

    async def _run_call(self, ident, rid, method, fn, params) -> None:
        try:
            try:
                result = fn(**params)
                if inspect.isawaitable(result):
                    result = await result
            except WireError as err:
                payload = encode_error(rid, err, self.max_frame)
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():
                    raise  # the client or close() cancelled it: nobody wants a reply
                payload = encode_error(rid, Cancelled(f"{method!r} was cancelled"))
            except Exception as exc:
                payload = self._internal(rid, method, exc)
            else:
                payload = self._reply_payload(rid, method, result)
            self._send(ident, payload)
        finally:
            self._tasks.pop((ident, rid), None)

    async def _run_stream(self, ident, rid, method, fn, params) -> None:
        agen = None
        final = None
        backlog = self._backlogs.get(ident) or PeerBacklog()  # none: the peer is already gone
        try:
            try:
                agen = fn(**params)
                await self._stream_send(ident, encode_stream_start(rid), backlog)
                sent = 0
                async for item in agen:
                    try:
                        payloads = self._stream_payloads(rid, item)
                    except TooLarge as err:
                        log.warning("%s: stream %r: %s", self.name, method, err)
                        final = encode_error(rid, err)
                        break
                    except Exception as exc:
                        final = self._internal(rid, method, exc, "stream item is not serializable")
                        break
                    for payload in payloads:
                        await self._stream_send(ident, payload, backlog)
                        sent += 1
                        if not sent % _YIELD_EVERY:
                            await asyncio.sleep(0)
                else:
                    final = encode_stream_end(rid)
            except WireError as err:
                final = encode_error(rid, err, self.max_frame)
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():
                    raise
                final = encode_error(rid, Cancelled(f"stream {method!r} was cancelled"))
            except _PeerGone:
                raise  # ordinary client behaviour, logged once by _peer_gone: not a handler failure
            except _SlowPeer:
                final = self._too_slow(ident, rid, method)
            except Exception as exc:
                final = self._internal(rid, method, exc)
            # past the byte bound: the last message is small, and the peer must learn the end
            await self._stream_send(ident, final, backlog, bounded=False)
        except _PeerGone:
            pass
        finally:
            self._tasks.pop((ident, rid), None)
            self._forget_stream(ident, rid)
            if agen is not None:
                try:
                    await agen.aclose()
                except Exception:
                    log.error("%s: stream %r failed while closing", self.name, method, exc_info=True)

    def _stream_payloads(self, rid: int, item) -> list[bytes]:
        """The message(s) of a stream item: a `Batch` is one message, or one per item when they
        do not fit one frame together (each item may still be TooLarge on its own)."""
        if type(item) is not Batch:
            return [encode_stream_item(rid, item, self.max_frame)]
        try:
            return [encode_stream_items(rid, item, self.max_frame)] if item else []
        except TooLarge:
            return [encode_stream_item(rid, one, self.max_frame) for one in item]

    def _forget_stream(self, ident: bytes, rid: int) -> None:
        streams = self._streams.get(ident)
        if streams is not None:
            streams.pop(rid, None)
            if not streams:
                del self._streams[ident]
                self._backlogs.pop(ident, None)

    def _too_slow(self, ident: bytes, rid: int, method: str) -> bytes:
        """End a stream whose peer stopped taking its messages, as etcd and kube-apiserver drop
        a watcher that cannot keep up; the client starts it again (a watch: from the last
        revision it received)."""
        limit = PEER_BUFFER_BYTES // 2**20
        log.warning("%s: ended stream %r of peer %s: it fell over %d MiB behind and did not catch up within %gs "
                    "(a slow consumer)", self.name, method, ident.hex(), limit, SLOW_STREAM_TIMEOUT)
        return encode_error(rid, Unavailable(
            f"stream {method!r} ended: the client fell more than {limit} MiB behind and did not catch up "
            f"within {SLOW_STREAM_TIMEOUT:g}s; start it again (a watch: from the last revision received)",
            {"reason": "SlowConsumer", "method": method}))

    def _internal(self, rid, method, exc: Exception, what: str = "failed") -> bytes:
        log.error("%s: handler %r %s", self.name, method, what, exc_info=exc)
        return encode_error(rid, Internal(f"{method!r} {what}: {_describe(exc, 500)}", {"method": method}))

    def _reply_payload(self, rid, method, result) -> bytes:
        try:
            return encode_reply(rid, result, self.max_frame)
        except TooLarge as err:
            log.warning("%s: reply to %r: %s", self.name, method, err)
            return encode_error(rid, err)
        except Exception as exc:
            return self._internal(rid, method, exc, "returned a result that is not serializable")

    # -- sending --------------------------------------------------------------------------

    def _send_now(self, ident: bytes, payload: bytes) -> None:
        # With ROUTER_MANDATORY both EAGAIN and EHOSTUNREACH come from the routing-id frame,
        # so a message is never half sent.
        sock = self._sock
        _zmq_send(sock, ident, _SNDMORE_NOBLOCK)
        _zmq_send(sock, payload, _NOBLOCK)

    def _send(self, ident: bytes, payload: bytes) -> None:
        """Fire-and-forget send of a reply; a slow peer gets a patient background send."""
        try:
            self._send_now(ident, payload)
        except zmq.Again:
            task = self._loop.create_task(self._send_patiently(ident, payload))
            self._aux.add(task)
            task.add_done_callback(self._aux.discard)
        except zmq.ZMQError as exc:
            self._send_failed(ident, exc)
        finally:
            self._pump.kick()

    async def _send_patiently(self, ident: bytes, payload: bytes) -> bool:
        """Retry a send to a peer whose queue is full; False if it is gone or too slow."""
        delay, waited = 0.001, 0.0
        while True:
            await asyncio.sleep(delay)
            waited += delay
            try:
                self._send_now(ident, payload)
                return True
            except zmq.Again:
                if waited >= SLOW_PEER_TIMEOUT:
                    self._peer_gone(ident, f"unable to take messages for {SLOW_PEER_TIMEOUT:g}s")
                    return False
                delay = min(delay * 2, 0.05)
            except zmq.ZMQError as exc:
                self._send_failed(ident, exc)
                return False
            finally:
                self._pump.kick()

    async def _stream_send(self, ident: bytes, payload: bytes, backlog: PeerBacklog, bounded: bool = True) -> None:
        """Send in order, first waiting while the peer holds PEER_BUFFER_BYTES (`bounded`) or
        its queue is full; _SlowPeer if it takes nothing in time, _PeerGone if it is gone."""
        if bounded and backlog.queued() > PEER_BUFFER_BYTES:
            await self._drained(backlog)
        try:
            if backlog.wants_mark():
                sock = self._sock
                _zmq_send(sock, ident, _SNDMORE_NOBLOCK)
                tracker = _zmq_send(sock, zmq.Frame(payload, copy=False, track=True), _NOBLOCK, copy=False, track=True)
                backlog.on_sent(len(payload), tracker)
            else:
                self._send_now(ident, payload)
                backlog.on_sent(len(payload))
        except zmq.Again:
            if not await self._send_patiently(ident, payload):
                raise _PeerGone() from None
            backlog.on_sent(len(payload))
        except zmq.ZMQError as exc:
            self._send_failed(ident, exc)
            raise _PeerGone() from None
        finally:
            self._pump.kick()

    async def _drained(self, backlog: PeerBacklog) -> None:
        deadline = self._loop.time() + SLOW_STREAM_TIMEOUT
        delay = 0.001
        while backlog.queued() > PEER_BUFFER_BYTES:
            if self._loop.time() >= deadline:
                raise _SlowPeer()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _send_failed(self, ident: bytes, exc: zmq.ZMQError) -> None:
        if exc.errno == zmq.EHOSTUNREACH:
            self._peer_gone(ident, "disconnected")
        elif not self._closed.is_set():
            log.warning("%s: send to %s failed: %s", self.name, ident.hex(), exc)

    def _peer_gone(self, ident: bytes, why: str) -> None:
        streams = self._streams.pop(ident, None)
        self._backlogs.pop(ident, None)
        if not streams:
            log.debug("%s: peer %s %s", self.name, ident.hex(), why)
            return
        log.warning("%s: peer %s %s; cancelling its %d stream(s)", self.name, ident.hex(), why, len(streams))
        current = asyncio.current_task()
        for rid, task in streams.items():
            self._tasks.pop((ident, rid), None)
            # the current task is already on its way out; a second cancel could cut short its
            # generator's cleanup
            if task is not current and not task.done() and not task.cancelling():
                task.cancel()

    async def _keepalive_loop(self) -> None:
        ping = encode_ping()
        while True:
            await asyncio.sleep(self.keepalive)
            for ident in list(self._streams):
                try:
                    self._send_now(ident, ping)
                except zmq.Again:
                    pass  # busy, hence not idle: the stream's own sends will tell
                except zmq.ZMQError as exc:
                    if exc.errno == zmq.EHOSTUNREACH:
                        self._peer_gone(ident, "disconnected")
            self._pump.kick()
