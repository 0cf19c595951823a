"""The EndpointSlice controller's reconcile core (k8s pkg/controller/endpointslice with its
reconciler, staging/src/k8s.io/endpointslice).

``reconcile(service, pods, nodes, existing_slices, trigger_time, max_per_slice) -> SliceSync`` is
pure: the cached Service, the pods its selector picks, the Nodes by name, the EndpointSlices of
its namespace and the trigger time in; the creates, updates and deletes of slices out. Only
Services with a selector get slices (without one the slices are the user's); only slices
labelled ``endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`` for the
Service are ever touched.

The rules, as the real controller's:

* a pod is an endpoint when it has an IP and is not Succeeded/Failed; terminating pods stay:
  ``ready`` = Ready condition and not terminating (always true with publishNotReadyAddresses),
  ``serving`` = Ready condition (also while terminating), ``terminating`` = deletionTimestamp;
  nodeName, zone (the Node's ``topology.kubernetes.io/zone``), targetRef, and hostname when
  ``spec.hostname`` is set and ``spec.subdomain`` names the Service;
* a pod whose Node is not (yet) cached is left out and reported (``SliceSync.skipped``: the
  shell retries), unless publishNotReadyAddresses says to publish regardless;
* each pod's ports are the Service ports whose targetPort resolves on it (a port name no
  container has drops that port for that pod), and slices are keyed by that port set: pods
  resolving differently land in different slices;
* at most ``max_per_slice`` endpoints per slice; slices are updated in place, slices being
  updated anyway are filled first, then the unchanged slice that ends closest to full, and only
  then a new slice is made; untouched slices are never rebalanced; a slice that would be
  deleted while another is created is reused instead; with no endpoints at all one empty
  placeholder slice remains;
* nothing is written for a slice whose endpoints and labels are as wanted (every write reaches
  every kube-proxy).

Endpoints are matched across syncs by (addresses, hostname, pod namespace/name), as k8s'
endpoint hash; a matched endpoint is rewritten only if its node, zone, conditions or targetRef
changed. Go's maps make k8s' choices among equals random; here pods are taken in name order and
slices in name order, so the same input always gives the same output.

Two records the shell keeps between syncs live here too, as k8s keeps them beside its reconciler:
``TriggerTimes`` (the last-change-trigger-time tracker) and ``SliceTracker`` (which slice
versions this controller wrote, so that a sync never runs on a cache that has not seen them:
creating a slice twice would publish its endpoints twice).
"""
from __future__ import annotations

import copy
import datetime
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from components.controllers import CreateObject, DeleteObject, UpdateObject
from components.controllers.podutil import (find_port, is_pod_ready, labels_of, meta,
                                            owner_reference, parse_time, pod_phase)
from kubemu.api import service as service_api
from kubemu.api.labels import selector_from_set
from kubemu.api.service import LAST_CHANGE_TRIGGER_TIME as TRIGGER_TIME
from kubemu.api.service import SERVICE_NAME_LABEL as LABEL_SERVICE_NAME

CONTROLLER_NAME = "endpointslice-controller.k8s.io"
LABEL_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"
LABEL_HEADLESS = "service.kubernetes.io/headless"
LABEL_ZONE = "topology.kubernetes.io/zone"
DEFAULT_MAX_PER_SLICE = 100
MAX_PER_SLICE_LIMIT = 1000   # kube-controller-manager refuses a larger --max-endpoints-per-slice
API_VERSION = "discovery.k8s.io/v1"
_RESERVED_LABELS = (LABEL_SERVICE_NAME, LABEL_MANAGED_BY, LABEL_HEADLESS)


# --- Services and pods (shared with the Endpoints controller) ---------------------------------


def service_key(namespace: str | None, name: str) -> str:
    return f"{namespace or 'default'}/{name}"


def has_selector(service: dict) -> bool:
    """Whether the controllers manage this Service's endpoints: it has a selector (an empty one
    is stored as none) and is not an ExternalName."""
    spec = service.get("spec") or {}
    return bool(spec.get("selector")) and spec.get("type") != "ExternalName"


def _selector(service: dict) -> dict | None:
    """The Service's selector (a label map, ANDed); a Service without one picks no pod."""
    return (service.get("spec") or {}).get("selector")


def selects(service: dict, pod_labels: Mapping[str, str] | None) -> bool:
    """The Service's selector picks these pod labels."""
    selector = _selector(service)
    return bool(selector) and selector_from_set(selector).matches(pod_labels or {})


