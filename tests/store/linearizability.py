"""A linearizability checker for histories of a key-value store, for tests.

The model is one register per key (initially absent, None): ``put`` writes a value, ``delete``
makes the key absent, ``get`` reads, ``cas`` compares-and-sets (a txn such as "if value = a then
put b"). A history is a list of `Op`s, each with the real-time interval [call_time, return_time]
its client saw. It is linearizable if every op can be given one instant inside its interval at
which it took effect, such that the register semantics explain every output.

Unknown outcomes (a write that timed out, OutcomeUnknown) are modelled as such: an op with
``return_time = INF`` may take effect at any instant after its call, or never. A ``get`` whose
outcome is unknown tells nothing and is dropped; a ``cas`` whose outcome is unknown has
``output=None`` (either branch may have happened). An op that definitely failed (NotLeader,
Unavailable: not executed) must simply be left out of the history.

Algorithm: Wing & Gong's search over "which op takes effect next", with Lowe's memoisation of
(set of ops linearized so far, register state) and P-compositionality (Horn & Kroening; also
Porcupine): the register of one key is independent of the others, so the history is split per
key and each part checked alone. Per key the search is the usual one on a doubly linked list of
call/return entries sorted by time (a call at the same instant as a return is taken as concurrent
with it, the permissive reading): take the first call that can go next, backtrack when the
earliest pending return is reached with its op not linearized. A part succeeds when every op with
a known outcome is linearized (unknown-outcome ops may be left out: that is "never").

Limits: the search is exponential in the worst case. With memoisation it is roughly linear in
the number of ops times the number of ops concurrently open, for histories like those a handful
of clients produce, so thousands of ops per key are fine. Many unknown-outcome writes open at once
on one key, with a read that none of them explains, can make it explode: `max_steps` (per key)
bounds the work and `Inconclusive` is raised when it runs out (never a silent pass or fail).

    ok, info = check(history)      # info: None if ok, else a dict describing the violation
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable

INF = math.inf
DEFAULT_MAX_STEPS = 5_000_000

WRITE_KINDS = {"put": "put", "write": "put", "delete": "delete", "del": "delete", "cas": "cas"}
READ_KINDS = {"get": "get", "read": "get"}


class Inconclusive(Exception):
    """The search ran out of `max_steps` before deciding."""


@dataclass(frozen=True)
class Op:
    """One operation of a history.

    kind    "put"/"write" (value: the value written), "delete", "get"/"read" (output: the value
            read, None for an absent key), "cas" (value: (expected, new); output: True if it
            swapped, False if not, None if unknown)
    key     any hashable: each key is an independent register
    return_time  INF when the outcome is unknown
    """
    client: Any
    kind: str
    key: Hashable
    value: Any = None
    output: Any = None
    call_time: float = 0.0
    return_time: float = INF

    @property
    def unknown(self) -> bool:
        return self.return_time == INF

    def __str__(self) -> str:
        end = "?" if self.unknown else f"{self.return_time:.6g}"
        what = {"put": f"put({self.value!r})", "write": f"put({self.value!r})", "delete": "delete()",
                "del": "delete()", "get": f"get() -> {self.output!r}", "read": f"get() -> {self.output!r}",
                "cas": f"cas({self.value!r}) -> {self.output!r}"}.get(self.kind, f"{self.kind}({self.value!r})")
        return f"[{self.call_time:.6g}, {end}] client {self.client}: {self.key!r} {what}"


def _step(state, op: Op):
    """(legal, new state) of applying `op` to the register's `state`."""
    kind = op.kind
    if kind in READ_KINDS:
        return state == op.output, state
    kind = WRITE_KINDS[kind]
    if kind == "put":
        return True, op.value
    if kind == "delete":
        return True, None
    expected, new = op.value
    swapped = state == expected
    if op.output is not None and bool(op.output) != swapped:
        return False, state
    return True, (new if swapped else state)


class _Node:
    __slots__ = ("id", "is_call", "match", "prev", "next")

    def __init__(self, op_id: int, is_call: bool):
        self.id = op_id
        self.is_call = is_call
        self.match: _Node | None = None  # a call's return entry
        self.prev: _Node | None = None
        self.next: _Node | None = None


def _lift(call: _Node) -> None:
    call.prev.next = call.next
    if call.next is not None:
        call.next.prev = call.prev
    ret = call.match
    ret.prev.next = ret.next
    if ret.next is not None:
        ret.next.prev = ret.prev


def _unlift(call: _Node) -> None:
    ret = call.match
    ret.prev.next = ret
    if ret.next is not None:
        ret.next.prev = ret
    call.prev.next = call
    if call.next is not None:
        call.next.prev = call


def _validate(history: Iterable[Op]) -> list[Op]:
    ops = []
    for op in history:
        if op.kind not in WRITE_KINDS and op.kind not in READ_KINDS:
            raise ValueError(f"unknown op kind {op.kind!r} in {op}")
        if not op.call_time <= op.return_time:
            raise ValueError(f"op returns before it is called: {op}")
        if op.kind in READ_KINDS and op.unknown:
            continue  # a read whose answer never came tells nothing
        if WRITE_KINDS.get(op.kind) == "cas" and not (isinstance(op.value, tuple) and len(op.value) == 2):
            raise ValueError(f"a cas op's value must be (expected, new): {op}")
        ops.append(op)
    return ops


