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
  * volumes: emptyDir, hostPath, configMap, secret, downwardAPI, projected (ConfigMap,
    Secret, downward API and ServiceAccount token sources) and persistentVolumeClaim are
    validated as Kubernetes does; every other volume type (nfs, csi, ...) is Forbidden;
  * gRPC probes are Forbidden: the kubelet probes with exec, httpGet and tcpSocket only;
  * probes and `restartPolicy` on init containers are Forbidden: init containers run once to
    completion (no sidecars);
  * resources: only cpu and memory;
  * strict mode (the default) reports fields no Pod has as `Unknown field`, at any level kubemu
    validates (pod, metadata, spec, containers, ports, env and its sources, resources, probes
    and their handlers, tolerations, volumes and their mounts). The known-field tables list the common Kubernetes fields too, even
    those kubemu ignores (securityContext, affinity, ...), so real manifests pass. Objects
    kubemu does not look into (affinity, ...) are only checked for their type.

Validation accepts both raw and defaulted pods: a field that defaulting would fill may be absent.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from . import quantity
from .fielderrors import (FieldError, child, duplicate, forbidden, index, invalid, key,
                          not_found, not_supported, required, too_long, unknown_field)
from .patch import json_copy

# --- what a Pod may contain (strict mode) ----------------------------------------------------

# Every volume source a Kubernetes Volume may have, in the order ValidatePodSpec looks at them;
# kubemu runs SUPPORTED_VOLUMES and forbids the others.
VOLUME_TYPES = ("emptyDir", "hostPath", "gitRepo", "gcePersistentDisk", "awsElasticBlockStore",
                "secret", "nfs", "iscsi", "glusterfs", "flocker", "persistentVolumeClaim", "rbd",
                "cinder", "cephfs", "quobyte", "downwardAPI", "fc", "flexVolume", "configMap",
                "azureFile", "vsphereVolume", "photonPersistentDisk", "portworxVolume",
                "azureDisk", "storageos", "projected", "scaleIO", "csi", "ephemeral", "image")
SUPPORTED_VOLUMES = ("emptyDir", "hostPath", "configMap", "secret", "downwardAPI", "projected",
                     "persistentVolumeClaim")

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
    "EnvVarSource": "fieldRef resourceFieldRef configMapKeyRef secretKeyRef",
    "ObjectFieldSelector": "apiVersion fieldPath",
    "ResourceFieldSelector": "containerName resource divisor",
    "ConfigMapKeySelector": "name key optional",
    "SecretKeySelector": "name key optional",
    "EnvFromSource": "prefix configMapRef secretRef",
    "ConfigMapEnvSource": "name optional",
    "SecretEnvSource": "name optional",
    "VolumeMount": """name readOnly recursiveReadOnly mountPath subPath mountPropagation
        subPathExpr""",
    "Volume": "name " + " ".join(VOLUME_TYPES),
    "EmptyDirVolumeSource": "medium sizeLimit",
    "HostPathVolumeSource": "path type",
    "PersistentVolumeClaimVolumeSource": "claimName readOnly",
    "ConfigMapVolumeSource": "name items defaultMode optional",
    "SecretVolumeSource": "secretName items defaultMode optional",
    "KeyToPath": "key path mode",
    "DownwardAPIVolumeSource": "items defaultMode",
    "DownwardAPIVolumeFile": "path fieldRef resourceFieldRef mode",
    "ProjectedVolumeSource": "sources defaultMode",
    "VolumeProjection": "secret downwardAPI configMap serviceAccountToken clusterTrustBundle",
    "SecretProjection": "name items optional",
    "ConfigMapProjection": "name items optional",
    "DownwardAPIProjection": "items",
    "ServiceAccountTokenProjection": "audience expirationSeconds path",
}.items()}

# --- shapes of the fields kubemu only type-checks ----------------------------------------------

STR, INT, BOOL, OBJ, LIST, STRS = "string", "integer", "boolean", "object", "list", "strings"