def services_for(services: Iterable[dict], pod_labels: Mapping[str, str] | None) -> set[str]:
    """The keys of the Services (of the pod's namespace) whose selector picks the labels."""
    return {service_key(meta(s).get("namespace"), meta(s).get("name", ""))
            for s in services if selects(s, pod_labels)}


def services_to_update(services: Iterable[dict], old: dict, new: dict) -> set[str]:
    """Which Services a pod update concerns (k8s GetServicesToUpdateOnPodChange): none when
    nothing an endpoint shows changed; with its labels (or hostname/subdomain) changed, the
    Services that gained or lost it - all of both sides if the endpoint changed too."""
    if meta(old).get("resourceVersion") == meta(new).get("resourceVersion"):
        return set()   # a resync: the Services are resynced themselves
    # Only a Service with a selector can pick a pod (`selects`): a namespace with none (most
    # hold only selectorless ones, as "default" its "kubernetes") needs no look at the pod.
    services = [s for s in services if _selector(s)]
    if not services:
        return set()
    labels_changed = labels_of(old) != labels_of(new) or _host_and_subdomain(old) != \
        _host_and_subdomain(new)
    pod_changed = _endpoint_changed(old, new)
    if not labels_changed:
        return services_for(services, labels_of(new)) if pod_changed else set()
    now, before = services_for(services, labels_of(new)), services_for(services, labels_of(old))
    return now | before if pod_changed else now ^ before


def _host_and_subdomain(pod: dict) -> tuple:
    spec = pod.get("spec") or {}
    return spec.get("hostname"), spec.get("subdomain")


def _endpoint_changed(old: dict, new: dict) -> bool:
    return (meta(old).get("deletionTimestamp") != meta(new).get("deletionTimestamp")
            or is_pod_ready(old) != is_pod_ready(new) or pod_ips(old) != pod_ips(new))


def pod_ips(pod: dict) -> list[str]:
    status = pod.get("status") or {}
    ips = [entry.get("ip") for entry in status.get("podIPs") or [] if isinstance(entry, dict)]
    ips = [ip for ip in ips if ip]
    if not ips and status.get("podIP"):
        ips = [status["podIP"]]
    return ips


def should_be_endpoint(pod: dict, include_terminating: bool) -> bool:
    """k8s ShouldPodBeInEndpoints: has an IP, not Succeeded/Failed, and (unless asked to keep
    them) not terminating."""
    if pod_phase(pod) in ("Succeeded", "Failed") or not pod_ips(pod):
        return False
    return include_terminating or not meta(pod).get("deletionTimestamp")


def should_set_hostname(pod: dict, service: dict) -> bool:
    spec = pod.get("spec") or {}
    return bool(spec.get("hostname")) and spec.get("subdomain") == meta(service).get("name") \
        and meta(pod).get("namespace") == meta(service).get("namespace")


def is_headless(service: dict) -> bool:
    return service_api.is_headless(service.get("spec") or {})


def ip_family(ip: str) -> str | None:
    """"IPv4" or "IPv6" (None for something that is not an address)."""
    try:
        return f"IPv{ipaddress.ip_address(ip).version}"
    except ValueError:
        return None


def canonical_ip(ip: str) -> str:
    return str(ipaddress.ip_address(ip))


def format_trigger_time(ts: float) -> str:
    """RFC 3339 with the fraction Go's RFC3339Nano prints (trailing zeros dropped, UTC)."""
    moment = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{moment.microsecond:06d}".rstrip("0")
    return f"{text}.{fraction}Z" if fraction else f"{text}Z"


class TriggerTimes:
    """k8s TriggerTimeTracker: the time of the change that made a sync necessary - the earliest
    of the pod Ready transitions and the Service creation that changed since the last sync of
    that Service; its creation time on the first sync. None: nothing to export (the annotation
    is removed from what is written)."""

    def __init__(self) -> None:
        self._states: dict[str, tuple[float | None, dict[str, float]]] = {}

    def compute(self, service: dict, pods: Iterable[dict]) -> float | None:
        key = service_key(meta(service).get("namespace"), meta(service).get("name", ""))
        known = key in self._states
        last_service, last_pods = self._states.get(key, (None, {}))
        changed: list[float] = []
        pod_times: dict[str, float] = {}
        for pod in pods:
            when = _ready_transition(pod)
            if when is not None:
                name = meta(pod).get("name", "")
                pod_times[name] = when
                if name not in last_pods or when > last_pods[name]:
                    changed.append(when)
        created = parse_time(meta(service).get("creationTimestamp"))
        if created is not None and (last_service is None or created > last_service):
            changed.append(created)
        self._states[key] = (created, pod_times)
        if not known:
            return created
        return min(changed) if changed else None

    def forget(self, key: str) -> None:
        self._states.pop(key, None)


