"""The watch cache (the apiserver's Cacher): one store watch per resource, fanned out.

A `Cacher` starts lazily on the first list or watch of its resource: it lists the resource's prefix at
the store revision R and watches it from R+1 (with prev_kv), keeping every key's current state
(kube's watchCache store): encoded bytes and mod_revision, so 30,000 pods cost their stored size
and a list decodes objects of its own. Writes start from that state instead of a store
read (handlers' `_guaranteed`); it may be behind the store, which their compare-and-swap
catches; while the key's latest event is in the window, they start from its object, decoded
already (`decoded`), and the event of a write this apiserver made carries the object the write
answered with (`wrote`) instead of decoding the stored value: every object the cache holds is
shared read-only. Every event also goes into a window of the
last `WINDOW` events and to each registered watcher's bounded queue. A watch from resourceVersion
rv >= `floor` (every event after rv is still in the window) is served from the cache; an older
one is served from the store's own watch history (`store_events`), which fails with Gone
"Expired" when that history was compacted. A watcher whose queue fills up (too slow) is ended
with an error, like the apiserver's terminate-slow-watchers; its client re-watches from its
last resourceVersion. If the store watch itself fails, every watcher is ended (Unavailable) and
the next watch starts a fresh cacher.

A watch from a resourceVersion the cache has not reached yet (a list's resourceVersion is the
store's revision, usually past the resource's last event; or a client failing over from another
apiserver whose cache was ahead) is served by skipping the events up to it as they arrive, once
the store itself is known to have reached it: every event after it then comes, in order. One
the store has not reached (a client that saw a store which lost its tail, or a made-up number)
is answered at once with kube's 504 "Too large resource version" (cause
ResourceVersionTooLarge), and the client lists again. Kube-apiserver instead waits up to 3 s for
its cache to catch up, then answers the 504; here the store answers, so waiting would only
delay a watch that can be served now or refuse one that never could.
"""
from __future__ import annotations

import asyncio
import collections
import functools
import logging
from typing import AsyncIterator, Callable, NamedTuple

from kubemu.api.resources import UnknownResourceError, field_set, registry_prefix, resolve
from kubemu.wire import Gone, Unavailable
from store.client import Compacted, StoreClient
from store.mvcc import prefix_end

from .storage import ABSENT, Current, decode
from .strategy import too_large_resource_version

log = logging.getLogger("kubemu.apiserver.watchcache")

WINDOW = 1000        # events kept for resumes
LIST_PAGE = 500      # keys per range when a cacher lists its resource at start
QUEUE_LIMIT = 1000   # events a watcher may fall behind by before it is ended


class CacheEvent(NamedTuple):
    revision: int
    type: str            # "PUT" or "DELETE"
    key: str
    obj: dict | None     # the new state (None for DELETE)
    old: dict | None     # the state before (None if the key was absent)
    # obj's and old's selectable fields (field_set), when the cacher computed them: once per
    # object for every watcher's field selector (kube's watchCache keeps them with each object)
    fields: dict[str, str] | None = None
    old_fields: dict[str, str] | None = None


FieldsOf = Callable[[dict], dict[str, str]]


class Written(NamedTuple):
    """An object as this apiserver wrote it at `revision`: what decoding the stored value gives."""
    revision: int
    obj: dict


def to_cache_event(ev, last: dict[str, CacheEvent] | None = None,
                   fields_of: FieldsOf | None = None, written: dict[str, Written] | None = None) -> CacheEvent:
    """`ev` decoded, with its objects' fields if `fields_of`. `last`: events by key, the latest of
    each; the one before `ev` on its key already holds the state `ev` replaces, decoded (objects
    are shared read-only). `written`: objects this apiserver wrote, by key (`Cacher.wrote`); the
    one written at `ev`'s revision is `ev`'s object, not decoded again, and any older one of its
    key is dropped (its event has passed)."""
    kv, prev = ev.kv, ev.prev_kv
    key = kv["key"].decode() if isinstance(kv["key"], bytes) else kv["key"]
    revision = kv["mod_revision"]
    offered = written.get(key) if written else None
    if offered is not None and offered.revision <= revision:
        del written[key]
    before = last.get(key) if last else None
    old = old_fields = None
    if prev is not None and before is not None and before.obj is not None \
            and before.revision == prev["mod_revision"]:
        old, old_fields = before.obj, before.fields
    elif prev is not None:
        old = decode(prev["value"], prev["mod_revision"])
        old_fields = fields_of(old) if fields_of else None
    obj = None
    if ev.type == "PUT":
        obj = offered.obj if offered is not None and offered.revision == revision else decode(kv["value"], revision)
    fields = fields_of(obj) if fields_of and obj is not None else None
    return CacheEvent(revision, ev.type, key, obj, old, fields, old_fields)


