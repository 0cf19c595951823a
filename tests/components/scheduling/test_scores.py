"""The scores, each on worked examples of kube-scheduler's formulas."""
from __future__ import annotations

from components.scheduling import scores as S
from tests.components.scheduling.test_filters import container, node, pod, taint


# --- LeastAllocated -------------------------------------------------------------------------

def test_least_allocated_worked_example():
    n = node(cpu="4", memory="8Gi")
    # requested after placing: cpu 2000m/4000m -> 50; memory 4Gi/8Gi -> 50
    assert S.least_allocated(pod(cpu="1", memory="2Gi"), n, [pod("b", "1", "2Gi")]) == 50
    # cpu 3000/4000 -> 25; memory 1Gi/8Gi -> 87.5 truncated to 87; (25 + 87) / 2 = 56
    assert S.least_allocated(pod(cpu="3", memory="1Gi"), n) == 56


def test_least_allocated_counts_missing_requests_as_100m_200mi():
    n = node(cpu="1", memory="1Gi")
    # cpu (1000-100)*100/1000 = 90; memory (1024-200)*100/1024 = 80.4 -> 80; mean 85
    assert S.least_allocated(pod(containers=[container()]), n) == 85


def test_least_allocated_over_committed_is_zero():
    assert S.least_allocated(pod(cpu="8", memory="16Gi"), node(cpu="4", memory="8Gi")) == 0


def test_least_allocated_prefers_the_emptier_node():
    p = pod(cpu="500m", memory="512Mi")
    busy = S.least_allocated(p, node(), [pod("b", "2", "4Gi")])
    idle = S.least_allocated(p, node(), [])
    assert idle > busy


# --- BalancedAllocation ---------------------------------------------------------------------

def test_balanced_allocation_worked_examples():
    n = node(cpu="4", memory="8Gi")
    # fractions 0.25 and 0.75: std = |0.25 - 0.75| / 2 = 0.25 -> 75
    assert S.balanced_allocation(pod(cpu="1", memory="6Gi"), n) == 75
    # equal fractions -> 100
    assert S.balanced_allocation(pod(cpu="2", memory="4Gi"), n) == 100
    # 0.25 and 0.125: std 0.0625 -> 93.75 -> 93
    assert S.balanced_allocation(pod(cpu="1", memory="1Gi"), n) == 93
    # fractions are capped at 1: cpu 8/4 -> 1, memory 0 -> std 0.5 -> 50
    assert S.balanced_allocation(pod(cpu="8"), n) == 50


def test_balanced_allocation_includes_bound_pods():
    n = node(cpu="4", memory="8Gi")
    # bound 1 cpu/6Gi + new 1 cpu/0: 0.5 and 0.75 -> std 0.125 -> 87.5 -> 87
    assert S.balanced_allocation(pod(cpu="1"), n, [pod("b", "1", "6Gi")]) == 87


# --- owner spread ---------------------------------------------------------------------------

def test_same_owner_count_and_normalisation():
    p = pod("new", owner="rs1")
    on_a = [pod("a1", owner="rs1"), pod("a2", owner="rs1"), pod("a3", owner="rs2")]
    other_ns = pod("x", owner="rs1", namespace="other")
    terminating = pod("t", owner="rs1")
    terminating["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert S.same_owner_count(p, node("a"), on_a) == 2
    assert S.same_owner_count(p, node("b"), [other_ns, terminating]) == 0
    assert S.same_owner_count(pod("solo"), node("a"), on_a) == 0
    # 100 * (max - count) / max
    assert S.normalize_spread({"a": 2, "b": 1, "c": 0}) == {"a": 0, "b": 50, "c": 100}
    assert S.normalize_spread({"a": 3, "b": 2}) == {"a": 0, "b": 33}
    assert S.normalize_spread({"a": 0, "b": 0}) == {"a": 100, "b": 100}


# --- preferred node affinity ----------------------------------------------------------------

def test_preferred_affinity_sums_weights_and_normalises():
    p = pod(affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}},
        {"weight": 30, "preference": {"matchExpressions": [
            {"key": "disk", "operator": "In", "values": ["ssd"]}]}},
        {"weight": 50, "preference": {}},   # an empty preference matches nothing
    ]}})
    raw = {"n1": S.preferred_affinity_weight(p, node("n1", labels={"zone": "a", "disk": "ssd"})),
           "n2": S.preferred_affinity_weight(p, node("n2", labels={"zone": "a"})),
           "n3": S.preferred_affinity_weight(p, node("n3"))}
    assert raw == {"n1": 40, "n2": 10, "n3": 0}
    assert S.default_normalize(raw) == {"n1": 100, "n2": 25, "n3": 0}
    assert S.default_normalize({"n1": 0, "n2": 0}) == {"n1": 0, "n2": 0}


# --- TaintToleration ------------------------------------------------------------------------

def test_taint_toleration_score():
    prefer = "PreferNoSchedule"
    p = pod(tolerations=[{"key": "tolerated", "operator": "Exists"},
                         {"key": "noschedule-only", "operator": "Exists", "effect": "NoSchedule"}])
    n1 = node("n1", taints=[taint("a", "1", prefer), taint("noschedule-only", "", prefer)])
    n2 = node("n2", taints=[taint("b", "1", prefer), taint("tolerated", "x", prefer),
                            taint("hard", "x", "NoSchedule")])
    n3 = node("n3")
    raw = {n["metadata"]["name"]: S.intolerable_prefer_no_schedule(p, n) for n in (n1, n2, n3)}
    assert raw == {"n1": 2, "n2": 1, "n3": 0}
    assert S.normalize_reverse(raw) == {"n1": 0, "n2": 50, "n3": 100}
    assert S.normalize_reverse({"n1": 0}) == {"n1": 100}


# --- weighting ------------------------------------------------------------------------------

def test_weights_and_total():
    assert {s.name: s.weight for s in S.SCORES} == {
        "TaintToleration": 3, "NodeAffinity": 2, "OwnerSpread": 2, "NodeResourcesFit": 1,
        "NodeResourcesBalancedAllocation": 1}
    per = {"TaintToleration": 100, "NodeAffinity": 50, "OwnerSpread": 0,
           "NodeResourcesFit": 40, "NodeResourcesBalancedAllocation": 90}
    assert S.total_score(per) == 300 + 100 + 0 + 40 + 90


def test_score_nodes_table():
    nodes = [node("a"), node("b")]
    table = S.score_nodes(pod(cpu="1", memory="1Gi"), nodes, {"a": [pod("x", "2", "2Gi")]})
    assert set(table) == {"a", "b"}
    assert table["b"]["NodeResourcesFit"] > table["a"]["NodeResourcesFit"]
    assert all(0 <= v <= 100 for per in table.values() for v in per.values())
