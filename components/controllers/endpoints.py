"""The Endpoints controller's reconcile core (k8s pkg/controller/endpoint): the legacy v1
Endpoints object named as its Service, which kubectl users still read.

``reconcile(service, key, pods, current, trigger_time) -> [Action]`` is pure: the cached Service
(None when it is gone), its "<namespace>/<name>" key, the pods its selector picks, the cached
Endpoints of that name and the trigger time in; at most one write out.

* Services without a selector (or ExternalName) are left alone: their Endpoints are the user's.
* Every pod with an IP, not Succeeded/Failed, becomes an address: ``addresses`` when Ready,
  ``notReadyAddresses`` otherwise; terminating pods are left out (kept, as not ready or ready,
  with publishNotReadyAddresses, where every address counts as ready); hostname when
  ``spec.hostname`` is set and ``spec.subdomain`` names the Service.
* Each Service port resolves per pod (a port name the pod lacks drops that port for it), and
  the subsets are repacked as k8s RepackSubsets does: one subset per group of addresses offering
  the same ports (an address not ready on a port is not ready there), addresses sorted by IP and
  pod uid, ports and subsets in a fixed order - so equal inputs give equal objects.
* Above 1000 addresses the subsets are truncated (ready ones kept first, in proportion per
  subset) and annotated ``endpoints.kubernetes.io/over-capacity: truncated``.
* Labels: the Service's, ``service.kubernetes.io/headless`` for a headless one, and
  ``endpoints.kubernetes.io/managed-by: endpoint-controller`` (k8s 1.33+), which is how a
  leftover is known to be this controller's: when the Service is gone, only Endpoints carrying
  it are deleted (k8s deletes any namesake; kubemu spares the users' own).
* Nothing is written when the subsets, labels and capacity annotation are already as wanted
  (the truncated subsets are compared, so an over-capacity object is not rewritten each sync).
"""
from __future__ import annotations

import copy
import math
from collections.abc import Iterable

from components.controllers import CreateObject, DeleteObject, UpdateObject
from components.controllers.endpointslice import (LABEL_HEADLESS, TRIGGER_TIME,
                                                  format_trigger_time, has_selector, ip_family,
                                                  is_headless, pod_ips, selects,
                                                  should_be_endpoint, should_set_hostname)
from components.controllers.podutil import find_port, is_pod_ready, labels_of, meta

LABEL_MANAGED_BY = "endpoints.kubernetes.io/managed-by"
CONTROLLER_NAME = "endpoint-controller"
OVER_CAPACITY = "endpoints.kubernetes.io/over-capacity"
TRUNCATED = "truncated"
MAX_CAPACITY = 1000


def reconcile(service: dict | None, key: str, pods: Iterable[dict], current: dict | None,
              trigger_time: float | None = None) -> list:
    namespace, _, name = key.partition("/")
    if service is None:
        if current is not None and labels_of(current).get(LABEL_MANAGED_BY) == CONTROLLER_NAME:
            return [DeleteObject("v1", "Endpoints", namespace, name, meta(current).get("uid", ""))]
        return []
    if not has_selector(service):
        return []
    full = desired_subsets(service, pods)
    over = _count(full) > MAX_CAPACITY
    subsets = truncate(full)
    labels = desired_labels(service)
    if current is not None and normal_subsets(current.get("subsets")) == normal_subsets(subsets) \
            and (meta(current).get("labels") or {}) == labels \
            and ((meta(current).get("annotations") or {}).get(OVER_CAPACITY) == TRUNCATED) == over:
        return []
    annotations = dict((meta(current).get("annotations") or {}) if current else {})
    if trigger_time is not None:
        annotations[TRIGGER_TIME] = format_trigger_time(trigger_time)
    else:
        annotations.pop(TRIGGER_TIME, None)
    if over:
        annotations[OVER_CAPACITY] = TRUNCATED
    else:
        annotations.pop(OVER_CAPACITY, None)
    if current is None:
        obj: dict = {"apiVersion": "v1", "kind": "Endpoints",
                     "metadata": {"name": name, "namespace": namespace, "labels": labels}}
    else:
        obj = copy.deepcopy(current)
        obj["metadata"]["labels"] = labels
    if annotations:
        obj["metadata"]["annotations"] = annotations
    else:
        obj["metadata"].pop("annotations", None)
    if subsets:
        obj["subsets"] = subsets
    else:
        obj.pop("subsets", None)
    return [CreateObject(namespace, obj) if current is None else UpdateObject(namespace, obj)]


def desired_labels(service: dict) -> dict:
    labels = {k: v for k, v in labels_of(service).items() if k != LABEL_HEADLESS}
    if is_headless(service):
        labels[LABEL_HEADLESS] = ""
    labels[LABEL_MANAGED_BY] = CONTROLLER_NAME
    return labels


def desired_subsets(service: dict, pods: Iterable[dict]) -> list[dict]:
    spec = service.get("spec") or {}
    publish_all = bool(spec.get("publishNotReadyAddresses"))
    ports = spec.get("ports") or []
    entries: list[tuple[dict, dict | None, bool]] = []   # (address, port, ready)
    for pod in sorted(pods, key=lambda p: meta(p).get("name", "")):
        if not selects(service, labels_of(pod)) or not should_be_endpoint(pod, publish_all):
            continue
        address = pod_address(service, pod)
        if address is None:
            continue
        ready = publish_all or is_pod_ready(pod)
        if not ports:
            if is_headless(service):
                entries.append((address, None, ready))
            continue
        for port in ports:
            number = find_port(pod, port)
            if number is not None:
                entries.append((address, endpoint_port(port, number), ready))
    return repack(entries)


