"""kubectl apply's three-way patch and its last-applied-configuration annotation."""
from __future__ import annotations

import copy
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kubemu.api.patch import apply_patch as patch_object
from kubemu.api.patch import schema_for
from kubemu.kubectl.apply import LAST_APPLIED, apply_patch, last_applied, last_applied_text, with_last_applied
from kubemu.kubectl.threeway import three_way_patch


def deployment(**spec) -> dict:
    base = {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "c", "image": "nginx", "command": ["nginx"],
                                                  "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}}
    base.update(spec)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": base}


def live(manifest: dict, **extra) -> dict:
    """The object as the apiserver holds it after `kubectl apply` created it, plus others' changes."""
    obj = with_last_applied(manifest)
    obj["metadata"].update(namespace="default", uid="u", resourceVersion="5")
    obj["spec"].setdefault("revisionHistoryLimit", 10)
    for path, value in extra.items():
        target = obj
        *parents, leaf = path.split("__")
        for p in parents:
            target = target.setdefault(p, {})
        target[leaf] = value
    return obj


def applied(manifest: dict, current: dict) -> dict:
    return patch_object(current, apply_patch(manifest, current), "strategic", schema_for(current["kind"]))


def test_annotation_is_the_manifest_as_compact_sorted_json():
    m = deployment()
    m["metadata"]["annotations"] = {LAST_APPLIED: "old", "keep": "x"}
    text = last_applied_text(m)
    assert text.endswith("}\n") and " " not in text.replace("nginx", "")
    assert json.loads(text)["metadata"] == {"annotations": {"keep": "x"}, "name": "web"}
    assert list(json.loads(text)) == sorted(json.loads(text))
    assert last_applied(with_last_applied(deployment())) == deployment()
    assert last_applied({"metadata": {"annotations": {LAST_APPLIED: "not json"}}}) is None


def test_unchanged_manifest_is_an_empty_patch():
    m = deployment()
    assert apply_patch(m, live(m, spec__progressDeadlineSeconds=600)) == {}


def test_fields_others_set_are_kept_and_fields_dropped_are_removed():
    first = deployment()
    first["metadata"]["labels"] = {"team": "a"}
    current = live(first, metadata__annotations={LAST_APPLIED: last_applied_text(first), "controller": "x"})
    current["spec"]["replicas"] = 5  # scaled by someone else
    second = deployment()
    del second["spec"]["replicas"]  # the manifest stops managing replicas
    second["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    result = applied(second, current)
    assert "replicas" not in result["spec"]  # it was in the last apply: removed
    assert "labels" not in result["metadata"]
    assert result["metadata"]["annotations"]["controller"] == "x"
    assert result["spec"]["revisionHistoryLimit"] == 10  # never in a manifest: kept
    assert result["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert last_applied(result) == second


def test_keyed_lists_merge_by_name():
    first = deployment()
    current = live(first)
    # another actor added a container; the manifest drops env B and adds C
    current["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "envoy"})
    second = deployment()
    env = second["spec"]["template"]["spec"]["containers"][0]["env"]
    env[1:] = [{"name": "C", "value": "3"}]
    patch = apply_patch(second, current)
    containers = patch["spec"]["template"]["spec"]["containers"]
    assert containers == [{"name": "c", "env": [{"name": "B", "$patch": "delete"}, {"name": "C", "value": "3"}]}]
    result = applied(second, current)
    names = [c["name"] for c in result["spec"]["template"]["spec"]["containers"]]
    assert names == ["c", "sidecar"]
    assert result["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"},
                                                                          {"name": "C", "value": "3"}]


def test_dropping_a_container_deletes_it_and_atomic_lists_are_replaced():
    two = deployment()
    two["spec"]["template"]["spec"]["containers"].append({"name": "d", "image": "redis", "command": ["redis"]})
    current = live(two)
    one = deployment()
    one["spec"]["template"]["spec"]["containers"][0]["command"] = ["nginx", "-g", "daemon off;"]
    result = applied(one, current)
    (c,) = result["spec"]["template"]["spec"]["containers"]
    assert c["command"] == ["nginx", "-g", "daemon off;"]


def test_finalizers_are_a_set():
    first = deployment()
    first["metadata"]["finalizers"] = ["a", "b"]
    current = live(first)
    current["metadata"]["finalizers"].append("theirs")
    second = deployment()
    second["metadata"]["finalizers"] = ["a", "c"]
    assert applied(second, current)["metadata"]["finalizers"] == ["a", "theirs", "c"]


def test_without_a_schema_it_is_a_json_merge_patch():
    original = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    modified = {"a": {"c": [1]}, "e": 2}
    current = {"a": {"b": 1, "c": [1, 2], "x": 9}, "d": 1, "y": 8}
    assert three_way_patch(original, modified, current, {}) == {"a": {"b": None, "c": [1]}, "d": None, "e": 2}


_json = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.text("ab", max_size=2),
                     lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from("abc"),
                                                                                        children, max_size=3),
                     max_leaves=8)
_maps = st.dictionaries(st.sampled_from("abcd"), _json.filter(lambda v: v is not None), max_size=4)


@settings(max_examples=200, deadline=None)
@given(original=_maps, modified=_maps, current=_maps)
def test_applying_the_patch_yields_the_manifest_where_it_speaks(original, modified, current):
    """Whatever the history, after apply every field the manifest sets has its value, and a
    top-level field it dropped since the last apply is gone."""
    assert all(v is not None for v in modified.values())
    patch = three_way_patch(original, modified, current, {})
    result = patch_object(copy.deepcopy(current), patch, "merge")
    for key, value in modified.items():
        if not isinstance(value, dict):
            assert result[key] == value
    for key in set(original) - set(modified):
        assert key not in result
