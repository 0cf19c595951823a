"""The framework: filter, score, pick; and kube-scheduler's failure message."""
from __future__ import annotations

import random

from components.scheduling.framework import (NO_NODES_AVAILABLE, fit_error_message, num_feasible_nodes_to_find,
                                              schedule)
from tests.components.scheduling.test_filters import node, pod, taint


def bind(pods_by_node, node_name, p):
    p["spec"]["nodeName"] = node_name
    pods_by_node.setdefault(node_name, []).append(p)


def test_picks_the_least_loaded_fitting_node():
    nodes = [node("a"), node("b"), node("c", cpu="1")]
    pods_by_node = {"a": [pod("x", "2", "6Gi")], "b": [pod("y", "1", "2Gi")]}
    result = schedule(pod(cpu="1500m", memory="1Gi"), nodes, pods_by_node)
    assert result.node == "b"          # c cannot fit 1500m, a is busier than b
    assert result.message == ""
    assert result.per_filter_counts == {"NodeResourcesFit": 1}
    assert result.node_reasons == {"c": ["Insufficient cpu"]}
    assert set(result.scores) == {"a", "b"}
    assert result.scores["b"]["total"] > result.scores["a"]["total"]


def test_spreads_replicas_of_one_owner():
    nodes = [node("a"), node("b"), node("c")]
    pods_by_node: dict = {}
    placed = []
    for i in range(6):
        p = pod(f"web-{i}", "100m", "128Mi", owner="web")
        result = schedule(p, nodes, pods_by_node)
        placed.append(result.node)
        bind(pods_by_node, result.node, p)
    assert sorted(placed[:3]) == ["a", "b", "c"]
    assert sorted(placed) == ["a", "a", "b", "b", "c", "c"]


def test_owner_spread_outweighs_a_small_load_difference():
    # a holds a sibling; b holds a slightly bigger pod of another owner
    nodes = [node("a"), node("b")]
    pods_by_node = {"a": [pod("web-0", "100m", "128Mi", owner="web")],
                    "b": [pod("db-0", "200m", "256Mi", owner="db")]}
    assert schedule(pod("web-1", "100m", "128Mi", owner="web"), nodes, pods_by_node).node == "b"
    # without an owner, the load decides
    assert schedule(pod("solo", "100m", "128Mi"), nodes, pods_by_node).node == "a"


def test_honours_node_name():
    nodes = [node("a"), node("b")]
    result = schedule(pod(nodeName="b"), nodes, {"a": [], "b": [pod("x", "3", "7Gi")]})
    assert result.node == "b"
    assert result.per_filter_counts == {"NodeName": 1}


def test_honours_node_selector_and_required_affinity():
    nodes = [node("a", labels={"disk": "hdd"}), node("b", labels={"disk": "ssd", "zone": "z1"}),
             node("c", labels={"disk": "ssd", "zone": "z2"})]
    assert schedule(pod(nodeSelector={"disk": "ssd"}, affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1"]}]}]}}}),
        nodes, {}).node == "c"


def test_preferred_affinity_steers_the_choice():
    nodes = [node("a", labels={"zone": "z1"}), node("b", labels={"zone": "z2"})]
    p = pod(cpu="100m", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 5, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["z2"]}]}}]}})
    assert schedule(p, nodes, {}).node == "b"


def test_honours_taints_and_tolerations():
    nodes = [node("master", taints=[taint("node-role", "master")]), node("worker")]
    busy = {"worker": [pod("x", "3", "6Gi")]}
    assert schedule(pod(cpu="100m"), nodes, busy).node == "worker"
    tolerant = pod(cpu="100m", tolerations=[{"key": "node-role", "operator": "Exists"}])
    assert schedule(tolerant, nodes, busy).node == "master"


def test_prefer_no_schedule_taint_is_avoided_not_forbidden():
    nodes = [node("a", taints=[taint("spot", "yes", "PreferNoSchedule")]), node("b")]
    assert schedule(pod(cpu="100m"), nodes, {"b": [pod("x", "2", "4Gi")]}).node == "b"
    assert schedule(pod(cpu="100m"), [nodes[0]], {}).node == "a"


def test_not_ready_node_is_skipped_through_its_taint():
    sick = node("a", taints=[taint("node.kubernetes.io/not-ready", effect="NoExecute")])
    sick["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    assert schedule(pod(), [sick, node("b")], {"b": [pod("x", "3", "6Gi")]}).node == "b"


def test_exact_failure_message_for_a_mixed_three_node_case():
    nodes = [node("n1", cpu="1"), node("n2", cpu="2"),
             node("n3", cpu="8", taints=[taint("node-role", "master")])]
    pods_by_node = {"n2": [pod("x", "1500m")]}
    result = schedule(pod(cpu="1500m"), nodes, pods_by_node)
    assert result.node is None
    # sort.Strings on "<count> <reason>": "1 node(s)..." sorts before "2 Insufficient cpu"
    assert result.message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {node-role: master}, "
        "2 Insufficient cpu. preemption: 0/3 nodes are available: "
        "1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod.")
    assert result.per_filter_counts == {"NodeResourcesFit": 2, "TaintToleration": 1}
    assert result.reasons == {"Insufficient cpu": 2,
                              "node(s) had untolerated taint {node-role: master}": 1}


