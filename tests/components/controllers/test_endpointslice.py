"""The EndpointSlice controller's core: endpoints and their conditions, ports resolved per pod,
slices of at most N endpoints filled before new ones, the placeholder, labels/annotation/owner,
and no write when nothing changed. A small simulator applies the actions the way the API would
(names for generateName, growing resourceVersions) to run several syncs in a row."""
from __future__ import annotations

import itertools

import pytest

from components.controllers import CreateObject, DeleteObject, UpdateObject
from components.controllers.endpointslice import (CONTROLLER_NAME, LABEL_HEADLESS,
                                                  LABEL_MANAGED_BY, LABEL_SERVICE_NAME,
                                                  TRIGGER_TIME, SliceTracker, TriggerTimes,
                                                  format_trigger_time, reconcile,
                                                  services_to_update)
from components.controllers.podutil import find_port

T0 = 1_800_000_000.0
STAMP = "2027-01-15T08:00:00Z"   # format_trigger_time(T0)


def service(name="web", *, selector=None, ports=None, labels=None, cluster_ip="10.96.0.20",
            publish=False, uid="svc-uid", **spec):
    body = {"selector": {"app": name} if selector is None else selector,
            "ports": ports if ports is not None else [
                {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
            "clusterIP": cluster_ip, "ipFamilies": ["IPv4"], **spec}
    if publish:
        body["publishNotReadyAddresses"] = True
    m = {"name": name, "namespace": "default", "uid": uid, "creationTimestamp": STAMP}
    if labels:
        m["labels"] = labels
    return {"apiVersion": "v1", "kind": "Service", "metadata": m, "spec": body}


def pod(name, ip="10.244.1.5", *, ready=True, terminating=False, phase="Running", node="node-1",
        labels=None, ports=None, hostname=None, subdomain=None, since=STAMP):
    m = {"name": name, "namespace": "default", "uid": f"uid-{name}",
         "labels": labels if labels is not None else {"app": "web"}, "resourceVersion": "1"}
    if terminating:
        m["deletionTimestamp"] = STAMP
    spec = {"nodeName": node, "containers": [{"name": "c", "ports": ports or [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"}]}]}
    if hostname:
        spec["hostname"] = hostname
    if subdomain:
        spec["subdomain"] = subdomain
    status = {"phase": phase, "conditions": [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": since}]}
    if ip:
        status.update(podIP=ip, podIPs=[{"ip": ip}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m, "spec": spec, "status": status}


NODES = {"node-1": {"metadata": {"name": "node-1",
                                 "labels": {"topology.kubernetes.io/zone": "zone-a"}}},
         "node-2": {"metadata": {"name": "node-2"}}}


class Api:
    """The slices as the API would hold them after the actions."""

    def __init__(self):
        self.slices: dict[str, dict] = {}
        self.rv = itertools.count(100)
        self.names = itertools.count()
        self.writes = 0

    def apply(self, actions):
        for action in actions:
            self.writes += 1
            if isinstance(action, CreateObject):
                obj = action.object
                obj["metadata"]["name"] = obj["metadata"].pop("generateName") + \
                    f"x{next(self.names):04d}"
                obj["metadata"]["uid"] = f"slice-{obj['metadata']['name']}"
            elif isinstance(action, UpdateObject):
                obj = action.object
                assert obj["metadata"]["name"] in self.slices
            else:
                assert isinstance(action, DeleteObject)
                del self.slices[action.name]
                continue
            obj["metadata"]["resourceVersion"] = str(next(self.rv))
            self.slices[obj["metadata"]["name"]] = obj

    def sync(self, svc, pods, trigger=T0, max_per_slice=100, nodes=NODES):
        result = reconcile(svc, pods, nodes, list(self.slices.values()), trigger, max_per_slice)
        self.apply(result.actions)
        return result

    def endpoints(self):
        return sorted(e["targetRef"]["name"] for s in self.slices.values() for e in s["endpoints"])


def only_slice(api):
    assert len(api.slices) == 1, api.slices
    return next(iter(api.slices.values()))


# --- endpoints and conditions -----------------------------------------------------------------

@pytest.mark.parametrize("ready,terminating,publish,expected", [
    (True, False, False, {"ready": True, "serving": True, "terminating": False}),
    (False, False, False, {"ready": False, "serving": False, "terminating": False}),
    (True, True, False, {"ready": False, "serving": True, "terminating": True}),
    (False, True, False, {"ready": False, "serving": False, "terminating": True}),
    (False, False, True, {"ready": True, "serving": False, "terminating": False}),
    (True, True, True, {"ready": True, "serving": True, "terminating": True}),
])
def test_endpoint_conditions(ready, terminating, publish, expected):
    api = Api()
    api.sync(service(publish=publish), [pod("a", ready=ready, terminating=terminating)])
    (endpoint,) = only_slice(api)["endpoints"]
    assert endpoint == {"addresses": ["10.244.1.5"], "conditions": expected,
                        "targetRef": {"kind": "Pod", "namespace": "default", "name": "a",
                                      "uid": "uid-a"},
                        "nodeName": "node-1", "zone": "zone-a"}


def test_pods_without_ip_or_finished_are_not_endpoints_and_other_labels_not_picked():
    api = Api()
    api.sync(service(), [pod("noip", ip=None), pod("done", phase="Succeeded", ip="10.244.1.6"),
                         pod("failed", phase="Failed", ip="10.244.1.7"),
                         pod("other", ip="10.244.1.8", labels={"app": "db"}),
                         pod("ok", ip="10.244.1.9")])
    assert api.endpoints() == ["ok"]


def test_a_readiness_flip_updates_the_slice_in_place():
    api = Api()
    api.sync(service(), [pod("a"), pod("b", ip="10.244.1.6")])
    name = only_slice(api)["metadata"]["name"]
    api.sync(service(), [pod("a", ready=False), pod("b", ip="10.244.1.6")], trigger=T0 + 5)
    s = only_slice(api)
    assert s["metadata"]["name"] == name
    conditions = {e["targetRef"]["name"]: e["conditions"]["ready"] for e in s["endpoints"]}
    assert conditions == {"a": False, "b": True}
    assert s["metadata"]["annotations"][TRIGGER_TIME] == format_trigger_time(T0 + 5)


def test_a_terminating_pod_is_kept_serving_then_removed_when_gone():
    api = Api()
    api.sync(service(), [pod("a"), pod("b", ip="10.244.1.6")])
    api.sync(service(), [pod("a", terminating=True), pod("b", ip="10.244.1.6")])
    by_name = {e["targetRef"]["name"]: e["conditions"] for e in only_slice(api)["endpoints"]}
    assert by_name["a"] == {"ready": False, "serving": True, "terminating": True}
    api.sync(service(), [pod("b", ip="10.244.1.6")], trigger=None)
    assert api.endpoints() == ["b"]
    assert "annotations" not in only_slice(api)["metadata"]   # no trigger: none, not {}


def test_hostname_only_when_the_subdomain_names_the_service():
    api = Api()
    api.sync(service(), [pod("a", hostname="a0", subdomain="web"),
                         pod("b", ip="10.244.1.6", hostname="b0", subdomain="other"),
                         pod("c", ip="10.244.1.7", hostname="c0")])
    hosts = {e["targetRef"]["name"]: e.get("hostname") for e in only_slice(api)["endpoints"]}
    assert hosts == {"a": "a0", "b": None, "c": None}


def test_a_pod_on_an_unknown_node_is_skipped_and_reported():
    api = Api()
    result = api.sync(service(), [pod("a"), pod("b", ip="10.244.1.6", node="gone")])
    assert api.endpoints() == ["a"]
    assert result.skipped == ("b (node gone not found)",)
    # ... unless every address is published anyway
    api = Api()
    result = api.sync(service(publish=True), [pod("b", ip="10.244.1.6", node="gone")])
    assert api.endpoints() == ["b"] and result.skipped == ()


# --- ports ------------------------------------------------------------------------------------

def test_find_port_by_number_by_name_and_protocol():
    p = pod("a", ports=[{"name": "http", "containerPort": 8080},
                        {"name": "dns", "containerPort": 53, "protocol": "UDP"}])
    assert find_port(p, {"port": 80, "targetPort": 9000}) == 9000
    assert find_port(p, {"port": 80}) == 80
    assert find_port(p, {"port": 80, "targetPort": "http"}) == 8080
    assert find_port(p, {"port": 53, "targetPort": "dns", "protocol": "UDP"}) == 53
    assert find_port(p, {"port": 53, "targetPort": "dns"}) is None   # TCP: no such port
    assert find_port(p, {"port": 80, "targetPort": "nope"}) is None
    sidecar = {"spec": {"containers": [], "initContainers": [
        {"name": "s", "restartPolicy": "Always", "ports": [{"name": "m", "containerPort": 9}]},
        {"name": "i", "ports": [{"name": "x", "containerPort": 7}]}]}}
    assert find_port(sidecar, {"port": 1, "targetPort": "m"}) == 9
    assert find_port(sidecar, {"port": 1, "targetPort": "x"}) is None


def test_an_unresolved_port_name_puts_the_pod_in_a_slice_without_that_port():
    svc = service(ports=[{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"},
                         {"name": "metrics", "port": 9090, "targetPort": "metrics",
                          "protocol": "TCP"}])
    full = pod("a", ports=[{"name": "http", "containerPort": 8080},
                           {"name": "metrics", "containerPort": 9100}])
    partial = pod("b", ip="10.244.1.6", ports=[{"name": "http", "containerPort": 8081}])
    api = Api()
    api.sync(svc, [full, partial])
    by_ports = {tuple((p["name"], p["port"]) for p in s["ports"]):
                [e["targetRef"]["name"] for e in s["endpoints"]] for s in api.slices.values()}
    assert by_ports == {(("http", 8080), ("metrics", 9100)): ["a"], (("http", 8081),): ["b"]}


def test_a_headless_service_without_ports_gets_a_portless_slice_and_the_headless_label():
    api = Api()
    api.sync(service(cluster_ip="None", ports=[]), [pod("a")])
    s = only_slice(api)
    assert s["ports"] == [] and len(s["endpoints"]) == 1
    assert s["metadata"]["labels"][LABEL_HEADLESS] == ""


# --- slices -----------------------------------------------------------------------------------

def many(n, start=0):
    return [pod(f"p{i:03d}", ip=f"10.244.{i // 200}.{i % 200 + 2}")
            for i in range(start, start + n)]


def test_250_pods_make_3_slices_of_at_most_100_and_a_second_sync_writes_nothing():
    api = Api()
    api.sync(service(), many(250))
    assert sorted(len(s["endpoints"]) for s in api.slices.values()) == [50, 100, 100]
    assert len(api.endpoints()) == 250 == len(set(api.endpoints()))
    writes = api.writes
    result = api.sync(service(), many(250), trigger=T0 + 60)
    assert result.actions == [] and api.writes == writes


def test_max_endpoints_per_slice_is_a_parameter():
    api = Api()
    api.sync(service(), many(7), max_per_slice=3)
    assert sorted(len(s["endpoints"]) for s in api.slices.values()) == [1, 3, 3]


def test_new_endpoints_fill_a_slice_with_room_before_a_new_one_is_made():
    api = Api()
    api.sync(service(), many(150))
    assert sorted(len(s["endpoints"]) for s in api.slices.values()) == [50, 100]
    api.sync(service(), many(180))
    assert sorted(len(s["endpoints"]) for s in api.slices.values()) == [80, 100]


def test_a_slice_being_updated_is_filled_first_and_untouched_slices_are_not_rebalanced():
    api = Api()
    api.sync(service(), many(200))   # two full slices
    full = {n: [e["targetRef"]["name"] for e in s["endpoints"]] for n, s in api.slices.items()}
    first = min(full)
    gone = full[first][:10]
    pods = [p for p in many(200) if p["metadata"]["name"] not in gone] + many(5, start=200)
    result = api.sync(service(), pods)
    assert [type(a) for a in result.actions] == [UpdateObject]   # only the slice that lost pods
    sizes = {n: len(s["endpoints"]) for n, s in api.slices.items()}
    assert sizes == {first: 95, max(full): 100}


def test_a_port_change_rewrites_the_slice_instead_of_deleting_and_creating_one():
    api = Api()
    api.sync(service(), [pod("a")])
    name = only_slice(api)["metadata"]["name"]
    moved = service(ports=[{"name": "http", "port": 80, "targetPort": 9090, "protocol": "TCP"}])
    result = api.sync(moved, [pod("a")])
    assert [type(a) for a in result.actions] == [UpdateObject]
    s = only_slice(api)
    assert s["metadata"]["name"] == name and s["ports"][0]["port"] == 9090


def test_a_service_without_pods_gets_one_placeholder_slice_kept_across_syncs():
    api = Api()
    api.sync(service(), [])
    s = only_slice(api)
    assert s["endpoints"] == [] and s["ports"] == []
    assert api.sync(service(), []).actions == []
    api.sync(service(), [pod("a")])
    assert api.endpoints() == ["a"]
    api.sync(service(), [])
    assert only_slice(api)["endpoints"] == []


def test_a_slice_the_api_returns_without_empty_lists_is_read_as_empty():
    headless = service(cluster_ip="None", ports=[])   # its pods' port set is the placeholder's
    api = Api()
    api.sync(headless, [])
    placeholder = only_slice(api)
    del placeholder["endpoints"], placeholder["ports"]
    assert api.sync(headless, []).actions == []
    relabelled = service(cluster_ip="None", ports=[], labels={"tier": "x"})
    api.sync(relabelled, [pod("a")])   # relabelled and filled in one update
    s = only_slice(api)
    assert s["metadata"]["labels"]["tier"] == "x" and api.endpoints() == ["a"]


def test_metadata_labels_annotation_and_owner_reference():
    api = Api()
    api.sync(service(labels={"tier": "front", LABEL_MANAGED_BY: "me"}), [pod("a")])
    s = only_slice(api)
    m = s["metadata"]
    assert m["name"].startswith("web-") and s["addressType"] == "IPv4"
    assert m["labels"] == {"tier": "front", LABEL_SERVICE_NAME: "web",
                           LABEL_MANAGED_BY: CONTROLLER_NAME}
    assert m["annotations"] == {TRIGGER_TIME: STAMP}
    assert m["ownerReferences"] == [{"apiVersion": "v1", "kind": "Service", "name": "web",
                                     "uid": "svc-uid", "controller": True,
                                     "blockOwnerDeletion": True}]
    assert s["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    # a change of the Service's labels is a write; of nothing else, none
    result = api.sync(service(labels={"tier": "back"}), [pod("a")])
    assert [type(a) for a in result.actions] == [UpdateObject]
    assert only_slice(api)["metadata"]["labels"]["tier"] == "back"


def test_other_managers_slices_are_never_touched_and_an_old_services_are_replaced():
    theirs = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": "web-custom", "namespace": "default", "uid": "u1",
                           "labels": {LABEL_SERVICE_NAME: "web", LABEL_MANAGED_BY: "someone"}},
              "addressType": "IPv4", "endpoints": [], "ports": []}
    api = Api()
    api.slices["web-custom"] = theirs
    api.sync(service(), [pod("a")])
    assert api.slices["web-custom"] is theirs and len(api.slices) == 2
    # the Service is recreated (new uid): its predecessor's slice (the garbage collector's
    # now) is deleted, never reused, and a slice of its own made
    (old_name,) = set(api.slices) - {"web-custom"}
    result = api.sync(service(uid="svc-2"), [pod("a")])
    assert [type(a) for a in result.actions] == [CreateObject, DeleteObject]
    (ours,) = [s for n, s in api.slices.items() if n != "web-custom"]
    assert ours["metadata"]["name"] != old_name
    assert ours["metadata"]["ownerReferences"][0]["uid"] == "svc-2"


def test_services_without_selector_or_external_names_get_nothing():
    assert reconcile(service(selector={}), [pod("a")], NODES, []).actions == []
    assert reconcile(service(type="ExternalName"), [pod("a")], NODES, []).actions == []


def test_a_service_being_deleted_creates_nothing():
    svc = service()
    svc["metadata"]["deletionTimestamp"] = STAMP
    assert reconcile(svc, [pod("a")], NODES, []).actions == []


# --- trigger times, pod changes, the write record ---------------------------------------------

def test_trigger_time_is_creation_first_then_the_earliest_changed_readiness():
    times = TriggerTimes()
    svc = service()
    pods = [pod("a", since="2027-01-15T08:00:10Z"), pod("b", since="2027-01-15T08:00:20Z")]
    assert times.compute(svc, pods) == T0
    assert times.compute(svc, pods) is None   # nothing changed since
    pods = [pod("a", since="2027-01-15T08:00:40Z"), pod("b", since="2027-01-15T08:00:30Z")]
    assert times.compute(svc, pods) == T0 + 30
    times.forget("default/web")
    assert times.compute(svc, pods) == T0
    assert format_trigger_time(T0 + 0.25) == "2027-01-15T08:00:00.25Z"


def test_which_services_a_pod_update_concerns():
    web, db = service("web"), service("db")
    old = pod("a")
    new = pod("a", ready=False)
    new["metadata"]["resourceVersion"] = "2"
    assert services_to_update([web, db], old, new) == {"default/web"}
    relabelled = pod("a", labels={"app": "db"})
    relabelled["metadata"]["resourceVersion"] = "2"
    assert services_to_update([web, db], old, relabelled) == {"default/web", "default/db"}
    annotated = pod("a")
    annotated["metadata"]["resourceVersion"] = "2"
    assert services_to_update([web, db], old, annotated) == set()
    assert services_to_update([web, db], old, old) == set()   # a resync


def test_a_pod_update_skips_only_the_services_without_a_selector():
    # the shortcut for namespaces whose Services select nothing ("default" and its
    # "kubernetes") must never drop a Service that has a selector, whatever its place or type
    kubernetes = service("kubernetes", selector={})
    web = service("web")
    external = service("web-external", selector={"app": "web"}, type="ExternalName",
                       externalName="example.com")
    old = pod("a")
    new = pod("a", ready=False)
    new["metadata"]["resourceVersion"] = "2"
    assert services_to_update([kubernetes], old, new) == set()
    assert services_to_update([kubernetes, web, external], old, new) == {"default/web",
                                                                       "default/web-external"}
    relabelled = pod("a", labels={"app": "db"})
    relabelled["metadata"]["resourceVersion"] = "2"
    assert services_to_update([kubernetes, web], old, relabelled) == {"default/web"}


def test_the_tracker_tells_a_cache_behind_this_controllers_writes():
    api, tracker, svc = Api(), SliceTracker(), service()
    api.sync(svc, [pod("a")])
    written = only_slice(api)
    tracker.written(written)
    assert tracker.stale(svc, [])                          # the cache has not seen the create
    assert not tracker.stale(svc, [written])
    assert not tracker.should_sync(written)                 # our own write's event
    older = {**written, "metadata": {**written["metadata"], "resourceVersion": "1"}}
    assert tracker.stale(svc, [older])
    newer = {**written, "metadata": {**written["metadata"], "resourceVersion": "999"}}
    assert tracker.should_sync(newer) and not tracker.stale(svc, [newer])
    tracker.expect_deletion(written)
    assert tracker.stale(svc, [written]) and not tracker.stale(svc, [])
    assert tracker.deleted(written)                         # expected
    assert not tracker.deleted(written)                     # not any more
    tracker.written(written)
    assert tracker.stale(service(uid="other"), []) is False  # a new Service of that name


def test_every_slice_written_passes_the_api_validation():
    from kubemu.api.objects import default_object, validate_object
    api = Api()
    api.sync(service(labels={"tier": "front"}),
             [pod("a", hostname="a0", subdomain="web"),
              pod("b", ip="10.244.1.6", ready=False, terminating=True)])
    api.sync(service("headless", cluster_ip="None", ports=[], selector={"app": "web"}),
             [pod("a")])
    api.sync(service("empty"), [])
    assert len(api.slices) == 3
    for s in api.slices.values():
        assert validate_object(default_object(s)) == [], s
