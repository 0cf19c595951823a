"""Node IPAM's reconcile core: nodes in, podCIDR patches and events out (the range allocator's
rules, plus the host link's reserved block)."""
from __future__ import annotations

import ipaddress

import pytest

from components.controllers import PatchObject, RecordEvent
from components.controllers.nodeipam import (CIDR_NOT_AVAILABLE, INVALID_POD_CIDR, RETRY_AFTER,
                                             NodeIPAMSettings, NodeIPAMState, forget,
                                             reserved_blocks, sync_node_cidrs)
from kubemu.netplan import host_link

S = NodeIPAMSettings.parse("10.244.0.0/16", 24, "10.96.0.0/12")
HOST_BLOCK = 255   # 10.244.255.0/24: the host link's


def node(name, *cidrs):
    spec = {"podCIDR": cidrs[0], "podCIDRs": list(cidrs)} if cidrs else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": spec}


def patches(result):
    return {a.name: a.changes["spec"]["podCIDR"] for a in result.actions
            if isinstance(a, PatchObject)}


def events(result):
    return [(a.name, a.type, a.reason, a.message) for a in result.actions
            if isinstance(a, RecordEvent)]


def test_nodes_without_pod_cidrs_get_blocks_in_name_order():
    result = sync_node_cidrs([node("b"), node("a")], S)
    assert patches(result) == {"a": "10.244.0.0/24", "b": "10.244.1.0/24"}
    (patch, _) = result.actions
    assert patch == PatchObject("v1", "Node", None, "a", "uid-a",
                                {"spec": {"podCIDR": "10.244.0.0/24",
                                          "podCIDRs": ["10.244.0.0/24"]}})
    assert result.assigned == {"a": "10.244.0.0/24", "b": "10.244.1.0/24"}
    assert result.state.next_candidate == 2
    assert result.requeue_after is None and result.problems == []


def test_existing_pod_cidrs_are_occupied_and_never_rewritten():
    result = sync_node_cidrs([node("a", "10.244.0.0/24"), node("b", "10.244.2.0/24"), node("c")], S)
    assert patches(result) == {"c": "10.244.1.0/24"}


def test_a_node_stored_with_pod_cidr_alone_holds_it():
    legacy = {"metadata": {"name": "old", "uid": "u"}, "spec": {"podCIDR": "10.244.0.0/24"}}
    assert patches(sync_node_cidrs([legacy, node("new")], S)) == {"new": "10.244.1.0/24"}


def test_round_robin_from_next_candidate_wraps_and_skips_the_used():
    # the cursor stays past the last block given even when an earlier one is free again
    state = NodeIPAMState(next_candidate=5)
    first = sync_node_cidrs([node("a")], S, state)
    assert patches(first) == {"a": "10.244.5.0/24"}
    seen = [node("a", "10.244.5.0/24"), node("b")]
    assert patches(sync_node_cidrs(seen, S, first.state)) == {"b": "10.244.6.0/24"}
    # from the last block the scan wraps to 0, skipping the host link's block
    wrapped = sync_node_cidrs([node("x", "10.244.0.0/24"), node("y")], S,
                              NodeIPAMState(next_candidate=HOST_BLOCK))
    assert patches(wrapped) == {"y": "10.244.1.0/24"}


def test_host_link_block_is_reserved_through_netplan():
    link = host_link("10.244.0.0/16", 24).block
    assert str(link) == "10.244.255.0/24"
    assert reserved_blocks(S) == {HOST_BLOCK}   # the service CIDR 10.96/12 does not overlap
    small = NodeIPAMSettings.parse("10.1.0.0/22", 26)
    assert reserved_blocks(small) == {15}
    assert str(small.block(15)) == str(host_link("10.1.0.0/22", 26).block)


def test_service_cidr_overlapping_the_cluster_cidr_is_occupied():
    s = NodeIPAMSettings.parse("10.0.0.0/16", 24, "10.0.4.0/22")
    assert reserved_blocks(s) == {4, 5, 6, 7, 255}
    result = sync_node_cidrs([node("a")], s, NodeIPAMState(next_candidate=4))
    assert patches(result) == {"a": "10.0.8.0/24"}
    # a service CIDR holding the whole cluster CIDR leaves nothing (filterOutServiceRange)
    assert len(reserved_blocks(NodeIPAMSettings.parse("10.0.0.0/16", 24, "10.0.0.0/8"))) == 256


def test_exhausted_range_records_cidr_not_available_and_retries_later():
    s = NodeIPAMSettings.parse("10.9.0.0/23", 24)     # two blocks, the last is the host link's
    result = sync_node_cidrs([node("a"), node("b")], s)
    assert patches(result) == {"a": "10.9.0.0/24"}
    assert events(result) == [("b", "Normal", CIDR_NOT_AVAILABLE,
                               "Node b status is now: CIDRNotAvailable")]
    assert result.problems == [
        "failed to allocate cidr from cluster cidr at idx:0: CIDR allocation failed; there are "
        "no remaining CIDRs left to allocate in the accepted range"]
    assert result.requeue_after == RETRY_AFTER
    # node a deleted: its block is free at the next pass (ReleaseCIDR)
    again = sync_node_cidrs([node("b")], s, result.state)
    assert patches(again) == {"b": "10.9.0.0/24"} and events(again) == []


