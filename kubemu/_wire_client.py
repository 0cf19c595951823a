"""The wire's asyncio `Client` (one DEALER socket) and its server-push `Stream`."""
from __future__ import annotations

import asyncio
import collections
import copy
import itertools
import logging
import os
from collections.abc import Callable

import zmq
import zmq.asyncio

from ._wire_auth import CurveCredentials, check_curve_key
from ._wire_codec import (ERROR, REPLY, STREAM_END, STREAM_ITEM, STREAM_ITEMS, STREAM_START, USER_AGENT_PROPERTY,
                          _describe, decode_reply, encode_call, encode_cancel, encode_notify, encode_stream)
from ._wire_endpoints import _check_connect_endpoint
from ._wire_errors import BadRequest, Cancelled, OutcomeUnknown, TooLarge, Unauthorized, Unavailable, WireError
from ._wire_limits import CLIENT_LINGER_MS, DEFAULT_MAX_FRAME, HWM, MAXMSGSIZE_FACTOR
from ._wire_pump import _NOBLOCK, _Pump, _zmq_send, _wake

log = logging.getLogger("kubemu.wire")

IDEMPOTENT_ATTEMPTS = 4
# bytes (as they came over the wire) a client buffers for one unread stream before giving up on it
STREAM_BUFFER = 32 * 1024 * 1024


def fresh(err: BaseException) -> BaseException:
    """A copy of a remembered error, without its traceback, to raise: raising one instance
    again and again adds to its traceback each time."""
    return copy.copy(err)


def _fence(send_if: Callable[[], bool] | None, method: str) -> None:
    """Unavailable (NotLeader), nothing sent, if the caller's fence says its request may no longer
    go. Asked just before each socket send, not once per call: a request can wait a while for a
    connection, and a leader can lose its lease meanwhile (stopped, or cut off from the servers)."""
    if send_if is not None and not send_if():
        raise Unavailable(f"{method!r} not sent: not the leader", {"method": method, "reason": "NotLeader"})


def _expire_call(fut: asyncio.Future, method: str, timeout: float) -> None:
    if not fut.done():
        fut.set_exception(OutcomeUnknown(
            f"no reply to {method!r} within {timeout:g}s; the server may or may not have acted on it",
            {"method": method, "timeout": timeout}))


def _expire_stream(fut: asyncio.Future, method: str, timeout: float) -> None:
    if not fut.done():
        fut.set_exception(OutcomeUnknown(
            f"stream {method!r} was not accepted within {timeout:g}s",
            {"method": method, "timeout": timeout}))


