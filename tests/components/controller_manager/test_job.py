"""The Job and TTL-after-finished controllers in a real controller-manager process, the test
playing the kubelet (pod phases): a Job completes with exactly its completions, a kill -9 in
the middle never yields an extra pod or a count lost or doubled, a failing Job stops at its
backoff limit, a finished Job with a TTL is deleted, a deleted Job's pods are not held by the
tracking finalizer."""
from __future__ import annotations

import asyncio
import datetime

import pytest

from components.controller_manager.informers import SharedInformers
from components.controller_manager.job import JobController
from components.controllers.job import TRACKING_FINALIZER
from kubemu.apiclient import Conflict, NotFound
from tests.conftest import wait_for

from . import PodCensus, cluster  # noqa: F401  (cluster: a fixture)


@pytest.fixture(scope="module")
def cm(cluster):
    return cluster.controller_manager("--controllers", "job,ttl-after-finished,garbagecollector",
                                      "--time-scale", "0.05")


def job(name: str, completions: int, parallelism: int, **spec) -> dict:
    uid_label = {"job-name": name}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completions": completions, "parallelism": parallelism, "backoffLimit": 6,
                     "manualSelector": True, "selector": {"matchLabels": uid_label},
                     "template": {"metadata": {"labels": uid_label},
                                  "spec": {"restartPolicy": "Never", "containers": [
                                      {"name": "c", "image": "busybox"}]}},
                     **spec}}


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def finish_active(cluster, ns: str, code: int = 0) -> int:
    """Play the kubelet: every active pod exits with `code`; how many did."""
    done = 0
    for pod in cluster.pods(ns):
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        pod["status"] = {"phase": "Succeeded" if code == 0 else "Failed", "containerStatuses": [
            {"name": "c", "restartCount": 0, "state": {"terminated": {
                "exitCode": code, "finishedAt": now_rfc3339()}}}]}
        try:
            cluster.api.update_status("pods", pod, namespace=ns)
            done += 1
        except (Conflict, NotFound):
            pass
    return done


