"""The fast path decides as the framework does over the same cache: never a node the full filter
chain refuses, the same best nodes, the same percentageOfNodesToScore walk."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from components.scheduler import fastpath, plugins
from components.scheduler.cache import SchedulerCache
from components.scheduling.framework import run_filters, schedule
from tests.components.scheduler.test_cache import bound, pods
from tests.components.scheduling.test_filters import node, pod, taint

TAINTS = [taint("dedicated", "db"), taint("soft", effect="PreferNoSchedule"),
          taint("soft2", "x", effect="PreferNoSchedule"), taint("gone", effect="NoExecute")]
TOLERATIONS = [{"key": "dedicated", "operator": "Exists"}, {"key": "soft", "operator": "Exists"},
               {"operator": "Exists", "effect": "NoExecute"}]


@st.composite
def clusters(draw):
    """Nodes of every kind (tainted, cordoned, full), pods on them, and a plain pod to place."""
    nodes = []
    for i in range(draw(st.integers(1, 8))):
        taints = draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique_by=lambda t: t["key"]))
        nodes.append(node(f"n{i}", cpu=draw(st.sampled_from(["0", "1", "2", "4"])),
                          memory=draw(st.sampled_from(["0", "1Gi", "4Gi"])),
                          pods=draw(st.sampled_from([None, None, "2", "8"])), taints=taints,
                          unschedulable=draw(st.integers(0, 4)) == 0))
    placed = [(draw(pods(f"b{i}")), draw(st.sampled_from(nodes))["metadata"]["name"], draw(st.booleans()))
              for i in range(draw(st.integers(0, 12)))]
    incoming = draw(pods("new"))
    incoming["spec"]["tolerations"] = draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2))
    if placed and draw(st.booleans()):   # a pod counted on a node already (an assumed one, retried)
        incoming["metadata"] = dict(draw(st.sampled_from(placed))[0]["metadata"])
    return nodes, placed, incoming


def cache_of(nodes, placed) -> SchedulerCache:
    cache = SchedulerCache()
    for n in nodes:
        cache.set_node(n)
    for p, node_name, assumed in placed:
        key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        if assumed:
            cache.assume(key, p, node_name)
        else:
            cache.add_pod(key, bound(p, node_name))
    return cache


@settings(max_examples=400, deadline=None)
@given(clusters(), st.integers(0, 2**32), st.integers(1, 8), st.integers(0, 20))
def test_the_fast_path_decides_as_the_framework(cluster, seed, num_to_find, start):
    nodes, placed, incoming = cluster
    cache = cache_of(nodes, placed)
    assert fastpath.is_plain(incoming)
    got, examined = fastpath.schedule_plain(incoming, cache.node_infos(), random.Random(seed), num_to_find, start)
    full = schedule(incoming, cache.nodes(), cache.infos, random.Random(seed), filters=plugins.FILTERS,
                    scores=plugins.SCORES, num_to_find=num_to_find, start=start)
    if got is not None:
        # never a node the full filter chain refuses
        assert run_filters(incoming, cache.infos[got].node, cache.infos[got], plugins.FILTERS) == (None, [])
    # the same nodes examined, the same best set, the same pick among it
    assert (got, examined) == (full.node, full.processed)
    every = schedule(incoming, cache.nodes(), cache.infos, random.Random(seed), filters=plugins.FILTERS,
                     scores=plugins.SCORES)
    assert fastpath.schedule_plain(incoming, cache.node_infos(), random.Random(seed), len(nodes), start) \
        == (every.node, every.processed)


def test_a_cordoned_or_tainted_node_gets_the_full_filters():
    cache = SchedulerCache()
    cache.set_node(node("a", cpu="8", unschedulable=True))
    cache.set_node(node("b", cpu="8", taints=[taint("dedicated", "db")]))
    cache.set_node(node("c", cpu="1"))
    cache.add_pod("default/x", bound(pod("x", "500m"), "c"))   # c, the busiest, is the only fit
    assert fastpath.schedule_plain(pod("p", "100m"), cache.node_infos(), None, 3, 0) == ("c", 3)
    # the node's update lifts the taint: the node is plain again
    cache.set_node(node("b", cpu="8"))
    assert fastpath.schedule_plain(pod("p", "100m"), cache.node_infos(), None, 3, 0) == ("b", 3)


def test_a_prefer_no_schedule_taint_scores_as_the_framework():
    cache = SchedulerCache()
    cache.set_node(node("a", taints=[taint("soft", effect="PreferNoSchedule")]))
    cache.set_node(node("b"))
    cache.add_pod("default/x", bound(pod("x", "1"), "b"))   # b is busier, yet untainted
    want = schedule(pod("p", "100m"), cache.nodes(), cache.infos, filters=plugins.FILTERS, scores=plugins.SCORES)
    assert want.node == "b"
    assert fastpath.schedule_plain(pod("p", "100m"), cache.node_infos(), None, 2, 0) == ("b", 2)


@pytest.mark.parametrize("spec", [{"nodeName": "a"}, {"nodeSelector": {"disk": "ssd"}},
                                  {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                                      {"weight": 1, "preference": {"matchExpressions": [
                                          {"key": "disk", "operator": "In", "values": ["ssd"]}]}}]}}}])
def test_a_pod_with_node_constraints_is_not_plain(spec):
    assert not fastpath.is_plain(pod("p", **spec))
    assert fastpath.is_plain(pod("p", tolerations=TOLERATIONS, affinity={"podAntiAffinity": {}}))


def test_the_fast_path_knows_every_scoring_plugin():
    """Its scores stand for these plugins only: a plugin added to SCORES must be added there."""
    assert tuple(score.name for score in plugins.SCORES) == fastpath.PLUGINS


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(0, 2**32), st.lists(st.tuples(st.sampled_from(["100m", "1"]),
                                                             st.sampled_from(["place", "resize", "forget"])),
                                                   min_size=1, max_size=20))
def test_memoised_scores_follow_every_change_of_a_node(cluster, seed, steps):
    """Replicas asking the same, placed one after the other while nodes change: each decision
    is still the framework's (a score memo outliving a change would pick from stale totals)."""
    nodes, placed, _ = cluster
    cache = cache_of(nodes, placed)
    rng = random.Random(seed)
    for i, (cpu, change) in enumerate(steps):
        replica = pod(f"r{i}", cpu, "256Mi", owner="web")
        want = schedule(replica, cache.nodes(), cache.infos, random.Random(i), filters=plugins.FILTERS,
                        scores=plugins.SCORES)
        got, _ = fastpath.schedule_plain(replica, cache.node_infos(), random.Random(i), len(nodes), 0)
        assert got == want.node
        if got is None:
            continue
        cache.assume(f"default/r{i}", replica, got)
        if change == "resize":   # a node's allocatable changes under the memo
            cache.set_node(node(rng.choice(nodes)["metadata"]["name"], cpu=rng.choice(["1", "3", "16"]),
                                memory="4Gi"))
        elif change == "forget":
            cache.forget(f"default/r{rng.randrange(i + 1)}")


