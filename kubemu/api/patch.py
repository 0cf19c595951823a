"""Patching API objects the three ways `kubectl patch --type` does, without mutating inputs.

- `json_merge_patch` (RFC 7386, application/merge-patch+json): null deletes a key, objects merge
  recursively, anything else (lists included) replaces. `create_merge_patch(a, b)` is its inverse:
  `json_merge_patch(a, create_merge_patch(a, b)) == b` whenever b holds no null inside an object.
  `merged` is the same patch sharing what it does not reach (for callers that copy it anyway).
- `strategic_merge_patch` (application/strategic-merge-patch+json): like a merge patch, but the
  lists Kubernetes declares `patchStrategy: merge` are merged item by item on their merge key
  (containers by name, ports by containerPort, ...) instead of replaced. Supported directives:
  `$patch: delete` (on a list item: drop the item with that key; on an object: drop the field),
  `$patch: replace` (on an object: replace it; as a list item `{"$patch": "replace"}`: replace the
  whole list with the other items), `$patch: merge`, `$deleteFromPrimitiveList/<field>` and
  `$retainKeys`. `$setElementOrder/<field>` is accepted and ignored: merged lists keep the
  target's order with new items appended.
- `json_patch` (RFC 6902, application/json-patch+json): add, remove, replace, move, copy, test.

`apply_patch(obj, patch, patch_type)` dispatches on the type name or the content type.

Schemas are tables from a dotted path (list items written `[]`) to the merge key of the list at
that path; the key "" marks a list of scalars merged as a set (metadata.finalizers). Lists not in
the table are replaced, as Kubernetes does for lists without a patch strategy (tolerations, args).
"""
from __future__ import annotations

import copy
import json
from collections.abc import Mapping  # typing.Mapping's isinstance is several times slower
from typing import Any

from .limits import MAX_DEPTH, depth, json_too_deep_at

MERGE_SET = ""  # schema value for a list of scalars merged as a set

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/"
SET_ELEMENT_ORDER = "$setElementOrder/"


class PatchError(ValueError):
    """A patch that cannot be applied (bad shape, unknown directive, failed JSON Patch test)."""


# --- schemas -------------------------------------------------------------------------------

def _pod_spec(prefix: str) -> dict[str, str]:
    table = {"volumes": "name", "imagePullSecrets": "name", "hostAliases": "ip",
             "topologySpreadConstraints": "topologyKey", "schedulingGates": "name",
             "resourceClaims": "name"}
    for containers in ("containers", "initContainers", "ephemeralContainers"):
        table[containers] = "name"
        table[f"{containers}[].env"] = "name"
        table[f"{containers}[].ports"] = "containerPort"
        table[f"{containers}[].volumeMounts"] = "mountPath"
        table[f"{containers}[].volumeDevices"] = "devicePath"
    return {prefix + k: v for k, v in table.items()}


def _object_meta(prefix: str) -> dict[str, str]:
    return {f"{prefix}ownerReferences": "uid", f"{prefix}finalizers": MERGE_SET}


META_SCHEMA = _object_meta("metadata.")
POD_SCHEMA = {**META_SCHEMA, **_pod_spec("spec."), "status.conditions": "type",
              "status.podIPs": "ip", "status.hostIPs": "ip"}
_TEMPLATE = {**_object_meta("spec.template.metadata."), **_pod_spec("spec.template.spec.")}
WORKLOAD_SCHEMA = {**META_SCHEMA, **_TEMPLATE, "status.conditions": "type"}
POD_TEMPLATE_SCHEMA = {**META_SCHEMA, **_object_meta("template.metadata."),
                       **_pod_spec("template.spec.")}
CRONJOB_SCHEMA = {**META_SCHEMA, **{"spec.jobTemplate." + k: v for k, v in _TEMPLATE.items()},
                  "status.active": "uid"}
SERVICE_SCHEMA = {**META_SCHEMA, "spec.ports": "port", "status.conditions": "type"}
NODE_SCHEMA = {**META_SCHEMA, "spec.podCIDRs": MERGE_SET, "status.addresses": "type",
               "status.conditions": "type"}

SCHEMAS: dict[str, dict[str, str]] = {
    "Pod": POD_SCHEMA, "PodTemplate": POD_TEMPLATE_SCHEMA,
    "ReplicaSet": WORKLOAD_SCHEMA, "Deployment": WORKLOAD_SCHEMA, "StatefulSet": WORKLOAD_SCHEMA,
    "DaemonSet": WORKLOAD_SCHEMA, "ReplicationController": WORKLOAD_SCHEMA, "Job": WORKLOAD_SCHEMA,
    "CronJob": CRONJOB_SCHEMA, "Service": SERVICE_SCHEMA, "Node": NODE_SCHEMA,
}


