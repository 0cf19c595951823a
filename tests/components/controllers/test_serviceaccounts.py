"""The ServiceAccount controller's core: a "default" ServiceAccount in every active namespace."""
from __future__ import annotations

from components.controllers import CreateObject
from components.controllers.serviceaccounts import is_active, sync_service_accounts


def namespace(name="team", *, phase="Active", deleting=False):
    meta = {"name": name, "uid": "ns-uid"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta, "status": {"phase": phase}}


def test_a_namespace_without_its_default_service_account_gets_one():
    assert sync_service_accounts(namespace(), {}) == [CreateObject("team", {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "default", "namespace": "team"}})]


def test_a_namespace_with_it_needs_nothing():
    assert sync_service_accounts(namespace(), {"default": {"metadata": {"name": "default"}}}) == []


def test_gone_or_terminating_namespaces_get_nothing():
    assert sync_service_accounts(None, {}) == []
    assert sync_service_accounts(namespace(deleting=True), {}) == []
    assert sync_service_accounts(namespace(phase="Terminating"), {}) == []


def test_a_namespace_without_status_yet_is_active():
    ns = namespace()
    del ns["status"]
    assert is_active(ns)
