"""components.apiserver.servicestrategy: what an update keeps of a Service's allocations, what a
type change drops, and the allocation transactions."""
from __future__ import annotations

import copy
import random

import pytest

from components.apiserver.serviceips import parse_port_range
from components.apiserver.servicestrategy import Allocations, prepare_for_create, prepare_for_update
from kubemu.api.fielderrors import ValidationError

OLD = {"metadata": {"name": "web", "namespace": "default"},
       "spec": {"type": "NodePort", "clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"],
                "externalTrafficPolicy": "Cluster",
                "ports": [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080},
                          {"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 30053}]}}


def updated(**spec) -> dict:
    new = {"metadata": {"name": "web"}, "spec": spec}
    prepare_for_update(OLD, new)
    return new["spec"]


def test_an_update_leaving_allocated_values_out_keeps_them():
    spec = updated(type="NodePort", ports=[{"name": "dns", "port": 53, "protocol": "UDP"},
                                           {"name": "web", "port": 80}])
    assert spec["clusterIP"] == "10.96.0.5" and spec["clusterIPs"] == ["10.96.0.5"]
    # by name only (patchAllocatedValues): "web" was not a port's name, so it gets a new one
    assert [p.get("nodePort") for p in spec["ports"]] == [30053, None]
    assert updated(type="NodePort", clusterIP="None")["clusterIP"] == "None"  # left for validation to refuse
    assert OLD["spec"]["ports"][0] == {"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080}


def test_an_unnamed_port_keeps_its_node_port_when_its_number_changes():
    old = {"metadata": {"name": "web"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.5",
                                                  "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}}
    new = {"metadata": {"name": "web"}, "spec": {"type": "NodePort", "ports": [{"port": 8080, "protocol": "TCP"}]}}
    prepare_for_update(old, new)
    assert new["spec"]["ports"][0]["nodePort"] == 30080  # the name "" matches, as upstream's np[p.Name]


LB_LOCAL = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                                                  "clusterIP": "10.96.0.6", "healthCheckNodePort": 30099,
                                                  "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30081}]}}


def test_the_health_check_node_port_is_kept_while_needed_and_dropped_when_not():
    new = {"metadata": {"name": "lb"}, "spec": {**LB_LOCAL["spec"], "healthCheckNodePort": None}}
    prepare_for_update(LB_LOCAL, new)
    assert new["spec"]["healthCheckNodePort"] == 30099
    cluster = {"metadata": {"name": "lb"}, "spec": {**LB_LOCAL["spec"], "externalTrafficPolicy": "Cluster"}}
    prepare_for_update(LB_LOCAL, cluster)
    assert "healthCheckNodePort" not in cluster["spec"]
    changed = {"metadata": {"name": "lb"}, "spec": {**LB_LOCAL["spec"], "type": "NodePort", "healthCheckNodePort": 30098}}
    prepare_for_update(LB_LOCAL, changed)
    assert changed["spec"]["healthCheckNodePort"] == 30098  # changed by the user: validation says no


def test_external_traffic_policy_stays_while_the_service_is_externally_accessible():
    as_before = {**copy.deepcopy(OLD["spec"]), "type": "ClusterIP", "externalIPs": ["192.0.2.10"]}
    assert updated(**as_before)["externalTrafficPolicy"] == "Cluster"


def test_a_type_change_drops_what_the_new_type_does_not_use_when_left_as_it_was():
    as_before = copy.deepcopy(OLD["spec"])
    as_before["type"] = "ClusterIP"
    spec = updated(**as_before)
    assert all("nodePort" not in p for p in spec["ports"]) and "externalTrafficPolicy" not in spec
    changed = copy.deepcopy(as_before)
    changed["ports"][0]["nodePort"] = 30081  # a nodePort the user changed: kept, validation says no
    assert updated(**changed)["ports"][0]["nodePort"] == 30081
    external = updated(**{**OLD["spec"], "type": "ExternalName", "externalName": "example.com"})
    assert "clusterIP" not in external and "clusterIPs" not in external


def test_create_clears_the_status_a_client_sent():
    svc = {"status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}
    prepare_for_create(svc)
    assert svc["status"] == {"loadBalancer": {}}


def test_transactions_revert_and_commit():
    a = Allocations("10.96.0.0/24", parse_port_range("30000-30099"), rand=random.Random(1))
    svc, txn = a.update(None, copy.deepcopy(OLD))
    assert a.ips.has("10.96.0.5") and a.ports.has(30080) and a.ports.has(30053)
    txn.revert()
    assert a.ips.free() == 254 and a.ports.free() == 100
    svc, txn = a.update(None, copy.deepcopy(OLD))
    txn.commit()
    new = copy.deepcopy(svc)
    new["spec"]["ports"] = [{"name": "http", "port": 80, "protocol": "TCP", "nodePort": 30080},
                            {"name": "dns", "port": 53, "protocol": "UDP"}]
    out, txn = a.update(svc, new)
    fresh = out["spec"]["ports"][1]["nodePort"]
    assert fresh not in (30080, 30053) and a.ports.has(fresh) and a.ports.has(30053)  # freed on commit only
    txn.commit()
    assert not a.ports.has(30053) and a.ports.has(30080)
    two_protocols = {"metadata": {"name": "dns"}, "spec": {"type": "NodePort", "ports": [
        {"name": "a", "port": 53, "protocol": "UDP"}, {"name": "b", "port": 53, "protocol": "TCP"}]}}
    out, _ = a.update(None, two_protocols)
    assert out["spec"]["ports"][0]["nodePort"] == out["spec"]["ports"][1]["nodePort"]
    no_ports = {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "allocateLoadBalancerNodePorts": False,
                                                    "ports": [{"port": 80}]}}
    assert "nodePort" not in a.update(None, no_ports)[0]["spec"]["ports"][0]


def test_a_health_check_node_port_is_allocated_held_and_given_back():
    a = Allocations("10.96.0.0/24", parse_port_range("30000-30099"), rand=random.Random(1))
    asked, txn = a.update(None, copy.deepcopy(LB_LOCAL))
    txn.commit()
    assert a.ports.has(30099) and asked["spec"]["healthCheckNodePort"] == 30099
    with pytest.raises(ValidationError, match="spec.healthCheckNodePort: Invalid value: 30099: failed to allocate "
                                              "requested HealthCheck NodePort 30099: provided port is already "
                                              "allocated"):
        a.update(None, {"metadata": {"name": "b"}, "spec": {**copy.deepcopy(LB_LOCAL["spec"]), "clusterIP": None,
                                                             "ports": [{"port": 80}]}})
    left_out = {"metadata": {"name": "c"}, "spec": {"type": "LoadBalancer", "externalTrafficPolicy": "Local",
                                                     "ports": [{"port": 80}]}}
    made, txn = a.update(None, left_out)
    txn.commit()
    given = made["spec"]["healthCheckNodePort"]
    assert a.ports.has(given) and given != made["spec"]["ports"][0]["nodePort"]
    cluster = copy.deepcopy(made)
    cluster["spec"]["externalTrafficPolicy"] = "Cluster"
    cluster["spec"].pop("healthCheckNodePort")
    _, txn = a.update(made, cluster)
    assert a.ports.has(given)  # until the write is done
    txn.commit()
    assert not a.ports.has(given) and a.ports.has(made["spec"]["ports"][0]["nodePort"])
    a.release(asked)
    assert not a.ports.has(30099)


def test_a_dry_run_takes_nothing_and_still_finds_what_is_taken():
    a = Allocations("10.96.0.0/24", parse_port_range("30000-30099"), rand=random.Random(1))
    two = {"metadata": {"name": "two"}, "spec": {"type": "NodePort", "ports": [
        {"name": "a", "port": 80}, {"name": "b", "port": 81}]}}
    out, txn = a.update(None, copy.deepcopy(two), dry_run=True)
    first, second = (p["nodePort"] for p in out["spec"]["ports"])
    assert first != second and out["spec"]["clusterIP"]
    assert a.ips.free() == 254 and a.ports.free() == 100
    txn.revert()
    with pytest.raises(RuntimeError):
        txn.commit()
    a.ports.allocate(30080)
    with pytest.raises(ValidationError, match="30080: provided port is already allocated"):
        a.update(None, {"metadata": {"name": "x"}, "spec": {"type": "NodePort", "ports": [
            {"port": 80, "nodePort": 30080}]}}, dry_run=True)


def test_every_error_at_once_and_nothing_held_after():
    a = Allocations("10.96.0.0/24", parse_port_range("30000-30099"))
    bad = {"metadata": {"name": "bad"}, "spec": {"type": "NodePort", "clusterIP": "10.96.0.7", "ports": [
        {"port": 80, "nodePort": 40000}, {"port": 81, "nodePort": 30001}]}}
    a.ports.allocate(30001)
    with pytest.raises(ValidationError) as err:
        a.update(None, bad)
    assert [str(e) for e in err.value.errors] == [
        "spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid range. The range of "
        "valid ports is 30000-30099",
        "spec.ports[1].nodePort: Invalid value: 30001: provided port is already allocated"]
    assert not a.ips.has("10.96.0.7") and a.ports.free() == 99
