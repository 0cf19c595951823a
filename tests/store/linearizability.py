"""The store tests' history vocabulary over kubemu.chaos.linearizability, the one checker.

The model is one register per key (initially absent, None): ``put`` writes a value, ``delete``
makes the key absent, ``get`` reads, ``cas`` compares-and-sets (a txn such as "if value = a then
put b"). An op with ``return_time = INF`` has an unknown outcome (OutcomeUnknown): it may take
effect at any instant after its call, or never; a ``get`` with an unknown outcome tells nothing
and is dropped. An op that definitely failed must be left out of the history. The search, its
limits and its diagnosis are kubemu/chaos/linearizability.py's.

    ok, info = check(history)      # info: None if ok, else a dict describing the violation
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterable

from kubemu.chaos import linearizability as lin
from kubemu.chaos.history import CAS, INFO, OK, READ, WRITE, HistoryError, Operation

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
        return str(_operation(self))


def _operation(op: Op) -> Operation:
    kind = READ_KINDS.get(op.kind) or WRITE_KINDS.get(op.kind)
    if kind is None:
        raise HistoryError(f"unknown op kind {op.kind!r} in {op!r}")
    f, given, output = {"get": (READ, None, op.output), "put": (WRITE, op.value, None),
                        "delete": (WRITE, None, None), "cas": (CAS, op.value, op.output)}[kind]
    return Operation(op.client, f, op.key, given, output, op.call_time,
                     None if op.unknown else op.return_time, INFO if op.unknown else OK)


def _step(state, op: Op):
    """(legal, new state) of applying `op` to the register's `state`."""
    after = lin.step(state, _operation(op))
    return (False, state) if after is lin._ILLEGAL else (True, after)


def check_key(ops: list[Op], initial=None, max_steps: int = DEFAULT_MAX_STEPS) -> tuple[bool, dict | None]:
    """Check the ops of one key (all must share it) against a register starting at `initial`."""
    return check(ops, initial, max_steps)


def check(history: Iterable[Op], initial=None, max_steps: int = DEFAULT_MAX_STEPS) -> tuple[bool, dict | None]:
    """(True, None) if the history is linearizable, else (False, info) for the first key found
    not to be: info has "key", "linearized" (the longest partial linearization found), "stuck_on"
    (an op that cannot be placed after it), "state" and a readable "message".
    `initial` is every register's initial value. Raises Inconclusive past `max_steps` per key."""
    history = list(history)
    ops = [_operation(op) for op in history]
    back = {id(operation): op for operation, op in zip(ops, history)}
    result = lin.check(ops, initial=initial, max_steps=max_steps)
    for key in result.keys:
        if key.verdict is lin.Verdict.INVALID:
            return False, {"key": key.key, "linearized": [back[id(o)] for o in key.linearization],
                           "stuck_on": back[id(key.stuck_on)], "state": key.state, "steps": key.steps,
                           "message": key.message}
    if result.verdict is lin.Verdict.UNKNOWN:
        raise Inconclusive("\n".join(k.message for k in result.problems))
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
