"""What an HTTP request asks for, read from its method, path and query as k8s.io/apiserver's
RequestInfoFactory reads it (endpoints/request/requestinfo.go). Pure.

    /api/v1/namespaces/default/pods/web/log      -> get pods/log "web" in "default"
    /apis/apps/v1/deployments?watch=1            -> watch deployments.apps (all namespaces)
    /api/v1/namespaces/default/status (PUT)      -> update namespaces/status "default"
    DELETE /api/v1/namespaces/default/pods       -> deletecollection pods in "default"
    /healthz, /version, /openapi/v3              -> a non-resource request, verb = the method

Anything the authorizer and the router need comes from here, once, so both read the same thing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs

from kubemu.api import fields

API_PREFIXES = ("api", "apis")
GROUPLESS_PREFIXES = ("api",)
SPECIAL_VERBS = ("proxy", "watch")           # /api/v1/watch/pods: the legacy watch paths
SPECIAL_VERBS_NO_SUBRESOURCES = ("proxy",)
NAMESPACE_SUBRESOURCES = ("status", "finalize")
METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}
FALSE_WORDS = ("false", "0")


class RequestInfoError(ValueError):
    """A path under /api or /apis that names a verb but no resource (/api/v1/watch)."""


@dataclass(frozen=True)
class RequestInfo:
    is_resource_request: bool
    path: str
    verb: str
    api_prefix: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: tuple[str, ...] = field(default=())


def _split(path: str) -> list[str]:
    path = path.strip("/")
    return path.split("/") if path else []


def _query(query: str | dict) -> dict[str, list[str]]:
    if isinstance(query, str):
        return parse_qs(query, keep_blank_values=True)
    return {k: (list(v) if isinstance(v, (list, tuple)) else [v]) for k, v in query.items()}


def _watch_requested(values: list[str]) -> bool:
    """ListOptions' watch: strconv.ParseBool, and on a value it cannot parse, anything but
    false/0 still counts as a watch (as the factory's fallback does)."""
    return bool(values) and values[0].lower() not in FALSE_WORDS and values[0] not in ("f", "F")


def _exact_name(field_selector: str) -> str:
    """The name a field selector requires (metadata.name=x or ==), if it is a valid path
    segment (path.IsValidPathSegmentName), else ""."""
    try:
        name = fields.parse_field_selector(field_selector).requires_exact_match("metadata.name")
    except fields.FieldSelectorError:
        return ""
    return name if name and name not in (".", "..") and "/" not in name and "%" not in name else ""


def request_info(method: str, path: str, query: str | dict = "") -> RequestInfo:
    """The RequestInfo of one request; raises RequestInfoError for /api(s)/<v>/watch with nothing after."""
    method = method.upper()
    parts = _split(path)
    plain = RequestInfo(False, path, method.lower())
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return plain
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_PREFIXES:
        if len(parts) < 3:  # /apis/<group>/<version> is discovery, not a resource
            return plain
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]
    if parts and parts[0] in SPECIAL_VERBS:
        if len(parts) < 2:
            raise RequestInfoError(f"unable to determine kind and namespace from url, {path}")
        verb, parts = parts[0], parts[1:]
    else:
        verb = METHOD_VERBS.get(method, "")
    namespace = ""
    if parts and parts[0] == "namespaces":
        if len(parts) > 1:
            namespace = parts[1]
            if len(parts) > 2 and parts[2] not in NAMESPACE_SUBRESOURCES:
                parts = parts[2:]
    resource = name = subresource = ""
    if len(parts) >= 3 and verb not in SPECIAL_VERBS_NO_SUBRESOURCES:
        subresource = parts[2]
    if len(parts) >= 2:
        name = parts[1]
    if parts:
        resource = parts[0]
    if not name and verb == "get":
        q = _query(query)
        verb = "watch" if _watch_requested(q.get("watch", [])) else "list"
        name = _exact_name((q.get("fieldSelector") or [""])[0])
    if not name and verb == "delete":
        verb = "deletecollection"
    return RequestInfo(True, path, verb, prefix, group, version, namespace, resource, subresource,
                       name, tuple(parts))
