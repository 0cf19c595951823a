"""CRUD, validation, concurrency, subresources and audit against a real store and apiserver."""
from __future__ import annotations

import json

import pytest

from kubemu import wire
from kubemu.api.limits import MAX_DEPTH
from tests.conftest import wait_for

from . import api, deployment, pod  # noqa: F401  (api is a fixture)


def test_create_get_pod_round_trip(api):
    created = api.call("create", resource="pods", namespace="default", object=pod("web"))
    meta = created["metadata"]
    assert meta["name"] == "web" and meta["namespace"] == "default"
    assert meta["uid"] and meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1
    assert created["status"] == {"phase": "Pending"}
    assert created["spec"]["restartPolicy"] == "Always"  # defaulted
    got = api.call("get", resource="po", namespace="default", name="web")
    assert got == created
    assert int(got["metadata"]["resourceVersion"]) > 0


def test_not_found_wording(api):
    with pytest.raises(wire.NotFound, match='pods "nope" not found$'):
        api.call("get", resource="pods", namespace="default", name="nope")
    with pytest.raises(wire.NotFound, match='deployments.apps "x" not found$|^deployments "x" not found$'):
        api.call("get", resource="deploy", namespace="default", name="x")


def test_already_exists(api):
    api.call("create", resource="pods", object=pod("dup"))
    with pytest.raises(wire.Conflict, match='pods "dup" already exists$') as e:
        api.call("create", resource="pods", object=pod("dup"))
    assert e.value.details["reason"] == "AlreadyExists"


def test_generate_name(api):
    a = api.call("create", resource="pods", object=pod(generate_name="gen-"))
    b = api.call("create", resource="pods", object=pod(generate_name="gen-"))
    for p in (a, b):
        name = p["metadata"]["name"]
        assert name.startswith("gen-") and len(name) == len("gen-") + 5
        assert set(name[4:]) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert a["metadata"]["name"] != b["metadata"]["name"]


def test_invalid_with_field_paths(api):
    bad = pod("bad")
    bad["spec"]["containers"][0]["name"] = ""
    with pytest.raises(wire.Invalid) as e:
        api.call("create", resource="pods", object=bad)
    assert str(e.value.message).startswith('Pod "bad" is invalid')
    assert "spec.containers[0].name: Required value" in e.value.message
    assert "spec.containers[0].name" in e.value.details["causes"]


def test_unknown_field_rejected(api):
    bad = pod("unknown")
    bad["spec"]["bogus"] = 1
    with pytest.raises(wire.Invalid) as e:
        api.call("create", resource="pods", object=bad)
    assert "spec.bogus" in e.value.details["causes"]
    assert "Unknown field" in e.value.message


def test_create_in_missing_namespace(api):
    with pytest.raises(wire.NotFound, match='namespaces "ghost" not found$'):
        api.call("create", resource="pods", namespace="ghost", object=pod("p"))


def test_update_and_stale_resource_version_conflict(api):
    created = api.call("create", resource="pods", object=pod("upd", labels={"v": "1"}))
    stale = json.loads(json.dumps(created))
    created["metadata"]["labels"]["v"] = "2"
    updated = api.call("update", resource="pods", object=created)
    assert updated["metadata"]["labels"] == {"v": "2"}
    assert int(updated["metadata"]["resourceVersion"]) > int(stale["metadata"]["resourceVersion"])
    assert updated["metadata"]["generation"] == 1  # metadata only: no new generation
    stale["metadata"]["labels"]["v"] = "3"
    with pytest.raises(wire.Conflict) as e:
        api.call("update", resource="pods", object=stale)
    assert e.value.message == ('Operation cannot be fulfilled on pods "upd": the object has been modified; '
                               "please apply your changes to the latest version and try again")
    assert e.value.details["reason"] == "Conflict"
    # status is ignored by update, and kept by update_status for spec
    updated["status"] = {"phase": "Running"}
    again = api.call("update", resource="pods", object=updated)
    assert again["status"]["phase"] == "Pending"
    again["status"] = {"phase": "Running"}
    again["spec"]["activeDeadlineSeconds"] = 5
    st = api.call("update_status", resource="pods", object=again)
    assert st["status"]["phase"] == "Running" and "activeDeadlineSeconds" not in st["spec"]


