"""The informer: a local, watch-fed cache of one resource, after client-go's SharedInformer
(Reflector + DeltaFIFO + Indexer + processor, collapsed into one asyncio task).

    inf = Informer(api, "pods", namespace="default", resync_period=30)
    inf.add_event_handler(on_add=lambda o: q.add(key(o)),
                          on_update=lambda old, new: q.add(key(new)),
                          on_delete=lambda o: q.add(key(o)))
    task = asyncio.create_task(inf.run(stop))
    await inf.wait_for_sync()
    inf.indexer.by_index(NAMESPACE_INDEX, "default")

The loop (the Reflector's ListAndWatch):

 1. LIST (following `continue`: one consistent snapshot) and replace the cache with it,
    delivering the difference: on_add for new keys, on_update(old, new) for keys still there,
    on_delete(DeletedFinalStateUnknown(key, last_known)) for keys that vanished while we were
    not watching (the watch that would have told us is gone: the delete's final state is unknown).
 2. WATCH from the list's resourceVersion with bookmarks: nothing between the list and the watch
    is lost, because the apiserver sends every change after that version.
 3. Apply each event to the cache, then call the handlers; remember the resourceVersion of every
    event (bookmarks included).
 4. When the watch ends or fails (apiserver restarted, connection lost), WATCH again from the
    last resourceVersion seen; on `Expired` (410: that version was compacted away) or "Too large
    resource version" (504: that apiserver's store has not reached it) go back to 1.
    Failures back off (jittered exponential, capped; reset after a healthy watch). A watch that
    ends at once without delivering anything counts as a failure, so nothing busy-loops.

Resync (resync_period > 0) re-delivers every cached object as on_update(obj, obj) (old is new)
every resync_period seconds, so level-based controllers re-check everything now and then.

Handlers run inline on the informer's task: they must be cheap (enqueue a key, nothing more)
and must not mutate the objects they are given (the cache shares them). An exception in a
handler is logged and does not stop the informer. A handler added after the cache is filled
gets on_add for every object already cached, as in client-go.
"""
from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

from kubemu.apiclient import ApiClient, is_expired, is_too_large_resource_version
from kubemu.cache import (NAMESPACE_INDEX, DeletedFinalStateUnknown, IndexFunc, Indexer, meta_namespace_index_func,
                          meta_namespace_key)
from kubemu.wire import Gone

log = logging.getLogger("kubemu.informer")

BACKOFF_INITIAL = 0.1     # seconds before the first retry
BACKOFF_MAX = 5.0         # cap of the exponential backoff
BACKOFF_JITTER = 0.5      # each delay is shortened by up to this fraction, at random
MIN_WATCH_SECONDS = 1.0   # an empty watch that ends sooner than this counts as a failure
LIST_PAGE = 500


class Backoff:
    """Jittered exponential backoff: initial, 2x, 4x ... capped at `cap`, each shortened by a
    random fraction up to `jitter`, so clients restarted together spread out even at the cap."""

    def __init__(self, initial: float = BACKOFF_INITIAL, cap: float = BACKOFF_MAX,
                 jitter: float = BACKOFF_JITTER, rng: random.Random | None = None):
        self.initial, self.cap, self.jitter = initial, cap, jitter
        self._rng = rng or random.Random()
        self.failures = 0

    def next(self) -> float:
        base = min(self.cap, self.initial * 2 ** min(self.failures, 30))
        self.failures += 1
        return base * (1 - self.jitter * self._rng.random())

    def reset(self) -> None:
        self.failures = 0


def _rv(obj: Any) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


