"""The garbage collector's reconcile core (k8s pkg/controller/garbagecollector), as one pure pass
over every object that can own or be owned: ``sync_garbage(objects, now) -> list[action]``.

Identity is the uid: an ownerReference whose uid no object carries is *dangling* (an object with
the owner's name but another uid is a different object, so the owner counts as gone). Each owner
reference of a dependent is classified like k8s' attemptToDeleteItem does:

* dangling - no object with that uid;
* waiting  - the owner is being deleted in the foreground (deletionTimestamp + the
  ``foregroundDeletion`` finalizer);
* solid    - any other existing owner (including one being deleted with ``orphan``).

Per dependent (skipped while it is itself being deleted - it is never deleted twice):

* some solid owner: references to dangling / waiting owners (and to owners orphaning it) are
  removed with one ``PatchObject`` of ``metadata.ownerReferences``; the dependent stays.
* no solid owner: ``DeleteObject`` - policy Foreground when it waits on a foreground owner and has
  dependents of its own (the cascade continues down), else from its own finalizers (orphan ->
  Orphan, foregroundDeletion -> Foreground) or Background.

Per owner being deleted:

* ``orphan`` finalizer: its dependents lose their reference to it (as above); once no object
  references it any more, the finalizer is removed (``PatchObject`` of ``metadata.finalizers``).
* ``foregroundDeletion`` finalizer: its dependents are deleted (as above); once none with
  ``blockOwnerDeletion: true`` remains, the finalizer is removed and the API server can finish.

Both steps take two passes (dependents first, the finalizer when the cache shows them done), so a
failed write is simply redone on the next pass. ``owner_kinds`` (optional) lists the kinds the
caller's cache covers: references to other kinds are treated as solid, never as dangling.
``now`` is unused (GC has no timers) but kept for the common controller signature.
"""
from __future__ import annotations

from typing import Iterable

from components.controllers import DeleteObject, PatchObject
from components.controllers.podutil import is_terminating, meta

ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"


def _finalizers(obj: dict) -> list:
    return list(meta(obj).get("finalizers") or [])


def _refs(obj: dict) -> list[dict]:
    return list(meta(obj).get("ownerReferences") or [])


def is_orphaning(obj: dict) -> bool:
    return is_terminating(obj) and ORPHAN in _finalizers(obj)


def is_deleting_dependents(obj: dict) -> bool:
    return is_terminating(obj) and FOREGROUND in _finalizers(obj)


def _ident(obj: dict) -> tuple:
    m = meta(obj)
    return (obj.get("apiVersion") or "v1", obj.get("kind") or "", m.get("namespace"),
            m.get("name"), m.get("uid"))


def _patch(obj: dict, changes: dict) -> PatchObject:
    api_version, kind, namespace, name, uid = _ident(obj)
    return PatchObject(api_version, kind, namespace, name, uid, changes,
                       meta(obj).get("resourceVersion"))


def _delete(obj: dict, policy: str) -> DeleteObject:
    api_version, kind, namespace, name, uid = _ident(obj)
    return DeleteObject(api_version, kind, namespace, name, uid, policy)


def _sort_key(obj: dict) -> tuple:
    m = meta(obj)
    return (obj.get("kind") or "", m.get("namespace") or "", m.get("name") or "", m.get("uid") or "")


def sync_garbage(objects: Iterable[dict], now: float = 0.0,
                 owner_kinds: Iterable[str] | None = None) -> list:
    objects = sorted(objects, key=_sort_key)
    kinds = set(owner_kinds) if owner_kinds is not None else None
    by_uid = {meta(o).get("uid"): o for o in objects if meta(o).get("uid")}
    dependents: dict[str, list[dict]] = {}
    for obj in objects:
        for ref in _refs(obj):
            dependents.setdefault(ref.get("uid"), []).append(obj)

    actions: list = []

    # Dependents.
    for obj in objects:
        refs = _refs(obj)
        if not refs:
            continue
        if is_terminating(obj):  # never deleted twice, but still released by orphaning owners
            drop = {r.get("uid") for r in refs
                    if r.get("uid") in by_uid and is_orphaning(by_uid[r.get("uid")])}
            if drop:
                keep = [r for r in refs if r.get("uid") not in drop]
                actions.append(_patch(obj, {"metadata": {"ownerReferences": keep or None}}))
            continue
        solid, dangling, waiting, orphaning = [], [], [], []
        for ref in refs:
            owner = by_uid.get(ref.get("uid"))
            if owner is None:
                if kinds is not None and ref.get("kind") not in kinds:
                    solid.append(ref)  # outside our cache: can't tell, keep
                else:
                    dangling.append(ref)
            elif is_orphaning(owner):
                orphaning.append(ref)
                solid.append(ref)
            elif is_deleting_dependents(owner):
                waiting.append(ref)
            else:
                solid.append(ref)
        if solid:
            drop = {r.get("uid") for r in dangling + waiting + orphaning}
            if drop:
                keep = [r for r in refs if r.get("uid") not in drop]
                actions.append(_patch(obj, {"metadata": {"ownerReferences": keep or None}}))
            continue
        own_uid = meta(obj).get("uid")
        finalizers = _finalizers(obj)
        if waiting and dependents.get(own_uid):
            policy = "Foreground"
        elif ORPHAN in finalizers:
            policy = "Orphan"
        elif FOREGROUND in finalizers:
            policy = "Foreground"
        else:
            policy = "Background"
        actions.append(_delete(obj, policy))

    # Owners being deleted that wait for the GC.
    for obj in objects:
        if not is_terminating(obj):
            continue
        uid = meta(obj).get("uid")
        finalizers = _finalizers(obj)
        remove = set()
        if ORPHAN in finalizers and not dependents.get(uid):
            remove.add(ORPHAN)
        if FOREGROUND in finalizers and not any(
                ref.get("uid") == uid and ref.get("blockOwnerDeletion")
                for dep in dependents.get(uid, []) for ref in _refs(dep)):
            remove.add(FOREGROUND)
        if remove:
            keep = [f for f in finalizers if f not in remove]
            actions.append(_patch(obj, {"metadata": {"finalizers": keep or None}}))
    return actions


__all__ = ["sync_garbage", "ORPHAN", "FOREGROUND", "is_orphaning", "is_deleting_dependents"]