def test_immutable_field_update_is_invalid(api):
    d = api.call("create", resource="deployments", object=deployment("immut"))
    d["spec"]["selector"] = {"matchLabels": {"app": "other"}}
    d["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(wire.Invalid) as e:
        api.call("update", resource="deployments", object=d)
    assert "spec.selector" in e.value.details["causes"]


def test_deployment_round_trip_generation_and_patch(api):
    d = api.call("create", resource="deployments.apps", namespace="default", object=deployment("dep"))
    assert d["metadata"]["generation"] == 1 and d["spec"]["strategy"]["type"] == "RollingUpdate"
    d["spec"]["replicas"] = 3
    d2 = api.call("update", resource="deployments", object=d)
    assert d2["metadata"]["generation"] == 2 and d2["spec"]["replicas"] == 3
    p = api.call("patch", resource="deployments", namespace="default", name="dep",
                 patch={"metadata": {"labels": {"tier": "web"}}, "spec": {"replicas": 4}})
    assert p["metadata"]["labels"] == {"tier": "web"} and p["spec"]["replicas"] == 4
    assert p["metadata"]["generation"] == 3
    p = api.call("patch", resource="deployments", namespace="default", name="dep", patch_type="json",
                 patch=[{"op": "replace", "path": "/spec/replicas", "value": 5}])
    assert p["spec"]["replicas"] == 5
    p = api.call("patch", resource="deployments", namespace="default", name="dep", patch_type="strategic",
                 patch={"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:2", "command": ["nginx"]}]}}}})
    assert p["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    with pytest.raises(wire.Conflict):  # an explicit stale resourceVersion in a patch is a precondition
        api.call("patch", resource="deployments", namespace="default", name="dep",
                 patch={"metadata": {"resourceVersion": d["metadata"]["resourceVersion"]}, "spec": {"replicas": 1}})
    st = api.call("patch", resource="deployments", namespace="default", name="dep", subresource="status",
                  patch={"status": {"replicas": 0, "observedGeneration": 5}})
    assert st["status"]["observedGeneration"] == 5
    gone = api.call("delete", resource="deployments", namespace="default", name="dep")
    assert gone["metadata"]["name"] == "dep"
    with pytest.raises(wire.NotFound):
        api.call("get", resource="deployments", namespace="default", name="dep")


def test_scale_subresource(api):
    api.call("create", resource="replicasets", object={
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "i", "command": ["x"]}]}}}})
    scale = api.call("get_scale", resource="rs", namespace="default", name="rs")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 2
    assert scale["status"]["selector"] == "a=b"
    scale = api.call("update_scale", resource="rs", namespace="default", name="rs", replicas=7)
    assert scale["spec"]["replicas"] == 7
    assert api.call("get", resource="rs", namespace="default", name="rs")["spec"]["replicas"] == 7
    with pytest.raises(wire.Invalid):
        api.call("update_scale", resource="rs", namespace="default", name="rs", replicas=-1)
    with pytest.raises(wire.NotFound):
        api.call("get_scale", resource="pods", namespace="default", name="web")


def test_bind_sets_node_once(api):
    api.call("create", resource="pods", object=pod("bindme"))
    bound = api.call("bind", namespace="default", name="bindme", node="n1")
    assert bound["spec"]["nodeName"] == "n1"
    assert any(c["type"] == "PodScheduled" for c in bound["status"]["conditions"])
    with pytest.raises(wire.Conflict, match="pod bindme is already assigned to node n1$"):
        api.call("bind", namespace="default", name="bindme", node="n2")


def test_graceful_pod_delete(api):
    api.call("create", resource="pods", object=pod("grace", terminationGracePeriodSeconds=20))
    api.call("bind", namespace="default", name="grace", node="n1")
    deleting = api.call("delete", resource="pods", namespace="default", name="grace")
    assert deleting["metadata"]["deletionTimestamp"]
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 20
    still = api.call("get", resource="pods", namespace="default", name="grace")
    assert still["metadata"]["deletionTimestamp"]
    api.call("delete", resource="pods", namespace="default", name="grace", grace_period_seconds=0)
    with pytest.raises(wire.NotFound):
        api.call("get", resource="pods", namespace="default", name="grace")


def test_unscheduled_pod_is_deleted_at_once(api):
    api.call("create", resource="pods", object=pod("unsched"))
    api.call("delete", resource="pods", namespace="default", name="unsched")
    with pytest.raises(wire.NotFound):
        api.call("get", resource="pods", namespace="default", name="unsched")


