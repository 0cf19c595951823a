"""The discovery documents clients read first, generated from the resource table. Pure.

    document(path, accept) -> (content type, JSON document) | None

for `/version`, `/api` (APIVersions), `/apis` (APIGroupList), `/apis/<group>` (APIGroup),
`/api/v1` and `/apis/<group>/<version>` (APIResourceList). When Accept asks for aggregated
discovery (`application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`, or v2beta1),
`/api` and `/apis` answer an APIGroupDiscoveryList instead (the core group at /api, the others at
/apis), with that media type as the Content-Type: kubectl reads a plain `application/json`
answer as the legacy format. Any other path is None (not a discovery document).

Every resource comes from `kubemu.api.resources.RESOURCES`, and metrics.k8s.io's from metrics.py
(`SERVED`): names, scope, kind, verbs, short names and categories (so `kubectl get po`, `deploy` and `get all` resolve), and its subresources
as `pods/status` entries with the verbs and kinds below. Documents are built once and cached.
"""
from __future__ import annotations

import platform
from functools import cache

from kubemu.api.resources import RESOURCES, Resource

from . import metrics
from .media import parse_media

# The Kubernetes release whose API kubemu serves; kubectl's version dispatcher picks its minor.
MAJOR, MINOR = "1", "32"
GIT_VERSION = f"v{MAJOR}.{MINOR}.0-kubemu"

JSON = "application/json"
AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_VERSIONS = ("v2", "v2beta1")  # in the order of preference when both are acceptable
AGGREGATED_KIND = "APIGroupDiscoveryList"
# Every resource served: the stored and reviewed ones, and the metrics `kubectl top` reads.
SERVED: tuple[Resource, ...] = RESOURCES + metrics.RESOURCES

# What each subresource answers, and the kind it speaks ("" = the resource's own kind,
# None = not an object, as pods/log's text).
_SUBRESOURCES: dict[str, tuple[tuple[str, ...], tuple[str, str] | None]] = {
    "status": (("get", "patch", "update"), ("", "")),
    "scale": (("get", "patch", "update"), ("autoscaling/v1", "Scale")),
    "log": (("get",), ("v1", "Pod")),
    "binding": (("create",), ("v1", "Binding")),
    "eviction": (("create",), ("policy/v1", "Eviction")),
    "token": (("create",), ("authentication.k8s.io/v1", "TokenRequest")),
    "finalize": (("update",), ("", "")),
    "approval": (("get", "patch", "update"), ("", "")),
    "exec": (("create", "get"), ("v1", "PodExecOptions")),
    "attach": (("create", "get"), ("v1", "PodAttachOptions")),
    "portforward": (("create", "get"), ("v1", "PodPortForwardOptions")),
}


def subresource_verbs(name: str) -> tuple[str, ...]:
    return _SUBRESOURCES[name][0]


def subresource_kind(r: Resource, name: str) -> tuple[str, str]:
    """(apiVersion, kind) of what `r`'s subresource `name` answers."""
    api_version, kind = _SUBRESOURCES[name][1] or ("", "")
    return (api_version or r.api_version, kind or r.kind)


def gvk(api_version: str, kind: str) -> dict:
    """{group, version, kind} of an apiVersion and kind."""
    group, _, version = api_version.rpartition("/")
    return {"group": group, "version": version, "kind": kind}


# --- the groups ----------------------------------------------------------------------------------

def _group_versions() -> dict[str, list[str]]:
    """group -> its versions, in the order the resource table first names them ("" is core)."""
    groups: dict[str, list[str]] = {}
    for r in SERVED:
        versions = groups.setdefault(r.group, [])
        if r.version not in versions:
            versions.append(r.version)
    return groups


def _resources(group: str, version: str) -> list[Resource]:
    """A group version's resources by name, as kube-apiserver lists them (kubectl's `get all`
    prints categories in this order)."""
    return sorted((r for r in SERVED if r.group == group and r.version == version), key=lambda r: r.plural)


