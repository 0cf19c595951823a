"""The wire: the ZeroMQ + msgpack RPC every kubemu process speaks.

A `Server` owns one ROUTER socket; a `Client` owns one DEALER socket. Any number of requests
and server-push streams can be in flight on one client at once; every message carries the
client's request id, and ids are per client. `SyncClient` wraps `Client` for command-line tools.
`FailoverClient` is `Client`'s interface over several servers of the same methods (HA
apiservers; `kubemu._wire_failover` has its rules), and `client_for(endpoints)` gives a `Client`
for one endpoint and a `FailoverClient` for a list (or a comma-separated string).

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
      [10 NOTIFY,      id, method, params]    one way: run a plain handler, send nothing back
    server -> client
      [4 REPLY,        id, result]
      [5 ERROR,        id, code, message, details]   ends a call or a stream; id is nil when the
                                                     server could not read one from the message
      [6 STREAM_START, id]                    the stream is accepted (the client's timeout ends here)
      [7 STREAM_ITEM,  id, item]              in order, any number, at any pace
      [11 STREAM_ITEMS, id, [item, ...]]      several items at once (a handler's `Batch`), given
                                              out one by one, in order, as if sent apart
      [8 STREAM_END,   id]                    normal end of a stream
      [9 PING]                                keepalive to peers with open streams; ignored

Errors are typed: `code` is a string such as "NotFound" that `error_from_code` maps to a
`WireError` subclass (subclasses that set `code` register themselves), `details` is a map.

Decisions
---------
* An unknown method is answered with code "UnknownMethod" (`UnknownMethod`, a `BadRequest`),
  not "NotFound": handlers use NotFound for missing objects, and a caller must be able to tell
  "no such pod" from "this server does not speak that method" (version skew).
* Params are checked against the handler's signature before the handler runs: a missing or
  unexpected keyword, or a value of a type its annotation does not admit (`_wire_params`:
  str, int, float, bool, bytes, dict, list, ``X | None``, ``list[X]``, Literal; bool is not
  an int), is BadRequest, while a TypeError raised inside a handler is Internal. The checks
  are built once per handler, when the Server is made.
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
  stream item the server cannot send is replaced by a TooLarge error (a `Batch` too large for
  one frame is sent item by item first), and a client refuses to
  send an oversize request (TooLarge, nothing sent). As a hard memory guard libzmq's
  ZMQ_MAXMSGSIZE is set to 4 x max_frame: a peer that sends a bigger frame is disconnected by
  libzmq itself, without any reply (its client sees the connection drop, then reconnects).
* Malformed messages (and unknown methods, bad params, a call of a stream method or the
  reverse) get an error reply (the ROUTER always has the sender's routing id) and one log
  line on the "kubemu.wire" logger: a WARNING for a peer's first, then at most one WARNING per
  peer every 10 s, saying how many were not logged, and at most 1 a second (burst 20) over
  all peers (`ratelimit.LogThrottle`); the rest are DEBUG. A handler that raises anything
  but a WireError gets an Internal reply and one ERROR line with the traceback. The server
  keeps serving either way. Nothing is logged per message on the normal path.
* LINGER: clients 200 ms (a small positive linger so a CANCEL queued just before close still
  flushes; libzmq issue #4660 shows a DEALER that closes right after sending over ipc can lose
  the message, so nothing here relies on close to flush: every request that matters is
  answered before the caller moves on); servers 0 (a closing server has nobody to flush to).
* ROUTER_MANDATORY is on, so a send to a vanished peer fails with EHOSTUNREACH instead of being
  dropped: that peer's streams are cancelled (their generators closed) and one line is logged.
  Idle streams of a dead peer are found by a PING every `keepalive` seconds; a peer that
  goes away mid-stream is one WARNING line, not a handler failure. SNDHWM/RCVHWM
  are 100,000 so bursts of stream items queue instead of being dropped; a peer that stays
  unable to take more for `SLOW_PEER_TIMEOUT` seconds is treated as gone.
* Slow stream consumers: what libzmq holds for one peer's streams is bounded by bytes,
  `PEER_BUFFER_BYTES` (16 MiB; tracked with `_wire_backlog`, the HWM only counts messages).
  Past it a stream waits for the peer to drain; a peer that takes nothing for
  `SLOW_STREAM_TIMEOUT` (10 s) has that stream ended with Unavailable, details
  ``{"reason": "SlowConsumer"}``, and one WARNING, as kube-apiserver closes a watcher that
  cannot keep up; the client starts it again (a watch: from the last revision it received).
  A client likewise buffers at most `STREAM_BUFFER` bytes (32 MiB) of one stream its
  consumer does not read, then cancels it with the same error.
* `Client.notify` sends a NOTIFY: one way, for protocols that survive loss (Raft resends), so
  a message costs no reply, no future and no timer on either side. Only plain (`def`)
  handlers take one; nothing ever comes back, so an unknown method, bad params or a handler
  that raises are logged (one WARNING, or the traceback) and the message is dropped. Its id
  is the client's next request id, for logs only. notify returns False, having sent nothing,
  when the message cannot be queued at once (no connection, or a full queue).
* Sync handlers (plain `def`) are run inline on the receive path, without a task; they must
  be quick and must not block. One may return an `asyncio.Future` (not a coroutine): the reply
  goes out when it is done, still without a task (a CANCEL or `close()` cancels the future). Async handlers get one task per request. A handler cancelled
  by the client's CANCEL or by `Server.close()` sends nothing.
* Event loop: sockets are plain zmq sockets (made from the given context, by default the
  shared ``zmq.asyncio.Context.instance()``) driven from the loop's selector through the
  edge-triggered ZMQ_FD (`_Pump`), not through zmq.asyncio futures, which cost two loop
  iterations per message. A Server or Client belongs to the loop that started it.
* A stream item that many streams carry (a watch event to every watcher) is a `SharedItem`: a
  read-only map packed once, on its first send, whatever the number of streams.
* Endpoints: `ipc://` sockets live in a 0700 directory; tcp binds only loopback addresses
  unless the server requires CURVE (``auth=CurveAuth(...)``). Linux limits a unix socket path
  to 107 bytes.
* Authentication (`kubemu._wire_auth`): a Server made with ``auth=ServerAuth(secrets_dir,
  authorize)`` takes only connections that present an identity and its secret with ZeroMQ's
  PLAIN mechanism (``Client(..., credentials=(identity, secret))``), checked by a ZAP
  responder against ``secrets_dir/<identity>.secret``. Handlers read the caller's identity
  from `peer_identity` (a ContextVar), never from params; ``authorize(identity, method,
  params)`` runs before every request and notification and refuses one by raising a WireError
  (`Forbidden`): the request gets that error, a notification is dropped, either with the
  rate-limited log line of any rejected message. A refused handshake is one rate-limited log
  line on the server; the client's waiting calls fail at once with `Unauthorized` (not after
  their timeout). Without `auth` and `credentials` nothing of this runs.
* Beyond loopback: ``auth=CurveAuth(public, secret, identify, authorize)`` requires CurveZMQ
  instead (every message encrypted); a client presents ``credentials=CurveCredentials(
  server_key, public, secret)``; ``identify(client_public_key)`` names the identity handlers
  see, None refuses the key at the handshake (`kubemu.wirekeys` holds the key files). A client
  holding another server key is dropped by the server without a word: its calls end with
  Unavailable, which names the server key it tried.
* User agent: ``Client(..., user_agent="kube-scheduler/node-0_4242")`` names the client in its
  handshake (ZMQ_METADATA ``X-User-Agent``, HTTP's User-Agent header); an authenticated
  Server's handlers read it from `peer_user_agent` (a ContextVar, None if the client named
  none). It is what the client says of itself, for logs and the audit log, never a credential.
"""
from __future__ import annotations

