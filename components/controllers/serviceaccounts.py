"""The ServiceAccount controller's reconcile core (k8s pkg/controller/serviceaccount's
ServiceAccountsController): every active namespace has a ServiceAccount named "default".

``sync_service_accounts(namespace, existing) -> [CreateObject]`` is pure: the namespace (None
when gone) and the cached ServiceAccounts of it that the controller ensures, by name, in;
the creates of the missing ones out. A namespace being deleted gets nothing (the namespace
controller is emptying it).
"""
from __future__ import annotations

from collections.abc import Mapping

from components.controllers import CreateObject
from components.controllers.podutil import is_terminating, meta

DEFAULT = "default"
ENSURED = (DEFAULT,)   # the ServiceAccounts kube-controller-manager ensures (its default options)


def is_active(namespace: dict | None) -> bool:
    """A namespace that exists and is not being deleted."""
    return namespace is not None and not is_terminating(namespace) \
        and (namespace.get("status") or {}).get("phase", "Active") == "Active"


def sync_service_accounts(namespace: dict | None, existing: Mapping[str, dict]) -> list:
    if not is_active(namespace):
        return []
    name = meta(namespace).get("name", "")
    return [CreateObject(name, {"apiVersion": "v1", "kind": "ServiceAccount",
                                "metadata": {"name": sa, "namespace": name}})
            for sa in ENSURED if sa not in existing]