SHAPES: dict[str, dict[str, str]] = {
    "ObjectMeta": {"uid": STR, "resourceVersion": STR, "generation": INT,
                   "creationTimestamp": STR, "deletionTimestamp": STR,
                   "deletionGracePeriodSeconds": INT, "finalizers": STRS,
                   "ownerReferences": LIST, "managedFields": LIST, "selfLink": STR},
    "PodSpec": {"ephemeralContainers": LIST, "serviceAccountName": STR,
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
                  "volumeDevices": LIST, "securityContext": OBJ, "lifecycle": OBJ,
                  "resizePolicy": LIST},
    "ContainerPort": {"hostIP": STR},
    "EnvVar": {"value": STR},
    "ResourceRequirements": {"claims": LIST},
    "HTTPGetAction": {"host": STR, "path": STR},
    "HTTPHeader": {"name": STR, "value": STR},
    "TCPSocketAction": {"host": STR},
    "Toleration": {"key": STR, "operator": STR, "value": STR, "effect": STR,
                   "tolerationSeconds": INT},
    "ObjectFieldSelector": {"apiVersion": STR, "fieldPath": STR},
    "ResourceFieldSelector": {"containerName": STR, "resource": STR},
    "ConfigMapKeySelector": {"name": STR, "key": STR, "optional": BOOL},
    "SecretKeySelector": {"name": STR, "key": STR, "optional": BOOL},
    "EnvFromSource": {"prefix": STR},
    "ConfigMapEnvSource": {"name": STR, "optional": BOOL},
    "SecretEnvSource": {"name": STR, "optional": BOOL},
    "VolumeMount": {"name": STR, "readOnly": BOOL, "recursiveReadOnly": STR, "mountPath": STR,
                    "subPath": STR, "mountPropagation": STR, "subPathExpr": STR},
    "Volume": {"name": STR},
    "EmptyDirVolumeSource": {"medium": STR},
    "HostPathVolumeSource": {"path": STR, "type": STR},
    "PersistentVolumeClaimVolumeSource": {"claimName": STR, "readOnly": BOOL},
    "ConfigMapVolumeSource": {"name": STR, "items": LIST, "defaultMode": INT, "optional": BOOL},
    "SecretVolumeSource": {"secretName": STR, "items": LIST, "defaultMode": INT,
                           "optional": BOOL},
    "KeyToPath": {"key": STR, "path": STR, "mode": INT},
    "DownwardAPIVolumeSource": {"items": LIST, "defaultMode": INT},
    "DownwardAPIVolumeFile": {"path": STR, "mode": INT},
    "ProjectedVolumeSource": {"sources": LIST, "defaultMode": INT},
    "SecretProjection": {"name": STR, "items": LIST, "optional": BOOL},
    "ConfigMapProjection": {"name": STR, "items": LIST, "optional": BOOL},
    "DownwardAPIProjection": {"items": LIST},
    "ServiceAccountTokenProjection": {"audience": STR, "expirationSeconds": INT, "path": STR},
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
    "EnvVarSource": """fieldRef:ObjectFieldSelector resourceFieldRef:ResourceFieldSelector
        configMapKeyRef:ConfigMapKeySelector secretKeyRef:SecretKeySelector""",
    "ObjectFieldSelector": "apiVersion:string fieldPath:string",
    "ResourceFieldSelector": "containerName:string resource:string divisor:Quantity",
    "ConfigMapKeySelector": "name:string key:string optional:boolean",
    "SecretKeySelector": "name:string key:string optional:boolean",
    "EnvFromSource": "prefix:string configMapRef:ConfigMapEnvSource secretRef:SecretEnvSource",
    "ConfigMapEnvSource": "name:string optional:boolean",
    "SecretEnvSource": "name:string optional:boolean",
    "VolumeMount": """name:string readOnly:boolean recursiveReadOnly:string mountPath:string
        subPath:string mountPropagation:string subPathExpr:string""",
    "EmptyDirVolumeSource": "medium:string sizeLimit:Quantity",
    "HostPathVolumeSource": "path:string type:string",
    "PersistentVolumeClaimVolumeSource": "claimName:string readOnly:boolean",
    "ConfigMapVolumeSource": "name:string items:[]KeyToPath defaultMode:integer optional:boolean",
    "SecretVolumeSource": """secretName:string items:[]KeyToPath defaultMode:integer
        optional:boolean""",
    "KeyToPath": "key:string path:string mode:integer",
    "DownwardAPIVolumeSource": "items:[]DownwardAPIVolumeFile defaultMode:integer",
    "DownwardAPIVolumeFile": """path:string fieldRef:ObjectFieldSelector
        resourceFieldRef:ResourceFieldSelector mode:integer""",
    "ProjectedVolumeSource": "sources:[]VolumeProjection defaultMode:integer",
    "VolumeProjection": """secret:SecretProjection downwardAPI:DownwardAPIProjection
        configMap:ConfigMapProjection serviceAccountToken:ServiceAccountTokenProjection
        clusterTrustBundle:ClusterTrustBundleProjection""",
    "SecretProjection": "name:string items:[]KeyToPath optional:boolean",
    "ConfigMapProjection": "name:string items:[]KeyToPath optional:boolean",
    "DownwardAPIProjection": "items:[]DownwardAPIVolumeFile",
    "ServiceAccountTokenProjection": "audience:string expirationSeconds:integer path:string",
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

_VOLUME_SOURCE_TYPES = {"nfs": "NFS", "iscsi": "ISCSI", "rbd": "RBD", "fc": "FC", "csi": "CSI",
                        "cephfs": "CephFS", "scaleIO": "ScaleIO", "storageos": "StorageOS",
                        "gcePersistentDisk": "GCEPersistentDisk",
                        "awsElasticBlockStore": "AWSElasticBlockStore",
                        "portworxVolume": "Portworx", "flexVolume": "Flex",
                        "vsphereVolume": "VsphereVirtualDisk"}
TYPES["Volume"] = {"name": "string", **{
    t: _VOLUME_SOURCE_TYPES.get(t, t[0].upper() + t[1:]) + "VolumeSource" for t in VOLUME_TYPES}}

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
DEFAULT_MODE = 0o644  # a projected file's mode (ConfigMap, Secret, downward API, projected)
TOKEN_EXPIRATION_DEFAULT = 3600


def default_pod(pod: dict, *, with_status: bool = False) -> dict:
    """A defaulted deep copy of `pod`. Only fields that are absent (or null, or an empty string
    where Go's zero value means "unset") are filled; parts of the wrong type are left for
    validation to report. `with_status` also gives an empty status the phase Pending."""
    out = json_copy(pod)  # a decoded JSON value: no cycles or shared parts for deepcopy's memo
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
        for volume in _dicts(spec.get("volumes")):
            _default_volume(volume)


def _default_volume(volume: dict) -> None:
    """SetDefaults_Volume and its sources': a volume without a source is an emptyDir; projected
    files are 0644; field selectors read v1; a token lives an hour."""
    if all(volume.get(t) is None for t in VOLUME_TYPES):
        volume["emptyDir"] = {}
    if isinstance(volume.get("hostPath"), dict):
        _fill(volume["hostPath"], {"type": ""})
    for field in ("configMap", "secret", "downwardAPI", "projected"):
        if isinstance(volume.get(field), dict):
            _fill(volume[field], {"defaultMode": DEFAULT_MODE})
    _default_downward_items(volume.get("downwardAPI"))
    for source in _dicts((volume.get("projected") or {}).get("sources")
                         if isinstance(volume.get("projected"), dict) else None):
        _default_downward_items(source.get("downwardAPI"))
        if isinstance(source.get("serviceAccountToken"), dict):
            _fill(source["serviceAccountToken"], {"expirationSeconds": TOKEN_EXPIRATION_DEFAULT})


def _default_downward_items(downward: Any) -> None:
    if isinstance(downward, dict):
        for item in _dicts(downward.get("items")):
            if isinstance(item.get("fieldRef"), dict):
                _fill(item["fieldRef"], {"apiVersion": "v1"})


def _default_container(ctr: dict) -> None:
    _fill(ctr, CONTAINER_DEFAULTS)
    image = ctr.get("image")
    if isinstance(image, str) and image:
        _fill(ctr, {"imagePullPolicy": _pull_policy(image)})
    for port in _dicts(ctr.get("ports")):
        _fill(port, PORT_DEFAULTS)
    for var in _dicts(ctr.get("env")):
        source = var.get("valueFrom")
        if isinstance(source, dict) and isinstance(source.get("fieldRef"), dict):
            _fill(source["fieldRef"], {"apiVersion": "v1"})
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
        if self.strict:
            self.fields_outside(obj, path, KNOWN_FIELDS[kind])

    def fields_outside(self, obj: dict, path: str, known: frozenset[str]) -> None:
        """An unknown-field error for each field of `obj` not in `known`, in `obj`'s order."""
        if known.issuperset(obj):  # the usual case, in one C call: this runs for every nested object
            return
        for field in obj:
            if field not in known:
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

def validate_pod(pod: dict, *, strict: bool = True, spec: bool = True) -> list[FieldError]:
    """Every reason `pod` is not a valid Pod for kubemu, as field errors (empty: valid).
    `spec=False`: all but the spec, for a status update, whose spec is the stored one (kube's
    ValidatePodStatusUpdate checks metadata and status only)."""
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
    if spec and pod.get("spec") is None:
        c.add(required("spec"))
    elif spec:
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
    volumes = _volumes(c, spec.get("volumes"), child(path, "volumes"))
    _all_containers(c, spec, path, volumes)
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


def _all_containers(c: _Checker, spec: dict, path: str, volumes: set[str] | None) -> None:
    """Init containers, then app containers; names are unique across both lists."""
    seen: set[str] = set()
    init = c.array(spec.get("initContainers"), child(path, "initContainers"))
    for ctr_path, ctr in c.each_obj(init or [], child(path, "initContainers"), "Container"):
        _container(c, ctr, ctr_path, init=True, seen=seen, volumes=volumes)
    field = child(path, "containers")
    if spec.get("containers") is None or spec["containers"] == []:
        c.add(required(field))
    containers = c.array(spec.get("containers"), field)
    for ctr_path, ctr in c.each_obj(containers or [], field, "Container"):
        _container(c, ctr, ctr_path, init=False, seen=seen, volumes=volumes)


def _container(c: _Checker, ctr: dict, path: str, *, init: bool, seen: set[str],
               volumes: set[str] | None) -> None:
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
    security = ctr.get("securityContext")
    privileged = isinstance(security, dict) and security.get("privileged") is True
    _volume_mounts(c, ctr.get("volumeMounts"), child(path, "volumeMounts"), volumes, privileged)
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
    _env_from(c, ctr.get("envFrom"), child(path, "envFrom"))
    env_path = child(path, "env")
    for var_path, var in c.each_obj(c.array(ctr.get("env"), env_path) or [], env_path, "EnvVar"):
        name_path = child(var_path, "name")
        name = c.string(var.get("name"), name_path)
        if _absent(var.get("name")):
            c.add(required(name_path))
        elif name is not None:
            _name_rule(c, name, name_path, env_var_name_errors)
        _value_from(c, var, child(var_path, "valueFrom"))


def _value_from(c: _Checker, var: dict, path: str) -> None:
    """validateEnvVarValueFrom: exactly one source, and no `value` beside it."""
    source = c.obj(var.get("valueFrom"), path, "EnvVarSource")
    if source is None:
        return
    checks = (("fieldRef", lambda v, p: _field_selector(c, v, p, ENV_FIELD_PATHS)),
              ("resourceFieldRef", lambda v, p: _resource_selector(c, v, p, volume=False)),
              ("configMapKeyRef", lambda v, p: _key_selector(c, v, p, "ConfigMapKeySelector")),
              ("secretKeyRef", lambda v, p: _key_selector(c, v, p, "SecretKeySelector")))
    sources = 0
    for field, check in checks:
        if source.get(field) is not None:
            sources += 1
            check(source[field], child(path, field))
    if not sources:
        c.invalid(path, "", "must specify one of: `fieldRef`, `resourceFieldRef`, "
                  "`configMapKeyRef` or `secretKeyRef`")
    elif var.get("value"):
        c.invalid(path, "", "may not be specified when `value` is not empty")
    elif sources > 1:
        c.invalid(path, "", "may not have more than one field specified at a time")


def _env_from(c: _Checker, value: Any, path: str) -> None:
    """ValidateEnvFrom. Like Kubernetes, a wrong number of sources is reported at the list."""
    for src_path, src in c.each_obj(c.array(value, path) or [], path, "EnvFromSource"):
        prefix = src.get("prefix")
        if isinstance(prefix, str) and prefix:
            _name_rule(c, prefix, child(src_path, "prefix"), env_var_name_errors)
        sources = 0
        for field, kind in (("configMapRef", "ConfigMapEnvSource"),
                            ("secretRef", "SecretEnvSource")):
            if src.get(field) is None:
                continue
            sources += 1
            ref = c.obj(src[field], child(src_path, field), kind)
            if ref is None:
                continue
            name_path = child(child(src_path, field), "name")
            if _absent(ref.get("name")):
                c.add(required(name_path))
            elif isinstance(ref["name"], str):
                # a name checked as a prefix (ValidateConfigMapName(name, true))
                masked = ref["name"][:-1] + "a" if ref["name"].endswith("-") else ref["name"]
                for msg in dns1123_subdomain_errors(masked):
                    c.invalid(name_path, ref["name"], msg)
        if not sources:
            c.invalid(path, "", "must specify one of: `configMapRef` or `secretRef`")
        elif sources > 1:
            c.invalid(path, "", "may not have more than one field specified at a time")


def _key_selector(c: _Checker, value: Any, path: str, kind: str) -> None:
    """validateConfigMapKeySelector / validateSecretKeySelector."""
    from .configobjects import config_key_errors  # it imports this module
    sel = c.obj(value, path, kind)
    if sel is None:
        return
    name = sel.get("name")
    if name is None or isinstance(name, str):
        _name_rule(c, name or "", child(path, "name"), dns1123_subdomain_errors)
    k = sel.get("key")
    if _absent(k):
        c.add(required(child(path, "key")))
    elif isinstance(k, str):
        _name_rule(c, k, child(path, "key"), config_key_errors)


# --- the downward API (fieldRef, resourceFieldRef) --------------------------------------------

# The pod fields a v1 downward API knows (ConvertDownwardAPIFieldLabel) ...
POD_FIELD_LABELS = frozenset((
    "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
    "metadata.uid", "spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName",
    "spec.schedulerName", "status.phase", "status.hostIP", "status.hostIPs", "status.podIP",
    "status.podIPs"))
# ... those an env var may read, and those a downwardAPI volume file may (subscripted labels
# and annotations, metadata.labels['x'], are allowed in both).
ENV_FIELD_PATHS = frozenset((
    "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
    "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP",
    "status.podIPs"))
VOLUME_FIELD_PATHS = frozenset((
    "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace",
    "metadata.uid"))
SUBSCRIPTED_FIELDS = ("metadata.annotations", "metadata.labels")
RESOURCE_FIELDS = ("limits.cpu", "limits.ephemeral-storage", "limits.memory", "requests.cpu",
                   "requests.ephemeral-storage", "requests.memory")
HUGEPAGES_FIELD_PREFIXES = ("limits.hugepages-", "requests.hugepages-")
CPU_DIVISORS = ("1m", "1")
MEMORY_DIVISORS = ("1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi",
                   "1Ei")
_DIVISOR_MSGS = {
    "cpu": "only divisor's values 1m and 1 are supported with the cpu resource",
    "memory": "only divisor's values " + ", ".join(MEMORY_DIVISORS)
              + " are supported with the memory resource",
    "ephemeral-storage": "only divisor's values " + ", ".join(MEMORY_DIVISORS)
                         + " are supported with the local ephemeral storage resource",
}


def split_subscript(field_path: str) -> tuple[str, str] | None:
    """fieldpath.SplitMaybeSubscriptedPath: "metadata.labels['app']" -> ("metadata.labels",
    "app"); None when the path has no subscript."""
    if not field_path.endswith("']"):
        return None
    base, sep, sub = field_path[:-2].partition("['")
    return (base, sub) if sep and base else None


def _field_selector(c: _Checker, value: Any, path: str, expressions: frozenset[str]) -> None:
    """validateObjectFieldSelector (an absent apiVersion is the v1 defaulting gives it)."""
    sel = c.obj(value, path, "ObjectFieldSelector")
    if sel is None:
        return
    version, field_path = sel.get("apiVersion") or "v1", sel.get("fieldPath")
    fp_path = child(path, "fieldPath")
    if not isinstance(version, str) or not isinstance(field_path, (str, type(None))):
        return  # the shape check said so
    if not field_path:
        c.add(required(fp_path))
        return
    if version != "v1":
        c.invalid(fp_path, field_path,
                  f"error converting fieldPath: unsupported pod version: {version}")
        return
    subscripted = split_subscript(field_path)
    if subscripted is not None:
        base, sub = subscripted
        if base not in SUBSCRIPTED_FIELDS:
            c.invalid(fp_path, field_path, "error converting fieldPath: field label does not "
                      f"support subscript: {field_path}")
        else:
            _name_rule(c, sub.lower() if base == "metadata.annotations" else sub, path,
                       qualified_name_errors)
    elif field_path not in POD_FIELD_LABELS:
        c.invalid(fp_path, field_path,
                  f"error converting fieldPath: field label not supported: {field_path}")
    elif field_path not in expressions:
        c.add(not_supported(fp_path, field_path, sorted(expressions)))


def _resource_selector(c: _Checker, value: Any, path: str, *, volume: bool) -> None:
    """validateContainerResourceFieldSelector: a volume file names its container."""
    sel = c.obj(value, path, "ResourceFieldSelector")
    if sel is None:
        return
    resource = sel.get("resource") if isinstance(sel.get("resource"), str) else ""
    if volume and _absent(sel.get("containerName")):
        c.add(required(child(path, "containerName")))
    elif not resource:
        c.add(required(child(path, "resource")))
    elif resource not in RESOURCE_FIELDS and not resource.startswith(HUGEPAGES_FIELD_PREFIXES):
        c.add(not_supported(child(path, "resource"), resource, RESOURCE_FIELDS))
    divisor = sel.get("divisor")
    if divisor is None:
        return
    try:
        if isinstance(divisor, bool) or not isinstance(divisor, (str, int, float)):
            raise ValueError("must be a string or a number")
        zero = quantity.parse_quantity(divisor) == 0
    except ValueError as e:
        c.invalid(child(path, "divisor"), divisor, str(e))
        return
    kind = resource.partition(".")[2]
    if zero or kind not in _DIVISOR_MSGS:
        return  # a zero divisor is an unset one
    allowed = CPU_DIVISORS if kind == "cpu" else MEMORY_DIVISORS
    if quantity.canonical(divisor) not in allowed:
        c.invalid(child(path, "divisor"), resource, _DIVISOR_MSGS[kind])


# --- volumes and their mounts (ValidateVolumes, ValidateVolumeMounts) ---------------------------

FILE_MODE_MSG = "must be a number between 0 and 0777 (octal), both inclusive"
# A second volume type is reported at these paths (sic: kube-apiserver's spelling).
_EXTRA_TYPE_PATHS = {"downwardAPI": "downwarAPI", "cephfs": "cephFS"}
MOUNT_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")
RECURSIVE_READ_ONLY = ("Disabled", "Enabled", "IfPossible")
HOST_PATH_TYPES = ("", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File",
                   "FileOrCreate", "Socket")


def _volumes(c: _Checker, value: Any, path: str) -> set[str] | None:
    """The names of the valid volumes (None when `volumes` is not even a list, so that mounts
    are not all reported as naming no volume)."""
    items = c.array(value, path)
    if items is None:
        return None if value is not None else set()
    names: set[str] = set()
    for vol_path, vol in c.each_obj(items, path, "Volume"):
        before = len(c.errors)
        _volume_source(c, vol, vol_path)
        name_path = child(vol_path, "name")
        name = c.string(vol.get("name"), name_path)
        if _absent(vol.get("name")):
            c.add(required(name_path))
        elif name is not None:
            _name_rule(c, name, name_path, dns1123_label_errors)
        if name in names:
            c.add(duplicate(name_path, name))
        if len(c.errors) == before and name:
            names.add(name)
    return names


def volume_type(volume: dict) -> str:
    """The source a (defaulted) volume takes its files from: "emptyDir", "configMap", ..."""
    return next((t for t in VOLUME_TYPES if volume.get(t) is not None), "emptyDir")


def claim_names(pod: dict) -> list[str]:
    """The claimName of each persistentVolumeClaim volume, in volume order."""
    return [v["persistentVolumeClaim"].get("claimName") or ""
            for v in (pod.get("spec") or {}).get("volumes") or ()
            if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)]