def _ready_transition(pod: dict) -> float | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return parse_time(cond.get("lastTransitionTime"))
    return None


# --- the reconcile ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SliceSync:
    actions: list
    skipped: tuple[str, ...] = ()   # pods left out because their Node is not known: retry


def is_managed(slice_: dict) -> bool:
    """A slice this controller manages (any other is someone else's, never touched)."""
    return labels_of(slice_).get(LABEL_MANAGED_BY) == CONTROLLER_NAME


def managed_slices(service: dict, slices: Iterable[dict]) -> list[dict]:
    """The slices of `service` this controller manages, not being deleted (k8s lists them by the
    service-name and managed-by labels and drops those pending deletion)."""
    name, namespace = meta(service).get("name"), meta(service).get("namespace") or "default"
    return [s for s in slices
            if (meta(s).get("namespace") or "default") == namespace
            and labels_of(s).get(LABEL_SERVICE_NAME) == name and is_managed(s)
            and not meta(s).get("deletionTimestamp")]


def reconcile(service: dict, pods: Iterable[dict], nodes: Mapping[str, dict],
              existing_slices: Iterable[dict], trigger_time: float | None = None,
              max_per_slice: int = DEFAULT_MAX_PER_SLICE) -> SliceSync:
    if not has_selector(service):
        return SliceSync([])
    existing = sorted(managed_slices(service, existing_slices),
                      key=lambda s: meta(s).get("name", ""))
    pods = sorted((p for p in pods if selects(service, labels_of(p))),
                  key=lambda p: meta(p).get("name", ""))
    families = address_types(service)
    creates: list[dict] = []
    updates: list[dict] = []
    deletes: list[dict] = [s for s in existing if s.get("addressType") not in families]
    skipped: list[str] = []
    for family in families:
        of_type = [s for s in existing if s.get("addressType") == family]
        c, u, d = _reconcile_address_type(service, pods, nodes, of_type, family, max_per_slice,
                                          skipped)
        creates += c
        updates += u
        deletes += d
    actions = _finalize(service, creates, updates, deletes, trigger_time)
    return SliceSync(actions, tuple(dict.fromkeys(skipped)))


def address_types(service: dict) -> list[str]:
    """k8s getAddressTypesForService: the Service's ipFamilies; without them the clusterIP's
    family, and for a headless Service both."""
    spec = service.get("spec") or {}
    families = [f for f in ("IPv4", "IPv6") if f in (spec.get("ipFamilies") or [])]
    if families:
        return families
    if not is_headless(service):
        return [ip_family(spec["clusterIP"]) or "IPv4"]
    return ["IPv4", "IPv6"]


def owned_by(slice_: dict, service: dict) -> bool:
    uid = meta(service).get("uid")
    return any(ref.get("uid") == uid and ref.get("kind") == "Service"
               and ref.get("apiVersion") == "v1"
               for ref in meta(slice_).get("ownerReferences") or [])


def _reconcile_address_type(service: dict, pods: list[dict], nodes: Mapping[str, dict],
                            existing: list[dict], family: str, max_per_slice: int,
                            skipped: list[str]) -> tuple[list, list, list]:
    deletes: list[dict] = []
    existing_by_ports: dict[tuple, list[dict]] = {}
    for s in existing:
        if owned_by(s, service):
            existing_by_ports.setdefault(ports_key(s.get("ports")), []).append(s)
        else:   # left by an earlier Service of that name
            deletes.append(s)

    desired: dict[tuple, dict[tuple, dict]] = {}
    desired_ports: dict[tuple, list[dict]] = {}
    publish_all = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    for pod in pods:
        if not should_be_endpoint(pod, include_terminating=True):
            continue
        ports = endpoint_ports(service, pod)
        key = ports_key(ports)
        desired.setdefault(key, {})
        desired_ports.setdefault(key, ports)
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        node = nodes.get(node_name)
        if node is None and not publish_all:
            skipped.append(f"{meta(pod).get('name')} (node {node_name or '<none>'} not found)")
            continue
        endpoint = pod_to_endpoint(pod, node, service, family)
        if endpoint["addresses"]:
            desired[key][endpoint_hash(endpoint)] = endpoint

    creates: list[dict] = []
    updates: list[dict] = []
    for key, endpoints in desired.items():
        c, u, d = _reconcile_port_set(service, existing_by_ports.get(key, []), endpoints,
                                      desired_ports[key], family, max_per_slice)
        creates += c
        updates += u
        deletes += d
    for key, slices in existing_by_ports.items():
        if key not in desired:
            deletes += slices

    if len(existing) == len(deletes) and not creates:
        placeholder = new_slice(service, [], family)
        if len(deletes) == 1 and _same_placeholder(deletes[0], placeholder):
            deletes = []   # it is already there: do not delete and recreate it
        else:
            creates.append(placeholder)
    return creates, updates, deletes


