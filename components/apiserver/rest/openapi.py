"""The OpenAPI documents, generated from the resource table and the field tables. Pure.

    document(path) -> dict | None

for `/openapi/v2` (Swagger 2.0, every kind), `/openapi/v3` (the index: one serverRelativeURL per
group version, with a `?hash=` of its document) and `/openapi/v3/api/v1`,
`/openapi/v3/apis/<group>/<version>` (OpenAPI 3.0); None for any other path. A query string
(the index's `?hash=`) is ignored. Documents are built once and cached; callers must not mutate
them.

Schemas walk the field tables: `kubemu.api.meta.TYPES` / `kubemu.api.pod.TYPES` give each field's
type in Go's notation ("PodSpec", "[]Container", "map[string]string", "IntOrString"...), so Pod
leads to PodSpec, then to Container, ContainerPort... A type no table describes is published as an
open object (`x-kubernetes-preserve-unknown-fields`); a table without types falls back on its
SHAPES. Enumerations come from ENUMS, and the strategic-merge extensions
(`x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`) from `kubemu.api.patch`'s
per-kind tables, the ones the apiserver itself merges with, so kubectl's patches and the server's
merges agree. Every kind carries `x-kubernetes-group-version-kind`; every operation carries it as a
map, and PATCH lists the `fieldValidation` parameter (kubectl asks the server to validate fields
only when its PATCH says it can).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cache

from kubemu.api import meta, objects, patch, pod  # noqa: F401  (objects registers its tables)
from kubemu.api.resources import Resource

from .discovery import GIT_VERSION, SERVED, subresource_kind, subresource_verbs
from .discovery import gvk as _gvk

V2, V3 = "v2", "v3"
_REFS = {V2: "#/definitions/", V3: "#/components/schemas/"}

META_PACKAGE = "io.k8s.apimachinery.pkg.apis.meta.v1"
# Types that live in another package than the kinds that use them.
_PACKAGES = {
    **{t: META_PACKAGE for t in ("ObjectMeta", "OwnerReference", "LabelSelector",
                                 "LabelSelectorRequirement", "ManagedFieldsEntry", "ListMeta",
                                 "Time", "MicroTime", "Status")},
    "IntOrString": "io.k8s.apimachinery.pkg.util.intstr",
    "Quantity": "io.k8s.apimachinery.pkg.api.resource",
    "PodTemplateSpec": "io.k8s.api.core.v1",
    "ObjectReference": "io.k8s.api.core.v1",
    "RawExtension": "io.k8s.apimachinery.pkg.runtime",
}
# Named types that are strings on the wire.
_STRING_TYPES = {"IntOrString": {"type": "string", "format": "int-or-string",
                                 "description": "An integer or a string (\"25%\")."},
                 "Quantity": {"type": "string",
                              "description": "A quantity: 100m, 1.5, 128Mi, 1G..."},
                 "Time": {"type": "string", "format": "date-time",
                          "description": "An RFC 3339 date-time, in seconds."},
                 "MicroTime": {"type": "string", "format": "date-time",
                               "description": "An RFC 3339 date-time, in microseconds."}}
_PRIMITIVES = {"string": {"type": "string"}, "integer": {"type": "integer", "format": "int64"},
               "boolean": {"type": "boolean"}, "number": {"type": "number", "format": "double"},
               "[]byte": {"type": "string", "format": "byte"}}  # base64 on the wire
_SHAPE_TYPES = {pod.STR: "string", pod.INT: "integer", pod.BOOL: "boolean",
                pod.STRS: "[]string", pod.LIST: "[]", pod.OBJ: ""}
_OPEN = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}

# Short descriptions for `kubectl explain`: the fields every kind has, and the kinds.
_FIELD_DESCRIPTIONS = {
    "apiVersion": "The versioned schema of this representation of an object.",
    "kind": "The REST resource this object represents, in CamelCase.",
    "metadata": "Standard object's metadata.",
    "spec": "The desired state of the object.",
    "status": "The most recently observed state of the object, written by the system.",
}
_KIND_DESCRIPTIONS = {
    "Pod": "A group of containers scheduled together on one node (kubemu runs each container "
           "as a process under its shim).",
    "Namespace": "A scope for names.",
    "Node": "A worker node (in kubemu: a kubelet under its own init).",
    "Lease": "A lease, held by a component (leader election) or a node (heartbeats).",
    "ReplicaSet": "Keeps a number of identical pods running.",
    "Deployment": "Declarative updates of pods through ReplicaSets.",
    "Event": "A report of an event somewhere in the cluster.",
    "ServiceAccount": "An identity for processes that run in a pod.",
    "ConfigMap": "Configuration data for pods to consume.",
    "Secret": "Secret data (base64 in `data`).",
    "Scale": "The scale subresource: desired and observed replicas.",
}

PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json")
SCALE = ("autoscaling/v1", "Scale")
READ_ONLY = ("get", "list")


def _package(api_version: str) -> str:
    """io.k8s.api.<group's first label>.<version>: core/v1, apps/v1, rbac/v1..."""
    group, _, version = api_version.rpartition("/")
    return f"io.k8s.api.{group.split('.')[0] or 'core'}.{version}"


