"""Defaulting and validation of the kinds beyond Pod, as the apiserver does them.

Per kind (Namespace, Node, Lease, ReplicaSet, Deployment, Event):

    default_<kind>(obj)               -> a new, defaulted object (the input is left untouched)
    validate_<kind>(obj, strict=True) -> [FieldError, ...]; empty means valid

and, for any kind kubemu serves (Pod included, through pod.py):

    default_object(obj) / validate_object(obj, strict=True)
    validate_object_update(old, new, strict=True, require_resource_version=True, status=False)

The Scale subresource (autoscaling/v1 Scale) of ReplicaSets, Deployments and StatefulSets:

    scale_of(obj)                  -> the Scale of a (defaulted) ReplicaSet, Deployment or StatefulSet
    validate_scale(scale)          -> [FieldError, ...]
    apply_scale(obj, replicas)     -> a copy with spec.replicas set (replicas: int or a Scale);
                                      ValidationError(kind="Scale") if it is not a valid count

Same contract as pod.py: the JSON shape in, never an exception on a malformed object, a wrong
type is an `Invalid value` at its path, messages in Kubernetes' words, and strict mode (the
default) reports fields the type does not have as `Unknown field`. The known-field tables list
the common Kubernetes fields kubemu ignores too, so real manifests pass. Validation accepts raw
and defaulted objects alike: an absent field is judged by its default (a Deployment without
progressDeadlineSeconds is checked as if it said 600).
"""
from __future__ import annotations

import functools
import ipaddress
from typing import Any, Callable

from . import apps, batch, certificates, configobjects, pod, policy, rbacobjects, service, storage
from . import ipaddress as ipaddress_kind  # not the standard library's, which this module uses
from .fielderrors import (DUPLICATE, FieldError, ValidationError, child, duplicate, forbidden,
                          index, not_supported, required)
from .meta import (TYPES, Checker, check_int_or_percent, check_label_selector,
                   check_object_meta, format_selector, register, selector_is_empty,
                   selector_matches, table, validate_object_meta_update)
from .patch import json_copy
from .pod import (BOOL, LIST, OBJ, STR, STRS, TAINT_EFFECTS, _absent, _fill, _is_int,
                  _name_rule, dns1123_label_errors, dns1123_subdomain_errors, field_types,
                  qualified_name_errors)
from .resources import BY_KIND, Resource

# --- field tables -------------------------------------------------------------------------------

_TOP = "apiVersion kind metadata spec status"

_TOP_TYPES = "apiVersion:string kind:string metadata:ObjectMeta"