def check_key(ops: list[Op], initial=None, max_steps: int = DEFAULT_MAX_STEPS) -> tuple[bool, dict | None]:
    """Check the ops of one key (all must share it) against a register starting at `initial`."""
    n = len(ops)
    entries = sorted(itertools.chain(((op.call_time, 0, i) for i, op in enumerate(ops)),
                                     ((op.return_time, 1, i) for i, op in enumerate(ops))))
    head = _Node(-1, False)
    calls_by_id: dict[int, _Node] = {}
    prev = head
    for _t, is_return, i in entries:
        node = _Node(i, not is_return)
        if is_return:
            calls_by_id[i].match = node
        else:
            calls_by_id[i] = node
        node.prev, prev.next = prev, node
        prev = node
    bits = [1 << i for i in range(n)]
    finite = [not op.unknown for op in ops]
    left = sum(finite)  # ops with a known outcome not linearized yet
    seen: set[tuple[int, Any]] = set()
    stack: list[tuple[_Node, Any]] = []
    state = initial
    linearized = 0
    node = head.next
    steps = 0
    best_depth, best = -1, None
    while left:
        steps += 1
        if steps > max_steps:
            raise Inconclusive(f"key {ops[0].key!r}: no decision within {max_steps} steps ({n} ops)")
        if node.is_call:
            op = ops[node.id]
            legal, new_state = _step(state, op)
            if legal:
                marked = linearized | bits[node.id]
                memo = (marked, new_state)
                if memo not in seen:
                    seen.add(memo)
                    stack.append((node, state))
                    state, linearized = new_state, marked
                    left -= finite[node.id]
                    _lift(node)
                    node = head.next
                    continue
            node = node.next
        else:
            # the earliest pending return: its op should have taken effect by now but cannot
            if len(stack) > best_depth:
                best_depth = len(stack)
                best = ([ops[c.id] for c, _ in stack], ops[node.id], state)
            if not stack:
                break
            node, state = stack.pop()
            linearized &= ~bits[node.id]
            left += finite[node.id]
            _unlift(node)
            node = node.next
    else:
        return True, None
    order, stuck, at_state = best
    tail = "\n  ".join(str(op) for op in order[-10:]) or "(nothing)"
    message = (f"key {stuck.key!r} is not linearizable: after at best {len(order)} op(s), ending with\n  "
               f"{tail}\nthe register holds {at_state!r}, and no order lets this op take effect before "
               f"it returned:\n  {stuck}")
    return False, {"key": stuck.key, "linearized": order, "stuck_on": stuck, "state": at_state,
                   "steps": steps, "message": message}


def check(history: Iterable[Op], initial=None, max_steps: int = DEFAULT_MAX_STEPS) -> tuple[bool, dict | None]:
    """(True, None) if the history is linearizable, else (False, info) for the first key found
    not to be: info has "key", "linearized" (the longest partial linearization found), "stuck_on"
    (an op that cannot be placed after it), "state" and a readable "message".
    `initial` is every register's initial value. Raises Inconclusive past `max_steps` per key."""
    per_key: dict[Hashable, list[Op]] = {}
    for op in _validate(history):
        per_key.setdefault(op.key, []).append(op)
    for key in sorted(per_key, key=repr):
        ok, info = check_key(per_key[key], initial, max_steps)
        if not ok:
            return False, info
    return True, None


# ------------------------------------------------------------------------------- recording

@dataclass
class _Pending:
    client: Any
    kind: str
    key: Hashable
    value: Any
    call_time: float
    done: bool = field(default=False)


class History:
    """Records a history as clients run (thread- and task-safe enough: appends only).

        h = History()
        call = h.call(client_id, "put", key, value)
        try: await store.put(key, value)
        except OutcomeUnknown: h.unknown(call)      # may or may not have taken effect
        except Unavailable: h.failed(call)          # definitely not executed: left out
        else: h.ok(call)
    Times come from `clock` (time.monotonic by default)."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.ops: list[Op] = []

    def call(self, client, kind: str, key, value=None) -> _Pending:
        return _Pending(client, kind, key, value, self.clock())

    def ok(self, call: _Pending, output=None) -> Op:
        return self._finish(call, output, self.clock())

    def unknown(self, call: _Pending, output=None) -> Op:
        return self._finish(call, output, INF)

    def failed(self, call: _Pending) -> None:
        call.done = True

    def _finish(self, call: _Pending, output, return_time: float) -> Op:
        if call.done:
            raise RuntimeError("this op was finished already")
        call.done = True
        op = Op(call.client, call.kind, call.key, call.value, output, call.call_time, return_time)
        self.ops.append(op)
        return op

    def check(self, **kwargs) -> tuple[bool, dict | None]:
        return check(self.ops, **kwargs)
