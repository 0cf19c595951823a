"""Is every acknowledged write still there, or superseded? Is each where the store says it was?

Two checks over a client history (see `history`; written values unique per write):

`check_acked(ops, final)`: `final` is what a read of every key gave after the run (absent keys
missing). For each key, the final value must have been written by some write that was not
known to fail (ok or info), and every acknowledged write (an ok write or swap, a cas that
swapped) must be that write or be superseded by it: the final value's write must be able to
come after it (it did not return before the acknowledged one was invoked). A final value
nobody wrote is a phantom; an acknowledged write whose value is gone with only older writes to
explain the final value is lost. This is Jepsen's "set" check for a register, and the one
that power loss and a leader that acks before a quorum has the entry fail.

`check_revisions(ops, store)`: `store` is the store's history of `Change`s from revision
`since` on. Each acknowledged write that reported its revision must be in it at that revision
with its value (acked at revision R means the change happened at R, even if later ones
overwrote it), and each read that reported a mod_revision must have seen the value the store
holds for that revision.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Mapping, Sequence

from .history import CAS, DELETE, FAIL, OK, PUT, READ, Change, Operation

LOST, PHANTOM, WRONG_REVISION = "lost", "phantom", "wrong-revision"


@dataclass(frozen=True)
class Violation:
    kind: str
    key: Hashable
    message: str
    op: Operation | None = None


@dataclass
class AckedResult:
    violations: list[Violation]
    checked: int  # acknowledged writes (and, for revisions, reads) held against the truth

    @property
    def ok(self) -> bool:
        return not self.violations

    def __str__(self) -> str:
        head = f"acknowledged writes: {'ok' if self.ok else 'FAILED'} ({self.checked} checked)"
        return "\n".join([head, *(f"  {v.kind}: {v.message}" for v in self.violations)])


def _acknowledged(op: Operation) -> bool:
    return op.status == OK and op.writes and (op.f != CAS or op.output is True)


def _may_have_written(op: Operation) -> bool:
    return op.writes and op.status != FAIL and not (op.f == CAS and op.status == OK and op.output is not True)


def check_acked(ops: Iterable[Operation], final: Mapping[Hashable, Any], *, initial: Any = None) -> AckedResult:
    """Every key written in `ops` against its value in `final` (a key missing there is absent);
    `initial` is every key's value before the history (None: absent)."""
    writes: dict[Hashable, list[Operation]] = {}
    for op in ops:
        if op.writes:  # keys only failed writes touched are judged too: their values are phantoms
            writes.setdefault(op.key, [])
        if _may_have_written(op):
            writes[op.key].append(op)
    violations, checked = [], 0
    for key in sorted(writes, key=repr):
        now = final.get(key)
        makers = [w for w in writes[key] if w.new_value == now]
        acked = [w for w in writes[key] if _acknowledged(w)]
        checked += len(acked)
        if not makers and now != initial:
            violations.append(Violation(PHANTOM, key, f"{key!r} holds {now!r}, which no write made"))
            continue
        for w in acked:
            if w.new_value == now or any(m is not w and not m.precedes(w) for m in makers):
                continue
            explained = ("its value before any write" if not makers
                         else "only by writes that returned before it was invoked")
            violations.append(Violation(LOST, key, f"acknowledged {w} is gone: {key!r} holds {now!r}, "
                                                   f"written {explained}", w))
    return AckedResult(violations, checked)


def check_revisions(ops: Iterable[Operation], store: Sequence[Change], *, since: int = 1) -> AckedResult:
    """Acknowledged writes and reads that reported a revision >= `since`, against the store's
    history from `since` on (older revisions may have been compacted: not judged)."""
    truth = {(c.revision, c.key): c for c in store}
    violations, checked = [], 0
    for op in ops:
        if op.revision is None or op.revision < since or not (_acknowledged(op) or (op.status == OK and op.f == READ)):
            continue
        checked += 1
        change = truth.get((op.revision, op.key))
        if op.f == READ:
            if change is not None and change.type == PUT and change.value == op.output:
                continue
            did = f"the store did {change}" if change else f"the store did not change {op.key!r} then"
            violations.append(Violation(WRONG_REVISION, op.key, f"{op} saw revision {op.revision}, but {did}", op))
            continue
        want = Change(op.revision, op.key, PUT if op.new_value is not None else DELETE, op.new_value)
        if change != want:
            did = f"the store did {change}" if change else f"the store has no change of {op.key!r} then"
            violations.append(Violation(LOST, op.key, f"{op} was acknowledged at revision {op.revision}, "
                                                      f"but {did}", op))
    return AckedResult(violations, checked)
