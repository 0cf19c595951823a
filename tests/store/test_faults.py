"""store.faults: the pure decisions behind the store's injected faults."""
from __future__ import annotations

import random

import pytest

from store import faults
from store._mvcc_requests import parse_request as parse_op
from store.faults import FaultState, apply, parse_request, peer_faults, truncation_plan
from store.mvcc import compact_op, lease_grant_op, lease_revoke_op, put_op, txn_op

MEMBERS = ["store-0", "store-1", "store-2"]


def state_after(*requests: dict) -> FaultState:
    state = FaultState()
    for params in requests:
        state = apply(state, parse_request(params))
    return state


def test_a_healthy_member_has_no_peer_faults_at_all():
    assert peer_faults(FaultState(), "store-0", MEMBERS) is None
    assert FaultState().healthy


def test_symmetric_partition_of_the_leader_cuts_both_directions():
    state = state_after({"action": "partition", "from": ["store-0"], "to": ["store-1", "store-2"],
                         "symmetric": True})
    rng = random.Random(1)
    leader = peer_faults(state, "store-0", MEMBERS)
    assert leader.hold("store-1", rng) is None and leader.hold("store-2", rng) is None
    assert not leader.accepts("store-1") and not leader.accepts("store-2")
    follower = peer_faults(state, "store-1", MEMBERS)
    assert follower.hold("store-0", rng) is None and not follower.accepts("store-0")
    assert follower.hold("store-2", rng) == 0.0 and follower.accepts("store-2")  # the majority side talks


def test_asymmetric_partition_cuts_one_direction_only():
    state = state_after({"action": "partition", "from": "store-0", "to": ["store-1"]})
    rng = random.Random(1)
    a, b = peer_faults(state, "store-0", MEMBERS), peer_faults(state, "store-1", MEMBERS)
    assert a.hold("store-1", rng) is None and a.accepts("store-1")
    assert b.hold("store-0", rng) == 0.0 and not b.accepts("store-0")
    assert peer_faults(state, "store-2", MEMBERS) is None


def test_partitions_add_up_and_heal_clears_everything():
    state = state_after({"action": "partition", "from": ["store-0"], "to": ["store-1"]},
                        {"action": "partition", "from": ["store-2"], "to": ["store-1"]},
                        {"action": "disk", "mode": "full"})
    assert state.cut == {("store-0", "store-1"), ("store-2", "store-1")}
    healed = apply(state, parse_request({"action": "heal"}))
    assert healed.healthy and peer_faults(healed, "store-1", MEMBERS) is None


def test_delay_with_jitter_is_netem_uniform_and_reorders():
    state = state_after({"action": "delay", "ms": 100, "jitter_ms": 50, "from": None, "to": ["store-1"]})
    pf = peer_faults(state, "store-0", MEMBERS)
    rng = random.Random(7)
    holds = [pf.hold("store-1", rng) for _ in range(200)]
    assert all(0.05 <= h <= 0.15 for h in holds)
    assert len(set(holds)) > 100
    # batches sent 10 ms apart arrive out of order: a later one is held much shorter
    arrivals = [i * 0.01 + h for i, h in enumerate(holds)]
    assert arrivals != sorted(arrivals)
    assert pf.hold("store-2", rng) == 0.0  # not a delayed link
    assert peer_faults(state, "store-1", MEMBERS) is None  # store-1 sends only to store-0/2: not delayed


def test_delay_jitter_never_goes_below_zero_and_ms_0_removes_it():
    state = state_after({"action": "delay", "ms": 10, "jitter_ms": 100})
    pf = peer_faults(state, "store-2", MEMBERS)
    rng = random.Random(3)
    assert min(pf.hold("store-0", rng) for _ in range(100)) == 0.0
    removed = apply(state, parse_request({"action": "delay", "ms": 0}))
    assert removed.healthy


def test_a_cut_link_wins_over_a_delay():
    state = state_after({"action": "delay", "ms": 10}, {"action": "partition", "from": ["store-0"], "to": ["store-1"]})
    assert peer_faults(state, "store-0", MEMBERS).hold("store-1", random.Random()) is None


@pytest.mark.parametrize("params, message", [
    ({}, "action: expected one of"),
    ({"action": "explode"}, "action: expected one of"),
    ({"action": "partition", "from": ["a"]}, "to: expected a list of member names"),
    ({"action": "partition", "from": [], "to": ["b"]}, "from: expected a list of member names"),
    ({"action": "partition", "from": ["a"], "to": ["a"]}, "a member is not cut from itself"),
    ({"action": "partition", "from": ["a"], "to": ["b"], "symmetric": "yes"}, "symmetric: expected a boolean"),
    ({"action": "delay"}, "ms: expected a number"),
    ({"action": "delay", "ms": -1}, "ms: expected a number"),
    ({"action": "delay", "ms": 1, "jitter_ms": "x"}, "jitter_ms: expected a number"),
    ({"action": "disk", "mode": "wet"}, "mode: expected one of ok, full, fsync-fail"),
    ({"action": "heal", "now": True}, "heal: unexpected parameter(s) now"),
    ("partition", "expected a map"),
])
def test_bad_requests_say_what_is_wrong(params, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_request(params)


def test_describe_is_what_the_wire_answers():
    state = state_after({"action": "partition", "from": ["store-0"], "to": ["store-1"]},
                        {"action": "delay", "ms": 5, "jitter_ms": 1, "to": ["store-2"]},
                        {"action": "disk", "mode": "fsync-fail"})
    assert faults.describe(state) == {
        "partitions": [{"from": "store-0", "to": "store-1"}],
        "delays": [{"from": "*", "to": ["store-2"], "ms": 5.0, "jitter_ms": 1.0}],
        "disk": "fsync-fail"}


def test_nospace_refuses_what_etcds_quota_charges_for():
    grows = [put_op(b"k", b"v"), lease_grant_op(7, 10),
             txn_op([], [put_op(b"k", b"v")], []), txn_op([], [], [put_op(b"k", b"v")])]
    frees = [{"op": "delete_range", "key": b"k"}, compact_op(3), lease_revoke_op(7),
             txn_op([], [{"op": "delete_range", "key": b"k"}], [{"op": "range", "key": b"k"}])]
    assert all(faults.grows_store(parse_op(r)) for r in grows)
    assert not any(faults.grows_store(parse_op(r)) for r in frees)


def test_power_loss_keeps_what_the_last_fsync_covered():
    sizes = {"000006.log": 5000, "000009.log": 300, "000010.log": 0}
    synced = {"000006.log": 5000, "000009.log": 120}
    # 000006 was fully synced; 000009 loses its tail; a log never synced keeps nothing
    assert truncation_plan(sizes, synced) == {"000009.log": 120}
    assert truncation_plan({"000011.log": 77}, synced) == {"000011.log": 0}
    assert truncation_plan({"000006.log": 4000}, synced) == {}  # never grows a file