def test_a_pass_before_the_cache_shows_the_patch_does_not_hand_the_block_out_twice():
    first = sync_node_cidrs([node("a")], S)
    assert first.state.pending == {"a": "10.244.0.0/24"}
    # the informer has not delivered the patch yet; a new node arrives
    second = sync_node_cidrs([node("a"), node("b")], S, first.state)
    assert patches(second) == {"b": "10.244.1.0/24"}
    # the cache shows both: nothing pending, nothing to do
    third = sync_node_cidrs([node("a", "10.244.0.0/24"), node("b", "10.244.1.0/24")], S,
                            second.state)
    assert third.actions == [] and third.state.pending == {}


def test_a_failed_patch_is_forgotten_and_allocated_again():
    first = sync_node_cidrs([node("a")], S)
    state = forget(first.state, "a")
    assert state.pending == {} and state.next_candidate == 1
    assert patches(sync_node_cidrs([node("a")], S, state)) == {"a": "10.244.1.0/24"}


def test_someone_elses_pod_cidr_releases_our_reservation():
    first = sync_node_cidrs([node("a")], S)
    second = sync_node_cidrs([node("a", "10.244.7.0/24"), node("b")], S, first.state)
    assert second.state.pending == {"b": "10.244.1.0/24"}
    third = sync_node_cidrs([node("a", "10.244.7.0/24"), node("c")], S,
                            NodeIPAMState(next_candidate=0))
    assert patches(third) == {"c": "10.244.0.0/24"}


@pytest.mark.parametrize("cidrs, message", [
    (("garbage",), "failed to parse node bad, CIDR garbage"),
    (("192.168.0.0/24",), "failed to mark cidr[192.168.0.0/24] at idx [0] as occupied for node: "
                          "bad: cidr 192.168.0.0/24 is out the range of cluster cidr 10.244.0.0/16"),
    (("10.244.3.0/24", "fd00::/64"), "node:bad has an allocated cidr: fd00::/64 at index:1 that "
                                     "does not exist in cluster cidrs configuration"),
])
def test_an_invalid_pod_cidr_is_reported_once_and_the_node_skipped(cidrs, message):
    nodes = [node("bad", *cidrs), node("good")]
    result = sync_node_cidrs(nodes, S)
    assert events(result) == [("bad", "Warning", INVALID_POD_CIDR, message)]
    assert result.problems == [message]
    assert patches(result) == {"good": "10.244.0.0/24"}
    again = sync_node_cidrs([node("bad", *cidrs), node("good", "10.244.0.0/24")], S, result.state)
    assert again.actions == [] and again.problems == []
    # changed (or gone and back): reported again
    assert sync_node_cidrs([node("bad", "junk")], S, again.state).problems


def test_pod_cidrs_smaller_or_larger_than_a_block_occupy_what_they_cover():
    nodes = [node("tiny", "10.244.0.4/30"), node("wide", "10.244.16.0/20"), node("new")]
    result = sync_node_cidrs(nodes, S, NodeIPAMState(next_candidate=15))
    assert patches(result) == {"new": "10.244.15.0/24"}
    result = sync_node_cidrs(nodes, S, NodeIPAMState(next_candidate=16))
    assert patches(result) == {"new": "10.244.32.0/24"}
    assert patches(sync_node_cidrs(nodes, S)) == {"new": "10.244.1.0/24"}


def test_blocks_follow_the_node_mask():
    s = NodeIPAMSettings.parse("172.20.0.0/20", 26)
    assert s.max_cidrs == 64
    result = sync_node_cidrs([node("a"), node("b")], s, NodeIPAMState(next_candidate=62))
    # 63 is the host link's: a wraps past it to 62, b to 0
    assert patches(result) == {"a": "172.20.15.128/26", "b": "172.20.0.0/26"}
    assert ipaddress.ip_network("172.20.15.192/26") == host_link("172.20.0.0/20", 26).block


@pytest.mark.parametrize("args, message", [
    ((None,), "Controller: Must specify --cluster-cidr if --allocate-node-cidrs is set"),
    (("10.244.0.0/16", 8), "Controller: Invalid --cluster-cidr, mask size of cluster CIDR must "
                           "be less than or equal to --node-cidr-mask-size configured for CIDR "
                           "family"),
    (("10.244.0.0/16", 33), "Controller: Invalid --cluster-cidr"),
    (("ten/16",), "invalid --cluster-cidr 'ten/16'"),
    (("fd00::/48",), "kubemu's pod network is IPv4 only"),
    (("10.244.0.0/16", 24, "10.96.0.0/40"), "invalid --service-cluster-ip-range"),
])
def test_settings_refuse_what_kube_controller_manager_refuses(args, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        NodeIPAMSettings.parse(*args)


def test_settings_defaults():
    s = NodeIPAMSettings.parse("10.244.0.0/16")
    assert s.node_mask == 24 and s.service_cidr is None and s.max_cidrs == 256
    assert str(NodeIPAMSettings.parse("10.244.1.7/16").cluster_cidr) == "10.244.0.0/16"