def schema_for(kind: str | None) -> dict[str, str]:
    """The merge-key table of a kind; unknown kinds get ObjectMeta's lists only."""
    return SCHEMAS.get(kind or "", META_SCHEMA)


_IMMUTABLE = frozenset({str, int, float, bool, bytes, type(None)})


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars; anything else is copy.deepcopy'd).
    Three times copy.deepcopy's speed: that one keeps a memo for the cycles and shared parts a
    decoded JSON value never has (a part found twice is copied twice: the copies are independent)."""
    t = type(value)
    if t is dict:
        return {k: json_copy(v) for k, v in value.items()}
    if t is list:
        return [json_copy(v) for v in value]
    if t in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


# --- RFC 7386 JSON merge patch -------------------------------------------------------------

def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch(target, patch), returning a new value that shares nothing with either."""
    return json_copy(merged(target, patch))


def merged(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch(target, patch) copying only the maps the patch reaches into: the
    result shares every other part with `target`, and the values it sets with `patch`. For a
    caller that copies the result before changing any part of it (the apiserver's defaulting
    does), so a patched object is copied once, not twice."""
    if not _is_map(patch):
        return patch
    result = dict(target) if _is_map(target) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        elif _is_map(v):
            result[k] = merged(result.get(k), v)
        else:
            result[k] = v
    return result


_NOT_MAPS = frozenset({str, int, float, bool, list})


def _is_map(value: Any) -> bool:
    # by type first: a decoded value's parts are these, and isinstance of an ABC runs Python code
    t = type(value)
    return t is dict or (t not in _NOT_MAPS and isinstance(value, Mapping))


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: unlike Python's ==, true is not 1 (but 1 is 1.0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def create_merge_patch(original: Any, modified: Any) -> Any:
    """The RFC 7386 patch turning `original` into `modified` (what `kubectl apply` computes).

    Removed keys become null; changed objects recurse; anything else is sent whole.
    """
    if not isinstance(original, Mapping) or not isinstance(modified, Mapping):
        return json_copy(modified)
    patch: dict[str, Any] = {}
    for k in original:
        if k not in modified:
            patch[k] = None
    for k, v in modified.items():
        if k not in original:
            patch[k] = json_copy(v)
        elif not json_equal(original[k], v):
            if isinstance(original[k], Mapping) and isinstance(v, Mapping):
                patch[k] = create_merge_patch(original[k], v)
            else:
                patch[k] = json_copy(v)
    return patch


# --- strategic merge patch -----------------------------------------------------------------

_DELETE = object()  # a value that removes its field


def strategic_merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any],
                          schema: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Apply a strategic merge patch; `schema` defaults to `schema_for(target["kind"])`."""
    if not isinstance(patch, Mapping):
        raise PatchError(f"a strategic merge patch must be an object, not {_json_type(patch)}")
    if target is None:
        target = {}
    if not isinstance(target, Mapping):
        raise PatchError(f"cannot strategic-merge-patch {_json_type(target)}")
    if schema is None:
        schema = schema_for(target.get("kind") if isinstance(target.get("kind"), str) else None)
    result = _merge_map(json_copy(dict(target)), patch, schema, "")
    return {} if result is _DELETE else result


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _merge_map(original: dict, patch: Mapping, schema: Mapping[str, str], path: str) -> Any:
    directive = patch.get(DIRECTIVE, "merge")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        stripped = {k: v for k, v in patch.items() if k != DIRECTIVE}
        return _merge_map({}, stripped, schema, path)
    if directive != "merge":
        raise PatchError(f"unknown patch type: {directive} in map: {_show(patch)}")
    # deletions from primitive lists first, so a patch may both remove and add values
    for k, v in patch.items():
        if isinstance(k, str) and k.startswith(DELETE_FROM_PRIMITIVE_LIST):
            name = k[len(DELETE_FROM_PRIMITIVE_LIST):]
            if not isinstance(v, list):
                raise PatchError(f"{k} must be a list, not {_json_type(v)}")
            if isinstance(original.get(name), list):
                original[name] = [x for x in original[name]
                                  if not any(json_equal(x, d) for d in v)]
    for k, v in patch.items():
        if k in (DIRECTIVE, RETAIN_KEYS) or (isinstance(k, str) and (
                k.startswith(DELETE_FROM_PRIMITIVE_LIST) or k.startswith(SET_ELEMENT_ORDER))):
            continue
        if v is None:
            original.pop(k, None)
            continue
        merged = _merge_value(original.get(k), v, schema, _child(path, k))
        if merged is _DELETE:
            original.pop(k, None)
        else:
            original[k] = merged
    retain = patch.get(RETAIN_KEYS)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError(f"{RETAIN_KEYS} must be a list, not {_json_type(retain)}")
        for k in list(original):
            if k not in retain:
                del original[k]
    return original


def _merge_value(original: Any, patch: Any, schema: Mapping[str, str], path: str) -> Any:
    if isinstance(patch, Mapping):
        return _merge_map(original if isinstance(original, dict) else {}, patch, schema, path)
    if isinstance(patch, list):
        if path in schema:
            return _merge_list(original if isinstance(original, list) else [], patch,
                               schema[path], schema, path)
        return _replace_list(patch)
    return patch


def _replace_list(patch: list) -> list:
    return [json_copy(x) for x in patch
            if not (isinstance(x, Mapping) and x.get(DIRECTIVE) == "replace" and len(x) == 1)]


def _merge_list(original: list, patch: list, key: str, schema: Mapping[str, str],
                path: str) -> list:
    item_path = path + "[]"
    if any(isinstance(x, Mapping) and x.get(DIRECTIVE) == "replace" and len(x) == 1
           for x in patch):
        original = []
        patch = [x for x in patch if not (isinstance(x, Mapping) and len(x) == 1
                                          and x.get(DIRECTIVE) == "replace")]
    if key == MERGE_SET:
        result = list(original)
        for x in patch:
            if isinstance(x, Mapping) and DIRECTIVE in x:
                raise PatchError(f"unknown patch type: {x[DIRECTIVE]} in list of scalars at {path}")
            if not any(json_equal(x, y) for y in result):
                result.append(json_copy(x))
        return result
    result = list(original)
    for item in patch:
        if not isinstance(item, Mapping):
            raise PatchError(f"{path}: expected a list of objects merged by {key!r}, "
                             f"found {_show(item)}")
        if key not in item:
            raise PatchError(f"map: {_show(item)} does not contain declared merge key: {key}")
        want = item[key]
        directive = item.get(DIRECTIVE, "merge")
        if directive == "delete":
            result = [x for x in result
                      if not (isinstance(x, Mapping) and key in x and json_equal(x[key], want))]
            continue
        for i, x in enumerate(result):
            if isinstance(x, Mapping) and key in x and json_equal(x[key], want):
                merged = _merge_map(x if isinstance(x, dict) else dict(x), item, schema, item_path)
                result[i] = merged
                break
        else:
            result.append(_merge_map({}, item, schema, item_path))
    return [x for x in result if x is not _DELETE]


# --- RFC 6902 JSON Patch -------------------------------------------------------------------

def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError(f"JSON Pointer must be a string, not {_json_type(path)}")
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON Pointer must be empty or start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(token: str, size: int, *, allow_end: bool, path: str) -> int:
    if allow_end and token == "-":
        return size
    if not token.isdigit() or not token.isascii() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"invalid array index {token!r} in {path!r}")
    i = int(token)
    if i > size or (i == size and not allow_end):
        raise PatchError(f"array index {i} out of bounds in {path!r}")
    return i


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("the root has no parent")
    node = doc
    for t in tokens[:-1]:
        node = _step(node, t, path)
    return node, tokens[-1]