def _volume_source(c: _Checker, vol: dict, path: str) -> None:
    """One source per volume (none: the emptyDir defaulting makes it), one kubemu runs."""
    present = [t for t in VOLUME_TYPES if vol.get(t) is not None]
    if not present:
        return
    for extra in present[1:]:
        c.add(forbidden(child(path, _EXTRA_TYPE_PATHS.get(extra, extra)),
                        "may not specify more than 1 volume type"))
    kind = present[0]
    if kind not in SUPPORTED_VOLUMES:
        c.add(forbidden(child(path, kind), "kubemu runs emptyDir, hostPath, configMap, secret, "
                                           "downwardAPI, projected and persistentVolumeClaim "
                                           "volumes only"))
        return
    _VOLUME_CHECKS[kind](c, vol[kind], child(path, kind))


def _empty_dir(c: _Checker, value: Any, path: str) -> None:
    source = c.obj(value, path, "EmptyDirVolumeSource")
    if source is None or source.get("sizeLimit") is None:
        return
    limit = source["sizeLimit"]
    try:
        if isinstance(limit, bool) or not isinstance(limit, (str, int, float)):
            raise ValueError("must be a string or a number")
        negative = quantity.parse_quantity(limit) < 0
    except ValueError as e:
        c.invalid(child(path, "sizeLimit"), limit, str(e))
        return
    if negative:
        c.add(forbidden(child(path, "sizeLimit"),
                        "SizeLimit field must be a valid resource quantity"))


