"""Garbage collector reconcile core: fake object sets in, expected actions out."""
from __future__ import annotations

import pytest

from components.controllers import DeleteObject, PatchObject, merge_patch
from components.controllers.garbagecollector import sync_garbage
from components.controllers.podutil import format_time

NOW = 1_700_000_000.0


def obj(kind, name, uid, *, owners=(), finalizers=(), deleting=False, api="apps/v1", block=True):
    o = {"apiVersion": "v1" if kind == "Pod" else api, "kind": kind,
         "metadata": {"name": name, "namespace": "default", "uid": uid, "resourceVersion": "7"}}
    if owners:
        o["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": k, "name": n, "uid": u, "controller": True,
             "blockOwnerDeletion": block} for k, n, u in owners]
    if finalizers:
        o["metadata"]["finalizers"] = list(finalizers)
    if deleting:
        o["metadata"]["deletionTimestamp"] = format_time(NOW)
    return o


RS = ("ReplicaSet", "web", "rs-uid")


def pod(name, owners=(RS,), **kw):
    return obj("Pod", name, f"uid-{name}", owners=owners, **kw)


def deletes(actions):
    return sorted((a.name, a.propagation_policy) for a in actions if isinstance(a, DeleteObject))


def patches(actions):
    return {a.name: a.changes for a in actions if isinstance(a, PatchObject)}


@pytest.mark.parametrize("objects, want_deletes, want_patches", [
    # owner alive -> nothing
    ([obj(*RS), pod("a"), pod("b")], [], {}),
    # RS gone -> its pods deleted in the background
    ([pod("a"), pod("b")], [("a", "Background"), ("b", "Background")], {}),
    # same name, different uid: the old owner is gone
    ([obj("ReplicaSet", "web", "rs-uid-2"), pod("a")], [("a", "Background")], {}),
    # a pod already being deleted is not deleted again
    ([pod("a", deleting=True)], [], {}),
    # cascade: deployment gone -> RS deleted; its pods wait for the RS to go
    ([obj("ReplicaSet", "web", "rs-uid", owners=[("Deployment", "d", "d-uid")]), pod("a")],
     [("web", "Background")], {}),
    # the dependent's own finalizers choose the policy
    ([pod("a", finalizers=["orphan"])], [("a", "Orphan")], {}),
    # one owner gone, another alive: the dangling reference is dropped, the pod stays
    ([obj("ReplicaSet", "other", "o-uid"), pod("a", owners=[RS, ("ReplicaSet", "other", "o-uid")])],
     [], {"a": {"metadata": {"ownerReferences": [
         {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "other", "uid": "o-uid",
          "controller": True, "blockOwnerDeletion": True}]}}}),
    # objects without owners are never touched
    ([obj("Deployment", "d", "d-uid"), obj("Pod", "x", "x-uid")], [], {}),
])
def test_dangling_owners(objects, want_deletes, want_patches):
    actions = sync_garbage(objects, NOW)
    assert deletes(actions) == want_deletes
    assert patches(actions) == want_patches


def test_delete_action_carries_identity():
    (action,) = sync_garbage([pod("a")], NOW)
    assert action == DeleteObject("v1", "Pod", "default", "a", "uid-a", "Background")


def test_owner_kinds_outside_the_cache_are_not_dangling():
    p = pod("a", owners=[("StatefulSet", "s", "s-uid")])
    assert sync_garbage([p], NOW, owner_kinds={"ReplicaSet", "Deployment", "Pod"}) == []
    assert deletes(sync_garbage([p], NOW)) == [("a", "Background")]


def apply(objects, actions):
    """Simulate the shell: apply patches and deletions (Background: gone; Foreground/Orphan:
    deletionTimestamp + finalizer), then drop deleting objects with no finalizers."""
    by_uid = {o["metadata"]["uid"]: o for o in objects}
    for a in actions:
        o = by_uid.get(a.uid)
        if o is None:
            continue
        if isinstance(a, PatchObject):
            by_uid[a.uid] = merge_patch(o, a.changes)
        elif isinstance(a, DeleteObject):
            if a.propagation_policy == "Background":
                del by_uid[a.uid]
            else:
                o = dict(o, metadata=dict(o["metadata"], deletionTimestamp=format_time(NOW)))
                fin = "orphan" if a.propagation_policy == "Orphan" else "foregroundDeletion"
                o["metadata"]["finalizers"] = o["metadata"].get("finalizers", []) + [fin]
                by_uid[a.uid] = o
    return [o for o in by_uid.values()
            if not (o["metadata"].get("deletionTimestamp") and not o["metadata"].get("finalizers"))]


