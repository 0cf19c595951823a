"""kubemu's API client: typed helpers over the apiserver's wire methods (client-go's clientset).

    async with ApiClient("ipc:///run/kubemu/api.sock") as api:
        pod = await api.create("pods", manifest, namespace="default")
        pods = await api.list_all("pods", namespace="default", label_selector="app=web")
        async with api.watch("pods", namespace="default", resource_version=rv) as w:
            async for type_, obj in w:
                ...

    with SyncApiClient(endpoint) as api:        # blocking twin, for the CLI
        api.get("pods", "web", namespace="default")

Errors are the wire's typed errors (`kubemu.wire.NotFound`, `Conflict`, `Invalid`, `Gone`,
`Unavailable`, `OutcomeUnknown`, ...), refined by `details.reason`:

    AlreadyExists(Conflict)   create of a name that exists   (client-go's IsAlreadyExists)
    Expired(Gone)             the 410 "too old resource version" (IsResourceExpired)

and tested with `is_not_found`, `is_conflict` (reason Conflict only, as client-go's IsConflict:
an AlreadyExists is not a conflict), `is_already_exists`, `is_expired`.

Retries: reads (get, list, get_scale, healthz, and opening a watch) are idempotent and retried
within the one timeout by the wire; writes are sent once, so a timeout or a lost connection
after sending surfaces as `OutcomeUnknown` (the write may or may not have happened).
`retry_on_conflict(fn)` re-runs a read-modify-write on a Conflict (client-go's RetryOnConflict).

Several apiservers (an HA control plane): give a list, or a comma-separated string, in
preference order. The wire's `FailoverClient` then sends each request to a live apiserver (a
dead one is skipped at once), retries reads on another, still sends writes once, and a watch
whose apiserver goes away ends, to be started again from its last resourceVersion (informers do).
"""
from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kubemu import wire
from kubemu._wire_sync import BlockingIterator, BlockingLoop
from kubemu.wire import (BadRequest, Cancelled, Conflict, Gone, Internal, Invalid, NotFound, OutcomeUnknown,
                         TooLarge, TooManyRequests, Unavailable, WireError)

__all__ = [
    "ApiClient", "SyncApiClient", "Watch", "SyncWatch",
    "WireError", "NotFound", "Conflict", "AlreadyExists", "Invalid", "Gone", "Expired", "Unavailable",
    "OutcomeUnknown", "TooLarge", "TooManyRequests", "BadRequest", "Internal", "Cancelled",
    "is_not_found", "is_conflict", "is_already_exists", "is_expired", "is_gone", "is_too_large_resource_version",
    "retry_on_conflict", "retry_on_conflict_sync", "DEFAULT_RETRY_STEPS",
]

T = TypeVar("T")


# -- errors ------------------------------------------------------------------------------------

class AlreadyExists(Conflict):
    """A create of an object whose name is taken (Conflict with details.reason AlreadyExists)."""
    # no `code` of its own: it crosses the wire as the Conflict it is


class Expired(Gone):
    """The 410: the resourceVersion (or continue token) is older than the store's history
    (Gone with details.reason Expired). Informers answer it with a fresh LIST."""


def _refine(err: WireError) -> WireError:
    """The same error as its most specific class (AlreadyExists / Expired), else `err` itself."""
    reason = err.details.get("reason") if isinstance(err.details, dict) else None
    cls = None
    if isinstance(err, Conflict) and not isinstance(err, AlreadyExists) and reason == "AlreadyExists":
        cls = AlreadyExists
    elif isinstance(err, Gone) and not isinstance(err, Expired) and reason == "Expired":
        cls = Expired
    if cls is None:
        return err
    new = cls(err.message, err.details)
    new.request_id = err.request_id
    return new


def is_not_found(e: BaseException) -> bool:
    return isinstance(e, NotFound)


def is_already_exists(e: BaseException) -> bool:
    return isinstance(e, AlreadyExists) or (
        isinstance(e, Conflict) and e.details.get("reason") == "AlreadyExists")