def _fields(type_name: str) -> dict[str, str] | None:
    """field -> type of a described type (None if no table describes it), as the Checker looks
    types up: meta's tables before pod.py's."""
    types = meta.TYPES.get(type_name) or pod.TYPES.get(type_name)
    known = meta.KNOWN_FIELDS.get(type_name) or pod.KNOWN_FIELDS.get(type_name)
    if known is None:
        return dict(types) if types else None
    shapes = meta.SHAPES.get(type_name) or pod.SHAPES.get(type_name, {})
    types = types or {}
    ordered = [f for f in types if f in known] + sorted(f for f in known if f not in types)
    return {f: types.get(f, _SHAPE_TYPES.get(shapes.get(f, ""), "")) for f in ordered}


_ROOT_FIELDS = {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta"}


def _described(type_name: str) -> dict[str, str] | None:
    """The fields a schema lists: the tables', or for a kind no table describes (yet), the
    fields every kind has (its schema then keeps whatever else it is given)."""
    fields = _fields(type_name)
    if fields is None and type_name in _model().gvks:
        return dict(_ROOT_FIELDS)
    return fields


def _element(go_type: str) -> str:
    """The named type inside a list or map type ("map[string][]Foo" -> "Foo"); "" if none."""
    while go_type not in _PRIMITIVES:
        if go_type.startswith("[]"):
            go_type = go_type[2:]
        elif go_type.startswith("map[string]"):
            go_type = go_type[len("map[string]"):]
        else:
            return go_type
    return ""


def _enums(type_name: str) -> dict[str, tuple[str, ...]]:
    return meta.ENUMS.get(type_name) or pod.ENUMS.get(type_name, {})


# --- the model: every type reachable from the kinds, with its package and merge keys ----------

@dataclass
class _Model:
    packages: dict[str, str] = field(default_factory=dict)        # type -> package
    merge: dict[tuple[str, str], str] = field(default_factory=dict)  # (type, field) -> key
    gvks: dict[str, list[dict]] = field(default_factory=dict)     # root type -> [gvk]


def _roots() -> list[tuple[str, str, str]]:
    """(type, apiVersion, kind) of every kind served, then the kinds subresources speak."""
    roots = [(r.kind, r.api_version, r.kind) for r in SERVED]
    return roots + [(SCALE[1], *SCALE)]


@cache
def _model() -> _Model:
    m = _Model()
    for type_name, api_version, _ in _roots():  # a kind is of its own package, wherever it is used
        m.packages.setdefault(type_name, _package(api_version))
    for type_name, api_version, kind in _roots():
        m.gvks.setdefault(type_name, []).append(_gvk(api_version, kind))
        _visit(m, type_name, "", _package(api_version), patch.schema_for(kind), ())
    return m


def _visit(m: _Model, type_name: str, path: str, package: str, merge_keys: dict[str, str],
           stack: tuple[str, ...]) -> None:
    package = m.packages.setdefault(type_name, _PACKAGES.get(type_name, package))  # its parts' too
    fields = _fields(type_name)
    if not fields or type_name in stack:
        return
    for name, go_type in fields.items():
        field_path = f"{path}.{name}" if path else name
        if go_type.startswith("[]") and go_type not in _PRIMITIVES:
            if field_path in merge_keys:
                m.merge[(type_name, name)] = merge_keys[field_path]
            field_path += "[]"
        element = _element(go_type)
        if element:
            _visit(m, element, field_path, package, merge_keys, (*stack, type_name))


def definition_name(type_name: str) -> str:
    return f"{_model().packages.get(type_name) or _PACKAGES.get(type_name, META_PACKAGE)}." \
           f"{type_name}"


# --- schemas ---------------------------------------------------------------------------------------

def _type_schema(go_type: str, ref_prefix: str) -> dict:
    if go_type in _PRIMITIVES:
        return dict(_PRIMITIVES[go_type])
    if go_type.startswith("[]"):
        element = go_type[2:]
        return {"type": "array", "items": _type_schema(element, ref_prefix) if element
                else dict(_OPEN)}
    if go_type.startswith("map[string]"):
        return {"type": "object",
                "additionalProperties": _type_schema(go_type[len("map[string]"):], ref_prefix)}
    if not go_type:
        return dict(_OPEN)
    return {"$ref": ref_prefix + definition_name(go_type)}


def _definition(type_name: str, ref_prefix: str) -> dict:
    m = _model()
    if type_name in _STRING_TYPES:
        return dict(_STRING_TYPES[type_name])
    fields = _described(type_name)
    if fields is None:
        return {**_OPEN, "description": f"{type_name}: kubemu keeps it as given, "
                                        "without describing its fields."}
    properties = {}
    enums = _enums(type_name)
    for name, go_type in fields.items():
        prop = _type_schema(go_type, ref_prefix)
        if name in enums:
            prop["enum"] = list(enums[name])
        if (type_name, name) in m.merge:
            key = m.merge[(type_name, name)]
            prop["x-kubernetes-patch-strategy"] = "merge"
            if key != patch.MERGE_SET:
                prop["x-kubernetes-patch-merge-key"] = key
        if type_name in m.gvks and name in _FIELD_DESCRIPTIONS:
            prop["description"] = _FIELD_DESCRIPTIONS[name]
        properties[name] = prop
    schema = {"type": "object", "description": _KIND_DESCRIPTIONS.get(type_name, f"{type_name}."),
              "properties": properties}
    if type_name in m.gvks:
        schema["x-kubernetes-group-version-kind"] = m.gvks[type_name]
    if _fields(type_name) is None:
        schema["x-kubernetes-preserve-unknown-fields"] = True
    return schema


def _list_name(r: Resource) -> str:
    return f"{definition_name(r.kind).rpartition('.')[0]}.{r.list_kind}"


def _list_definition(r: Resource, ref_prefix: str) -> dict:
    return {"type": "object", "description": f"A list of {r.kind} objects.",
            "required": ["items"],
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": {"$ref": ref_prefix + definition_name("ListMeta")},
                           "items": {"type": "array",
                                     "items": {"$ref": ref_prefix + definition_name(r.kind)}}},
            "x-kubernetes-group-version-kind": [_gvk(r.api_version, r.list_kind)]}


