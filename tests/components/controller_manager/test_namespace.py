"""The namespace controller in a real controller-manager process: deleting a namespace deletes
what is in it (through the ReplicaSet's cascade too), then the namespace itself goes."""
from __future__ import annotations

import pytest

from kubemu.apiclient import NotFound
from tests.conftest import wait_for

from . import cluster, replicaset  # noqa: F401  (cluster: a fixture)


@pytest.fixture(scope="module")
def cm(cluster):
    return cluster.controller_manager("--controllers", "replicaset,garbagecollector,namespace")


def gone(api, resource: str, name: str, namespace: str | None = None) -> bool:
    try:
        api.get(resource, name, namespace)
        return False
    except NotFound:
        return True


def test_deleting_a_namespace_empties_it_then_removes_it(cluster, cm):
    ns = cluster.namespace("doomed")
    cluster.api.create("replicasets", replicaset("web", 3), namespace=ns)
    wait_for(lambda: len(cluster.pods(ns)) == 3, message="3 pods in the namespace")
    cluster.api.create("leases", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                  "metadata": {"name": "lock"}, "spec": {"holderIdentity": "me"}}, namespace=ns)
    deleting = cluster.api.delete("namespaces", ns)
    assert deleting["status"]["phase"] == "Terminating"
    wait_for(lambda: gone(cluster.api, "namespaces", ns), message="the namespace to be emptied and removed")
    assert cluster.api.list("pods", namespace=ns)["items"] == []
    assert cluster.api.list("replicasets", namespace=ns)["items"] == []
    assert cluster.api.list("leases", namespace=ns)["items"] == []
