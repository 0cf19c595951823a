"""`FailoverClient`: the wire `Client`'s interface over several servers that serve the same
methods (the apiservers of an HA control plane), in preference order.

Every client of the API is kubemu's own, so the balancing lives in the client (client-side
failover) rather than in a proxy in front of the servers: no extra process or hop per request,
and nothing that can fail on its own. One `Client` (one DEALER socket) per endpoint, all
connected from the first use on, each watched through its socket monitor, so the client always
knows which connections are up.

Rules
-----
* A call goes to the *current* endpoint if its connection is up, else to the next one in ring
  order whose connection is up: an endpoint whose connection dropped (kill -9: the kernel
  closes the socket, the monitor says so at once) is skipped without waiting for anything.
  With no connection up, a call waits for the first one within its timeout; out of time it
  raises `Unavailable` (nothing was sent), or `Unauthorized` once every server has refused the
  handshake.
* The current endpoint changes when a call to it times out, an idempotent call's attempt on it
  gets no answer within its share of the timeout, or its connection is lost (the next one that
  is up takes over), and back to an endpoint earlier in the preference order when that one's
  connection comes (back) up: a node's own apiserver, listed first, gets its clients back after
  a restart.
* Writes (``idempotent=False``) are sent once. A request that could not be sent because the
  connection dropped under it goes to another endpoint (nothing was sent); one that was sent
  and got no reply raises `OutcomeUnknown`, as on one connection.
* Idempotent calls follow the wire's scheme (`IDEMPOTENT_ATTEMPTS` attempts within the one
  timeout, the next after 1/15, 2/15, 4/15 ... of it, or at once when one fails without an
  answer, the first reply to any wins), except that each attempt goes to an endpoint that no
  earlier attempt of the call is waiting on or got nothing from, while there is one: a stopped
  (SIGSTOP) server, whose connection stays up, costs 1/15 of the timeout. An `Unavailable` answer (that server
  cannot serve now, e.g. it lost its store) is tried on another endpoint when one is up and
  has not been tried; other typed errors are the answer.
* A stream stays on the endpoint that accepted it; when that connection is lost it ends with
  `Unavailable`, as on one connection (a watch is then started again, through any endpoint,
  from the last resourceVersion seen).
* `notify` goes to the current endpoint; False if no connection is up.

`Preference` is the pure part (which endpoint, given what is up); `FailoverClient` the shell.
"""
from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Collection, Iterable

import zmq

from ._wire_client import IDEMPOTENT_ATTEMPTS, Client, Stream, fresh
from ._wire_endpoints import split_endpoints
from ._wire_errors import Cancelled, OutcomeUnknown, Unavailable, WireError

_UP = int(zmq.EVENT_HANDSHAKE_SUCCEEDED)
_DOWN = int(zmq.EVENT_DISCONNECTED)


class Preference:
    """Which endpoint gets the next request (pure: no I/O, no clock). Endpoints are indexes into
    the preference-ordered list; `up[i]` says whether endpoint i's connection is up."""

    def __init__(self, count: int):
        if count < 1:
            raise ValueError("no endpoints")
        self.up = [False] * count
        self.current = 0

    def _ring(self) -> list[int]:
        n = len(self.up)
        return [(self.current + k) % n for k in range(n)]

    def choose(self, avoid: Collection[int] = ()) -> int | None:
        """The first endpoint that is up, from the current one on in ring order, preferring
        those not in `avoid`; None when no connection is up."""
        ring = [i for i in self._ring() if self.up[i]]
        for i in ring:
            if i not in avoid:
                return i
        return ring[0] if ring else None

    def connected(self, i: int) -> None:
        self.up[i] = True
        if i < self.current:
            self.current = i  # a preferred endpoint is back

    def disconnected(self, i: int) -> None:
        self.up[i] = False

    def failed(self, i: int) -> None:
        """Endpoint i did not answer in time (or its connection was lost): the next endpoint
        that is up becomes current."""
        if i != self.current:
            return
        n = len(self.up)
        for k in range(1, n):
            j = (i + k) % n
            if self.up[j]:
                self.current = j
                return


class _NotSent(Unavailable):
    """The connection dropped before the request could be sent: nothing was sent, so it may go
    to another endpoint. (No `code` of its own: it is an Unavailable on the wire's terms.)"""


