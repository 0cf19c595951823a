"""Shared controller helpers: claiming by controller reference, the FNV hashes."""
from __future__ import annotations

import copy

import pytest

from components.controllers import Adopt, PatchObject, Release
from components.controllers.podutil import (POD_TEMPLATE_HASH, claim_objects, equal_ignore_hash,
                                            fnv1_32, fnv1a_32, format_time, is_pod_active,
                                            is_pod_available, is_pod_ready, owner_reference,
                                            pod_from_template, readiness, safe_encode,
                                            strip_hash_label)

GONE = "2026-01-01T00:00:00Z"


def owner(deleting: bool = False) -> dict:
    metadata = {"name": "web", "namespace": "ns", "uid": "owner-uid"}
    if deleting:
        metadata["deletionTimestamp"] = GONE
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": metadata,
            "spec": {"selector": {"matchLabels": {"app": "web"}}}}


REF = owner_reference(owner(), "ReplicaSet")


def obj(name: str, app: str = "web", controller: str | None = None, deleting: bool = False,
        namespace: str = "ns") -> dict:
    metadata: dict = {"name": name, "namespace": namespace, "uid": f"{name}-uid",
                      "labels": {"app": app}}
    if controller is not None:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                        "name": controller, "uid": f"{controller}",
                                        "controller": True}]
    if deleting:
        metadata["deletionTimestamp"] = GONE
    return {"metadata": metadata}


def claim(objects, deleting: bool = False, **kw):
    owned, actions = claim_objects(owner(deleting), objects, "Pod", REF, **kw)
    return [o["metadata"]["name"] for o in owned], actions


@pytest.mark.parametrize("deleting", [False, True])
def test_an_owned_match_is_kept_without_a_write_even_while_the_owner_is_deleted(deleting):
    assert claim([obj("a", controller="owner-uid")], deleting=deleting) == (["a"], [])


def test_an_owned_object_that_stopped_matching_is_released():
    assert claim([obj("a", app="db", controller="owner-uid")]) == \
        ([], [Release("Pod", "ns", "a", "a-uid", "owner-uid")])


def test_it_is_released_even_while_it_is_being_deleted_but_not_while_the_owner_is():
    stale = obj("a", app="db", controller="owner-uid", deleting=True)
    assert claim([stale]) == ([], [Release("Pod", "ns", "a", "a-uid", "owner-uid")])
    assert claim([stale], deleting=True) == ([], [])


def test_a_matching_orphan_is_adopted():
    assert claim([obj("a")]) == (["a"], [Adopt("Pod", "ns", "a", "a-uid", REF)])


@pytest.mark.parametrize("orphan, deleting", [(obj("a"), True),              # owner going
                                              (obj("a", deleting=True), False),  # orphan going
                                              (obj("a", app="db"), False),       # no match
                                              (obj("a", namespace="other"), False)])
def test_an_orphan_is_left_alone(orphan, deleting):
    assert claim([orphan], deleting=deleting) == ([], [])


def test_another_controllers_object_is_left_alone_matching_or_not():
    assert claim([obj("a", controller="other-uid"),
                  obj("b", app="db", controller="other-uid")]) == ([], [])


def test_the_member_filter_is_anded_with_the_selector():
    owned, actions = claim([obj("stranger"), obj("stranger2", controller="owner-uid"),
                            obj("friend")], member=lambda o: o["metadata"]["name"] == "friend")
    assert owned == ["friend"]
    assert actions == [Release("Pod", "ns", "stranger2", "stranger2-uid", "owner-uid"),
                       Adopt("Pod", "ns", "friend", "friend-uid", REF)]


def test_a_custom_adoption_writes_its_action_and_returns_the_adopted_object():
    def adopt(o):
        adopted = {**o, "metadata": {**o["metadata"], "finalizers": ["f"]}}
        return PatchObject("v1", "Pod", "ns", "a", "a-uid", {"metadata": {"finalizers": ["f"]}},
                           None), adopted
    owned, actions = claim_objects(owner(), [obj("a")], "Pod", REF, adopt=adopt)
    assert [o["metadata"]["finalizers"] for o in owned] == [["f"]]
    assert actions == [PatchObject("v1", "Pod", "ns", "a", "a-uid",
                                   {"metadata": {"finalizers": ["f"]}}, None)]


def test_objects_of_another_namespace_are_neither_owned_adopted_nor_released():
    others = [obj("mine", controller="owner-uid", namespace="other"),
              obj("orphan", namespace="other"), obj("stray", app="db", controller="owner-uid",
                                                    namespace="other")]
    assert claim(others) == ([], [])