register(
    Namespace=table(_TOP, types=f"{_TOP_TYPES} spec:NamespaceSpec status:NamespaceStatus"),
    NamespaceSpec=table("finalizers", {"finalizers": STRS}, types="finalizers:[]string"),
    NamespaceStatus=table("phase conditions", {"conditions": LIST},
                          {"phase": ("Active", "Terminating")},
                          "phase:string conditions:[]NamespaceCondition"),

    Node=table(_TOP, types=f"{_TOP_TYPES} spec:NodeSpec status:NodeStatus"),
    NodeSpec=table("podCIDR podCIDRs providerID unschedulable taints configSource externalID",
                   {"podCIDR": STR, "podCIDRs": STRS, "providerID": STR, "unschedulable": BOOL,
                    "configSource": OBJ, "externalID": STR},
                   types="""podCIDR:string podCIDRs:[]string providerID:string
                   unschedulable:boolean taints:[]Taint configSource:NodeConfigSource
                   externalID:string"""),
    NodeStatus=table("""capacity allocatable phase conditions addresses daemonEndpoints nodeInfo
                     images volumesInUse volumesAttached config runtimeHandlers features""",
                     {"phase": STR, "daemonEndpoints": OBJ, "nodeInfo": OBJ, "images": LIST,
                      "volumesInUse": STRS, "volumesAttached": LIST, "config": OBJ,
                      "runtimeHandlers": LIST, "features": OBJ},
                     types="""capacity:map[string]Quantity allocatable:map[string]Quantity
                     phase:string conditions:[]NodeCondition addresses:[]NodeAddress
                     daemonEndpoints:NodeDaemonEndpoints nodeInfo:NodeSystemInfo
                     images:[]ContainerImage volumesInUse:[]string
                     volumesAttached:[]AttachedVolume config:NodeConfigStatus
                     runtimeHandlers:[]NodeRuntimeHandler features:NodeFeatures"""),
    Taint=table("key value effect timeAdded", {"value": STR},
                types="key:string value:string effect:string timeAdded:Time"),
    NodeCondition=table("type status lastHeartbeatTime lastTransitionTime reason message",
                        {"reason": STR, "message": STR},
                        {"status": ("True", "False", "Unknown")},
                        """type:string status:string lastHeartbeatTime:Time
                        lastTransitionTime:Time reason:string message:string"""),
    NodeAddress=table("type address", {"address": STR},
                      {"type": ("Hostname", "InternalIP", "ExternalIP", "InternalDNS",
                                "ExternalDNS")},
                      "type:string address:string"),

    Lease=table("apiVersion kind metadata spec", types=f"{_TOP_TYPES} spec:LeaseSpec"),
    LeaseSpec=table("""holderIdentity leaseDurationSeconds acquireTime renewTime
                    leaseTransitions strategy preferredHolder""",
                    {"holderIdentity": STR, "strategy": STR, "preferredHolder": STR},
                    types="""holderIdentity:string leaseDurationSeconds:integer
                    acquireTime:MicroTime renewTime:MicroTime leaseTransitions:integer
                    strategy:string preferredHolder:string"""),

    ReplicaSet=table(_TOP, types=f"{_TOP_TYPES} spec:ReplicaSetSpec status:ReplicaSetStatus"),
    ReplicaSetSpec=table("replicas minReadySeconds selector template",
                         types="""replicas:integer minReadySeconds:integer
                         selector:LabelSelector template:PodTemplateSpec"""),
    ReplicaSetStatus=table("""replicas fullyLabeledReplicas readyReplicas availableReplicas
                           terminatingReplicas observedGeneration conditions""",
                           {"conditions": LIST},
                           types="""replicas:integer fullyLabeledReplicas:integer
                           readyReplicas:integer availableReplicas:integer
                           terminatingReplicas:integer observedGeneration:integer
                           conditions:[]ReplicaSetCondition"""),

    Deployment=table(_TOP, types=f"{_TOP_TYPES} spec:DeploymentSpec status:DeploymentStatus"),
    DeploymentSpec=table("""replicas selector template strategy minReadySeconds
                         revisionHistoryLimit paused progressDeadlineSeconds""",
                         {"paused": BOOL},
                         types="""replicas:integer selector:LabelSelector
                         template:PodTemplateSpec strategy:DeploymentStrategy
                         minReadySeconds:integer revisionHistoryLimit:integer paused:boolean
                         progressDeadlineSeconds:integer"""),
    DeploymentStrategy=table("type rollingUpdate", {},
                             {"type": ("Recreate", "RollingUpdate")},
                             "type:string rollingUpdate:RollingUpdateDeployment"),
    RollingUpdateDeployment=table("maxUnavailable maxSurge",
                                  types="maxUnavailable:IntOrString maxSurge:IntOrString"),
    DeploymentStatus=table("""observedGeneration replicas updatedReplicas readyReplicas
                           availableReplicas unavailableReplicas terminatingReplicas conditions
                           collisionCount""", {"conditions": LIST},
                           types="""observedGeneration:integer replicas:integer
                           updatedReplicas:integer readyReplicas:integer
                           availableReplicas:integer unavailableReplicas:integer
                           terminatingReplicas:integer conditions:[]DeploymentCondition
                           collisionCount:integer"""),

    Event=table("""apiVersion kind metadata involvedObject reason message source firstTimestamp
                lastTimestamp count type eventTime series action related reportingComponent
                reportingInstance""",
                {"reason": STR, "message": STR, "action": STR, "related": OBJ,
                 "reportingComponent": STR, "reportingInstance": STR},
                {"type": ("Normal", "Warning")},
                f"""{_TOP_TYPES} involvedObject:ObjectReference reason:string message:string
                source:EventSource firstTimestamp:Time lastTimestamp:Time count:integer
                type:string eventTime:MicroTime series:EventSeries action:string
                related:ObjectReference reportingComponent:string reportingInstance:string"""),
    ObjectReference=table("kind namespace name uid apiVersion resourceVersion fieldPath",
                          {"kind": STR, "namespace": STR, "name": STR, "uid": STR,
                           "apiVersion": STR, "resourceVersion": STR, "fieldPath": STR},
                          types="""kind:string namespace:string name:string uid:string
                          apiVersion:string resourceVersion:string fieldPath:string"""),
    EventSource=table("component host", {"component": STR, "host": STR},
                      types="component:string host:string"),
    EventSeries=table("count lastObservedTime",
                      types="count:integer lastObservedTime:MicroTime"),

    Scale=table(_TOP, types=f"{_TOP_TYPES} spec:ScaleSpec status:ScaleStatus"),
    ScaleSpec=table("replicas", types="replicas:integer"),
    ScaleStatus=table("replicas selector", {"selector": STR},
                      types="replicas:integer selector:string"),
)

# Types described for OpenAPI and `kubectl explain` but not validated field by field.
TYPES.update({kind: field_types(text) for kind, text in {
    "PodTemplateSpec": "metadata:ObjectMeta spec:PodSpec",
    "NamespaceCondition": """type:string status:string lastTransitionTime:Time reason:string
        message:string""",
    "ReplicaSetCondition": """type:string status:string lastTransitionTime:Time reason:string
        message:string""",
    "DeploymentCondition": """type:string status:string lastUpdateTime:Time
        lastTransitionTime:Time reason:string message:string""",
}.items()})

# --- defaults -----------------------------------------------------------------------------------

DEPLOYMENT_SPEC_DEFAULTS = {"replicas": 1, "revisionHistoryLimit": 10,
                            "progressDeadlineSeconds": 600}
ROLLING_UPDATE_DEFAULTS = {"maxUnavailable": "25%", "maxSurge": "25%"}