# the connection lost, a handshake refused (the server's ZAP said no, or the mechanisms differ:
# one side wants credentials the other does not have), a handshake cut short (a CURVE server
# that cannot decrypt it: the client holds another server key), or a handshake that went through
_MONITORED = int(zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                 | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_SUCCEEDED)
_CUT_SHORT = int(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL)
_DISCONNECTED = int(zmq.EVENT_DISCONNECTED)
_REFUSED_AUTH = int(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
_REFUSED_PROTOCOL = int(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL)
_SUCCEEDED = int(zmq.EVENT_HANDSHAKE_SUCCEEDED)

_STOP = object()  # the normal end of a stream (a sentinel: re-raising one instance grows its traceback)
_NEW, _OPENING, _OPEN, _DONE = range(4)


class Stream:
    """A server-push stream: ``async for item in stream``, or ``async with stream``.

    The client's timeout applies only to the server accepting the stream; items may then
    arrive at any pace. A server-side error ends the stream by raising its WireError from
    ``__anext__``; ``aclose()`` cancels it on the server (its generator is closed)."""

    def __init__(self, client: Client, method: str, params: dict | None, timeout: float | None):
        self._client = client
        self.method = method
        self._params = params
        self._timeout = client.timeout if timeout is None else timeout
        self.id: int | None = None
        self._state = _NEW
        self._items: collections.deque = collections.deque()
        self._sizes: collections.deque[int] = collections.deque()  # of the items, as received
        self._buffered = 0
        self._end: object = None  # _STOP or the WireError to raise once the items are consumed
        self._started: asyncio.Future | None = None
        self._waiter: asyncio.Future | None = None

    def __aiter__(self) -> Stream:
        return self

    async def __aenter__(self) -> Stream:
        await self._open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def _open(self) -> None:
        if self._state != _NEW:
            return
        self._state = _OPENING
        client = self._client
        try:
            client._ensure()
            loop = client._loop
            deadline = loop.time() + self._timeout
            rid = self.id = client._new_id()
            payload = client._encode(encode_stream, rid, self.method, self._params)
        except BaseException:
            self._state = _DONE
            raise
        started = self._started = loop.create_future()
        client._streams[rid] = self
        sent = False
        try:
            if not client._try_send(payload):
                await client._send_wait(rid, payload, deadline, self.method)
            sent = True
            timer = loop.call_at(deadline, _expire_stream, started, self.method, self._timeout)
            try:
                await started
            finally:
                timer.cancel()
        except BaseException:
            self._state = _DONE
            client._streams.pop(rid, None)
            if sent:  # also when aclose() came first: its CANCEL may have overtaken the request
                client._send_nowait(encode_cancel(rid))
            if started.done() and not started.cancelled():
                started.exception()  # consumed here, or asyncio complains it never was
            raise
        if self._state == _OPENING:
            self._state = _OPEN

    async def __anext__(self):
        if self._state == _NEW:
            await self._open()
        while True:
            if self._items:
                self._buffered -= self._sizes.popleft()
                return self._items.popleft()
            end = self._end
            if end is not None:
                self._state = _DONE
                if end is _STOP:
                    raise StopAsyncIteration
                self._end = _STOP  # an error is raised once, then the stream is just exhausted
                raise end
            if self._state == _DONE:
                raise StopAsyncIteration
            waiter = self._waiter = self._client._loop.create_future()
            try:
                await waiter
            finally:
                self._waiter = None

    async def aclose(self) -> None:
        if self.id is not None and self._client._streams.pop(self.id, None) is not None:
            self._client._send_nowait(encode_cancel(self.id))
        # only an opener still waiting reads `_started`; failing it after a failed open would
        # leave an exception nobody retrieves (asyncio logs those)
        if self._state == _OPENING and self._started is not None and not self._started.done():
            self._started.set_exception(Cancelled("stream closed"))
        self._state = _DONE
        self._items.clear()
        self._sizes.clear()
        self._buffered = 0
        self._end = _STOP
        self._wake()

    # called by the client's receive path

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _on_start(self) -> None:
        if not self._started.done():
            self._started.set_result(None)

    def _on_item(self, item, size: int) -> None:
        self._items.append(item)
        self._sizes.append(size)
        self._buffered += size
        if self._buffered > STREAM_BUFFER:
            self._client._send_nowait(encode_cancel(self.id))
            self._finish(Unavailable(f"stream {self.method!r} cancelled: the consumer fell more than "
                                     f"{STREAM_BUFFER // 2**20} MiB behind", {"reason": "SlowConsumer"}))
        self._wake()

    def _on_items(self, items: list, size: int) -> None:
        """A STREAM_ITEMS message: its items in order, its size counted until the last is taken."""
        if items:
            *first, last = items
            self._items.extend(first)
            self._sizes.extend([0] * len(first))
            self._on_item(last, size)

    def _finish(self, end) -> None:
        """The stream ended (`_STOP`) or failed (a WireError); no more messages for it."""
        self._client._streams.pop(self.id, None)
        started = self._started
        if started is not None and not started.done():
            if end is _STOP:
                started.set_result(None)
            else:
                started.set_exception(end)
                return
        if self._end is None:
            self._end = end
        self._wake()


class Client:
    """An asyncio RPC client on one DEALER socket; any number of calls and streams at once.

    Create it anywhere; its socket is made on first use, in the event loop that uses it, and
    belongs to that loop."""

    def __init__(self, endpoint: str, *, timeout: float = 10.0, max_frame: int = DEFAULT_MAX_FRAME,
                 context: zmq.Context | None = None, credentials: tuple[str, str] | CurveCredentials | None = None,
                 user_agent: str | None = None):
        self._ipv6 = _check_connect_endpoint(endpoint)
        if isinstance(credentials, CurveCredentials):
            credentials = CurveCredentials(*(check_curve_key(key, f"CURVE credentials: the {what}")
                                             for what, key in zip(("server key", "public key", "secret key"),
                                                                  credentials)))
        self.credentials = credentials  # (identity, secret), presented with PLAIN; or CurveCredentials
        self.user_agent = user_agent  # sent in the handshake (ZMQ_METADATA X-User-Agent)
        self._refused: Unauthorized | None = None  # the last handshake's refusal, until one succeeds
        self._cut_short = False  # the last CURVE handshake ended without a word: said when unreachable
        self.endpoint = endpoint
        self.timeout = timeout
        self.max_frame = max_frame
        self._context = context
        self._sock: zmq.Socket | None = None
        self._pump: _Pump | None = None
        self._monitor: zmq.Socket | None = None
        self._monitor_pump: _Pump | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._calls: dict[int, asyncio.Future] = {}
        # the sent calls' deadlines, watched by one timer at the nearest (`_expire_calls`)
        # rather than one per call: a TimerHandle made, pushed on the loop's heap, cancelled
        # and popped again cost a tenth of a call's CPU
        self._deadlines: dict[int, tuple[float, asyncio.Future, str, float]] = {}
        self._expiry: asyncio.TimerHandle | None = None
        self._streams: dict[int, Stream] = {}
        self._unsent: set[int] = set()  # ids waiting for a connection, so not lost with one
        self._send_backlog = 0
        self._next_id = 1
        self._closed = False

    def connect(self) -> None:
        """Make the socket and start connecting now, rather than at the first call (inside
        the event loop that will use it)."""
        self._ensure()

    async def __aenter__(self) -> Client:
        self._ensure()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    def _ensure(self) -> None:
        if self._closed:
            raise RuntimeError("this wire Client is closed")
        if self._sock is not None:
            return
        loop = self._loop = asyncio.get_running_loop()
        ctx = self._context if self._context is not None else zmq.asyncio.Context.instance()
        sock = zmq.Socket(ctx, zmq.DEALER)  # a plain socket: _Pump drives it
        monitor = None
        try:
            sock.setsockopt(zmq.LINGER, CLIENT_LINGER_MS)
            # nothing is queued while there is no connection: an unsent request is
            # known to be unsent (Unavailable), and a restarted server does not get a
            # backlog of requests whose callers gave up long ago
            sock.setsockopt(zmq.IMMEDIATE, 1)
            sock.setsockopt(zmq.SNDHWM, HWM)
            sock.setsockopt(zmq.RCVHWM, HWM)
            sock.setsockopt(zmq.MAXMSGSIZE, MAXMSGSIZE_FACTOR * self.max_frame)
            # libzmq doubles the interval between tries: capped at 200 ms, a client finds a
            # restarted server within 200 ms of it listening (at 1 s, up to a second late)
            sock.setsockopt(zmq.RECONNECT_IVL, 50)
            sock.setsockopt(zmq.RECONNECT_IVL_MAX, 200)
            if self._ipv6:
                sock.setsockopt(zmq.IPV6, 1)
            if isinstance(self.credentials, CurveCredentials):
                sock.setsockopt(zmq.CURVE_SERVERKEY, self.credentials.server_key)
                sock.setsockopt(zmq.CURVE_PUBLICKEY, self.credentials.public)
                sock.setsockopt(zmq.CURVE_SECRETKEY, self.credentials.secret)
            elif self.credentials is not None:
                user, secret = self.credentials
                sock.setsockopt(zmq.PLAIN_USERNAME, user.encode())
                sock.setsockopt(zmq.PLAIN_PASSWORD, secret.encode())
            if self.user_agent:
                sock.setsockopt(zmq.METADATA, f"{USER_AGENT_PROPERTY}:{self.user_agent}".encode())
            address = f"inproc://kubemu-wire-monitor-{os.getpid()}-{next(_monitor_ids)}"
            sock.monitor(address, _MONITORED)
            monitor = zmq.Socket(ctx, zmq.PAIR)
            monitor.setsockopt(zmq.LINGER, 0)
            monitor.connect(address)
            sock.connect(self.endpoint)
        except BaseException:
            if monitor is not None:
                monitor.close(0)
            sock.close(0)
            raise
        self._sock, self._monitor = sock, monitor
        self._pump = _Pump(loop, sock, self._dispatch, multipart=False)
        self._monitor_pump = _Pump(loop, monitor, self._on_monitor_event)

    def _new_id(self) -> int:
        rid = self._next_id
        self._next_id = rid + 1
        return rid

    def _encode(self, encoder, rid, method, params) -> bytes:
        try:
            return encoder(rid, method, params, self.max_frame)
        except TooLarge:
            raise
        except Exception as exc:
            raise BadRequest(f"params of {method!r} are not serializable: {_describe(exc)}") from None

    # -- calls ----------------------------------------------------------------------------

    async def call(self, method: str, params: dict | None = None, *, timeout: float | None = None,
                   idempotent: bool = False, send_if: Callable[[], bool] | None = None):
        """`send_if` fences a write (a leader's "do I still lead?"): asked synchronously just
        before each socket send of the request; False fails the call with Unavailable (reason
        NotLeader) and nothing is sent. Idempotent calls (reads) are not fenced."""
        if idempotent:
            if send_if is not None:
                raise ValueError("send_if fences writes; an idempotent call is not fenced")
            return await self._call_idempotent(method, params, timeout)
        self._ensure()
        loop = self._loop
        timeout = self.timeout if timeout is None else timeout
        deadline = loop.time() + timeout
        rid = self._next_id
        self._next_id = rid + 1
        payload = self._encode(encode_call, rid, method, params)
        fut = loop.create_future()
        calls = self._calls
        calls[rid] = fut
        try:
            _fence(send_if, method)
            if not self._try_send(payload):
                await self._send_wait(rid, payload, deadline, method, send_if)
            self._expire_at(rid, deadline, fut, method, timeout)
            try:
                return await fut
            finally:
                del self._deadlines[rid]
        except (OutcomeUnknown, asyncio.CancelledError):
            self._send_nowait(encode_cancel(rid))  # best effort: stop work nobody waits for
            raise
        except WireError:  # not sent (Unavailable, Unauthorized): a lost connection may have failed it too
            if fut.done() and not fut.cancelled():
                fut.exception()  # retrieved, or asyncio logs it as never retrieved
            raise
        finally:
            del calls[rid]

    def _expire_at(self, rid: int, deadline: float, fut: asyncio.Future, method: str, timeout: float) -> None:
        """Fail call `rid` with OutcomeUnknown at `deadline` unless it is answered first."""
        self._deadlines[rid] = (deadline, fut, method, timeout)
        expiry = self._expiry
        if expiry is None or deadline < expiry.when():
            if expiry is not None:
                expiry.cancel()
            self._expiry = self._loop.call_at(deadline, self._expire_calls)

    def _expire_calls(self) -> None:
        """Expire the calls whose deadline came; wait for the nearest of the others. A scan of
        the calls in flight: answered calls leave no deadline behind, so with one timeout for
        all it runs about once a timeout; only calls timing out one after the other make it
        run once each (milliseconds for the hundreds a client has in flight)."""
        self._expiry = None
        now = self._loop.time()
        nearest = None
        for deadline, fut, method, timeout in self._deadlines.values():
            if deadline <= now:
                _expire_call(fut, method, timeout)   # its caller forgets the deadline
            elif nearest is None or deadline < nearest:
                nearest = deadline
        if nearest is not None:
            self._expiry = self._loop.call_at(nearest, self._expire_calls)

    def notify(self, method: str, params: dict | None = None) -> bool:
        """Send a one-way message: the server runs a plain (def) handler and sends nothing back,
        not even an error. False if it was not queued: no connection yet (ZMQ_IMMEDIATE), the
        server's queue is full, or sends wait for a connection. For protocols that survive loss
        on their own (Raft resends), where a reply per message would only cost CPU."""
        self._ensure()
        rid = self._next_id
        self._next_id = rid + 1
        payload = self._encode(encode_notify, rid, method, params)
        try:
            return self._try_send(payload)
        except Unavailable:
            return False

    async def _call_idempotent(self, method: str, params: dict | None, timeout: float | None):
        self._ensure()
        loop = self._loop
        timeout = self.timeout if timeout is None else timeout
        deadline = loop.time() + timeout
        fut = loop.create_future()  # shared: the first reply to any attempt wins
        ids: list[int] = []
        attempts = 0
        try:
            while attempts < IDEMPOTENT_ATTEMPTS and loop.time() < deadline:
                rid = self._new_id()
                payload = self._encode(encode_call, rid, method, params)
                if fut.done():  # the last attempt died with its connection
                    fut = loop.create_future()
                self._calls[rid] = fut
                ids.append(rid)
                if not self._try_send(payload):
                    try:
                        await self._send_wait(rid, payload, deadline, method)
                    except Unavailable:
                        break
                attempts += 1
                if attempts == IDEMPOTENT_ATTEMPTS:
                    budget = deadline - loop.time()
                else:
                    budget = timeout * 2 ** (attempts - 1) / (2 ** IDEMPOTENT_ATTEMPTS - 1)
                await asyncio.wait((fut,), timeout=max(0.0, min(budget, deadline - loop.time())))
                if fut.done():
                    exc = fut.exception()
                    if exc is None:
                        return fut.result()
                    if not isinstance(exc, OutcomeUnknown):
                        raise exc
        finally:
            for rid in ids:
                pending = self._calls.pop(rid, None)
                if pending is not None and not pending.done():
                    self._send_nowait(encode_cancel(rid))
            if not fut.done():
                fut.cancel()
            elif not fut.cancelled():
                fut.exception()  # a lost connection may have failed it while we were not looking
        if attempts == 0:
            raise Unavailable(f"{self._unreachable()} within {timeout:g}s; {method!r} was not sent",
                              {"method": method, "timeout": timeout, "attempts": 0})
        raise Unavailable(f"no reply to idempotent call {method!r} after {attempts} attempt(s) "
                          f"within {timeout:g}s", {"method": method, "timeout": timeout, "attempts": attempts})

    def stream(self, method: str, params: dict | None = None, *, timeout: float | None = None) -> Stream:
        return Stream(self, method, params, timeout)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._sock is None:
            return
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        for rid, stream in list(self._streams.items()):
            self._send_nowait(encode_cancel(rid))  # the linger flushes these
            stream._finish(Cancelled("client closed"))
        for fut in self._calls.values():
            if not fut.done():
                fut.set_exception(OutcomeUnknown("client closed before the reply arrived"))
        self._pump.close()
        self._monitor_pump.close()
        try:
            self._sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self._monitor.close(0)
        self._sock.close(CLIENT_LINGER_MS)

    # -- sending --------------------------------------------------------------------------

    def _try_send(self, payload: bytes) -> bool:
        if self._send_backlog:
            return False  # keep order behind sends that are waiting for the connection
        try:
            _zmq_send(self._sock, payload, _NOBLOCK)
        except zmq.Again:
            return False
        except zmq.ZMQError as exc:
            raise Unavailable(f"cannot send to {self.endpoint}: {exc}") from None
        finally:
            self._pump.kick()
        return True

    async def _send_wait(self, rid: int, payload: bytes, deadline: float, method: str,
                         send_if: Callable[[], bool] | None = None) -> None:
        """Send once a connection exists; Unavailable (nothing sent) if none comes by `deadline`
        or `send_if` says no at a try."""
        self._send_backlog += 1
        self._unsent.add(rid)
        loop = self._loop
        try:
            while True:
                _fence(send_if, method)
                try:
                    _zmq_send(self._sock, payload, _NOBLOCK)
                    return
                except zmq.Again:
                    pass
                except zmq.ZMQError as exc:
                    raise Unavailable(f"cannot send to {self.endpoint}: {exc}") from None
                finally:
                    self._pump.kick()
                if self._refused is not None:
                    raise fresh(self._refused)
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise Unavailable(f"{self._unreachable()}; {method!r} was not sent",
                                      {"method": method})
                waiter = self._pump.writable()
                # also re-try on a timer: correctness must not hinge on one FD notification
                timer = loop.call_later(min(remaining, 0.25), _wake, waiter)
                try:
                    await waiter
                finally:
                    timer.cancel()
        finally:
            self._send_backlog -= 1
            self._unsent.discard(rid)

    def _send_nowait(self, payload: bytes) -> None:
        if self._sock is None or self._sock.closed:
            return
        try:
            _zmq_send(self._sock, payload, _NOBLOCK)
        except zmq.ZMQError:
            pass  # best effort: no connection means nothing on the server to cancel either
        finally:
            self._pump.kick()

    # -- receiving ------------------------------------------------------------------------

    def _dispatch(self, frames: list[bytes]) -> None:
        try:
            kind, rid, value = decode_reply(frames, self.max_frame)
        except WireError as err:
            if not self._fail(err.request_id, err):
                log.warning("dropped a bad message from %s: %s", self.endpoint, err)
            return
        if kind == REPLY:
            fut = self._calls.get(rid)
            if fut is not None and not fut.done():
                fut.set_result(value)
            else:
                log.debug("dropped a reply for unknown or abandoned request %s", rid)
        elif kind == STREAM_ITEM or kind == STREAM_ITEMS:
            stream = self._streams.get(rid)
            if stream is None:
                log.debug("dropped an item of unknown or closed stream %s", rid)
            elif kind == STREAM_ITEM:
                stream._on_item(value, len(frames[0]))
            else:
                stream._on_items(value, len(frames[0]))
        elif kind == ERROR:
            if not self._fail(rid, value):
                if rid is None:
                    log.warning("%s rejected a message: %s", self.endpoint, value)
                else:
                    log.debug("dropped an error for unknown or abandoned request %s: %s", rid, value)
        elif kind == STREAM_START:
            stream = self._streams.get(rid)
            if stream is not None:
                stream._on_start()
        elif kind == STREAM_END:
            stream = self._streams.get(rid)
            if stream is not None:
                stream._finish(_STOP)

    def _fail(self, rid: int | None, err: WireError) -> bool:
        if rid is None:
            return False
        fut = self._calls.get(rid)
        if fut is not None:
            if not fut.done():
                fut.set_exception(err)
            return True
        stream = self._streams.get(rid)
        if stream is not None:
            stream._finish(err)
            return True
        return False

    def _on_monitor_event(self, frames: list[bytes]) -> None:
        event = int.from_bytes(frames[0][:2], "little")
        if event == _SUCCEEDED:
            self._refused = None
            self._cut_short = False
            return
        if event == _CUT_SHORT:
            self._cut_short = isinstance(self.credentials, CurveCredentials)
            return
        if event in (_REFUSED_AUTH, _REFUSED_PROTOCOL):
            self._on_refused(event == _REFUSED_AUTH)
            return
        if event != _DISCONNECTED:
            return
        # replies that made it before the drop are already queued: hand them out first
        while True:
            try:
                frame = self._sock.recv(_NOBLOCK)
            except zmq.Again:
                break
            self._dispatch([frame])
        self._pump.kick()
        for rid, fut in self._calls.items():
            if rid not in self._unsent and not fut.done():
                fut.set_exception(OutcomeUnknown(
                    f"connection to {self.endpoint} lost before the reply arrived; "
                    f"the server may or may not have acted on it"))
        for rid, stream in list(self._streams.items()):
            if rid not in self._unsent:
                stream._finish(Unavailable(f"connection to {self.endpoint} lost"))

    def _unreachable(self) -> str:
        if self._cut_short:
            # a CURVE server drops a handshake it cannot decrypt without telling why
            return (f"could not reach {self.endpoint}: it ended the CURVE handshake (is "
                    f"{self.credentials.server_key.decode()} its public key?)")
        return f"could not reach {self.endpoint}"

    def _on_refused(self, by_zap: bool) -> None:
        """Calls waiting for a connection fail now with Unauthorized instead of timing out:
        libzmq retries the handshake, but the same credentials will not do better."""
        creds = self.credentials
        if isinstance(creds, CurveCredentials):
            user = f"CURVE key {creds.public.decode()}"
        else:
            user = repr(creds[0]) if creds is not None else None
        if by_zap and isinstance(creds, CurveCredentials):
            why = f"{self.endpoint} refused {user}: not a key it knows"
        elif by_zap:
            why = f"{self.endpoint} refused the credentials of {user}"
        elif user is None:
            why = f"{self.endpoint} refused the handshake: it requires credentials and this client has none"
        else:
            why = (f"{self.endpoint} refused the handshake: this client presents credentials ({user}) "
                   f"and the server takes none, or speaks another mechanism")
        self._refused = Unauthorized(why, {"endpoint": self.endpoint})
        self._pump.wake_writers()


_monitor_ids = itertools.count(1)
