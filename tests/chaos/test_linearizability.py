"""kubemu/chaos/linearizability.py: accepts what an atomic register could do, rejects what it
could not (Knossos's and Porcupine's classic cases), treats unknown outcomes as "maybe", reports
an exhausted budget as UNKNOWN, and agrees with a brute-force reading of the definition."""
from __future__ import annotations

import itertools
import random

import pytest

from kubemu.chaos.history import CAS, FAIL, INFO, OK, READ, SWAP, WRITE, HistoryError, Operation
from kubemu.chaos.linearizability import _ILLEGAL, Verdict, check, step

from . import sim


def w(p, key, value, call, ret=None, status=OK):
    return Operation(p, WRITE, key, value, None, call, ret, INFO if ret is None else status)


def r(p, key, value, call, ret=None):
    return Operation(p, READ, key, None, value, call, ret, INFO if ret is None else OK)


def cas(p, key, expected, new, swapped, call, ret=None):
    return Operation(p, CAS, key, (expected, new), swapped, call, ret, INFO if ret is None else OK)


def swap(p, key, new, old, call, ret=None):
    return Operation(p, SWAP, key, new, old, call, ret, INFO if ret is None else OK)


def valid(history) -> bool:
    result = check(history)
    assert result.verdict is not Verdict.UNKNOWN
    return result.verdict is Verdict.VALID


# ------------------------------------------------------------------------------ known cases

def test_sequential_histories():
    assert valid([])
    assert valid([r(1, "k", None, 0, 1)])  # an absent key reads as None
    assert valid([w(1, "k", "a", 0, 1), r(1, "k", "a", 2, 3), w(1, "k", None, 4, 5), r(2, "k", None, 6, 7)])
    assert not valid([w(1, "k", "a", 0, 1), r(1, "k", None, 2, 3)])


def test_stale_read_after_completed_write_is_rejected_with_a_diagnosis():
    history = [w(1, "k", "a", 0, 1), w(1, "k", "b", 2, 3), r(2, "k", "a", 4, 5)]
    result = check(history)
    assert result.verdict is Verdict.INVALID
    [key] = result.problems
    assert key.key == "k" and key.stuck_on == history[2]
    assert key.linearization == history[:2] and key.state == "b"
    assert "not linearizable" in key.message and "read" in key.message and "'b'" in key.message
    assert key.message in str(result)


def test_concurrent_reads_may_see_either_value_but_not_go_back():
    # Knossos's classic: a write concurrent with two sequential reads
    assert valid([w(1, "k", "a", 0, 1), w(1, "k", "b", 2, 9), r(2, "k", "a", 3, 4), r(3, "k", "b", 5, 6)])
    assert not valid([w(1, "k", "a", 0, 1), w(1, "k", "b", 2, 9), r(2, "k", "b", 3, 4), r(3, "k", "a", 5, 6)])


def test_two_readers_seeing_concurrent_writes_in_opposite_orders_is_rejected():
    history = [w(1, "k", "a", 0, 10), w(2, "k", "b", 0, 10),
               r(3, "k", "a", 1, 2), r(3, "k", "b", 3, 4),
               r(4, "k", "b", 1, 2), r(4, "k", "a", 3, 4)]
    assert not valid(history)
    assert valid(history[:4]) and valid(history[:2] + history[4:])


def test_porcupine_register_examples():
    # Porcupine's TestRegisterModel: ok then bad
    ok_history = [w(0, "x", 100, 0, 100), r(1, "x", 100, 25, 75), r(2, "x", 0, 30, 60)]
    assert valid([w(9, "x", 0, -2, -1)] + ok_history)
    bad = [w(9, "x", 0, -2, -1), w(0, "x", 200, 0, 10), r(1, "x", 200, 30, 60), r(2, "x", 0, 40, 90)]
    assert not valid(bad)