def test_one_reason_per_filter_first_failing_filter_wins():
    # n1 is cordoned AND too small: only the first filter in order (NodeUnschedulable) counts
    nodes = [node("n1", cpu="1", unschedulable=True), node("n2", cpu="1", memory="1Gi"),
             node("n3", labels={"x": "y"}, taints=[taint("t", "v", "NoExecute")])]
    result = schedule(pod(cpu="2", memory="2Gi", nodeSelector={"x": "z"}), nodes, {})
    assert result.message == (
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {t: v}, 1 node(s) were unschedulable. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    assert result.node_reasons == {
        "n1": ["node(s) were unschedulable"],
        "n2": ["node(s) didn't match Pod's node affinity/selector"],
        "n3": ["node(s) had untolerated taint {t: v}"]}


def test_insufficient_cpu_and_memory_are_both_counted():
    nodes = [node("a", cpu="1", memory="1Gi"), node("b", cpu="1", memory="1Gi")]
    result = schedule(pod(cpu="2", memory="2Gi"), nodes, {})
    assert result.message == (
        "0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient memory. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")
    assert result.per_filter_counts == {"NodeResourcesFit": 2}


def test_reasons_sort_as_strings_not_by_count():
    assert fit_error_message(12, {"Insufficient cpu": 10, "Insufficient memory": 2}) == \
        "0/12 nodes are available: 10 Insufficient cpu, 2 Insufficient memory."


def test_preemption_policy_never():
    result = schedule(pod(cpu="2", preemptionPolicy="Never"), [node("a", cpu="1")], {})
    assert result.message == ("0/1 nodes are available: 1 Insufficient cpu. "
                              "preemption: not eligible due to preemptionPolicy=Never.")


def test_lower_priority_pods_make_preemption_candidates():
    low = pod("low", "1")
    low["spec"]["priority"] = 0
    high = pod("high", "2", priority=1000)
    nodes = [node("a", cpu="2"), node("b", cpu="1")]
    result = schedule(high, nodes, {"a": [low]})
    assert result.node is None
    assert result.preemption_candidates == ["a"]
    assert result.message == "0/2 nodes are available: 2 Insufficient cpu."
    # evicting every lower-priority pod is still not enough: the fit reason remains
    result = schedule(pod("high", "3", priority=1000), nodes, {"a": [low]})
    assert result.preemption_candidates == []
    assert result.message.endswith(
        "preemption: 0/2 nodes are available: 1 Insufficient cpu, "
        "1 No preemption victims found for incoming pod.")


def test_no_nodes():
    result = schedule(pod(), [], {})
    assert result.node is None and result.message == NO_NODES_AVAILABLE


def test_ties_break_by_name_or_seeded_choice():
    nodes = [node("c"), node("a"), node("b")]
    assert schedule(pod(), nodes, {}).node == "a"
    picks = {schedule(pod(), nodes, {}, rng=random.Random(seed)).node for seed in range(30)}
    assert picks == {"a", "b", "c"}
    assert schedule(pod(), nodes, {}, rng=random.Random(7)).node == \
        schedule(pod(), nodes, {}, rng=random.Random(7)).node


# --- percentageOfNodesToScore ----------------------------------------------------------------

def test_num_feasible_nodes_to_find_follows_kube_scheduler():
    assert num_feasible_nodes_to_find(0, 99) == 99        # under 100 nodes: all of them
    assert num_feasible_nodes_to_find(0, 100) == 100      # 50% of 100 is raised to the minimum
    assert num_feasible_nodes_to_find(0, 1000) == 420     # adaptive: 50 - 1000/125 = 42%
    assert num_feasible_nodes_to_find(0, 5000) == 500     # 10%
    assert num_feasible_nodes_to_find(0, 6000) == 300     # 50 - 48 = 2%, floored at 5%
    assert num_feasible_nodes_to_find(10, 500) == 100     # 50, raised to the minimum
    assert num_feasible_nodes_to_find(30, 1000) == 300
    assert num_feasible_nodes_to_find(100, 1000) == 1000


def test_sampling_stops_at_the_feasible_nodes_wanted_and_starts_where_told():
    nodes = [node(name) for name in "abcdef"]
    pods_by_node = {"c": [pod("big", "4")]}   # c is full
    result = schedule(pod("p", "1"), nodes, pods_by_node, num_to_find=2, start=1)
    assert result.node in ("b", "d")   # b, c (refused), d: two feasible found, e and f not examined
    assert result.processed == 3
    assert set(result.scores) == {"b", "d"}
    # the ring wraps, and a start past the end is taken modulo the node count
    wrapped = schedule(pod("p", "1"), nodes, pods_by_node, num_to_find=3, start=10)
    assert set(wrapped.scores) == {"e", "f", "a"} and wrapped.processed == 3


def test_a_pod_that_fits_nowhere_examines_every_node_whatever_the_sample():
    nodes = [node(name, cpu="1") for name in "abc"]
    result = schedule(pod("p", "2"), nodes, {}, num_to_find=1, start=2)
    assert result.node is None and result.processed == 3
    assert result.message.startswith("0/3 nodes are available: 3 Insufficient cpu.")
