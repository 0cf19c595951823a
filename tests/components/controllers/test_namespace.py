"""The namespace controller's core: a terminating namespace is emptied, then finalized."""
from __future__ import annotations

from components.controllers import DeleteObject
from components.controllers.namespace import RECHECK, FinalizeNamespace, sync_namespace


def ns(deleting: bool = True, finalizers=("kubernetes",)) -> dict:
    meta = {"name": "demo", "uid": "ns-uid"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta, "spec": {"finalizers": list(finalizers)}}


def obj(kind: str, name: str, api_version: str = "v1", deleting: bool = False) -> dict:
    meta = {"name": name, "namespace": "demo", "uid": f"{kind}-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-22T00:00:00Z"
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


def test_an_active_namespace_needs_nothing():
    assert sync_namespace(ns(deleting=False), {"pods": [obj("Pod", "p")]}).actions == []


def test_contents_are_deleted_and_looked_at_again():
    result = sync_namespace(ns(), {"pods": [obj("Pod", "p"), obj("Pod", "going", deleting=True)],
                                   "deployments": [obj("Deployment", "web", "apps/v1")]})
    assert result.actions == [DeleteObject("apps/v1", "Deployment", "demo", "web", "Deployment-web"),
                              DeleteObject("v1", "Pod", "demo", "p", "Pod-p")]
    assert result.requeue_after == RECHECK


def test_an_empty_namespace_is_finalized_keeping_other_finalizers():
    result = sync_namespace(ns(finalizers=("kubernetes", "example.com/keep")), {"pods": []})
    assert result.actions == [FinalizeNamespace("demo", "ns-uid", ("example.com/keep",))]
    assert sync_namespace(ns(finalizers=("example.com/keep",)), {}).actions == []
