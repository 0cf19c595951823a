"""networking.k8s.io/v1 IPAddress (Kubernetes >= 1.31): one object per allocated ClusterIP,
named by the address, with objects.py's contract (DEFAULTERS, VALIDATORS, UPDATE_VALIDATORS by
kind), as kube-apiserver has them (pkg/apis/networking/validation ValidateIPAddress, ...Update):

* metadata.name is an IP address in its canonical form (`10.96.0.1`, `2001:db8::1`);
* spec.parentRef is required: resource and name required, group a DNS subdomain when set (the
  core group of Services is ""), resource, namespace and name valid path segments;
* spec.parentRef cannot change.

The Service allocator (components/apiserver/servicealloc.py) creates them labelled as upstream's
does, and the IPAddress's existence is what holds the address cluster-wide.
"""
from __future__ import annotations

import ipaddress
from typing import Any

from .fielderrors import FieldError, child, invalid, required
from .meta import Checker, register, table
from .pod import STR, dns1123_subdomain_errors
from .rbacobjects import path_segment_errors

LABEL_IP_FAMILY = "ipaddress.kubernetes.io/ip-family"
LABEL_MANAGED_BY = "ipaddress.kubernetes.io/managed-by"
SERVICE_ALLOCATOR = "ipallocator.k8s.io"  # the managed-by value of the Service allocator's

register(
    IPAddress=table("apiVersion kind metadata spec",
                    types={"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta",
                           "spec": "IPAddressSpec"}),
    IPAddressSpec=table("parentRef", types={"parentRef": "ParentReference"}),
    ParentReference=table("group resource namespace name",
                          {"group": STR, "resource": STR, "namespace": STR, "name": STR},
                          types="group:string resource:string namespace:string name:string"),
)


def ip_name_errors(name: str) -> list[str]:
    """ValidateIPAddressName: a parseable IP, written as Go's netip writes it."""
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        return [f'ParseAddr("{name}"): unable to parse IP']
    return [] if str(ip) == name else ["must be a canonical format IP address"]


def family(ip: str) -> str:
    return "IPv6" if ipaddress.ip_address(ip).version == 6 else "IPv4"


def service_ref(namespace: str, name: str) -> dict:
    return {"group": "", "resource": "services", "namespace": namespace, "name": name}


def for_service(ip: str, namespace: str, name: str) -> dict:
    """The IPAddress the Service allocator creates to hold `ip` for a Service."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "IPAddress",
            "metadata": {"name": ip, "labels": {LABEL_IP_FAMILY: family(ip),
                                                LABEL_MANAGED_BY: SERVICE_ALLOCATOR}},
            "spec": {"parentRef": service_ref(namespace, name)}}


def parent_ref(obj: Any) -> dict | None:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    ref = spec.get("parentRef") if isinstance(spec, dict) else None
    return ref if isinstance(ref, dict) else None


def default_ipaddress(obj: Any) -> Any:
    from .objects import _defaulted  # objects.py imports this module for its tables
    return _defaulted(obj, lambda ip: None, namespaced=False)


def _parent_ref(c: Checker, value: Any) -> None:
    path = "spec.parentRef"
    ref = c.obj(value, path, "ParentReference")
    if value is None:
        c.add(required(path))
    if ref is None:
        return
    group = ref.get("group")
    if isinstance(group, str) and group:
        for msg in dns1123_subdomain_errors(group):
            c.add(invalid(child(path, "group"), group, msg))
    for field, needed in (("resource", True), ("namespace", False), ("name", True)):
        value = ref.get(field)
        if not isinstance(value, str) or not value:
            if needed and value in (None, ""):
                c.add(required(child(path, field)))
            continue
        for msg in path_segment_errors(value):
            c.add(invalid(child(path, field), value, msg))


def validate_ipaddress(obj: Any, *, strict: bool = True) -> list[FieldError]:
    from .objects import _validate  # see default_ipaddress

    def body(c: Checker, ip: dict) -> None:
        spec = c.obj(ip.get("spec"), "spec", "IPAddressSpec")
        _parent_ref(c, (spec or {}).get("parentRef"))
    return _validate(obj, "IPAddress", strict, body, name_rule=ip_name_errors)


def validate_ipaddress_update(old: Any, new: Any) -> list[FieldError]:
    before, after = parent_ref(old), parent_ref(new)
    return [] if before == after else [invalid("spec.parentRef", after, "field is immutable")]


DEFAULTERS = {"IPAddress": default_ipaddress}
VALIDATORS = {"IPAddress": validate_ipaddress}
UPDATE_VALIDATORS = {"IPAddress": validate_ipaddress_update}