class _EndpointClient(Client):
    """A wire Client that reports its connection going up and down, and whose requests that
    wait to be sent fail as `_NotSent` when the connection drops (not after the timeout)."""

    def __init__(self, endpoint: str, *, on_event, **kwargs):
        super().__init__(endpoint, **kwargs)
        self._on_event = on_event
        self._dropped: asyncio.Future | None = None  # done when the connection drops next

    async def _send_wait(self, rid: int, payload: bytes, deadline: float, method: str,
                         send_if: Callable[[], bool] | None = None) -> None:
        loop = self._loop
        if self._dropped is None or self._dropped.done():
            self._dropped = loop.create_future()
        dropped = self._dropped
        send = loop.create_task(super()._send_wait(rid, payload, deadline, method, send_if))
        try:
            await asyncio.wait((send, dropped), return_when=asyncio.FIRST_COMPLETED)
            if not send.done():
                # libzmq drops the connection before the loop hears of it, so a request can
                # start waiting on a server that has just died: it goes elsewhere at once
                send.cancel()
                await asyncio.gather(send, return_exceptions=True)
                fut = self._calls.get(rid)  # the drop may have failed it meanwhile: this wins
                if fut is not None and fut.done() and not fut.cancelled():
                    fut.exception()
                raise _NotSent(f"connection to {self.endpoint} lost; {method!r} was not sent",
                               {"method": method})
            send.result()
        finally:
            send.cancel()

    def _on_monitor_event(self, frames: list[bytes]) -> None:
        super()._on_monitor_event(frames)
        event = int.from_bytes(frames[0][:2], "little")
        if event == _DOWN and self._dropped is not None and not self._dropped.done():
            self._dropped.set_result(None)
        self._on_event(event)


class FailoverStream:
    """A server-push stream on whichever endpoint accepts it (`Stream`'s interface); it stays
    there. `endpoint` names that server once the stream is open."""

    def __init__(self, owner: FailoverClient, method: str, params: dict | None, timeout: float | None):
        self._owner = owner
        self.method = method
        self._params = params
        self._timeout = owner.timeout if timeout is None else timeout
        self._inner: Stream | None = None
        self._opened = False
        self._closed = False
        self.endpoint: str | None = None

    @property
    def id(self) -> int | None:
        return self._inner.id if self._inner is not None else None

    async def _open(self) -> None:
        if self._opened or self._closed:
            return
        self._opened = True
        owner = self._owner
        owner._ensure()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        while True:
            i = await owner._pick(deadline, self.method)
            if self._closed:
                raise Cancelled("stream closed")
            client = owner._clients[i]
            inner = self._inner = client.stream(self.method, self._params,
                                                timeout=max(deadline - loop.time(), 0.001))
            try:
                await inner._open()
            except _NotSent:
                if self._closed:
                    raise
                continue
            except OutcomeUnknown:
                owner._pref.failed(i)
                raise
            self.endpoint = client.endpoint
            return

    def __aiter__(self) -> FailoverStream:
        return self

    async def __anext__(self):
        if not self._opened:
            await self._open()
        if self._inner is None:
            raise StopAsyncIteration
        return await self._inner.__anext__()

    async def aclose(self) -> None:
        self._closed = True
        if self._inner is not None:
            await self._inner.aclose()

    async def __aenter__(self) -> FailoverStream:
        await self._open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