def test_finalizers_keep_object_until_removed(api):
    obj = pod("fin")
    obj["metadata"]["finalizers"] = ["example.com/hold"]
    api.call("create", resource="pods", object=obj)
    deleting = api.call("delete", resource="pods", namespace="default", name="fin")
    assert deleting["metadata"]["deletionTimestamp"]
    cur = api.call("get", resource="pods", namespace="default", name="fin")
    assert cur["metadata"]["finalizers"] == ["example.com/hold"]
    cur["metadata"]["finalizers"] = []
    api.call("update", resource="pods", object=cur)
    with pytest.raises(wire.NotFound):
        api.call("get", resource="pods", namespace="default", name="fin")


def test_propagation_policies_add_finalizers(api):
    api.call("create", resource="deployments", object=deployment("orph"))
    d = api.call("delete", resource="deployments", namespace="default", name="orph", propagation_policy="Orphan")
    assert d["metadata"]["finalizers"] == ["orphan"] and d["metadata"]["deletionTimestamp"]
    api.call("patch", resource="deployments", namespace="default", name="orph",
             patch={"metadata": {"finalizers": None}})
    with pytest.raises(wire.NotFound):
        api.call("get", resource="deployments", namespace="default", name="orph")
    api.call("create", resource="deployments", object=deployment("fg"))
    d = api.call("delete", resource="deployments", namespace="default", name="fg",
                 propagation_policy="Foreground")
    assert d["metadata"]["finalizers"] == ["foregroundDeletion"]


def test_list_with_selectors_and_pages(api):
    api.call("create", resource="namespaces", object={"metadata": {"name": "listing"}})
    for i in range(7):
        api.call("create", resource="pods", namespace="listing",
                 object=pod(f"p{i}", labels={"app": "x" if i % 2 else "y", "i": str(i)}))
    api.call("bind", namespace="listing", name="p3", node="n9")
    all_pods = api.call("list", resource="pods", namespace="listing")
    assert all_pods["kind"] == "PodList" and all_pods["apiVersion"] == "v1"
    assert [p["metadata"]["name"] for p in all_pods["items"]] == [f"p{i}" for i in range(7)]
    assert int(all_pods["metadata"]["resourceVersion"]) >= max(
        int(p["metadata"]["resourceVersion"]) for p in all_pods["items"])
    xs = api.call("list", resource="pods", namespace="listing", label_selector="app=x")
    assert [p["metadata"]["name"] for p in xs["items"]] == ["p1", "p3", "p5"]
    on_node = api.call("list", resource="pods", namespace="listing", field_selector="spec.nodeName=n9")
    assert [p["metadata"]["name"] for p in on_node["items"]] == ["p3"]
    unbound = api.call("list", resource="pods", namespace="listing", field_selector="spec.nodeName=")
    assert len(unbound["items"]) == 6
    with pytest.raises(wire.BadRequest, match="field label not supported: spec.bogus"):
        api.call("list", resource="pods", field_selector="spec.bogus=1")
    # pages: a later page reads at the first page's revision
    page = api.call("list", resource="pods", namespace="listing", limit=3)
    names = [p["metadata"]["name"] for p in page["items"]]
    rv = page["metadata"]["resourceVersion"]
    api.call("create", resource="pods", namespace="listing", object=pod("p99"))
    while page["metadata"].get("continue"):
        page = api.call("list", resource="pods", namespace="listing", limit=3,
                        **{"continue": page["metadata"]["continue"]})
        assert page["metadata"]["resourceVersion"] == rv
        names += [p["metadata"]["name"] for p in page["items"]]
    assert names == [f"p{i}" for i in range(7)]
    sel_page = api.call("list", resource="pods", namespace="listing", label_selector="app=y", limit=2)
    assert [p["metadata"]["name"] for p in sel_page["items"]] == ["p0", "p2"]
    rest = api.call("list", resource="pods", namespace="listing", label_selector="app=y", limit=2,
                    **{"continue": sel_page["metadata"]["continue"]})
    assert [p["metadata"]["name"] for p in rest["items"]] == ["p4", "p6"]
    # all namespaces
    everywhere = api.call("list", resource="pods")
    assert {"listing", "default"} <= {p["metadata"]["namespace"] for p in everywhere["items"]}
    nss = api.call("list", resource="ns")
    assert {"default", "kube-system", "listing"} <= {n["metadata"]["name"] for n in nss["items"]}


