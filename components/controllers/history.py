"""ControllerRevisions: the recorded history of a StatefulSet's or DaemonSet's pod template
(a re-implementation of k8s pkg/controller/history, pure).

A revision holds ``data`` (for a StatefulSet, the patch ``{"spec": {"template": {...,
"$patch": "replace"}}}`` that restores its template), a ``revision`` number, the owner's template
labels plus ``controller.kubernetes.io/hash``, and a controller ownerReference. Its name is
``<owner>-<hash>``. The hash is upstream's HashControllerRevision: 32-bit FNV-1 over the data's
JSON (Go's encoding: sorted keys, compact, HTML characters escaped) followed by the decimal
collision count, the decimal of the sum rendered with SafeEncodeString's alphabet. When a name
is taken by a revision with other data, the owner's ``status.collisionCount`` is bumped and the
next hash differs.
"""
from __future__ import annotations

import copy
import json
from typing import Iterable

from components.controllers.podutil import (fnv1_32, meta, owner_reference, parse_time,
                                            safe_encode)

HASH_LABEL = "controller.kubernetes.io/hash"
_MAX_PREFIX = 223  # names stay within 253 bytes (ControllerRevisionName)


def go_json(value) -> bytes:
    """``value`` serialised as Go's json.Marshal does for an unstructured map: sorted keys,
    no spaces, UTF-8, and <, >, &, U+2028, U+2029 escaped."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                          ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(char, escaped)
    return text.encode()


def revision_hash(data: dict, collision_count: int | None = None) -> str:
    """The hash of a revision's data (upstream HashControllerRevision)."""
    raw = go_json(data)
    if collision_count is not None:
        raw += str(int(collision_count)).encode()
    return safe_encode(str(fnv1_32(raw)))


def template_data(owner: dict) -> dict:
    """upstream getPatch (StatefulSet and DaemonSet alike): the data of a revision of
    ``owner``, a strategic-merge patch replacing its pod template."""
    template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def template_of(revision: dict) -> dict:
    """The pod template a revision restores (upstream ApplyRevision's effect on the spec)."""
    template = copy.deepcopy(((revision.get("data") or {}).get("spec") or {}).get("template")
                             or {})
    template.pop("$patch", None)
    return template


def revision_name(owner_name: str, hash_: str) -> str:
    return f"{owner_name[:_MAX_PREFIX]}-{hash_}"


def new_revision(owner: dict, data: dict, revision: int,
                 collision_count: int | None = None) -> dict:
    """A ControllerRevision of ``owner`` (a StatefulSet or DaemonSet dict with apiVersion and
    kind) holding ``data``: labels are the owner's template labels plus the hash, annotations
    the owner's (upstream newRevision copies them), a controller ownerReference."""
    om = meta(owner)
    template = (owner.get("spec") or {}).get("template") or {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    hash_ = revision_hash(data, collision_count)
    labels[HASH_LABEL] = hash_
    metadata = {"name": revision_name(om.get("name") or "", hash_),
                "namespace": om.get("namespace") or "default", "labels": labels,
                "ownerReferences": [owner_reference(owner, owner.get("kind") or "")]}
    if om.get("annotations"):
        metadata["annotations"] = dict(om["annotations"])
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": metadata,
            "data": copy.deepcopy(data), "revision": int(revision)}


def equal_revision(a: dict | None, b: dict | None) -> bool:
    """Whether two revisions hold semantically equal data (upstream EqualRevision)."""
    if a is None or b is None:
        return a is b
    return (a.get("data") or {}) == (b.get("data") or {})


def find_equal_revisions(revisions: Iterable[dict], needle: dict) -> list[dict]:
    """The revisions equal to ``needle``, in their given order."""
    return [r for r in revisions if equal_revision(r, needle)]


def _revision_number(revision: dict) -> int:
    try:
        return int(revision.get("revision") or 0)
    except (TypeError, ValueError):
        return 0


def sort_revisions(revisions: Iterable[dict]) -> list[dict]:
    """Oldest first: by revision number, then creation time, then name (upstream byRevision)."""
    def key(r: dict):
        created = parse_time(meta(r).get("creationTimestamp"))
        return (_revision_number(r), created if created is not None else 0.0,
                meta(r).get("name") or "")
    return sorted(revisions, key=key)


def next_revision(revisions: Iterable[dict]) -> int:
    """The number for a new revision: one more than the highest (1 for none)."""
    return max((_revision_number(r) for r in revisions), default=0) + 1
