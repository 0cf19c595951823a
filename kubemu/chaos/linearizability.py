"""Is a client history linearizable? Each key is one register (see `history`); the history of a
key is linearizable if every operation can be given one instant inside its real-time interval
at which it took effect atomically, such that the register explains every output. Operations
whose outcome is unknown (info) may take effect at any instant after their invoke, or never;
failed ones never did and are left out, as are reads with an unknown outcome (they tell nothing).

The search is Wing & Gong's, with Lowe's memoisation, as Knossos's `wgl` and Porcupine do it:

* P-compositionality (Herlihy & Wing's locality; Horn & Kroening): the registers of different
  keys are independent objects, so the history splits per key and each part is searched alone.
  That turns one exponential search into many small ones.
* Per key, call and return entries sit in one doubly linked list in time order (an invoke at
  the same instant as a return counts as concurrent with it). Walking from the head, the first
  call whose operation the register can take next is linearized: applied, both its entries
  unlinked, the walk restarts at the head. Reaching a return means that operation was due and
  was not placed: undo the last choice (relink it, restore the state) and try the entry after
  it. The key is linearizable once no return entry is left (unknown-outcome operations have
  none: they never force a choice); not, once there is nothing left to undo.
* Memoisation: (set of operations linearized, register state) reached once need never be
  explored again; the set is a bit mask. With it, a history of a handful of clients costs about
  (operations) x (operations open at once) steps.
* Unknown-outcome writes whose value nothing observed are interchangeable and taken in invoke
  order only (see `_unseen`): crashed clients' writes, the bulk of a faulty run's info
  operations, then cost a few steps each instead of doubling the search.

Worst cases stay exponential in the operations open on one key at once (many clients on one
key with long operations, or many unknown-outcome writes whose values were read). A workload
keeps the search cheap as Jepsen's independent keys do: few clients per key, and a fresh key
after a few hundred operations. `max_steps` bounds the work per key; a key that runs out gets
the verdict UNKNOWN, reported as such: never a silent pass or fail.
"""
from __future__ import annotations

import enum
import itertools
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable

from .history import CAS, FUNCTIONS, INFO, OK, READ, SWAP, WRITE, HistoryError, Operation

DEFAULT_MAX_STEPS = 1_000_000  # per key: a few seconds of Python at worst
_ILLEGAL = object()


class Verdict(str, enum.Enum):
    VALID = "valid"
    INVALID = "invalid"
    UNKNOWN = "unknown"  # the search budget ran out


@dataclass
class KeyResult:
    key: Hashable
    verdict: Verdict
    operations: int
    steps: int
    # VALID: a complete linearization; INVALID: the longest partial one found
    linearization: list[Operation] = field(default_factory=list)
    stuck_on: Operation | None = None  # INVALID: an operation that cannot follow it
    state: Any = None  # the register's value after `linearization`
    message: str = ""


@dataclass
class Result:
    verdict: Verdict
    keys: list[KeyResult]

    @property
    def problems(self) -> list[KeyResult]:
        return [k for k in self.keys if k.verdict is not Verdict.VALID]

    def __str__(self) -> str:
        head = f"linearizability: {self.verdict.value} ({len(self.keys)} keys, " \
               f"{sum(k.operations for k in self.keys)} operations)"
        return "\n".join([head, *(k.message for k in self.problems)])


class _Unseen:
    """The register's state after a write whose value no operation observed (see `_unseen`)."""

    def __repr__(self) -> str:
        return "<a value nobody read>"


UNSEEN = _Unseen()


def step(state: Any, op: Operation) -> Any:
    """The register after `op`, or _ILLEGAL if the register at `state` cannot produce its output."""
    f = op.f
    if f == READ:
        return state if op.output == state else _ILLEGAL
    if f == WRITE:
        return op.input
    if f == SWAP:
        return op.input if op.status != OK or op.output == state else _ILLEGAL
    expected, new = op.input
    swapped = state == expected
    if op.status == OK:
        return (new if swapped else state) if op.output == swapped else _ILLEGAL
    # unknown outcome: a compare that fails leaves no trace, the same as never taking effect
    return new if swapped else _ILLEGAL


def _relevant(ops: Iterable[Operation]) -> list[Operation]:
    kept = []
    for op in ops:
        if op.f not in FUNCTIONS:
            raise HistoryError(f"unknown operation {op.f!r}: {op}")
        if op.f == CAS and not (isinstance(op.input, tuple) and len(op.input) == 2):
            raise HistoryError(f"a cas's input must be (expected, new): {op}")
        if op.f == CAS and op.status == OK and not isinstance(op.output, bool):
            raise HistoryError(f"a completed cas's output must be True or False: {op}")
        if op.ret is not None and op.ret < op.call:
            raise HistoryError(f"operation returns before it is invoked: {op}")
        if op.status == OK or (op.status == INFO and op.f != READ):
            kept.append(op)
    return kept


