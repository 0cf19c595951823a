"""Did a watch deliver what the store did, each change once, in order, with no gap, across
reconnects?

The truth is the store's history: every `Change` (revision, key, PUT value / DELETE) from the
first revision any watch starts at, in the store's order (revision, then the order of the keys a
multi-key txn wrote: etcd's sub-revisions), e.g. read back after the run with one watch from that
revision over the whole keyspace before anything is compacted.

A watch, as its consumer saw it, is a list of `WatchSession`s: one per stream it opened. A
session asked for changes from `start` (etcd's start_revision; an apiserver watch from
resourceVersion R starts at R + 1) and delivered `events`. A consumer that loses its stream opens
the next one after the last revision it saw (or later, from a bookmark: fine if nothing it watches
changed in between); a consumer told its revision was compacted (etcd ErrCompacted, the
apiserver's 410 Gone) lists again and marks the next session `relisted`: what changed between is
the list's business, not the watch's.

So the watch covers, without a break, from its first session's start to the last revision it
delivered (a relisted session starts a new stretch), and to `until` if the runner knows the watch
had caught up that far (it saw a later write of its own, or a bookmark). Within that cover every
change to a watched key must be delivered exactly once, each matching the store's change, in
the store's order; nothing outside it, nothing the store did not do, nothing from before the
session's start. `check_list` judges the relist itself: the state at its revision.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Hashable, Mapping, Sequence

from .history import PUT, Change, HistoryError

MISSED, DUPLICATE, OUT_OF_ORDER, PHANTOM, MISMATCH, OUTSIDE, BEFORE_START = (
    "missed", "duplicate", "out-of-order", "phantom", "mismatch", "outside", "before-start")
_SHOWN = 5  # violations of each kind spelt out in the summary


@dataclass
class WatchSession:
    start: int
    events: list[Change] = field(default_factory=list)
    relisted: bool = False


@dataclass(frozen=True)
class Violation:
    kind: str
    change: Change
    message: str


@dataclass
class WatchResult:
    name: str
    violations: list[Violation]
    delivered: int
    expected: int  # changes to watched keys inside the cover

    @property
    def ok(self) -> bool:
        return not self.violations

    def __str__(self) -> str:
        head = (f"watch {self.name}: {'ok' if self.ok else 'FAILED'} ({self.delivered} events delivered, "
                f"{self.expected} expected)")
        lines = [head]
        by_kind: dict[str, list[Violation]] = {}
        for v in self.violations:
            by_kind.setdefault(v.kind, []).append(v)
        for kind, found in by_kind.items():
            lines.append(f"  {len(found)} {kind}:")
            lines.extend(f"    {v.message}" for v in found[:_SHOWN])
            if len(found) > _SHOWN:
                lines.append(f"    ... and {len(found) - _SHOWN} more")
        return "\n".join(lines)


def _index(store: Sequence[Change]) -> dict[tuple[int, Hashable], int]:
    """(revision, key) -> position in the store's history; refuses a history out of order."""
    where: dict[tuple[int, Hashable], int] = {}
    last = 0
    for pos, change in enumerate(store):
        if change.revision < last:
            raise HistoryError(f"the store's history goes back from revision {last} to {change.revision}")
        if (change.revision, change.key) in where:
            raise HistoryError(f"the store's history changes {change.key!r} twice at revision {change.revision}")
        last = change.revision
        where[(change.revision, change.key)] = pos
    return where


def _same(delivered: Change, truth: Change, compare_values: bool) -> bool:
    if delivered.type != truth.type:
        return False
    return not compare_values or truth.type != PUT or delivered.value == truth.value


def check_watch(store: Sequence[Change], sessions: Sequence[WatchSession], *,
                watched: Callable[[Hashable], bool] = lambda key: True, until: int | None = None,
                compare_values: bool = True, name: str = "") -> WatchResult:
    """Judge one watch (its sessions in the order it opened them) against the store's history.
    `watched` says which keys it asked for (a prefix, a range); `compare_values=False` checks
    types and revisions only (for consumers that see transformed values)."""
    where = _index(store)
    violations: list[Violation] = []
    delivered: set[tuple[int, Hashable]] = set()
    covers: list[tuple[int, int]] = []
    last_pos = -1
    lo = hi = None
    for n, session in enumerate(sessions):
        if lo is None or session.relisted:
            if lo is not None:
                covers.append((lo, hi))
            lo, hi = session.start, session.start - 1
        for ev in session.events:
            what = f"session {n} (from revision {session.start}) delivered {ev}"
            ident = (ev.revision, ev.key)
            pos = where.get(ident)
            if not watched(ev.key):
                violations.append(Violation(OUTSIDE, ev, f"{what}: a key the watch did not ask for"))
            if ev.revision < session.start:
                violations.append(Violation(BEFORE_START, ev, f"{what}: older than the session's start"))
            if pos is None:
                violations.append(Violation(PHANTOM, ev, f"{what}: the store changed no such key then"))
                continue
            if not _same(ev, store[pos], compare_values):
                violations.append(Violation(MISMATCH, ev, f"{what}: the store did {store[pos]}"))
            if ident in delivered:
                violations.append(Violation(DUPLICATE, ev, f"{what}: delivered before"))
                continue
            if pos < last_pos:
                violations.append(Violation(OUT_OF_ORDER, ev, f"{what}: after {store[last_pos]}"))
            delivered.add(ident)
            last_pos = max(last_pos, pos)
            hi = max(hi, ev.revision)
    if lo is not None:
        covers.append((lo, max(hi, until or 0)))
    expected = 0
    for change in store:
        if not watched(change.key) or not any(a <= change.revision <= b for a, b in covers):
            continue
        expected += 1
        if (change.revision, change.key) not in delivered:
            violations.append(Violation(MISSED, change, f"never delivered: {change}"))
    return WatchResult(name, violations, sum(len(s.events) for s in sessions), expected)


def state_at(store: Sequence[Change], revision: int) -> dict[Hashable, object]:
    """Every key's value at `revision`, replaying the store's history (which must start at
    revision 1, or the state before it is taken as empty)."""
    state: dict[Hashable, object] = {}
    for change in store:
        if change.revision > revision:
            break
        if change.type == PUT:
            state[change.key] = change.value
        else:
            state.pop(change.key, None)
    return state


def check_list(store: Sequence[Change], revision: int, items: Mapping[Hashable, object], *,
               watched: Callable[[Hashable], bool] = lambda key: True, compare_values: bool = True,
               name: str = "") -> WatchResult:
    """Judge a list at `revision` (what a consumer relisted before a `relisted` session: the
    watched keys and their values) against the store's state then."""
    _index(store)
    truth = {k: v for k, v in state_at(store, revision).items() if watched(k)}
    violations = []
    for key in sorted(truth.keys() | items.keys(), key=repr):
        if key not in items:
            violations.append(Violation(MISSED, Change(revision, key, PUT, truth[key]),
                                        f"the list at revision {revision} lacks {key!r}"))
        elif key not in truth:
            violations.append(Violation(PHANTOM, Change(revision, key, PUT, items[key]),
                                        f"the list at revision {revision} has {key!r}, absent then"))
        elif compare_values and items[key] != truth[key]:
            violations.append(Violation(MISMATCH, Change(revision, key, PUT, items[key]),
                                        f"the list at revision {revision} has {key!r} = {items[key]!r}, "
                                        f"the store had {truth[key]!r}"))
    return WatchResult(name or f"list at {revision}", violations, len(items), len(truth))