def test_reads_of_values_never_written_or_written_elsewhere_are_rejected():
    assert not valid([w(1, "k", "a", 0, 1), r(2, "k", "zzz", 0, 5)])
    assert not valid([w(1, "x", "a", 0, 1), r(2, "y", "a", 2, 3)])
    assert valid([w(1, "x", "a", 0, 1), r(2, "y", None, 2, 3)])


def test_each_key_is_judged_alone():
    history = [w(1, "x", "a", 0, 1), r(2, "x", "a", 2, 3),  # fine
               w(1, "y", "a", 4, 5), w(1, "y", "b", 6, 7), r(2, "y", "a", 8, 9)]  # stale
    result = check(history)
    assert result.verdict is Verdict.INVALID
    assert [(k.key, k.verdict) for k in result.keys] == [("x", Verdict.VALID), ("y", Verdict.INVALID)]
    assert [k.key for k in result.problems] == ["y"]


def test_same_instant_invoke_and_return_count_as_concurrent():
    assert valid([w(1, "k", "a", 0, 5), r(2, "k", None, 5, 6)])
    assert not valid([w(1, "k", "a", 0, 5), r(2, "k", None, 5.000001, 6)])


def test_unknown_outcome_write_may_or_may_not_take_effect_but_not_before_its_invoke():
    assert valid([w(1, "k", "a", 0, 1), w(2, "k", "b", 2), r(3, "k", "b", 10, 11)])
    assert valid([w(1, "k", "a", 0, 1), w(2, "k", "b", 2), r(3, "k", "a", 10, 11)])
    # ... at any time later: after a read that did not see it
    assert valid([w(1, "k", "a", 0, 1), w(2, "k", "b", 2), r(3, "k", "a", 10, 11), r(3, "k", "b", 12, 13)])
    assert not valid([w(1, "k", "a", 0, 1), r(3, "k", "b", 2, 3), w(2, "k", "b", 5)])
    # once seen, it cannot be unseen
    assert not valid([w(1, "k", "a", 0, 1), w(2, "k", "b", 2), r(3, "k", "b", 10, 11), r(3, "k", "a", 12, 13)])


def test_failed_operations_never_took_effect():
    assert not valid([w(1, "k", "a", 0, 1, status=FAIL), r(2, "k", "a", 2, 3)])
    assert valid([w(1, "k", "a", 0, 1, status=FAIL), r(2, "k", None, 2, 3)])


def test_unknown_outcome_reads_are_dropped():
    assert valid([w(1, "k", "a", 0, 1), r(2, "k", "never-written", 2)])


def test_cas_including_409_conflicts():
    assert valid([w(1, "k", "a", 0, 1), cas(2, "k", "a", "b", True, 2, 3), r(1, "k", "b", 4, 5)])
    assert not valid([w(1, "k", "a", 0, 1), cas(2, "k", "x", "b", True, 2, 3)])  # nothing to swap
    # a precondition answered 409 while the key held exactly what it expected
    assert not valid([w(1, "k", "a", 0, 1), cas(2, "k", "a", "b", False, 2, 3)])
    assert valid([w(1, "k", "a", 0, 1), w(3, "k", "c", 1.5, 2.5), cas(2, "k", "a", "b", False, 2, 3)])
    # a create (expected absent) fails once the key exists
    assert valid([cas(1, "k", None, "a", True, 0, 1), cas(2, "k", None, "b", False, 2, 3)])
    # two concurrent CASes from one value: only one may win
    assert valid([w(1, "k", "a", 0, 1), cas(2, "k", "a", "b", True, 2, 5), cas(3, "k", "a", "c", False, 2, 5)])
    assert not valid([w(1, "k", "a", 0, 1), cas(2, "k", "a", "b", True, 2, 5), cas(3, "k", "a", "c", True, 2, 5)])


def test_unknown_outcome_cas_either_swapped_or_did_nothing():
    assert valid([w(1, "k", "a", 0, 1), cas(2, "k", "a", "b", None, 2), r(3, "k", "b", 5, 6)])
    assert valid([w(1, "k", "a", 0, 1), cas(2, "k", "a", "b", None, 2), r(3, "k", "a", 5, 6)])
    # it could only have swapped from "a": after "c" replaced "a" for good it cannot explain "b"
    assert not valid([w(1, "k", "c", 0, 1), cas(2, "k", "a", "b", None, 2), r(3, "k", "b", 5, 6)])