def _reconcile_port_set(service: dict, existing: list[dict], desired: dict[tuple, dict],
                        ports: list[dict], family: str, max_per_slice: int
                        ) -> tuple[list, list, list]:
    """k8s reconcileByPortMapping, over the slices of one port set."""
    by_name: dict[str, dict] = {}
    unchanged: list[str] = []
    to_update: list[str] = []
    to_delete: list[str] = []
    for s in existing:
        name = meta(s).get("name", "")
        by_name[name] = s
        kept: list[dict] = []
        endpoint_changed = False
        old_endpoints = s.get("endpoints") or []
        for endpoint in old_endpoints:
            got = desired.pop(endpoint_hash(endpoint), None)
            if got is not None:
                kept.append(got)
                if not endpoints_equal_beyond_hash(got, endpoint):
                    endpoint_changed = True
        labels, labels_changed = slice_labels(s, service)
        if endpoint_changed or len(old_endpoints) != len(kept):
            if not kept:
                to_delete.append(name)
            else:
                updated = _copy(s)
                updated["endpoints"] = kept
                updated["metadata"]["labels"] = labels
                by_name[name] = updated
                to_update.append(name)
        elif labels_changed:
            updated = _copy(s)
            updated["metadata"]["labels"] = labels
            by_name[name] = updated
            to_update.append(name)
        else:
            unchanged.append(name)

    remaining = list(desired.values())   # in pod name order
    if remaining and to_update:
        # fill the slices being written anyway, the fullest first
        for name in sorted(to_update, key=lambda n: -len(by_name[n]["endpoints"])):
            room = max_per_slice - len(by_name[name]["endpoints"])
            if room > 0:
                by_name[name]["endpoints"] += remaining[:room]
                remaining = remaining[room:]

    creates: list[dict] = []
    while remaining:
        target = None
        if len(remaining) < max_per_slice and unchanged:
            target = _slice_to_fill([by_name[n] for n in unchanged], len(remaining), max_per_slice)
        if target is None:
            target = new_slice(service, ports, family)
        else:
            target = _copy(target)
            by_name[meta(target)["name"]] = target
        room = max_per_slice - len(target["endpoints"])
        target["endpoints"] = list(target["endpoints"]) + remaining[:room]
        remaining = remaining[room:]
        name = meta(target).get("name")
        if name:
            to_update.append(name)
            unchanged.remove(name)
        else:
            creates.append(target)
    return creates, [by_name[n] for n in to_update], [by_name[n] for n in to_delete]


def _copy(slice_: dict) -> dict:
    """A slice to change (the API may leave an empty endpoints list out)."""
    out = copy.deepcopy(slice_)
    out["endpoints"] = out.get("endpoints") or []
    return out


def _slice_to_fill(slices: list[dict], count: int, max_per_slice: int) -> dict | None:
    """k8s getSliceToFill: the slice that ends closest to full with `count` more endpoints."""
    best, best_gap = None, max_per_slice
    for s in slices:
        gap = max_per_slice - (count + len(s.get("endpoints") or []))
        if 0 <= gap < best_gap:
            best, best_gap = s, gap
            if gap == 0:
                break
    return best