def _host_path(c: _Checker, value: Any, path: str) -> None:
    source = c.obj(value, path, "HostPathVolumeSource")
    if source is None:
        return
    host_path = source.get("path")
    if _absent(host_path):
        c.add(required(child(path, "path")))
        return
    if isinstance(host_path, str):
        _no_backsteps(c, host_path, child(path, "path"))
    kind = source.get("type")
    if isinstance(kind, str) and kind not in HOST_PATH_TYPES:
        c.add(not_supported(child(path, "type"), kind, HOST_PATH_TYPES))


def _persistent_volume_claim(c: _Checker, value: Any, path: str) -> None:
    """validatePersistentClaimVolumeSource."""
    source = c.obj(value, path, "PersistentVolumeClaimVolumeSource")
    if source is not None and _absent(source.get("claimName")):
        c.add(required(child(path, "claimName")))


def _config_map(c: _Checker, value: Any, path: str) -> None:
    _keyed_source(c, value, path, "ConfigMapVolumeSource", "name")


def _secret(c: _Checker, value: Any, path: str) -> None:
    _keyed_source(c, value, path, "SecretVolumeSource", "secretName")


def _keyed_source(c: _Checker, value: Any, path: str, kind: str, name_field: str) -> None:
    source = c.obj(value, path, kind)
    if source is None:
        return
    if _absent(source.get(name_field)):
        c.add(required(child(path, name_field)))
    _mode(c, source.get("defaultMode"), child(path, "defaultMode"))
    _key_to_paths(c, source.get("items"), child(path, "items"))


