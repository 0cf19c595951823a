"""The wire: the ZeroMQ + msgpack RPC every kubemu process speaks.

A `Server` owns one ROUTER socket; a `Client` owns one DEALER socket. Any number of requests
and server-push streams can be in flight on one client at once; every message carries the
client's request id, and ids are per client. `SyncClient` wraps `Client` for command-line tools.

Envelope
--------
Every message is exactly one ZeroMQ frame (after the ROUTER's routing-id frame) holding one
msgpack array whose first element is a small int kind. Compact arrays rather than maps keep the
per-message cost down (msgpack with ``use_bin_type=True`` / ``raw=False``; str is text, bytes
is binary)::

    client -> server
      [1 REQ,          id, method, params]    call a unary handler      params: map str -> any
      [2 STREAM,       id, method, params]    open a server-push stream
      [3 CANCEL,       id]                    abandon a call or a stream; the server sends nothing back
    server -> client
      [4 REPLY,        id, result]
      [5 ERROR,        id, code, message, details]   ends a call or a stream; id is nil when the
                                                     server could not read one from the message
      [6 STREAM_START, id]                    the stream is accepted (the client's timeout ends here)
      [7 STREAM_ITEM,  id, item]              in order, any number, at any pace
      [8 STREAM_END,   id]                    normal end of a stream
      [9 PING]                                keepalive to peers with open streams; ignored

Errors are typed: `code` is a string such as "NotFound" that `error_from_code` maps to a
`WireError` subclass (subclasses that set `code` register themselves), `details` is a map.

Decisions
---------
* An unknown method is answered with code "UnknownMethod" (`UnknownMethod`, a `BadRequest`),
  not "NotFound": handlers use NotFound for missing objects, and a caller must be able to tell
  "no such pod" from "this server does not speak that method" (version skew).
* Params are bound to the handler's signature before the handler runs, so a missing or
  unexpected keyword is BadRequest while a TypeError raised inside a handler is Internal.
* A call that was sent but got no reply within its timeout raises `OutcomeUnknown`: the server
  may or may not have acted. A call that could not even be sent within the timeout (no
  connection: DEALER sockets use ZMQ_IMMEDIATE, so nothing is queued for a missing peer)
  raises `Unavailable`: nothing was sent. Losing the connection while calls are in flight fails
  them at once with OutcomeUnknown (streams: Unavailable) instead of waiting out the timeout
  (a ZMQ socket monitor reports the disconnect; replies already received are delivered
  first; a disconnect noticed late can also fail a call sent just after the reconnect, which
  errs on the safe side). On timeout or cancellation the client sends CANCEL, best effort.
* Calls are never retried unless marked ``idempotent=True``. Those make up to
  `IDEMPOTENT_ATTEMPTS` attempts within the one overall timeout, with per-attempt waits that
  double (1/15, 2/15, 4/15, 8/15 of it); a lost connection or an OutcomeUnknown reply starts the
  next attempt at once. Earlier attempts are not cancelled, so the first reply to any attempt
  wins (a slow server is not punished for being slow) and the handler may run more than once.
  When all attempts are spent the call raises `Unavailable`, not OutcomeUnknown: repeating an
  idempotent call is harmless, so "try again later" is all the caller needs to know. Typed
  error replies (including Unavailable from a handler) are returned, never retried.
* Frame size: `max_frame` (default 2 MiB) on both sides. Over the limit, a request is answered
  with TooLarge (the id is read from the first bytes so the right call fails), a reply or
  stream item the server cannot send is replaced by a TooLarge error, and a client refuses to
  send an oversize request (TooLarge, nothing sent). As a hard memory guard libzmq's
  ZMQ_MAXMSGSIZE is set to 4 x max_frame: a peer that sends a bigger frame is disconnected by
  libzmq itself, without any reply (its client sees the connection drop, then reconnects).
* Malformed messages (and unknown methods, bad params, a call of a stream method or the
  reverse) get an error reply (the ROUTER always has the sender's routing id) and exactly one
  WARNING on the "kubemu.wire" logger; a handler that raises anything but a
  WireError gets an Internal reply and one ERROR line with the traceback. The server keeps
  serving either way. Nothing is logged per message on the normal path.
* LINGER: clients 200 ms (a small positive linger so a CANCEL queued just before close still
  flushes; libzmq issue #4660 shows a DEALER that closes right after sending over ipc can lose
  the message, so nothing here relies on close to flush: every request that matters is
  answered before the caller moves on); servers 0 (a closing server has nobody to flush to).
* ROUTER_MANDATORY is on, so a send to a vanished peer fails with EHOSTUNREACH instead of being
  dropped: that peer's streams are cancelled (their generators closed) and one line is logged.
  Idle streams of a dead peer are found by a PING every `keepalive` seconds. SNDHWM/RCVHWM
  are 100,000 so bursts of stream items queue instead of being dropped; a peer that stays
  unable to take more for `SLOW_PEER_TIMEOUT` seconds is treated as gone.
* Sync handlers (plain `def`) are run inline on the receive path, without a task; they must
  be quick and must not block. Async handlers get one task per request. A handler cancelled
  by the client's CANCEL or by `Server.close()` sends nothing.
* Event loop: sockets are plain zmq sockets (made from the given context, by default the
  shared ``zmq.asyncio.Context.instance()``) driven from the loop's selector through the
  edge-triggered ZMQ_FD (`_Pump`), not through zmq.asyncio futures, which cost two loop
  iterations per message. A Server or Client belongs to the loop that started it.
* Endpoints: `ipc://` sockets live in a 0700 directory; tcp binds only loopback addresses
  unless ``allow_public=True``. Linux limits a unix socket path to 107 bytes.
"""
from __future__ import annotations

