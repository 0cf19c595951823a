"""The ReplicaSet controller in a real controller-manager process: create, scale down, replace a
deleted pod; and a kill -9 in the middle of a scale-up never leads to more pods than wanted."""
from __future__ import annotations

import asyncio
import copy

import pytest

from components.controller_manager.informers import SharedInformers
from components.controller_manager.replicaset import ReplicaSetController
from tests.conftest import wait_for

from . import PodCensus, cluster, controlled_by, replicaset  # noqa: F401  (cluster: a fixture)


@pytest.fixture(scope="module")
def cm(cluster):
    return cluster.controller_manager("--controllers", "replicaset")


def wait_pods(cluster, namespace: str, count: int) -> list[dict]:
    def exactly():
        pods = cluster.pods(namespace)
        return pods if len(pods) == count else None
    return wait_for(exactly, message=f"{count} pods in {namespace}")


def names(objs) -> set[str]:
    return {o["metadata"]["name"] for o in objs}


def event_subjects(cluster, namespace: str, reason: str, rs: str, prefix: str) -> set[str]:
    return {e["message"].removeprefix(prefix)
            for e in cluster.events(namespace, reason, rs)}


def test_create_scale_down_and_replace(cluster, cm):
    api, ns = cluster.api, cluster.namespace("rs-basic")
    rs = api.create("replicasets", replicaset("web", 5), namespace=ns)

    pods = wait_pods(cluster, ns, 5)
    assert all(controlled_by(p, rs) and p["metadata"]["name"].startswith("web-")
               and p["metadata"]["labels"] == {"app": "web"} for p in pods)
    wait_for(lambda: (api.get("replicasets", "web", namespace=ns).get("status") or {})
             .get("replicas") == 5, message="status.replicas 5")
    wait_for(lambda: event_subjects(cluster, ns, "SuccessfulCreate", "web", "Created pod: ")
             == names(pods), message="a SuccessfulCreate event per pod")

    api.patch("replicasets", "web", {"spec": {"replicas": 2}}, namespace=ns)
    survivors = wait_pods(cluster, ns, 2)
    assert names(survivors) < names(pods)
    wait_for(lambda: event_subjects(cluster, ns, "SuccessfulDelete", "web", "Deleted pod: ")
             == names(pods) - names(survivors), message="a SuccessfulDelete event per pod")
    wait_for(lambda: api.get("replicasets", "web", namespace=ns)["status"]["replicas"] == 2,
             message="status.replicas 2")

    victim = sorted(names(survivors))[0]
    api.delete("pods", victim, namespace=ns)

    def replaced():
        pods = cluster.pods(ns)
        return pods if len(pods) == 2 and victim not in names(pods) else None
    after = wait_for(replaced, message="the deleted pod to be replaced")
    assert all(controlled_by(p, rs) for p in after)


def test_kill_9_in_the_middle_of_a_scale_up_never_overshoots(cluster, cm):
    api, ns = cluster.api, cluster.namespace("rs-restart")
    census = PodCensus(cluster.endpoint, ns)
    try:
        api.create("replicasets", replicaset("burst", 0), namespace=ns)
        api.patch("replicasets", "burst", {"spec": {"replicas": 50}}, namespace=ns)
        # slow start creates 1, 2, 4, ... pods per sync: kill it after the first batch
        wait_for(lambda: census.live, message="the scale-up to start")
        cm.kill()

        cm.start()
        wait_for(lambda: len(census.live) == 50, message="50 pods")
        # The restarted controller saw all 50 (its status says so) with nothing in flight.
        wait_for(lambda: (api.get("replicasets", "burst", namespace=ns).get("status") or {})
                 .get("replicas") == 50, message="status.replicas 50")
        assert len(cluster.pods(ns)) == 50
    finally:
        census.stop()
    assert census.most == 50, f"{census.most} pods existed at once"


def test_only_pod_updates_a_sync_reads_queue_the_replicaset():
    # no API needed: the handlers are fed directly, and the queue is looked at
    ctrl = ReplicaSetController(None, SharedInformers(None))
    rs = replicaset("web", 1)
    rs["metadata"].update(namespace="default", uid="rs-uid")
    ctrl.replicasets.indexer.add(rs)
    pod = {"metadata": {"name": "web-1", "namespace": "default", "resourceVersion": "1",
                        "labels": {"app": "web"},
                        "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs-uid",
                                             "controller": True}]},
           "spec": {}, "status": {"phase": "Pending"}}
    queue = ctrl.workers.queue.core

    def update(change) -> bool:
        new = copy.deepcopy(pod)
        new["metadata"]["resourceVersion"] = "2"
        change(new)
        ctrl._pod_updated(pod, new)
        queued = len(queue) == 1
        while len(queue):
            queue.done(queue.get_nowait(0.0))
        return queued

    async def body():
        assert not update(lambda p: p["spec"].update(nodeName="node-0")), "a binding is no news"
        assert update(lambda p: p["status"].update(phase="Running", conditions=[
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]))
    asyncio.run(body())