def is_conflict(e: BaseException) -> bool:
    """A write lost an optimistic-concurrency race (reason Conflict); not an AlreadyExists."""
    return isinstance(e, Conflict) and not is_already_exists(e)


def is_expired(e: BaseException) -> bool:
    return isinstance(e, Expired) or (isinstance(e, Gone) and e.details.get("reason") == "Expired")


def is_gone(e: BaseException) -> bool:
    return isinstance(e, Gone)


def is_too_large_resource_version(e: BaseException) -> bool:
    """The 504 "Too large resource version": the apiserver's store has not reached the
    resourceVersion asked for (client-go's IsTooLargeResourceVersionError): list again."""
    if not isinstance(e, WireError) or e.code != "Timeout" or not isinstance(e.details, dict):
        return False
    causes = e.details.get("causes")
    return isinstance(causes, list) and "ResourceVersionTooLarge" in causes


# -- retry_on_conflict -------------------------------------------------------------------------

# client-go's retry.DefaultRetry: 5 steps, 10 ms, factor 1.0, jitter 0.1
DEFAULT_RETRY_STEPS = 5
_RETRY_DELAY = 0.01
_RETRY_JITTER = 0.1


def _retry_delay() -> float:
    return _RETRY_DELAY * (1 + _RETRY_JITTER * random.random())


async def retry_on_conflict(fn: Callable[[], Awaitable[T]], attempts: int = DEFAULT_RETRY_STEPS) -> T:
    """Run ``await fn()``; on a Conflict (reason Conflict) wait a little and run it again, at most
    `attempts` times in all; the last Conflict is raised. `fn` must re-read what it modifies
    (client-go's retry.RetryOnConflict). Other errors are raised at once."""
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    for attempt in range(attempts):
        try:
            return await fn()
        except Conflict as err:
            if not is_conflict(err) or attempt == attempts - 1:
                raise
        await asyncio.sleep(_retry_delay())
    raise AssertionError("unreachable")


def retry_on_conflict_sync(fn: Callable[[], T], attempts: int = DEFAULT_RETRY_STEPS) -> T:
    """`retry_on_conflict` for blocking code."""
    import time
    if attempts < 1:
        raise ValueError("attempts must be >= 1")
    for attempt in range(attempts):
        try:
            return fn()
        except Conflict as err:
            if not is_conflict(err) or attempt == attempts - 1:
                raise
        time.sleep(_retry_delay())
    raise AssertionError("unreachable")


# -- the async client --------------------------------------------------------------------------

def _ns(params: dict, namespace: str | None) -> dict:
    if namespace:
        params["namespace"] = namespace
    return params


def _rv(obj: Any) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


class Watch:
    """An open (or lazily opened) watch: ``async for type_, obj in watch``; close it with
    ``aclose()`` or use ``async with``. Errors from the server end the iteration by raising
    (an `Expired` when the resourceVersion is too old); a normal end stops it."""

    def __init__(self, api: ApiClient, params: dict, timeout: float):
        self._api = api
        self._params = params
        self._timeout = timeout
        self._stream: wire.Stream | None = None
        self._closed = False

    async def open(self) -> Watch:
        """Open the stream (idempotent: retried within the timeout when the server cannot be
        reached or does not accept it in time)."""
        if self._stream is not None:
            return self
        if self._closed:
            raise RuntimeError("watch is closed")
        client = self._api.wire
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - loop.time()
            last = attempt >= wire.IDEMPOTENT_ATTEMPTS
            budget = remaining if last else min(
                remaining, self._timeout * 2 ** (attempt - 1) / (2 ** wire.IDEMPOTENT_ATTEMPTS - 1))
            stream = client.stream("watch", self._params, timeout=max(budget, 0.001))
            try:
                await stream._open()
            except (Unavailable, OutcomeUnknown) as err:
                await stream.aclose()
                if last or loop.time() >= deadline - 0.01:
                    raise _refine(err) from None
                await asyncio.sleep(min(0.05 * 2 ** attempt, max(0.0, deadline - loop.time())))
                continue
            except WireError as err:
                await stream.aclose()
                raise _refine(err) from None
            except BaseException:
                await stream.aclose()
                raise
            if self._closed:  # closed while opening
                await stream.aclose()
                raise RuntimeError("watch is closed")
            self._stream = stream
            return self

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> tuple[str, dict]:
        if self._stream is None:
            if self._closed:
                raise StopAsyncIteration
            await self.open()
        try:
            item = await self._stream.__anext__()
        except WireError as err:
            raise _refine(err) from None
        return item["type"], item["object"]

    async def aclose(self) -> None:
        self._closed = True
        if self._stream is not None:
            await self._stream.aclose()

    async def __aenter__(self) -> Watch:
        return await self.open()

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


