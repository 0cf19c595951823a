"""The cache (assume / forget / confirm) and its plugins, which must decide exactly as the
framework's own do over plain lists."""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from components.scheduler import plugins
from components.scheduler.cache import SchedulerCache
from components.scheduling.framework import schedule
from tests.components.scheduling.test_filters import container, node, pod


def bound(p: dict, node_name: str) -> dict:
    p = dict(p, spec=dict(p["spec"], nodeName=node_name))
    return p


def test_assume_counts_at_once_and_the_watch_confirms():
    cache = SchedulerCache()
    cache.set_node(node("a", cpu="1"))
    p = pod("p", "600m")
    cache.assume("default/p", p, "a")
    assert cache.is_assumed("default/p") and cache.infos["a"].requested.cpu == 600
    assert not cache.add_pod("default/p", bound(p, "a"))      # confirmation: nothing freed
    assert not cache.is_assumed("default/p")
    assert not cache.forget("default/p")                       # confirmed: forget is a no-op
    assert cache.infos["a"].requested.cpu == 600 and len(cache.infos["a"]) == 1


def test_forget_withdraws_an_unconfirmed_assumption():
    cache = SchedulerCache()
    cache.set_node(node("a"))
    cache.assume("default/p", pod("p", "1"), "a")
    assert cache.forget("default/p")
    assert cache.infos["a"].requested.cpu == 0 and not len(cache.infos["a"])
    assert not cache.is_assumed("default/p")


def test_a_pod_bound_elsewhere_than_assumed_moves_and_frees_room():
    cache = SchedulerCache()
    cache.set_node(node("a"))
    cache.set_node(node("b"))
    p = pod("p", "1")
    cache.assume("default/p", p, "a")
    assert cache.add_pod("default/p", bound(p, "b"))
    assert cache.infos["a"].requested.cpu == 0 and cache.infos["b"].requested.cpu == 1000


def test_terminal_or_deleted_pods_free_their_room():
    cache = SchedulerCache()
    cache.set_node(node("a"))
    cache.add_pod("default/p", bound(pod("p", "1"), "a"))
    cache.add_pod("default/q", bound(pod("q", "1"), "a"))
    done = bound(pod("p", "1"), "a")
    done["status"] = {"phase": "Succeeded"}
    assert cache.add_pod("default/p", done)
    assert cache.remove_pod("default/q")
    assert not cache.remove_pod("default/q")
    assert cache.infos["a"].requested.cpu == 0 and not len(cache.infos["a"])


def test_smaller_requests_free_room_larger_do_not():
    cache = SchedulerCache()
    cache.set_node(node("a"))
    assert not cache.add_pod("default/p", bound(pod("p", "1"), "a"))
    assert not cache.add_pod("default/p", bound(pod("p", "2"), "a"))
    assert cache.add_pod("default/p", bound(pod("p", "500m"), "a"))
    assert cache.infos["a"].requested.cpu == 500


def test_pods_on_unknown_or_deleted_nodes_are_kept_but_the_node_is_not_offered():
    cache = SchedulerCache()
    cache.add_pod("default/p", bound(pod("p", "1"), "ghost"))
    cache.set_node(node("a"))
    cache.set_node(node("b"))
    assert [n["metadata"]["name"] for n in cache.nodes()] == ["a", "b"]
    cache.add_pod("default/q", bound(pod("q", "1"), "b"))
    cache.remove_node("b")
    cache.remove_node("a")
    assert cache.nodes() == []
    assert set(cache.infos) == {"ghost", "b"}
    cache.set_node(node("b", cpu="2"))                   # back: its pods are still counted
    assert cache.infos["b"].requested.cpu == 1000
    cache.remove_pod("default/p")
    assert "ghost" not in cache.infos


def test_a_status_update_keeps_the_totals_a_resize_or_a_deletion_changes_them():
    cache = SchedulerCache()
    cache.set_node(node("a"))
    first = bound(pod("p", "1", owner="web"), "a")
    cache.add_pod("default/p", first)
    info = cache.infos["a"]
    info.resource_scores["shape"] = 7                  # a memoised score
    running = dict(first, status={"phase": "Running"})
    assert not cache.add_pod("default/p", running)
    assert list(info) == [running]                     # the newest object is the one kept
    assert info.resource_scores == {"shape": 7} and info.requested.cpu == 1000
    resized = bound(pod("p", "2", owner="web"), "a")   # an in-place resize of the container
    assert not cache.add_pod("default/p", resized)
    assert info.requested.cpu == 2000 and info.resource_scores == {}
    deleting = dict(resized, metadata=dict(resized["metadata"], deletionTimestamp="2024-01-01T00:00:00Z"))
    cache.add_pod("default/p", deleting)
    assert info.count_owned("default/uid-web") == 0   # a terminating sibling is not counted