def _defaulted(obj: Any, fill: Callable[[dict], None], *, namespaced: bool) -> Any:
    out = json_copy(obj)
    if not isinstance(out, dict):
        return out
    if out.get("metadata") is None:
        out["metadata"] = {}
    if namespaced and isinstance(out["metadata"], dict):
        _fill(out["metadata"], {"namespace": "default"})
    fill(out)
    return out


def _sub(obj: dict, field: str) -> dict | None:
    """obj[field], created empty when absent; None when it is not an object."""
    if obj.get(field) is None:
        obj[field] = {}
    return obj[field] if isinstance(obj[field], dict) else None


def default_namespace(obj: Any) -> Any:
    """status.phase Active."""
    def fill(ns: dict) -> None:
        status = _sub(ns, "status")
        if status is not None:
            _fill(status, {"phase": "Active"})
    return _defaulted(obj, fill, namespaced=False)


def default_node(obj: Any) -> Any:
    """status.allocatable defaults to status.capacity (SetDefaults_NodeStatus); spec.podCIDR and
    spec.podCIDRs each fill in from the other (v1's conversion keeps podCIDR == podCIDRs[0])."""
    def fill(node: dict) -> None:
        spec = node.get("spec")
        if isinstance(spec, dict):
            single, cidrs = spec.get("podCIDR"), spec.get("podCIDRs")
            if not cidrs and isinstance(single, str) and single:
                spec["podCIDRs"] = [single]
            elif not single and isinstance(cidrs, list) and cidrs and isinstance(cidrs[0], str):
                spec["podCIDR"] = cidrs[0]
        status = node.get("status")
        if isinstance(status, dict) and status.get("allocatable") is None \
                and isinstance(status.get("capacity"), dict):
            status["allocatable"] = dict(status["capacity"])
    return _defaulted(obj, fill, namespaced=False)


def default_lease(obj: Any) -> Any:
    """Leases have no defaults (the namespace aside)."""
    return _defaulted(obj, lambda lease: None, namespaced=True)


def _default_template(spec: dict) -> None:
    template = spec.get("template")
    if isinstance(template, dict):
        pod.default_pod_spec(template.get("spec"))


def default_replicaset(obj: Any) -> Any:
    """spec.replicas 1; the template's pod spec as a Pod's."""
    def fill(rs: dict) -> None:
        spec = _sub(rs, "spec")
        if spec is not None:
            _fill(spec, {"replicas": 1})
            _default_template(spec)
    return _defaulted(obj, fill, namespaced=True)


def default_deployment(obj: Any) -> Any:
    """spec.replicas 1, strategy RollingUpdate with maxSurge and maxUnavailable 25%,
    revisionHistoryLimit 10, progressDeadlineSeconds 600; the template's pod spec as a Pod's."""
    def fill(deploy: dict) -> None:
        spec = _sub(deploy, "spec")
        if spec is None:
            return
        _fill(spec, DEPLOYMENT_SPEC_DEFAULTS)
        strategy = _sub(spec, "strategy")
        if strategy is not None:
            _fill(strategy, {"type": "RollingUpdate"})
            if strategy["type"] == "RollingUpdate":
                rolling = _sub(strategy, "rollingUpdate")
                if rolling is not None:
                    _fill(rolling, ROLLING_UPDATE_DEFAULTS)
        _default_template(spec)
    return _defaulted(obj, fill, namespaced=True)


def default_event(obj: Any) -> Any:
    """Events have no defaults (the namespace aside)."""
    return _defaulted(obj, lambda event: None, namespaced=True)


# --- validation: the common frame ---------------------------------------------------------------

def _validate(obj: Any, kind: str, strict: bool, body: Callable[[Checker, dict], None], *,
              name_rule: Callable[[str], list[str]] = dns1123_subdomain_errors) -> list[FieldError]:
    c = Checker(strict)
    if not isinstance(obj, dict):
        c.invalid("", obj, "must be an object")
        return c.errors
    resource = _resource(kind)
    c.unknown_fields(obj, "", kind)
    c.shapes(obj, "", kind)
    c.enums(obj, "", kind)
    for field, value in (("apiVersion", resource.api_version), ("kind", kind)):
        if _absent(obj.get(field)):
            c.add(required(field))
        elif obj[field] != value:
            c.add(not_supported(field, obj[field], (value,)))
    check_object_meta(c, obj.get("metadata"), "metadata", namespaced=resource.namespaced,
                      name_rule=name_rule)
    body(c, obj)
    return c.errors


@functools.cache  # every validation asks: a search of every resource each time
def _resource(kind: str) -> Resource:
    return next(r for r in BY_KIND.values() if r.kind == kind)


# --- Namespace ----------------------------------------------------------------------------------

STANDARD_FINALIZERS = ("kubernetes",)


def validate_namespace(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, ns: dict) -> None:
        spec = c.obj(ns.get("spec"), "spec", "NamespaceSpec")
        if spec is not None and isinstance(spec.get("finalizers"), list):
            for name in spec["finalizers"]:
                if not isinstance(name, str):
                    continue
                _name_rule(c, name, "spec.finalizers", qualified_name_errors)
                if "/" not in name and name not in STANDARD_FINALIZERS:
                    c.invalid("spec.finalizers", name,
                              "name is neither a standard finalizer name nor is it fully qualified")
        c.obj(ns.get("status"), "status", "NamespaceStatus")
    return _validate(obj, "Namespace", strict, body, name_rule=dns1123_label_errors)