def _fields_of(prefix: str) -> FieldsOf | None:
    """field_set of the resource whose registry prefix `prefix` is (None: not a resource's)."""
    try:
        r = resolve(prefix.split("/")[2])
    except (IndexError, UnknownResourceError):
        return None
    return functools.partial(field_set, r) if registry_prefix(r) == prefix else None


def expired(rv: int, oldest: int | None) -> Gone:
    return Gone(f"too old resource version: {rv} ({oldest if oldest is not None else rv + 1})",
                {"reason": "Expired"}, code="Gone")


class Watcher:
    def __init__(self, start: int):
        self.start = start
        self.queue: collections.deque[CacheEvent] = collections.deque()
        self.wake = asyncio.Event()
        self.error: Exception | None = None

    def offer(self, ev: CacheEvent) -> None:
        # <= start: a watch made while the cache was behind its resourceVersion (the cacher's
        # store watch may be served by a follower that has not applied it yet)
        if self.error is not None or ev.revision <= self.start:
            return
        if len(self.queue) >= QUEUE_LIMIT:
            self.queue.clear()
            self.error = Unavailable("the watcher fell too far behind and was terminated; "
                                     "watch again from the last resourceVersion seen",
                                     {"reason": "TooSlow"})
        else:
            self.queue.append(ev)
        self.wake.set()

    def fail(self, err: Exception) -> None:
        if self.error is None:
            self.error = err
        self.wake.set()


class Cacher:
    def __init__(self, client: StoreClient, prefix: str):
        self.client = client
        self.prefix = prefix
        self.window: collections.deque[CacheEvent] = collections.deque()
        self.floor = 0          # every event after `floor` is in the window
        self.revision = 0       # the latest revision this cache knows of
        self.watchers: set[Watcher] = set()
        self.state: dict[str, Current] = {}  # every key's state at `revision`, once ready
        self.latest: dict[str, CacheEvent] = {}  # each key's latest event in the window
        # objects this apiserver wrote whose events have not come yet, by key (`wrote`)
        self.written: dict[str, Written] = {}
        self.fields_of = _fields_of(prefix)
        self._task: asyncio.Task | None = None
        self._ready: asyncio.Future | None = None

    async def ensure_started(self) -> None:
        if self._task is None or self._task.done():
            self._ready = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._run(self._ready), name=f"cacher {self.prefix}")
        await asyncio.shield(self._ready)

    async def _run(self, ready: asyncio.Future) -> None:
        err: Exception | None = None
        try:
            # start where the store is now; the window fills from here
            self.window.clear()
            self.latest.clear()
            self.written.clear()
            self.state, start = await _list_state(self.client, self.prefix)
            self.floor = self.revision = start
            async with self.client.watch(self.prefix, prefix=True, start_revision=start + 1,
                                         prev_kv=True) as w:
                if not ready.done():
                    ready.set_result(None)
                last = self.latest  # read for every event
                async for ev in w:
                    cev = to_cache_event(ev, last, self.fields_of, self.written)
                    if ev.type == "PUT":
                        self.state[cev.key] = Current(ev.kv["value"], cev.revision)
                    else:
                        self.state.pop(cev.key, None)
                    self.window.append(cev)
                    last[cev.key] = cev
                    while len(self.window) > WINDOW:
                        gone = self.window.popleft()
                        if last.get(gone.key) is gone:
                            del last[gone.key]
                        self.floor = max(self.floor, gone.revision)
                    self.revision = max(self.revision, cev.revision)
                    for watcher in list(self.watchers):
                        watcher.offer(cev)
        except asyncio.CancelledError:
            err = Unavailable("the apiserver is shutting down")
            raise
        except Exception as exc:
            log.warning("store watch on %s failed: %s", self.prefix, exc)
            err = exc if isinstance(exc, Unavailable) else Unavailable(f"watch cache failed: {exc}")
        finally:
            if not ready.done():
                ready.set_exception(err or Unavailable("watch cache stopped"))
            for watcher in list(self.watchers):
                watcher.fail(err or Unavailable("watch cache stopped"))
            self.watchers.clear()
            self.state = {}
            self.latest.clear()
            self.written.clear()

    def current(self, key: str) -> Current | None:
        """`key`'s state as far as this cache knows (it may be behind the store), or None if the
        cache is not running (its state is then not kept up to date)."""
        return self.state.get(key, ABSENT) if self._running() else None

    def decoded(self, key: str, current: Current) -> dict | None:
        """The object of `current`, `key`'s state as `current()` gave it, if this cache holds it
        decoded (its event is still in the window): shared read-only. Else None."""
        ev = self.latest.get(key)
        if ev is None or ev.revision != current.revision or self.state.get(key) is not current:
            return None
        return ev.obj

    def _running(self) -> bool:
        """Following the store's watch (its state is kept up to date)."""
        return self._task is not None and not self._task.done() and self._ready is not None and self._ready.done()

    def wrote(self, key: str, revision: int, obj: dict) -> None:
        """`obj` is what `key` holds from `revision` on, as decoding it would give: the event of
        that write takes it instead of decoding (a decode per write saved). Kept only while
        that event is still to come, which a running cache sees in revision order, so every
        entry is used or dropped by its key's next event (or goes when the cache stops)."""
        if revision > self.revision and self._running():
            self.written[key] = Written(revision, obj)

    def register(self, start: int) -> Watcher | None:
        """A watcher fed every event after `start`, or None if the window no longer reaches back."""
        if start < self.floor or self._task is None or self._task.done():
            return None
        w = Watcher(start)
        for ev in self.window:
            if ev.revision > start:
                w.queue.append(ev)
        self.watchers.add(w)
        return w

    def unregister(self, w: Watcher) -> None:
        self.watchers.discard(w)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except BaseException:
                pass