import asyncio
import collections
import errno
import inspect
import ipaddress
import itertools
import logging
import os
import socket
import stat
from typing import Any, Callable, Iterator, NamedTuple

import msgpack
import zmq
import zmq.asyncio

__all__ = [
    "WireError", "NotFound", "Conflict", "Invalid", "Unavailable", "TooLarge", "BadRequest",
    "UnknownMethod", "Internal", "Gone", "Cancelled", "OutcomeUnknown", "error_from_code",
    "DEFAULT_MAX_FRAME", "ipc_endpoint", "tcp_endpoint", "Server", "Client", "Stream",
    "SyncClient", "SyncStream", "Request", "Reply", "decode_request", "decode_reply",
    "encode_call", "encode_stream", "encode_cancel", "encode_reply", "encode_error",
    "encode_stream_start", "encode_stream_item", "encode_stream_end", "encode_ping",
]

log = logging.getLogger("kubemu.wire")

DEFAULT_MAX_FRAME = 2 * 1024 * 1024
MAXMSGSIZE_FACTOR = 4
HWM = 100_000
CLIENT_LINGER_MS = 200
SERVER_LINGER_MS = 0
IDEMPOTENT_ATTEMPTS = 4
STREAM_BUFFER = 100_000  # items a client buffers for one unread stream before giving up on it
SLOW_PEER_TIMEOUT = 30.0
KEEPALIVE = 5.0
SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 for the NUL on Linux
_YIELD_EVERY = 64  # a stream whose generator never waits yields to the event loop this often

REQ, STREAM, CANCEL = 1, 2, 3
REPLY, ERROR, STREAM_START, STREAM_ITEM, STREAM_END, PING = 4, 5, 6, 7, 8, 9


# -- errors -------------------------------------------------------------------------------

_ERROR_CLASSES: dict[str, type[WireError]] = {}


