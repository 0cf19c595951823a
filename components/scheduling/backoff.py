"""Per-pod retry backoff after a failed scheduling attempt, like kube-scheduler's queue.

The n-th consecutive failure backs a pod off initial * 2^(n-1) seconds, capped at the maximum
(podInitialBackoffSeconds = 1, podMaxBackoffSeconds = 10 by default): 1, 2, 4, 8, 10, 10, ...
A success (the pod bound, or deleted) resets it. Time is always passed in (seconds, any
monotonic clock), so this is pure bookkeeping:

    b = Backoff()
    b.record_failure(key, now)   # -> the delay it chose
    b.is_backing_off(key, now)   # True until now >= ready_at(key)
    b.reset(key)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Optional

DEFAULT_INITIAL = 1.0
DEFAULT_MAX = 10.0


def backoff_duration(attempts: int, initial: float = DEFAULT_INITIAL,
                     maximum: float = DEFAULT_MAX) -> float:
    """calculateBackoffDuration: doubling from ``initial``, never above ``maximum``."""
    duration = initial
    for _ in range(1, attempts):
        if duration > maximum - duration:
            return maximum
        duration += duration
    return min(duration, maximum)


@dataclass
class _Entry:
    attempts: int
    ready_at: float


class Backoff:
    def __init__(self, initial: float = DEFAULT_INITIAL, maximum: float = DEFAULT_MAX):
        if initial <= 0 or maximum < initial:
            raise ValueError("need 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self._entries: dict[Hashable, _Entry] = {}

    def record_failure(self, key: Hashable, now: float) -> float:
        """One more failed attempt at ``now``: returns the delay before the next one."""
        entry = self._entries.get(key)
        attempts = (entry.attempts if entry else 0) + 1
        delay = backoff_duration(attempts, self.initial, self.maximum)
        self._entries[key] = _Entry(attempts, now + delay)
        return delay

    def attempts(self, key: Hashable) -> int:
        entry = self._entries.get(key)
        return entry.attempts if entry else 0

    def ready_at(self, key: Hashable) -> Optional[float]:
        """When the pod may be tried again; None if it is not backing off."""
        entry = self._entries.get(key)
        return entry.ready_at if entry else None

    def is_backing_off(self, key: Hashable, now: float) -> bool:
        entry = self._entries.get(key)
        return entry is not None and now < entry.ready_at

    def reset(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def next_ready(self, now: float) -> Optional[float]:
        """The earliest ready time still in the future (when a scheduler loop should wake)."""
        times = [e.ready_at for e in self._entries.values() if e.ready_at > now]
        return min(times) if times else None

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
