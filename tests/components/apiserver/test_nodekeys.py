"""Joined nodes' CURVE keys: the key -> Node index and NodeRestriction's rule on the annotation."""
from __future__ import annotations

import zmq

from components.apiserver.nodekeys import ANNOTATION, NodeKeys, admission_error, key_of
from kubemu.api.identity import UserInfo

A, B = (zmq.curve_keypair()[0].decode() for _ in range(2))


def node(name, key=None, **annotations):
    if key is not None:
        annotations[ANNOTATION] = key
    return {"metadata": {"name": name, "annotations": annotations}}


def test_a_key_names_the_node_whose_annotation_holds_it():
    keys = NodeKeys()
    assert keys.replace({"a": node("a", A), "b": node("b"), "c": node("c", "not a key")}) == []
    assert dict(keys.snapshot()) == {A: "a"}
    assert key_of(node("c", "not a key")) is None and key_of({}) is None


def test_changes_and_deletions_follow_and_old_snapshots_never_change():
    keys = NodeKeys()
    keys.replace({"a": node("a", A)})
    before = keys.snapshot()
    keys.apply("a", node("a", B))
    assert dict(keys.snapshot()) == {B: "a"} and dict(before) == {A: "a"}
    keys.apply("b", node("b", A))
    assert dict(keys.snapshot()) == {B: "a", A: "b"}
    keys.apply("a", None)
    assert dict(keys.snapshot()) == {A: "b"}
    keys.apply("b", node("b"))  # the annotation removed
    assert dict(keys.snapshot()) == {}


def test_a_key_on_two_nodes_is_refused_for_both_and_said_once():
    keys = NodeKeys()
    keys.replace({"a": node("a", A)})
    assert keys.apply("b", node("b", A)) == [A]
    assert dict(keys.snapshot()) == {} and keys.owners(A) == ["a", "b"]
    assert keys.apply("b", node("b", A, other="x")) == []  # still shared: not said again
    assert keys.apply("c", node("c", B)) == []
    assert dict(keys.snapshot()) == {B: "c"}
    keys.apply("b", None)
    assert dict(keys.snapshot()) == {A: "a", B: "c"}
    assert keys.replace({"x": node("x", B), "y": node("y", B)}) == [B]


NODE_A = UserInfo("system:node:a", ("system:nodes", "system:authenticated"))


def test_a_node_may_set_change_and_remove_the_key_of_its_own_node_only():
    assert admission_error(NODE_A, "a", None, node("a", A)) is None
    assert admission_error(NODE_A, "a", node("a", A), node("a", B)) is None
    assert admission_error(NODE_A, "a", node("a", A), node("a")) is None
    for old, new in ((None, node("b", A)), (node("b", A), node("b", B)), (node("b", A), node("b"))):
        assert admission_error(NODE_A, "b", old, new) == 'nodes "b" is forbidden: node "a" is not allowed to modify node "b"'


def test_other_changes_of_another_node_and_other_users_are_not_this_rules_business():
    assert admission_error(NODE_A, "b", node("b", A), node("b", A, role="x")) is None
    admin = UserInfo("kubernetes-admin", ("kubeadm:cluster-admins",))
    assert admission_error(admin, "b", None, node("b", A)) is None
    assert admission_error(None, "b", None, node("b", A)) is None  # an unauthenticated wire: RBAC's business


def test_a_nodes_group_member_without_a_node_name_may_not_touch_it():
    odd = UserInfo("someone", ("system:nodes",))
    assert admission_error(odd, "a", None, node("a", A)) == \
        'nodes "a" is forbidden: could not determine node from user "someone"'


def test_a_key_another_node_names_is_refused_at_admission():
    """Node x copying node y's key would cut y off the wire (the index refuses a shared key for
    both): admission refuses it; x naming a key it alone names (or nobody yet) is admitted."""
    from components.apiserver.nodekeys import ANNOTATION, duplicate_error
    assert duplicate_error("x", ["y"]) == f'nodes "x" is forbidden: its {ANNOTATION} is node "y"\'s'
    assert duplicate_error("x", ["x", "z", "y"]) == f'nodes "x" is forbidden: its {ANNOTATION} is node "y"\'s'
    assert duplicate_error("x", ["x"]) is None and duplicate_error("x", []) is None