def _step(node: Any, token: str, path: str) -> Any:
    if isinstance(node, dict):
        if token not in node:
            raise PatchError(f"path {path!r} does not exist: no key {token!r}")
        return node[token]
    if isinstance(node, list):
        return node[_index(token, len(node), allow_end=False, path=path)]
    raise PatchError(f"path {path!r} does not exist: {_json_type(node)} has no children")


def _get(doc: Any, path: str) -> Any:
    node = doc
    for t in _pointer(path):
        node = _step(node, t, path)
    return node


def _add(doc: Any, path: str, value: Any) -> Any:
    if _pointer(path) == []:
        return value
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), allow_end=True, path=path), value)
    else:
        raise PatchError(f"cannot add at {path!r}: parent is {_json_type(parent)}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    if _pointer(path) == []:
        raise PatchError("cannot remove the root")
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"cannot remove {path!r}: no such key")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(last, len(parent), allow_end=False, path=path))
    raise PatchError(f"cannot remove {path!r}: parent is {_json_type(parent)}")


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902: apply `operations` in order to a copy of `target`; all or nothing."""
    if not isinstance(operations, list):
        raise PatchError(f"a JSON Patch must be a list of operations, not {_json_type(operations)}")
    doc = json_copy(target)
    for n, op in enumerate(operations):
        if not isinstance(op, Mapping):
            raise PatchError(f"operation {n} must be an object, not {_json_type(op)}")
        kind = op.get("op")
        if "path" not in op:
            raise PatchError(f"operation {n} ({kind}) is missing \"path\"")
        path = op["path"]

        def value() -> Any:
            if "value" not in op:
                raise PatchError(f"operation {n} ({kind}) is missing \"value\"")
            return json_copy(fits(op["value"]))

        def fits(new: Any) -> Any:
            """`new` if placing it at `path` keeps the document within MAX_DEPTH (a copy into
            its own subtree, repeated, would otherwise nest without bound)."""
            if len(_pointer(path)) + depth(new) > MAX_DEPTH:
                raise PatchError(f"operation {n} ({kind}) would nest the object more than {MAX_DEPTH} "
                                 "levels deep (the limit)")
            return new

        def source() -> str:
            if "from" not in op:
                raise PatchError(f"operation {n} ({kind}) is missing \"from\"")
            return op["from"]

        if kind == "add":
            doc = _add(doc, path, value())
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            new = value()
            if _pointer(path) == []:
                doc = new
            else:
                _get(doc, path)  # must exist
                doc, _ = _remove(doc, path)
                doc = _add(doc, path, new)
        elif kind == "move":
            src = source()
            if path != src and path.startswith(src + "/"):
                raise PatchError(f"cannot move {src!r} into its own child {path!r}")
            if path != src:
                doc, moved = _remove(doc, src)
                doc = _add(doc, path, fits(moved))
            else:
                _get(doc, src)
        elif kind == "copy":
            doc = _add(doc, path, json_copy(fits(_get(doc, source()))))
        elif kind == "test":
            if not json_equal(_get(doc, path), op.get("value")) or "value" not in op:
                raise PatchError(f"test operation {n} failed: {path!r} is not "
                                 f"{_show(op.get('value'))}")
        else:
            raise PatchError(f"operation {n}: unknown op {_show(kind)}; expected add, remove, "
                             "replace, move, copy or test")
    return doc


# --- dispatch ------------------------------------------------------------------------------

PATCH_TYPES = {
    "merge": "merge", "application/merge-patch+json": "merge",
    "strategic": "strategic", "application/strategic-merge-patch+json": "strategic",
    "json": "json", "application/json-patch+json": "json",
}


def apply_patch(obj: Mapping[str, Any], patch: Any, patch_type: str,
                schema: Mapping[str, str] | None = None, *, shared: bool = False) -> dict[str, Any]:
    """Patch an API object as the apiserver does for `kubectl patch --type=<patch_type>`.

    `patch` may be the decoded value or its JSON text/bytes. The result must be an object.
    `shared`: the result may share parts with `obj` and `patch` (a merge patch's does, as
    `merged`), for a caller that copies it before changing it.
    """
    kind = PATCH_TYPES.get((patch_type or "").split(";")[0].strip().lower())
    if kind is None:
        raise PatchError(f"unsupported patch type {patch_type!r}: accepted types are json "
                         "(application/json-patch+json), merge (application/merge-patch+json) "
                         "and strategic (application/strategic-merge-patch+json)")
    if isinstance(patch, (bytes, bytearray, str)):
        text = patch if isinstance(patch, str) else bytes(patch).decode("utf-8", "replace")
        if json_too_deep_at(text) is not None:  # before the decoder, which recurses
            raise PatchError(f"invalid JSON in {kind} patch: nested more than {MAX_DEPTH} levels deep (the limit)")
        try:
            patch = json.loads(patch)
        except ValueError as e:
            raise PatchError(f"invalid JSON in {kind} patch: {e}") from None
    if kind == "merge":
        result = merged(obj, patch) if shared else json_merge_patch(obj, patch)
    elif kind == "strategic":
        result = strategic_merge_patch(obj, patch, schema)
    else:
        result = json_patch(obj, patch)
    if not isinstance(result, dict):
        raise PatchError(f"the patched object must be a JSON object, not {_json_type(result)}")
    return result


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except ValueError:
        text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."