from ._wire_auth import Credentials, CurveAuth, CurveCredentials, ServerAuth
from ._wire_client import IDEMPOTENT_ATTEMPTS, STREAM_BUFFER, Client, Stream
from ._wire_codec import (CANCEL, ERROR, NOTIFY, PING, REPLY, REQ, STREAM, STREAM_END, STREAM_ITEM, STREAM_ITEMS,
                          STREAM_START, Batch, Reply, Request, SharedItem, decode_reply, decode_request, encode_call,
                          encode_cancel, encode_error, encode_notify, encode_ping, encode_reply, encode_stream,
                          encode_stream_end, encode_stream_item, encode_stream_items, encode_stream_start)
from ._wire_endpoints import SUN_PATH_MAX, ipc_endpoint, split_endpoints, tcp_endpoint
from ._wire_errors import (BadRequest, Cancelled, Conflict, Forbidden, Gone, Internal, Invalid, NotFound,
                           OutcomeUnknown, TooLarge, TooManyRequests, Unauthorized, Unavailable, UnknownMethod,
                           WireError, error_from_code)
from ._wire_limits import CLIENT_LINGER_MS, DEFAULT_MAX_FRAME, HWM, MAXMSGSIZE_FACTOR
from ._wire_server import (KEEPALIVE, PEER_BUFFER_BYTES, SERVER_LINGER_MS, SLOW_PEER_TIMEOUT, SLOW_STREAM_TIMEOUT,
                           Server, peer_identity, peer_user_agent)
from ._wire_failover import FailoverClient, FailoverStream, Preference, client_for
from ._wire_sync import SyncClient, SyncStream

__all__ = [
    "WireError", "NotFound", "Conflict", "Invalid", "Unavailable", "TooLarge", "BadRequest",
    "UnknownMethod", "Internal", "Gone", "Cancelled", "OutcomeUnknown", "Unauthorized", "Forbidden", "TooManyRequests",
    "error_from_code", "Credentials", "ServerAuth", "CurveCredentials", "CurveAuth", "peer_identity", "peer_user_agent",
    "DEFAULT_MAX_FRAME", "ipc_endpoint", "tcp_endpoint", "split_endpoints", "Server", "Client", "Stream",
    "FailoverClient", "FailoverStream", "Preference", "client_for",
    "SyncClient", "SyncStream", "Request", "Reply", "SharedItem", "Batch", "decode_request", "decode_reply",
    "encode_call", "encode_stream", "encode_notify", "encode_cancel", "encode_reply", "encode_error",
    "encode_stream_start", "encode_stream_item", "encode_stream_items", "encode_stream_end", "encode_ping",
    # message kinds
    "REQ", "STREAM", "NOTIFY", "CANCEL", "REPLY", "ERROR", "STREAM_START", "STREAM_ITEM", "STREAM_ITEMS",
    "STREAM_END", "PING",
    # tunables
    "MAXMSGSIZE_FACTOR", "HWM", "CLIENT_LINGER_MS", "SERVER_LINGER_MS", "IDEMPOTENT_ATTEMPTS",
    "STREAM_BUFFER", "SLOW_PEER_TIMEOUT", "PEER_BUFFER_BYTES", "SLOW_STREAM_TIMEOUT", "KEEPALIVE", "SUN_PATH_MAX",
]

# Like trio: the public classes and functions say they come from here (tracebacks, reprs, and
# pickles, which then name kubemu.wire rather than a private module).
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("kubemu._wire_"):
        _obj.__module__ = __name__
del _name, _obj