def test_an_object_without_labels_is_not_wanted():
    assert claim([{"metadata": {"name": "bare", "namespace": "ns", "uid": "u"}}]) == ([], [])
    mine = obj("mine", controller="owner-uid")
    mine["metadata"]["labels"] = None
    assert claim([mine]) == ([], [Release("Pod", "ns", "mine", "mine-uid", "owner-uid")])


NOW = 1_700_000_000.0


def _pod(conditions=None, phase=None, deleting=False) -> dict:
    pod: dict = {"metadata": {"name": "p"}, "status": {}}
    if conditions is not None:
        pod["status"]["conditions"] = conditions
    if phase is not None:
        pod["status"]["phase"] = phase
    if deleting:
        pod["metadata"]["deletionTimestamp"] = GONE
    return pod


def _ready(status="True", since=None) -> list[dict]:
    cond = {"type": "Ready", "status": status}
    if since is not None:
        cond["lastTransitionTime"] = since
    return [{"type": "PodScheduled", "status": "True"}, cond]


@pytest.mark.parametrize("pod, min_ready, expected", [
    (_pod(), 0, (False, False)),
    (_pod([{"type": "Ready"}]), 0, (False, False)),                    # no status: not ready
    (_pod(_ready("False", format_time(NOW - 100))), 0, (False, False)),
    (_pod(_ready()), 0, (True, True)),                  # no minReadySeconds: ready is available
    (_pod(_ready()), 5, (True, False)),                 # no transition time: never available
    (_pod(_ready(since="not a time")), 5, (True, False)),
    (_pod(_ready(since=format_time(NOW - 5))), 5, (True, True)),       # exactly minReadySeconds
    (_pod(_ready(since=format_time(NOW - 4))), 5, (True, False)),
])
def test_readiness_is_is_pod_ready_and_is_pod_available_in_one_read(pod, min_ready, expected):
    assert readiness(pod, min_ready, NOW) == expected
    assert (is_pod_ready(pod), is_pod_available(pod, min_ready, NOW)) == expected


@pytest.mark.parametrize("pod, active", [
    (_pod(), True), (_pod(phase="Pending"), True), (_pod(phase="Running"), True),
    (_pod(phase="Succeeded"), False), (_pod(phase="Failed"), False),
    (_pod(phase="Running", deleting=True), False),
    ({"metadata": {"deletionTimestamp": ""}}, True),     # an empty timestamp is no delete
    ({}, True),
])
def test_a_pod_is_active_unless_finished_or_being_deleted(pod, active):
    assert is_pod_active(pod) is active


def test_a_pod_from_a_template_shares_nothing_with_it():
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}]}}
    before = copy.deepcopy(template)
    pod = pod_from_template(template, "ns", owner(), "ReplicaSet", "web-")
    assert pod["spec"] == template["spec"]
    pod["spec"]["containers"][0]["env"][0]["value"] = "2"
    pod["metadata"]["labels"]["app"] = "db"
    assert template == before


def test_fnv1_is_go_fnv_new32_and_fnv1a_is_go_fnv_new32a():
    assert fnv1_32(b"") == fnv1a_32(b"") == 0x811C9DC5
    assert fnv1_32(b"a") == 0x050C5D7E
    assert fnv1a_32(b"a") == 0xE40C292C
    assert fnv1_32(b"foobar") == 0x31F0B262
    assert fnv1a_32(b"foobar") == 0xBF9CF968


def test_safe_encode_uses_the_vowel_free_alphabet():
    assert set(safe_encode(str(fnv1a_32(b"x")))) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_equal_ignore_hash_compares_without_touching_either_template():
    # it compares views sharing the templates' insides: the cached templates stay as they were
    hashed = {"metadata": {"labels": {"app": "web", POD_TEMPLATE_HASH: "abc"}},
              "spec": {"containers": [{"name": "c", "image": "v1"}]}}
    plain = {"metadata": {"labels": {"app": "web"}, "annotations": {}},
             "spec": {"containers": [{"name": "c", "image": "v1"}]}}
    before = copy.deepcopy((hashed, plain))
    assert equal_ignore_hash(hashed, plain) and equal_ignore_hash(plain, hashed)
    assert (hashed, plain) == before
    assert not equal_ignore_hash(hashed, {**plain, "spec": {"containers": []}})
    only_hash = {"metadata": {"labels": {POD_TEMPLATE_HASH: "abc"}}, "spec": {}}
    assert equal_ignore_hash(only_hash, {"spec": {}}) and only_hash["metadata"]["labels"]
    stripped = strip_hash_label(hashed)
    stripped["spec"]["containers"][0]["image"] = "v2"
    assert hashed == before[0], "strip_hash_label still returns a copy of its own"