def pod_address(service: dict, pod: dict) -> dict | None:
    """k8s podToEndpointAddressForService: the pod's IP of the Service's (first) family."""
    spec = service.get("spec") or {}
    families = spec.get("ipFamilies") or []
    if families:
        family = families[0]
    elif not is_headless(service):
        family = ip_family(spec.get("clusterIP", "")) or "IPv4"
    else:
        family = ip_family((pod.get("status") or {}).get("podIP", "")) or "IPv4"
    ip = next((ip for ip in pod_ips(pod) if ip_family(ip) == family), None)
    if ip is None:
        return None
    m = meta(pod)
    address: dict = {"ip": ip}
    if should_set_hostname(pod, service):
        address["hostname"] = pod["spec"]["hostname"]
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        address["nodeName"] = node
    address["targetRef"] = {"kind": "Pod", "namespace": m.get("namespace") or "default",
                            "name": m.get("name"), "uid": m.get("uid")}
    return address


def endpoint_port(service_port: dict, number: int) -> dict:
    port: dict = {}
    if service_port.get("name"):
        port["name"] = service_port["name"]
    port["port"] = number
    port["protocol"] = service_port.get("protocol") or "TCP"
    if service_port.get("appProtocol"):
        port["appProtocol"] = service_port["appProtocol"]
    return port


def _address_id(address: dict) -> tuple:
    return address.get("ip", ""), (address.get("targetRef") or {}).get("uid") or ""


def _port_id(port: dict | None) -> tuple:
    if port is None:
        return ()
    return (port.get("name") or "", port.get("port") or 0, port.get("protocol") or "TCP",
            port.get("appProtocol") or "")


def repack(entries: Iterable[tuple[dict, dict | None, bool]]) -> list[dict]:
    """k8s RepackSubsets over (address, port or None, ready) entries."""
    addresses: dict[tuple, dict] = {}
    by_port: dict[tuple, dict[tuple, bool]] = {}   # port id -> address id -> ready
    port_of: dict[tuple, dict | None] = {}
    for address, port, ready in entries:
        aid, pid = _address_id(address), _port_id(port)
        addresses.setdefault(aid, address)
        port_of.setdefault(pid, port)
        states = by_port.setdefault(pid, {})
        states[aid] = states.get(aid, True) and ready   # not ready on a port wins
    groups: dict[tuple, list[tuple]] = {}   # (address id, ready)... -> port ids
    for pid, states in by_port.items():
        groups.setdefault(tuple(sorted(states.items())), []).append(pid)
    subsets = []
    for states, pids in groups.items():
        subset: dict = {}
        ready = [addresses[a] for a, r in states if r]
        not_ready = [addresses[a] for a, r in states if not r]
        if ready:
            subset["addresses"] = ready
        if not_ready:
            subset["notReadyAddresses"] = not_ready
        ports = [port_of[p] for p in sorted(pids) if port_of[p] is not None]
        if ports:
            subset["ports"] = ports
        subsets.append(subset)
    return sorted(subsets, key=_subset_order)


def _subset_order(subset: dict) -> tuple:
    return (tuple(_port_id(p) for p in subset.get("ports") or []),
            tuple(_address_id(a) for a in subset.get("addresses") or []),
            tuple(_address_id(a) for a in subset.get("notReadyAddresses") or []))


def _count(subsets: list[dict]) -> int:
    return sum(len(s.get("addresses") or []) + len(s.get("notReadyAddresses") or [])
               for s in subsets)


def truncate(subsets: list[dict]) -> list[dict]:
    """k8s truncateEndpoints: at most MAX_CAPACITY addresses, ready ones first, each subset
    keeping its proportion (rounded up, the last ones taking what is left)."""
    ready = sum(len(s.get("addresses") or []) for s in subsets)
    not_ready = sum(len(s.get("notReadyAddresses") or []) for s in subsets)
    if ready + not_ready <= MAX_CAPACITY:
        return subsets
    truncate_ready = ready > MAX_CAPACITY
    limit = MAX_CAPACITY if truncate_ready else MAX_CAPACITY - ready
    total = ready if truncate_ready else not_ready
    left = limit
    out = []
    for subset in subsets:
        subset = dict(subset)
        field_ = "addresses" if truncate_ready else "notReadyAddresses"
        have = subset.get(field_) or []
        take = min(math.ceil(len(have) / total * limit), left)
        kept = have[:take]
        left -= len(kept)
        if kept:
            subset[field_] = kept
        else:
            subset.pop(field_, None)
        if truncate_ready:
            subset.pop("notReadyAddresses", None)
        out.append(subset)
    return out


def normal_subsets(subsets: list[dict] | None) -> list:
    """Subsets for comparison: absent and empty lists alike, targetRef without resourceVersion
    (k8s compares ignoring the pods' resourceVersions)."""
    def address(a: dict) -> tuple:
        ref = {k: v for k, v in (a.get("targetRef") or {}).items()
               if k != "resourceVersion" and v not in (None, "")}
        return (a.get("ip"), a.get("hostname") or "", a.get("nodeName") or "",
                tuple(sorted(ref.items())))
    return [(tuple(address(a) for a in s.get("addresses") or []),
             tuple(address(a) for a in s.get("notReadyAddresses") or []),
             tuple(_port_id(p) for p in s.get("ports") or []))
            for s in subsets or []]