def test_a_node_update_empties_its_score_memo():
    cache = SchedulerCache()
    cache.set_node(node("a"))
    cache.set_node(node("b"))
    assert fastpath.schedule_plain(pod("r0", "100m"), cache.node_infos(), None, 2, 0) == ("a", 2)   # a tie
    cache.assume("default/r0", pod("r0", "100m"), "a")
    cache.set_node(node("b", cpu="1"))   # b shrinks: a, one small pod on 4 cpus, is now the roomier
    want = schedule(pod("r1", "100m"), cache.nodes(), cache.infos, filters=plugins.FILTERS, scores=plugins.SCORES)
    assert want.node == "a"
    assert fastpath.schedule_plain(pod("r1", "100m"), cache.node_infos(), None, 2, 0) == ("a", 2)


def test_the_score_memo_of_a_node_that_never_changes_stays_bounded():
    cache = SchedulerCache()
    cache.set_node(node("a", cpu="64"))
    for millis in range(1, 200):
        assert fastpath.schedule_plain(pod("p", f"{millis}m"), cache.node_infos(), None, 1, 0) == ("a", 1)
    assert len(cache.infos["a"].resource_scores) <= 64
    assert fastpath.schedule_plain(pod("p", "65"), cache.node_infos(), None, 1, 0) == (None, 1)


@pytest.mark.parametrize("plain", [True, False])
def test_each_cycle_starts_where_the_last_one_stopped(plain, monkeypatch):
    """Scheduler._attempt walks the nodes as kube-scheduler's nextStartNodeIndex does: 10% of 120
    nodes is below the floor of 100 feasible nodes to find, so each cycle looks at 100 nodes and
    the next starts after them - on the fast path and through the framework (a nodeSelector)."""
    from components.scheduler.scheduler import Scheduler
    sched = Scheduler("ipc:///nonexistent-kubemu-test", percentage_of_nodes_to_score=10)
    names = [f"n{i:03d}" for i in range(120)]
    for name in names:
        sched.cache.set_node(node(name, cpu="4", memory="4Gi", labels={"zone": "a"}))
    pending = {}
    monkeypatch.setattr(sched.pods, "get", pending.get)
    windows = [names[:100], names[100:] + names[:80]]
    for i, window in enumerate(windows):
        p = pending[f"default/p{i}"] = pod(f"p{i}", cpu="10m")
        if not plain:
            p["spec"]["nodeSelector"] = {"zone": "a"}
        write = sched._attempt(f"default/p{i}", 0.0)
        write.close()   # the bind is not run: only the decision is under test
        assert sched._next_start == 100 * (i + 1) % 120
        assert sched.cache._pod_node[f"default/p{i}"] in window
