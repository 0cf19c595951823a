"""Which pods the scheduler takes, which changes wake it, and the Unschedulable status patch."""
from __future__ import annotations

import copy

import pytest

from components.scheduler import triage
from kubemu.api.patch import apply_patch, schema_for
from tests.components.scheduling.test_filters import node, pod


@pytest.mark.parametrize("change, wanted", [
    (lambda p: None, True),
    (lambda p: p["spec"].update(schedulerName="default-scheduler"), True),
    (lambda p: p["spec"].update(schedulerName="my-scheduler"), False),
    (lambda p: p["spec"].update(nodeName="n1"), False),
    (lambda p: p["metadata"].update(deletionTimestamp="2024-01-01T00:00:00Z"), False),
    (lambda p: p.update(status={"phase": "Failed"}), False),
    (lambda p: p.update(status={"phase": "Pending"}), True),
    (lambda p: p["spec"].update(schedulingGates=[{"name": "wait"}]), False),
])
def test_needs_scheduling(change, wanted):
    p = pod()
    change(p)
    assert triage.needs_scheduling(p) is wanted


def test_status_writes_are_not_pod_changes_spec_and_labels_are():
    old = pod()
    new = copy.deepcopy(old)
    new["status"] = {"conditions": [{"type": "PodScheduled", "status": "False"}]}
    new["metadata"]["resourceVersion"] = "9"
    assert not triage.pod_changed(old, new)
    new["metadata"]["labels"] = {"a": "b"}
    assert triage.pod_changed(old, new)
    new = copy.deepcopy(old)
    new["spec"]["tolerations"] = [{"operator": "Exists"}]
    assert triage.pod_changed(old, new)


def test_heartbeats_are_not_node_changes_what_scheduling_reads_is():
    old = node("a")
    beat = copy.deepcopy(old)
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2024-01-01T00:00:10Z"
    assert not triage.node_changed(old, beat)
    for change in (lambda n: n["spec"].update(unschedulable=True),
                   lambda n: n["spec"].update(taints=[{"key": "k", "effect": "NoSchedule"}]),
                   lambda n: n["metadata"]["labels"].update(disk="ssd"),
                   lambda n: n["status"]["allocatable"].update(cpu="8"),
                   lambda n: n["status"]["conditions"][0].update(status="False")):
        new = copy.deepcopy(old)
        change(new)
        assert triage.node_changed(old, new)


def test_unschedulable_patch_merges_by_type_and_keeps_the_transition_time():
    p = pod()
    p["kind"] = "Pod"
    p["metadata"]["resourceVersion"] = "7"
    p["status"] = {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}]}
    patch = triage.unschedulable_patch(p, "0/1 nodes are available: 1 Insufficient cpu.", "T1")
    assert patch["metadata"] == {"resourceVersion": "7"}   # a precondition: never mark a pod bound since
    p = apply_patch(p, patch, "strategic", schema_for("Pod"))
    assert p["status"]["phase"] == "Pending"
    assert p["status"]["conditions"] == [
        {"type": "Ready", "status": "False"},
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 nodes are available: 1 Insufficient cpu.", "lastTransitionTime": "T1"}]
    assert triage.unschedulable_patch(p, "0/1 nodes are available: 1 Insufficient cpu.", "T2") is None
    again = triage.unschedulable_patch(p, "0/2 nodes are available: 2 Insufficient cpu.", "T2")
    assert "lastTransitionTime" not in again["status"]["conditions"][0]   # still False since T1