def _key_to_paths(c: _Checker, value: Any, path: str) -> list[dict]:
    """validateKeyToPath for each item; the items that are objects."""
    items = []
    for item_path, item in c.each_obj(c.array(value, path) or [], path, "KeyToPath"):
        if _absent(item.get("key")):
            c.add(required(child(item_path, "key")))
        _relative_path(c, item.get("path"), child(item_path, "path"))
        _mode(c, item.get("mode"), child(item_path, "mode"))
        items.append(item)
    return items


def _downward_api(c: _Checker, value: Any, path: str) -> None:
    source = c.obj(value, path, "DownwardAPIVolumeSource")
    if source is None:
        return
    _mode(c, source.get("defaultMode"), child(path, "defaultMode"))
    _downward_files(c, source.get("items"), path)


def _downward_files(c: _Checker, value: Any, path: str) -> list[dict]:
    """validateDownwardAPIVolumeFile for each item; like Kubernetes, an item's errors are
    reported under the source's path, not the item's. The items that are objects."""
    items = []
    items_path = child(path, "items")
    for _item_path, item in c.each_obj(c.array(value, items_path) or [], items_path,
                                       "DownwardAPIVolumeFile"):
        _relative_path(c, item.get("path"), child(path, "path"))
        if item.get("fieldRef") is not None:
            _field_selector(c, item["fieldRef"], child(path, "fieldRef"), VOLUME_FIELD_PATHS)
            if item.get("resourceFieldRef") is not None:
                c.invalid(path, "resource",
                          "fieldRef and resourceFieldRef can not be specified simultaneously")
        elif item.get("resourceFieldRef") is not None:
            _resource_selector(c, item["resourceFieldRef"], child(path, "resourceFieldRef"),
                               volume=True)
        else:
            c.add(required(path, "one of fieldRef and resourceFieldRef is required"))
        _mode(c, item.get("mode"), child(path, "mode"))
        items.append(item)
    return items