def _unseen(ops: list[Operation]) -> list[int]:
    """The unknown-outcome plain writes (write, swap) of one key whose value no operation
    observed (no read or swap returned it, no cas expected it), in timeline order.

    They are what makes a search explode: each may or may not have happened, at any time after
    its invoke. But no operation can tell their values apart (nor from any other unseen value:
    all map to UNSEEN), so they are interchangeable but for their invoke times, and a
    linearization that uses j of them may as well use the j invoked first, in that order (each
    is invoked no later than the one it replaces). The search takes them only in that order:
    j + 1 subsets to explore instead of 2^j."""
    observed = set()
    for op in ops:
        if op.f == CAS:
            observed.add(_hashable(op.input[0]))
        elif op.f in (READ, SWAP) and op.status == OK:
            observed.add(_hashable(op.output))
    return sorted((i for i, op in enumerate(ops) if op.status == INFO and op.f in (WRITE, SWAP)
                   and _hashable(op.input) not in observed), key=lambda i: (ops[i].call, i))


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


class _Entry:
    __slots__ = ("op", "is_call", "match", "prev", "next")

    def __init__(self, op: int, is_call: bool):
        self.op = op
        self.is_call = is_call
        self.match: _Entry | None = None  # a call's return entry (None: outcome unknown)
        self.prev: _Entry | None = None
        self.next: _Entry | None = None

    def unlink(self) -> None:
        self.prev.next = self.next
        if self.next is not None:
            self.next.prev = self.prev

    def relink(self) -> None:
        self.prev.next = self
        if self.next is not None:
            self.next.prev = self


def _search(ops: list[Operation], initial: Any, max_steps: int) -> KeyResult:
    """Search one key's operations (already filtered by `_relevant`) for a linearization."""
    key = ops[0].key if ops else None
    head = _Entry(-1, False)
    calls: dict[int, _Entry] = {}
    tail = head
    timeline = sorted(itertools.chain(((op.call, 0, i) for i, op in enumerate(ops)),
                                      ((op.ret, 1, i) for i, op in enumerate(ops) if op.ret is not None)))
    for _, is_return, i in timeline:
        entry = _Entry(i, not is_return)
        if is_return:
            calls[i].match = entry
        else:
            calls[i] = entry
        entry.prev, tail.next = tail, entry
        tail = entry
    due = sum(op.ret is not None for op in ops)  # operations that must be linearized
    unseen = _unseen(ops)
    is_unseen = set(unseen)
    taken = 0  # how many of `unseen` are linearized: always the first ones
    seen: set[tuple[int, Any]] = set()
    stack: list[tuple[_Entry, Any]] = []
    state, linearized, steps = initial, 0, 0
    deepest: tuple[list[int], int, Any] | None = None
    entry = head.next
    while due:
        steps += 1
        if steps > max_steps:
            return KeyResult(key, Verdict.UNKNOWN, len(ops), steps - 1, message=(
                f"key {key!r}: no verdict within {max_steps} search steps ({len(ops)} operations); "
                "raise the budget or shorten the run"))
        if entry.is_call:
            if entry.op in is_unseen:
                after = UNSEEN if unseen[taken] == entry.op else _ILLEGAL
            else:
                after = step(state, ops[entry.op])
            if after is not _ILLEGAL:
                marked = linearized | (1 << entry.op)
                if (marked, after) not in seen:
                    seen.add((marked, after))
                    stack.append((entry, state))
                    state, linearized = after, marked
                    entry.unlink()
                    if entry.match is not None:
                        entry.match.unlink()
                        due -= 1
                    taken += entry.op in is_unseen
                    entry = head.next
                    continue
            entry = entry.next
            continue
        # a return entry: its operation was due and could not be placed before it
        if deepest is None or len(stack) > len(deepest[0]):
            deepest = ([e.op for e, _ in stack], entry.op, state)
        if not stack:
            break
        entry, state = stack.pop()
        linearized &= ~(1 << entry.op)
        taken -= entry.op in is_unseen
        if entry.match is not None:
            entry.match.relink()
            due += 1
        entry.relink()
        entry = entry.next
    else:
        return KeyResult(key, Verdict.VALID, len(ops), steps, [ops[e.op] for e, _ in stack], None, state,
                         f"key {key!r}: linearizable")
    order, stuck, at = deepest
    shown = "\n    ".join(str(ops[i]) for i in order[-10:]) or "(nothing)"
    more = f" (the last 10 of {len(order)})" if len(order) > 10 else ""
    message = (f"key {key!r} is not linearizable: the longest order found{more}\n    {shown}\n"
               f"  leaves the register at {at!r}, and no order lets this operation take effect "
               f"before it returned:\n    {ops[stuck]}")
    return KeyResult(key, Verdict.INVALID, len(ops), steps, [ops[i] for i in order], ops[stuck], at, message)


def check(ops: Iterable[Operation], *, initial: Any = None, max_steps: int = DEFAULT_MAX_STEPS) -> Result:
    """Check every key of the history; `initial` is every register's value before it (None:
    absent), `max_steps` the search budget per key. The verdict is INVALID if any key is,
    else UNKNOWN if any key ran out of budget, else VALID."""
    per_key: dict[Hashable, list[Operation]] = {}
    for op in _relevant(ops):
        per_key.setdefault(op.key, []).append(op)
    results = [_search(per_key[k], initial, max_steps) for k in sorted(per_key, key=repr)]
    verdicts = {r.verdict for r in results}
    verdict = next((v for v in (Verdict.INVALID, Verdict.UNKNOWN) if v in verdicts), Verdict.VALID)
    return Result(verdict, results)
