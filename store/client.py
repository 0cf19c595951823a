"""The store's client: etcd's clientv3 habits over kubemu's wire.

`StoreClient(endpoints)` (asyncio) and `SyncStoreClient(endpoints)` (blocking, for command-line
tools) talk to the N replicas of the store. Keys, values and range ends may be given as str
(encoded as UTF-8) or bytes; responses are the replicas' KVStore dicts (bytes keys and values,
``header.revision``).

Routing and retries
-------------------
* Writes (put, delete, txn, compact, leases, membership, move_leader) go to the leader. The
  client finds it by asking every endpoint for `status` at once, round after round until one
  says it leads, caches it, and follows a replica's "NotLeader" answer to the endpoint it names
  (or finds the leader again when the replica does not know one). "NotLeader" and "Unavailable"
  (nothing sent, or the replica says it did not act: no leader yet, shutting down) mean the
  write was not executed: it is sent again, after a short growing pause where useful, until
  the operation's `timeout` runs out; then `Unavailable` (still: not executed).
* Failover: when the connection to a replica drops (kill -9, crash), or a call to it fails, the
  client forgets it as the leader at once and tries it last for `SUSPECT_FOR` seconds. A
  discovery round does not wait for a replica it cannot even send to once the others have
  answered, and it believes no hint naming a replica that was asked (that one said it does not
  lead, or could not be reached): right after a kill -9 the survivors still name the dead
  leader until they elect another. A NotLeader hint naming a replica that just failed is not
  followed either. So the first write after the leader's death lands about when the survivors
  have elected a new leader, rather than after the dead one's dial timeout.
* A write that was sent but whose reply never came (the wire's timeout, a lost connection, or a
  replica passing on an OutcomeUnknown of its own) raises `OutcomeUnknown`: it may or may not
  have been applied, and it is NEVER sent again behind the caller's back. Exceptions, because
  repeating them is harmless: `lease_keepalive` and read-only txns.
* Reads (range/get, status, member_list, lease_leases) are idempotent. They go to the leader
  when it is known (a linearizable read there needs no forwarding) and otherwise round-robin;
  an attempt that fails without a definite answer moves on to the next replica at once, and one
  that is merely slow gets a hedge on the next replica after 1/15, 2/15, 4/15 ... of the
  timeout while it keeps running (the first answer wins). Out of time: `Unavailable`. A
  replica that just failed to answer is tried after the others for `SUSPECT_FOR` seconds.
* A replica that is not reachable at all costs at most `dial_timeout` (etcd's name): a request
  that cannot even be sent to it within that long fails as not sent (the wire's Unavailable),
  so a dead cached leader whose death went unnoticed does not eat a write's whole timeout.
* Definite failures are raised as typed errors and never retried: `Compacted` (a wire `Gone`,
  with `.compact_revision`), `FutureRevision`, `KeyNotFound`/`LeaseNotFound` (wire `NotFound`),
  `LeaseExists` (`Conflict`), `InvalidRequest`/`DuplicateKey` (`Invalid`), `TooLarge`, ...
  Replicas send these as the wire class with the store's code in details["reason"] (see
  store/errors.py); the client picks the specific class from it (or from a bare store code),
  and the instance keeps the wire code: catch the wire base class or the specific one.

Watches
-------
`watch(...)` returns a `Watch`: ``async for event in watch`` yields `store.mvcc.Event`s (type
"PUT"/"DELETE", kv, prev_kv; ``event.revision``) in revision order. When the replica serving
it fails (connection lost, the stream ends, the replica is unavailable) the watch reopens on
another replica from the revision after the last event it received, and drops anything older
that a replica sends again: no gaps, no duplicates. This relies on a replica sending all the
events of one revision in one stream item (etcd does so unless asked to fragment). A resume
point that has been compacted meanwhile raises `Compacted`. If no replica takes the watch back
within `resume_timeout` seconds the watch raises `Unavailable`.

Many requests and watches may be in flight at once on one client (one wire connection per
replica). A StoreClient belongs to the event loop that first uses it.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import random
import weakref
from typing import AsyncIterator, Callable, Iterable

import zmq

from kubemu import wire
from kubemu._wire_client import fresh
from kubemu._wire_sync import BlockingIterator, BlockingLoop
from kubemu.wire import (BadRequest, Cancelled, Conflict, Gone, Internal, Invalid, NotFound, TooLarge,
                         Unavailable, WireError)
from store.mvcc import Event, prefix_end

__all__ = [
    "StoreClient", "SyncStoreClient", "Watch", "SyncWatch", "Event",
    "WireError", "NotFound", "Conflict", "Invalid", "Unavailable", "TooLarge", "BadRequest", "Internal",
    "Gone", "Cancelled", "OutcomeUnknown", "Compacted", "FutureRevision", "KeyNotFound", "LeaseNotFound",
    "LeaseExists", "InvalidRequest", "DuplicateKey", "NOT_LEADER",
    "DEFAULT_TIMEOUT", "DEFAULT_DIAL_TIMEOUT", "DEFAULT_RESUME_TIMEOUT",
]

DEFAULT_TIMEOUT = 5.0  # etcdctl's --command-timeout
DEFAULT_DIAL_TIMEOUT = 2.0  # etcdctl's --dial-timeout
DEFAULT_RESUME_TIMEOUT = 30.0
SUSPECT_FOR = 2.0  # seconds a replica that did not answer is tried after the others
# how long a leader-discovery round waits for the replicas that have not answered once the last
# of the others has: a live replica says its role in milliseconds, a dead one may never
STRAGGLER_GRACE = 0.5  # and a busy leader may answer late: too short would never find it
NOT_LEADER = "NotLeader"  # the replicas' error code for a write sent to a non-leader
_HEDGES = 4  # a read's hedge delays: timeout * 1/15, 2/15, 4/15, 8/15 (the wire's idempotent scheme)


# ------------------------------------------------------------------------------------- errors
# None of these sets `code` in its class body, so none registers itself with the wire's code
# registry: an instance keeps whatever code the replica sent.

class OutcomeUnknown(wire.OutcomeUnknown):
    """A write was sent but no answer came: it may or may not have been applied. Never retried
    by the client; the caller decides (read back, or make the write conditional with a txn)."""


class Compacted(Gone):
    """The revision asked for (a read, a watch start or resume, a compaction) is at or below the
    compact revision (etcd ErrCompacted)."""

    @property
    def compact_revision(self) -> int | None:
        return self.details.get("compact_revision")


class FutureRevision(Invalid):
    """The revision asked for is above the current one (etcd ErrFutureRev)."""


class KeyNotFound(NotFound):
    """A put with ignore_value/ignore_lease on a missing key."""


class LeaseNotFound(NotFound):
    """No lease with that id (etcd ErrLeaseNotFound)."""


class LeaseExists(Conflict):
    """A lease with that id exists already (etcd ErrLeaseExist)."""


class InvalidRequest(Invalid):
    """A malformed request; details['field'] names the field."""


class DuplicateKey(Invalid):
    """A txn branch puts one key twice, or puts a key it deletes (etcd ErrDuplicateKey)."""


_TRANSLATE: dict[str, type[WireError]] = {
    "Gone": Compacted, "Compacted": Compacted, "FutureRevision": FutureRevision,
    "KeyNotFound": KeyNotFound, "LeaseNotFound": LeaseNotFound, "LeaseExists": LeaseExists,
    "InvalidRequest": InvalidRequest, "DuplicateKey": DuplicateKey, "TooLarge": TooLarge,
    "OutcomeUnknown": OutcomeUnknown,
}


def _translate(err: WireError) -> WireError:
    """A replica's error as this module's class for it (the instance keeps the wire code).
    Replicas send state-machine errors as the wire class (NotFound, Invalid, Gone, ...) with
    the store's own code in details["reason"]; a bare store code is understood too."""
    reason = err.details.get("reason") if isinstance(err.details, dict) else None
    cls = _TRANSLATE.get(reason) if isinstance(reason, str) else None
    cls = cls or _TRANSLATE.get(err.code)
    if cls is None or type(err) is cls:
        return err
    new = cls(err.message, dict(err.details), code=err.code)
    new.__cause__ = err.__cause__
    return new


