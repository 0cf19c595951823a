"""Pod defaulting and validation, as the apiserver does them (core/v1 defaults, ValidatePodCreate).

    default_pod(pod, with_status=False) -> a new, defaulted pod (the input is left untouched)
    validate_pod(pod, strict=True)       -> [FieldError, ...]; empty means valid

and, for objects that embed a pod template (ReplicaSet, Deployment):

    default_pod_spec(spec)                                 (in place)
    validate_pod_spec(spec, path="spec", strict=True)      -> [FieldError, ...]
    validate_pod_template(template, path="spec.template", strict=True) -> [FieldError, ...]

Both take the JSON shape (dicts, lists, strings, numbers) straight from YAML or the wire and
never raise on a malformed object: a wrong type anywhere is an `Invalid value` error at its
field path, as a decoding error would be in Kubernetes. Messages follow Kubernetes' wording
(see fielderrors.py), so a rejected manifest reads like `kubectl apply` output.

What kubemu adds or leaves out, and why:

  * a container IS a process here (there are no images): `command` is required, `image` is
    optional and informative;
  * env `valueFrom` and `envFrom` are Forbidden: there are no ConfigMaps, Secrets or downward
    API to read from;
  * gRPC probes are Forbidden: the kubelet probes with exec, httpGet and tcpSocket only;
  * probes and `restartPolicy` on init containers are Forbidden: init containers run once to
    completion (no sidecars);
  * resources: only cpu and memory;
  * strict mode (the default) reports fields no Pod has as `Unknown field`, at any level kubemu
    validates (pod, metadata, spec, containers, ports, env, resources, probes and their
    handlers, tolerations). The known-field tables list the common Kubernetes fields too, even
    those kubemu ignores (volumes, securityContext, affinity, ...), so real manifests pass.
    Objects kubemu does not look into (volumes, affinity, ...) are only checked for their type.

Validation accepts both raw and defaulted pods: a field that defaulting would fill may be absent.
"""
from __future__ import annotations

import copy
import re
from typing import Any, Callable

from . import quantity
from .fielderrors import (FieldError, child, duplicate, forbidden, index, invalid, key,
                          not_supported, required, too_long, unknown_field)

# --- what a Pod may contain (strict mode) ----------------------------------------------------

KNOWN_FIELDS: dict[str, frozenset[str]] = {k: frozenset(v.split()) for k, v in {
    "Pod": "apiVersion kind metadata spec status",
    "ObjectMeta": """name generateName namespace uid resourceVersion generation creationTimestamp
        deletionTimestamp deletionGracePeriodSeconds labels annotations ownerReferences
        finalizers managedFields selfLink""",
    "PodSpec": """volumes initContainers containers ephemeralContainers restartPolicy
        terminationGracePeriodSeconds activeDeadlineSeconds dnsPolicy nodeSelector
        serviceAccountName serviceAccount automountServiceAccountToken nodeName hostNetwork
        hostPID hostIPC shareProcessNamespace securityContext imagePullSecrets hostname
        subdomain affinity schedulerName tolerations hostAliases priorityClassName priority
        dnsConfig readinessGates runtimeClassName enableServiceLinks preemptionPolicy overhead
        topologySpreadConstraints setHostnameAsFQDN os hostUsers schedulingGates
        resourceClaims resources""",
    "Container": """name image command args workingDir ports envFrom env resources resizePolicy
        restartPolicy volumeMounts volumeDevices livenessProbe readinessProbe startupProbe
        lifecycle terminationMessagePath terminationMessagePolicy imagePullPolicy
        securityContext stdin stdinOnce tty""",
    "ContainerPort": "name hostPort containerPort protocol hostIP",
    "EnvVar": "name value valueFrom",
    "ResourceRequirements": "limits requests claims",
    "Probe": """exec httpGet tcpSocket grpc initialDelaySeconds timeoutSeconds periodSeconds
        successThreshold failureThreshold terminationGracePeriodSeconds""",
    "ExecAction": "command",
    "HTTPGetAction": "path port host scheme httpHeaders",
    "HTTPHeader": "name value",
    "TCPSocketAction": "port host",
    "GRPCAction": "port service",
    "Toleration": "key operator value effect tolerationSeconds",
}.items()}

# --- shapes of the fields kubemu only type-checks ----------------------------------------------

STR, INT, BOOL, OBJ, LIST, STRS = "string", "integer", "boolean", "object", "list", "strings"

