"""The nemesis's plan and its stepping, with a fake clock."""
from __future__ import annotations

import pytest

from kubemu.chaos import nemesis
from kubemu.chaos.nemesis import Heal, Inject, Nemesis, Shape

ONE_NODE = Shape(nodes=1, control_plane_nodes=1, store_replicas=3)
HA = Shape(nodes=4, control_plane_nodes=3, store_replicas=3)


def test_a_seed_names_one_plan_and_another_seed_another():
    a = nemesis.plan(120, nemesis.FAULTS, 1, HA)
    assert a == nemesis.plan(120, nemesis.FAULTS, 1, HA)
    assert a != nemesis.plan(120, nemesis.FAULTS, 2, HA)


def test_faults_follow_one_another_within_the_duration():
    faults = nemesis.plan(900, nemesis.FAULTS, 7, HA)
    assert len(faults) > 10
    assert faults[0].at == nemesis.WARMUP
    for before, after in zip(faults, faults[1:]):
        assert after.at - before.heal_at >= nemesis.SETTLE[0]
    assert faults[-1].heal_at <= 900
    assert {f.kind for f in faults} == set(nemesis.FAULTS)
    assert all(nemesis.HOLD[0] <= f.hold <= nemesis.HOLD[1] for f in faults)


def test_faults_the_cluster_cannot_take_are_never_planned():
    assert nemesis.applicable("node", ONE_NODE) and nemesis.applicable("partition", Shape(1, 1, 1))
    kinds = {f.kind for f in nemesis.plan(600, nemesis.FAULTS, 3, ONE_NODE)}
    assert "node" not in kinds and "partition" in kinds
    assert nemesis.plan(600, ("node",), 3, ONE_NODE) == []
    # a node fault on an HA cluster may take a control-plane node, or a worker
    targets = {f.target for f in nemesis.plan(2000, ("node",), 3, HA)}
    assert targets == {"worker", "control-plane"}
    assert {f.target for f in nemesis.plan(2000, ("node",), 3, Shape(2, 1, 1))} == {"worker"}


def test_the_faults_flag_is_checked():
    assert nemesis.parse_faults("kill, pause,kill") == ("kill", "pause")
    with pytest.raises(ValueError, match="unknown fault.*bogus"):
        nemesis.parse_faults("kill,bogus")
    with pytest.raises(ValueError):
        nemesis.parse_faults(" , ")


def test_the_nemesis_injects_heals_and_keeps_holds_when_the_caller_runs_late():
    f0 = nemesis.Fault(0, "kill", "workload", 3.0, 2.0)
    f1 = nemesis.Fault(1, "pause", "scheduler", 10.0, 1.0)
    nem = Nemesis([f0, f1])
    assert nem.due(0) == [] and nem.next_time() == 3.0
    assert nem.due(3.5) == [Inject(f0)]
    assert nem.due(5.0) == []             # started 0.5 s late: its hold still runs 2 s
    assert nem.due(5.5) == [Heal(f0)]
    assert nem.due(10.0) == []            # ... and what follows moves by as much
    assert nem.next_time() == 10.5
    assert nem.due(10.5) == [Inject(f1)]
    assert not nem.done
    assert nem.due(20) == [Heal(f1)]
    assert nem.done and nem.next_time() is None


def test_store_faults_need_the_replicas_that_leave_a_quorum_or_someone_to_talk_to():
    two, one = Shape(1, 1, 2), Shape(1, 1, 1)
    for kind in ("partition", "asymmetric", "membership"):
        assert "needs 3 or more" in nemesis.applicable(kind, two)
        assert nemesis.applicable(kind, HA) is None
    for kind in ("delay", "leader-transfer"):
        assert nemesis.applicable(kind, two) is None and "needs 2 or more" in nemesis.applicable(kind, one)
    for kind in ("disk", "power-loss"):
        assert nemesis.applicable(kind, one) is None
    kinds = {f.kind for f in nemesis.plan(2000, nemesis.FAULTS, 5, one)}
    assert kinds and not kinds & {"partition", "asymmetric", "membership", "delay", "leader-transfer"}
    assert set(nemesis.STORE_FAULTS) <= set(nemesis.FAULTS)


def test_the_new_faults_are_named_by_the_flag_and_planned_one_at_a_time():
    new = nemesis.parse_faults("delay,asymmetric,disk,power-loss,leader-transfer,membership")
    faults = nemesis.plan(600, new, 2, HA)
    assert {f.kind for f in faults} == set(new)
    assert all(f.target == f.kind for f in faults)
    for before, after in zip(faults, faults[1:]):
        assert after.at >= before.heal_at