def test_too_large(api):
    big = pod("big")
    big["metadata"]["annotations"] = {f"k{i}": "x" * 100_000 for i in range(17)}
    with pytest.raises((wire.TooLarge, wire.Invalid)):
        api.call("create", resource="pods", object=big)


def nested(levels: int, leaf="x"):
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


def test_objects_nested_too_deep_are_refused_at_the_door(api):
    """A pod 900 deep once reached copy.deepcopy in the defaulting: Internal RecursionError."""
    deep = pod("deep")
    deep["metadata"]["annotations"] = nested(900)
    with pytest.raises(wire.BadRequest) as err:
        api.call("create", resource="pods", object=deep)
    assert str(err.value.message) == f"object is nested more than {MAX_DEPTH} levels deep (the limit)"
    assert err.value.details["max_depth"] == MAX_DEPTH
    fits = pod("fits")  # the pod's map, metadata, labels... exactly MAX_DEPTH deep
    fits["spec"]["x"] = nested(MAX_DEPTH - 2)
    with pytest.raises(wire.Invalid, match="spec.x: Unknown field"):  # past the door, to validation
        api.call("create", resource="pods", object=fits)
    api.call("create", resource="pods", object=pod("deep"))
    for method, params in [("update", {"object": deep}), ("update_status", {"object": deep}),
                           ("patch", {"name": "deep", "patch": {"metadata": nested(900)}}),
                           ("patch", {"name": "deep", "patch": [{"op": "add", "path": "/metadata/labels",
                                                                   "value": nested(900)}]}),
                           ("delete", {"name": nested(900)}), ("get", {"name": nested(900)}),
                           ("bind", {"name": "deep", "node": nested(900)})]:
        with pytest.raises(wire.BadRequest, match="nested more than 100 levels deep"):
            api.call(method, resource="pods", namespace="default", **params)
    for method in ("get", "list", "get_scale"):
        with pytest.raises(wire.BadRequest, match="resource is nested more than 100 levels deep"):
            api.call(method, resource=nested(900), name="x") if method != "list" else \
                api.call(method, resource=nested(900))
    with api.watch(resource=nested(900)) as watch, \
            pytest.raises(wire.BadRequest, match="resource is nested more than 100 levels deep"):
        watch.next()
    # JSON Patch copies that nest the object deeper at every step; a patch given as deep JSON text
    grow = [{"op": "add", "path": "/spec/containers/0/x", "value": nested(90)}] + \
        [{"op": "copy", "from": "/spec/containers/0/x", "path": "/spec/containers/0/x/" + "a/" * 89 + "a"}] * 15
    for patch in (grow, "[" * 5000, '{"a":' * 3000):
        with pytest.raises(wire.BadRequest, match="more than 100 levels deep"):
            api.call("patch", resource="pods", namespace="default", name="deep", patch=patch, patch_type="json")
    assert "Traceback" not in api.log_text()


def test_audit_log_lines(api):
    api.call("create", resource="pods", object=pod("audited"))
    with pytest.raises(wire.Conflict):
        api.call("create", resource="pods", object=pod("audited"))
    # who is asking comes from authentication only: no parameter names the caller
    with pytest.raises(wire.BadRequest, match="unexpected keyword argument 'user'"):
        api.client.call("delete", {"resource": "pods", "namespace": "default", "name": "audited",
                                   "user": "alice"}, timeout=15)
    api.call("delete", resource="pods", namespace="default", name="audited")

    def lines():
        text = api.audit_path.read_text() if api.audit_path.exists() else ""
        return [json.loads(line) for line in text.splitlines()
                if '"audited"' in line]
    got = wait_for(lambda: (ls := lines()) and len(ls) >= 3 and ls)
    assert [(l["verb"], l["code"], l["user"]) for l in got[:3]] == [
        ("create", 201, "system:anonymous"), ("create", 409, "system:anonymous"), ("delete", 200, "system:anonymous")]
    assert all(l["resource"] == "pods" and l["namespace"] == "default" and l["time"] for l in got)


def test_concurrent_patches_all_land(api):
    """Patches without a resourceVersion are retried on a concurrent change: none is lost."""
    import threading
    api.call("create", resource="pods", object=pod("busy"))
    errors = []

    def worker(i):
        try:
            with wire.SyncClient(api.endpoint, timeout=15) as c:
                for j in range(5):
                    c.call("patch", {"resource": "pods", "namespace": "default", "name": "busy",
                                     "patch": {"metadata": {"labels": {f"w{i}-{j}": "x"}}}})
        except Exception as exc:  # reported below
            errors.append(exc)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    labels = api.call("get", resource="pods", namespace="default", name="busy")["metadata"]["labels"]
    assert set(labels) == {f"w{i}-{j}" for i in range(4) for j in range(5)}