# --- Node ---------------------------------------------------------------------------------------

def validate_node(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, node: dict) -> None:
        spec = c.obj(node.get("spec"), "spec", "NodeSpec")
        if spec is not None:
            _taints(c, spec.get("taints"), "spec.taints")
            _pod_cidrs(c, spec)
        status = c.obj(node.get("status"), "status", "NodeStatus")
        if status is not None:
            for field in ("capacity", "allocatable"):
                _resource_list(c, status.get(field), child("status", field))
            _conditions(c, status.get("conditions"), "status.conditions", "NodeCondition",
                        ("lastHeartbeatTime", "lastTransitionTime"))
            addresses = c.array(status.get("addresses"), "status.addresses") or []
            for a_path, address in c.each_obj(addresses, "status.addresses", "NodeAddress"):
                for field in ("type", "address"):
                    if address.get(field) is None:
                        c.add(required(child(a_path, field)))
    return _validate(obj, "Node", strict, body)


CIDR_DETAIL = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"
POD_CIDR_CHANGED = 'node updates may not change podCIDR except from "" to valid'


def _cidr_version(text: str) -> int | None:
    """4 or 6 for a CIDR (host bits may be set, as net.ParseCIDR allows), else None."""
    try:
        return ipaddress.ip_network(text, strict=False).version if "/" in text else None
    except ValueError:
        return None


def _pod_cidrs(c: Checker, spec: dict) -> None:
    """ValidateNode's podCIDRs: each a CIDR, more than one only as a dual-stack pair; and the
    0th entry is the podCIDR field (defaulting fills in whichever is missing)."""
    single, cidrs = spec.get("podCIDR"), spec.get("podCIDRs")
    if isinstance(single, str) and single and _cidr_version(single) is None:
        c.invalid("spec.podCIDR", single, CIDR_DETAIL)
    if not isinstance(cidrs, list) or not all(isinstance(v, str) for v in cidrs):
        return  # the shape check reports it
    versions = [_cidr_version(v) for v in cidrs]
    for i, (value, version) in enumerate(zip(cidrs, versions)):
        if version is None:
            c.invalid(index("spec.podCIDRs", i), value, CIDR_DETAIL)
    if len(cidrs) > 1 and None not in versions and (len(cidrs) > 2 or versions[0] == versions[1]):
        c.invalid("spec.podCIDRs", cidrs, "may specify no more than one CIDR for each IP family")
    if cidrs and isinstance(single, str) and single and cidrs[0] != single:
        c.invalid(index("spec.podCIDRs", 0), cidrs[0], "must match spec.podCIDR")


def node_pod_cidrs(node: Any) -> list:
    """A Node's podCIDRs as v1's conversion reads them: spec.podCIDRs, else [spec.podCIDR]
    (a node stored before defaulting filled podCIDRs has only that)."""
    spec = node.get("spec") if isinstance(node, dict) else None
    if not isinstance(spec, dict):
        return []
    cidrs = spec.get("podCIDRs")
    if cidrs:
        return cidrs if isinstance(cidrs, list) else [cidrs]
    return [spec["podCIDR"]] if spec.get("podCIDR") else []


def validate_node_update(old: Any, new: Any) -> list[FieldError]:
    """ValidateNodeUpdate: a node's podCIDRs may be set once (by node IPAM), never changed."""
    before = node_pod_cidrs(old)
    if before and node_pod_cidrs(new) != before:
        return [forbidden("spec.podCIDRs", POD_CIDR_CHANGED)]
    return []


def _taints(c: Checker, value: Any, path: str) -> None:
    """validateNodeTaints: key a qualified name, value a label value, effect one of three,
    unique by (key, effect)."""
    seen: set[tuple[str, str]] = set()
    for t_path, taint in c.each_obj(c.array(value, path) or [], path, "Taint"):
        key_path = child(t_path, "key")
        tkey = c.string(taint.get("key"), key_path)
        if _absent(taint.get("key")):
            c.add(required(key_path))
        elif tkey is not None:
            _name_rule(c, tkey, key_path, qualified_name_errors)
        tvalue = taint.get("value")
        if isinstance(tvalue, str):
            msgs = pod.label_value_errors(tvalue)
            if msgs:
                c.invalid(child(t_path, "value"), tvalue, ";".join(msgs))
        effect_path = child(t_path, "effect")
        effect = c.string(taint.get("effect"), effect_path)
        if _absent(taint.get("effect")):
            c.add(required(effect_path))
        elif effect is not None and effect not in TAINT_EFFECTS:
            c.add(not_supported(effect_path, effect, TAINT_EFFECTS))
        c.timestamp(taint.get("timeAdded"), child(t_path, "timeAdded"))
        if isinstance(tkey, str) and isinstance(effect, str):
            if (tkey, effect) in seen:
                c.add(FieldError(t_path, DUPLICATE,
                                 "taints must be unique by key and effect pair", taint))
            seen.add((tkey, effect))