class Informer:
    """One resource's list+watch cache with event handlers; see the module docstring."""

    def __init__(self, client: ApiClient, resource: str, namespace: str | None = None,
                 label_selector: str = "", field_selector: str = "", resync_period: float = 0,
                 indexers: Mapping[str, IndexFunc] | None = None, *,
                 backoff_initial: float = BACKOFF_INITIAL, backoff_max: float = BACKOFF_MAX):
        self.client = client
        self.resource = resource
        self.namespace = namespace or None
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.resync_period = resync_period
        all_indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: meta_namespace_index_func}
        all_indexers.update(indexers or {})
        self.indexer = Indexer(meta_namespace_key, all_indexers)
        # the handlers of each kind, without the Nones: an event walks only its own kind's
        self._on_add: list[Callable[[Any], None]] = []
        self._on_update: list[Callable[[Any, Any], None]] = []
        self._on_delete: list[Callable[[Any], None]] = []
        self._synced: asyncio.Event | None = None   # made in the loop that waits on it
        self._delivered = 0                          # events applied by the current watch
        self._synced_flag = False
        self.last_resource_version = ""     # of the last event or list applied (the reflector's)
        self._backoff = Backoff(backoff_initial, backoff_max)
        # counters, for tests and debugging
        self.stats = {"lists": 0, "watches": 0, "expired": 0, "errors": 0, "resyncs": 0}

    # -- public --

    def add_event_handler(self, on_add: Callable[[Any], None] | None = None,
                          on_update: Callable[[Any, Any], None] | None = None,
                          on_delete: Callable[[Any], None] | None = None) -> None:
        if on_update is not None:
            self._on_update.append(on_update)
        if on_delete is not None:
            self._on_delete.append(on_delete)
        if on_add is not None:
            self._on_add.append(on_add)
            for obj in self.indexer.list():   # late joiners see what is already there
                try:
                    on_add(obj)
                except Exception:
                    self._handler_failed(on_add)

    def has_synced(self) -> bool:
        """True once the first LIST has been delivered to the cache and the handlers."""
        return self._synced_flag

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until `has_synced()`; False if `timeout` seconds pass first."""
        if self._synced_flag:
            return True
        event = self._sync_event()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def get(self, key: str) -> Any | None:
        return self.indexer.get_by_key(key)

    def list(self) -> list[Any]:
        return self.indexer.list()

    async def run(self, stop_event: asyncio.Event) -> None:
        """List and watch until `stop_event` is set (then return promptly, watch closed)."""
        self._sync_event()
        tasks = [asyncio.create_task(self._reflect(), name=f"informer {self.resource}")]
        if self.resync_period and self.resync_period > 0:
            tasks.append(asyncio.create_task(self._resync_loop(), name=f"resync {self.resource}"))
        stopper = asyncio.create_task(stop_event.wait())
        try:
            done, _ = await asyncio.wait([stopper, *tasks], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (stopper, *tasks):
                t.cancel()
            await asyncio.gather(stopper, *tasks, return_exceptions=True)
        for t in tasks:
            if t in done and not t.cancelled() and t.exception() is not None:
                raise t.exception()

    # -- the reflector --

    async def _reflect(self) -> None:
        need_list = True
        expired_streak = 0
        while True:
            if need_list:
                try:
                    await self._list_and_replace()
                except Exception as err:  # noqa: BLE001  (anything: log, back off, retry)
                    self._failed("list", err)
                    await asyncio.sleep(self._backoff.next())
                    continue
                need_list = False
            loop = asyncio.get_running_loop()
            started = loop.time()
            self._delivered = 0
            try:
                await self._watch()
            except Exception as err:  # noqa: BLE001
                if self._delivered:
                    expired_streak = 0
                if is_expired(err) or isinstance(err, Gone) or is_too_large_resource_version(err):
                    self.stats["expired"] += 1
                    log.info("%s: watch from %s refused (%s); relisting", self.resource,
                             self.last_resource_version, err)
                    need_list = True
                    # relist at once; but a server that keeps answering 410 must not make us spin
                    expired_streak += 1
                    if expired_streak > 1:
                        await asyncio.sleep(self._backoff.next())
                    continue
                self._failed("watch", err)
                await asyncio.sleep(self._backoff.next())
                continue
            # the stream ended normally (the server closed it): resume from the last RV
            if self._delivered:
                expired_streak = 0
            elif loop.time() - started < MIN_WATCH_SECONDS:
                await asyncio.sleep(self._backoff.next())

    def _failed(self, what: str, err: Exception) -> None:
        self.stats["errors"] += 1
        level = logging.INFO if self._backoff.failures < 3 else logging.WARNING
        log.log(level, "%s %s failed: %s (retrying)", self.resource, what, err)

    async def _list_and_replace(self) -> None:
        self.stats["lists"] += 1
        listed = await self.client.list_all(self.resource, self.namespace, self.label_selector,
                                            self.field_selector, limit=LIST_PAGE)
        rv = str((listed.get("metadata") or {}).get("resourceVersion") or "")
        self._replace(listed.get("items") or [], rv)
        self._backoff.reset()

    def _replace(self, items: list, rv: str) -> None:
        old = {key: self.indexer.get_by_key(key) for key in self.indexer.list_keys()}
        new = [(meta_namespace_key(o), o) for o in items]
        self.indexer.replace([o for _, o in new], rv)
        self.last_resource_version = rv
        new_keys = set()
        for key, obj in new:
            new_keys.add(key)
            prev = old.get(key)
            if prev is None:
                self._dispatch_add(obj)
            else:
                self._dispatch_update(prev, obj)
        for key, prev in old.items():
            if key not in new_keys:
                self._dispatch_delete(DeletedFinalStateUnknown(key, prev))
        if not self._synced_flag:
            self._synced_flag = True
            self._sync_event().set()

    async def _watch(self) -> None:
        """One watch from the last RV, until it ends; counts events in `_delivered`."""
        self.stats["watches"] += 1
        w = self.client.watch(self.resource, self.namespace, resource_version=self.last_resource_version,
                              label_selector=self.label_selector, field_selector=self.field_selector,
                              allow_bookmarks=True)
        try:
            await w.open()
            async for type_, obj in w:
                self._apply(type_, obj)
                self._delivered += 1
                if self._delivered == 1:
                    self._backoff.reset()
        finally:
            await w.aclose()

    def _apply(self, type_: str, obj: dict) -> None:
        rv = _rv(obj)
        if type_ == "BOOKMARK":
            if rv:
                self.last_resource_version = rv
            return
        key = meta_namespace_key(obj)
        prev = self.indexer.get_by_key(key)
        if type_ in ("ADDED", "MODIFIED"):
            self.indexer.update(obj)
            if prev is None:
                self._dispatch_add(obj)
            else:
                self._dispatch_update(prev, obj)
        elif type_ == "DELETED":
            self.indexer.delete(key)
            self._dispatch_delete(obj if obj else prev)
        else:
            log.warning("%s: ignoring watch event of unknown type %r", self.resource, type_)
        if rv:
            self.last_resource_version = rv

    # -- resync --

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.resync_period)
            if not self._synced_flag:
                continue
            self.stats["resyncs"] += 1
            for obj in self.indexer.list():
                self._dispatch_update(obj, obj)

    # -- delivery --

    # Each dispatch calls its handlers inline, not through a helper: a pod event reaches about
    # ten handlers in the controller-manager, and a call more per handler showed in profiles.

    def _dispatch_add(self, obj) -> None:
        for fn in self._on_add:
            try:
                fn(obj)
            except Exception:
                self._handler_failed(fn)

    def _dispatch_update(self, old, new) -> None:
        for fn in self._on_update:
            try:
                fn(old, new)
            except Exception:
                self._handler_failed(fn)

    def _dispatch_delete(self, obj) -> None:
        for fn in self._on_delete:
            try:
                fn(obj)
            except Exception:
                self._handler_failed(fn)

    def _handler_failed(self, fn) -> None:
        log.exception("%s: event handler %r failed", self.resource, fn)

    def _sync_event(self) -> asyncio.Event:
        if self._synced is None:
            self._synced = asyncio.Event()
            if self._synced_flag:
                self._synced.set()
        return self._synced