class WireError(Exception):
    """An error that crosses the wire as ``{code, message, details}``."""

    code = "Error"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            # first one wins, so a later module cannot hijack a core code
            _ERROR_CLASSES.setdefault(cls.code, cls)

    def __init__(self, message: str = "", details: dict | None = None, *, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.details = details if details is not None else {}
        if code is not None:
            self.code = code
        # set by the decoders when a bad message still carried a readable request id
        self.request_id: int | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"

    def __reduce__(self):
        return (error_from_code, (self.code, self.message, self.details))


class NotFound(WireError):
    code = "NotFound"


class Conflict(WireError):
    code = "Conflict"


class Invalid(WireError):
    code = "Invalid"


class Unavailable(WireError):
    code = "Unavailable"


class TooLarge(WireError):
    code = "TooLarge"


class BadRequest(WireError):
    code = "BadRequest"


class UnknownMethod(BadRequest):
    code = "UnknownMethod"


class Internal(WireError):
    code = "Internal"


class Gone(WireError):
    code = "Gone"


class Cancelled(WireError):
    code = "Cancelled"


class OutcomeUnknown(WireError):
    """The request may or may not have been acted on: it timed out or the connection was lost
    after it was sent. Raised by the client; a server may also pass one on from a call of its own."""

    code = "OutcomeUnknown"


def error_from_code(code: str, message: str = "", details: dict | None = None) -> WireError:
    cls = _ERROR_CLASSES.get(code)
    if cls is not None:
        try:
            return cls(message, details)
        except TypeError:
            pass  # a subclass with a constructor of its own: keep the code, lose the class
    return WireError(message, details, code=code)


# -- envelope: pure encode / decode -------------------------------------------------------


class Request(NamedTuple):
    kind: int  # REQ, STREAM or CANCEL
    id: int
    method: str | None
    params: dict | None


class Reply(NamedTuple):
    kind: int  # REPLY, ERROR, STREAM_START, STREAM_ITEM, STREAM_END or PING
    id: int | None
    value: Any  # the result, the item, or the WireError for ERROR


def _packb(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _unpackb(data):
    # strict_map_key=False: results and params may legitimately hold int-keyed maps
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def _tag(err: WireError, request_id) -> WireError:
    err.request_id = request_id
    return err


def _describe(exc: BaseException, limit: int = 200) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + "..."


def _peek_id(data) -> int | None:
    """The request id of a message too large or too broken to decode, read from its first bytes."""
    try:
        unpacker = msgpack.Unpacker(raw=False)
        unpacker.feed(data[:32])
        if unpacker.read_array_header() < 2:
            return None
        unpacker.skip()
        rid = unpacker.unpack()
    except Exception:
        return None
    return rid if type(rid) is int else None


def _check_size(payload: bytes, max_frame: int | None, what: str) -> bytes:
    if max_frame is not None and len(payload) > max_frame:
        raise TooLarge(f"{what} of {len(payload)} bytes exceeds the limit of {max_frame} bytes",
                       {"size": len(payload), "limit": max_frame})
    return payload


def encode_call(rid: int, method: str, params: dict | None = None, max_frame: int | None = None) -> bytes:
    return _check_size(_packb([REQ, rid, method, {} if params is None else params]), max_frame,
                       f"request {method!r}")


def encode_stream(rid: int, method: str, params: dict | None = None, max_frame: int | None = None) -> bytes:
    return _check_size(_packb([STREAM, rid, method, {} if params is None else params]), max_frame,
                       f"stream request {method!r}")


def encode_cancel(rid: int) -> bytes:
    return _packb([CANCEL, rid])


def encode_reply(rid: int, result, max_frame: int | None = None) -> bytes:
    return _check_size(_packb([REPLY, rid, result]), max_frame, "reply")


def encode_stream_start(rid: int) -> bytes:
    return _packb([STREAM_START, rid])


def encode_stream_item(rid: int, item, max_frame: int | None = None) -> bytes:
    return _check_size(_packb([STREAM_ITEM, rid, item]), max_frame, "stream item")


def encode_stream_end(rid: int) -> bytes:
    return _packb([STREAM_END, rid])


def encode_ping() -> bytes:
    return _packb([PING])


def encode_error(rid: int | None, err: WireError, max_frame: int | None = None) -> bytes:
    """Never raises: an error reply must always be sendable, so undeliverable parts are dropped."""
    code = err.code if isinstance(err.code, str) else "Error"
    message = err.message if isinstance(err.message, str) else str(err.message)
    details = err.details or None
    if details is not None and not isinstance(details, dict):
        details = {"details": details}  # the envelope promises a map
    try:
        payload = _packb([ERROR, rid, code, message, details])
    except Exception:
        log.warning("details of a %s error are not serializable; sent without them", code)
        payload = _packb([ERROR, rid, code, message, None])
    if max_frame is not None and len(payload) > max_frame:
        payload = _packb([ERROR, rid, code, message[:1000], None])
    return payload


def decode_request(frames, max_frame: int = DEFAULT_MAX_FRAME) -> Request:
    """Validate what a ROUTER received after the routing-id frame.

    Raises BadRequest or TooLarge; `err.request_id` is set when an id could still be read, so
    the error can be addressed to the waiting call."""
    if len(frames) != 1:
        raise BadRequest(f"expected exactly 1 frame after the routing id, got {len(frames)}")
    data = frames[0]
    size = len(data)
    if size > max_frame:
        raise _tag(TooLarge(f"message of {size} bytes exceeds the limit of {max_frame} bytes",
                            {"size": size, "limit": max_frame}), _peek_id(data))
    try:
        msg = _unpackb(data)
    except Exception as exc:
        raise _tag(BadRequest(f"undecodable message: {_describe(exc)}"), _peek_id(data)) from None
    if type(msg) is not list or len(msg) < 2:
        raise BadRequest("a message must be an array [kind, id, ...]")
    kind, rid = msg[0], msg[1]
    if type(rid) is not int:
        raise BadRequest(f"the request id must be an integer, not {type(rid).__name__}")
    if type(kind) is int and (kind == REQ or kind == STREAM):
        if len(msg) != 4:
            raise _tag(BadRequest(f"a request must be [kind, id, method, params], got {len(msg)} elements"), rid)
        method, params = msg[2], msg[3]
        if type(method) is not str:
            raise _tag(BadRequest(f"the method name must be a string, not {type(method).__name__}"), rid)
        if params is None:
            params = {}
        elif type(params) is not dict:
            raise _tag(BadRequest(f"params of {method!r} must be a map, not {type(params).__name__}"), rid)
        else:
            for key in params:
                if type(key) is not str:
                    raise _tag(BadRequest(f"param names of {method!r} must be strings, got {key!r:.50}"), rid)
        return Request(kind, rid, method, params)
    if type(kind) is int and kind == CANCEL:
        if len(msg) != 2:
            raise _tag(BadRequest(f"a cancel must be [kind, id], got {len(msg)} elements"), rid)
        return Request(CANCEL, rid, None, None)
    raise _tag(BadRequest(f"unknown message kind {kind!r:.20}"), rid)


def decode_reply(frames, max_frame: int = DEFAULT_MAX_FRAME) -> Reply:
    """Validate what a DEALER received. Raises TooLarge or Internal (with `request_id` if known)."""
    if len(frames) != 1:
        raise Internal(f"malformed reply: expected 1 frame, got {len(frames)}")
    data = frames[0]
    size = len(data)
    if size > max_frame:
        raise _tag(TooLarge(f"reply of {size} bytes exceeds this client's limit of {max_frame} bytes",
                            {"size": size, "limit": max_frame}), _peek_id(data))
    try:
        msg = _unpackb(data)
    except Exception as exc:
        raise _tag(Internal(f"malformed reply: {_describe(exc)}"), _peek_id(data)) from None
    if type(msg) is not list or not msg or type(msg[0]) is not int:
        raise Internal("malformed reply: not an array starting with a kind")
    kind, n = msg[0], len(msg)
    if kind == PING and n == 1:
        return Reply(PING, None, None)
    rid = msg[1] if n > 1 else None
    if type(rid) is int:
        if kind == REPLY and n == 3:
            return Reply(REPLY, rid, msg[2])
        if kind == STREAM_ITEM and n == 3:
            return Reply(STREAM_ITEM, rid, msg[2])
        if (kind == STREAM_START or kind == STREAM_END) and n == 2:
            return Reply(kind, rid, None)
    if kind == ERROR and n == 5 and (rid is None or type(rid) is int):
        code, message, details = msg[2], msg[3], msg[4]
        if type(code) is str and type(message) is str and (details is None or type(details) is dict):
            return Reply(ERROR, rid, error_from_code(code, message, details))
    raise _tag(Internal(f"malformed reply of kind {kind!r:.20} with {n} elements"),
               rid if type(rid) is int else None)


# -- endpoints ----------------------------------------------------------------------------


def _check_ipc_path(path: str) -> None:
    size = len(os.fsencode(path))
    if size > SUN_PATH_MAX:
        raise ValueError(f"ipc socket path {path!r} is {size} bytes long; Linux allows at most "
                         f"{SUN_PATH_MAX} (sun_path): use a shorter state directory")


def ipc_endpoint(directory: str | os.PathLike, name: str) -> str:
    """``ipc://<abs directory>/<name>``, creating the directory with mode 0700 (and tightening
    it to 0700 if it exists and belongs to us)."""
    if not name or "/" in name or "\0" in name:
        raise ValueError(f"bad ipc socket name {name!r}")
    directory = os.path.abspath(os.fspath(directory))
    path = os.path.join(directory, name)
    _check_ipc_path(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.stat(directory)
    if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
        if st.st_mode & stat.S_ISVTX:
            # a shared sticky directory like /tmp: chmod would break everyone else
            raise ValueError(f"{directory} is a shared directory; put ipc sockets in a private subdirectory")
        os.chmod(directory, 0o700)
    return "ipc://" + path


def tcp_endpoint(port: int = 0, host: str = "127.0.0.1") -> str:
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"bad tcp port {port!r}")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"tcp://{host}:{port}"


class _BindSpec(NamedTuple):
    endpoint: str  # what to hand to zmq bind
    ipc_path: str | None  # a filesystem socket to manage
    ipv6: bool


def _parse_bind_endpoint(endpoint: str, allow_public: bool) -> _BindSpec:
    if endpoint.startswith("ipc://"):
        path = endpoint[len("ipc://"):]
        if not path:
            raise ValueError(f"empty ipc path in {endpoint!r}")
        _check_ipc_path(path)
        return _BindSpec(endpoint, None if path.startswith("@") else path, False)
    if endpoint.startswith("inproc://"):
        return _BindSpec(endpoint, None, False)
    if not endpoint.startswith("tcp://"):
        raise ValueError(f"unsupported endpoint {endpoint!r}: use ipc://, tcp:// or inproc://")
    host, sep, port = endpoint[len("tcp://"):].rpartition(":")
    if not sep or not host or not (port == "*" or port.isdigit()):
        raise ValueError(f"bad tcp endpoint {endpoint!r}: expected tcp://HOST:PORT")
    if port == "0":
        port = "*"  # libzmq's spelling of "any free port"
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if bare == "localhost":
        bare, host = "127.0.0.1", "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(bare).is_loopback
    except ValueError:
        loopback = False  # "*", an interface name or a host name: could be anything
    if not loopback and not allow_public:
        raise ValueError(f"refusing to bind {endpoint!r}: not a loopback address "
                         f"(pass allow_public=True to expose the server to the network)")
    return _BindSpec(f"tcp://{host}:{port}", None, ":" in bare)


def _check_connect_endpoint(endpoint: str) -> bool:
    """Validate a client endpoint; returns whether it needs ZMQ_IPV6."""
    if endpoint.startswith("ipc://"):
        _check_ipc_path(endpoint[len("ipc://"):])
        return False
    if endpoint.startswith("inproc://"):
        return False
    if endpoint.startswith("tcp://"):
        return endpoint.startswith("tcp://[")
    raise ValueError(f"unsupported endpoint {endpoint!r}: use ipc://, tcp:// or inproc://")


def _clear_stale_ipc(path: str) -> None:
    """Remove the socket file a dead server left behind; refuse to steal a live one's."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ValueError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)
        log.info("removed stale ipc socket %s", path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass  # e.g. a full backlog: someone is there
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, f"{path} is in use by a live server")


# -- driving a socket from the event loop ---------------------------------------------------

_READ_BUDGET = 256  # messages handled per wake-up before other callbacks get a turn
# plain ints: the zmq enums cost an enum operation per use on the per-message path
_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE_NOBLOCK = int(zmq.SNDMORE | zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class _Pump:
    """Runs `handle(frames)` for every message on a plain zmq socket straight from the event
    loop's selector callback: no future and no task hop per message (pyzmq's asyncio sockets
    cost two loop iterations per message). The zmq FD is edge-triggered, so every pass ends
    with a read of ZMQ_EVENTS that reports nothing to read, and a send made elsewhere must be
    followed by `kick()`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: zmq.Socket, handle: Callable[[list], None],
                 multipart: bool = True):
        self._loop = loop
        self._sock = sock
        self._handle = handle
        # single-frame mode hands each frame over on its own (as a 1-item list), which saves a
        # ZMQ_RCVMORE read per message; the decoders still see any extra frame as garbage
        self._multipart = multipart
        self._fd = sock.get(zmq.FD)
        self._writers: collections.deque[asyncio.Future] = collections.deque()
        self._scheduled = False
        self._running = False
        self._closed = False
        loop.add_reader(self._fd, self._run)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and not self._closed:
            self._scheduled = True
            self._loop.call_soon(self._run)

    def kick(self) -> None:
        """Call after every send made outside `_run`: a send can consume the FD's notification.
        The check is deferred to one `_run` in the next loop iteration, so a burst of sends
        costs one ZMQ_EVENTS read, not one each."""
        if not (self._running or self._scheduled or self._closed):
            self._scheduled = True
            self._loop.call_soon(self._run)

    def writable(self) -> asyncio.Future:
        """A future resolved when the socket may accept a message (ZMQ_POLLOUT)."""
        fut = self._loop.create_future()
        self._writers.append(fut)
        self._schedule()
        return fut

    def _run(self) -> None:
        self._scheduled = False
        if self._closed:
            return
        sock, handle, multipart = self._sock, self._handle, self._multipart
        get, recv = sock.get, (sock.recv_multipart if multipart else sock.recv)
        self._running = True
        try:
            budget = _READ_BUDGET
            while True:
                # EVENTS before every read, rather than reading until EAGAIN: raising
                # zmq.Again costs more than the getsockopt
                events = get(_EVENTS)
                if events & _POLLOUT and self._writers:
                    writers, self._writers = self._writers, collections.deque()
                    for fut in writers:
                        _wake(fut)
                if not events & _POLLIN:
                    return
                if not budget:
                    self._schedule()  # more to read: continue after others had a turn
                    return
                budget -= 1
                try:
                    frames = recv(_NOBLOCK)
                except zmq.Again:
                    continue
                try:
                    handle(frames if multipart else [frames])
                except Exception:  # a bug in one message must not stop the socket
                    log.exception("error handling a message")
        except zmq.ZMQError as exc:
            if not self._closed:
                # the socket or its context is gone from under us: stop watching a dead FD
                log.error("socket %s failed, no longer reading it: %s", self._fd, exc)
                self.close()
        finally:
            self._running = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._loop.remove_reader(self._fd)
        # wake, not cancel: a sender waiting for the connection should retry and fail with a
        # WireError, not see a CancelledError it did not ask for
        for fut in self._writers:
            _wake(fut)
        self._writers.clear()