async def _list_state(client: StoreClient, prefix: str) -> tuple[dict[str, Current], int]:
    """Every key under `prefix` at one revision (the first page's), by pages: (state, revision).
    A compaction past that revision meanwhile fails the cacher (Compacted); the next watch starts
    a new one."""
    state: dict[str, Current] = {}
    start, end, revision = prefix.encode(), prefix_end(prefix.encode()), 0
    while True:
        resp = await client.range(start, end, revision=revision, limit=LIST_PAGE)
        revision = revision or resp["header"]["revision"]
        kvs = resp.get("kvs") or ()
        for kv in kvs:
            state[kv["key"].decode()] = Current(kv["value"], kv["mod_revision"])
        if not resp.get("more") or not kvs:
            return state, revision
        start = kvs[-1]["key"] + b"\0"


async def cache_events(cacher: Cacher, w: Watcher) -> AsyncIterator[CacheEvent]:
    """Events of a cache watcher; raises its error when it is ended."""
    try:
        while True:
            while w.queue:
                yield w.queue.popleft()
            if w.error is not None:
                raise w.error
            w.wake.clear()
            await w.wake.wait()
    finally:
        cacher.unregister(w)


async def store_events(client: StoreClient, prefix: str, start: int) -> AsyncIterator[CacheEvent]:
    """Events after `start` straight from the store's history (for resumes older than the cache)."""
    try:
        watch = client.watch(prefix, prefix=True, start_revision=start + 1, prev_kv=True)
        async with watch as w:
            async for ev in w:
                yield to_cache_event(ev)
    except Compacted as err:
        raise expired(start, err.compact_revision) from None


class WatchCache:
    """Cachers by registry prefix (one per resource)."""

    def __init__(self, client: StoreClient):
        self.client = client
        self.cachers: dict[str, Cacher] = {}
        self.reached = 0  # a store revision known to be reached (revisions only grow)

    def cacher(self, prefix: str) -> Cacher:
        c = self.cachers.get(prefix)
        if c is None:
            c = self.cachers[prefix] = Cacher(self.client, prefix)
        return c

    async def open(self, prefix: str, start: int) -> tuple[AsyncIterator[CacheEvent], Watcher | None]:
        """Every event under `prefix` (a resource's prefix) after revision `start`, in order, and the
        cache watcher behind them (None: served from the store's history)."""
        cacher = self.cacher(prefix)
        await cacher.ensure_started()
        if start > max(cacher.revision, self.reached):
            await self._check_reached(prefix, start)
        w = cacher.register(start)
        if w is not None:
            return cache_events(cacher, w), w
        return store_events(self.client, prefix, start), None

    async def _check_reached(self, prefix: str, start: int) -> None:
        """The 504 "Too large resource version" unless the store has reached `start`."""
        # the revision alone: one key (the prefix itself), not a count of the whole resource
        current = (await self.client.range(prefix, count_only=True))["header"]["revision"]
        self.reached = max(self.reached, current)
        if start > current:
            raise too_large_resource_version(start, current)

    def current(self, prefix: str, key: str) -> Current | None:
        """`key`'s state in the running cacher of `prefix` (its resource's), else None."""
        c = self.cachers.get(prefix)
        return c.current(key) if c is not None else None

    def decoded(self, prefix: str, key: str, current: Current) -> dict | None:
        """`Cacher.decoded` of the cacher of `prefix` (its resource's), if any."""
        c = self.cachers.get(prefix)
        return c.decoded(key, current) if c is not None else None

    def wrote(self, prefix: str, key: str, revision: int, obj: dict) -> None:
        """`obj` was written at `key` (under `prefix`, its resource's) at `revision`: offered to
        the running cacher of `prefix`, if any (`Cacher.wrote`)."""
        c = self.cachers.get(prefix)
        if c is not None:
            c.wrote(key, revision, obj)

    def latest(self, prefix: str) -> int:
        c = self.cachers.get(prefix)
        return c.revision if c is not None else 0

    async def close(self) -> None:
        for c in self.cachers.values():
            await c.close()
