"""Watches: initial state, resumes, selector semantics, 410 Expired, bookmarks, apiserver kill -9."""
from __future__ import annotations

import pytest

from kubemu import wire
from store.client import SyncStoreClient

from . import api, pod  # noqa: F401  (api is a fixture)


def _ns(api, name):
    api.call("create", resource="namespaces", object={"metadata": {"name": name}})
    return name


def _names(items):
    return [(i["type"], i["object"]["metadata"]["name"]) for i in items]


def test_watch_from_zero_sends_state_then_changes(api):
    ns = _ns(api, "w0")
    for n in ("a", "b"):
        api.call("create", resource="pods", namespace=ns, object=pod(n))
    with api.watch(resource="pods", namespace=ns, resource_version="0") as w:
        assert _names(w.take(2)) == [("ADDED", "a"), ("ADDED", "b")]
        api.call("patch", resource="pods", namespace=ns, name="a", patch={"metadata": {"labels": {"x": "1"}}})
        api.call("delete", resource="pods", namespace=ns, name="b")
        api.call("create", resource="pods", namespace="default", object=pod("other-ns-w0"))
        api.call("create", resource="pods", namespace=ns, object=pod("c"))
        got = w.take(3)
        assert _names(got) == [("MODIFIED", "a"), ("DELETED", "b"), ("ADDED", "c")]
        assert got[0]["object"]["metadata"]["labels"] == {"x": "1"}
        rvs = [int(i["object"]["metadata"]["resourceVersion"]) for i in got]
        assert rvs == sorted(rvs)


def test_watch_from_resource_version_sends_only_later_changes_in_order(api):
    ns = _ns(api, "wrv")
    first = api.call("create", resource="pods", namespace=ns, object=pod("one"))
    rv = first["metadata"]["resourceVersion"]
    api.call("create", resource="pods", namespace=ns, object=pod("two"))
    api.call("create", resource="pods", namespace=ns, object=pod("three"))
    with api.watch(resource="pods", namespace=ns, resource_version=rv) as w:
        assert _names(w.take(2)) == [("ADDED", "two"), ("ADDED", "three")]
        api.call("delete", resource="pods", namespace=ns, name="one")
        item = w.next()
        assert _names([item]) == [("DELETED", "one")]
        assert int(item["object"]["metadata"]["resourceVersion"]) > int(rv)


def test_selector_enter_and_leave(api):
    ns = _ns(api, "wsel")
    api.call("create", resource="pods", namespace=ns, object=pod("s", labels={"app": "no"}))
    with api.watch(resource="pods", namespace=ns, label_selector="app=yes", resource_version="0") as w:
        api.call("patch", resource="pods", namespace=ns, name="s", patch={"metadata": {"labels": {"app": "yes"}}})
        assert _names([w.next()]) == [("ADDED", "s")]
        api.call("patch", resource="pods", namespace=ns, name="s", patch={"metadata": {"labels": {"x": "y"}}})
        assert _names([w.next()]) == [("MODIFIED", "s")]
        api.call("patch", resource="pods", namespace=ns, name="s", patch={"metadata": {"labels": {"app": "no"}}})
        left = w.next()
        assert _names([left]) == [("DELETED", "s")]
    # field selectors too: a pod entering spec.nodeName=n5 when bound
    api.call("create", resource="pods", namespace=ns, object=pod("f"))
    with api.watch(resource="pods", field_selector="spec.nodeName=n5") as w:
        api.call("bind", namespace=ns, name="f", node="n5")
        item = w.next()
        assert _names([item]) == [("ADDED", "f")] and item["object"]["spec"]["nodeName"] == "n5"


def test_bookmarks_carry_a_recent_resource_version(api):
    ns = _ns(api, "wbm")
    created = api.call("create", resource="pods", namespace=ns, object=pod("bm"))
    with api.watch(resource="pods", namespace=ns, resource_version=created["metadata"]["resourceVersion"],
                   allow_bookmarks=True) as w:
        item = w.next(skip_bookmarks=False)
        assert item["type"] == "BOOKMARK"
        assert int(item["object"]["metadata"]["resourceVersion"]) >= int(created["metadata"]["resourceVersion"])


def test_expired_after_compaction(api):
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l1"},
             "spec": {"holderIdentity": "a"}}
    created = api.call("create", resource="leases", namespace="default", object=lease)
    old_rv = int(created["metadata"]["resourceVersion"])
    created["spec"]["holderIdentity"] = "b"
    latest = api.call("update", resource="leases", object=created)
    with SyncStoreClient(list(api.store.endpoints.values())) as sc:
        sc.compact(int(latest["metadata"]["resourceVersion"]))
    w = api.watch(resource="leases", resource_version=str(old_rv))
    try:
        with pytest.raises(wire.Gone) as e:
            w.next()
        assert e.value.details.get("reason") == "Expired"
        assert e.value.message.startswith(f"too old resource version: {old_rv} (")
    finally:
        w.close()
    # a watch from a current resourceVersion still works
    with api.watch(resource="leases", resource_version=latest["metadata"]["resourceVersion"]) as w2:
        api.call("delete", resource="leases", namespace="default", name="l1")
        assert _names([w2.next()]) == [("DELETED", "l1")]


def test_resume_after_apiserver_kill_misses_nothing(api):
    """Runs last in the module: kill -9 the apiserver, keep writing to the store meanwhile through a
    restarted apiserver, and resume a watch from the last resourceVersion seen."""
    ns = _ns(api, "wkill")
    api.call("create", resource="pods", namespace=ns, object=pod("k0"))
    w = api.watch(resource="pods", namespace=ns, resource_version="0")
    try:
        first = w.next()
        assert _names([first]) == [("ADDED", "k0")]
        api.call("create", resource="pods", namespace=ns, object=pod("k1"))
        last = w.next()
        last_rv = last["object"]["metadata"]["resourceVersion"]
        api.kill_apiserver()
        with pytest.raises(wire.WireError):  # the open watch learns that its server is gone
            w.next()
    finally:
        w.close()
    api.start_apiserver()
    api.call("create", resource="pods", namespace=ns, object=pod("k2"))
    api.call("delete", resource="pods", namespace=ns, name="k0")
    api.call("create", resource="pods", namespace=ns, object=pod("k3"))
    with api.watch(resource="pods", namespace=ns, resource_version=last_rv) as w:
        assert _names(w.take(3)) == [("ADDED", "k2"), ("DELETED", "k0"), ("ADDED", "k3")]