# -- server -------------------------------------------------------------------------------

_SYNC, _CORO, _GEN = 0, 1, 2


class _Handler(NamedTuple):
    fn: Callable
    kind: int  # _SYNC, _CORO or _GEN
    signature: inspect.Signature | None
    # (accepted names or None for **kwargs, required names): a set test instead of
    # Signature.bind on every request; bind still words the error
    names: tuple[frozenset | None, frozenset] | None


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
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return _Handler(fn, kind, None, None)  # some builtins: let the call itself complain
    P = inspect.Parameter
    keyword = (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)
    parameters = signature.parameters.values()
    names = None
    if not any(p.kind == P.POSITIONAL_ONLY for p in parameters):
        accepted = frozenset(p.name for p in parameters if p.kind in keyword)
        required = frozenset(p.name for p in parameters if p.kind in keyword and p.default is P.empty)
        names = (None if any(p.kind == P.VAR_KEYWORD for p in parameters) else accepted, required)
    return _Handler(fn, kind, signature, names)


class _PeerGone(Exception):
    pass


class Server:
    """An asyncio RPC server on one ROUTER socket. See the module docstring for the protocol.

    `handlers` maps method names to ``async def f(**params) -> result`` (or a quick plain
    ``def``), or to an async generator function, which makes the method a stream. Handlers raise
    WireError subclasses for typed errors."""

    def __init__(self, endpoint: str, handlers: dict[str, Callable], *, max_frame: int = DEFAULT_MAX_FRAME,
                 allow_public: bool = False, name: str = "server",
                 context: zmq.Context | None = None, keepalive: float | None = KEEPALIVE):
        self._spec = _parse_bind_endpoint(endpoint, allow_public)
        self.endpoint = endpoint
        self.name = name
        self.max_frame = max_frame
        self.keepalive = keepalive
        self._handlers = {method: _classify(method, fn) for method, fn in handlers.items()}
        self._context = context
        self._sock: zmq.Socket | None = None
        self._pump: _Pump | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: dict[tuple[bytes, int], asyncio.Task] = {}
        self._streams: dict[bytes, dict[int, asyncio.Task]] = {}  # per peer, for peer loss
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
            sock.setsockopt(zmq.LINGER, SERVER_LINGER_MS)
            sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
            sock.setsockopt(zmq.SNDHWM, HWM)
            sock.setsockopt(zmq.RCVHWM, HWM)
            sock.setsockopt(zmq.MAXMSGSIZE, MAXMSGSIZE_FACTOR * self.max_frame)
            if spec.ipv6:
                sock.setsockopt(zmq.IPV6, 1)
            if spec.ipc_path is not None:
                os.makedirs(os.path.dirname(spec.ipc_path) or ".", mode=0o700, exist_ok=True)
                _clear_stale_ipc(spec.ipc_path)
            sock.bind(spec.endpoint)
            if spec.ipc_path is not None:
                self._ipc_ino = os.stat(spec.ipc_path).st_ino
            if spec.endpoint.startswith("tcp://"):
                self.endpoint = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        except BaseException:
            sock.close(0)
            raise
        self._sock = sock
        self._pump = _Pump(self._loop, sock, self._on_message)
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
        if pending:
            _, stuck = await asyncio.wait(pending, timeout=10.0)
            if stuck:
                log.warning("%s: %d handler(s) ignored cancellation at close", self.name, len(stuck))
        self._tasks.clear()
        self._streams.clear()
        self._aux.clear()
        self._sock.close(SERVER_LINGER_MS)
        path = self._spec.ipc_path
        if path is not None:
            try:
                if os.stat(path).st_ino == self._ipc_ino:  # not a successor's socket
                    os.unlink(path)
            except FileNotFoundError:
                pass

    # -- receiving ----------------------------------------------------------------------

    def _on_message(self, frames: list[bytes]) -> None:
        ident = frames[0]
        try:
            kind, rid, method, params = decode_request(frames[1:], self.max_frame)
        except WireError as err:
            self._reject(ident, err.request_id, err)
            return
        except Exception:  # a bug here must not kill the receive loop
            log.exception("%s: error decoding a message from %s", self.name, ident.hex())
            return
        key = (ident, rid)
        if kind == CANCEL:
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
        names = handler.names
        if names is None or not ((names[0] is None or params.keys() <= names[0]) and names[1] <= params.keys()):
            if handler.signature is not None:
                try:
                    handler.signature.bind(**params)
                except TypeError as exc:
                    self._reject(ident, rid, BadRequest(f"bad params for {method!r}: {exc}", {"method": method}))
                    return
        if key in self._tasks:
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

    def _reject(self, ident: bytes, rid: int | None, err: WireError) -> None:
        log.warning("%s: rejected a message from peer %s: %s", self.name, ident.hex(), err)
        self._send(ident, encode_error(rid, err, self.max_frame))

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
            if inspect.isawaitable(result):
                # a plain function (a lambda, a partial) that hands back a coroutine
                self._tasks[(ident, rid)] = self._loop.create_task(
                    self._run_call(ident, rid, method, lambda: result, {}))
                return
            payload = self._reply_payload(rid, method, result)
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
        try:
            try:
                agen = fn(**params)
                await self._stream_send(ident, encode_stream_start(rid))
                sent = 0
                async for item in agen:
                    try:
                        payload = encode_stream_item(rid, item, self.max_frame)
                    except TooLarge as err:
                        log.warning("%s: stream %r: %s", self.name, method, err)
                        final = encode_error(rid, err)
                        break
                    except Exception as exc:
                        final = self._internal(rid, method, exc, "stream item is not serializable")
                        break
                    await self._stream_send(ident, payload)
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
            except Exception as exc:
                final = self._internal(rid, method, exc)
            await self._stream_send(ident, final)
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

    def _forget_stream(self, ident: bytes, rid: int) -> None:
        streams = self._streams.get(ident)
        if streams is not None:
            streams.pop(rid, None)
            if not streams:
                del self._streams[ident]

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
        sock.send(ident, _SNDMORE_NOBLOCK)
        sock.send(payload, _NOBLOCK)

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

    async def _stream_send(self, ident: bytes, payload: bytes) -> None:
        """Send in order, waiting while the peer's queue is full; _PeerGone if it never drains."""
        try:
            self._send_now(ident, payload)
        except zmq.Again:
            if not await self._send_patiently(ident, payload):
                raise _PeerGone() from None
        except zmq.ZMQError as exc:
            self._send_failed(ident, exc)
            raise _PeerGone() from None
        finally:
            self._pump.kick()

    def _send_failed(self, ident: bytes, exc: zmq.ZMQError) -> None:
        if exc.errno == zmq.EHOSTUNREACH:
            self._peer_gone(ident, "disconnected")
        elif not self._closed.is_set():
            log.warning("%s: send to %s failed: %s", self.name, ident.hex(), exc)

    def _peer_gone(self, ident: bytes, why: str) -> None:
        streams = self._streams.pop(ident, None)
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