_LIST_META = {"type": "object", "description": "ListMeta: the list's resourceVersion and "
              "continue token.",
              "properties": {"resourceVersion": {"type": "string"},
                             "continue": {"type": "string"},
                             "remainingItemCount": {"type": "integer", "format": "int64"},
                             "selfLink": {"type": "string"}}}
_STATUS = {"type": "object", "description": "Status: the result of an operation that returns "
           "no object, or of a failed one.",
           "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                          "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields":
                                       True},
                          "status": {"type": "string"}, "message": {"type": "string"},
                          "reason": {"type": "string"},
                          "details": {"type": "object",
                                      "x-kubernetes-preserve-unknown-fields": True},
                          "code": {"type": "integer", "format": "int32"}},
           "x-kubernetes-group-version-kind": [_gvk("v1", "Status")]}


def _definitions(resources: list[Resource], extra_roots: tuple[str, ...],
                 version: str) -> dict[str, dict]:
    """Every definition reachable from `resources` (and their lists) and `extra_roots`."""
    prefix = _REFS[version]
    out: dict[str, dict] = {definition_name("ListMeta"): _LIST_META,
                            definition_name("Status"): _STATUS}
    pending = [r.kind for r in resources] + list(extra_roots)
    for r in resources:
        if r.stored:
            out[_list_name(r)] = _list_definition(r, prefix)
    while pending:
        type_name = pending.pop()
        name = definition_name(type_name)
        if name in out:
            continue
        out[name] = _definition(type_name, prefix)
        pending += [e for e in map(_element, (_described(type_name) or {}).values()) if e]
    return dict(sorted(out.items()))


# --- paths -----------------------------------------------------------------------------------------

def _param(name: str, where: str, version: str, description: str, required: bool = False,
           kind: str = "string") -> dict:
    p = {"name": name, "in": where, "description": description, "uniqueItems": True}
    if required or where == "path":
        p["required"] = True
    if version == V2:
        p["type"] = kind
    else:
        p["schema"] = {"type": kind}
    return p


_WRITE_PARAMS = (("dryRun", "When present, only validate and report what would be done "
                            "(All)."),
                 ("fieldManager", "The name of the actor making these changes."),
                 ("fieldValidation", "How to treat unknown or duplicate fields: Ignore, Warn "
                                     "or Strict (the default)."))