def test_swap_reports_what_it_replaced():
    assert valid([w(1, "k", "a", 0, 1), swap(2, "k", "b", "a", 2, 3), r(3, "k", "b", 4, 5)])
    assert not valid([w(1, "k", "a", 0, 1), swap(2, "k", "b", None, 2, 3)])
    # two concurrent swaps: one replaced the other's value
    assert valid([swap(1, "k", "a", None, 0, 5), swap(2, "k", "b", "a", 0, 5)])
    assert not valid([swap(1, "k", "a", None, 0, 5), swap(2, "k", "b", None, 0, 5)])
    assert valid([swap(1, "k", None, None, 0, 1)])  # a delete of an absent key


def test_malformed_histories_are_refused():
    with pytest.raises(HistoryError):
        check([w(1, "k", "a", 5, 1)])
    with pytest.raises(HistoryError):
        check([Operation(1, "increment", "k", 1, None, 0, 1, OK)])
    with pytest.raises(HistoryError):
        check([Operation(1, CAS, "k", "a", True, 0, 1, OK)])  # input not (expected, new)
    with pytest.raises(HistoryError):
        check([Operation(1, CAS, "k", ("a", "b"), "yes", 0, 1, OK)])


def test_an_exhausted_budget_is_an_explicit_unknown():
    # ten unknown writes open at once, read one after the other, then the first again: which
    # of them took effect when is a search over their subsets before it is ruled out
    history = [w(i, "k", i, 0) for i in range(10)] + [r(99, "k", i, 1 + 2 * i, 2 + 2 * i) for i in range(10)]
    history += [r(99, "k", 0, 30, 31), w(98, "other", 1, 0, 1)]
    result = check(history, max_steps=1000)
    assert result.verdict is Verdict.UNKNOWN
    assert {k.key: k.verdict for k in result.keys} == {"k": Verdict.UNKNOWN, "other": Verdict.VALID}
    assert "no verdict within 1000 search steps" in str(result)
    assert check(history).verdict is Verdict.INVALID  # with room enough it decides
    # a definite violation elsewhere outranks an unknown
    assert check(history + [r(5, "x", "ghost", 0, 1)], max_steps=1000).verdict is Verdict.INVALID


def test_unknown_writes_nobody_read_cost_little_to_rule_out():
    # 40 unknown writes whose values no read saw: taken in invoke order, 41 subsets, not 2^40
    history = [w(i, "k", f"unread{i}", i / 10) for i in range(40)]
    history += [w(50, "k", "a", 0, 1), cas(51, "k", "a", "b", False, 5, 6), r(52, "k", "b", 7, 8)]
    result = check(history, max_steps=20_000)
    assert result.verdict is Verdict.INVALID, str(result)
    # ... and one of them explains the failed cas
    assert check(history[:-1], max_steps=20_000).verdict is Verdict.VALID
    assert check(history[40:-1], max_steps=20_000).verdict is Verdict.INVALID


def test_a_valid_result_carries_a_complete_linearization():
    history = [w(1, "k", "a", 0, 10), r(2, "k", None, 1, 2), r(2, "k", "a", 3, 4), w(3, "k", "b", 5)]
    [key] = check(history).keys
    assert key.linearization[:2] == [history[1], history[0]]  # the read of None went first
    assert history[2] in key.linearization


# ------------------------------------------------------------------------------ brute force

def brute_force(history: list[Operation]) -> bool:
    """The definition, literally: some subset of the unknown-outcome operations and some order
    of them and the known ones that respects real time explains every output."""
    history = [op for op in history if op.status != FAIL and not (op.f == READ and op.status == INFO)]
    known = [op for op in history if op.status == OK]
    unknown = [op for op in history if op.status == INFO]
    for n in range(len(unknown) + 1):
        for chosen in itertools.combinations(unknown, n):
            for order in itertools.permutations(known + list(chosen)):
                if any(b.precedes(a) for i, a in enumerate(order) for b in order[i + 1:]):
                    continue
                state: dict = {}
                for op in order:
                    after = step(state.get(op.key), op)
                    if after is not _ILLEGAL:
                        state[op.key] = after
                        continue
                    break
                else:
                    return True
    return False


