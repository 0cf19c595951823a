"""kube-scheduler's scheduling queue (its PriorityQueue), as pure bookkeeping over pod keys.

A pending pod waits in one of three places, or is in flight:

  active         ready now; handed out highest spec.priority first, then first come first served
  backoff        tried and failed recently; becomes active when its backoff ends
                 (components.scheduling.backoff: 1 s, 2 s, 4 s ... capped, per pod)
  unschedulable  fitted nowhere; waits for a change in the cluster that may help (`move_all`:
                 a node added or changed, a bound pod gone) or, failing that, for
                 `unschedulable_timeout` (kube-scheduler's podMaxInUnschedulablePodsDuration)
  in flight      handed out by `pop`, being tried and then bound; it ends with `delete` (bound,
                 gone, not ours), `unschedulable` (no fit) or `requeue` (an error)

Moving a pod out of unschedulable never skips its backoff: a pod still backing off goes to
backoff, not active. A change that happens while a pod is in flight (`move_all`, or `update` of
that pod) is remembered: if the attempt then finds no fit, the pod goes to backoff instead of
unschedulable, because the attempt may have missed the very change that makes it fit
(kube-scheduler's moveRequestCycle).

Time is passed in (seconds, one monotonic clock, never decreasing from call to call), so every
behaviour is testable with plain numbers. A caller sleeps until `next_wakeup()` or a new event.
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Optional

from components.scheduling.backoff import Backoff

ACTIVE, BACKOFF, UNSCHEDULABLE, IN_FLIGHT = "active", "backoff", "unschedulable", "in flight"
UNSCHEDULABLE_TIMEOUT = 300.0   # kube-scheduler's podMaxInUnschedulablePodsDuration (5 min)
_CHANGED = -1                   # in-flight mark: the pod itself changed during its attempt


class SchedulingQueue:
    def __init__(self, backoff: Optional[Backoff] = None,
                 unschedulable_timeout: float = UNSCHEDULABLE_TIMEOUT):
        self.backoff = backoff if backoff is not None else Backoff()
        self.unschedulable_timeout = unschedulable_timeout
        self._where: dict[Hashable, str] = {}
        self._priority: dict[Hashable, int] = {}
        # Heaps with lazy deletion: an entry is live while its key is still in that place
        # under the same sequence number (`_seq_of`); stale entries are skipped when met.
        self._active: list[tuple[int, int, Hashable]] = []           # (-priority, seq, key)
        self._backoff: list[tuple[float, int, Hashable]] = []        # (ready at, seq, key)
        self._seq_of: dict[Hashable, int] = {}
        self._seq = itertools.count()
        self._unschedulable: dict[Hashable, float] = {}   # key -> parked at (insertion = time order)
        self._in_flight: dict[Hashable, int] = {}         # key -> moves seen at pop, or _CHANGED
        self._moves = 0

    # -- events --

    def add(self, key: Hashable, priority: int = 0) -> bool:
        """A pending pod to schedule; True if it was new (a known pod stays where it is)."""
        if key in self._where:
            return False
        self._priority[key] = priority
        self._to_active(key)
        return True

    def update(self, key: Hashable, now: float) -> None:
        """The pod's spec or labels changed: an unschedulable pod gets another try (after its
        backoff)."""
        where = self._where.get(key)
        if where == UNSCHEDULABLE:
            del self._unschedulable[key]
            self._activate_or_back_off(key, now)
        elif where == IN_FLIGHT:
            self._in_flight[key] = _CHANGED

    def move_all(self, now: float) -> None:
        """Something changed that may let unschedulable pods fit: every one of them goes back
        to active, or to backoff while backing off (MoveAllToActiveOrBackoffQueue)."""
        self._moves += 1
        parked, self._unschedulable = list(self._unschedulable), {}
        for key in parked:
            self._activate_or_back_off(key, now)

    def delete(self, key: Hashable) -> None:
        """The pod is bound, deleted or no longer ours: forget it, backoff included."""
        self._where.pop(key, None)
        self._priority.pop(key, None)
        self._seq_of.pop(key, None)
        self._unschedulable.pop(key, None)
        self._in_flight.pop(key, None)
        self.backoff.reset(key)

    # -- the scheduling loop --

    def pop(self, now: float) -> Optional[Hashable]:
        """The next pod to try (it is in flight until its outcome is reported), or None."""
        self._release(now)
        while self._active:
            _, seq, key = heapq.heappop(self._active)
            if self._where.get(key) == ACTIVE and self._seq_of.get(key) == seq:
                del self._seq_of[key]
                self._where[key] = IN_FLIGHT
                self._in_flight[key] = self._moves
                return key
        return None

    def unschedulable(self, key: Hashable, now: float) -> None:
        """The pod fitted nowhere. (Ignored if it was deleted meanwhile.)"""
        seen = self._in_flight.pop(key, None)
        if seen is None:
            return
        self.backoff.record_failure(key, now)
        if seen != self._moves:   # a change came during the attempt: retry after the backoff
            self._to_backoff(key)
        else:
            self._where[key] = UNSCHEDULABLE
            self._unschedulable[key] = now

    def requeue(self, key: Hashable, now: float) -> None:
        """The attempt failed for another reason (the bind failed, ...): retry after the
        backoff. (Ignored if the pod was deleted meanwhile.)"""
        if self._in_flight.pop(key, None) is None:
            return
        self.backoff.record_failure(key, now)
        self._to_backoff(key)

    def next_wakeup(self) -> Optional[float]:
        """When a pod next becomes active by itself (a backoff ends, an unschedulable pod
        times out); None if none will."""
        times = []
        while self._backoff:
            ready, seq, key = self._backoff[0]
            if self._where.get(key) == BACKOFF and self._seq_of.get(key) == seq:
                times.append(ready)
                break
            heapq.heappop(self._backoff)
        if self._unschedulable:
            times.append(next(iter(self._unschedulable.values())) + self.unschedulable_timeout)
        return min(times) if times else None

    # -- inspection --

    def where(self, key: Hashable) -> Optional[str]:
        return self._where.get(key)

    def counts(self) -> dict[str, int]:
        out = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, IN_FLIGHT: 0}
        for where in self._where.values():
            out[where] += 1
        return out

    def __contains__(self, key: Hashable) -> bool:
        return key in self._where

    def __len__(self) -> int:
        return len(self._where)

    # -- plumbing --

    def _release(self, now: float) -> None:
        while self._backoff and self._backoff[0][0] <= now:
            _, seq, key = heapq.heappop(self._backoff)
            if self._where.get(key) == BACKOFF and self._seq_of.get(key) == seq:
                self._to_active(key)
        while self._unschedulable:
            key, parked = next(iter(self._unschedulable.items()))
            if parked + self.unschedulable_timeout > now:
                break
            del self._unschedulable[key]
            self._activate_or_back_off(key, now)

    def _activate_or_back_off(self, key: Hashable, now: float) -> None:
        if self.backoff.is_backing_off(key, now):
            self._to_backoff(key)
        else:
            self._to_active(key)

    def _to_active(self, key: Hashable) -> None:
        seq = next(self._seq)
        self._where[key] = ACTIVE
        self._seq_of[key] = seq
        heapq.heappush(self._active, (-self._priority.get(key, 0), seq, key))

    def _to_backoff(self, key: Hashable) -> None:
        seq = next(self._seq)
        self._where[key] = BACKOFF
        self._seq_of[key] = seq
        heapq.heappush(self._backoff, (self.backoff.ready_at(key), seq, key))