_LIST_PARAMS = (("labelSelector", "string"), ("fieldSelector", "string"), ("limit", "integer"),
                ("continue", "string"), ("resourceVersion", "string"),
                ("resourceVersionMatch", "string"), ("watch", "boolean"),
                ("allowWatchBookmarks", "boolean"), ("timeoutSeconds", "integer"))


def _operation(version: str, op_id: str, action: str, gvk: dict, body: dict | None,
               response: dict | None, params: list[dict], consumes: tuple[str, ...] = ()) -> dict:
    op = {"operationId": op_id, "description": f"{action} {gvk['kind']}",
          "parameters": params, "x-kubernetes-action": action,
          "x-kubernetes-group-version-kind": gvk}
    if version == V2:
        op["consumes"] = list(consumes or ("application/json", "application/yaml"))
        op["produces"] = ["application/json", "application/yaml"]
        if body is not None:
            op["parameters"] = [{"name": "body", "in": "body", "required": True,
                                 "schema": body}, *params]
        op["responses"] = {"200": {"description": "OK", **({"schema": response}
                                                           if response else {})},
                           "401": {"description": "Unauthorized"}}
    else:
        if body is not None:
            op["requestBody"] = {"required": True, "content": {
                c: {"schema": body} for c in (consumes or ("*/*",))}}
        content = {"application/json": {"schema": response}} if response else \
            {"text/plain": {"schema": {"type": "string"}}}
        op["responses"] = {"200": {"description": "OK", "content": content},
                           "401": {"description": "Unauthorized"}}
    return op


def _camel(text: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in re.split(r"[.\-/]", text) if w)


def _paths(r: Resource, version: str) -> dict[str, dict]:
    prefix = _REFS[version]
    gvk = _gvk(r.api_version, r.kind)
    ref = {"$ref": prefix + definition_name(r.kind)}
    list_ref = {"$ref": prefix + _list_name(r)}
    status_ref = {"$ref": prefix + definition_name("Status")}
    base = f"/apis/{r.api_version}" if r.group else f"/api/{r.api_version}"
    gv = _camel(r.group.split(".")[0] or "core") + _camel(r.version)
    ns = "Namespaced" if r.namespaced else ""
    write = [_param(n, "query", version, d) for n, d in _WRITE_PARAMS]
    list_params = [_param(n, "query", version, n, kind=k) for n, k in _LIST_PARAMS]
    name_param = [_param("name", "path", version, f"name of the {r.kind}")]
    scope = [_param("namespace", "path", version, "object name and auth scope")] \
        if r.namespaced else []
    collection = f"{base}/namespaces/{{namespace}}/{r.plural}" if r.namespaced \
        else f"{base}/{r.plural}"
    paths: dict[str, dict] = {}
    if not r.stored:
        paths[collection] = {"parameters": scope, "post": _operation(
            version, f"create{gv}{ns}{r.kind}", "post", gvk, ref, ref, write)}
        return paths
    if set(r.verbs) == set(READ_ONLY):  # answered, never written: metrics.k8s.io
        paths[collection] = {"parameters": scope, "get": _operation(
            version, f"list{gv}{ns}{r.kind}", "list", gvk, None, list_ref, list_params)}
        if r.namespaced:
            paths[f"{base}/{r.plural}"] = {"get": _operation(
                version, f"list{gv}{r.kind}ForAllNamespaces", "list", gvk, None, list_ref, list_params)}
        paths[f"{collection}/{{name}}"] = {"parameters": name_param + scope, "get": _operation(
            version, f"read{gv}{ns}{r.kind}", "get", gvk, None, ref, [])}
        return paths
    paths[collection] = {
        "parameters": scope,
        "get": _operation(version, f"list{gv}{ns}{r.kind}", "list", gvk, None, list_ref,
                          list_params),
        "post": _operation(version, f"create{gv}{ns}{r.kind}", "post", gvk, ref, ref, write),
        "delete": _operation(version, f"deletecollection{gv}{ns}{r.kind}", "deletecollection",
                             gvk, None, status_ref, list_params + write[:1])}
    if r.namespaced:
        paths[f"{base}/{r.plural}"] = {"get": _operation(
            version, f"list{gv}{r.kind}ForAllNamespaces", "list", gvk, None, list_ref,
            list_params)}
    item = f"{collection}/{{name}}"
    paths[item] = {
        "parameters": name_param + scope,
        "get": _operation(version, f"read{gv}{ns}{r.kind}", "get", gvk, None, ref, []),
        "put": _operation(version, f"replace{gv}{ns}{r.kind}", "put", gvk, ref, ref, write),
        "patch": _operation(version, f"patch{gv}{ns}{r.kind}", "patch", gvk, {"type": "object"},
                            ref, write, PATCH_TYPES),
        "delete": _operation(version, f"delete{gv}{ns}{r.kind}", "delete", gvk, None, ref,
                             write[:1])}
    for sub in r.subresources:
        paths[f"{item}/{sub}"] = _subresource_path(r, sub, version, name_param + scope, write)
    return paths


