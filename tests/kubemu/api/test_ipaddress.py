"""kubemu.api.ipaddress: networking.k8s.io/v1 IPAddress validation as kube-apiserver's, and the
object the Service allocator creates."""
from __future__ import annotations

import copy

from kubemu.api.ipaddress import for_service
from kubemu.api.objects import validate_object, validate_object_update
from kubemu.api.resources import registry_key, resolve


def errors(obj) -> list[str]:
    return [str(e) for e in validate_object(obj)]


def test_the_service_allocators_ipaddress_is_valid_and_cluster_scoped():
    obj = for_service("10.96.0.1", "default", "kubernetes")
    assert errors(obj) == []
    assert obj["metadata"]["labels"] == {"ipaddress.kubernetes.io/ip-family": "IPv4",
                                         "ipaddress.kubernetes.io/managed-by": "ipallocator.k8s.io"}
    assert for_service("fd00::a", "ns", "x")["metadata"]["labels"]["ipaddress.kubernetes.io/ip-family"] == "IPv6"
    r = resolve("ip")
    assert (r.kind, r.api_version, r.namespaced) == ("IPAddress", "networking.k8s.io/v1", False)
    assert registry_key(r, None, "10.96.0.1") == "/registry/ipaddresses/10.96.0.1"


def test_names_are_canonical_addresses_and_the_parent_ref_is_required():
    base = {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress"}
    found = errors({**base, "metadata": {"name": "010.1.1.1"},
                    "spec": {"parentRef": {"resource": "", "name": "a/b", "group": "Not_A_Group"}}})
    assert found[0] == 'metadata.name: Invalid value: "010.1.1.1": ParseAddr("010.1.1.1"): unable to parse IP'
    assert found[1].startswith('spec.parentRef.group: Invalid value: "Not_A_Group": a lowercase RFC 1123 subdomain')
    assert found[2:] == ["spec.parentRef.resource: Required value",
                         "spec.parentRef.name: Invalid value: \"a/b\": may not contain '/'"]
    assert errors({**base, "metadata": {"name": "fd00::01"}}) == [
        'metadata.name: Invalid value: "fd00::01": must be a canonical format IP address',
        "spec.parentRef: Required value"]
    assert errors({**base, "metadata": {"name": "10.0.0.1"}, "spec": {"parentRef": {"resource": "services",
                                                                                    "name": "x", "extra": 1}}}) == [
        "spec.parentRef.extra: Unknown field"]


def test_the_parent_ref_cannot_change():
    old = for_service("10.96.0.1", "default", "kubernetes")
    new = copy.deepcopy(old)
    new["spec"]["parentRef"]["name"] = "other"
    assert [str(e) for e in validate_object_update(old, new, require_resource_version=False)] == [
        'spec.parentRef: Invalid value: {"group":"","resource":"services","namespace":"default","name":"other"}: '
        "field is immutable"]
    new["spec"]["parentRef"]["name"] = "kubernetes"
    new["metadata"]["labels"]["extra"] = "ok"
    assert validate_object_update(old, new, require_resource_version=False) == []
