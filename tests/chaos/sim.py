"""Seeded simulated registers that record histories as kubemu.chaos.history.History does.

`plan(seed, ...)` draws the operations: each process does one thing at a time, invoked at `call`,
taking effect at `lin`, answered at `ret`; some answers are lost (info: applied or not, possibly
after the client gave up) and some definitely fail (never applied). `run(plan, register)` plays
them in time order against a register and returns the History and the final values.

`Register` is a correct linearizable register. The broken ones cheat only where the cheat is
certain to be observable in the history (they read the plan to choose), so "must fail" tests
cannot pass by luck: `LosingRegister` acknowledges one write it never applies, `StaleRegister`
answers one read with a value overwritten before the read was invoked.
"""
from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from kubemu.chaos.history import CAS, READ, SWAP, WRITE, History

APPLIED_INFO, LOST_INFO, OK, FAIL = "info-applied", "info-lost", "ok", "fail"


@dataclass
class Planned:
    id: int
    process: int
    f: str
    key: str
    call: float
    lin: float
    ret: float
    outcome: str
    new: str | None = None  # the value a write/swap/cas puts (unique per op; None: delete)
    input: object = None  # set when invoked (a cas's expected value depends on the state then)

    @property
    def applied(self) -> bool:
        return self.outcome in (OK, APPLIED_INFO)

    @property
    def writes(self) -> bool:
        return self.f != READ


def plan(seed: int, n_ops: int, *, keys=("a", "b", "c"), processes: int = 5, info_rate: float = 0.05,
         fail_rate: float = 0.03, cas_rate: float = 0.15, swap_rate: float = 0.1,
         delete_rate: float = 0.05) -> list[Planned]:
    rng = random.Random(seed)
    free = [0.0] * processes
    ops = []
    for i in range(n_ops):
        p = rng.randrange(processes)
        call = free[p] + rng.uniform(0, 1.5)
        ret = call + rng.expovariate(1.0) * rng.choice((0.1, 1, 4))
        free[p] = ret
        outcome = rng.choices((OK, APPLIED_INFO, LOST_INFO, FAIL),
                              (1 - info_rate - fail_rate, info_rate / 2, info_rate / 2, fail_rate))[0]
        # an unknown outcome may land after the client stopped waiting
        lin = rng.uniform(call, ret * 3 - 2 * call if outcome == APPLIED_INFO else ret)
        r = rng.random()
        f = READ if r < 0.45 else CAS if r < 0.45 + cas_rate else SWAP if r < 0.45 + cas_rate + swap_rate else WRITE
        new = None if f in (WRITE, SWAP) and rng.random() < delete_rate else f"v{i}"
        ops.append(Planned(i, p, f, rng.choice(keys), call, lin, ret, outcome, None if f == READ else new))
    return ops


class Register:
    def __init__(self, planned: list[Planned]):
        self.values: dict[str, str | None] = {}
        self.log: dict[str, list[Planned]] = {}  # per key, the writes applied, in order
        self.cheated: list[Planned] = []

    def apply(self, op: Planned):
        """Take `op` into effect now; its output."""
        old = self.values.get(op.key)
        if op.f == READ:
            return old
        if op.f == CAS:
            if old != op.input[0]:
                return False
            self._set(op)
            return True
        self._set(op)
        return old if op.f == SWAP else None

    def _set(self, op: Planned) -> None:
        self.values[op.key] = op.new
        self.log.setdefault(op.key, []).append(op)


def _acked(op: Planned) -> bool:
    return op.outcome == OK and op.f in (WRITE, SWAP)  # a cas's success is not known in advance


def _may_write(op: Planned) -> bool:
    return op.writes and op.outcome != FAIL


class LosingRegister(Register):
    """Acknowledges one plain write it never applies, chosen so that a read must notice: a later
    read of the key (invoked after the write returned) with no other write that could fall between."""

    def __init__(self, planned: list[Planned]):
        super().__init__(planned)
        self.victim = next((w for w in planned if _acked(w) and w.f == WRITE and w.new is not None
                            and _detecting_read(w, planned)), None)

    def apply(self, op: Planned):
        if op is self.victim:
            self.cheated.append(op)
            return None
        return super().apply(op)


def _detecting_read(w: Planned, planned: list[Planned]) -> bool:
    for r in planned:
        if r.f != READ or r.key != w.key or r.outcome != OK or not w.ret < r.call:
            continue
        if not any(o is not w and o.key == w.key and _may_write(o) and not (o.ret < w.call or r.ret < o.call)
                   for o in planned):
            return True
    return False


class LastWriteLosingRegister(LosingRegister):
    """Loses the last write of a key, all other writes to which returned before it was invoked:
    the final value then shows the loss (acked's check)."""

    def __init__(self, planned: list[Planned]):
        Register.__init__(self, planned)
        self.victim = None
        for w in planned:
            others = [o for o in planned if o is not w and o.key == w.key and _may_write(o)]
            if _acked(w) and w.new is not None and all(o.ret < w.call for o in others):
                self.victim = w


class StaleRegister(Register):
    """Answers one read with the value a completed write overwrote, where the overwriting write
    returned before the read was invoked and the stale value's write returned before that one was
    invoked: no linearization can explain it."""

    def apply(self, op: Planned):
        if op.f == READ and op.outcome == OK and not self.cheated:
            log = self.log.get(op.key, [])
            for i in range(len(log) - 1, 0, -1):
                new, old = log[i], log[i - 1]
                if (new.outcome == OK and new.ret < op.call and old.outcome == OK and old.ret < new.call
                        and old.new is not None):
                    self.cheated.append(op)
                    return old.new
        return super().apply(op)


def run(planned: list[Planned], register: Register, rng: random.Random | None = None) -> tuple[History, dict]:
    """Play the plan; a cas expects the value the key holds when it is invoked, or now and then
    another one (then it fails unless the key changes first)."""
    rng = rng or random.Random(0)
    now = [0.0]
    history = History(clock=lambda: now[0])
    queue: list = []
    for op in planned:
        heapq.heappush(queue, (op.call, 0, op.id, op))
        if op.applied:
            heapq.heappush(queue, (op.lin, 1, op.id, op))
        heapq.heappush(queue, (op.ret, 2, op.id, op))
    outputs: dict[int, object] = {}
    while queue:
        now[0], stage, _, op = heapq.heappop(queue)
        if stage == 0:
            if op.f == CAS:
                expected = register.values.get(op.key) if rng.random() < 0.7 else f"v{rng.randrange(op.id + 1)}"
                op.input = (expected, op.new)
            else:
                op.input = None if op.f == READ else op.new
            history.invoke(op.process, op.f, op.key, op.input)
        elif stage == 1:
            outputs[op.id] = register.apply(op)
        elif op.outcome == OK:
            history.ok(op.process, outputs[op.id])
        elif op.outcome == FAIL:
            history.fail(op.process, error="not executed")
        else:
            history.info(op.process, error="timed out")
    return history, dict(register.values)
