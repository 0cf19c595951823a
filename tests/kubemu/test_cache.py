"""kubemu/cache.py: keys, and an Indexer whose indexes must agree with a brute-force scan
after any sequence of add/update/delete/replace."""
from __future__ import annotations

import copy
from types import MappingProxyType

import pytest
from hypothesis import settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kubemu.cache import (
    NAMESPACE_INDEX,
    DeletedFinalStateUnknown,
    Indexer,
    meta_namespace_index_func,
    meta_namespace_key,
    split_meta_namespace_key,
)


def pod(name, namespace="default", node=None, owners=(), rv="1"):
    obj = {"kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                       "resourceVersion": rv,
                                       "ownerReferences": [{"uid": u} for u in owners]},
           "spec": {}}
    if node is not None:
        obj["spec"]["nodeName"] = node
    return obj


def by_node(obj):
    node = obj.get("spec", {}).get("nodeName")
    return [node] if node else []


def by_owner(obj):   # multi-valued, possibly with duplicates
    return [ref["uid"] for ref in obj["metadata"].get("ownerReferences", [])]


INDEXERS = {NAMESPACE_INDEX: meta_namespace_index_func, "node": by_node, "owner": by_owner}


# -- keys --

def test_meta_namespace_key():
    assert meta_namespace_key(pod("p", "ns")) == "ns/p"
    assert meta_namespace_key({"metadata": {"name": "n1"}}) == "n1"
    assert meta_namespace_key({"metadata": {"name": "n1", "namespace": ""}}) == "n1"
    assert meta_namespace_key(DeletedFinalStateUnknown("ns/gone", None)) == "ns/gone"
    assert meta_namespace_key("ns/explicit") == "ns/explicit"
    for bad in ({}, {"metadata": {}}, {"metadata": {"namespace": "ns"}}, 42,
                {"metadata": "ns/p"}, {"metadata": ["name"]}, {"metadata": None}):
        with pytest.raises(ValueError):
            meta_namespace_key(bad)


def test_meta_namespace_key_of_mappings_that_are_not_plain_dicts():
    # plain dicts take a shortcut; any other Mapping (a read-only view, a dict subclass) and
    # metadata that is one are keyed the same
    class Shared(dict):
        pass
    assert meta_namespace_key(MappingProxyType({"metadata": {"name": "p", "namespace": "ns"}})) == "ns/p"
    assert meta_namespace_key(Shared(metadata=Shared(name="p", namespace="ns"))) == "ns/p"
    assert meta_namespace_key({"metadata": MappingProxyType({"name": "n1"})}) == "n1"


def test_split_meta_namespace_key():
    assert split_meta_namespace_key("ns/p") == ("ns", "p")
    assert split_meta_namespace_key("n1") == ("", "n1")
    for bad in ("", "a/b/c", "ns/", "/"):
        with pytest.raises(ValueError):
            split_meta_namespace_key(bad)


# -- the indexer --