def _finalize(service: dict, creates: list[dict], updates: list[dict], deletes: list[dict],
              trigger_time: float | None) -> list:
    """k8s finalize: a create paired with a delete becomes an update of the doomed slice (same
    address type, owned by this Service); then creates (none for a Service being deleted: the
    garbage collector is removing its slices), updates, deletes."""
    deletes = list(deletes)
    i = 0
    while i < len(deletes) and creates:
        doomed, fresh = deletes[i], creates[-1]
        if doomed.get("addressType") == fresh.get("addressType") and owned_by(doomed, service):
            creates.pop()
            fresh["metadata"]["name"] = meta(doomed)["name"]
            fresh["metadata"]["resourceVersion"] = meta(doomed).get("resourceVersion")
            fresh["metadata"].pop("generateName", None)
            updates.append(fresh)
            deletes.pop(i)
        else:
            i += 1
    namespace = meta(service).get("namespace") or "default"
    actions: list = []
    if not meta(service).get("deletionTimestamp"):
        actions += [CreateObject(namespace, _stamped(s, trigger_time)) for s in creates]
    actions += [UpdateObject(namespace, _stamped(s, trigger_time)) for s in updates]
    actions += [DeleteObject(API_VERSION, "EndpointSlice", namespace, meta(s)["name"],
                             meta(s).get("uid", "")) for s in deletes]
    return actions


def _stamped(slice_: dict, trigger_time: float | None) -> dict:
    annotations = dict(meta(slice_).get("annotations") or {})
    if trigger_time is not None:
        annotations[TRIGGER_TIME] = format_trigger_time(trigger_time)
    else:
        annotations.pop(TRIGGER_TIME, None)
    if annotations:
        slice_["metadata"]["annotations"] = annotations
    else:
        slice_["metadata"].pop("annotations", None)
    return slice_


# --- slices and endpoints ---------------------------------------------------------------------


def new_slice(service: dict, ports: list[dict], family: str) -> dict:
    m = meta(service)
    return {"apiVersion": API_VERSION, "kind": "EndpointSlice",
            "metadata": {"generateName": f"{m.get('name')}-",
                         "namespace": m.get("namespace") or "default",
                         "labels": slice_labels({}, service)[0],
                         "ownerReferences": [owner_reference(service, "Service", "v1")]},
            "addressType": family, "endpoints": [], "ports": list(ports)}


def slice_labels(slice_: dict, service: dict) -> tuple[dict, bool]:
    """k8s setEndpointSliceLabels: the Service's labels plus the reserved ones, and whether the
    slice's non-reserved labels differ from the Service's (the reserved ones never change)."""
    current = {k: v for k, v in labels_of(slice_).items() if k not in _RESERVED_LABELS}
    wanted = {k: v for k, v in labels_of(service).items() if k not in _RESERVED_LABELS}
    changed = current != wanted
    if is_headless(service):
        wanted[LABEL_HEADLESS] = ""
    wanted[LABEL_SERVICE_NAME] = meta(service).get("name")
    wanted[LABEL_MANAGED_BY] = CONTROLLER_NAME
    return wanted, changed


def endpoint_ports(service: dict, pod: dict) -> list[dict]:
    """The Service's ports as this pod serves them (k8s getEndpointPorts): a port whose
    targetPort does not resolve on the pod is left out."""
    out = []
    for port in (service.get("spec") or {}).get("ports") or []:
        number = find_port(pod, port)
        if number is None:
            continue
        entry = {"name": port.get("name") or "", "port": number,
                 "protocol": port.get("protocol") or "TCP"}
        if port.get("appProtocol"):
            entry["appProtocol"] = port["appProtocol"]
        out.append(entry)
    return out


def ports_key(ports: Iterable[dict] | None) -> tuple:
    """A port set, order-free (k8s PortMapKey)."""
    return tuple(sorted((p.get("name") or "", p.get("protocol") or "TCP", p.get("port") or 0,
                         p.get("appProtocol") or "") for p in ports or []))


def pod_to_endpoint(pod: dict, node: dict | None, service: dict, family: str) -> dict:
    """k8s podToEndpoint."""
    serving = is_pod_ready(pod)
    terminating = bool(meta(pod).get("deletionTimestamp"))
    publish_all = bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    m = meta(pod)
    endpoint: dict = {
        "addresses": [canonical_ip(ip) for ip in pod_ips(pod) if ip_family(ip) == family],
        "conditions": {"ready": publish_all or (serving and not terminating),
                       "serving": serving, "terminating": terminating}}
    if should_set_hostname(pod, service):
        endpoint["hostname"] = pod["spec"]["hostname"]
    endpoint["targetRef"] = {"kind": "Pod", "namespace": m.get("namespace") or "default",
                             "name": m.get("name"), "uid": m.get("uid")}
    node_name = (pod.get("spec") or {}).get("nodeName")
    if node_name:
        endpoint["nodeName"] = node_name
    zone = labels_of(node).get(LABEL_ZONE) if node else None
    if zone:
        endpoint["zone"] = zone
    return endpoint


