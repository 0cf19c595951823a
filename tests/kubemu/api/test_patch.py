"""Merge patch (RFC 7386), strategic merge patch, JSON Patch (RFC 6902) and apply_patch."""
import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubemu.api.patch import (POD_SCHEMA, PatchError, apply_patch, create_merge_patch,
                              json_equal, json_merge_patch, json_patch, merged, schema_for,
                              strategic_merge_patch)

# RFC 7386 appendix A, verbatim.
RFC7386 = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize("target, patch, result", RFC7386)
def test_rfc7386(target, patch, result):
    before = copy.deepcopy((target, patch))
    assert json_merge_patch(target, patch) == result
    assert (target, patch) == before  # inputs untouched


def test_merge_patch_result_is_independent():
    patch = {"a": {"b": [1]}}
    out = json_merge_patch({}, patch)
    out["a"]["b"].append(2)
    assert patch == {"a": {"b": [1]}}


def test_merge_patch_copies_the_target_once_and_shares_nothing_with_it(monkeypatch):
    from kubemu.api import patch as patch_module
    target = {"status": {"conditions": [{"type": "Ready"}], "phase": "Pending", "deep": {"x": [1]}},
              "spec": {"containers": [{"name": "c"}]}, "list": [1]}
    before = copy.deepcopy(target)
    copied = []
    real = patch_module.json_copy
    monkeypatch.setattr(patch_module, "json_copy", lambda v: copied.append(v) or real(v))
    out = json_merge_patch(target, {"status": {"phase": "Running", "deep": {"y": 2}}, "list": {"k": {"v": 1}}})
    assert out == {"status": {"conditions": [{"type": "Ready"}], "phase": "Running", "deep": {"x": [1], "y": 2}},
                   "spec": {"containers": [{"name": "c"}]}, "list": {"k": {"v": 1}}}
    # each part of the target once, not again per patched level
    assert [sum(c is part for c in copied) for part in (target["spec"], target["status"]["conditions"])] == [1, 1]
    out["status"]["conditions"].append(None)
    out["status"]["deep"]["x"].append(None)
    out["spec"]["containers"][0]["name"] = "changed"
    assert target == before



def test_merged_copies_only_the_maps_the_patch_reaches_into_and_changes_neither_input():
    target = {"status": {"conditions": [{"type": "Ready"}], "phase": "Pending"}, "spec": {"x": [1]},
              "metadata": {"labels": {"a": "1"}}}
    patch = {"status": {"phase": "Running", "hostIPs": [{"ip": "10.0.0.1"}]}, "metadata": {"labels": {"a": None}}}
    before = copy.deepcopy((target, patch))
    out = merged(target, patch)
    assert out == json_merge_patch(target, patch)
    assert out["spec"] is target["spec"] and out["status"]["conditions"] is target["status"]["conditions"]
    assert out["status"]["hostIPs"] is patch["status"]["hostIPs"]
    assert out["status"] is not target["status"] and out["metadata"]["labels"] == {}
    assert (target, patch) == before
    assert apply_patch(target, patch, "merge", shared=True) == out
    assert apply_patch(target, patch, "merge")["spec"] is not target["spec"]

def test_json_copy_copies_a_part_found_twice_twice_and_anything_else_deeply():
    from kubemu.api.patch import json_copy
    shared = {"a": [1, {"b": 2}]}
    value = {"x": shared, "y": [shared, 3.5, True, None, b"raw", "s"]}
    out = json_copy(value)
    assert out == value and out["x"] is not shared and out["y"][0] is not out["x"]
    out["x"]["a"][1]["b"] = 9  # independent of the original and of the other copy
    assert shared == {"a": [1, {"b": 2}]} and out["y"][0] == shared
    odd = {"t": ([1],), "s": {1, 2}}  # not JSON: deep-copied as copy.deepcopy does
    odd_copy = json_copy(odd)
    assert odd_copy == odd and odd_copy["t"][0] is not odd["t"][0]


# The example of "Update API Objects in Place Using kubectl patch" (strategic merge patch).
DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "patch-demo"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "nginx"}},
             "template": {"metadata": {"labels": {"app": "nginx"}},
                          "spec": {"containers": [{"name": "patch-demo-ctr", "image": "nginx"}],
                                   "tolerations": [{"effect": "NoSchedule",
                                                    "key": "dedicated", "value": "test-team"}]}}},
}


def _containers(obj):
    return obj["spec"]["template"]["spec"]["containers"]