def test_crud_and_indexes():
    s = Indexer(indexers=INDEXERS)
    s.add(pod("a", "ns1", node="n1", owners=["rs1"]))
    s.add(pod("b", "ns1", node="n2", owners=["rs1", "rs2"]))
    s.add(pod("c", "ns2", node="n1"))
    s.add({"metadata": {"name": "node-x"}})          # cluster-scoped
    assert len(s) == 4 and "ns1/a" in s and "node-x" in s
    assert s.get_by_key("ns1/a")["spec"]["nodeName"] == "n1"
    assert s.get(pod("a", "ns1")) is s.get_by_key("ns1/a")
    assert s.get_by_key("nope") is None
    assert s.index_keys(NAMESPACE_INDEX, "ns1") == ["ns1/a", "ns1/b"]
    assert s.index_keys(NAMESPACE_INDEX, "") == ["node-x"]
    assert s.index_keys("node", "n1") == ["ns1/a", "ns2/c"]
    assert s.index_keys("owner", "rs1") == ["ns1/a", "ns1/b"]
    # index(): objects sharing ANY of the given object's values.
    assert [meta_namespace_key(o) for o in s.index("owner", pod("q", owners=["rs2", "rs1"]))] \
        == ["ns1/b", "ns1/a"]

    s.update(pod("a", "ns1", node="n2", owners=[]))   # move a to n2, orphan it
    assert s.index_keys("node", "n1") == ["ns2/c"]
    assert sorted(s.index_keys("node", "n2")) == ["ns1/a", "ns1/b"]
    assert s.index_keys("owner", "rs1") == ["ns1/b"]

    s.delete(pod("b", "ns1"))
    s.delete(DeletedFinalStateUnknown("ns2/c", None))
    s.delete(pod("never", "ns1"))                     # missing: not an error
    assert s.index_keys("node", "n2") == ["ns1/a"]
    assert "n1" not in s.list_index_func_values("node"), "empty buckets are dropped"
    assert "rs1" not in s.list_index_func_values("owner")
    assert sorted(s.list_keys()) == ["node-x", "ns1/a"]


def test_unknown_index_is_an_error():
    s = Indexer(indexers=INDEXERS)
    for call in (lambda: s.by_index("nope", "x"), lambda: s.index("nope", pod("a")),
                 lambda: s.list_index_func_values("nope")):
        with pytest.raises(KeyError):
            call()


def test_replace_resets_everything_and_records_the_resource_version():
    s = Indexer(indexers=INDEXERS)
    s.add(pod("old", node="n1"))
    s.replace([pod("new", node="n2"), pod("new2", node="n2")], "42")
    assert s.list_keys() == ["default/new", "default/new2"]
    assert s.list_index_func_values("node") == ["n2"]
    assert s.resource_version == "42"


def test_add_indexers_indexes_existing_objects_and_refuses_clashes():
    s = Indexer()
    s.add(pod("a", node="n1"))
    s.add_indexers({"node": by_node})
    assert s.index_keys("node", "n1") == ["default/a"]
    with pytest.raises(ValueError):
        s.add_indexers({"node": by_node})


def test_failing_index_function_leaves_the_store_unchanged():
    def picky(obj):
        if obj["metadata"]["name"] == "bad":
            raise RuntimeError("boom")
        return ["x"]
    s = Indexer(key_func=lambda o: o["metadata"]["name"], indexers={"picky": picky})
    s.add({"metadata": {"name": "good"}})
    with pytest.raises(RuntimeError):
        s.add({"metadata": {"name": "bad"}})
    assert s.list_keys() == ["good"] and s.index_keys("picky", "x") == ["good"]


def test_an_update_keeping_every_index_value_still_replaces_the_object():
    # the key is refiled only where a value changed; the object is replaced everywhere
    s = Indexer(indexers=INDEXERS)
    s.add(pod("a", "ns1", node="n1", owners=["rs1"], rv="1"))
    s.add(pod("b", "ns1", node="n1", owners=["rs1"], rv="1"))
    newer = pod("a", "ns1", node="n1", owners=["rs1"], rv="2")
    s.update(newer)
    assert s.get_by_key("ns1/a") is newer
    for name, value in ((NAMESPACE_INDEX, "ns1"), ("node", "n1"), ("owner", "rs1")):
        assert s.by_index(name, value)[0] is newer and s.index_keys(name, value) == ["ns1/a", "ns1/b"]
    s.update(pod("a", "ns1", node="n2", owners=["rs1"], rv="3"))   # only the node changes
    assert s.index_keys("node", "n1") == ["ns1/b"] and s.index_keys("node", "n2") == ["ns1/a"]
    assert s.by_index("owner", "rs1")[0]["metadata"]["resourceVersion"] == "3"