SHAPES: dict[str, dict[str, str]] = {
    "ObjectMeta": {"uid": STR, "resourceVersion": STR, "generation": INT,
                   "creationTimestamp": STR, "deletionTimestamp": STR,
                   "deletionGracePeriodSeconds": INT, "finalizers": STRS,
                   "ownerReferences": LIST, "managedFields": LIST, "selfLink": STR},
    "PodSpec": {"volumes": LIST, "ephemeralContainers": LIST, "serviceAccountName": STR,
                "serviceAccount": STR, "automountServiceAccountToken": BOOL,
                "hostNetwork": BOOL, "hostPID": BOOL, "hostIPC": BOOL,
                "shareProcessNamespace": BOOL, "securityContext": OBJ,
                "imagePullSecrets": LIST, "hostname": STR, "subdomain": STR, "affinity": OBJ,
                "schedulerName": STR, "hostAliases": LIST, "priorityClassName": STR,
                "priority": INT, "dnsConfig": OBJ, "readinessGates": LIST,
                "runtimeClassName": STR, "enableServiceLinks": BOOL, "preemptionPolicy": STR,
                "overhead": OBJ, "topologySpreadConstraints": LIST, "setHostnameAsFQDN": BOOL,
                "os": OBJ, "hostUsers": BOOL, "schedulingGates": LIST, "resourceClaims": LIST,
                "resources": OBJ, "nodeName": STR, "terminationGracePeriodSeconds": INT,
                "activeDeadlineSeconds": INT},
    "Container": {"image": STR, "args": STRS, "workingDir": STR,
                  "terminationMessagePath": STR, "stdin": BOOL, "stdinOnce": BOOL, "tty": BOOL,
                  "volumeMounts": LIST, "volumeDevices": LIST, "securityContext": OBJ,
                  "lifecycle": OBJ, "resizePolicy": LIST, "envFrom": LIST},
    "ContainerPort": {"hostIP": STR},
    "EnvVar": {"value": STR},
    "ResourceRequirements": {"claims": LIST},
    "HTTPGetAction": {"host": STR, "path": STR},
    "HTTPHeader": {"name": STR, "value": STR},
    "TCPSocketAction": {"host": STR},
    "Toleration": {"key": STR, "operator": STR, "value": STR, "effect": STR,
                   "tolerationSeconds": INT},
}

# --- enumerations, listed in the order Kubernetes lists them in its messages ------------------

