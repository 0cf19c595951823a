"""Recording Events (client-go's EventRecorder + EventCorrelator, trimmed to what kubemu needs).

    recorder = EventRecorder(api, component="default-scheduler")
    recorder.event(pod, "Normal", "Scheduled", "Successfully assigned default/web-1 to node-1")
    ...
    await recorder.close()          # waits (briefly) for the writes in flight

`event()` never blocks and never raises: an Event is best-effort, as in Kubernetes (a lost Event
must not stop a controller). A repeat of the same (object, type, reason, message) within
`AGGREGATE_WINDOW` seconds bumps `count` and `lastTimestamp` of the Event already written
(a merge patch) instead of creating another, like the correlator's deduplication, so a pod that
fails to schedule every few seconds yields one Event with a growing count. And like client-go's
spam filter, each object gets a token bucket per (type, reason): a burst of `SPAM_BURST`
Events, then one per `SPAM_REFILL` seconds; the rest are dropped (a ReplicaSet creating 1,000
pods records 25 SuccessfulCreate Events, not 1,000).

The Event is the core/v1 shape `kubemu get events` and `describe` read: metadata.name
"<object name>.<16 hex digits>", involvedObject, reason, message, type, source{component, host},
firstTimestamp, lastTimestamp, count, reportingComponent.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from typing import Any, Callable

from kubemu.api.times import format_time

log = logging.getLogger("kubemu.events")

AGGREGATE_WINDOW = 600.0    # seconds an Event is reused for repeats (the correlator's 10 minutes)
MAX_REMEMBERED = 4096       # LRU of Events we may bump (the correlator's cache size)
MAX_IN_FLIGHT = 256         # beyond this, new Events are dropped (and logged): never a backlog
SPAM_BURST = 25             # client-go's EventSourceObjectSpamFilter: burst 25,
SPAM_REFILL = 300.0         #   then one token per 5 minutes


def object_reference(obj: dict, field_path: str | None = None) -> dict:
    """An ObjectReference to `obj` (a full object, or already a reference)."""
    if "involvedObject" in obj:  # an Event itself: not a thing we refer to
        raise ValueError("cannot refer to an Event")
    meta = obj.get("metadata") or {}
    ref = {"kind": obj.get("kind") or "", "apiVersion": obj.get("apiVersion") or "",
           "name": meta.get("name") or obj.get("name") or "",
           "uid": meta.get("uid") or obj.get("uid") or ""}
    namespace = meta.get("namespace") if "metadata" in obj else obj.get("namespace")
    if namespace:
        ref["namespace"] = namespace
    rv = meta.get("resourceVersion")
    if rv:
        ref["resourceVersion"] = str(rv)
    if field_path:
        ref["fieldPath"] = field_path
    return {k: v for k, v in ref.items() if v != ""}


def make_event(ref: dict, type_: str, reason: str, message: str, component: str, host: str | None,
               now: float, suffix: str) -> dict:
    """A new core/v1 Event about `ref` (pure: the time and the name's suffix are passed in)."""
    namespace = ref.get("namespace") or "default"
    source = {"component": component}
    if host:
        source["host"] = host
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{ref.get('name', 'unknown')}.{suffix}", "namespace": namespace},
            "involvedObject": dict(ref), "reason": reason, "message": message, "type": type_,
            "source": source, "firstTimestamp": format_time(now), "lastTimestamp": format_time(now),
            "count": 1, "reportingComponent": component, "reportingInstance": host or ""}


class EventRecorder:
    """Fire-and-forget Event writer bound to one component (and host, for node agents)."""

    def __init__(self, api: Any, component: str, host: str | None = None,
                 clock: Callable[[], float] = time.time):
        self.api = api
        self.component = component
        self.host = host
        self.clock = clock
        self._seen: OrderedDict[tuple, list] = OrderedDict()  # key -> [name, namespace, count, first seen]
        self._tasks: set[asyncio.Task] = set()
        self._buckets: OrderedDict[tuple, list] = OrderedDict()  # spam key -> [tokens, last refill]
        self.dropped = 0
        self.throttled = 0
        self._dropping = False

    def event(self, obj: dict, type_: str, reason: str, message: str, field_path: str | None = None) -> None:
        try:
            ref = object_reference(obj, field_path)
        except ValueError:
            return
        if len(self._tasks) >= MAX_IN_FLIGHT:
            self.dropped += 1
            if not self._dropping:  # one line per burst, not one per event
                self._dropping = True
                log.warning("dropping events: %d writes in flight (first dropped: %s %s for %s/%s)",
                            len(self._tasks), type_, reason, ref.get("namespace", ""), ref.get("name", ""))
            return
        if self._dropping:
            self._dropping = False
            log.warning("recording events again; %d dropped so far", self.dropped)
        now = self.clock()
        if not self._take_token(ref, type_, reason, now):
            self.throttled += 1
            return
        key = (ref.get("uid") or (ref.get("kind"), ref.get("namespace"), ref.get("name")),
               ref.get("fieldPath"), type_, reason, message)
        seen = self._seen.get(key)
        if seen is not None and now - seen[3] <= AGGREGATE_WINDOW:
            seen[2] += 1
            self._seen.move_to_end(key)
            coro = self._bump(seen[1], seen[0], seen[2], now)
        else:
            event = make_event(ref, type_, reason, message, self.component, self.host, now,
                               f"{time.time_ns():016x}"[-16:])
            self._seen[key] = [event["metadata"]["name"], event["metadata"]["namespace"], 1, now]
            while len(self._seen) > MAX_REMEMBERED:
                self._seen.popitem(last=False)
            coro = self._create(event, key)
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _take_token(self, ref: dict, type_: str, reason: str, now: float) -> bool:
        key = (ref.get("kind"), ref.get("namespace"), ref.get("name"), ref.get("uid"), type_, reason)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = [float(SPAM_BURST), now]
            while len(self._buckets) > MAX_REMEMBERED:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(key)
            bucket[0] = min(float(SPAM_BURST), bucket[0] + (now - bucket[1]) / SPAM_REFILL)
            bucket[1] = now
        if bucket[0] < 1.0:
            return False
        bucket[0] -= 1.0
        return True

    async def _create(self, event: dict, key: tuple) -> None:
        try:
            await self.api.create("events", event, namespace=event["metadata"]["namespace"])
        except Exception as err:  # best-effort: an Event never stops its component
            self._seen.pop(key, None)
            log.info("could not record event %s for %s: %s", event["reason"],
                     event["involvedObject"].get("name"), err)

    async def _bump(self, namespace: str, name: str, count: int, now: float) -> None:
        try:
            await self.api.patch("events", name, {"count": count, "lastTimestamp": format_time(now)},
                                 namespace=namespace)
        except Exception as err:
            log.info("could not update event %s/%s: %s", namespace, name, err)

    async def close(self, timeout: float = 2.0) -> None:
        """Wait up to `timeout` seconds for the writes in flight, then cancel the rest."""
        if not self._tasks:
            return
        _done, pending = await asyncio.wait(set(self._tasks), timeout=timeout)
        for task in pending:
            task.cancel()