def _consume(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


def _is_not_leader(err: BaseException) -> bool:
    return isinstance(err, WireError) and err.code == NOT_LEADER


def _retryable_read(err: BaseException) -> bool:
    """Errors after which an idempotent request may simply be sent again (elsewhere)."""
    return isinstance(err, (Unavailable, wire.OutcomeUnknown, Cancelled)) or _is_not_leader(err)


# ------------------------------------------------------------------------------------ helpers

def _b(value: str | bytes | None, what: str = "key") -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be str or bytes, not {type(value).__name__}")


def _range_end(key: bytes, range_end, prefix: bool) -> bytes | None:
    if prefix:
        if range_end is not None:
            raise ValueError("give either prefix=True or range_end, not both")
        return prefix_end(key)
    return _b(range_end, "range_end")


class _Backoff:
    """Short, growing, jittered pauses between retries that cannot succeed at once."""

    def __init__(self, first: float = 0.02, cap: float = 0.5):
        self.delay, self.cap = first, cap

    async def sleep(self, loop: asyncio.AbstractEventLoop, deadline: float) -> None:
        pause = min(self.delay * (0.5 + random.random()), max(0.0, deadline - loop.time()))
        self.delay = min(self.delay * 2, self.cap)
        if pause > 0:
            await asyncio.sleep(pause)


class _ReplicaClient(wire.Client):
    """A wire Client whose requests give up being *sent* after `dial_timeout`: a replica that is
    not connected fails fast as Unavailable (not sent), while a request that was sent still gets
    the whole timeout for its reply. It reports a dropped connection to `on_lost` (the replica
    may be dead: it must not stay the believed leader until a request finds out), and
    `unreachable` says whether its requests are waiting for a connection right now."""

    def __init__(self, endpoint: str, *, dial_timeout: float, on_lost, **kwargs):
        super().__init__(endpoint, **kwargs)
        self.dial_timeout = dial_timeout
        self._on_lost = on_lost
        self._waiting_to_send = 0
        self._dropped: asyncio.Future | None = None  # done when the connection drops next

    @property
    def unreachable(self) -> bool:
        # requests go out in order, so while one waits for a connection every later one does
        return self._waiting_to_send > 0

    async def _send_wait(self, rid: int, payload: bytes, deadline: float, method: str,
                         send_if: Callable[[], bool] | None = None) -> None:
        dial_deadline = self._loop.time() + self.dial_timeout
        if self._dropped is None or self._dropped.done():
            self._dropped = self._loop.create_future()
        dropped = self._dropped
        self._waiting_to_send += 1
        send = self._loop.create_task(super()._send_wait(rid, payload, min(deadline, dial_deadline), method, send_if))
        try:
            await asyncio.wait((send, dropped), return_when=asyncio.FIRST_COMPLETED)
            if not send.done():
                # libzmq removes the connection before the loop hears of the drop, so a request
                # can start waiting for a replica that has just died: it goes elsewhere at once
                # instead of waiting out the dial timeout.
                send.cancel()
                await asyncio.gather(send, return_exceptions=True)
                fut = self._calls.get(rid)  # a later drop may have failed it meanwhile: this wins
                if fut is not None and fut.done() and not fut.cancelled():
                    fut.exception()
                raise Unavailable(f"connection to {self.endpoint} lost; {method!r} was not sent",
                                  {"method": method})
            send.result()
        finally:
            send.cancel()
            self._waiting_to_send -= 1

    def _on_monitor_event(self, frames: list[bytes]) -> None:
        super()._on_monitor_event(frames)
        if int.from_bytes(frames[0][:2], "little") == zmq.EVENT_DISCONNECTED:
            if self._dropped is not None and not self._dropped.done():
                self._dropped.set_result(None)
            self._on_lost(self.endpoint)


# ------------------------------------------------------------------------------------- client

class StoreClient:
    """An asyncio client of the store's replicas (see the module docstring)."""

    def __init__(self, endpoints: Iterable[str] | str, *, timeout: float = DEFAULT_TIMEOUT,
                 dial_timeout: float = DEFAULT_DIAL_TIMEOUT, resume_timeout: float = DEFAULT_RESUME_TIMEOUT,
                 max_frame: int = wire.DEFAULT_MAX_FRAME, context: zmq.Context | None = None,
                 credentials: tuple[str, str] | None = None):
        self.endpoints = wire.split_endpoints(endpoints, "store")
        self.credentials = credentials  # (identity, secret) for replicas that require them
        for ep in self.endpoints:
            wire.Client(ep)  # validates the address now rather than on first use (no socket yet)
        self.timeout = timeout
        self.dial_timeout = dial_timeout
        self.resume_timeout = resume_timeout
        self.max_frame = max_frame
        self._context = context
        self._clients: dict[str, _ReplicaClient] = {}
        self._leader: str | None = None
        self._discovery: asyncio.Task | None = None
        self._watches: weakref.WeakSet[Watch] = weakref.WeakSet()
        self._rr = itertools.count()
        self._suspect: dict[str, float] = {}  # endpoint -> loop time until which it goes last
        self._closed = False

    async def __aenter__(self) -> StoreClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def leader(self) -> str | None:
        """The endpoint currently believed to be the leader's (None: not known)."""
        return self._leader

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for watch in list(self._watches):
            await watch.aclose()
        if self._discovery is not None and not self._discovery.done():
            self._discovery.cancel()
            await asyncio.gather(self._discovery, return_exceptions=True)
        for client in self._clients.values():
            await client.close()

    # --- plumbing ---------------------------------------------------------------------------

    def _client(self, endpoint: str) -> _ReplicaClient:
        if self._closed:
            raise RuntimeError("this StoreClient is closed")
        client = self._clients.get(endpoint)
        if client is None:
            client = self._clients[endpoint] = _ReplicaClient(
                endpoint, timeout=self.timeout, dial_timeout=self.dial_timeout, on_lost=self._mark_failed,
                max_frame=self.max_frame, context=self._context, credentials=self.credentials)
        return client

    def _learn(self, endpoint: str) -> None:
        if endpoint not in self.endpoints:
            self.endpoints.append(endpoint)  # a member the list did not name (e.g. added later)

    def _forget_leader(self, endpoint: str) -> None:
        if self._leader == endpoint:
            self._leader = None

    def _mark_failed(self, endpoint: str) -> None:
        """`endpoint` did not answer: forget it as leader, and try it last for a while."""
        self._forget_leader(endpoint)
        self._suspect[endpoint] = asyncio.get_running_loop().time() + SUSPECT_FOR

    def _failed_lately(self, endpoint: str) -> bool:
        return self._suspect.get(endpoint, 0.0) > asyncio.get_running_loop().time()

    def _order(self, leader_first: bool = True) -> list[str]:
        """Every endpoint once, round-robin; the leader first if asked and known; endpoints that
        failed in the last SUSPECT_FOR seconds last."""
        eps = list(self.endpoints)
        start = next(self._rr) % len(eps)
        eps = eps[start:] + eps[:start]
        head = self._leader if leader_first else None
        if head is not None:
            if head in eps:
                eps.remove(head)
            eps.insert(0, head)
        now = asyncio.get_running_loop().time()
        for ep, until in list(self._suspect.items()):
            if until <= now:
                del self._suspect[ep]
        return sorted(eps, key=lambda ep: ep in self._suspect)  # stable: keeps the order above

    def _deadline(self, timeout: float | None) -> tuple[asyncio.AbstractEventLoop, float, float]:
        loop = asyncio.get_running_loop()
        timeout = self.timeout if timeout is None else timeout
        return loop, timeout, loop.time() + timeout

    # --- leader discovery -------------------------------------------------------------------

    async def _leader_endpoint(self, deadline: float) -> str:
        loop = asyncio.get_running_loop()
        while True:
            if self._leader is not None:
                return self._leader
            if self._discovery is None or self._discovery.done():
                self._discovery = loop.create_task(self._discover(loop.time() + self.timeout))
                self._discovery.add_done_callback(_consume)
            task = self._discovery
            remaining = deadline - loop.time()
            if remaining > 0:
                await asyncio.wait((task,), timeout=remaining)  # shared: one caller never cancels it
            if task.done() and not task.cancelled() and isinstance(task.exception(), wire.Unauthorized):
                raise fresh(task.exception())  # asking again will not change the replicas' minds
            if loop.time() >= deadline and self._leader is None:
                if task.done() and not task.cancelled() and task.exception() is not None:
                    raise fresh(task.exception())
                raise Unavailable(f"no leader found among {', '.join(self.endpoints)}",
                                  {"endpoints": list(self.endpoints)})

    async def _discover(self, deadline: float) -> str:
        """Ask every endpoint for its status, round after round, until one says it leads.

        A round ends at the first replica that says it leads, or once every replica that can
        be reached has answered: calls still waiting for a connection when all the others are
        done do not hold it (a dead replica would hold it for the whole dial timeout), nor do
        calls still unanswered STRAGGLER_GRACE after the last answer (a call sent just as its
        replica died may get no answer and no disconnect either). A hint
        ("the leader is X") is believed only for an X that was not asked in the round, i.e. a
        member the endpoint list does not name: an X that was asked said it does not lead, or
        could not be reached (after a kill -9 the survivors name the dead leader until they
        elect another). Rounds follow each other closely, as an election is short."""
        loop = asyncio.get_running_loop()
        backoff = _Backoff(0.01, cap=0.05)
        errors: dict[str, str] = {}
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                detail = "; ".join(f"{ep}: {msg}" for ep, msg in errors.items()) or "no replica knows a leader"
                raise Unavailable(f"no leader found among {', '.join(self.endpoints)} ({detail})",
                                  {"endpoints": list(self.endpoints)})
            per_call = min(remaining, max(self.dial_timeout, 0.05))
            asked = list(self.endpoints)
            calls = {loop.create_task(self._client(ep).call("status", {}, timeout=per_call)): ep for ep in asked}
            hints: list[tuple[int, str]] = []
            refused: list[wire.Unauthorized] = []
            try:
                pending = set(calls)
                answered_at = None
                while pending:
                    grace = None if answered_at is None else max(0.0, answered_at + STRAGGLER_GRACE - loop.time())
                    done, pending = await asyncio.wait(pending, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
                    if not done:
                        for task in pending:
                            errors[calls[task]] = f"no answer {STRAGGLER_GRACE:g}s after the others"
                        break
                    answered_at = loop.time()
                    for task in done:
                        ep = calls[task]
                        exc = task.exception()
                        if exc is not None:
                            if not isinstance(exc, Exception):
                                raise exc
                            errors[ep] = str(exc)
                            self._mark_failed(ep)
                            if isinstance(exc, wire.Unauthorized):
                                refused.append(exc)
                            continue
                        res = task.result()
                        errors.pop(ep, None)
                        if not isinstance(res, dict):
                            continue
                        if res.get("role") == "leader":
                            self._leader = ep
                            return ep
                        hint = res.get("leader_endpoint")
                        if hint and hint not in asked:
                            hints.append((res.get("term") or 0, hint))
                    if all(self._clients[calls[task]].unreachable for task in pending):
                        for task in pending:
                            errors[calls[task]] = "not connected"
                        break
            finally:
                for task in calls:
                    task.cancel()
                await asyncio.gather(*calls, return_exceptions=True)
            if len(refused) == len(asked):
                raise fresh(refused[0])  # every replica refused our credentials: no round will do better
            if hints:
                ep = max(hints)[1]  # the newest term's word
                self._learn(ep)
                self._leader = ep
                return ep
            await backoff.sleep(loop, deadline)

    # --- writes -----------------------------------------------------------------------------

    async def _write(self, method: str, params: dict, *, timeout: float | None = None,
                     idempotent: bool = False):
        loop, timeout, deadline = self._deadline(timeout)
        backoff = _Backoff()
        last: WireError | None = None
        redirects = 0
        while True:
            if loop.time() >= deadline:
                why = f" (last: {last})" if last is not None else ""
                raise Unavailable(f"{method!r} was not executed: no leader took it within {timeout:g}s{why}",
                                  {"method": method, "timeout": timeout})
            try:
                ep = await self._leader_endpoint(deadline)
            except Unavailable as err:
                if last is None:
                    raise
                raise Unavailable(f"{err.message} (last: {last})", dict(err.details)) from None
            try:
                return await self._client(ep).call(method, params, timeout=max(0.001, deadline - loop.time()))
            except WireError as err:
                if _is_not_leader(err):
                    last = err
                    hint = err.details.get("endpoint") if isinstance(err.details, dict) else None
                    self._forget_leader(ep)
                    if hint and hint != ep and not self._failed_lately(hint):
                        self._learn(hint)
                        self._leader = hint
                        redirects += 1
                        if redirects > 2:  # stale hints bouncing between replicas: slow down
                            await backoff.sleep(loop, deadline)
                    else:
                        await backoff.sleep(loop, deadline)  # an election may be under way
                    continue
                if isinstance(err, Unavailable):
                    last = err  # not executed (not sent, or refused): try again shortly
                    self._mark_failed(ep)
                    await backoff.sleep(loop, deadline)
                    continue
                if isinstance(err, (wire.OutcomeUnknown, Cancelled)):
                    self._mark_failed(ep)  # it may have died: find the leader afresh next time
                    if idempotent:
                        last = err
                        continue
                    raise OutcomeUnknown(f"{method!r} sent to {ep}: {err.message or err.code}",
                                         {**err.details, "method": method, "endpoint": ep}) from err
                raise _translate(err) from None

    # --- reads ------------------------------------------------------------------------------

    async def _read(self, method: str, params: dict, *, timeout: float | None = None):
        loop, timeout, deadline = self._deadline(timeout)
        order = self._order()
        pending: dict[asyncio.Task, str] = {}
        backoff = _Backoff()
        last: BaseException | None = None
        launched = 0
        hedge_at = loop.time()
        try:
            while True:
                now = loop.time()
                if now >= deadline:
                    break
                busy = set(pending.values())
                if now >= hedge_at and len(busy) < len(order):
                    ep = order[launched % len(order)]
                    if ep in busy:
                        ep = next(e for e in order if e not in busy)
                    task = loop.create_task(self._client(ep).call(method, params, timeout=deadline - now))
                    pending[task] = ep
                    launched += 1
                    hedge_at = now + timeout * 2 ** min(launched - 1, _HEDGES - 1) / (2 ** _HEDGES - 1)
                wake = hedge_at if len(pending) < len(order) else deadline
                done, _ = await asyncio.wait(pending, timeout=max(0.0, min(wake, deadline) - loop.time()),
                                             return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    ep = pending.pop(task)
                    exc = task.exception()
                    if exc is None:
                        return task.result()
                    if not _retryable_read(exc):
                        raise _translate(exc) if isinstance(exc, WireError) else exc
                    last = exc
                    if _is_not_leader(exc):
                        self._forget_leader(ep)
                    else:
                        self._mark_failed(ep)
                if done and not pending:
                    await backoff.sleep(loop, deadline)
                    hedge_at = loop.time()  # every attempt failed: the next replica, now
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        why = f" (last: {last})" if last is not None else ""
        raise Unavailable(f"no replica answered {method!r} within {timeout:g}s{why}",
                          {"method": method, "timeout": timeout, "endpoints": list(self.endpoints)})

    # --- key-value API ----------------------------------------------------------------------

    async def put(self, key: str | bytes, value: str | bytes, *, lease: int = 0, prev_kv: bool = False,
                  timeout: float | None = None) -> dict:
        params = {"key": _b(key), "value": _b(value, "value"), "lease": lease, "prev_kv": prev_kv}
        return await self._write("put", params, timeout=timeout)

    async def range(self, key: str | bytes, range_end: str | bytes | None = None, *, prefix: bool = False,
                    revision: int = 0, limit: int = 0, count_only: bool = False, keys_only: bool = False,
                    serializable: bool = False, timeout: float | None = None) -> dict:
        key = _b(key)
        params = {"key": key, "range_end": _range_end(key, range_end, prefix), "revision": revision,
                  "limit": limit, "count_only": count_only, "keys_only": keys_only, "serializable": serializable}
        return await self._read("range", params, timeout=timeout)

    async def get(self, key: str | bytes, *, revision: int = 0, serializable: bool = False,
                  timeout: float | None = None) -> dict | None:
        """The key's kv dict at `revision` (0: now), or None if it does not exist."""
        resp = await self.range(key, revision=revision, serializable=serializable, timeout=timeout)
        kvs = resp.get("kvs") or []
        return kvs[0] if kvs else None

    async def delete(self, key: str | bytes, *, prefix: bool = False, range_end: str | bytes | None = None,
                     prev_kv: bool = False, timeout: float | None = None) -> dict:
        key = _b(key)
        params = {"key": key, "range_end": _range_end(key, range_end, prefix), "prev_kv": prev_kv}
        return await self._write("delete_range", params, timeout=timeout)

    async def txn(self, compare: Iterable[dict] = (), success: Iterable[dict] = (), failure: Iterable[dict] = (),
                  *, timeout: float | None = None) -> dict:
        """etcd's Txn: build the parts with store.mvcc's compare, put_op, range_op, delete_op."""
        compare, success, failure = list(compare), list(success), list(failure)
        read_only = True  # a plain loop, not all(<generator>): this runs on every write
        for op in success + failure:
            if op.get("op") != "range":
                read_only = False
                break
        return await self._write("txn", {"compare": compare, "success": success, "failure": failure},
                                 timeout=timeout, idempotent=read_only)

    async def compact(self, revision: int, *, timeout: float | None = None) -> dict:
        return await self._write("compact", {"revision": revision}, timeout=timeout)

    def watch(self, key: str | bytes, *, prefix: bool = False, range_end: str | bytes | None = None,
              start_revision: int = 0, prev_kv: bool = False, resume_timeout: float | None = None) -> Watch:
        """Events on the key (or range) from `start_revision` (0: from now on); see `Watch`."""
        key = _b(key)
        watch = Watch(self, key, _range_end(key, range_end, prefix), start_revision, prev_kv,
                      self.resume_timeout if resume_timeout is None else resume_timeout)
        self._watches.add(watch)
        return watch

    # --- leases -----------------------------------------------------------------------------

    async def lease_grant(self, ttl: int, *, id: int = 0, timeout: float | None = None) -> dict:
        return await self._write("lease_grant", {"ttl": ttl, "id": id}, timeout=timeout)

    async def lease_revoke(self, id: int, *, timeout: float | None = None) -> dict:
        return await self._write("lease_revoke", {"id": id}, timeout=timeout)

    async def lease_keepalive(self, id: int, *, timeout: float | None = None) -> dict:
        # refreshing a TTL twice is harmless: retried even when the outcome is unknown
        return await self._write("lease_keepalive", {"id": id}, timeout=timeout, idempotent=True)

    async def lease_leases(self, *, timeout: float | None = None):
        return await self._read("lease_leases", {}, timeout=timeout)

    # --- cluster ----------------------------------------------------------------------------

    async def status(self, endpoint: str | None = None, *, timeout: float | None = None) -> dict:
        """One replica's status: `endpoint`'s, or any replica's (the leader's when known)."""
        if endpoint is None:
            return await self._read("status", {}, timeout=timeout)
        try:
            return await self._client(endpoint).call("status", {}, timeout=timeout, idempotent=True)
        except WireError as err:
            raise _translate(err) from None

    async def status_all(self, *, timeout: float | None = None) -> list[dict]:
        """Every endpoint's status, in order; an unreachable one as {"endpoint", "error"}."""
        eps = list(self.endpoints)
        results = await asyncio.gather(*(self.status(ep, timeout=timeout) for ep in eps), return_exceptions=True)
        out = []
        for ep, res in zip(eps, results):
            if isinstance(res, WireError):
                out.append({"endpoint": ep, "error": str(res)})
            elif isinstance(res, BaseException):
                raise res
            else:
                if res.get("role") == "leader":
                    self._leader = ep
                out.append({**res, "endpoint": res.get("endpoint") or ep})
        return out

    async def defragment(self, endpoint: str, *, timeout: float | None = None) -> dict:
        """etcd's Maintenance.Defragment on the replica at `endpoint` (each member has its own
        files, so each is asked on its own): {name, db_size_before, db_size_after}. Retried
        like a read: a second defragment only rewrites what the first left."""
        try:
            return await self._client(endpoint).call("defragment", {}, timeout=timeout, idempotent=True)
        except WireError as err:
            raise _translate(err) from None

    async def member_list(self, *, timeout: float | None = None) -> list[dict]:
        return await self._read("member_list", {}, timeout=timeout)

    async def member_add(self, name: str, endpoint: str, *, timeout: float | None = None):
        return await self._write("member_add", {"name": name, "endpoint": endpoint}, timeout=timeout)

    async def member_remove(self, name: str, *, timeout: float | None = None):
        return await self._write("member_remove", {"name": name}, timeout=timeout)

    async def move_leader(self, to: str, *, timeout: float | None = None):
        try:
            return await self._write("move_leader", {"to": to}, timeout=timeout)
        finally:
            self._leader = None  # whatever happened, the leader may have changed


# -------------------------------------------------------------------------------------- watch

class Watch:
    """A resuming watch: an async iterator of `Event`s and an async context manager.

    ``async with client.watch(k) as w`` returns once a replica has created the watch (a put
    made after that is seen). `created_revision` is the store revision when it was first
    created; `next_revision` the revision it would resume from."""

    def __init__(self, client: StoreClient, key: bytes, range_end: bytes | None, start_revision: int,
                 prev_kv: bool, resume_timeout: float):
        if type(start_revision) is not int or start_revision < 0:
            raise ValueError(f"start_revision must be an int >= 0, not {start_revision!r}")
        self._client = client
        self.key, self.range_end, self.prev_kv = key, range_end, prev_kv
        self.start_revision = start_revision
        self.resume_timeout = resume_timeout
        self.next_revision = start_revision  # 0 until created "from now"
        self.created_revision: int | None = None
        self.endpoint: str | None = None  # the replica serving it now
        self.resumes = 0  # how many times it was reopened after a failure
        self.last_error: str | None = None  # why it last had to be reopened
        self._stream: wire.Stream | None = None
        self._events: collections.deque[Event] = collections.deque()
        self._failed_endpoint: str | None = None  # the replica that just failed, tried last on reopening
        self._loss_backoff = _Backoff()  # a replica that keeps ending the stream is not hammered
        self._closed = False

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __aenter__(self) -> Watch:
        if self._stream is None and not self._closed:
            await self._open()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self._events.clear()
        await self._drop_stream()

    async def _drop_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            try:
                await stream.aclose()
            except Exception:
                pass

    async def __anext__(self) -> Event:
        while True:
            if self._events:
                return self._events.popleft()
            if self._closed:
                raise StopAsyncIteration
            if self._stream is None:
                await self._open()
                continue
            try:
                item = await self._stream.__anext__()
            except StopAsyncIteration:
                await self._lost("the stream ended")
                continue
            except WireError as err:
                if _retryable_read(err):
                    await self._lost(str(err))
                    continue
                await self.aclose()
                raise _translate(err) from None
            self._take(item)

    def _take(self, item) -> None:
        if not isinstance(item, dict):
            return
        if item.get("created"):
            if self.next_revision == 0:  # "from now": the events after the creation revision
                self.next_revision = item.get("header", {}).get("revision", 0) + 1
            if self.created_revision is None:
                self.created_revision = item.get("header", {}).get("revision")
            return
        for obj in item.get("events") or ():
            event = Event.from_wire(obj)
            if event.revision < self.next_revision:
                continue  # sent again by the replica we resumed on
            self._events.append(event)
            self._loss_backoff = _Backoff()
            # events received are delivered even if the stream fails now: resume after them
            self.next_revision = event.revision + 1

    async def _lost(self, why: str) -> None:
        self._failed_endpoint = self.endpoint
        if self._failed_endpoint is not None:
            self._client._mark_failed(self._failed_endpoint)
        await self._drop_stream()
        self.resumes += 1
        self.last_error = why
        loop = asyncio.get_running_loop()
        await self._loss_backoff.sleep(loop, loop.time() + 1.0)

    async def _open(self) -> None:
        """(Re)open the watch on some replica: the one after the failed one first."""
        client = self._client
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (self.resume_timeout if self.created_revision is not None else client.timeout)
        failed = self._failed_endpoint
        order = client._order(leader_first=False)  # watches need no leader: spread them out
        if failed in order and len(order) > 1:
            i = order.index(failed)
            order = order[i + 1:] + order[:i]  # the failed one is tried last
            order.append(failed)
        backoff = _Backoff()
        errors: dict[str, str] = {}
        for attempt in itertools.count():
            if self._closed:
                return
            if loop.time() >= deadline:
                self._closed = True
                detail = "; ".join(f"{ep}: {msg}" for ep, msg in errors.items())
                raise Unavailable(f"no replica took the watch on {self.key!r} from revision "
                                  f"{self.next_revision}" + (f" ({detail})" if detail else ""),
                                  {"next_revision": self.next_revision})
            ep = order[attempt % len(order)]
            params = {"key": self.key, "range_end": self.range_end, "start_revision": self.next_revision,
                      "prev_kv": self.prev_kv}
            # one replica that accepts but never answers costs at most the client's timeout
            budget = max(0.001, min(deadline - loop.time(), client.timeout))
            stream = client._client(ep).stream("watch", params, timeout=budget)
            try:
                first = await asyncio.wait_for(stream.__anext__(), budget)
            except (WireError, StopAsyncIteration, asyncio.TimeoutError) as err:
                await _aclose_quietly(stream)
                if isinstance(err, WireError) and not _retryable_read(err):
                    self._closed = True
                    raise _translate(err) from None
                errors[ep] = str(err) or type(err).__name__
                client._mark_failed(ep)
                if attempt % len(order) == len(order) - 1:
                    await backoff.sleep(loop, deadline)
                continue
            except BaseException:
                await _aclose_quietly(stream)
                raise
            if self._closed:  # closed while opening
                await _aclose_quietly(stream)
                return
            self._stream, self.endpoint = stream, ep
            self._take(first)
            return


async def _aclose_quietly(stream: wire.Stream) -> None:
    try:
        await stream.aclose()
    except Exception:
        pass


# --------------------------------------------------------------------------------------- sync

class SyncWatch(BlockingIterator):
    """A blocking `Watch`: iterate it; use it as a context manager so it gets closed."""

    def __init__(self, runner: BlockingLoop, watch: Watch):
        super().__init__(runner, watch, watch.__aenter__)

    def __getattr__(self, name):  # created_revision, next_revision, endpoint, resumes ...
        return getattr(self._stream, name)


def _blocking(name: str):
    method = getattr(StoreClient, name)

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        return self._run(getattr(self._client, name)(*args, **kwargs))
    return run


class SyncStoreClient:
    """`StoreClient` for blocking code: owns a private event loop and ZeroMQ context. The same
    methods, blocking; `watch` returns a `SyncWatch`. Not for use inside a running loop."""

    def __init__(self, endpoints: Iterable[str] | str, *, timeout: float = DEFAULT_TIMEOUT,
                 dial_timeout: float = DEFAULT_DIAL_TIMEOUT, resume_timeout: float = DEFAULT_RESUME_TIMEOUT,
                 max_frame: int = wire.DEFAULT_MAX_FRAME, credentials: tuple[str, str] | None = None):
        self._runner = BlockingLoop("SyncStoreClient")
        try:
            self._client = StoreClient(endpoints, timeout=timeout, dial_timeout=dial_timeout,
                                       resume_timeout=resume_timeout, max_frame=max_frame,
                                       context=self._runner.context, credentials=credentials)
        except BaseException:
            self._runner.close(_nothing)
            raise

    @property
    def endpoints(self) -> list[str]:
        return self._client.endpoints

    @property
    def leader(self) -> str | None:
        return self._client.leader

    def __enter__(self) -> SyncStoreClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _run(self, coro):
        return self._runner.run(coro)

    put = _blocking("put")
    range = _blocking("range")
    get = _blocking("get")
    delete = _blocking("delete")
    txn = _blocking("txn")
    compact = _blocking("compact")
    lease_grant = _blocking("lease_grant")
    lease_revoke = _blocking("lease_revoke")
    lease_keepalive = _blocking("lease_keepalive")
    lease_leases = _blocking("lease_leases")
    status = _blocking("status")
    status_all = _blocking("status_all")
    defragment = _blocking("defragment")
    member_list = _blocking("member_list")
    member_add = _blocking("member_add")
    member_remove = _blocking("member_remove")
    move_leader = _blocking("move_leader")

    def watch(self, key: str | bytes, **kwargs) -> SyncWatch:
        return SyncWatch(self._runner, self._client.watch(key, **kwargs))

    def close(self) -> None:
        self._runner.close(self._client.close)


async def _nothing() -> None:
    """Nothing to close: the async client was never made."""
