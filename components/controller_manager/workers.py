"""A controller's work queue and its workers: sample-controller's runWorker/processNextWorkItem.

    workers = Workers("replicaset", sync, count=5)
    workers.add("default/web")              # from event handlers: keys only, never objects
    await workers.run(stop)                 # until stop is set

`sync(key)` is level-based (it reads the caches, not the event that queued the key) and
returns None or a delay after which the key must be looked at again (a pod reaching
minReadySeconds, a toleration running out). An exception retries the key with the default
controller rate limiter's per-key backoff; a success resets it. The queue hands a key to at
most one worker at a time, so syncs of one key never overlap.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

from kubemu.wire import WireError
from kubemu.workqueue import AsyncWorkQueue

log = logging.getLogger("kubemu.controller_manager")

Sync = Callable[[Hashable], Awaitable[float | None]]


class RetryLater(Exception):
    """A sync that cannot finish yet for a known reason (a cache behind the controller's own
    writes, a pod's Node not cached yet): retried with backoff and logged like an API error,
    without a traceback."""


class Workers:
    def __init__(self, name: str, sync: Sync, count: int = 1):
        if count < 1:
            raise ValueError(f"{name}: at least one worker is needed")
        self.name = name
        self.sync = sync
        self.count = count
        self.queue = AsyncWorkQueue()   # the default controller rate limiter

    def add(self, key: Hashable) -> None:
        self.queue.add(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        self.queue.add_after(key, delay)

    async def run(self, stop: asyncio.Event) -> None:
        tasks = [asyncio.create_task(self._work(), name=f"{self.name} worker {i}")
                 for i in range(self.count)]
        try:
            await stop.wait()
        finally:
            # A sync cut short is harmless: the next start redoes it from the caches.
            self.queue.shut_down()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _work(self) -> None:
        while (key := await self.queue.get()) is not None:
            try:
                requeue = await self.sync(key)
            except Exception as err:  # noqa: BLE001  (any failure: retry the key with backoff)
                self._failed(key, err)
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
                if requeue is not None:
                    self.queue.add_after(key, requeue)
            finally:
                self.queue.done(key)

    def _failed(self, key: Hashable, err: Exception) -> None:
        retries = self.queue.num_requeues(key)
        if isinstance(err, (WireError, RetryLater)):
            # API errors (a conflict with a newer version, a cache behind our own write, an
            # apiserver restarting) are routine: the retry sees fresher caches.
            level = logging.INFO if retries < 5 else logging.WARNING
            log.log(level, "%s %s: %s: %s (retry %d)", self.name, key, type(err).__name__, err,
                    retries + 1)
        else:
            log.error("%s %s: sync failed (retry %d)", self.name, key, retries + 1, exc_info=err)
