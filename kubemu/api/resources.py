"""The kinds kubemu's apiserver serves, and how it names, finds and stores them.

    resolve("po") / resolve("pods") / resolve("Pod") / resolve("deploy.apps") -> Resource
    for_kind("apps/v1", "Deployment")                                       -> Resource
    registry_key("pods", "default", "web")  -> "/registry/pods/default/web"
    registry_key("nodes", None, "n1")       -> "/registry/nodes/n1"
    registry_prefix("pods", "default")      -> "/registry/pods/default/"
    registry_prefix("pods")                 -> "/registry/pods/"
    field_set(resource, obj)                -> {"metadata.name": "web", ...} (field selectors)

Names resolve the way kubectl resolves them: kind, plural, singular or short name, in any
case, optionally qualified by group (`deployments.apps`) or version and group
(`deployments.v1.apps`). An unknown name is an UnknownResourceError worded as kubectl's:
`the server doesn't have a resource type "foo"`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Union

REGISTRY_ROOT = "/registry"

_NAME_AND_NAMESPACE = ("metadata.name", "metadata.namespace")
STORED_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
CREATE_ONLY = ("create",)  # reviews and requests: answered, never stored


@dataclass(frozen=True)
class Resource:
    kind: str
    api_version: str          # "v1", "apps/v1", ...
    plural: str               # the resource name in URLs and registry keys
    singular: str
    short_names: tuple[str, ...] = ()
    namespaced: bool = True
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()  # discovery's categories: `kubectl get all` lists "all"
    verbs: tuple[str, ...] = STORED_VERBS  # what discovery says the resource answers
    field_selectors: tuple[str, ...] = _NAME_AND_NAMESPACE
    # How a selectable field reads when the object does not set it (Go's zero values).
    field_zero_values: dict[str, str] = field(default_factory=dict, compare=False, hash=False)

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]

    @property
    def stored(self) -> bool:
        """Kept in the store (a review or request is answered and forgotten)."""
        return self.verbs != CREATE_ONLY

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this resource answers to, lower case."""
        return tuple(dict.fromkeys((self.plural, self.singular, self.kind.lower(),
                                    *self.short_names)))

    def key(self, namespace: str | None, name: str) -> str:
        return registry_key(self, namespace, name)

    def prefix(self, namespace: str | None = None) -> str:
        return registry_prefix(self, namespace)

    def api_path(self, namespace: str | None = None, name: str | None = None,
                 subresource: str | None = None) -> str:
        """The REST path: /api/v1/namespaces/default/pods/web/status, /apis/apps/v1/deployments."""
        base = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