_STREAMS = (("container", "string"), ("stdin", "boolean"), ("stdout", "boolean"), ("stderr", "boolean"),
            ("tty", "boolean"))
CONNECT_PARAMS = {"exec": (("command", "string"), *_STREAMS), "attach": _STREAMS,
                  "portforward": (("ports", "integer"),)}


def _subresource_path(r: Resource, sub: str, version: str, params: list[dict],
                      write: list[dict]) -> dict:
    prefix = _REFS[version]
    gvk = _gvk(*subresource_kind(r, sub))
    ref = {"$ref": prefix + definition_name(gvk["kind"])}  # what get/update/patch speak
    op_id = f"{_camel(r.group.split('.')[0] or 'core')}{_camel(r.version)}" \
            f"{'Namespaced' if r.namespaced else ''}{r.kind}{_camel(sub)}"
    path: dict = {"parameters": params}
    if sub in CONNECT_PARAMS:  # a stream (WebSocket over GET, SPDY over POST): kube's connect operations
        query = [_param(n, "query", version, n, kind=k) for n, k in CONNECT_PARAMS[sub]]
        for method in ("get", "post"):
            path[method] = _operation(version, f"connect{_camel(method)}{op_id}", "connect", gvk, None, None,
                                      query)
        return path
    for verb in subresource_verbs(sub):
        if sub == "log":  # text, not an object
            path["get"] = _operation(version, "read" + op_id, "get", gvk, None, None,
                                     [_param(n, "query", version, n, kind=k) for n, k in (
                                         ("container", "string"), ("follow", "boolean"),
                                         ("previous", "boolean"), ("tailLines", "integer"),
                                         ("sinceSeconds", "integer"),
                                         ("timestamps", "boolean"))])
        elif verb == "get":
            path["get"] = _operation(version, "read" + op_id, "get", gvk, None, ref, [])
        elif verb == "update":
            path["put"] = _operation(version, "replace" + op_id, "put", gvk, ref, ref, write)
        elif verb == "patch":
            path["patch"] = _operation(version, "patch" + op_id, "patch", gvk,
                                       {"type": "object"}, ref, write, PATCH_TYPES)
        elif verb == "create":
            path["post"] = _operation(version, "create" + op_id, "post", gvk,
                                      {"type": "object"}, {"type": "object"}, write)
    return path


# --- the documents -----------------------------------------------------------------------------

def _group_versions() -> dict[str, list[Resource]]:
    """"api/v1" / "apis/apps/v1" -> the resources served there."""
    out: dict[str, list[Resource]] = {}
    for r in SERVED:
        out.setdefault(f"apis/{r.api_version}" if r.group else f"api/{r.api_version}",
                       []).append(r)
    return out


def _extra_roots(resources: list[Resource]) -> tuple[str, ...]:
    """The Scale schema, where a resource has the scale subresource."""
    return (SCALE[1],) if any("scale" in r.subresources for r in resources) else ()


_INFO = {"title": "Kubernetes (kubemu)", "version": GIT_VERSION}


@cache
def _v2() -> dict:
    resources = list(SERVED)
    paths: dict[str, dict] = {}
    for r in resources:
        paths.update(_paths(r, V2))
    return {"swagger": "2.0", "info": _INFO, "paths": dict(sorted(paths.items())),
            "definitions": _definitions(resources, _extra_roots(resources), V2)}


@cache
def _v3(group_version: str) -> dict | None:
    resources = _group_versions().get(group_version)
    if resources is None:
        return None
    paths: dict[str, dict] = {}
    for r in resources:
        paths.update(_paths(r, V3))
    return {"openapi": "3.0.0", "info": _INFO, "paths": dict(sorted(paths.items())),
            "components": {"schemas": _definitions(resources, _extra_roots(resources), V3)}}


def _hash(doc: dict) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:128].upper()


@cache
def _v3_index() -> dict:
    return {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={_hash(_v3(gv))}"}
                      for gv in _group_versions()}}


def document(path: str) -> dict | None:
    """The OpenAPI document at `path` (a query string is ignored), or None."""
    path = path.partition("?")[0].rstrip("/")
    if path == "/openapi/v2":
        return _v2()
    if path == "/openapi/v3":
        return _v3_index()
    if path.startswith("/openapi/v3/"):
        return _v3(path[len("/openapi/v3/"):])
    return None