def test_docs_example_adds_container_and_keeps_others():
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "patch-demo-ctr-2", "image": "redis"}]}}}}
    before = copy.deepcopy(DEPLOYMENT)
    out = strategic_merge_patch(DEPLOYMENT, patch)
    assert _containers(out) == [{"name": "patch-demo-ctr", "image": "nginx"},
                                {"name": "patch-demo-ctr-2", "image": "redis"}]
    assert DEPLOYMENT == before
    # the same patch as a JSON merge patch replaces the list
    merged = apply_patch(DEPLOYMENT, patch, "merge")
    assert _containers(merged) == [{"name": "patch-demo-ctr-2", "image": "redis"}]


def test_docs_example_tolerations_are_replaced():
    patch = {"spec": {"template": {"spec": {"tolerations": [
        {"effect": "NoSchedule", "key": "disktype", "value": "ssd"}]}}}}
    out = strategic_merge_patch(DEPLOYMENT, patch)
    assert out["spec"]["template"]["spec"]["tolerations"] == [
        {"effect": "NoSchedule", "key": "disktype", "value": "ssd"}]
    assert _containers(out) == _containers(DEPLOYMENT)


def test_merge_existing_container_by_name():
    two = strategic_merge_patch(DEPLOYMENT, {"spec": {"template": {"spec": {"containers": [
        {"name": "b", "image": "redis"}]}}}})
    out = strategic_merge_patch(two, {"spec": {"template": {"spec": {"containers": [
        {"name": "patch-demo-ctr", "image": "nginx:1.27", "args": ["-g"]}]}}}})
    assert _containers(out) == [{"name": "patch-demo-ctr", "image": "nginx:1.27", "args": ["-g"]},
                                {"name": "b", "image": "redis"}]


def test_delete_container_with_patch_directive():
    two = strategic_merge_patch(DEPLOYMENT, {"spec": {"template": {"spec": {"containers": [
        {"name": "b", "image": "redis"}]}}}})
    out = strategic_merge_patch(two, {"spec": {"template": {"spec": {"containers": [
        {"name": "patch-demo-ctr", "$patch": "delete"}]}}}})
    assert _containers(out) == [{"name": "b", "image": "redis"}]
    # deleting an item that is not there is fine
    assert strategic_merge_patch(out, {"spec": {"template": {"spec": {"containers": [
        {"name": "zzz", "$patch": "delete"}]}}}}) == out


def test_replace_list_directive():
    out = strategic_merge_patch(DEPLOYMENT, {"spec": {"template": {"spec": {"containers": [
        {"$patch": "replace"}, {"name": "only", "image": "busybox"}]}}}})
    assert _containers(out) == [{"name": "only", "image": "busybox"}]


def test_map_directives():
    pod = {"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
           "spec": {"containers": [{"name": "c", "image": "i",
                                    "resources": {"limits": {"cpu": "1"}}}]}}
    out = strategic_merge_patch(pod, {"metadata": {"labels": {"$patch": "replace", "c": "3"}}})
    assert out["metadata"]["labels"] == {"c": "3"}
    out = strategic_merge_patch(pod, {"metadata": {"labels": {"$patch": "delete"}}})
    assert "labels" not in out["metadata"]
    out = strategic_merge_patch(pod, {"metadata": {"labels": {"a": None, "z": "9"}}})
    assert out["metadata"]["labels"] == {"b": "2", "z": "9"}
    out = strategic_merge_patch(pod, {"spec": {"containers": [
        {"name": "c", "resources": {"limits": {"memory": "1Gi"}}}]}})
    assert out["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1", "memory": "1Gi"}
    with pytest.raises(PatchError, match="unknown patch type: explode"):
        strategic_merge_patch(pod, {"metadata": {"$patch": "explode"}})


def test_env_ports_and_volume_mounts_merge_by_key():
    pod = {"kind": "Pod", "spec": {"containers": [{
        "name": "app", "image": "x",
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        "ports": [{"containerPort": 80, "name": "http"}],
        "args": ["one", "two"]}]}}
    out = strategic_merge_patch(pod, {"spec": {"containers": [{
        "name": "app",
        "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"},
                {"name": "A", "$patch": "delete"}],
        "ports": [{"containerPort": 443, "name": "https"}],
        "args": ["three"]}]}})
    ctr = out["spec"]["containers"][0]
    assert ctr["env"] == [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]
    assert ctr["ports"] == [{"containerPort": 80, "name": "http"},
                            {"containerPort": 443, "name": "https"}]
    assert ctr["args"] == ["three"]  # no patch strategy: replaced


def test_init_containers_owner_references_and_finalizers():
    pod = {"kind": "Pod", "metadata": {
        "ownerReferences": [{"uid": "u1", "name": "rs-1", "kind": "ReplicaSet"}],
        "finalizers": ["a", "b"]},
        "spec": {"initContainers": [{"name": "init", "image": "x"}], "containers": []}}
    out = strategic_merge_patch(pod, {
        "metadata": {"ownerReferences": [{"uid": "u1", "controller": True}, {"uid": "u2"}],
                     "finalizers": ["b", "c"], "$deleteFromPrimitiveList/finalizers": ["a"]},
        "spec": {"initContainers": [{"name": "init", "image": "y"}]}})
    assert out["metadata"]["ownerReferences"] == [
        {"uid": "u1", "name": "rs-1", "kind": "ReplicaSet", "controller": True}, {"uid": "u2"}]
    assert out["metadata"]["finalizers"] == ["b", "c"]
    assert out["spec"]["initContainers"] == [{"name": "init", "image": "y"}]