def _projected(c: _Checker, value: Any, path: str) -> None:
    """validateProjectedVolumeSource: one kind per source, no path twice in the volume."""
    source = c.obj(value, path, "ProjectedVolumeSource")
    if source is None:
        return
    _mode(c, source.get("defaultMode"), child(path, "defaultMode"))
    paths: set[str] = set()

    def claim(file_path: Any, shown: Any) -> None:
        if isinstance(file_path, str) and file_path:
            if file_path in paths:
                c.invalid(path, shown, "conflicting duplicate paths")
            paths.add(file_path)

    sources_path = child(path, "sources")
    for src_path, src in c.each_obj(c.array(source.get("sources"), sources_path) or [],
                                    sources_path, "VolumeProjection"):
        kinds = 0
        for field, kind in (("secret", "SecretProjection"), ("configMap", "ConfigMapProjection")):
            ref = c.obj(src.get(field), child(src_path, field), kind)
            if ref is None:
                continue
            kinds += 1
            if _absent(ref.get("name")):
                c.add(required(child(child(src_path, field), "name")))
            for item in _key_to_paths(c, ref.get("items"), child(child(src_path, field), "items")):
                claim(item.get("path"), ref.get("name"))
        downward = c.obj(src.get("downwardAPI"), child(src_path, "downwardAPI"),
                         "DownwardAPIProjection")
        if downward is not None:
            kinds += 1
            for item in _downward_files(c, downward.get("items"), child(src_path, "downwardAPI")):
                claim(item.get("path"), item.get("path"))
        token_path = child(src_path, "serviceAccountToken")
        token = c.obj(src.get("serviceAccountToken"), token_path, "ServiceAccountTokenProjection")
        if token is not None:
            kinds += 1
            seconds = token.get("expirationSeconds", TOKEN_EXPIRATION_DEFAULT)
            if _is_int(seconds) and seconds < 10 * 60:
                c.invalid(child(token_path, "expirationSeconds"), seconds,
                          "may not specify a duration less than 10 minutes")
            elif _is_int(seconds) and seconds > 1 << 32:
                c.invalid(child(token_path, "expirationSeconds"), seconds,
                          "may not specify a duration larger than 2^32 seconds")
            _relative_path(c, token.get("path"), child(path, "path"))
        if src.get("clusterTrustBundle") is not None:
            c.add(forbidden(child(src_path, "clusterTrustBundle"),
                            "kubemu has no ClusterTrustBundles"))
        if kinds > 1:
            c.add(forbidden(src_path, "may not specify more than 1 volume type"))


