"""The disruption controller in a real controller-manager process: a PDB's status follows its
pods, and an eviction's spent disruption holds until the evicted pod's replacement is Ready."""
from __future__ import annotations

import pytest

from kubemu import wire
from tests.conftest import wait_for

from . import cluster, replicaset  # noqa: F401  (cluster: a fixture)


@pytest.fixture(scope="module")
def cm(cluster):
    return cluster.controller_manager("--controllers", "replicaset,disruption")


def pdb_status(api, ns, name="web"):
    return api.get("poddisruptionbudgets", name, namespace=ns).get("status") or {}


def ready_all(cluster, ns, count):
    def done():
        pods = cluster.pods(ns)
        for p in pods:
            if (p.get("status") or {}).get("phase") != "Running":
                cluster.mark_ready(p)
        return len(pods) == count and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
    wait_for(done, message=f"{count} Ready pods")


def test_budget_follows_pods_and_evictions(cluster, cm):
    api, ns = cluster.api, cluster.namespace("pdb")
    api.create("replicasets", replicaset("web", 3), namespace=ns)
    api.create("poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}, namespace=ns)
    ready_all(cluster, ns, 3)
    wait_for(lambda: pdb_status(api, ns).get("disruptionsAllowed") == 1
             and pdb_status(api, ns).get("currentHealthy") == 3, message="1 disruption allowed")
    status = pdb_status(api, ns)
    assert (status["desiredHealthy"], status["expectedPods"], status["observedGeneration"]) == (2, 3, 1)
    assert status["conditions"][0]["reason"] == "SufficientPods"

    first, second = sorted(p["metadata"]["name"] for p in cluster.pods(ns))[:2]
    api.evict(first, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": first}}, namespace=ns)
    with pytest.raises(wire.TooManyRequests, match="Cannot evict pod as it would violate the pod's disruption budget."):
        api.evict(second, {}, namespace=ns)
    # the replacement becomes Ready: the budget allows one disruption again
    ready_all(cluster, ns, 3)
    wait_for(lambda: pdb_status(api, ns).get("disruptionsAllowed") == 1 and not pdb_status(api, ns).get("disruptedPods"),
             message="the disruption given back once the replacement is Ready")
    api.evict(second, {}, namespace=ns)

    api.patch("poddisruptionbudgets", "web", {"spec": {"minAvailable": 3}}, namespace=ns)
    ready_all(cluster, ns, 3)
    wait_for(lambda: pdb_status(api, ns).get("observedGeneration") == 2
             and pdb_status(api, ns).get("disruptionsAllowed") == 0, message="the new budget observed")
    assert pdb_status(api, ns)["conditions"][0]["reason"] == "InsufficientPods"