def endpoint_hash(endpoint: dict) -> tuple:
    """What identifies an endpoint across syncs (k8s hashEndpoint)."""
    ref = endpoint.get("targetRef") or {}
    return (tuple(sorted(endpoint.get("addresses") or [])), endpoint.get("hostname") or "",
            ref.get("namespace") or "", ref.get("name") or "")


def endpoints_equal_beyond_hash(a: dict, b: dict) -> bool:
    """k8s EndpointsEqualBeyondHash: node, zone, conditions and targetRef (but its
    resourceVersion) equal."""
    if a.get("nodeName") != b.get("nodeName") or a.get("zone") != b.get("zone"):
        return False
    ca, cb = a.get("conditions") or {}, b.get("conditions") or {}
    if any(ca.get(k) != cb.get(k) for k in ("ready", "serving", "terminating")):
        return False
    return _ref_without_rv(a.get("targetRef")) == _ref_without_rv(b.get("targetRef"))


def _ref_without_rv(ref: dict | None) -> dict | None:
    if ref is None:
        return None
    return {k: v for k, v in ref.items() if k != "resourceVersion" and v not in (None, "")}


def _same_placeholder(existing: dict, placeholder: dict) -> bool:
    """k8s placeholderSliceCompare: namespace, labels, ownerReferences, ports, endpoints and
    address type equal (an absent list equals an empty one)."""
    em, pm = meta(existing), meta(placeholder)
    return ((em.get("namespace") or "default") == pm.get("namespace")
            and (em.get("labels") or {}) == pm.get("labels")
            and (em.get("ownerReferences") or []) == pm.get("ownerReferences")
            and not existing.get("ports") and not existing.get("endpoints")
            and existing.get("addressType") == placeholder.get("addressType"))


# --- the record of this controller's own writes -----------------------------------------------

_DELETION_EXPECTED = -1


def revision(obj: dict) -> int:
    """An object's resourceVersion as the number it is in kubemu (the store's revision, which
    only grows): k8s compares slice generations the same way."""
    try:
        return int(meta(obj).get("resourceVersion") or 0)
    except ValueError:
        return 0


@dataclass
class SliceTracker:
    """k8s EndpointSliceTracker: per Service, the version of each slice this controller last
    wrote (or that it expects it deleted), so a sync can tell a cache that has not caught up
    with those writes (``stale``) and slice events can tell its own writes from others'."""
    services: dict[str, dict[str, int]] = field(default_factory=dict)
    service_uids: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def _service_of(slice_: dict) -> str:
        return service_key(meta(slice_).get("namespace"),
                           labels_of(slice_).get(LABEL_SERVICE_NAME, ""))

    def written(self, slice_: dict) -> None:
        self.services.setdefault(self._service_of(slice_), {})[meta(slice_).get("uid", "")] = \
            revision(slice_)

    def expect_deletion(self, slice_: dict) -> None:
        self.services.setdefault(self._service_of(slice_), {})[meta(slice_).get("uid", "")] = \
            _DELETION_EXPECTED

    def should_sync(self, slice_: dict) -> bool:
        """An informer event about a slice: not one of this controller's own writes."""
        seen = self.services.get(self._service_of(slice_), {}).get(meta(slice_).get("uid", ""))
        return seen is None or revision(slice_) > seen

    def deleted(self, slice_: dict) -> bool:
        """A slice's deletion was observed; whether this controller expected it."""
        tracked = self.services.get(self._service_of(slice_), {})
        return tracked.pop(meta(slice_).get("uid", ""), None) == _DELETION_EXPECTED

    def stale(self, service: dict, slices: Iterable[dict]) -> bool:
        """The cache misses a slice this controller wrote, shows an older version of one, or
        still shows one it deleted."""
        key = service_key(meta(service).get("namespace"), meta(service).get("name", ""))
        uid = meta(service).get("uid", "")
        if self.service_uids.get(key, uid) != uid:
            self.services.pop(key, None)   # a new Service of that name: old writes are moot
        self.service_uids[key] = uid
        seen = self.services.get(key)
        if not seen:
            return False
        provided = set()
        for s in slices:
            provided.add(meta(s).get("uid", ""))
            version = seen.get(meta(s).get("uid", ""))
            if version is not None and (version == _DELETION_EXPECTED or version > revision(s)):
                return True
        return any(v != _DELETION_EXPECTED and u not in provided for u, v in seen.items())

    def forget(self, key: str) -> None:
        self.services.pop(key, None)
        self.service_uids.pop(key, None)
