"""The Endpoints controller's core: ready and not-ready addresses, terminating pods, subsets
repacked by port set, the 1000-address cap, labels, leftovers, and no write when unchanged."""
from __future__ import annotations

from components.controllers import CreateObject, DeleteObject, UpdateObject
from components.controllers.endpoints import (CONTROLLER_NAME, LABEL_MANAGED_BY, OVER_CAPACITY,
                                              reconcile)
from components.controllers.endpointslice import LABEL_HEADLESS, TRIGGER_TIME

from .test_endpointslice import STAMP, T0, pod, service

KEY = "default/web"


def write(svc, pods, current=None, trigger=T0):
    actions = reconcile(svc, KEY, pods, current, trigger)
    assert len(actions) <= 1
    if not actions:
        return None
    (action,) = actions
    assert isinstance(action, UpdateObject if current else CreateObject)
    obj = action.object
    obj["metadata"]["resourceVersion"] = str(int((current or {}).get("metadata", {})
                                                 .get("resourceVersion", "1")) + 1)
    obj["metadata"].setdefault("uid", "ep-uid")
    return obj


def address(name, ip, node="node-1"):
    return {"ip": ip, "nodeName": node,
            "targetRef": {"kind": "Pod", "namespace": "default", "name": name,
                          "uid": f"uid-{name}"}}


def test_ready_and_not_ready_addresses_terminating_left_out():
    ep = write(service(), [pod("a"), pod("b", ip="10.244.1.6", ready=False),
                           pod("c", ip="10.244.1.7", terminating=True),
                           pod("d", ip=None), pod("e", ip="10.244.1.8", phase="Failed")])
    assert ep["metadata"] == {"name": "web", "namespace": "default", "resourceVersion": "2",
                              "uid": "ep-uid",
                              "labels": {LABEL_MANAGED_BY: CONTROLLER_NAME},
                              "annotations": {TRIGGER_TIME: STAMP}}
    assert ep["subsets"] == [{"addresses": [address("a", "10.244.1.5")],
                              "notReadyAddresses": [address("b", "10.244.1.6")],
                              "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]


def test_publish_not_ready_addresses_keeps_everyone_ready_even_terminating():
    ep = write(service(publish=True), [pod("a", ready=False), pod("c", ip="10.244.1.7",
                                                                   terminating=True)])
    assert [a["ip"] for a in ep["subsets"][0]["addresses"]] == ["10.244.1.5", "10.244.1.7"]
    assert "notReadyAddresses" not in ep["subsets"][0]


def test_subsets_are_repacked_by_port_set_in_a_fixed_order():
    svc = service(ports=[{"name": "metrics", "port": 9090, "targetPort": "metrics",
                          "protocol": "TCP"},
                         {"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}])
    both = [{"name": "http", "containerPort": 8080}, {"name": "metrics", "containerPort": 9100}]
    pods = [pod("b", ip="10.244.1.9", ports=both), pod("a", ip="10.244.1.10", ports=both),
            pod("c", ip="10.244.1.7", ports=[{"name": "http", "containerPort": 8080}])]
    ep = write(svc, pods)
    assert ep["subsets"] == [
        {"addresses": [address("a", "10.244.1.10"), address("c", "10.244.1.7"),
                       address("b", "10.244.1.9")],   # k8s sorts IPs as bytes
         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]},
        {"addresses": [address("a", "10.244.1.10"), address("b", "10.244.1.9")],
         "ports": [{"name": "metrics", "port": 9100, "protocol": "TCP"}]}]
    assert write(svc, list(reversed(pods)), current=ep) is None   # same input, same object


def test_headless_without_ports_has_a_portless_subset_and_the_headless_label():
    ep = write(service(cluster_ip="None", ports=[], labels={"tier": "db"}), [pod("a")])
    assert ep["subsets"] == [{"addresses": [address("a", "10.244.1.5")]}]
    assert ep["metadata"]["labels"] == {"tier": "db", LABEL_HEADLESS: "",
                                        LABEL_MANAGED_BY: CONTROLLER_NAME}


def test_hostname_when_the_subdomain_names_the_service():
    ep = write(service(), [pod("a", hostname="a0", subdomain="web")])
    assert ep["subsets"][0]["addresses"][0]["hostname"] == "a0"


def test_no_write_when_unchanged_then_an_update_on_a_readiness_flip():
    ep = write(service(), [pod("a"), pod("b", ip="10.244.1.6")])
    assert write(service(), [pod("a"), pod("b", ip="10.244.1.6")], current=ep) is None
    pod_rv_bumped = pod("a")
    pod_rv_bumped["metadata"]["resourceVersion"] = "7"
    assert write(service(), [pod_rv_bumped, pod("b", ip="10.244.1.6")], current=ep) is None
    flipped = write(service(), [pod("a", ready=False), pod("b", ip="10.244.1.6")], current=ep,
                    trigger=None)
    assert flipped["metadata"]["resourceVersion"] == "3"
    assert [a["ip"] for a in flipped["subsets"][0]["notReadyAddresses"]] == ["10.244.1.5"]
    assert TRIGGER_TIME not in flipped["metadata"].get("annotations", {})


def test_no_pods_no_subsets():
    ep = write(service(), [])
    assert "subsets" not in ep and write(service(), [], current=ep) is None


def test_more_than_1000_addresses_are_truncated_and_annotated():
    pods = [pod(f"p{i:04d}", ip=f"10.244.{i // 250}.{i % 250 + 2}", ready=i % 2 == 0)
            for i in range(1300)]
    ep = write(service(), pods)
    (subset,) = ep["subsets"]
    assert len(subset["addresses"]) == 650 and len(subset["notReadyAddresses"]) == 350
    assert ep["metadata"]["annotations"][OVER_CAPACITY] == "truncated"
    assert write(service(), pods, current=ep) is None
    fewer = write(service(), pods[:10], current=ep)
    assert OVER_CAPACITY not in fewer["metadata"]["annotations"]
    many_ready = [pod(f"p{i:04d}", ip=f"10.244.{i // 250}.{i % 250 + 2}") for i in range(1200)]
    (subset,) = write(service(), many_ready)["subsets"]
    assert len(subset["addresses"]) == 1000 and "notReadyAddresses" not in subset


def test_services_without_selector_keep_their_users_endpoints():
    theirs = {"apiVersion": "v1", "kind": "Endpoints",
              "metadata": {"name": "web", "namespace": "default", "uid": "u"},
              "subsets": [{"addresses": [{"ip": "192.0.2.1"}], "ports": [{"port": 80}]}]}
    assert reconcile(service(selector={}), KEY, [pod("a")], theirs, T0) == []
    assert reconcile(service(type="ExternalName"), KEY, [pod("a")], None, T0) == []


def test_a_leftover_is_deleted_only_if_this_controller_made_it():
    ours = write(service(), [pod("a")])
    assert reconcile(None, KEY, [], ours) == [DeleteObject("v1", "Endpoints", "default", "web",
                                                           "ep-uid")]
    theirs = {"apiVersion": "v1", "kind": "Endpoints",
              "metadata": {"name": "web", "namespace": "default", "uid": "u"}}
    assert reconcile(None, KEY, [], theirs) == []
    assert reconcile(None, KEY, [], None) == []


def test_every_endpoints_written_passes_the_api_validation():
    from kubemu.api.objects import default_object, validate_object
    for ep in (write(service(), [pod("a"), pod("b", ip="10.244.1.6", ready=False)]),
               write(service(cluster_ip="None", ports=[]), [pod("a", hostname="a0",
                                                                 subdomain="web")]),
               write(service(), [])):
        assert validate_object(default_object(ep)) == [], ep