def test_retain_keys_and_set_element_order_are_handled():
    d = {"kind": "Deployment", "spec": {"strategy": {"type": "RollingUpdate",
                                                     "rollingUpdate": {"maxSurge": 1}}}}
    out = strategic_merge_patch(d, {"spec": {"strategy": {"$retainKeys": ["type"],
                                                          "type": "Recreate"}}})
    assert out["spec"]["strategy"] == {"type": "Recreate"}
    out = strategic_merge_patch(DEPLOYMENT, {"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "patch-demo-ctr"}]}}}})
    assert out == DEPLOYMENT


def test_missing_merge_key_is_an_error():
    with pytest.raises(PatchError, match="does not contain declared merge key: name"):
        strategic_merge_patch(DEPLOYMENT, {"spec": {"template": {"spec": {"containers": [
            {"image": "redis"}]}}}})


def test_new_lists_get_directives_processed():
    out = strategic_merge_patch({"kind": "Pod"}, {"spec": {"containers": [
        {"name": "a", "env": [{"name": "X", "value": "1"}], "x": None}]}})
    assert out == {"kind": "Pod", "spec": {"containers": [
        {"name": "a", "env": [{"name": "X", "value": "1"}]}]}}


def test_schemas():
    assert schema_for("Pod")["spec.containers"] == "name"
    assert schema_for("Pod")["spec.containers[].ports"] == "containerPort"
    assert schema_for("ReplicaSet")["spec.template.spec.containers[].env"] == "name"
    assert schema_for("CronJob")["spec.jobTemplate.spec.template.spec.containers"] == "name"
    assert "spec.tolerations" not in POD_SCHEMA
    assert schema_for("Widget") == {"metadata.ownerReferences": "uid",
                                    "metadata.finalizers": ""}
    # an explicit schema wins over the kind's
    out = strategic_merge_patch({"kind": "Widget", "items": [{"id": 1, "v": 1}]},
                                {"items": [{"id": 2}]}, {"items": "id"})
    assert out["items"] == [{"id": 1, "v": 1}, {"id": 2}]


# --- RFC 6902 --------------------------------------------------------------------------------

@pytest.mark.parametrize("doc, ops, result", [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"foo": "bar", "baz": "qux"}),
    ({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
     {"foo": ["bar", "qux", "baz"]}),
    ({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": "x"}], {"foo": ["bar", "x"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}],
     {"baz": "boo", "foo": "bar"}),
    ({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ({"foo": ["all", "grass", "cows", "eat"]}, [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
     {"foo": ["all", "cows", "eat", "grass"]}),
    ({"a": {"b": 1}}, [{"op": "copy", "from": "/a", "path": "/c"}], {"a": {"b": 1}, "c": {"b": 1}}),
    ({"baz": "qux", "foo": ["a", 2, "c"]},
     [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    ({"/": 9, "~1": 10}, [{"op": "replace", "path": "/~01", "value": 1}], {"/": 9, "~1": 1}),
    ({"a/b": 1}, [{"op": "remove", "path": "/a~1b"}], {}),
])
def test_json_patch(doc, ops, result):
    before = copy.deepcopy(doc)
    assert json_patch(doc, ops) == result
    assert doc == before


@pytest.mark.parametrize("doc, ops, match", [
    ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], "test operation 0 failed"),
    ({"a": 1}, [{"op": "test", "path": "/a", "value": True}], "test operation 0 failed"),
    ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], "does not exist"),
    ({"foo": "bar"}, [{"op": "remove", "path": "/nope"}], "no such key"),
    ({"foo": "bar"}, [{"op": "replace", "path": "/nope", "value": 1}], "does not exist"),
    ({"foo": [1]}, [{"op": "add", "path": "/foo/5", "value": 1}], "out of bounds"),
    ({"foo": [1]}, [{"op": "remove", "path": "/foo/01"}], "invalid array index"),
    ({"foo": 1}, [{"op": "frobnicate", "path": "/foo"}], "unknown op"),
    ({"foo": 1}, [{"op": "add", "path": "/bar"}], "missing \"value\""),
    ({"foo": 1}, [{"op": "add", "value": 1}], "missing \"path\""),
    ({"foo": 1}, {"op": "add"}, "must be a list"),
    ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/c"}], "own child"),
])
def test_json_patch_errors(doc, ops, match):
    with pytest.raises(PatchError, match=match):
        json_patch(doc, ops)


def test_json_patch_is_atomic():
    doc = {"a": 1}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "add", "path": "/b", "value": 2},
                         {"op": "test", "path": "/a", "value": 3}])
    assert doc == {"a": 1}


