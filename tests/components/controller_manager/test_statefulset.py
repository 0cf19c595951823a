"""The StatefulSet controller in a real controller-manager process against a real apiserver (no
kubelet: the test marks pods Running and Ready): ordered creation with its events and revision,
a claim per pod, a scale-down, the set's deletion taking its pods and revisions (and its claims
as the retention policy says) through the garbage collector, and kill -9 in the middle of a
scale-up never making a second pod of one name nor a pod beyond the replicas."""
from __future__ import annotations

import pytest

from tests.conftest import wait_for

from . import PodCensus, cluster, controlled_by  # noqa: F401  (cluster: a fixture)


@pytest.fixture(scope="module")
def cm(cluster):
    return cluster.controller_manager("--controllers", "statefulset,garbagecollector,pvc-protection")


def statefulset(name: str, replicas: int, claims: bool = False, retention: dict | None = None) -> dict:
    spec = {"replicas": replicas, "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"containers": [{"name": "c", "image": "busybox",
                                                  "command": ["sleep", "1000"]}]}}}
    if claims:
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    if retention:
        spec["persistentVolumeClaimRetentionPolicy"] = retention
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": spec}


def names(objs) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def ready_in_order(cluster, ns: str, expected: list[str]) -> list[str]:
    """Play the kubelet for the pods `expected` (marking each Running and Ready when it shows
    up) until they all run; the order in which the pods appeared."""
    seen: list[str] = []

    def step():
        pods = cluster.pods(ns)
        for pod in sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"]):
            name = pod["metadata"]["name"]
            if name not in seen:
                seen.append(name)
            if name in expected and (pod.get("status") or {}).get("phase") != "Running":
                cluster.mark_ready(pod)
        running = {p["metadata"]["name"] for p in pods
                   if (p.get("status") or {}).get("phase") == "Running"}
        return set(expected) <= running
    wait_for(step, message=f"pods {expected} running")
    return seen


def test_ordered_creation_claims_events_revision_and_scale_down(cluster, cm):
    api, ns = cluster.api, cluster.namespace("sts-basic")
    sts = api.create("statefulsets", statefulset("web", 3, claims=True), namespace=ns)
    assert ready_in_order(cluster, ns, ["web-0", "web-1", "web-2"]) == ["web-0", "web-1", "web-2"]
    pods = cluster.pods(ns)
    assert all(controlled_by(p, sts) for p in pods)
    assert names(api.list("persistentvolumeclaims", namespace=ns)["items"]) == \
        ["data-web-0", "data-web-1", "data-web-2"]
    (revision,) = api.list("controllerrevisions", namespace=ns)["items"]
    assert {p["metadata"]["labels"]["controller-revision-hash"] for p in pods} == \
        {revision["metadata"]["name"]}

    def status():
        return api.get("statefulsets", "web", namespace=ns).get("status") or {}
    wait_for(lambda: status().get("readyReplicas") == 3 and status().get(
        "currentRevision") == revision["metadata"]["name"], message="status: 3 ready")
    wait_for(lambda: {e["message"] for e in cluster.events(ns, "SuccessfulCreate", "web")} >= {
        "create Pod web-0 in StatefulSet web successful",
        "create Claim data-web-2 Pod web-2 in StatefulSet web success"},
        message="SuccessfulCreate events")

    api.patch("statefulsets", "web", {"spec": {"replicas": 1}}, namespace=ns)
    # (the order is the core's test's and the end-to-end test's: unbound pods go at once)
    wait_for(lambda: names(cluster.pods(ns)) == ["web-0"], message="web-2 and web-1 deleted")
    # an Event is written after the delete it tells of returns: it may land after the pod is gone
    wait_for(lambda: {e["message"] for e in cluster.events(ns, "SuccessfulDelete", "web")} == {
        "delete Pod web-2 in StatefulSet web successful",
        "delete Pod web-1 in StatefulSet web successful"}, message="a SuccessfulDelete event per pod")


def test_kill_9_during_a_scale_up_makes_no_second_pod_of_a_name(cluster, cm):
    api, ns = cluster.api, cluster.namespace("sts-kill")
    census = PodCensus(cluster.endpoint, ns)
    try:
        api.create("statefulsets", statefulset("db", 4), namespace=ns)
        ready_in_order(cluster, ns, ["db-0", "db-1"])
        cm.kill()   # about to create db-2
        cm.start()
        assert ready_in_order(cluster, ns, ["db-0", "db-1", "db-2", "db-3"])
        assert names(cluster.pods(ns)) == ["db-0", "db-1", "db-2", "db-3"]
    finally:
        census.stop()
    assert census.most == 4


@pytest.mark.parametrize("when_deleted", ["Retain", "Delete"])
def test_deleting_the_set_takes_its_pods_revisions_and_claims_as_the_policy_says(
        cluster, cm, when_deleted):
    api, ns = cluster.api, cluster.namespace(f"sts-delete-{when_deleted.lower()}")
    api.create("statefulsets", statefulset("db", 2, claims=True,
                                           retention={"whenDeleted": when_deleted}), namespace=ns)
    ready_in_order(cluster, ns, ["db-0", "db-1"])
    claims = lambda: names(api.list("persistentvolumeclaims", namespace=ns)["items"])  # noqa: E731
    assert claims() == ["data-db-0", "data-db-1"]
    api.delete("statefulsets", "db", namespace=ns)
    wait_for(lambda: not cluster.pods(ns, active_only=False), message="the pods collected")
    wait_for(lambda: not api.list("controllerrevisions", namespace=ns)["items"],
             message="the revisions collected")
    if when_deleted == "Delete":
        wait_for(lambda: claims() == [], message="the claims collected")
    else:
        assert claims() == ["data-db-0", "data-db-1"]