RESOURCES: tuple[Resource, ...] = (
    Resource("Namespace", "v1", "namespaces", "namespace", ("ns",), namespaced=False,
             subresources=("status", "finalize"),
             field_selectors=("metadata.name", "status.phase")),
    Resource("Pod", "v1", "pods", "pod", ("po",),
             subresources=("binding", "status", "log", "eviction", "exec", "attach", "portforward"),
             categories=("all",),
             field_selectors=(*_NAME_AND_NAMESPACE, "spec.nodeName", "status.phase",
                              "spec.restartPolicy", "spec.schedulerName",
                              "spec.serviceAccountName", "spec.hostNetwork", "status.podIP",
                              "status.nominatedNodeName"),
             field_zero_values={"spec.hostNetwork": "false"}),
    Resource("Node", "v1", "nodes", "node", ("no",), namespaced=False, subresources=("status",),
             field_selectors=("metadata.name", "spec.unschedulable"),
             field_zero_values={"spec.unschedulable": "false"}),
    Resource("Lease", "coordination.k8s.io/v1", "leases", "lease"),
    Resource("ReplicaSet", "apps/v1", "replicasets", "replicaset", ("rs",),
             subresources=("status", "scale"), categories=("all",),
             field_selectors=(*_NAME_AND_NAMESPACE, "status.replicas"),
             field_zero_values={"status.replicas": "0"}),
    Resource("Deployment", "apps/v1", "deployments", "deployment", ("deploy",),
             subresources=("status", "scale"), categories=("all",)),
    Resource("StatefulSet", "apps/v1", "statefulsets", "statefulset", ("sts",),
             subresources=("status", "scale"), categories=("all",)),
    Resource("DaemonSet", "apps/v1", "daemonsets", "daemonset", ("ds",), subresources=("status",),
             categories=("all",)),
    Resource("ControllerRevision", "apps/v1", "controllerrevisions", "controllerrevision"),
    Resource("Job", "batch/v1", "jobs", "job", subresources=("status",), categories=("all",),
             field_selectors=(*_NAME_AND_NAMESPACE, "status.successful"),
             field_zero_values={"status.successful": "0"}),
    Resource("CronJob", "batch/v1", "cronjobs", "cronjob", ("cj",), subresources=("status",),
             categories=("all",)),
    Resource("PersistentVolume", "v1", "persistentvolumes", "persistentvolume", ("pv",),
             namespaced=False, subresources=("status",)),
    Resource("PersistentVolumeClaim", "v1", "persistentvolumeclaims", "persistentvolumeclaim",
             ("pvc",), subresources=("status",)),
    Resource("StorageClass", "storage.k8s.io/v1", "storageclasses", "storageclass", ("sc",),
             namespaced=False),
    Resource("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", "poddisruptionbudget",
             ("pdb",), subresources=("status",)),
    Resource("Service", "v1", "services", "service", ("svc",), subresources=("status",),
             categories=("all",)),
    Resource("Endpoints", "v1", "endpoints", "endpoints", ("ep",)),
    Resource("EndpointSlice", "discovery.k8s.io/v1", "endpointslices", "endpointslice"),
    Resource("IPAddress", "networking.k8s.io/v1", "ipaddresses", "ipaddress", ("ip",), namespaced=False),
    Resource("ServiceAccount", "v1", "serviceaccounts", "serviceaccount", ("sa",),
             subresources=("token",)),
    Resource("ConfigMap", "v1", "configmaps", "configmap", ("cm",)),
    Resource("Secret", "v1", "secrets", "secret", field_selectors=(*_NAME_AND_NAMESPACE, "type")),
    Resource("Role", "rbac.authorization.k8s.io/v1", "roles", "role"),
    Resource("ClusterRole", "rbac.authorization.k8s.io/v1", "clusterroles", "clusterrole",
             namespaced=False),
    Resource("RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings", "rolebinding"),
    Resource("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", "clusterrolebindings",
             "clusterrolebinding", namespaced=False),
    Resource("SelfSubjectAccessReview", "authorization.k8s.io/v1", "selfsubjectaccessreviews",
             "selfsubjectaccessreview", namespaced=False, verbs=CREATE_ONLY),
    Resource("SelfSubjectRulesReview", "authorization.k8s.io/v1", "selfsubjectrulesreviews",
             "selfsubjectrulesreview", namespaced=False, verbs=CREATE_ONLY),
    Resource("SubjectAccessReview", "authorization.k8s.io/v1", "subjectaccessreviews",
             "subjectaccessreview", namespaced=False, verbs=CREATE_ONLY),
    Resource("LocalSubjectAccessReview", "authorization.k8s.io/v1", "localsubjectaccessreviews",
             "localsubjectaccessreview", verbs=CREATE_ONLY),
    Resource("TokenReview", "authentication.k8s.io/v1", "tokenreviews", "tokenreview",
             namespaced=False, verbs=CREATE_ONLY),
    Resource("SelfSubjectReview", "authentication.k8s.io/v1", "selfsubjectreviews",
             "selfsubjectreview", namespaced=False, verbs=CREATE_ONLY),
    Resource("CertificateSigningRequest", "certificates.k8s.io/v1", "certificatesigningrequests",
             "certificatesigningrequest", ("csr",), namespaced=False,
             subresources=("status", "approval"),
             field_selectors=("metadata.name", "spec.signerName")),
    Resource("Event", "v1", "events", "event", ("ev",),
             field_selectors=(*_NAME_AND_NAMESPACE, "involvedObject.kind",
                              "involvedObject.namespace", "involvedObject.name",
                              "involvedObject.uid", "involvedObject.apiVersion",
                              "involvedObject.resourceVersion", "involvedObject.fieldPath",
                              "reason", "reportingComponent", "source", "type")),
)

BY_KIND: dict[tuple[str, str], Resource] = {(r.api_version, r.kind): r for r in RESOURCES}
BY_PLURAL: dict[str, Resource] = {r.plural: r for r in RESOURCES}


_BY_NAME: dict[str, tuple[Resource, ...]] = {}  # every name a resource answers to -> those resources
for _r in RESOURCES:
    for _n in _r.names:
        _BY_NAME[_n] = (*_BY_NAME.get(_n, ()), _r)
# the exact spellings callers use most (plural, Kind), answered without parsing on every request
_RESOLVED: dict[str, Resource] = {**{r.plural: r for r in RESOURCES}, **{r.kind: r for r in RESOURCES}}


class UnknownResourceError(LookupError):
    def __init__(self, name: Any):
        self.name = name
        super().__init__(f'the server doesn\'t have a resource type "{name}"')


class FieldSelectorError(ValueError):
    """A field selector on a field the resource cannot be selected by."""

    def __init__(self, label: str):
        self.label = label
        super().__init__(f"field label not supported: {label}")


ResourceRef = Union[Resource, str]


