"""The Deployment controller (with the ReplicaSet controller and the garbage collector) in a
real controller-manager process: a rollout of a new template, and cascading deletes."""
from __future__ import annotations

import pytest

from kubemu.apiclient import NotFound
from tests.conftest import wait_for

from . import cluster, controlled_by, deployment  # noqa: F401  (cluster: a fixture)

REVISION = "deployment.kubernetes.io/revision"


@pytest.fixture(scope="module")
def cm(cluster):
    return cluster.controller_manager("--controllers", "replicaset,deployment,garbagecollector")


def owned(items: list[dict], owner: dict) -> list[dict]:
    return [o for o in items if controlled_by(o, owner)]


def test_rollout_of_a_new_template(cluster, cm):
    api, ns = cluster.api, cluster.namespace("deploy-roll")
    d = api.create("deployments", deployment("web", 3), namespace=ns)

    def first_rs():
        rss = owned(api.list("replicasets", namespace=ns)["items"], d)
        return rss[0] if len(rss) == 1 else None
    rs1 = wait_for(first_rs, message="the first ReplicaSet")
    pod_hash = rs1["metadata"]["labels"]["pod-template-hash"]
    assert rs1["metadata"]["name"] == f"web-{pod_hash}"
    assert rs1["metadata"]["annotations"][REVISION] == "1"
    assert rs1["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": pod_hash}
    wait_for(lambda: len(owned(cluster.pods(ns), rs1)) == 3, message="3 pods of the first RS")
    wait_for(lambda: (api.get("deployments", "web", namespace=ns)["metadata"].get("annotations")
                      or {}).get(REVISION) == "1", message="the deployment's revision 1")

    template = deployment("web", 3, image="nginx:2")["spec"]["template"]
    api.patch("deployments", "web", {"spec": {"template": template}}, namespace=ns)

    def second_rs():
        rss = [rs for rs in owned(api.list("replicasets", namespace=ns)["items"], d)
               if rs["metadata"]["uid"] != rs1["metadata"]["uid"]]
        return rss[0] if rss else None
    rs2 = wait_for(second_rs, message="a second ReplicaSet")
    assert rs2["metadata"]["annotations"][REVISION] == "2"
    assert rs2["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"

    def rolled_out():
        for pod in cluster.pods(ns):  # play the kubelets: every pod starts and gets ready
            if not pod["status"].get("conditions"):
                cluster.mark_ready(pod)
        current = api.get("deployments", "web", namespace=ns)
        status = current.get("status") or {}
        old = api.get("replicasets", rs1["metadata"]["name"], namespace=ns)
        done = (status.get("observedGeneration") == current["metadata"]["generation"]
                and status.get("updatedReplicas") == 3 and status.get("replicas") == 3
                and status.get("availableReplicas") == 3 and old["spec"]["replicas"] == 0)
        return current if done else None
    finished = wait_for(rolled_out, interval=0.1, message="the rollout to complete")
    assert finished["metadata"]["annotations"][REVISION] == "2"

    def progressing_reason():
        status = api.get("deployments", "web", namespace=ns)["status"]
        cond = next(c for c in status["conditions"] if c["type"] == "Progressing")
        return cond["reason"] == "NewReplicaSetAvailable"
    wait_for(progressing_reason, message="Progressing: NewReplicaSetAvailable")
    wait_for(lambda: len(cluster.pods(ns)) == 3 and len(owned(cluster.pods(ns), rs2)) == 3,
             message="only the new ReplicaSet's pods left")


def test_cascading_deletes(cluster, cm):
    api, ns = cluster.api, cluster.namespace("deploy-gc")
    for name in ("bg", "fg", "keep"):
        api.create("deployments", deployment(name, 2), namespace=ns)

    def pods_of(app: str) -> list[dict]:
        return api.list("pods", namespace=ns, label_selector=f"app={app}")["items"]

    def rss_of(app: str) -> list[dict]:
        return api.list("replicasets", namespace=ns, label_selector=f"app={app}")["items"]
    wait_for(lambda: all(len(pods_of(name)) == 2 for name in ("bg", "fg", "keep")),
             message="2 pods per deployment")

    # Background: the deployment goes at once, the garbage collector takes its RS, then pods.
    api.delete("deployments", "bg", namespace=ns, propagation_policy="Background")
    wait_for(lambda: not rss_of("bg") and not pods_of("bg"),
             message="the background cascade to remove the RS and its pods")

    def deployment_gone(name: str) -> bool:
        try:
            api.get("deployments", name, namespace=ns)
        except NotFound:
            return True
        return False

    # Foreground: the deployment stays (finalizer) until its RS, and the RS's pods, are gone.
    api.delete("deployments", "fg", namespace=ns, propagation_policy="Foreground")
    wait_for(lambda: deployment_gone("fg"), message="the foreground cascade to finish")
    assert not rss_of("fg") and not pods_of("fg")

    # Orphan: the RS loses its ownerReference and stays, with its pods.
    rs_keep = rss_of("keep")[0]
    api.delete("deployments", "keep", namespace=ns, propagation_policy="Orphan")
    wait_for(lambda: deployment_gone("keep"), message="the orphan finalizer to be removed")
    rss = rss_of("keep")
    assert [rs["metadata"]["uid"] for rs in rss] == [rs_keep["metadata"]["uid"]]
    assert not rss[0]["metadata"].get("ownerReferences")
    pods = pods_of("keep")
    assert len(pods) == 2 and all(controlled_by(p, rs_keep) for p in pods)
