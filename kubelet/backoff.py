"""The kubelet's CrashLoopBackOff as a pure per-key exponential backoff.

Nothing here reads a clock: every call takes `now` from the caller (any monotonic clock, in
seconds). The kubelet keeps one backoff entry per container and behaves like this
(Kubernetes docs, "Pod Lifecycle" / "Container restart policy"):

  * the first restart after an exit is immediate;
  * each further restart waits `initial` seconds (10 s), doubling every time, capped at
    `maximum` (300 s): waits 0, 10, 20, 40, 80, 160, 300, 300, ...;
  * once the container has stayed up for `reset_after` seconds (2 x the cap = 10 minutes)
    without exiting, the series starts over (the next restart is immediate again).

The entry's clock for the reset is the time of the last (re)start, as the kubelet measures it
from the moment it last let the container restart; a failed start is thus a crash with zero
up-time, and never resets the series.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _Entry:
    delay: float  # the wait the next exit will impose (0 until the first exit)
    since: float  # when the key last (re)started: the clock for the reset


class Backoff:
    """Per-key exponential backoff with the kubelet's semantics.

    Protocol, per key: `record_start(key, t)` each time it is (re)started, and on each exit
    that will be followed by a restart `record_failure(key, t)`, which returns how long the
    restart must wait (and advances the series). `next_delay` asks the same without changing
    anything."""

    def __init__(self, initial: float = 10.0, maximum: float = 300.0, reset_after: float | None = None):
        if initial < 0 or maximum < 0:
            raise ValueError("backoff durations must be >= 0")
        self.initial = initial
        self.maximum = maximum
        # "stable if it's ok for twice the max": the kubelet's reset rule.
        self.reset_after = 2 * maximum if reset_after is None else reset_after
        self._entries: dict[str, _Entry] = {}

    def record_start(self, key: str, now: float) -> None:
        """The key was (re)started at `now`: its up-time clock restarts."""
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = _Entry(delay=0.0, since=now)
        else:
            entry.since = now

    def next_delay(self, key: str, now: float) -> float:
        """How long a restart after an exit at `now` would have to wait (pure query)."""
        entry = self._entries.get(key)
        if entry is None or self._expired(entry, now):
            return 0.0
        return entry.delay

    def record_failure(self, key: str, now: float) -> float:
        """The key exited at `now` and will be restarted: return the wait, advance the series."""
        delay = self.next_delay(key, now)
        entry = self._entries.setdefault(key, _Entry(delay=0.0, since=now))
        entry.delay = self._grow(delay)
        return delay

    def current(self, key: str) -> float:
        """The wait the next exit of `key` would impose if it happened right after its start."""
        entry = self._entries.get(key)
        return 0.0 if entry is None else entry.delay

    def reset(self, key: str) -> None:
        """Forget the key: its next restart is immediate."""
        self._entries.pop(key, None)

    def _grow(self, delay: float) -> float:
        # The first exit is free; the wait for the one after is `initial`, then it doubles.
        if delay <= 0:
            return min(self.initial, self.maximum)
        return min(2 * delay, self.maximum)

    def _expired(self, entry: _Entry, now: float) -> bool:
        # Up for `reset_after` without exiting: the container is considered stable again.
        return now - entry.since >= self.reset_after


def go_duration(seconds: float) -> str:
    """Format a duration as Go's time.Duration.String() does (the kubelet's messages use it):
    10s, 1m20s, 5m0s, 1h0m0s, 1.5s, 250ms, 0s."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        return sign + _sub_second(ns)
    hours, rest = divmod(ns, 3600 * 1_000_000_000)
    minutes, rest = divmod(rest, 60 * 1_000_000_000)
    text = _decimal(rest, 1_000_000_000) + "s"
    if hours or minutes:
        text = f"{minutes}m" + text
    if hours:
        text = f"{hours}h" + text
    return sign + text


def _sub_second(ns: int) -> str:
    # Below one second Go switches to the largest unit that keeps an integer part.
    for unit, scale in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
        if ns >= scale:
            return _decimal(ns, scale) + unit
    raise AssertionError(ns)  # pragma: no cover - ns >= 1 here


def _decimal(value: int, scale: int) -> str:
    """value/scale with the fraction's trailing zeros dropped (Go prints 1.5s, not 1.500s)."""
    whole, frac = divmod(value, scale)
    if frac == 0:
        return str(whole)
    digits = len(str(scale)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")