ENUMS: dict[str, dict[str, tuple[str, ...]]] = {
    "PodSpec": {"restartPolicy": ("Always", "OnFailure", "Never"),
                "dnsPolicy": ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")},
    "Container": {"imagePullPolicy": ("Always", "IfNotPresent", "Never"),
                  "terminationMessagePolicy": ("File", "FallbackToLogsOnError")},
    "ContainerPort": {"protocol": ("SCTP", "TCP", "UDP")},
    "HTTPGetAction": {"scheme": ("HTTP", "HTTPS")},
}

# --- the type of every field, in Go's notation (what OpenAPI and `kubectl explain` show) --------
# A type listed here without a KNOWN_FIELDS entry (PodStatus...) is described, not validated
# field by field; a type named nowhere (Volume, Affinity...) is published as an open object.


def field_types(text: str) -> dict[str, str]:
    """The types of "name:string ports:[]ContainerPort" as {"name": "string", ...}."""
    return dict(item.split(":", 1) for item in text.split())


TYPES: dict[str, dict[str, str]] = {k: field_types(v) for k, v in {
    "Pod": "apiVersion:string kind:string metadata:ObjectMeta spec:PodSpec status:PodStatus",
    "ObjectMeta": """name:string generateName:string namespace:string uid:string
        resourceVersion:string generation:integer creationTimestamp:Time deletionTimestamp:Time
        deletionGracePeriodSeconds:integer labels:map[string]string
        annotations:map[string]string ownerReferences:[]OwnerReference finalizers:[]string
        managedFields:[]ManagedFieldsEntry selfLink:string""",
    "PodSpec": """volumes:[]Volume initContainers:[]Container containers:[]Container
        ephemeralContainers:[]EphemeralContainer restartPolicy:string
        terminationGracePeriodSeconds:integer activeDeadlineSeconds:integer dnsPolicy:string
        nodeSelector:map[string]string serviceAccountName:string serviceAccount:string
        automountServiceAccountToken:boolean nodeName:string hostNetwork:boolean hostPID:boolean
        hostIPC:boolean shareProcessNamespace:boolean securityContext:PodSecurityContext
        imagePullSecrets:[]LocalObjectReference hostname:string subdomain:string
        affinity:Affinity schedulerName:string tolerations:[]Toleration
        hostAliases:[]HostAlias priorityClassName:string priority:integer
        dnsConfig:PodDNSConfig readinessGates:[]PodReadinessGate runtimeClassName:string
        enableServiceLinks:boolean preemptionPolicy:string overhead:map[string]Quantity
        topologySpreadConstraints:[]TopologySpreadConstraint setHostnameAsFQDN:boolean os:PodOS
        hostUsers:boolean schedulingGates:[]PodSchedulingGate
        resourceClaims:[]PodResourceClaim resources:ResourceRequirements""",
    "Container": """name:string image:string command:[]string args:[]string workingDir:string
        ports:[]ContainerPort envFrom:[]EnvFromSource env:[]EnvVar
        resources:ResourceRequirements resizePolicy:[]ContainerResizePolicy
        restartPolicy:string volumeMounts:[]VolumeMount volumeDevices:[]VolumeDevice
        livenessProbe:Probe readinessProbe:Probe startupProbe:Probe lifecycle:Lifecycle
        terminationMessagePath:string terminationMessagePolicy:string imagePullPolicy:string
        securityContext:SecurityContext stdin:boolean stdinOnce:boolean tty:boolean""",
    "ContainerPort": """name:string hostPort:integer containerPort:integer protocol:string
        hostIP:string""",
    "EnvVar": "name:string value:string valueFrom:EnvVarSource",
    "ResourceRequirements": """limits:map[string]Quantity requests:map[string]Quantity
        claims:[]ResourceClaim""",
    "Probe": """exec:ExecAction httpGet:HTTPGetAction tcpSocket:TCPSocketAction grpc:GRPCAction
        initialDelaySeconds:integer timeoutSeconds:integer periodSeconds:integer
        successThreshold:integer failureThreshold:integer
        terminationGracePeriodSeconds:integer""",
    "ExecAction": "command:[]string",
    "HTTPGetAction": """path:string port:IntOrString host:string scheme:string
        httpHeaders:[]HTTPHeader""",
    "HTTPHeader": "name:string value:string",
    "TCPSocketAction": "port:IntOrString host:string",
    "GRPCAction": "port:integer service:string",
    "Toleration": "key:string operator:string value:string effect:string tolerationSeconds:integer",
    "PodStatus": """phase:string conditions:[]PodCondition message:string reason:string
        nominatedNodeName:string hostIP:string hostIPs:[]HostIP podIP:string podIPs:[]PodIP
        startTime:Time initContainerStatuses:[]ContainerStatus
        containerStatuses:[]ContainerStatus qosClass:string
        ephemeralContainerStatuses:[]ContainerStatus""",
    "PodCondition": """type:string status:string lastProbeTime:Time lastTransitionTime:Time
        reason:string message:string""",
    "HostIP": "ip:string",
    "PodIP": "ip:string",
    "ContainerStatus": """name:string state:ContainerState lastState:ContainerState
        ready:boolean restartCount:integer image:string imageID:string containerID:string
        started:boolean""",
    "ContainerState": """waiting:ContainerStateWaiting running:ContainerStateRunning
        terminated:ContainerStateTerminated""",
    "ContainerStateWaiting": "reason:string message:string",
    "ContainerStateRunning": "startedAt:Time",
    "ContainerStateTerminated": """exitCode:integer signal:integer reason:string message:string
        startedAt:Time finishedAt:Time containerID:string""",
}.items()}

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists")
RESOURCES = ("cpu", "memory")

PROBES = {"livenessProbe": "liveness", "readinessProbe": "readiness", "startupProbe": "startup"}
# Handler field -> its object type, in the order Kubernetes checks them.
HANDLERS = {"exec": "ExecAction", "httpGet": "HTTPGetAction", "tcpSocket": "TCPSocketAction",
            "grpc": "GRPCAction"}
PROBE_MINIMUMS = {"initialDelaySeconds": 0, "timeoutSeconds": 1, "periodSeconds": 1,
                  "successThreshold": 1, "failureThreshold": 1}

MAX_ANNOTATIONS_BYTES = 256 * 1024  # TotalAnnotationSizeLimitB

# --- defaults (core/v1 SetDefaults_*) ----------------------------------------------------------

POD_SPEC_DEFAULTS = {"restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                     "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler"}
CONTAINER_DEFAULTS = {"terminationMessagePath": "/dev/termination-log",
                      "terminationMessagePolicy": "File"}
PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
                  "failureThreshold": 3, "initialDelaySeconds": 0}
HTTP_GET_DEFAULTS = {"scheme": "HTTP", "path": "/"}
PORT_DEFAULTS = {"protocol": "TCP"}


def default_pod(pod: dict, *, with_status: bool = False) -> dict:
    """A defaulted deep copy of `pod`. Only fields that are absent (or null, or an empty string
    where Go's zero value means "unset") are filled; parts of the wrong type are left for
    validation to report. `with_status` also gives an empty status the phase Pending."""
    out = copy.deepcopy(pod)
    if not isinstance(out, dict):
        return out
    if out.get("metadata") is None:
        out["metadata"] = {}
    meta = out["metadata"]
    if isinstance(meta, dict):
        _fill(meta, {"namespace": "default"})
        for field in ("labels", "annotations"):
            if meta.get(field) is None:
                meta[field] = {}
    default_pod_spec(out.get("spec"))
    if with_status:
        if out.get("status") is None or out["status"] == {}:
            out["status"] = {"phase": "Pending"}
        elif isinstance(out["status"], dict):
            _fill(out["status"], {"phase": "Pending"})
    return out


def default_pod_spec(spec: Any) -> None:
    """Default a pod spec in place (a Pod's, or a ReplicaSet's or Deployment's template's).
    Anything but a dict is left alone for validation to report."""
    if isinstance(spec, dict):
        _fill(spec, POD_SPEC_DEFAULTS)
        for field in ("initContainers", "containers"):
            for ctr in _dicts(spec.get(field)):
                _default_container(ctr)


def _default_container(ctr: dict) -> None:
    _fill(ctr, CONTAINER_DEFAULTS)
    image = ctr.get("image")
    if isinstance(image, str) and image:
        _fill(ctr, {"imagePullPolicy": _pull_policy(image)})
    for port in _dicts(ctr.get("ports")):
        _fill(port, PORT_DEFAULTS)
    for field in PROBES:
        probe = ctr.get(field)
        if isinstance(probe, dict):
            _fill(probe, PROBE_DEFAULTS)
            if isinstance(probe.get("httpGet"), dict):
                _fill(probe["httpGet"], HTTP_GET_DEFAULTS)
    if ctr.get("resources") is None:
        ctr["resources"] = {}
    resources = ctr["resources"]
    # A limit without a request requests the limit (SetDefaults_Pod), so the pod's QoS is
    # what its author meant and requests <= limits holds.
    if isinstance(resources, dict) and isinstance(resources.get("limits"), dict):
        if resources.get("requests") is None:
            resources["requests"] = {}
        if isinstance(resources["requests"], dict):
            for name, value in resources["limits"].items():
                resources["requests"].setdefault(name, value)


def _pull_policy(image: str) -> str:
    """Always for ":latest" or no tag, else IfNotPresent (SetDefaults_Container)."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _fill(obj: dict, defaults: dict) -> None:
    """Set each absent field; an empty string also counts as unset for string fields, as
    Go's zero value does."""
    for field, value in defaults.items():
        current = obj.get(field)
        if current is None or (current == "" and isinstance(value, str)):
            obj[field] = value


def _absent(value: Any) -> bool:
    return value is None or value == ""


def _dicts(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# --- the checker: accumulates errors, type-checks on the way ----------------------------------

class _Checker:
    """Collects FieldErrors. The typed getters return the value when it has the right type and
    record an `Invalid value` (and return None) when not, so callers never see a wrong type."""

    def __init__(self, strict: bool):
        self.strict = strict
        self.errors: list[FieldError] = []

    def add(self, error: FieldError) -> None:
        self.errors.append(error)

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.add(invalid(path, value, detail))

    def obj(self, value: Any, path: str, kind: str = "", *, element: bool = False) -> dict | None:
        """An object of type `kind` (None if absent). List elements may not be null."""
        if value is None and not element:
            return None
        if not isinstance(value, dict):
            self.invalid(path, value, "must be an object")
            return None
        if kind:
            self.unknown_fields(value, path, kind)
            self.shapes(value, path, kind)
            self.enums(value, path, kind)
        return value

    def array(self, value: Any, path: str, of: str = "a list") -> list | None:
        if value is None:
            return None
        if not isinstance(value, list):
            self.invalid(path, value, f"must be {of}")
            return None
        return value

    def string(self, value: Any, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.invalid(path, value, "must be a string")
            return None
        return value

    def integer(self, value: Any, path: str) -> int | None:
        if value is None:
            return None
        if not _is_int(value):
            self.invalid(path, value, "must be an integer")
            return None
        return value

    def strings(self, value: Any, path: str) -> list[str] | None:
        """A list of strings; each bad element is reported at its index."""
        items = self.array(value, path, "a list of strings")
        if items is None:
            return None
        for i, item in enumerate(items):
            if not isinstance(item, str):
                self.invalid(index(path, i), item, "must be a string")
        return [s for s in items if isinstance(s, str)]

    def unknown_fields(self, obj: dict, path: str, kind: str) -> None:
        if not self.strict:
            return
        for field in obj:
            if field not in KNOWN_FIELDS[kind]:
                self.add(unknown_field(child(path, field)))

    def shapes(self, obj: dict, path: str, kind: str) -> None:
        for field, shape in SHAPES.get(kind, {}).items():
            value = obj.get(field)
            if value is not None:
                _SHAPE_CHECKS[shape](self, value, child(path, field))

    def enums(self, obj: dict, path: str, kind: str) -> None:
        for field, allowed in ENUMS.get(kind, {}).items():
            value = obj.get(field)
            if value == "":
                self.add(required(child(path, field)))
            elif value is not None and value not in allowed:
                self.add(not_supported(child(path, field), value, allowed))

    def each_obj(self, items: list, path: str, kind: str):
        """(index path, object) for every element of `items` that is an object of `kind`."""
        for i, item in enumerate(items):
            obj = self.obj(item, index(path, i), kind, element=True)
            if obj is not None:
                yield index(path, i), obj


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_SHAPE_CHECKS: dict[str, Callable[[_Checker, Any, str], Any]] = {
    STR: _Checker.string,
    INT: _Checker.integer,
    BOOL: lambda c, v, p: isinstance(v, bool) or c.invalid(p, v, "must be a boolean"),
    OBJ: _Checker.obj,
    LIST: _Checker.array,
    STRS: _Checker.strings,
}


# --- the pod --------------------------------------------------------------------------------------

def validate_pod(pod: dict, *, strict: bool = True) -> list[FieldError]:
    """Every reason `pod` is not a valid Pod for kubemu, as field errors (empty: valid)."""
    c = _Checker(strict)
    if not isinstance(pod, dict):
        c.invalid("", pod, "must be an object")
        return c.errors
    c.unknown_fields(pod, "", "Pod")
    for field, value in (("apiVersion", "v1"), ("kind", "Pod")):
        if pod.get(field) is None or pod.get(field) == "":
            c.add(required(field))
        elif pod[field] != value:
            c.add(not_supported(field, pod[field], (value,)))
    _metadata(c, pod.get("metadata"), "metadata")
    if pod.get("spec") is None:
        c.add(required("spec"))
    else:
        _spec(c, pod["spec"], "spec")
    c.obj(pod.get("status"), "status")
    return c.errors


def validate_pod_spec(spec: Any, path: str = "spec", *, strict: bool = True) -> list[FieldError]:
    """Every reason `spec` is not a valid pod spec, with paths under `path`."""
    c = _Checker(strict)
    _spec(c, {} if spec is None else spec, path)
    return c.errors


def validate_pod_template(template: Any, path: str = "spec.template", *,
                          strict: bool = True) -> list[FieldError]:
    """ValidatePodTemplateSpec: a template's labels and annotations, and its pod spec (an
    absent spec is an empty one: its containers are required). Other metadata is ignored, as
    Kubernetes ignores it in templates."""
    c = _Checker(strict)
    if template is None:
        template = {}
    if not isinstance(template, dict):
        c.invalid(path, template, "must be an object")
        return c.errors
    if strict:
        for field in template:
            if field not in ("metadata", "spec"):
                c.add(unknown_field(child(path, field)))
    meta = c.obj(template.get("metadata"), child(path, "metadata"), "ObjectMeta")
    if meta is not None:
        _labels(c, meta.get("labels"), child(child(path, "metadata"), "labels"))
        _annotations(c, meta.get("annotations"), child(child(path, "metadata"), "annotations"))
    spec = template.get("spec")
    _spec(c, {} if spec is None else spec, child(path, "spec"))
    return c.errors


def _metadata(c: _Checker, value: Any, path: str) -> None:
    meta = c.obj(value, path, "ObjectMeta")
    if meta is None:
        if value is None:
            c.add(required(child(path, "name"), "name or generateName is required"))
        return
    name = c.string(meta.get("name"), child(path, "name"))
    generate = c.string(meta.get("generateName"), child(path, "generateName"))
    if _absent(meta.get("name")) and _absent(meta.get("generateName")):
        c.add(required(child(path, "name"), "name or generateName is required"))
    if name:
        _name_rule(c, name, child(path, "name"), dns1123_subdomain_errors)
    if generate:
        # A prefix: the random suffix appended later makes a trailing dash legal.
        for msg in dns1123_subdomain_errors(generate.rstrip("-") or "a"):
            c.invalid(child(path, "generateName"), generate, msg)
    namespace = c.string(meta.get("namespace"), child(path, "namespace"))
    if namespace:
        _name_rule(c, namespace, child(path, "namespace"), dns1123_label_errors)
    _labels(c, meta.get("labels"), child(path, "labels"))
    _annotations(c, meta.get("annotations"), child(path, "annotations"))


def _name_rule(c: _Checker, value: str, path: str, rule: Callable[[str], list[str]]) -> None:
    for msg in rule(value):
        c.invalid(path, value, msg)


def _string_map(c: _Checker, value: Any, path: str):
    """(key, value) pairs of a map of strings; wrong types are reported, never yielded."""
    mapping = c.obj(value, path)
    for k, v in (mapping or {}).items():
        if not isinstance(k, str):
            c.invalid(path, k, "keys must be strings")
        elif not isinstance(v, str):
            c.invalid(key(path, k), v, "must be a string")
        else:
            yield k, v


def _labels(c: _Checker, value: Any, path: str) -> None:
    """Label-shaped maps (labels, nodeSelector): qualified-name keys, short simple values.
    Like Kubernetes, every complaint is reported at the map's path."""
    for k, v in _string_map(c, value, path):
        _name_rule(c, k, path, qualified_name_errors)
        for msg in label_value_errors(v):
            c.invalid(path, v, msg)


def _annotations(c: _Checker, value: Any, path: str) -> None:
    total = 0
    for k, v in _string_map(c, value, path):
        for msg in qualified_name_errors(k.lower()):
            c.invalid(path, k, msg)
        total += len(k.encode("utf-8", "surrogatepass")) + len(v.encode("utf-8", "surrogatepass"))
    if total > MAX_ANNOTATIONS_BYTES:
        c.add(too_long(path, MAX_ANNOTATIONS_BYTES))


# --- the spec ---------------------------------------------------------------------------------

def _spec(c: _Checker, value: Any, path: str) -> None:
    spec = c.obj(value, path, "PodSpec")
    if spec is None:
        return
    _all_containers(c, spec, path)
    grace = spec.get("terminationGracePeriodSeconds")
    if _is_int(grace) and grace < 0:
        c.invalid(child(path, "terminationGracePeriodSeconds"), grace,
                  "must be greater than or equal to 0")
    deadline = spec.get("activeDeadlineSeconds")
    if _is_int(deadline) and not 1 <= deadline <= 2**31 - 1:
        c.invalid(child(path, "activeDeadlineSeconds"), deadline,
                  "must be between 1 and 2147483647, inclusive")
    for field, rule in (("nodeName", dns1123_subdomain_errors),
                        ("schedulerName", dns1123_subdomain_errors),
                        ("serviceAccountName", dns1123_subdomain_errors),
                        ("hostname", dns1123_label_errors)):
        if isinstance(spec.get(field), str) and spec[field]:
            _name_rule(c, spec[field], child(path, field), rule)
    _labels(c, spec.get("nodeSelector"), child(path, "nodeSelector"))
    _tolerations(c, spec.get("tolerations"), child(path, "tolerations"))


def _all_containers(c: _Checker, spec: dict, path: str) -> None:
    """Init containers, then app containers; names are unique across both lists."""
    seen: set[str] = set()
    init = c.array(spec.get("initContainers"), child(path, "initContainers"))
    for ctr_path, ctr in c.each_obj(init or [], child(path, "initContainers"), "Container"):
        _container(c, ctr, ctr_path, init=True, seen=seen)
    field = child(path, "containers")
    if spec.get("containers") is None or spec["containers"] == []:
        c.add(required(field))
    containers = c.array(spec.get("containers"), field)
    for ctr_path, ctr in c.each_obj(containers or [], field, "Container"):
        _container(c, ctr, ctr_path, init=False, seen=seen)


def _container(c: _Checker, ctr: dict, path: str, *, init: bool, seen: set[str]) -> None:
    name_path = child(path, "name")
    name = c.string(ctr.get("name"), name_path)
    if _absent(ctr.get("name")):
        c.add(required(name_path))
    elif name is not None:
        _name_rule(c, name, name_path, dns1123_label_errors)
        if name in seen:
            c.add(duplicate(name_path, name))
        seen.add(name)
    c.strings(ctr.get("command"), child(path, "command"))
    # Kubernetes requires an image; kubemu also runs a bare command. Whether an image can be
    # had is the kubelet's to find out (its image catalog), as a registry's is in Kubernetes.
    if _absent(ctr.get("image")) and (ctr.get("command") is None or ctr["command"] == []):
        c.add(required(child(path, "image"), "a container needs an image or, in kubemu, a command"))
    _env(c, ctr, path)
    port_names = _ports(c, ctr.get("ports"), child(path, "ports"))
    _resources(c, ctr.get("resources"), child(path, "resources"))
    for field, kind in PROBES.items():
        if ctr.get(field) is None:
            continue
        if init:
            c.add(forbidden(child(path, field), "may not be set for init containers"))
        else:
            _probe(c, ctr[field], child(path, field), kind, port_names)
    if ctr.get("restartPolicy") is not None:
        c.add(forbidden(child(path, "restartPolicy"),
                        "kubemu does not support sidecar containers" if init
                        else "may not be set for non-init containers"))


def _env(c: _Checker, ctr: dict, path: str) -> None:
    if ctr.get("envFrom"):
        c.add(forbidden(child(path, "envFrom"),
                        "kubemu has no ConfigMaps or Secrets to read from: use env with value"))
    env_path = child(path, "env")
    for var_path, var in c.each_obj(c.array(ctr.get("env"), env_path) or [], env_path, "EnvVar"):
        name_path = child(var_path, "name")
        name = c.string(var.get("name"), name_path)
        if _absent(var.get("name")):
            c.add(required(name_path))
        elif name is not None:
            _name_rule(c, name, name_path, env_var_name_errors)
        if var.get("valueFrom") is not None:
            c.add(forbidden(child(var_path, "valueFrom"),
                            "kubemu does not support valueFrom: use value"))


def _ports(c: _Checker, value: Any, path: str) -> set[str]:
    """Validate a container's ports; return the names of its well-formed named ports."""
    names: set[str] = set()
    seen: set[str] = set()
    for port_path, port in c.each_obj(c.array(value, path) or [], path, "ContainerPort"):
        number = c.integer(port.get("containerPort"), child(port_path, "containerPort"))
        if number == 0 or port.get("containerPort") is None:  # Go's zero value: unset
            c.add(required(child(port_path, "containerPort")))
        elif number is not None:
            _port_number(c, number, child(port_path, "containerPort"))
        host = c.integer(port.get("hostPort"), child(port_path, "hostPort"))
        if host:
            _port_number(c, host, child(port_path, "hostPort"))
        name = c.string(port.get("name"), child(port_path, "name"))
        if name:
            _name_rule(c, name, child(port_path, "name"), port_name_errors)
            if name in seen:
                c.add(duplicate(child(port_path, "name"), name))
            elif not port_name_errors(name):
                names.add(name)
            seen.add(name)
    return names


def _port_number(c: _Checker, port: int, path: str) -> None:
    if not 1 <= port <= 65535:
        c.invalid(path, port, "must be between 1 and 65535, inclusive")


def _resources(c: _Checker, value: Any, path: str) -> None:
    res = c.obj(value, path, "ResourceRequirements")
    if res is None:
        return
    requests = _quantities(c, res.get("requests"), child(path, "requests"))
    limits = _quantities(c, res.get("limits"), child(path, "limits"))
    for name, (request, written) in requests.items():
        if name in limits and request > limits[name][0]:
            # Both quoted in canonical form ("2000m" -> "2"), as Quantity.String() does.
            limit = quantity.canonical(limits[name][1])
            c.invalid(child(path, "requests"), quantity.canonical(written),
                      f"must be less than or equal to {name} limit of {limit}")


def _quantities(c: _Checker, value: Any, path: str) -> dict[str, tuple[Any, Any]]:
    """resource name -> (value, as written), for the well-formed entries of requests or limits."""
    good = {}
    for name, q in (c.obj(value, path) or {}).items():
        q_path = key(path, name)
        if name not in RESOURCES:
            c.add(not_supported(q_path, name, RESOURCES))
            continue
        if not isinstance(q, (str, int, float)) or isinstance(q, bool):
            c.invalid(q_path, q, "must be a string or a number")
            continue
        try:
            parsed = quantity.parse_quantity(q)
        except ValueError as e:
            c.invalid(q_path, q, str(e))
            continue
        if parsed < 0:
            c.invalid(q_path, quantity.canonical(q), "must be greater than or equal to 0")
            continue
        good[name] = (parsed, q)
    return good


# --- probes -------------------------------------------------------------------------------------

def _probe(c: _Checker, value: Any, path: str, kind: str, port_names: set[str]) -> None:
    probe = c.obj(value, path, "Probe")
    if probe is None:
        return
    handlers = 0
    for field, handler_kind in HANDLERS.items():
        if probe.get(field) is None:
            continue
        if handlers:
            c.add(forbidden(child(path, field), "may not specify more than 1 handler type"))
            continue
        handlers += 1
        _HANDLER_CHECKS[field](c, c.obj(probe[field], child(path, field), handler_kind),
                               child(path, field), port_names)
    if not handlers:
        c.add(required(path, "must specify a handler type"))
    for field, minimum in PROBE_MINIMUMS.items():
        number = c.integer(probe.get(field), child(path, field))
        if number is not None and number < minimum:
            c.invalid(child(path, field), number, f"must be greater than or equal to {minimum}")
    threshold = probe.get("successThreshold")
    if kind in ("liveness", "startup") and _is_int(threshold) and threshold > 1:
        c.invalid(child(path, "successThreshold"), threshold, "must be 1")
    grace = c.integer(probe.get("terminationGracePeriodSeconds"),
                      child(path, "terminationGracePeriodSeconds"))
    if grace is not None and grace <= 0:
        c.invalid(child(path, "terminationGracePeriodSeconds"), grace, "must be greater than 0")


def _exec(c: _Checker, action: dict | None, path: str, port_names: set[str]) -> None:
    if action is None:
        return
    c.strings(action.get("command"), child(path, "command"))
    if action.get("command") is None or action["command"] == []:
        c.add(required(child(path, "command")))


def _http_get(c: _Checker, action: dict | None, path: str, port_names: set[str]) -> None:
    if action is None:
        return
    if action.get("path") == "":
        c.add(required(child(path, "path")))
    _probe_port(c, action, path, port_names)
    headers_path = child(path, "httpHeaders")
    headers = c.array(action.get("httpHeaders"), headers_path) or []
    for header_path, header in c.each_obj(headers, headers_path, "HTTPHeader"):
        name = header.get("name")
        if _absent(name):
            c.add(required(child(header_path, "name")))
        elif isinstance(name, str):
            _name_rule(c, name, child(header_path, "name"), http_header_name_errors)


def _tcp_socket(c: _Checker, action: dict | None, path: str, port_names: set[str]) -> None:
    if action is not None:
        _probe_port(c, action, path, port_names)


def _grpc(c: _Checker, action: dict | None, path: str, port_names: set[str]) -> None:
    c.add(forbidden(path, "kubemu probes with exec, httpGet or tcpSocket only"))


_HANDLER_CHECKS = {"exec": _exec, "httpGet": _http_get, "tcpSocket": _tcp_socket, "grpc": _grpc}


def _probe_port(c: _Checker, action: dict, path: str, port_names: set[str]) -> None:
    """A port number, or the name of one of the container's ports (the kubelet resolves it)."""
    port, port_path = action.get("port"), child(path, "port")
    if port is None:
        c.add(required(port_path))
    elif _is_int(port):
        _port_number(c, port, port_path)
    elif not isinstance(port, str):
        c.invalid(port_path, port, "must be a port number or a port name")
    elif port_name_errors(port):
        _name_rule(c, port, port_path, port_name_errors)
    elif port not in port_names:
        c.invalid(port_path, port, "must be the name of one of the container's ports")


# --- tolerations ------------------------------------------------------------------------------

def _tolerations(c: _Checker, value: Any, path: str) -> None:
    for t_path, t in c.each_obj(c.array(value, path) or [], path, "Toleration"):
        fields = {f: t.get(f) if isinstance(t.get(f), str) else "" for f in
                  ("key", "operator", "value", "effect")}
        tkey, op, val, effect = fields["key"], fields["operator"], fields["value"], fields["effect"]
        if tkey:
            _name_rule(c, tkey, child(t_path, "key"), qualified_name_errors)
        elif op != "Exists":
            c.invalid(child(t_path, "operator"), op, "operator must be Exists when `key` is "
                      "empty, which means \"match all values and all keys\"")
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            c.invalid(child(t_path, "effect"), effect,
                      "effect must be 'NoExecute' when `tolerationSeconds` is set")
        if op in ("", "Equal"):
            for msg in label_value_errors(val):
                c.invalid(child(t_path, "operator"), val, msg)
        elif op == "Exists":
            if val:
                c.invalid(child(t_path, "operator"), t,
                          "value must be empty when `operator` is 'Exists'")
        else:
            c.add(not_supported(child(t_path, "operator"), op, TOLERATION_OPERATORS))
        if effect and effect not in TAINT_EFFECTS:
            c.add(not_supported(child(t_path, "effect"), effect, TAINT_EFFECTS))


# --- name rules (k8s.io/apimachinery/pkg/util/validation), with Kubernetes' messages ---------

def _regex_error(msg: str, pattern: str, *examples: str) -> str:
    """RegexError: the message, the examples, the regex (the odd spacing is Kubernetes')."""
    if not examples:
        return f"{msg} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{pattern}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = DNS1123_LABEL + r"(\." + DNS1123_LABEL + ")*"
QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE = "(" + QUALIFIED_NAME + ")?"
ENV_VAR_NAME = "[-._a-zA-Z][-._a-zA-Z0-9]*"
HTTP_HEADER_NAME = "[-A-Za-z0-9]+"

_DNS1123_LABEL_MSG = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character", DNS1123_LABEL, "my-name", "123-abc")
_DNS1123_SUBDOMAIN_MSG = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character", DNS1123_SUBDOMAIN, "example.com")
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start "
                       "and end with an alphanumeric character")
_LABEL_VALUE_MSG = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
    "'.', and must start and end with an alphanumeric character", LABEL_VALUE,
    "MyValue", "my_value", "12345")
_ENV_VAR_NAME_MSG = _regex_error(
    "a valid environment variable name must consist of alphabetic characters, digits, '_', "
    "'-', or '.', and must not start with a digit", ENV_VAR_NAME,
    "my.env-name", "MY_ENV.NAME", "MyEnvName1")
_HTTP_HEADER_NAME_MSG = _regex_error(
    "a valid HTTP header must consist of alphanumeric characters or '-'", HTTP_HEADER_NAME,
    "X-Header-Name")


def _matches(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def dns1123_label_errors(value: str) -> list[str]:
    errors = [_max_len(63)] if len(value) > 63 else []
    return errors + ([] if _matches(DNS1123_LABEL, value) else [_DNS1123_LABEL_MSG])


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors = [_max_len(253)] if len(value) > 253 else []
    return errors + ([] if _matches(DNS1123_SUBDOMAIN, value) else [_DNS1123_SUBDOMAIN_MSG])


def qualified_name_errors(value: str) -> list[str]:
    """A label or annotation key: `[prefix/]name`, the prefix a DNS subdomain."""
    parts = value.split("/")
    if len(parts) > 2:
        return ["a qualified name " + _regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME, "MyName",
                                                   "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    errors = []
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += ["prefix part " + m for m in dns1123_subdomain_errors(prefix)]
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part " + _max_len(63))
    if name and not _matches(QUALIFIED_NAME, name):
        errors.append("name part " + _regex_error(_QUALIFIED_NAME_MSG, QUALIFIED_NAME, "MyName",
                                                  "my.name", "123-abc"))
    return errors


def label_value_errors(value: str) -> list[str]:
    errors = [_max_len(63)] if len(value) > 63 else []
    return errors + ([] if _matches(LABEL_VALUE, value) else [_LABEL_VALUE_MSG])


def env_var_name_errors(value: str) -> list[str]:
    errors = [] if _matches(ENV_VAR_NAME, value) else [_ENV_VAR_NAME_MSG]
    if value == ".":
        errors.append("must not be '.'")
    elif value == "..":
        errors.append("must not be '..'")
    elif value.startswith(".."):
        errors.append("must not start with '..'")
    return errors


def port_name_errors(value: str) -> list[str]:
    """IANA_SVC_NAME: at most 15 of [-a-z0-9], at least one letter, no '--', no edge '-'."""
    errors = [_max_len(15)] if len(value) > 15 else []
    if not _matches("[-a-z0-9]+", value):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", value):
        errors.append("must contain at least one letter (a-z)")
    if "--" in value:
        errors.append("must not contain consecutive hyphens")
    if value.startswith("-") or value.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def http_header_name_errors(value: str) -> list[str]:
    return [] if _matches(HTTP_HEADER_NAME, value) else [_HTTP_HEADER_NAME_MSG]
