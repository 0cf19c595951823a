"""Client-side `kubectl apply`: the last-applied-configuration annotation and the patch.

    modified = with_last_applied(manifest)          # what `create` sends for a new object
    patch = apply_patch(manifest, current)          # {} when the object is unchanged

The annotation holds the manifest as compact JSON with sorted keys (as kubectl writes it), so
the next apply knows which fields it set: a field dropped from the manifest is removed from
the object, a field set by someone else (and never in a manifest) is left alone.
"""
from __future__ import annotations

import copy
import json

from kubemu.api.patch import schema_for

from .threeway import three_way_patch

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
PATCH_TYPE = "strategic"  # the apiserver merges every kind it serves strategically


def _annotations(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("annotations") or {}


def last_applied_text(manifest: dict) -> str:
    """The annotation's value: the manifest without the annotation, as compact sorted JSON."""
    obj = copy.deepcopy(manifest)
    annotations = _annotations(obj)
    if LAST_APPLIED in annotations:
        del annotations[LAST_APPLIED]
        if not annotations:
            del obj["metadata"]["annotations"]
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def with_last_applied(manifest: dict) -> dict:
    obj = copy.deepcopy(manifest)
    meta = obj.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), LAST_APPLIED: last_applied_text(manifest)}
    return obj


def last_applied(current: dict) -> dict | None:
    """The configuration applied last, or None (created some other way, or unreadable)."""
    text = _annotations(current).get(LAST_APPLIED)
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def apply_patch(manifest: dict, current: dict) -> dict:
    """The strategic merge patch that applies `manifest` to the live object `current`."""
    return three_way_patch(last_applied(current), with_last_applied(manifest), current,
                           schema_for(manifest.get("kind")))