def active_count(cluster, ns: str) -> int:
    return sum(1 for p in cluster.pods(ns)
               if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def condition(job: dict, ctype: str) -> dict | None:
    return next((c for c in (job.get("status") or {}).get("conditions") or []
                 if c["type"] == ctype and c["status"] == "True"), None)


def run_to_completion(cluster, ns: str, name: str, parallelism: int) -> dict:
    def step():
        assert active_count(cluster, ns) <= parallelism
        current = cluster.api.get("jobs", name, namespace=ns)
        if condition(current, "Complete"):
            return current
        finish_active(cluster, ns)
        return None
    return wait_for(step, message=f"job {name} Complete")


def test_completions_with_parallelism_and_a_kill_9_in_the_middle(cluster, cm):
    api, ns = cluster.api, cluster.namespace("job-restart")
    census = PodCensus(cluster.endpoint, ns)
    try:
        api.create("jobs", job("pi", 6, 2), namespace=ns)
        wait_for(lambda: active_count(cluster, ns) == 2, message="2 active pods")
        assert all(TRACKING_FINALIZER in p["metadata"]["finalizers"] for p in cluster.pods(ns))
        finish_active(cluster, ns)
        wait_for(lambda: len(census.live) >= 3, message="a replacement pod")
        cm.kill()
        finish_active(cluster, ns)      # they finish while no controller runs
        cm.start()
        done = run_to_completion(cluster, ns, "pi", 2)
        status = done["status"]
        assert status["succeeded"] == 6 and status.get("failed", 0) == 0
        assert not (status.get("uncountedTerminatedPods") or {}).get("succeeded")
        assert condition(done, "SuccessCriteriaMet")["reason"] == "CompletionsReached"
        pods = cluster.pods(ns)
        assert len(pods) == 6 and census.most == 6         # never an extra pod
        assert not any(p["metadata"].get("finalizers") for p in pods)
        wait_for(lambda: cluster.events(ns, "Completed", "pi"), message="the Completed event")
        assert len(cluster.events(ns, "SuccessfulCreate", "pi")) >= 5
    finally:
        census.stop()


def test_backoff_limit_exceeded(cluster, cm):
    api, ns = cluster.api, cluster.namespace("job-fail")
    api.create("jobs", job("bad", 1, 1, backoffLimit=2), namespace=ns)

    def failed():
        current = api.get("jobs", "bad", namespace=ns)
        if condition(current, "Failed"):
            return current
        finish_active(cluster, ns, code=1)
        return None
    done = wait_for(failed, message="job bad Failed")
    assert condition(done, "Failed")["reason"] == "BackoffLimitExceeded"
    assert done["status"]["failed"] == 3
    assert len(cluster.pods(ns)) == 3
    wait_for(lambda: cluster.events(ns, "BackoffLimitExceeded", "bad"),
             message="the BackoffLimitExceeded event")


def test_ttl_after_finished_deletes_the_job(cluster, cm):
    api, ns = cluster.api, cluster.namespace("job-ttl")
    api.create("jobs", job("short", 1, 1, ttlSecondsAfterFinished=1), namespace=ns)
    run_to_completion(cluster, ns, "short", 1)

    def gone():
        try:
            api.get("jobs", "short", namespace=ns)
        except NotFound:
            return True
        return False
    wait_for(gone, message="the Job deleted after its TTL")


def test_a_deleted_job_leaves_no_pod_held_by_its_finalizer(cluster, cm):
    api, ns = cluster.api, cluster.namespace("job-deleted")
    api.create("jobs", job("gone", 3, 3), namespace=ns)
    wait_for(lambda: active_count(cluster, ns) == 3, message="3 active pods")
    api.delete("jobs", "gone", namespace=ns, propagation_policy="Background")
    # the garbage collector deletes the pods; the finalizer comes off the orphans
    wait_for(lambda: not cluster.pods(ns, active_only=False), message="the Job's pods gone")


class _FailingStatusApi:
    """An API whose Job status writes fail until `fail` is cleared; other writes succeed."""

    def __init__(self):
        self.fail = True
        self.status_writes = 0

    async def patch(self, resource, name, body, namespace=None, subresource=None, **_):
        if resource == "jobs" and subresource == "status":
            self.status_writes += 1
            if self.fail:
                raise Conflict("the object has been modified")
            return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "3"}}
        return {}

    async def create(self, resource, body, namespace=None, **_):
        return {**body, "metadata": {**body["metadata"], "name": "x", "uid": "new"}}


def test_a_failed_status_write_does_not_count_a_failed_pod_twice():
    """The backoff is kept only once the status write listing the failed pod succeeded: a
    retry after a failed write waits 10 s for one failure, not 20 s for two."""
    api = _FailingStatusApi()
    controller = JobController(api, SharedInformers(api))
    spec = job("pi", 2, 1)
    spec["metadata"].update(namespace="default", uid="job-uid", resourceVersion="2")
    controller.jobs.indexer.add(spec)
    pod = {"metadata": {"name": "pi-a", "namespace": "default", "uid": "pod-a",
                        "resourceVersion": "1", "labels": {"job-name": "pi"},
                        "finalizers": [TRACKING_FINALIZER],
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "pi",
                                             "uid": "job-uid", "controller": True}]},
           "status": {"phase": "Failed", "containerStatuses": [{"name": "c", "state": {
               "terminated": {"exitCode": 1, "finishedAt": now_rfc3339()}}}]}}
    controller.pods.indexer.add(pod)

    async def sync():
        try:
            return await controller.sync("default/pi")
        except Conflict:
            return None
    asyncio.run(sync())
    assert api.status_writes == 1
    api.fail = False
    requeue = asyncio.run(sync())
    assert controller.records.get("default/pi").backoff.failures == 1
    assert requeue is not None and requeue <= 10.0
