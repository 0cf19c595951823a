import pytest

from kubemu import nodemembership as nm
from kubemu.nodemembership import Layout, MembershipError

HA = Layout(("node-0", "node-1", "node-2", "node-3"),
            {"store-0": "node-0", "store-1": "node-1", "store-2": "node-2"})
ONE = Layout(("node-0", "node-1"), {"store-0": "node-0", "store-1": "node-0", "store-2": "node-0"})
ALL = frozenset(HA.stores)


def test_control_plane_is_the_nodes_with_a_store_replica_in_node_order():
    assert HA.control_plane == ("node-0", "node-1", "node-2")
    assert ONE.control_plane == ("node-0",)
    assert ONE.stores_of("node-0") == ["store-0", "store-1", "store-2"]


def test_layout_round_trips_through_json():
    assert Layout.from_json(HA.to_json()) == HA


@pytest.mark.parametrize("text", ['[]', '{"nodes": ["n1"], "stores": {"store-0": "n1"}}',
                                  '{"nodes": ["node-0"], "stores": {}}',
                                  '{"nodes": ["node-0"], "stores": {"store-0": "node-9"}}', 'not json'])
def test_a_damaged_record_is_refused(text):
    with pytest.raises(ValueError):
        Layout.from_json(text)


def test_next_node_is_one_above_the_highest_so_a_removed_name_is_not_reused():
    assert nm.next_node(HA) == "node-4"
    gap = Layout(("node-0", "node-2"), {"store-0": "node-0"})
    assert nm.next_node(gap) == "node-3"


def test_add_worker_records_then_boots_and_waits_ready():
    plan = nm.plan_add(HA, control_plane=False)
    assert plan.node == "node-4"
    assert plan.layout == Layout((*HA.nodes, "node-4"), HA.stores)
    assert plan.steps == (nm.Record(plan.layout), nm.WriteNode("node-4"), nm.StartNode("node-4"),
                          nm.WaitReady("node-4"))


def test_add_control_plane_adds_the_member_first_then_the_node():
    plan = nm.plan_add(HA, control_plane=True, healthy=ALL)
    assert plan.layout.stores == {**HA.stores, "store-4": "node-4"}
    assert plan.layout.control_plane == ("node-0", "node-1", "node-2", "node-4")
    assert plan.steps == (nm.MemberAdd("store-4", "node-4"), nm.Record(plan.layout), nm.WriteNode("node-4"),
                          nm.StartNode("node-4"), nm.WaitCaughtUp("store-4"), nm.WaitReady("node-4"))


def test_add_control_plane_to_a_single_control_plane_node():
    plan = nm.plan_add(ONE, control_plane=True, healthy=frozenset(ONE.stores))
    assert plan.layout.control_plane == ("node-0", "node-2")
    assert plan.steps[0] == nm.MemberAdd("store-3", "node-2")  # store-0..2 are node-0's


def test_add_control_plane_refused_when_the_answering_members_are_no_quorum_of_the_grown_cluster():
    # 3 members, 2 answer: 4 members need 3, and the joiner counts only once caught up (etcd's
    # --strict-reconfig-check)
    with pytest.raises(MembershipError, match="2 of 3 members answer, and 4 members need 3"):
        nm.plan_add(HA, control_plane=True, healthy={"store-0", "store-1"})


def test_remove_control_plane_removes_the_member_first():
    plan = nm.plan_remove(HA, "node-1", healthy=ALL)
    assert plan.layout == Layout(("node-0", "node-2", "node-3"), {"store-0": "node-0", "store-2": "node-2"})
    assert plan.steps == (nm.MemberRemove("store-1"), nm.StopNode("node-1"), nm.Record(plan.layout),
                          nm.DeleteNode("node-1"))


def test_remove_a_dead_control_plane_node_when_the_others_are_a_quorum():
    plan = nm.plan_remove(HA, "node-1", healthy={"store-0", "store-2"})
    assert plan.steps[0] == nm.MemberRemove("store-1")


def test_remove_refused_when_the_members_left_are_no_quorum_of_healthy_ones():
    # 3 members, store-2 down: removing store-1 leaves store-0 and a dead store-2 (1 of 2 < 2)
    with pytest.raises(MembershipError, match=r"1 healthy of 2 members.*quorum of 2 \(store-2 not answering\)"):
        nm.plan_remove(HA, "node-1", healthy={"store-0", "store-1"})


def test_remove_refused_when_the_change_itself_could_not_commit():
    with pytest.raises(MembershipError, match="fewer than a quorum"):
        nm.plan_remove(HA, "node-2", healthy={"store-0"})


def test_remove_refused_for_the_last_member():
    lone = Layout(("node-0", "node-1"), {"store-0": "node-1"})
    with pytest.raises(MembershipError, match="last store member"):
        nm.plan_remove(lone, "node-1", healthy={"store-0"})


def test_remove_refused_for_a_pinned_node_and_unknown_nodes():
    with pytest.raises(MembershipError, match="node-0 cannot be removed: it keeps things"):
        nm.plan_remove(HA, "node-0", healthy=ALL, pinned={"node-0": "it keeps things"})
    with pytest.raises(MembershipError, match="there is no node node-7"):
        nm.plan_remove(HA, "node-7", healthy=ALL)


def test_remove_worker_needs_no_store_change():
    plan = nm.plan_remove(HA, "node-3")
    assert plan.layout == Layout(("node-0", "node-1", "node-2"), HA.stores)
    assert plan.steps == (nm.StopNode("node-3"), nm.Record(plan.layout), nm.DeleteNode("node-3"))
