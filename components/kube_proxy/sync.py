"""When kube-proxy syncs its rules: client-go's BoundedFrequencyRunner as kube-proxy drives it,
as a state machine on a clock the caller passes in.

- Nothing before the informers have synced and the node's podCIDR is known (`initialized`).
- A change asks for a sync; syncs start at most once per `min_period` (--min-sync-period), so
  a burst of changes becomes one transaction.
- The first sync, every `full_period` (--sync-period) and the one after a failed apply are
  full; the rest are partial. A failure is retried with a doubling delay (1 s … 30 s).
- The EndpointSlices' `endpoints.kubernetes.io/last-change-trigger-time` stamps noted since
  the last good sync become the network programming latencies of the next good one, sync end
  minus stamp (kube-proxy's `network_programming_duration_seconds`). The clock is wall time:
  the stamps are.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from components.controllers.podutil import parse_time
from kubemu.api.service import LAST_CHANGE_TRIGGER_TIME as TRIGGER_TIME_ANNOTATION

RETRY_FIRST, RETRY_MAX = 1.0, 30.0


def trigger_time(slice_: dict) -> float | None:
    """The slice's last-change-trigger-time as epoch seconds, None when absent or unreadable."""
    meta = slice_.get("metadata") if isinstance(slice_, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(annotations, dict):
        return None
    return parse_time(annotations.get(TRIGGER_TIME_ANNOTATION))


@dataclass(frozen=True)
class Decision:
    full: bool


@dataclass
class SyncRunner:
    min_period: float
    full_period: float
    started_at: float = float("-inf")  # triggers before the proxy started are not its latency
    initialized: bool = False
    requested: bool = False
    need_full: bool = True
    last_start: float | None = None
    last_full: float | None = None
    retry_at: float | None = None
    failures: int = 0
    running: bool = False
    triggers: list[float] = field(default_factory=list)  # noted, not yet programmed
    _in_flight: list[float] = field(default_factory=list)

    def request(self) -> None:
        self.requested = True

    def note_slice(self, old_trigger: float | None, new_trigger: float | None) -> None:
        """A slice was added, changed or deleted (old/new: its trigger times). A trigger time
        counts once, and only when it is newer than the proxy (kube-proxy's trackerStartTime):
        an unchanged stamp is an update that moved no endpoint."""
        self.requested = True
        if new_trigger is not None and new_trigger != old_trigger and new_trigger >= self.started_at:
            self.triggers.append(new_trigger)

    def _earliest(self) -> float:
        earliest = self.last_start + self.min_period if self.last_start is not None else float("-inf")
        if self.retry_at is not None:
            earliest = max(earliest, self.retry_at)
        return earliest

    def _full_due(self) -> float:
        return self.last_full + self.full_period if self.last_full is not None else float("-inf")

    def due(self, now: float) -> Decision | None:
        """Whether a sync starts now, and whether it is full."""
        if not self.initialized or self.running or now < self._earliest():
            return None
        full = self.need_full or now >= self._full_due()
        if not (full or self.requested or self.retry_at is not None):
            return None
        return Decision(full)

    def next_wakeup(self, now: float, also: float | None = None) -> float | None:
        """When `due` may next say yes without a new request (`also`: another deadline, e.g. a
        stale chain's deletion, which asks for a sync when reached)."""
        if not self.initialized or self.running:
            return None
        wants = [self._full_due()]
        if self.requested or self.need_full or self.retry_at is not None:
            wants.append(now)
        if also is not None:
            wants.append(also)
        return max(min(wants), self._earliest())

    def start(self, now: float) -> None:
        self.running, self.requested, self.last_start = True, False, now
        self._in_flight, self.triggers = self.triggers, []

    def finished(self, now: float, ok: bool, full: bool) -> list[float]:
        """Record a sync's end; the network programming latencies it achieved (seconds)."""
        self.running = False
        if not ok:
            self.need_full = True
            self.retry_at = now + min(RETRY_FIRST * 2 ** self.failures, RETRY_MAX)
            self.failures += 1
            self.triggers = self._in_flight + self.triggers
            self._in_flight = []
            return []
        self.retry_at, self.failures = None, 0
        if full:
            self.need_full, self.last_full = False, now
        done, self._in_flight = self._in_flight, []
        return [max(0.0, now - t) for t in done]
