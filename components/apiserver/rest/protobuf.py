"""Kubernetes' protobuf bodies, read for the few kinds kubectl's typed clients send that way.

kubectl sends some requests with `Content-Type: application/vnd.kubernetes.protobuf` and no JSON
fallback: `auth can-i` (SelfSubjectAccessReview, SelfSubjectRulesReview), `auth whoami`, `create
namespace|configmap|secret|serviceaccount|role|clusterrole|rolebinding|clusterrolebinding|token|
deployment|job|cronjob` (of a pod template, the fields `kubectl create` sets).
kube-apiserver's wire form is the 4 bytes `k8s\\0` and a runtime.Unknown {typeMeta {apiVersion,
kind}, raw}, `raw` being the kind's message as k8s.io/api's generated.proto numbers its fields.
This reads those kinds into the JSON form (fields at their zero value left out, as JSON's
omitempty does, except pointer fields). Pure. Other kinds are refused with a clear 415: kubemu
serves JSON and YAML.
"""
from __future__ import annotations

import base64
import datetime

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """`unsupported`: a kind this reader does not know (415), else malformed (400)."""

    def __init__(self, message: str, unsupported: bool = False):
        super().__init__(message)
        self.unsupported = unsupported


# field number -> (json name, type, repeated, keep zero value (Go pointer fields))
# types: "string", "int", "bool", "bytes", "time", "map" (string->string), "bytesmap", or a message name
S, I, B = "string", "int", "bool"
MESSAGES: dict[str, dict[int, tuple[str, str, bool, bool]]] = {
    "Unknown": {1: ("typeMeta", "TypeMeta", False, False), 2: ("raw", "bytes", False, False)},
    "TypeMeta": {1: ("apiVersion", S, False, False), 2: ("kind", S, False, False)},
    "ObjectMeta": {1: ("name", S, False, False), 2: ("generateName", S, False, False),
                   3: ("namespace", S, False, False), 5: ("uid", S, False, False),
                   6: ("resourceVersion", S, False, False), 8: ("creationTimestamp", "time", False, False),
                   11: ("labels", "map", False, False), 12: ("annotations", "map", False, False),
                   13: ("ownerReferences", "OwnerReference", True, False), 14: ("finalizers", S, True, False)},
    "NamespaceSpec": {1: ("finalizers", S, True, False)},
    "ResourceAttributes": {1: ("namespace", S, False, False), 2: ("verb", S, False, False),
                           3: ("group", S, False, False), 4: ("version", S, False, False),
                           5: ("resource", S, False, False), 6: ("subresource", S, False, False),
                           7: ("name", S, False, False)},
    "NonResourceAttributes": {1: ("path", S, False, False), 2: ("verb", S, False, False)},
    "SelfSubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes", False, False),
                                    2: ("nonResourceAttributes", "NonResourceAttributes", False, False)},
    "SubjectAccessReviewSpec": {1: ("resourceAttributes", "ResourceAttributes", False, False),
                                2: ("nonResourceAttributes", "NonResourceAttributes", False, False),
                                3: ("user", S, False, False), 4: ("groups", S, True, False),
                                6: ("uid", S, False, False)},
    "SelfSubjectRulesReviewSpec": {1: ("namespace", S, False, False)},
    "TokenReviewSpec": {1: ("token", S, False, False), 2: ("audiences", S, True, False)},
    "TokenRequestSpec": {1: ("audiences", S, True, False), 3: ("boundObjectRef", "BoundObjectReference", False, False),
                         4: ("expirationSeconds", I, False, True)},
    "BoundObjectReference": {1: ("kind", S, False, False), 2: ("apiVersion", S, False, False),
                             3: ("name", S, False, False), 4: ("uid", S, False, False)},
    "PolicyRule": {1: ("verbs", S, True, False), 2: ("apiGroups", S, True, False), 3: ("resources", S, True, False),
                   4: ("resourceNames", S, True, False), 5: ("nonResourceURLs", S, True, False)},
    "Subject": {1: ("kind", S, False, False), 2: ("apiGroup", S, False, False), 3: ("name", S, False, False),
                4: ("namespace", S, False, False)},
    "RoleRef": {1: ("apiGroup", S, False, False), 2: ("kind", S, False, False), 3: ("name", S, False, False)},
    "Time": {1: ("seconds", I, False, False), 2: ("nanos", I, False, False)},
    # kubectl create deployment
    "DeploymentSpec": {1: ("replicas", I, False, True), 2: ("selector", "LabelSelector", False, False),
                       3: ("template", "PodTemplateSpec", False, False),
                       4: ("strategy", "DeploymentStrategy", False, False), 5: ("minReadySeconds", I, False, False),
                       6: ("revisionHistoryLimit", I, False, True), 7: ("paused", B, False, False),
                       9: ("progressDeadlineSeconds", I, False, True)},
    "DeploymentStrategy": {1: ("type", S, False, False)},
    "LabelSelector": {1: ("matchLabels", "map", False, False),
                      2: ("matchExpressions", "LabelSelectorRequirement", True, False)},
    "LabelSelectorRequirement": {1: ("key", S, False, False), 2: ("operator", S, False, False),
                                 3: ("values", S, True, False)},
    "PodTemplateSpec": {1: ("metadata", "ObjectMeta", False, False), 2: ("spec", "PodSpec", False, False)},
    "PodSpec": {2: ("containers", "Container", True, False), 3: ("restartPolicy", S, False, False),
                4: ("terminationGracePeriodSeconds", I, False, True), 6: ("dnsPolicy", S, False, False),
                7: ("nodeSelector", "map", False, False), 8: ("serviceAccountName", S, False, False),
                10: ("nodeName", S, False, False), 11: ("hostNetwork", B, False, False),
                16: ("hostname", S, False, False), 17: ("subdomain", S, False, False),
                19: ("schedulerName", S, False, False), 20: ("initContainers", "Container", True, False),
                24: ("priorityClassName", S, False, False)},
    "Container": {1: ("name", S, False, False), 2: ("image", S, False, False), 3: ("command", S, True, False),
                  4: ("args", S, True, False), 5: ("workingDir", S, False, False),
                  6: ("ports", "ContainerPort", True, False), 7: ("env", "EnvVar", True, False),
                  13: ("terminationMessagePath", S, False, False), 14: ("imagePullPolicy", S, False, False),
                  16: ("stdin", B, False, False), 18: ("tty", B, False, False),
                  20: ("terminationMessagePolicy", S, False, False)},
    "ContainerPort": {1: ("name", S, False, False), 2: ("hostPort", I, False, False),
                      3: ("containerPort", I, False, False), 4: ("protocol", S, False, False),
                      5: ("hostIP", S, False, False)},
    "EnvVar": {1: ("name", S, False, False), 2: ("value", S, False, False)},
    # kubectl create job [--from=cronjob/NAME] | cronjob
    "JobSpec": {1: ("parallelism", I, False, True), 2: ("completions", I, False, True),
                3: ("activeDeadlineSeconds", I, False, True), 4: ("selector", "LabelSelector", False, False),
                5: ("manualSelector", B, False, True), 6: ("template", "PodTemplateSpec", False, False),
                7: ("backoffLimit", I, False, True), 8: ("ttlSecondsAfterFinished", I, False, True),
                9: ("completionMode", S, False, True), 10: ("suspend", B, False, True),
                12: ("backoffLimitPerIndex", I, False, True), 13: ("maxFailedIndexes", I, False, True),
                14: ("podReplacementPolicy", S, False, True), 15: ("managedBy", S, False, True)},
    "CronJobSpec": {1: ("schedule", S, False, False), 2: ("startingDeadlineSeconds", I, False, True),
                    3: ("concurrencyPolicy", S, False, False), 4: ("suspend", B, False, True),
                    5: ("jobTemplate", "JobTemplateSpec", False, False),
                    6: ("successfulJobsHistoryLimit", I, False, True),
                    7: ("failedJobsHistoryLimit", I, False, True), 8: ("timeZone", S, False, True)},
    "JobTemplateSpec": {1: ("metadata", "ObjectMeta", False, False), 2: ("spec", "JobSpec", False, False)},
    "OwnerReference": {1: ("kind", S, False, False), 3: ("name", S, False, False), 4: ("uid", S, False, False),
                       5: ("apiVersion", S, False, False), 6: ("controller", B, False, True),
                       7: ("blockOwnerDeletion", B, False, True)},
}
META = {1: ("metadata", "ObjectMeta", False, False)}
KINDS: dict[tuple[str, str], dict[int, tuple[str, str, bool, bool]]] = {
    ("v1", "Namespace"): {**META, 2: ("spec", "NamespaceSpec", False, False)},
    ("v1", "ConfigMap"): {**META, 2: ("data", "map", False, False), 3: ("binaryData", "bytesmap", False, False),
                          4: ("immutable", B, False, True)},
    ("v1", "Secret"): {**META, 2: ("data", "bytesmap", False, False), 3: ("type", S, False, False),
                       4: ("stringData", "map", False, False), 5: ("immutable", B, False, True)},
    ("v1", "ServiceAccount"): {**META, 4: ("automountServiceAccountToken", B, False, True)},
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {
        **META, 2: ("spec", "SelfSubjectAccessReviewSpec", False, False)},
    ("authorization.k8s.io/v1", "SubjectAccessReview"): {**META, 2: ("spec", "SubjectAccessReviewSpec", False, False)},
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): {
        **META, 2: ("spec", "SubjectAccessReviewSpec", False, False)},
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): {
        **META, 2: ("spec", "SelfSubjectRulesReviewSpec", False, False)},
    ("authentication.k8s.io/v1", "SelfSubjectReview"): dict(META),
    ("authentication.k8s.io/v1", "TokenReview"): {**META, 2: ("spec", "TokenReviewSpec", False, False)},
    ("authentication.k8s.io/v1", "TokenRequest"): {**META, 2: ("spec", "TokenRequestSpec", False, False)},
    ("apps/v1", "Deployment"): {**META, 2: ("spec", "DeploymentSpec", False, False)},
    ("batch/v1", "Job"): {**META, 2: ("spec", "JobSpec", False, False)},
    ("batch/v1", "CronJob"): {**META, 2: ("spec", "CronJobSpec", False, False)},
    ("rbac.authorization.k8s.io/v1", "Role"): {**META, 2: ("rules", "PolicyRule", True, False)},
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): {**META, 2: ("rules", "PolicyRule", True, False)},
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): {**META, 2: ("subjects", "Subject", True, False),
                                                      3: ("roleRef", "RoleRef", False, False)},
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): {**META, 2: ("subjects", "Subject", True, False),
                                                             3: ("roleRef", "RoleRef", False, False)},
}
MAX_NESTING = 16  # the schemas above nest 6 deep


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtobufError("malformed protobuf: truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes):
    """(field number, wire type, value) of each field: an int, or the bytes of a length-delimited one."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ProtobufError("malformed protobuf: truncated field")
            value, pos = data[pos:pos + size], pos + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(data):
                raise ProtobufError("malformed protobuf: truncated field")
            value, pos = int.from_bytes(data[pos:pos + width], "little"), pos + width
        else:
            raise ProtobufError(f"malformed protobuf: wire type {wire}")
        yield number, wire, value


def _text(value) -> str:
    if not isinstance(value, bytes):
        raise ProtobufError("malformed protobuf: a string field is not length-delimited")
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise ProtobufError("malformed protobuf: a string is not UTF-8") from None


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _entry(value, of_bytes: bool) -> tuple[str, str]:
    """One map entry (a message of key = 1, value = 2); a bytes value is base64, as in JSON."""
    key, val = "", b""
    for number, _, v in _fields(value):
        if number == 1:
            key = _text(v)
        elif number == 2:
            val = v
    return key, (base64.b64encode(val).decode() if isinstance(val, bytes) else "") if of_bytes else _text(val)


def _scalar(kind: str, value, depth: int):
    if kind == S:
        return _text(value)
    if kind == I:
        return _signed(value)
    if kind == B:
        return bool(value)
    if kind == "bytes":
        return value
    if kind == "time":
        t = message("Time", value, depth + 1)
        seconds = t.get("seconds", 0)
        if not seconds:
            return None
        try:
            when = datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)
        except (ValueError, OverflowError, OSError):
            raise ProtobufError(f"malformed protobuf: a time of {seconds} seconds is out of range") from None
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")
    return message(kind, value, depth + 1)


def _decode(schema: dict, data: bytes, depth: int) -> dict:
    if depth > MAX_NESTING:
        raise ProtobufError("malformed protobuf: nested too deep")
    out: dict = {}
    for number, wire, value in _fields(data):
        spec = schema.get(number)
        if spec is None:
            continue  # a field kubemu does not read
        name, kind, repeated, keep = spec
        if (wire == 0) != (kind in (I, B)):  # numbers are varints, everything else length-delimited
            raise ProtobufError(f"malformed protobuf: field {name} has wire type {wire}")
        if kind in ("map", "bytesmap"):
            key, val = _entry(value, kind == "bytesmap")
            out.setdefault(name, {})[key] = val
            continue
        item = _scalar(kind, value, depth)
        if repeated:
            out.setdefault(name, []).append(item)
        elif keep or item not in ("", 0, False, None, {}):
            out[name] = item
    return out


def message(name: str, data: bytes, depth: int = 0) -> dict:
    return _decode(MESSAGES[name], data, depth)


def decode(body: bytes) -> dict:
    """The JSON form of a protobuf-encoded object of one of KINDS."""
    if not body.startswith(MAGIC):
        raise ProtobufError("malformed protobuf: no k8s envelope")
    unknown = message("Unknown", body[len(MAGIC):])
    type_meta = unknown.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    schema = KINDS.get((api_version, kind))
    if schema is None:
        raise ProtobufError(f"kubemu reads protobuf bodies only for {', '.join(k for _, k in KINDS)}: "
                            f"send this {kind or 'object'} as application/json or application/yaml",
                            unsupported=True)
    return {"apiVersion": api_version, "kind": kind, **_decode(schema, unknown.get("raw", b""), 0)}