def test_the_node_list_follows_joins_and_updates():
    cache = SchedulerCache()
    cache.add_pod("default/p", bound(pod("p", "1"), "b"))   # b is a ghost: a pod names it first
    cache.set_node(node("a"))
    assert [info.name for info in cache.node_infos()] == ["a"]
    cache.set_node(node("b", cpu="2"))                      # the ghost's node object arrives
    assert [info.name for info in cache.node_infos()] == ["a", "b"]
    updated = node("a", cpu="3", taints=[{"key": "k", "effect": "NoSchedule"}])
    cache.set_node(updated)                                 # an update keeps the order, shows the new object
    assert cache.nodes()[0] is updated and not cache.node_infos()[0].plain
    cache.remove_node("a")
    assert [n["metadata"]["name"] for n in cache.nodes()] == ["b"]


def test_node_updates_refresh_allocatable():
    cache = SchedulerCache()
    cache.set_node(node("a", cpu="1"))
    cache.set_node(node("a", cpu="3"))
    assert cache.infos["a"].allocatable.cpu == 3000
    assert cache.nodes()[0]["status"]["allocatable"]["cpu"] == "3"


# --- the plugins decide as the framework does -----------------------------------------------

quantities_cpu = st.sampled_from([None, "0", "100m", "250m", "500m", "1", "1500m", "2"])
quantities_mem = st.sampled_from([None, "0", "64Mi", "256Mi", "1Gi", "3Gi"])
owners = st.sampled_from([None, "web", "api"])


@st.composite
def pods(draw, name: str):
    containers = [container(draw(quantities_cpu), draw(quantities_mem), name=f"c{i}")
                  for i in range(draw(st.integers(1, 2)))]
    init = None
    if draw(st.booleans()):
        init = [container(draw(quantities_cpu), draw(quantities_mem), name="init")]
    p = pod(name, containers=containers, init=init, owner=draw(owners),
            namespace=draw(st.sampled_from(["default", "other"])), priority=draw(st.sampled_from([0, 10])))
    if draw(st.booleans()):
        p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    return p


@st.composite
def clusters(draw):
    nodes = [node(f"n{i}", cpu=draw(st.sampled_from(["0", "2", "4", "8"])),
                  memory=draw(st.sampled_from(["0", "1Gi", "4Gi"])),
                  pods=draw(st.sampled_from([None, None, "3", "8"])))
             for i in range(draw(st.integers(1, 4)))]
    placed = [(draw(pods(f"b{i}")), draw(st.sampled_from(nodes))["metadata"]["name"], draw(st.booleans()))
              for i in range(draw(st.integers(0, 10)))]
    incoming = draw(pods("new"))
    if placed and draw(st.booleans()):   # a pod counted on a node already (an assumed one, retried)
        incoming["metadata"] = dict(draw(st.sampled_from(placed))[0]["metadata"])
    return nodes, placed, incoming


@settings(max_examples=300, deadline=None)
@given(clusters(), st.integers(0, 2**32))
def test_plugins_over_the_cache_decide_as_the_framework_over_lists(cluster, seed):
    nodes, placed, incoming = cluster
    lists: dict = {}
    cache = SchedulerCache()
    for n in nodes:
        cache.set_node(n)
    for p, node_name, assumed in placed:
        lists.setdefault(node_name, []).append(p)
        key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
        if assumed:
            cache.assume(key, p, node_name)
        else:
            cache.add_pod(key, bound(p, node_name))
    want = schedule(incoming, nodes, lists, random.Random(seed))
    got = schedule(incoming, cache.nodes(), cache.infos, random.Random(seed),
                   filters=plugins.FILTERS, scores=plugins.SCORES)
    assert got == want


def test_owner_spread_counts_siblings_in_the_pods_namespace_only():
    cache = SchedulerCache()
    for name in ("a", "b"):
        cache.set_node(node(name))
    cache.add_pod("other/s1", bound(pod("s1", "1", owner="web", namespace="other"), "a"))
    cache.add_pod("default/s2", bound(pod("s2", "1", owner="web"), "b"))
    cache.add_pod("default/s3", bound(pod("s3", "1", owner="web"), "b"))
    a, b = cache.nodes()
    incoming = pod("new", "1", owner="web", namespace="other")
    assert plugins.same_owner_count(incoming, a, cache.infos["a"]) == 1
    assert plugins.same_owner_count(incoming, b, cache.infos["b"]) == 0
    assert schedule(incoming, cache.nodes(), cache.infos, filters=plugins.FILTERS,
                    scores=plugins.SCORES).node == "b"