class ApiClient:
    """The asyncio API client; one wire `Client` (one DEALER socket) shared by all calls, or for
    several apiservers (a list, or a comma-separated string, in preference order) a wire
    `FailoverClient`: reads and watches go to any live apiserver, writes are still sent once.

    Who is asking is what `credentials` (identity, secret) authenticate, never a parameter: an
    apiserver that requires wire credentials takes the identity from the handshake."""

    def __init__(self, endpoint: str | list[str], *, timeout: float = 10,
                 credentials: tuple[str, str] | None = None, context=None,
                 wire_client: wire.Client | wire.FailoverClient | None = None, user_agent: str | None = None,
                 write_guard: Callable[[], bool] | None = None):
        self.wire = wire_client if wire_client is not None else wire.client_for(
            endpoint, timeout=timeout, context=context, credentials=credentials, user_agent=user_agent)
        self.endpoint = ",".join(wire.split_endpoints(endpoint))
        self.timeout = timeout
        # asked by the wire just before each send of a write (a write may wait for a connection):
        # a leader-elected component's elector says whether it may still act (False: the write is
        # not sent, Unavailable "not the leader")
        self.write_guard = write_guard

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self.wire.close()

    async def _read(self, method: str, params: dict, timeout: float | None = None):
        try:
            return await self.wire.call(method, params, timeout=timeout, idempotent=True)
        except WireError as err:
            raise _refine(err) from None

    async def _write(self, method: str, params: dict, timeout: float | None = None):
        try:
            return await self.wire.call(method, params, timeout=timeout, idempotent=False, send_if=self.write_guard)
        except WireError as err:
            raise _refine(err) from None

    # reads

    async def healthz(self, *, timeout: float | None = None) -> dict:
        return await self._read("healthz", {}, timeout)

    async def get(self, resource: str, name: str, namespace: str | None = None, *,
                  timeout: float | None = None) -> dict:
        return await self._read("get", _ns({"resource": resource, "name": name}, namespace), timeout)

    async def list(self, resource: str, namespace: str | None = None, label_selector: str = "",
                   field_selector: str = "", limit: int = 0, continue_: str = "", *,
                   timeout: float | None = None) -> dict:
        """One page: ``{apiVersion, kind, metadata: {resourceVersion, continue?}, items}``."""
        params = _ns({"resource": resource}, namespace)
        if label_selector:
            params["label_selector"] = label_selector
        if field_selector:
            params["field_selector"] = field_selector
        if limit:
            params["limit"] = limit
        if continue_:
            params["continue"] = continue_
        return await self._read("list", params, timeout)

    async def list_all(self, resource: str, namespace: str | None = None, label_selector: str = "",
                       field_selector: str = "", limit: int = 500, *, timeout: float | None = None) -> dict:
        """Every page of a list (following `continue`), as one list whose resourceVersion is
        the snapshot's. An expired continue token raises `Expired` (start again)."""
        token = ""
        items: list = []
        while True:
            page = await self.list(resource, namespace, label_selector, field_selector, limit, token,
                                   timeout=timeout)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue") or ""
            if not token:
                out = dict(page)
                out["items"] = items
                out["metadata"] = {k: v for k, v in meta.items() if k != "continue"}
                return out

    async def log(self, name: str, namespace: str | None = None, container: str | None = None, *,
                  previous: bool = False, tail_lines: int | None = None, timeout: float | None = None) -> str:
        """A container's log (the pod log subresource)."""
        params = _ns({"name": name, "previous": previous}, namespace)
        if container:
            params["container"] = container
        if tail_lines is not None:
            params["tail_lines"] = tail_lines
        return (await self._read("log", params, timeout))["log"]

    async def get_scale(self, resource: str, name: str, namespace: str | None = None, *,
                        timeout: float | None = None) -> dict:
        return await self._read("get_scale", _ns({"resource": resource, "name": name}, namespace), timeout)

    # writes

    async def create(self, resource: str, obj: dict, namespace: str | None = None, *,
                     timeout: float | None = None) -> dict:
        return await self._write("create", _ns({"resource": resource, "object": obj}, namespace), timeout)

    async def update(self, resource: str, obj: dict, namespace: str | None = None, *,
                     timeout: float | None = None) -> dict:
        return await self._write("update", _ns({"resource": resource, "object": obj}, namespace), timeout)

    async def update_approval(self, obj: dict, *, timeout: float | None = None) -> dict:
        """A CertificateSigningRequest's approval subresource: its Approved/Denied conditions."""
        return await self._write("update_approval", {"resource": "certificatesigningrequests",
                                                     "object": obj}, timeout)

    async def review(self, resource: str, obj: dict, *, timeout: float | None = None) -> dict:
        """An authorization review (a SubjectAccessReview, ...) answered; nothing is stored."""
        return await self._read("review", {"resource": resource, "object": obj}, timeout)

    async def finalize(self, resource: str, obj: dict, *, timeout: float | None = None) -> dict:
        """A Namespace's finalize subresource: the update that may change its spec.finalizers."""
        return await self._write("finalize", {"resource": resource, "object": obj}, timeout)

    async def update_status(self, resource: str, obj: dict, namespace: str | None = None, *,
                            timeout: float | None = None) -> dict:
        return await self._write("update_status", _ns({"resource": resource, "object": obj}, namespace),
                                 timeout)

    async def patch(self, resource: str, name: str, patch: Any, namespace: str | None = None,
                    patch_type: str = "merge", subresource: str | None = None, *,
                    timeout: float | None = None) -> dict:
        params = _ns({"resource": resource, "name": name, "patch": patch, "patch_type": patch_type},
                     namespace)
        if subresource:
            params["subresource"] = subresource
        return await self._write("patch", params, timeout)

    async def delete(self, resource: str, name: str, namespace: str | None = None, *,
                     grace_period_seconds: int | None = None, propagation_policy: str | None = None,
                     preconditions: dict | None = None, timeout: float | None = None) -> dict:
        params = _ns({"resource": resource, "name": name}, namespace)
        if grace_period_seconds is not None:
            params["grace_period_seconds"] = grace_period_seconds
        if propagation_policy is not None:
            params["propagation_policy"] = propagation_policy
        if preconditions is not None:
            params["preconditions"] = preconditions
        return await self._write("delete", params, timeout)

    async def token_request(self, name: str, request: dict, namespace: str | None = None, *,
                            timeout: float | None = None) -> dict:
        """A TokenRequest for ServiceAccount `name` (serviceaccounts/<name>/token)."""
        return await self._write("token_request", _ns({"name": name, "object": request}, namespace),
                                 timeout)

    async def bind(self, name: str, node: str, namespace: str | None = None, *,
                   timeout: float | None = None) -> dict:
        return await self._write("bind", _ns({"name": name, "node": node}, namespace), timeout)

    async def evict(self, name: str, eviction: dict | None = None, namespace: str | None = None, *,
                    timeout: float | None = None) -> dict:
        """pods/<name>/eviction with a policy/v1 Eviction (its deleteOptions)."""
        return await self._write("evict", _ns({"name": name, "object": eviction or {}}, namespace), timeout)

    async def update_scale(self, resource: str, name: str, replicas: int, namespace: str | None = None,
                           resource_version: str | None = None, *, timeout: float | None = None) -> dict:
        params = _ns({"resource": resource, "name": name, "replicas": replicas}, namespace)
        if resource_version:
            params["resource_version"] = resource_version
        return await self._write("update_scale", params, timeout)

    # watch

    def watch(self, resource: str, namespace: str | None = None, resource_version: str = "",
              label_selector: str = "", field_selector: str = "", allow_bookmarks: bool = False, *,
              timeout: float | None = None) -> Watch:
        """A `Watch`: an async iterator of (type, object), type ADDED|MODIFIED|DELETED|BOOKMARK.
        resource_version "" or "0": the current state as ADDED first, then changes; otherwise
        every change after that version (or `Expired` if it is too old)."""
        params = _ns({"resource": resource}, namespace)
        if resource_version:
            params["resource_version"] = str(resource_version)
        if label_selector:
            params["label_selector"] = label_selector
        if field_selector:
            params["field_selector"] = field_selector
        if allow_bookmarks:
            params["allow_bookmarks"] = True
        return Watch(self, params, self.timeout if timeout is None else timeout)