def _resource_list(c: Checker, value: Any, path: str) -> None:
    """A ResourceList (capacity, allocatable): qualified resource names, quantities >= 0."""
    for name, q in (c.obj(value, path) or {}).items():
        q_path = child(path, name)
        if not isinstance(name, str):
            c.invalid(path, name, "keys must be strings")
            continue
        _name_rule(c, name, q_path, qualified_name_errors)
        if not isinstance(q, (str, int, float)) or isinstance(q, bool):
            c.invalid(q_path, q, "must be a string or a number")
            continue
        try:
            parsed = pod.quantity.parse_quantity(q)
        except (ValueError, OverflowError) as e:
            c.invalid(q_path, q, str(e))
            continue
        if parsed < 0:
            c.invalid(q_path, pod.quantity.canonical(q), "must be greater than or equal to 0")


def _conditions(c: Checker, value: Any, path: str, kind: str, times: tuple[str, ...]) -> None:
    """Conditions: type and status required, at most one of each type."""
    seen: set[str] = set()
    for c_path, cond in c.each_obj(c.array(value, path) or [], path, kind):
        ctype = c.string(cond.get("type"), child(c_path, "type"))
        if _absent(cond.get("type")):
            c.add(required(child(c_path, "type")))
        elif ctype is not None:
            if ctype in seen:
                c.add(duplicate(child(c_path, "type"), ctype))
            seen.add(ctype)
        if cond.get("status") is None:
            c.add(required(child(c_path, "status")))
        for field in times:
            c.timestamp(cond.get(field), child(c_path, field))


# --- Lease --------------------------------------------------------------------------------------