# -- client -------------------------------------------------------------------------------


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
        if self._started is not None and not self._started.done():
            self._started.set_exception(Cancelled("stream closed"))
        self._state = _DONE
        self._items.clear()
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

    def _on_item(self, item) -> None:
        self._items.append(item)
        if len(self._items) > STREAM_BUFFER:
            self._client._send_nowait(encode_cancel(self.id))
            self._finish(Unavailable(f"stream {self.method!r} cancelled: the consumer fell "
                                     f"{STREAM_BUFFER} items behind"))
        self._wake()

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
                 context: zmq.Context | None = None):
        self._ipv6 = _check_connect_endpoint(endpoint)
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
        self._streams: dict[int, Stream] = {}
        self._unsent: set[int] = set()  # ids waiting for a connection, so not lost with one
        self._send_backlog = 0
        self._next_id = 1
        self._closed = False

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
            sock.setsockopt(zmq.RECONNECT_IVL, 50)
            sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
            if self._ipv6:
                sock.setsockopt(zmq.IPV6, 1)
            address = f"inproc://kubemu-wire-monitor-{os.getpid()}-{next(_monitor_ids)}"
            sock.monitor(address, zmq.EVENT_DISCONNECTED)
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
                   idempotent: bool = False):
        if idempotent:
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
            if not self._try_send(payload):
                await self._send_wait(rid, payload, deadline, method)
            timer = loop.call_at(deadline, _expire_call, fut, method, timeout)
            try:
                return await fut
            finally:
                timer.cancel()
        except (OutcomeUnknown, asyncio.CancelledError):
            self._send_nowait(encode_cancel(rid))  # best effort: stop work nobody waits for
            raise
        finally:
            del calls[rid]

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
            raise Unavailable(f"could not reach {self.endpoint} within {timeout:g}s; {method!r} was not sent",
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
            self._sock.send(payload, _NOBLOCK)
        except zmq.Again:
            return False
        except zmq.ZMQError as exc:
            raise Unavailable(f"cannot send to {self.endpoint}: {exc}") from None
        finally:
            self._pump.kick()
        return True

    async def _send_wait(self, rid: int, payload: bytes, deadline: float, method: str) -> None:
        """Send once a connection exists; Unavailable (nothing sent) if none comes by `deadline`."""
        self._send_backlog += 1
        self._unsent.add(rid)
        loop = self._loop
        try:
            while True:
                try:
                    self._sock.send(payload, _NOBLOCK)
                    return
                except zmq.Again:
                    pass
                except zmq.ZMQError as exc:
                    raise Unavailable(f"cannot send to {self.endpoint}: {exc}") from None
                finally:
                    self._pump.kick()
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise Unavailable(f"could not reach {self.endpoint}; {method!r} was not sent",
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
            self._sock.send(payload, _NOBLOCK)
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
        elif kind == STREAM_ITEM:
            stream = self._streams.get(rid)
            if stream is not None:
                stream._on_item(value)
            else:
                log.debug("dropped an item of unknown or closed stream %s", rid)
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
        if int.from_bytes(frames[0][:2], "little") != zmq.EVENT_DISCONNECTED:
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


_monitor_ids = itertools.count(1)


# -- blocking wrapper ---------------------------------------------------------------------


class SyncStream:
    """A blocking iterator over a stream; use it as a context manager so it gets closed."""

    def __init__(self, owner: SyncClient, stream: Stream):
        self._owner = owner
        self._stream = stream

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        try:
            return self._owner._run(self._stream.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def __enter__(self) -> SyncStream:
        self._owner._run(self._stream._open())
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self._owner._closed:
            self._owner._run(self._stream.aclose())


class SyncClient:
    """`Client` for blocking code (command-line tools): owns a private event loop and ZeroMQ
    context. Not for use inside a running event loop; close it (or use ``with``)."""

    def __init__(self, endpoint: str, *, timeout: float = 10.0, max_frame: int = DEFAULT_MAX_FRAME):
        self._context = zmq.Context()
        self._loop = asyncio.new_event_loop()
        self._client = Client(endpoint, timeout=timeout, max_frame=max_frame, context=self._context)
        self._closed = False

    @property
    def endpoint(self) -> str:
        return self._client.endpoint

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _run(self, coro):
        if self._closed:
            coro.close()
            raise RuntimeError("this wire SyncClient is closed")
        return self._loop.run_until_complete(coro)

    def call(self, method: str, params: dict | None = None, *, timeout: float | None = None,
             idempotent: bool = False):
        return self._run(self._client.call(method, params, timeout=timeout, idempotent=idempotent))

    def stream(self, method: str, params: dict | None = None, *, timeout: float | None = None) -> SyncStream:
        return SyncStream(self, self._client.stream(method, params, timeout=timeout))

    def close(self) -> None:
        if self._closed:
            return
        loop = self._loop
        try:
            loop.run_until_complete(self._client.close())
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            if leftovers:
                loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            self._closed = True
            loop.close()
            # term waits (at most the client linger) for queued sends such as CANCELs to flush
            self._context.destroy(linger=CLIENT_LINGER_MS)