def test_index_functions_may_give_any_iterable_and_repeat_values():
    # one value or none is filed as given, more are deduped: a generator, a set, a tuple
    def by_owner_lazily(obj):
        return (ref["uid"] for ref in obj["metadata"].get("ownerReferences", []))
    s = Indexer(indexers={"owner": by_owner_lazily, "ns": lambda obj: {obj["metadata"]["namespace"]}})
    s.add(pod("a", "ns1", owners=["rs1"]))
    s.add(pod("b", "ns1", owners=["rs1", "rs2", "rs1"]))
    s.add(pod("c", "ns2"))
    assert s.index_keys("owner", "rs1") == ["ns1/a", "ns1/b"] and s.index_keys("owner", "rs2") == ["ns1/b"]
    assert [o["metadata"]["name"] for o in s.index("owner", pod("x", owners=["rs1", "rs1"]))] == ["a", "b"]
    assert s.index_keys("ns", "ns1") == ["ns1/a", "ns1/b"] and s.index_keys("ns", "ns2") == ["ns2/c"]
    s.delete("ns1/b")
    assert s.index_keys("owner", "rs1") == ["ns1/a"] and s.list_index_func_values("owner") == ["rs1"]


def test_in_place_mutation_of_a_stored_object_does_not_corrupt_indexes():
    """client-go forbids mutating cached objects; if a caller does anyway, the update that
    follows must still unfile the key from the value it was really filed under."""
    s = Indexer(indexers=INDEXERS)
    p = pod("a", node="n1")
    s.add(p)
    p["spec"]["nodeName"] = "n2"      # mutated behind the store's back
    s.update(copy.deepcopy(p))
    assert s.list_index_func_values("node") == ["n2"]


class IndexerModel(RuleBasedStateMachine):
    """Index answers against a scan of a plain dict of objects."""

    objects = st.builds(
        pod,
        name=st.sampled_from(["a", "b", "c", "d"]),
        namespace=st.sampled_from(["", "ns1", "ns2"]),
        node=st.sampled_from([None, "n1", "n2", "n3"]),
        owners=st.lists(st.sampled_from(["u1", "u2", "u3"]), max_size=3),
    )

    def __init__(self):
        super().__init__()
        self.store = Indexer(indexers=INDEXERS)
        self.model: dict = {}

    @rule(obj=objects)
    def add(self, obj):
        self.store.add(obj)
        self.model[meta_namespace_key(obj)] = obj

    @rule(obj=objects)
    def update(self, obj):
        self.store.update(obj)
        self.model[meta_namespace_key(obj)] = obj

    @rule(obj=objects)
    def delete(self, obj):
        self.store.delete(obj)
        self.model.pop(meta_namespace_key(obj), None)

    @rule(objs=st.lists(objects, max_size=6), rv=st.integers(0, 100).map(str))
    def replace(self, objs, rv):
        self.store.replace(objs, rv)
        self.model = {meta_namespace_key(o): o for o in objs}
        assert self.store.resource_version == rv

    @invariant()
    def agrees(self):
        assert sorted(self.store.list_keys()) == sorted(self.model)
        assert len(self.store) == len(self.model)
        for key, obj in self.model.items():
            assert self.store.get_by_key(key) is obj
        for name, func in INDEXERS.items():
            expected: dict = {}
            for key, obj in self.model.items():
                for value in set(func(obj)):
                    expected.setdefault(value, set()).add(key)
            assert set(self.store.list_index_func_values(name)) == set(expected)
            for value, keys in expected.items():
                got = self.store.index_keys(name, value)
                assert len(got) == len(set(got)) and set(got) == keys
                assert [meta_namespace_key(o) for o in self.store.by_index(name, value)] == got
            for obj in self.model.values():
                want = set().union(*(expected.get(v, set()) for v in func(obj)))
                assert {meta_namespace_key(o) for o in self.store.index(name, obj)} == want


TestIndexerModel = IndexerModel.TestCase
TestIndexerModel.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