def _group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _api_group(group: str, versions: list[str]) -> dict:
    entries = [{"groupVersion": _group_version(group, v), "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


# --- legacy documents ------------------------------------------------------------------------------

def _version() -> dict:
    machine = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    return {"major": MAJOR, "minor": MINOR, "gitVersion": GIT_VERSION,
            "gitCommit": "", "gitTreeState": "",
            "buildDate": "1970-01-01T00:00:00Z", "goVersion": "go1.23 (kubemu: Python)",
            "compiler": "gc", "platform": f"{platform.system().lower()}/{machine}"}


def _api_versions() -> dict:
    return {"kind": "APIVersions", "versions": _group_versions().get("", []),
            "serverAddressByClientCIDRs": []}


def _api_group_list() -> dict:
    groups = [{"kind": "APIGroup", "apiVersion": "v1", **_api_group(g, vs)}
              for g, vs in _group_versions().items() if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource_entry(r: Resource) -> dict:
    entry = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced,
             "kind": r.kind, "verbs": sorted(r.verbs)}
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    return entry


def _subresource_entry(r: Resource, name: str) -> dict:
    api_version, kind = subresource_kind(r, name)
    entry = {"name": f"{r.plural}/{name}", "singularName": "", "namespaced": r.namespaced,
             "kind": kind, "verbs": sorted(subresource_verbs(name))}
    if api_version != r.api_version:
        group, _, version = api_version.rpartition("/")
        entry.update(group=group, version=version)
    return entry


def _api_resource_list(group: str, version: str) -> dict:
    resources = []
    for r in _resources(group, version):
        resources.append(_resource_entry(r))
        resources += [_subresource_entry(r, s) for s in r.subresources]
    return {"kind": "APIResourceList", "apiVersion": "v1",
            "groupVersion": _group_version(group, version), "resources": resources}


# --- aggregated discovery (apidiscovery.k8s.io) ------------------------------------------------

def _discovery_resource(r: Resource) -> dict:
    entry = {"resource": r.plural, "responseKind": gvk(r.api_version, r.kind),
             "scope": "Namespaced" if r.namespaced else "Cluster",
             "singularResource": r.singular, "verbs": sorted(r.verbs)}
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    if r.subresources:
        entry["subresources"] = [
            {"subresource": s, "responseKind": gvk(*subresource_kind(r, s)),
             "verbs": sorted(subresource_verbs(s))} for s in r.subresources]
    return entry


def _group_discovery(group: str, versions: list[str]) -> dict:
    return {"metadata": {"name": group, "creationTimestamp": None},
            "versions": [{"version": v, "freshness": "Current",
                          "resources": [_discovery_resource(r) for r in _resources(group, v)]}
                         for v in versions]}


def _aggregated(core: bool, version: str) -> dict:
    groups = [_group_discovery(g, vs) for g, vs in _group_versions().items() if (g == "") == core]
    return {"kind": AGGREGATED_KIND, "apiVersion": f"{AGGREGATED_GROUP}/{version}",
            "metadata": {}, "items": groups}


def aggregated_version(accept: str) -> str | None:
    """The apidiscovery version the client's Accept asks for first (v2 or v2beta1), or None
    when it takes the legacy documents."""
    for item in (accept or "").split(","):
        media, params = parse_media(item)
        if media in (JSON, "application/*", "*/*") and params.get("g") == AGGREGATED_GROUP \
                and params.get("as") == AGGREGATED_KIND and params.get("v") in AGGREGATED_VERSIONS:
            return params["v"]
        if media in (JSON, "application/*", "*/*") and not params:
            return None
    return None


def aggregated_content_type(version: str) -> str:
    return f"{JSON};g={AGGREGATED_GROUP};v={version};as={AGGREGATED_KIND}"


# --- the door -------------------------------------------------------------------------------------

@cache
def _legacy(path: str) -> dict | None:
    groups = _group_versions()
    if path == "/version":
        return _version()
    if path == "/api":
        return _api_versions()
    if path == "/apis":
        return _api_group_list()
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] == "api" and parts[1] in groups.get("", []):
        return _api_resource_list("", parts[1])
    if parts[0] == "apis" and len(parts) in (2, 3) and parts[1] and parts[1] in groups:
        if len(parts) == 2:
            return {"kind": "APIGroup", "apiVersion": "v1", **_api_group(parts[1],
                                                                        groups[parts[1]])}
        if parts[2] in groups[parts[1]]:
            return _api_resource_list(parts[1], parts[2])
    return None


@cache
def _aggregated_document(path: str, version: str) -> dict:
    return _aggregated(path == "/api", version)


def document(path: str, accept: str = "") -> tuple[str, dict] | None:
    """(Content-Type, document) of the discovery document at `path`, as `accept` asks; None
    when `path` is not one. Callers must not mutate the (cached) document."""
    path = path.rstrip("/") or "/"
    if path in ("/api", "/apis"):
        version = aggregated_version(accept)
        if version is not None:
            return aggregated_content_type(version), _aggregated_document(path, version)
    doc = _legacy(path)
    return None if doc is None else (JSON, doc)