def small_random_history(rng: random.Random) -> list[Operation]:
    ops = []
    for _ in range(rng.randint(1, 6)):
        call = rng.randint(0, 8)
        ret = None if rng.random() < 0.2 else call + rng.randint(0, 4)
        status = INFO if ret is None else FAIL if rng.random() < 0.1 else OK
        key, value = rng.choice("xy"), rng.choice("ab")
        f = rng.choice((WRITE, WRITE, READ, READ, CAS, SWAP))
        if f == READ:
            ops.append(Operation(0, f, key, None, rng.choice(("a", "b", None)), call, ret, status))
        elif f == CAS:
            ops.append(Operation(0, f, key, (rng.choice(("a", "b", None)), value),
                                 rng.random() < 0.5 if status == OK else None, call, ret, status))
        elif f == SWAP:
            ops.append(Operation(0, f, key, value, rng.choice(("a", "b", None)), call, ret, status))
        else:
            ops.append(Operation(0, f, key, rng.choice((value, None)), None, call, ret, status))
    return ops


def test_agrees_with_brute_force_on_small_random_histories():
    rng = random.Random(2024)
    verdicts = {True: 0, False: 0}
    for _ in range(1500):
        history = small_random_history(rng)
        expected = brute_force(history)
        verdicts[expected] += 1
        assert valid(history) == expected, "\n".join(map(str, history))
    assert min(verdicts.values()) > 100  # both verdicts were exercised


# --------------------------------------------------------------------- simulated registers

@pytest.mark.parametrize("seed", range(20))
def test_histories_of_a_linearizable_register_pass(seed):
    planned = sim.plan(seed, 200, info_rate=0.08 if seed % 2 else 0.0)
    history, _ = sim.run(planned, sim.Register(planned), random.Random(seed))
    result = check(history.operations())
    assert result.verdict is Verdict.VALID, str(result)


def test_a_register_that_loses_an_acknowledged_write_fails():
    cheated = 0
    for seed in range(20):
        planned = sim.plan(seed, 200, keys=("a", "b"), processes=3)
        register = sim.LosingRegister(planned)
        history, _ = sim.run(planned, register, random.Random(seed))
        result = check(history.operations())
        if register.cheated:
            cheated += 1
            assert result.verdict is Verdict.INVALID, f"seed {seed}: lost {register.victim}"
        else:
            assert result.verdict is Verdict.VALID, str(result)
    assert cheated >= 10  # the cheat had its chance in most runs


def test_a_register_that_serves_a_stale_read_fails():
    cheated = 0
    for seed in range(20):
        planned = sim.plan(seed, 200)
        register = sim.StaleRegister(planned)
        history, _ = sim.run(planned, register, random.Random(seed))
        result = check(history.operations())
        if register.cheated:
            cheated += 1
            assert result.verdict is Verdict.INVALID, f"seed {seed}"
            [bad] = result.problems
            assert bad.key == register.cheated[0].key
        else:
            assert result.verdict is Verdict.VALID
    assert cheated >= 15


def test_two_thousand_operations_on_one_key_with_eight_clients():
    planned = sim.plan(42, 2000, keys=("k",), processes=8, info_rate=0.01)
    history, _ = sim.run(planned, sim.Register(planned), random.Random(1))
    assert check(history.operations()).verdict is Verdict.VALID
    planned = sim.plan(42, 2000, keys=("k",), processes=8, info_rate=0.01)
    register = sim.StaleRegister(planned)
    history, _ = sim.run(planned, register, random.Random(1))
    assert register.cheated and check(history.operations()).verdict is Verdict.INVALID