# -- the blocking client -----------------------------------------------------------------------

class SyncWatch(BlockingIterator):
    """A blocking iterator of (type, object); close it (or use ``with``)."""

    def __init__(self, runner: BlockingLoop, watch: Watch):
        super().__init__(runner, watch, watch.open)


class SyncApiClient:
    """`ApiClient` for blocking code: the same methods, returning results instead of coroutines.
    Owns a private event loop; not for use inside a running loop."""

    def __init__(self, endpoint: str | list[str], *, timeout: float = 10,
                 credentials: tuple[str, str] | None = None):
        self._sync = wire.SyncClient(endpoint, timeout=timeout, credentials=credentials)
        self._api = ApiClient(endpoint, timeout=timeout, wire_client=self._sync._client)
        self.endpoint = self._api.endpoint
        self.timeout = timeout

    def _run(self, coro):
        return self._sync._run(coro)

    def __enter__(self) -> SyncApiClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._sync.close()

    def healthz(self, **kw) -> dict:
        return self._run(self._api.healthz(**kw))

    def get(self, *a, **kw) -> dict:
        return self._run(self._api.get(*a, **kw))

    def list(self, *a, **kw) -> dict:
        return self._run(self._api.list(*a, **kw))

    def list_all(self, *a, **kw) -> dict:
        return self._run(self._api.list_all(*a, **kw))

    def create(self, *a, **kw) -> dict:
        return self._run(self._api.create(*a, **kw))

    def update(self, *a, **kw) -> dict:
        return self._run(self._api.update(*a, **kw))

    def update_status(self, *a, **kw) -> dict:
        return self._run(self._api.update_status(*a, **kw))

    def update_approval(self, *a, **kw) -> dict:
        return self._run(self._api.update_approval(*a, **kw))

    def patch(self, *a, **kw) -> dict:
        return self._run(self._api.patch(*a, **kw))

    def delete(self, *a, **kw) -> dict:
        return self._run(self._api.delete(*a, **kw))

    def bind(self, *a, **kw) -> dict:
        return self._run(self._api.bind(*a, **kw))

    def evict(self, *a, **kw) -> dict:
        return self._run(self._api.evict(*a, **kw))

    def log(self, *a, **kw) -> str:
        return self._run(self._api.log(*a, **kw))

    def get_scale(self, *a, **kw) -> dict:
        return self._run(self._api.get_scale(*a, **kw))

    def update_scale(self, *a, **kw) -> dict:
        return self._run(self._api.update_scale(*a, **kw))

    def watch(self, *a, **kw) -> SyncWatch:
        return SyncWatch(self._sync._runner, self._api.watch(*a, **kw))