class FailoverClient:
    """`Client`'s interface (call, notify, stream, connect, close) over several endpoints; see
    the module docstring. `client_options` (credentials, context, max_frame, ...) go to each
    endpoint's `Client`."""

    def __init__(self, endpoints: str | Iterable[str], *, timeout: float = 10.0, **client_options):
        self.endpoints = split_endpoints(endpoints)
        self.endpoint = ",".join(self.endpoints)
        self.timeout = timeout
        self._clients = [_EndpointClient(ep, on_event=functools.partial(self._on_event, i), timeout=timeout,
                                         **client_options)
                         for i, ep in enumerate(self.endpoints)]
        self._pref = Preference(len(self._clients))
        self._changed: asyncio.Future | None = None  # done at the next connection event
        self._closed = False

    @property
    def credentials(self):
        return self._clients[0].credentials

    @property
    def max_frame(self) -> int:
        return self._clients[0].max_frame

    @property
    def connected(self) -> list[str]:
        """The endpoints whose connection is up."""
        return [ep for ep, up in zip(self.endpoints, self._pref.up) if up]

    @property
    def current(self) -> str:
        """The endpoint the next request goes to if its connection is up."""
        return self.endpoints[self._pref.current]

    def connect(self) -> None:
        """Start connecting to every endpoint now (inside the event loop that will use it)."""
        self._ensure()

    def _ensure(self) -> None:
        if self._closed:
            raise RuntimeError("this wire FailoverClient is closed")
        for client in self._clients:
            client._ensure()

    async def __aenter__(self) -> FailoverClient:
        self._ensure()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for client in self._clients:
            await client.close()
        if self._changed is not None and not self._changed.done():
            self._changed.cancel()

    # -- connection state ------------------------------------------------------------------

    def _on_event(self, i: int, event: int) -> None:
        if event == _UP:
            self._pref.connected(i)
        elif event == _DOWN:
            self._pref.disconnected(i)
            self._pref.failed(i)
        changed = self._changed
        if changed is not None and not changed.done():
            changed.set_result(None)

    async def _changes(self, timeout: float) -> None:
        """Wait at most `timeout` for the next connection event."""
        if self._changed is None or self._changed.done():
            self._changed = asyncio.get_running_loop().create_future()
        await asyncio.wait((self._changed,), timeout=timeout)

    async def _pick(self, deadline: float, method: str) -> int:
        """An endpoint whose connection is up, waiting for one until `deadline`."""
        loop = asyncio.get_running_loop()
        while True:
            i = self._pref.choose()
            if i is not None:
                return i
            refused = [c._refused for c in self._clients if c._refused is not None]
            if len(refused) == len(self._clients):
                raise fresh(refused[0])  # every server said no to these credentials
            remaining = deadline - loop.time()
            if remaining <= 0:
                if refused:
                    raise fresh(refused[0])
                raise Unavailable(f"could not reach any of {self.endpoint}; {method!r} was not sent",
                                  {"method": method, "endpoints": list(self.endpoints)})
            await self._changes(remaining)

    # -- calls -----------------------------------------------------------------------------

    async def call(self, method: str, params: dict | None = None, *, timeout: float | None = None,
                   idempotent: bool = False, send_if: Callable[[], bool] | None = None):
        """As `Client.call`; `send_if` is asked before the send on whichever endpoint takes the write."""
        self._ensure()
        loop = asyncio.get_running_loop()
        timeout = self.timeout if timeout is None else timeout
        deadline = loop.time() + timeout
        if idempotent:
            if send_if is not None:
                raise ValueError("send_if fences writes; an idempotent call is not fenced")
            return await self._call_idempotent(method, params, timeout, deadline)
        while True:
            i = await self._pick(deadline, method)
            try:
                return await self._clients[i].call(method, params, timeout=max(deadline - loop.time(), 0.001),
                                                   send_if=send_if)
            except _NotSent:
                continue  # nothing was sent: another endpoint
            except OutcomeUnknown:
                self._pref.failed(i)
                raise

    async def _call_idempotent(self, method: str, params: dict | None, timeout: float, deadline: float):
        loop = asyncio.get_running_loop()
        pending: dict[asyncio.Task, int] = {}
        tried: set[int] = set()
        failed: set[int] = set()  # endpoints that answered this call without a result
        attempts = 0
        next_at = loop.time()
        last: WireError | None = None
        try:
            while loop.time() < deadline:
                if attempts < IDEMPOTENT_ATTEMPTS and loop.time() >= next_at:
                    for slow in pending.values():
                        self._pref.failed(slow)  # no answer within its share of the timeout
                    i = self._pref.choose(avoid=failed | set(pending.values()))
                    if i is not None:
                        pending[loop.create_task(self._clients[i].call(
                            method, params, timeout=max(deadline - loop.time(), 0.001)))] = i
                        tried.add(i)
                        attempts += 1
                        next_at = (deadline if attempts == IDEMPOTENT_ATTEMPTS else
                                   loop.time() + timeout * 2 ** (attempts - 1) / (2 ** IDEMPOTENT_ATTEMPTS - 1))
                if not pending:
                    if attempts >= IDEMPOTENT_ATTEMPTS:
                        break
                    try:
                        await self._pick(deadline, method)  # no connection up: wait for one
                    except Unavailable:
                        if attempts == 0:
                            raise
                        break
                    next_at = loop.time()
                    continue
                wake = next_at if attempts < IDEMPOTENT_ATTEMPTS else deadline
                done, _ = await asyncio.wait(pending, timeout=max(0.0, min(wake, deadline) - loop.time()),
                                             return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    i = pending.pop(task)
                    exc = task.exception()
                    if exc is None:
                        return task.result()
                    if isinstance(exc, _NotSent):
                        attempts -= 1  # nothing was sent: not an attempt
                    elif isinstance(exc, OutcomeUnknown):
                        self._pref.failed(i)
                        failed.add(i)
                        last = exc
                    elif isinstance(exc, Unavailable):
                        other = self._pref.choose(avoid=tried)
                        if (other is None or other in tried) and not pending:
                            raise exc  # that server's answer, and no other to ask
                        failed.add(i)
                        last = exc
                    else:
                        raise exc
                    next_at = loop.time()  # an attempt failed without an answer: the next, now
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        if attempts == 0:
            await self._pick(deadline, method)  # raises: nothing was ever up
        why = f" (last: {last})" if last is not None else ""
        raise Unavailable(f"no reply to idempotent call {method!r} from {self.endpoint} after {attempts} "
                          f"attempt(s) within {timeout:g}s{why}",
                          {"method": method, "timeout": timeout, "attempts": attempts})

    def notify(self, method: str, params: dict | None = None) -> bool:
        self._ensure()
        i = self._pref.choose()
        return False if i is None else self._clients[i].notify(method, params)

    def stream(self, method: str, params: dict | None = None, *, timeout: float | None = None) -> FailoverStream:
        return FailoverStream(self, method, params, timeout)


def client_for(endpoints: str | Iterable[str], **options) -> Client | FailoverClient:
    """A `Client` for one endpoint (exactly the wire's behaviour), a `FailoverClient` for more
    (a comma-separated string or a list, in preference order)."""
    found = split_endpoints(endpoints)
    if len(found) == 1:
        return Client(found[0], **options)
    return FailoverClient(found, **options)
