"""ControllerRevision helpers: hashing, naming, equality, ordering."""
from __future__ import annotations

from components.controllers.history import (HASH_LABEL, equal_revision,
                                            find_equal_revisions, go_json, new_revision,
                                            next_revision, revision_hash, sort_revisions,
                                            template_data, template_of)
from components.controllers.podutil import fnv1_32, format_time, safe_encode

STS = {"apiVersion": "apps/v1", "kind": "StatefulSet",
       "metadata": {"name": "web", "namespace": "ns", "uid": "sts-uid",
                    "annotations": {"team": "a"}},
       "spec": {"selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web", "tier": "fe"}},
                             "spec": {"containers": [{"name": "c", "image": "img:1"}]}}}}


def data_of(image: str) -> dict:
    return {"spec": {"template": {"$patch": "replace", "metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}}


def test_go_json_sorts_compacts_and_escapes_html():
    assert go_json({"b": 1, "a": "<&>", "c": "é"}) == '{"a":"\\u003c\\u0026\\u003e","b":1,"c":"é"}'.encode()


def test_hash_is_the_safe_encoded_decimal_of_the_sum_and_the_collision_count_changes_it():
    data = data_of("img:1")
    assert revision_hash(data) == safe_encode(str(fnv1_32(go_json(data))))
    assert revision_hash(data, 0) == safe_encode(str(fnv1_32(go_json(data) + b"0")))
    assert revision_hash(data, 1) != revision_hash(data, 0)
    assert revision_hash(data, 0) == revision_hash(data_of("img:1"), 0)  # deterministic
    assert revision_hash(data_of("img:2"), 0) != revision_hash(data, 0)
    assert set(revision_hash(data, 7)) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_new_revision_shape():
    data = data_of("img:1")
    cr = new_revision(STS, data, 3, 0)
    h = revision_hash(data, 0)
    assert cr["apiVersion"] == "apps/v1" and cr["kind"] == "ControllerRevision"
    assert cr["metadata"]["name"] == f"web-{h}"
    assert cr["metadata"]["namespace"] == "ns"
    assert cr["metadata"]["labels"] == {"app": "web", "tier": "fe", HASH_LABEL: h}
    assert cr["metadata"]["annotations"] == {"team": "a"}
    assert cr["metadata"]["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "sts-uid",
         "controller": True, "blockOwnerDeletion": True}]
    assert cr["data"] == data and cr["data"] is not data
    assert cr["revision"] == 3


def test_long_owner_names_are_truncated_to_223_bytes():
    owner = {**STS, "metadata": {**STS["metadata"], "name": "x" * 250}}
    cr = new_revision(owner, data_of("a"), 1)
    assert cr["metadata"]["name"].startswith("x" * 223 + "-")
    assert len(cr["metadata"]["name"]) <= 253


def test_equality_is_on_data_only():
    a = new_revision(STS, data_of("img:1"), 1, 0)
    b = new_revision(STS, data_of("img:1"), 5, 2)  # other number, other collision count
    c = new_revision(STS, data_of("img:2"), 1, 0)
    assert equal_revision(a, b)
    assert not equal_revision(a, c)
    assert equal_revision(None, None) and not equal_revision(a, None)
    assert find_equal_revisions([c, a, b], a) == [a, b]


def test_sort_by_number_then_creation_then_name_and_next_number():
    def rev(name, n, created):
        return {"metadata": {"name": name, "creationTimestamp": format_time(created)},
                "revision": n}
    r1, r2a, r2b, r3 = rev("d", 1, 50), rev("b", 2, 20), rev("a", 2, 20), rev("c", 3, 10)
    r2c = rev("z", 2, 10)
    assert [r["metadata"]["name"] for r in sort_revisions([r3, r2a, r1, r2b, r2c])] == \
        ["d", "z", "a", "b", "c"]
    assert next_revision([r3, r1]) == 4
    assert next_revision([]) == 1


def test_template_data_replaces_the_template_and_template_of_restores_it():
    data = template_data(STS)
    assert data == {"spec": {"template": {**STS["spec"]["template"], "$patch": "replace"}}}
    assert "$patch" not in STS["spec"]["template"]
    assert template_of({"data": data}) == STS["spec"]["template"]
    assert template_of({}) == {}