def validate_lease(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, lease: dict) -> None:
        spec = c.obj(lease.get("spec"), "spec", "LeaseSpec")
        if spec is None:
            return
        duration = c.integer(spec.get("leaseDurationSeconds"), "spec.leaseDurationSeconds")
        if duration is not None and duration <= 0:
            c.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0")
        c.nonnegative(spec.get("leaseTransitions"), "spec.leaseTransitions")
        for field in ("acquireTime", "renewTime"):
            c.timestamp(spec.get(field), child("spec", field))
        if spec.get("preferredHolder") and _absent(spec.get("strategy")):
            c.add(forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
    return _validate(obj, "Lease", strict, body)


# --- ReplicaSet and Deployment (and what the other apps/v1 workloads share with them) -----------

# The words upstream's per-kind validators use for the same rules (ValidateReplicaSetSpec is
# shared by Deployments, hence "deployment" and "ReplicaSet" there).
_EMPTY_SELECTOR_WORD = {"ReplicaSet": "deployment", "Deployment": "deployment",
                        "StatefulSet": "statefulset", "DaemonSet": "daemonset"}


def _workload_spec(c: Checker, spec: dict, path: str, kind: str = "ReplicaSet", *,
                   pod_template: Any = None) -> int:
    """What the apps/v1 workloads share (ValidateReplicaSetSpec, ValidateDeploymentSpec,
    ValidateStatefulSetSpec, ValidateDaemonSetSpec): replicas, a non-empty selector matching the
    template's labels, the template (restartPolicy Always, no activeDeadlineSeconds),
    minReadySeconds; messages worded for `kind` as upstream words them. The pod spec is
    validated as `pod_template` when given (a StatefulSet's template with its claim templates'
    volumes). Returns minReadySeconds (0 if unusable)."""
    c.nonnegative(spec.get("replicas"), child(path, "replicas"))
    sel_path = child(path, "selector")
    selector = None
    if spec.get("selector") is None:
        c.add(required(sel_path))
    else:
        selector = check_label_selector(c, spec["selector"], sel_path)
        if isinstance(spec["selector"], dict) and selector_is_empty(spec["selector"]):
            c.invalid(sel_path, spec["selector"],
                      f"empty selector is invalid for {_EMPTY_SELECTOR_WORD[kind]}")
            selector = None
    t_path = child(path, "template")
    template = spec.get("template") if spec.get("template") is not None else {}
    if isinstance(template, dict) and selector is not None:
        meta = template.get("metadata")
        labels = meta.get("labels") if isinstance(meta, dict) else None
        if not selector_matches(selector, labels):
            c.invalid(child(t_path, "metadata.labels"), labels if labels is not None else {},
                      "`selector` does not match template `labels`")
    c.errors.extend(pod.validate_pod_template(template if pod_template is None else pod_template,
                                              t_path, strict=c.strict))
    pod_spec = template.get("spec") if isinstance(template, dict) else None
    if isinstance(pod_spec, dict):
        policy = pod_spec.get("restartPolicy")
        if isinstance(policy, str) and policy not in ("", "Always"):
            c.add(not_supported(child(t_path, "spec.restartPolicy"), policy, ("Always",)))
        deadline_path = child(t_path, "spec.activeDeadlineSeconds")
        deadline = pod_spec.get("activeDeadlineSeconds")
        if deadline is not None and kind in ("ReplicaSet", "Deployment"):
            c.invalid(deadline_path, deadline, "activeDeadlineSeconds in ReplicaSet is not Supported")
        elif deadline is not None:
            c.add(forbidden(deadline_path, f"activeDeadlineSeconds in {kind} is not Supported"))
    min_ready = c.nonnegative(spec.get("minReadySeconds"), child(path, "minReadySeconds"))
    return min_ready if min_ready is not None and min_ready >= 0 else 0


_GREATER_THAN_REPLICAS = "cannot be greater than status.replicas"


def _workload_status(c: Checker, value: Any, kind: str, counts: tuple[str, ...],
                     bounded: tuple[str, ...], ready_word: str = "readyReplicas") -> None:
    """Counters >= 0; `bounded` ones <= status.replicas; availableReplicas <= readyReplicas
    (`ready_word` names it in the message, as each kind's validator does)."""
    status = c.obj(value, "status", kind)
    if status is None:
        return
    numbers = {f: c.nonnegative(status.get(f), child("status", f)) for f in counts}
    numbers = {f: n for f, n in numbers.items() if n is not None}
    replicas = numbers.get("replicas", 0)
    for field in bounded:
        if numbers.get(field, 0) > replicas:
            c.invalid(child("status", field), numbers.get(field, 0), _GREATER_THAN_REPLICAS)
    if numbers.get("availableReplicas", 0) > numbers.get("readyReplicas", 0):
        c.invalid("status.availableReplicas", numbers.get("availableReplicas", 0),
                  f"cannot be greater than {ready_word}")


def validate_replicaset(obj: Any, *, strict: bool = True, spec: bool = True) -> list[FieldError]:
    """`spec=False`: all but the spec, for a status update (kube's ValidateReplicaSetStatusUpdate)."""
    def body(c: Checker, rs: dict) -> None:
        if spec:
            rs_spec = c.obj(rs.get("spec"), "spec", "ReplicaSetSpec")
            _workload_spec(c, rs_spec if rs_spec is not None else {}, "spec")
        _workload_status(c, rs.get("status"), "ReplicaSetStatus",
                         ("replicas", "fullyLabeledReplicas", "readyReplicas",
                          "availableReplicas", "terminatingReplicas", "observedGeneration"),
                         ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"))
    return _validate(obj, "ReplicaSet", strict, body)


def validate_deployment(obj: Any, *, strict: bool = True, spec: bool = True) -> list[FieldError]:
    """`spec=False`: all but the spec, for a status update (kube's ValidateDeploymentStatusUpdate)."""
    def body(c: Checker, deploy: dict) -> None:
        if spec:
            _deployment_spec(c, deploy.get("spec"))
        _workload_status(c, deploy.get("status"), "DeploymentStatus",
                         ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas",
                          "unavailableReplicas", "terminatingReplicas", "observedGeneration",
                          "collisionCount"),
                         ("updatedReplicas", "readyReplicas", "availableReplicas"))
    return _validate(obj, "Deployment", strict, body)


def _deployment_spec(c: Checker, value: Any) -> None:
    spec = c.obj(value, "spec", "DeploymentSpec")
    spec = spec if spec is not None else {}
    min_ready = _workload_spec(c, spec, "spec", "Deployment")
    _strategy(c, spec.get("strategy"), "spec.strategy")
    c.nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
    deadline = spec.get("progressDeadlineSeconds")
    deadline = DEPLOYMENT_SPEC_DEFAULTS["progressDeadlineSeconds"] if deadline is None \
        else c.nonnegative(deadline, "spec.progressDeadlineSeconds")
    if deadline is not None and deadline <= min_ready:
        c.invalid("spec.progressDeadlineSeconds", deadline,
                  "must be greater than minReadySeconds")


def _strategy(c: Checker, value: Any, path: str) -> None:
    """ValidateDeploymentStrategy. An absent type is RollingUpdate, absent surge and
    unavailability 25% (their defaults). An unknown type is reported at `type`."""
    strategy = c.obj(value, path, "DeploymentStrategy")
    if strategy is None:
        return
    stype = strategy.get("type") or "RollingUpdate"
    ru_path = child(path, "rollingUpdate")
    if stype == "Recreate":
        if strategy.get("rollingUpdate") is not None:
            c.add(forbidden(ru_path, "may not be specified when strategy `type` is 'Recreate'"))
        return
    if stype != "RollingUpdate":
        return
    rolling = c.obj(strategy.get("rollingUpdate"), ru_path, "RollingUpdateDeployment")
    if rolling is None:
        return
    unavailable_path = child(ru_path, "maxUnavailable")
    unavailable = rolling.get("maxUnavailable", "25%")
    surge = rolling.get("maxSurge", "25%")
    unavailable_n = check_int_or_percent(c, unavailable, unavailable_path)
    surge_n = check_int_or_percent(c, surge, child(ru_path, "maxSurge"))
    if unavailable_n == 0 and surge_n == 0:
        c.invalid(unavailable_path, unavailable, "may not be 0 when `maxSurge` is 0")
    check_at_most_100_percent(c, unavailable, unavailable_n, unavailable_path)


def check_at_most_100_percent(c: Checker, value: Any, number: int | None, path: str) -> None:
    """IsNotMoreThan100Percent: a percentage (not a count) above 100% is invalid."""
    if isinstance(value, str) and number is not None and number > 100:
        c.invalid(path, value, "must not be greater than 100%")


# --- Event --------------------------------------------------------------------------------------

REASON_LIMIT = 128
REPORTING_INSTANCE_LIMIT = 128
ACTION_LIMIT = 128


def validate_event(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateEventCreate (core/v1), plus: involvedObject with its kind and name required,
    type Normal or Warning, count >= 0, RFC 3339 timestamps."""
    def body(c: Checker, event: dict) -> None:
        meta = event.get("metadata") if isinstance(event.get("metadata"), dict) else {}
        namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
        ref = c.obj(event.get("involvedObject"), "involvedObject", "ObjectReference")
        if event.get("involvedObject") is None:
            c.add(required("involvedObject"))
        ref_namespace = ""
        if ref is not None:
            for field in ("kind", "name"):
                if _absent(ref.get(field)):
                    c.add(required(child("involvedObject", field)))
            if isinstance(ref.get("namespace"), str):
                ref_namespace = ref["namespace"]
        if event.get("eventTime") is None:
            if ref_namespace != namespace and (ref_namespace or namespace not in ("", "default")):
                c.invalid("involvedObject.namespace", ref_namespace, "does not match event.namespace")
        else:
            if not ref_namespace and namespace not in ("default", "kube-system"):
                c.invalid("involvedObject.namespace", ref_namespace, "does not match event.namespace")
            for field, limit in (("reportingComponent", None),
                                 ("reportingInstance", REPORTING_INSTANCE_LIMIT),
                                 ("action", ACTION_LIMIT)):
                value = event.get(field)
                if _absent(value):
                    c.add(required(field))
                elif isinstance(value, str) and limit and len(value) > limit:
                    c.invalid(field, "", f"can have at most {limit} characters")
                elif isinstance(value, str) and field == "reportingComponent":
                    _name_rule(c, value, field, qualified_name_errors)
        reason = event.get("reason")
        if isinstance(reason, str) and len(reason) > REASON_LIMIT:
            c.invalid("reason", "", f"can have at most {REASON_LIMIT} characters")
        c.nonnegative(event.get("count"), "count")
        for field in ("firstTimestamp", "lastTimestamp", "eventTime"):
            c.timestamp(event.get(field), field)
        c.obj(event.get("source"), "source", "EventSource")
        series = c.obj(event.get("series"), "series", "EventSeries")
        if series is not None:
            c.nonnegative(series.get("count"), "series.count")
            c.timestamp(series.get("lastObservedTime"), "series.lastObservedTime")
    return _validate(obj, "Event", strict, body)


# --- Scale (autoscaling/v1) ---------------------------------------------------------------------

SCALABLE_KINDS = ("ReplicaSet", "Deployment", "StatefulSet")
SELECTOR_IMMUTABLE_KINDS = ("ReplicaSet", "Deployment", "DaemonSet")


def scale_of(obj: Any) -> dict:
    """The autoscaling/v1 Scale of a ReplicaSet, Deployment or StatefulSet: its identity,
    spec.replicas (1 when unset, as defaulting makes it), status.replicas and the selector as a
    string."""
    obj = obj if isinstance(obj, dict) else {}
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    replicas = spec.get("replicas")
    status_replicas = status.get("replicas")
    return {
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                          "creationTimestamp") if meta.get(k) is not None},
        "spec": {"replicas": replicas if _is_int(replicas) else 1},
        "status": {"replicas": status_replicas if _is_int(status_replicas) else 0,
                   "selector": format_selector(spec.get("selector"))},
    }


def validate_scale(scale: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateScale: metadata as for a namespaced object, spec.replicas >= 0."""
    c = Checker(strict)
    obj = c.obj(scale, "", "Scale") if scale is not None else None
    if obj is None:
        if scale is None:
            c.invalid("", scale, "must be an object")
        return c.errors
    for field, value in (("apiVersion", "autoscaling/v1"), ("kind", "Scale")):
        if not _absent(obj.get(field)) and obj[field] != value:
            c.add(not_supported(field, obj[field], (value,)))
    check_object_meta(c, obj.get("metadata"), "metadata", namespaced=True)
    spec = c.obj(obj.get("spec"), "spec", "ScaleSpec")
    if spec is not None:
        c.nonnegative(spec.get("replicas"), "spec.replicas")
    status = c.obj(obj.get("status"), "status", "ScaleStatus")
    if status is not None:
        c.nonnegative(status.get("replicas"), "status.replicas")
    return c.errors


def apply_scale(obj: Any, replicas: Any) -> dict:
    """A copy of `obj` with spec.replicas set to `replicas` (a count, or a Scale whose
    spec.replicas is used). ValidationError(kind="Scale") if it is not a count >= 0."""
    name = ""
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        name = obj["metadata"].get("name") if isinstance(obj["metadata"].get("name"), str) else ""
    if isinstance(replicas, dict):
        spec = replicas.get("spec")
        replicas = spec.get("replicas") if isinstance(spec, dict) else None
        if replicas is None:
            replicas = 0  # Go's zero value: an empty Scale scales to 0
    c = Checker(False)
    c.nonnegative(replicas, "spec.replicas")
    if c.errors:
        raise ValidationError(c.errors, kind="Scale", name=name)
    out = json_copy(obj) if isinstance(obj, dict) else {}
    if not isinstance(out.get("spec"), dict):
        out["spec"] = {}
    out["spec"]["replicas"] = replicas
    return out


# --- every kind ---------------------------------------------------------------------------------

DEFAULTERS: dict[str, Callable[[Any], Any]] = {
    "Namespace": default_namespace, "Pod": pod.default_pod, "Node": default_node,
    "Lease": default_lease, "ReplicaSet": default_replicaset, "Deployment": default_deployment,
    "Event": default_event, **rbacobjects.DEFAULTERS, **configobjects.DEFAULTERS,
    **service.DEFAULTERS, **apps.DEFAULTERS, **batch.DEFAULTERS, **storage.DEFAULTERS,
    **policy.DEFAULTERS, **ipaddress_kind.DEFAULTERS, **certificates.DEFAULTERS,
}
VALIDATORS: dict[str, Callable[..., list[FieldError]]] = {
    "Namespace": validate_namespace, "Pod": pod.validate_pod, "Node": validate_node,
    "Lease": validate_lease, "ReplicaSet": validate_replicaset,
    "Deployment": validate_deployment, "Event": validate_event, **rbacobjects.VALIDATORS,
    **configobjects.VALIDATORS, **service.VALIDATORS, **apps.VALIDATORS, **batch.VALIDATORS,
    **storage.VALIDATORS, **policy.VALIDATORS, **ipaddress_kind.VALIDATORS,
    **certificates.VALIDATORS,
}


# A status update's validation without the spec, as kube's Validate<Kind>StatusUpdate: the
# strategy copied the spec from the stored object (kinds not here are validated whole).
STATUS_VALIDATORS: dict[str, Callable[..., list[FieldError]]] = {
    "Pod": functools.partial(pod.validate_pod, spec=False),
    "ReplicaSet": functools.partial(validate_replicaset, spec=False),
    "Deployment": functools.partial(validate_deployment, spec=False),
}


def _kind(obj: Any) -> str | None:
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) and kind in VALIDATORS else None


def default_object(obj: Any) -> Any:
    """The defaulted copy of an object of any kind kubemu serves (others: a plain copy)."""
    kind = _kind(obj)
    return DEFAULTERS[kind](obj) if kind else json_copy(obj)


def validate_object(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """validate_<kind> by the object's kind; an unserved kind is an error at `kind`."""
    kind = _kind(obj)
    if kind is None:
        if not isinstance(obj, dict):
            return [pod.invalid("", obj, "must be an object")]
        if _absent(obj.get("kind")):
            return [required("kind")]
        return [not_supported("kind", obj.get("kind"), sorted(VALIDATORS))]
    return VALIDATORS[kind](obj, strict=strict)


def validate_object_update(old: Any, new: Any, *, strict: bool = True,
                           require_resource_version: bool = True, status: bool = False) -> list[FieldError]:
    """The new object on its own, then what may not change: metadata's immutable fields, the
    kind, a ReplicaSet's, Deployment's or DaemonSet's spec.selector (immutable in apps/v1; a
    StatefulSet's and a Job's are with their other rules), a binding's roleRef, an immutable
    ConfigMap's or Secret's data and a Secret's type, a Node's podCIDRs once set, a Service's
    clusterIP, an EndpointSlice's addressType, and each kind's UPDATE_VALIDATORS. `status`: an
    update through the status subresource, whose spec is the stored one, not checked again for
    the kinds in STATUS_VALIDATORS (the status updates kubelets and controllers send for every
    pod)."""
    status_validator = STATUS_VALIDATORS.get(_kind(new)) if status else None
    errors = status_validator(new, strict=strict) if status_validator else validate_object(new, strict=strict)
    if not isinstance(old, dict) or not isinstance(new, dict):
        return errors
    if old.get("kind") != new.get("kind") and not _absent(new.get("kind")):
        errors.append(pod.invalid("kind", new.get("kind"), "field is immutable"))
    errors += validate_object_meta_update(old.get("metadata"), new.get("metadata"),
                                          require_resource_version=require_resource_version)
    if new.get("kind") in SELECTOR_IMMUTABLE_KINDS:
        before = old.get("spec").get("selector") if isinstance(old.get("spec"), dict) else None
        after = new.get("spec").get("selector") if isinstance(new.get("spec"), dict) else None
        if before != after:
            errors.append(pod.invalid("spec.selector", after, "field is immutable"))
    kind = new.get("kind") if isinstance(new.get("kind"), str) else None
    if kind == "Node":
        errors += validate_node_update(old, new)
    for updates in (rbacobjects.UPDATE_VALIDATORS, configobjects.UPDATE_VALIDATORS,
                    service.UPDATE_VALIDATORS, apps.UPDATE_VALIDATORS, batch.UPDATE_VALIDATORS,
                    storage.UPDATE_VALIDATORS, policy.UPDATE_VALIDATORS,
                    ipaddress_kind.UPDATE_VALIDATORS):
        if kind in updates:
            errors += updates[kind](old, new)
    return errors


__all__ = ["default_namespace", "default_node", "default_lease", "default_replicaset",
           "default_deployment", "default_event", "validate_namespace", "validate_node",
           "validate_node_update", "node_pod_cidrs",
           "validate_lease", "validate_replicaset", "validate_deployment", "validate_event",
           "scale_of", "validate_scale", "apply_scale", "default_object", "validate_object",
           "validate_object_update", "DEFAULTERS", "VALIDATORS"]