_VOLUME_CHECKS = {"emptyDir": _empty_dir, "hostPath": _host_path, "configMap": _config_map,
                  "secret": _secret, "downwardAPI": _downward_api, "projected": _projected,
                  "persistentVolumeClaim": _persistent_volume_claim}


def _mode(c: _Checker, value: Any, path: str) -> None:
    mode = c.integer(value, path)
    if mode is not None and not 0 <= mode <= 0o777:
        c.invalid(path, mode, FILE_MODE_MSG)


def _no_backsteps(c: _Checker, value: str, path: str) -> None:
    """validatePathNoBacksteps."""
    if ".." in value.split("/"):
        c.invalid(path, value, "must not contain '..'")


def _relative_path(c: _Checker, value: Any, path: str) -> None:
    """A file path inside a volume: required, relative, no '..' (ValidateLocalNonReservedPath)."""
    if _absent(value):
        c.add(required(path))
        return
    if not isinstance(value, str):
        c.string(value, path)
        return
    _local_descending(c, value, path)
    if value.startswith("..") and not value.startswith("../"):
        c.invalid(path, value, "must not start with '..'")


def _local_descending(c: _Checker, value: str, path: str) -> None:
    """validateLocalDescendingPath."""
    if value.startswith("/"):
        c.invalid(path, value, "must be a relative path")
    _no_backsteps(c, value, path)