def test_orphan_policy_strips_owner_references_then_the_finalizer():
    rs = obj(*RS, finalizers=["orphan"], deleting=True)
    objects = [rs, pod("a"), pod("b")]
    first = sync_garbage(objects, NOW)
    assert deletes(first) == []
    assert patches(first) == {"a": {"metadata": {"ownerReferences": None}},
                              "b": {"metadata": {"ownerReferences": None}}}
    assert all(a.resource_version == "7" for a in first)
    objects = apply(objects, first)
    second = sync_garbage(objects, NOW)
    assert patches(second) == {"web": {"metadata": {"finalizers": None}}}
    objects = apply(objects, second)
    assert sorted(o["metadata"]["name"] for o in objects) == ["a", "b"]
    assert sync_garbage(objects, NOW) == []


def test_orphan_keeps_other_finalizers_and_other_owners():
    rs = obj(*RS, finalizers=["example.com/x", "orphan"], deleting=True)
    other = obj("ReplicaSet", "o", "o-uid")
    p = pod("a", owners=[RS, ("ReplicaSet", "o", "o-uid")])
    (patch,) = sync_garbage([rs, other, p], NOW)
    assert patch.name == "a"
    assert [r["uid"] for r in patch.changes["metadata"]["ownerReferences"]] == ["o-uid"]
    (fin,) = sync_garbage([rs, other], NOW)
    assert fin.changes == {"metadata": {"finalizers": ["example.com/x"]}}


def test_foreground_deletes_dependents_first_then_the_finalizer():
    dep = obj("Deployment", "d", "d-uid", finalizers=["foregroundDeletion"], deleting=True)
    rs = obj("ReplicaSet", "web", "rs-uid", owners=[("Deployment", "d", "d-uid")])
    objects = [dep, rs, pod("a"), pod("b")]
    first = sync_garbage(objects, NOW)
    # the RS has dependents of its own: it is deleted in the foreground too; nothing else yet
    assert deletes(first) == [("web", "Foreground")]
    assert patches(first) == {}
    objects = apply(objects, first)
    second = sync_garbage(objects, NOW)
    assert deletes(second) == [("a", "Background"), ("b", "Background")]
    assert patches(second) == {}  # the RS still has blocking pods, the deployment a blocking RS
    objects = apply(objects, second)
    third = sync_garbage(objects, NOW)
    assert patches(third) == {"web": {"metadata": {"finalizers": None}}}
    objects = apply(objects, third)
    fourth = sync_garbage(objects, NOW)
    assert patches(fourth) == {"d": {"metadata": {"finalizers": None}}}
    assert apply(objects, fourth) == []


def test_foreground_not_blocked_by_non_blocking_dependents():
    rs = obj(*RS, finalizers=["foregroundDeletion"], deleting=True)
    p = pod("a", block=False)
    actions = sync_garbage([rs, p], NOW)
    assert deletes(actions) == [("a", "Background")]
    assert patches(actions) == {"web": {"metadata": {"finalizers": None}}}


def test_foreground_owner_waits_for_terminating_blocking_dependent():
    rs = obj(*RS, finalizers=["foregroundDeletion"], deleting=True)
    p = pod("a", deleting=True, finalizers=["example.com/slow"])
    assert sync_garbage([rs, p], NOW) == []


def test_dependent_with_solid_owner_drops_reference_to_foreground_owner():
    rs = obj(*RS, finalizers=["foregroundDeletion"], deleting=True)
    other = obj("ReplicaSet", "o", "o-uid")
    p = pod("a", owners=[RS, ("ReplicaSet", "o", "o-uid")])
    actions = sync_garbage([rs, other, p], NOW)
    assert deletes(actions) == []
    assert [r["uid"] for r in patches(actions)["a"]["metadata"]["ownerReferences"]] == ["o-uid"]