def test_namespace_lifecycle_seen_by_creates_at_once(api):
    """The apiserver's namespace cache never lags its own writes: a namespace is usable the
    moment it exists, refuses content once it is being deleted, and is unknown once gone."""
    api.call("create", resource="namespaces", object={"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": "fresh"}})
    api.call("create", resource="pods", namespace="fresh", object=pod("first"))
    api.call("create", resource="pods", namespace="default", object=pod("warm-the-cache"))
    api.call("update", resource="namespaces", object=dict(
        api.call("get", resource="namespaces", name="fresh"),
        metadata=dict(api.call("get", resource="namespaces", name="fresh")["metadata"], finalizers=["x/hold"])))
    api.call("delete", resource="namespaces", name="fresh")
    with pytest.raises(wire.WireError, match="being terminated"):
        api.call("create", resource="pods", namespace="fresh", object=pod("second"))
    created = api.call("create", resource="namespaces", object={"apiVersion": "v1", "kind": "Namespace",
                                                                "metadata": {"name": "gone"}})
    assert created["spec"]["finalizers"] == ["kubernetes"]  # the namespace controller's
    deleting = api.call("delete", resource="namespaces", name="gone")
    assert deleting["status"]["phase"] == "Terminating" and deleting["metadata"]["deletionTimestamp"]
    with pytest.raises(wire.WireError, match="being terminated"):
        api.call("create", resource="pods", namespace="gone", object=pod("p"))
    # what the namespace controller does once the namespace is empty: the last finalizer goes
    api.call("finalize", resource="namespaces", object=dict(deleting, spec={"finalizers": []}))
    with pytest.raises(wire.NotFound, match='namespaces "gone" not found$'):
        api.call("create", resource="pods", namespace="gone", object=pod("p"))


def test_rest_verbs_over_the_wire(api):
    """What the REST door added is on the wire too: dry runs, fieldValidation, deletecollection,
    pods/eviction, list resourceVersion semantics; audited with Kubernetes' verbs."""
    api.call("create", resource="namespaces", object={"metadata": {"name": "rest"}})
    would = api.call("create", resource="pods", namespace="rest", object=pod("dry"), dry_run=True)
    assert "resourceVersion" not in would["metadata"]
    with pytest.raises(wire.NotFound):
        api.call("get", resource="pods", namespace="rest", name="dry")
    bad = pod("strict")
    bad["spec"]["bogus"] = 1
    with pytest.raises(wire.BadRequest, match='strict decoding error: unknown field "spec.bogus"'):
        api.call("create", resource="pods", namespace="rest", object=bad, field_validation="Strict")
    ignored = api.call("create", resource="pods", namespace="rest", object=bad, field_validation="Ignore")
    assert "bogus" not in ignored["spec"]
    first = api.call("list", resource="pods", namespace="rest")["metadata"]["resourceVersion"]
    for name in ("a", "b"):
        api.call("create", resource="pods", namespace="rest", object=pod(name, labels={"sweep": "yes"}))
    old = api.call("list", resource="pods", namespace="rest", resource_version=first, resource_version_match="Exact")
    assert [p["metadata"]["name"] for p in old["items"]] == ["strict"]
    api.call("evict", namespace="rest", name="strict", object={"apiVersion": "policy/v1", "kind": "Eviction",
                                                               "metadata": {"name": "strict"}})
    swept = api.call("delete_collection", resource="pods", namespace="rest", label_selector="sweep=yes")
    assert [p["metadata"]["name"] for p in swept["items"]] == ["a", "b"]
    assert api.call("list", resource="pods", namespace="rest")["items"] == []

    def lines():
        text = api.audit_path.read_text() if api.audit_path.exists() else ""
        return [(line["verb"], line["resource"], line["name"], line["code"])
                for line in map(json.loads, text.splitlines()) if line["namespace"] == "rest"]
    wait_for(lambda: {("create", "pods/eviction", "strict", 201), ("deletecollection", "pods", "", 200)}
             <= set(lines()), message=f"the audit lines of eviction and deletecollection: {lines()}")