def _volume_mounts(c: _Checker, value: Any, path: str, volumes: set[str] | None,
                   privileged: bool) -> None:
    """ValidateVolumeMounts. Like Kubernetes, subPath, mountPropagation and recursiveReadOnly
    are reported at the list's path."""
    mount_points: set[str] = set()
    for m_path, mount in c.each_obj(c.array(value, path) or [], path, "VolumeMount"):
        name = mount.get("name")
        if _absent(name):
            c.add(required(child(m_path, "name")))
        if volumes is not None and (name is None or isinstance(name, str)) \
                and (name or "") not in volumes:
            c.add(not_found(child(m_path, "name"), name or ""))
        mount_path = mount.get("mountPath")
        if _absent(mount_path):
            c.add(required(child(m_path, "mountPath")))
        if isinstance(mount_path, str):
            if mount_path in mount_points:
                c.invalid(child(m_path, "mountPath"), mount_path, "must be unique")
            mount_points.add(mount_path)
        sub_path = mount.get("subPath")
        if isinstance(sub_path, str) and sub_path:
            _local_descending(c, sub_path, child(path, "subPath"))
        propagation = mount.get("mountPropagation")
        if isinstance(propagation, str):
            if propagation not in MOUNT_PROPAGATIONS:
                c.add(not_supported(child(path, "mountPropagation"), propagation,
                                    MOUNT_PROPAGATIONS))
            elif propagation == "Bidirectional" and not privileged:
                c.add(forbidden(child(path, "mountPropagation"), "Bidirectional mount "
                                "propagation is available only to privileged containers"))
        _recursive_read_only(c, mount, child(path, "recursiveReadOnly"))


def _recursive_read_only(c: _Checker, mount: dict, path: str) -> None:
    """validateMountRecursiveReadOnly."""
    rro = mount.get("recursiveReadOnly")
    if not isinstance(rro, str) or rro == "Disabled":
        return
    if rro not in RECURSIVE_READ_ONLY:
        c.add(not_supported(path, rro, RECURSIVE_READ_ONLY))
        return
    if mount.get("readOnly") is not True:
        c.add(forbidden(path, "may only be specified when readOnly is true"))
    if mount.get("mountPropagation") not in (None, "None"):
        c.add(forbidden(path, "may only be specified when mountPropagation is None or not "
                              "specified"))


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


_COMPILED: dict[str, re.Pattern] = {}  # by pattern: the module's own constants, a handful


def _matches(pattern: str, value: str) -> bool:
    # not re.fullmatch(pattern, ...): its cache lookup costs more than the match of a short name,
    # and validation matches about twenty names and label values per object
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        compiled = _COMPILED[pattern] = re.compile(pattern)
    return compiled.fullmatch(value) is not None


def dns1123_label_errors(value: str) -> list[str]:
    errors = [_max_len(63)] if len(value) > 63 else []
    return errors + ([] if _matches(DNS1123_LABEL, value) else [_DNS1123_LABEL_MSG])


DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MSG = _regex_error(
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character", DNS1035_LABEL, "my-name", "abc-123")


def dns1035_label_errors(value: str) -> list[str]:
    """A Service's name (NameIsDNS1035Label): it becomes a DNS label and an environment variable."""
    errors = [_max_len(63)] if len(value) > 63 else []
    return errors + ([] if _matches(DNS1035_LABEL, value) else [_DNS1035_LABEL_MSG])


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
