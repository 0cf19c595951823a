"""The namespace controller's reconcile core (k8s pkg/controller/namespace, trimmed).

``sync_namespace(namespace, contents) -> NamespaceSync`` is pure: a Namespace and what is still
in it (every namespaced resource's objects, as listed live by the shell) in; actions out.

* A namespace that is not being deleted needs nothing.
* A terminating one (deletionTimestamp set; the apiserver keeps it while ``spec.finalizers``
  holds "kubernetes") has its contents deleted: a ``DeleteObject`` (Background propagation)
  for each object not already being deleted; pods get their own grace period, as in k8s.
  While anything is left, the shell looks again after ``RECHECK`` seconds.
* Once it is empty, ``FinalizeNamespace`` drops "kubernetes" from ``spec.finalizers``, and the
  apiserver removes the namespace when no finalizer is left.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from components.controllers import DeleteObject
from components.controllers.podutil import is_terminating, meta

FINALIZER = "kubernetes"
RECHECK = 1.0  # seconds between looks at a namespace whose contents are still going


@dataclass(frozen=True)
class FinalizeNamespace:
    """Update the namespace's ``spec.finalizers`` to ``finalizers`` (the finalize subresource)."""
    name: str
    uid: str
    finalizers: tuple


@dataclass(frozen=True)
class NamespaceSync:
    actions: list
    requeue_after: float | None = None


def sync_namespace(namespace: dict, contents: Mapping[str, Iterable[dict]]) -> NamespaceSync:
    if not is_terminating(namespace):
        return NamespaceSync([])
    left = [obj for objects in contents.values() for obj in objects]
    if left:
        actions = [DeleteObject(obj.get("apiVersion") or "v1", obj.get("kind") or "", meta(obj).get("namespace"),
                                meta(obj).get("name", ""), meta(obj).get("uid", ""))
                   for obj in sorted(left, key=lambda o: (o.get("kind") or "", meta(o).get("name", "")))
                   if not is_terminating(obj)]
        return NamespaceSync(actions, RECHECK)
    finalizers = list((namespace.get("spec") or {}).get("finalizers") or [])
    if FINALIZER not in finalizers:
        return NamespaceSync([])
    remaining = tuple(f for f in finalizers if f != FINALIZER)
    return NamespaceSync([FinalizeNamespace(meta(namespace).get("name", ""), meta(namespace).get("uid", ""),
                                            remaining)])
