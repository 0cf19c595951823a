"""The patch `kubectl apply` sends: a three-way merge of the last applied configuration
(original), the manifest (modified) and the live object (current).

    patch = three_way_patch(original, modified, current, schema)

Two parts, merged into one patch:

* deletions: what the manifest dropped since the last apply (original -> modified): a null,
  a `$patch: delete` item of a keyed list, or `$deleteFromPrimitiveList/<field>` of a set;
* changes: where the live object differs from the manifest (current -> modified), without
  deletions, so fields set by others (the scale, a controller's annotations) are kept.

`schema` is a strategic-merge schema (`kubemu.api.patch.schema_for(kind)`): lists it names are
merged item by item on their merge key, like the apiserver's strategic merge patch; other lists
are sent whole when they differ. With an empty schema the result is jsonmergepatch's
CreateThreeWayJSONMergePatch (every list atomic), fit for a JSON merge patch.
"""
from __future__ import annotations

import copy
from typing import Any, Mapping

from kubemu.api.patch import DELETE_FROM_PRIMITIVE_LIST, DIRECTIVE, MERGE_SET, json_equal

Schema = Mapping[str, str]


def three_way_patch(original: dict | None, modified: dict, current: dict, schema: Schema) -> dict:
    deletions = _deletions(original or {}, modified, schema, "")
    changes = _changes(current, modified, schema, "")
    return _merge(deletions, changes, schema, "")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _keyed(schema: Schema, path: str, *values: Any) -> str | None:
    """The merge key of the list at `path` ("" for a set of scalars) if it is merged, else None."""
    if path in schema and all(isinstance(v, list) for v in values):
        return schema[path]
    return None


def _find(items: list, key: str, value: Any) -> dict | None:
    return next((x for x in items if isinstance(x, dict) and key in x and json_equal(x[key], value)), None)


# --- original -> modified: what was removed -----------------------------------------------

def _deletions(original: Mapping, modified: Mapping, schema: Schema, path: str) -> dict:
    out: dict[str, Any] = {}
    for key, old in original.items():
        here = _child(path, key)
        if key not in modified:
            out[key] = None
            continue
        new = modified[key]
        merge_key = _keyed(schema, here, old, new)
        if isinstance(old, dict) and isinstance(new, dict):
            sub = _deletions(old, new, schema, here)
            if sub:
                out[key] = sub
        elif merge_key == MERGE_SET:
            gone = [v for v in old if not any(json_equal(v, n) for n in new)]
            if gone:
                out[DELETE_FROM_PRIMITIVE_LIST + key] = gone
        elif merge_key is not None:
            items = _item_deletions(old, new, merge_key, schema, here + "[]")
            if items:
                out[key] = items
    return out


def _item_deletions(old: list, new: list, merge_key: str, schema: Schema, item_path: str) -> list:
    items = []
    for item in old:
        if not isinstance(item, dict) or merge_key not in item:
            continue
        kept = _find(new, merge_key, item[merge_key])
        if kept is None:
            items.append({merge_key: item[merge_key], DIRECTIVE: "delete"})
            continue
        sub = _deletions(item, kept, schema, item_path)
        if sub:
            items.append({merge_key: item[merge_key], **sub})
    return items


# --- current -> modified: what the manifest sets differently ------------------------------

def _changes(current: Mapping, modified: Mapping, schema: Schema, path: str) -> dict:
    out: dict[str, Any] = {}
    for key, new in modified.items():
        here = _child(path, key)
        if key not in current:
            out[key] = copy.deepcopy(new)
            continue
        live = current[key]
        merge_key = _keyed(schema, here, live, new)
        if isinstance(live, dict) and isinstance(new, dict):
            sub = _changes(live, new, schema, here)
            if sub:
                out[key] = sub
        elif merge_key == MERGE_SET:
            missing = [v for v in new if not any(json_equal(v, x) for x in live)]
            if missing:
                out[key] = copy.deepcopy(missing)
        elif merge_key is not None:
            items = _item_changes(live, new, merge_key, schema, here + "[]")
            if items:
                out[key] = items
        elif not json_equal(live, new):
            out[key] = copy.deepcopy(new)
    return out


def _item_changes(live: list, new: list, merge_key: str, schema: Schema, item_path: str) -> list:
    items = []
    for item in new:
        if not isinstance(item, dict) or merge_key not in item:
            items.append(copy.deepcopy(item))  # the apiserver rejects it with the reason
            continue
        existing = _find(live, merge_key, item[merge_key])
        if existing is None:
            items.append(copy.deepcopy(item))
            continue
        sub = _changes(existing, item, schema, item_path)
        if sub:
            items.append({merge_key: item[merge_key], **sub})
    return items


# --- one patch of both ---------------------------------------------------------------------

def _merge(deletions: dict, changes: dict, schema: Schema, path: str) -> dict:
    out = dict(deletions)
    for key, change in changes.items():
        here = _child(path, key)
        gone = out.get(key)
        merge_key = _keyed(schema, here, gone, change)
        if isinstance(gone, dict) and isinstance(change, dict):
            out[key] = _merge(gone, change, schema, here)
        elif merge_key:
            out[key] = _merge_items(gone, change, merge_key, schema, here + "[]")
        else:
            out[key] = change
    return out


def _merge_items(gone: list, changed: list, merge_key: str, schema: Schema, item_path: str) -> list:
    items = list(gone)
    for item in changed:
        if not isinstance(item, dict) or merge_key not in item:
            items.append(item)
            continue
        same = _find(items, merge_key, item[merge_key])
        if same is None:
            items.append(item)
        else:
            items[items.index(same)] = _merge(same, item, schema, item_path)
    return items