# --- apply_patch ---------------------------------------------------------------------------

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "a", "image": "x"}]}}


@pytest.mark.parametrize("patch_type", ["merge", "application/merge-patch+json"])
def test_apply_merge(patch_type):
    out = apply_patch(POD, '{"metadata": {"labels": {"app": null, "tier": "db"}}}', patch_type)
    assert out["metadata"]["labels"] == {"tier": "db"}


@pytest.mark.parametrize("patch_type", ["strategic", "application/strategic-merge-patch+json",
                                        "application/strategic-merge-patch+json; charset=utf-8"])
def test_apply_strategic(patch_type):
    out = apply_patch(POD, {"spec": {"containers": [{"name": "b", "image": "y"}]}}, patch_type)
    assert [c["name"] for c in out["spec"]["containers"]] == ["a", "b"]


@pytest.mark.parametrize("patch_type", ["json", "application/json-patch+json"])
def test_apply_json(patch_type):
    out = apply_patch(POD, b'[{"op": "replace", "path": "/spec/containers/0/image", "value": "z"}]',
                      patch_type)
    assert out["spec"]["containers"][0]["image"] == "z"
    assert POD["spec"]["containers"][0]["image"] == "x"


def test_apply_errors():
    with pytest.raises(PatchError, match="unsupported patch type 'apply'"):
        apply_patch(POD, {}, "apply")
    with pytest.raises(PatchError, match="invalid JSON"):
        apply_patch(POD, "{nope", "merge")
    with pytest.raises(PatchError, match="must be a JSON object"):
        apply_patch(POD, '"x"', "merge")
    with pytest.raises(PatchError, match="must be an object"):
        apply_patch(POD, [1], "strategic")


# --- properties ------------------------------------------------------------------------------

# JSON values in which no object holds a null (a merge patch cannot express setting null)
_json = st.recursive(
    st.one_of(st.booleans(), st.integers(-5, 5), st.text(max_size=3)),
    lambda inner: st.one_of(st.lists(st.one_of(inner, st.none()), max_size=3),
                            st.dictionaries(st.text(max_size=2), inner, max_size=4)),
    max_leaves=12)
_obj = st.dictionaries(st.text(max_size=2), _json, max_size=4)


@given(_obj, _obj)
def test_create_merge_patch_round_trip(a, b):
    patch = create_merge_patch(a, b)
    assert json_equal(json_merge_patch(a, patch), b)
    # it survives JSON encoding, as it must to be sent to an apiserver
    assert json_equal(json_merge_patch(a, json.loads(json.dumps(patch))), b)


@given(_obj)
def test_identity_patch_is_empty(a):
    assert create_merge_patch(a, a) == {}
    assert json_merge_patch(a, {}) == a


@given(_obj, _obj)
def test_strategic_without_lists_in_schema_is_a_merge_patch(a, b):
    patch = create_merge_patch(a, b)
    assert json_equal(strategic_merge_patch(a, patch, {}), json_merge_patch(a, patch))


def test_json_equal():
    assert not json_equal(True, 1) and json_equal(1, 1.0)
    assert not json_equal({"a": [True]}, {"a": [1]})
    assert json_equal({"a": [None, "x"]}, {"a": [None, "x"]})


def test_json_patch_cannot_nest_past_the_depth_limit():
    """Copying a subtree into itself nests deeper at every operation: refused, not a RecursionError."""
    deep: dict = {"leaf": 1}
    for _ in range(90):
        deep = {"a": deep}
    target = {"kind": "Pod", "spec": {"x": deep}}
    grow = [{"op": "copy", "from": "/spec/x", "path": "/spec/x/" + "a/" * 89 + "a"}] * 15
    with pytest.raises(PatchError, match=r"^operation 0 \(copy\) would nest the object more than 100 levels deep"):
        apply_patch(target, grow, "json")
    with pytest.raises(PatchError, match="nested more than 100 levels deep"):
        apply_patch(target, "[" * 100_000, "json")
    with pytest.raises(PatchError, match=r"operation 0 \(add\) would nest"):
        apply_patch(target, [{"op": "add", "path": "/spec/x/" + "a/" * 20 + "b", "value": deep}], "json")
    fits = apply_patch(target, [{"op": "add", "path": "/spec/x/" + "a/" * 6 + "b", "value": deep}], "json")
    assert fits["spec"]["x"]["a"]["a"]["a"]["a"]["a"]["a"]["b"] == deep  # 9 + 91 levels: exactly the limit
