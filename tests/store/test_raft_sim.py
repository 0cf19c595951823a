"""Deterministic simulation of store.raft (see raftsim.py for the model and the checks).

The normal run covers KUBEMU_SIM_SEEDS seeds (default 1000) in chunks, so a failure names its
seed; set e.g. KUBEMU_SIM_SEEDS=100000 for a long soak. Replay one seed with its trace:

    KUBEMU_SIM_SEED=1234 .venv/bin/python -m pytest tests/store/test_raft_sim.py -k replay -s
"""
from __future__ import annotations

import os

import pytest

from store.raft import Config, Entry, Role

from .raftsim import Checker, Sim, SimFailure, SimNode, SimParams

SEEDS = int(os.environ.get("KUBEMU_SIM_SEEDS", "1000"))
CHUNK = 50
REPLAY = "KUBEMU_SIM_SEED={seed} .venv/bin/python -m pytest tests/store/test_raft_sim.py -k replay -s"


def _run(seed: int) -> dict[str, int]:
    try:
        return Sim(seed).run()
    except SimFailure as exc:
        pytest.fail(f"{exc}\nreplay with: {REPLAY.format(seed=seed)}", pytrace=False)


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK), ids=lambda s: f"seeds{s}-{min(s + CHUNK, SEEDS) - 1}")
def test_sim_seeds(first):
    for seed in range(first, min(first + CHUNK, SEEDS)):
        _run(seed)


def test_replay():
    seed = os.environ.get("KUBEMU_SIM_SEED")
    if seed is None:
        pytest.skip("set KUBEMU_SIM_SEED=<seed> to replay one seed with its trace")
    sim = Sim(int(seed), trace=True)
    try:
        stats = sim.run()
    finally:
        print(f"seed {seed}: {sim.p}")
        print("\n".join(sim.trace or []))
    print(stats)


def test_a_seed_is_deterministic():
    a, b = Sim(7, trace=True), Sim(7, trace=True)
    assert a.run() == b.run()
    assert a.trace == b.trace


def test_the_fault_space_is_exercised():
    """Across a few seeds, every kind of trouble the simulator promises actually happens."""
    total: dict[str, int] = {}
    for seed in range(100):
        for k, v in _run(seed).items():
            total[k] = total.get(k, 0) + v
    for key in ("crashes", "elections", "snapshots_sent", "conf_changes", "transfers", "reads_checked"):
        assert total[key] > 10, (key, total)
    assert total["delivered"] < total["msgs"]  # some were dropped


def test_params_vary_with_the_seed():
    ps = [SimParams.for_seed(s) for s in range(200)]
    assert {p.nodes for p in ps} == {3, 5}
    assert any(p.spares for p in ps) and any(not p.raft.pre_vote for p in ps)
    assert any(not p.raft.check_quorum for p in ps) and any(p.raft.max_size_per_msg == 1 for p in ps)


# --- the checker itself must bite ---------------------------------------------------------------

class _FakeRaft:
    def __init__(self, id, term, state=Role.LEADER):
        from store._raft_log import RaftLog
        self.id, self.term, self.state, self.log = id, term, state, RaftLog()


def test_checker_catches_two_leaders_in_a_term():
    c = Checker()
    c.on_leader(_FakeRaft("a", 3))
    c.on_leader(_FakeRaft("a", 3))
    with pytest.raises(SimFailure, match="Election Safety"):
        c.on_leader(_FakeRaft("b", 3))


def test_checker_catches_a_leader_missing_a_committed_entry():
    c = Checker()
    c.max_commit, c.committed = 1, {1: (1, 3)}  # index 1 (term 1) was committed in term 3
    c.on_leader(_FakeRaft("a", 3))  # a leader of term 3 elected late need not hold it
    with pytest.raises(SimFailure, match="Leader Completeness"):
        c.on_leader(_FakeRaft("b", 4))


def test_checker_catches_divergent_state_machines():
    c = Checker()
    a, b = SimNode("a", [], None), SimNode("b", [], None)
    c.on_apply(a, Entry(1, 1, data=b"x"))
    with pytest.raises(SimFailure, match="State Machine Safety"):
        c.on_apply(b, Entry(1, 1, data=b"y"))
    with pytest.raises(SimFailure, match="applied 3 after 1"):
        c.on_apply(a, Entry(1, 3, data=b"z"))


def test_checker_catches_a_stale_read():
    c = Checker()
    node = SimNode("a", [], None)
    c.max_commit = 9
    node.reads[b"r"] = 7
    with pytest.raises(SimFailure, match="linearizability"):
        c.on_read(node, b"r", 6)


def test_checker_catches_log_matching_violations():
    c = Checker()
    r = _FakeRaft("a", 1)
    c.on_persist(r, [Entry(1, 1, data=b"x")])
    with pytest.raises(SimFailure, match="Log Matching"):
        c.on_persist(r, [Entry(1, 1, data=b"y")])


def test_sim_with_fixed_params_and_defaults():
    stats = Sim(3, SimParams(nodes=5, raft=Config())).run()
    assert stats["proposals"] > 0