def resolve(name: Any) -> Resource:
    """The resource `name` means: kind, plural, singular or short name, any case, optionally
    followed by `.group` or `.version.group` (kubectl's `deployments.apps`)."""
    if isinstance(name, Resource):
        return name
    if not isinstance(name, str) or not name:
        raise UnknownResourceError(name)
    found = _RESOLVED.get(name)
    if found is not None:
        return found
    lowered = name.lower()
    base, _, qualifier = lowered.partition(".")
    for r in _BY_NAME.get(base, ()):
        if not qualifier:
            return r
        if qualifier in (r.group, f"{r.version}.{r.group}") and r.group:
            return r
        if not r.group and qualifier in ("core", f"{r.version}", f"{r.version}.core"):
            return r
    raise UnknownResourceError(name)


def for_kind(api_version: Any, kind: Any) -> Resource:
    """The resource serving objects of this apiVersion and kind (exact, as in a manifest)."""
    r = BY_KIND.get((api_version, kind)) if isinstance(api_version, str) and isinstance(kind, str) \
        else None
    if r is None:
        raise UnknownResourceError(kind if isinstance(kind, str) and kind else api_version)
    return r


def for_object(obj: Any) -> Resource:
    if not isinstance(obj, dict):
        raise UnknownResourceError(obj)
    return for_kind(obj.get("apiVersion"), obj.get("kind"))


# --- registry keys, as the apiserver stores objects ------------------------------------------

def _segment(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value or "/" in value or value in (".", ".."):
        raise ValueError(f"invalid {what} for a registry key: {value!r}")
    return value


def registry_key(resource: ResourceRef, namespace: str | None, name: str) -> str:
    """/registry/<resource>/<namespace>/<name>, or /registry/<resource>/<name> for
    cluster-scoped resources. A namespaced resource needs a namespace; a cluster-scoped one
    must not be given one (ValueError)."""
    r = resolve(resource)
    name = _segment("name", name)
    if r.namespaced:
        return f"{REGISTRY_ROOT}/{r.plural}/{_segment('namespace', namespace)}/{name}"
    if namespace:
        raise ValueError(f"{r.plural} are cluster-scoped: no namespace in their keys")
    return f"{REGISTRY_ROOT}/{r.plural}/{name}"


def registry_prefix(resource: ResourceRef, namespace: str | None = None) -> str:
    """The key prefix of every object of `resource` (in `namespace`, if given); ends in "/"
    so that "pods/default/" never matches "pods/default-2/..."."""
    r = resolve(resource)
    if namespace:
        if not r.namespaced:
            raise ValueError(f"{r.plural} are cluster-scoped: no namespace in their keys")
        return f"{REGISTRY_ROOT}/{r.plural}/{_segment('namespace', namespace)}/"
    return f"{REGISTRY_ROOT}/{r.plural}/"


def parse_registry_key(key: str) -> tuple[Resource, str | None, str]:
    """(resource, namespace or None, name) of a key made by registry_key (ValueError if not)."""
    parts = key.split("/") if isinstance(key, str) else []
    if len(parts) < 4 or parts[0] != "" or "/" + parts[1] != REGISTRY_ROOT:
        raise ValueError(f"not a registry key: {key!r}")
    r = BY_PLURAL.get(parts[2])
    expected = 5 if r is not None and r.namespaced else 4
    if r is None or len(parts) != expected or not all(parts[3:]):
        raise ValueError(f"not a registry key: {key!r}")
    return (r, parts[3], parts[4]) if r.namespaced else (r, None, parts[3])


# --- field selectors ------------------------------------------------------------------------------

def check_field_label(resource: ResourceRef, label: str) -> None:
    """Raise FieldSelectorError (`field label not supported: x`) unless `resource` can be
    selected by `label`."""
    if label not in resolve(resource).field_selectors:
        raise FieldSelectorError(label)


def field_set(resource: ResourceRef, obj: Any) -> dict[str, str]:
    """The selectable fields of `obj` as strings (fields.Set): absent fields read as Go's
    zero value (""; "false" for booleans; "0" for counts)."""
    out = {}
    for label, path, zero in _field_paths(resolve(resource)):
        if label == "status.podIP":
            ips = _get(obj, ("status", "podIPs"))
            first = ips[0] if isinstance(ips, list) and ips else None
            value = first.get("ip") if isinstance(first, dict) else _get(obj, ("status", "podIP"))
        else:
            value = _get(obj, path)
        out[label] = _string(value, zero)
    return out


@functools.cache
def _field_paths(r: Resource) -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """(label, the path it reads, its zero value) of each of `r`'s selectable fields: worked out
    once per resource, as the watch cache reads them from every object it keeps."""
    return tuple((label, ("source", "component") if label == "source" else tuple(label.split(".")),
                  r.field_zero_values.get(label, "")) for label in r.field_selectors)


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _string(value: Any, zero: str) -> str:
    if value is None:
        return zero
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    return zero
