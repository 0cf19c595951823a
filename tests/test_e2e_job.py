"""Jobs end to end (issue 17 §5), real processes on one `kubemu up --nodes 3 --fast` cluster:
a Job of 5 completions with parallelism 2 completes with 5 Succeeded pods, never more than 2
active; a failing command with backoffLimit 2 reads Failed (BackoffLimitExceeded) after 3
failed pods, and with restartPolicy OnFailure after its container's restarts; an Indexed Job's pods see JOB_COMPLETION_INDEX; the controller-manager killed
with kill -9 in the middle of a Job converges with exactly `completions` pods; a finished Job
with ttlSecondsAfterFinished is deleted."""
from __future__ import annotations

import os
import signal
import sys

import pytest

from tests.conftest import kill_marked, remove_cluster_cgroups, remove_cluster_network, wait_for
from tests.test_e2e import LONG, Cluster

PY = sys.executable
JOB_NAME = "batch.kubernetes.io/job-name"


def job(name: str, script: str, completions: int = 1, parallelism: int = 1, **spec) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"completions": completions, "parallelism": parallelism, **spec,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "terminationGracePeriodSeconds": 1,
                                           "containers": [{"name": "work",
                                                           "command": [PY, "-S", "-c", script]}]}}}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    path = tmp_path_factory.mktemp("k")
    c = Cluster(path)
    try:
        c.cli("up", "--nodes", "3", "--fast", "--detach")
        yield c
    finally:
        c.close_api()
        if c.state.running_nodes():
            c.cli("down", check=False)
        leaked = kill_marked(str(path))
        assert not leaked, f"test leaked processes {leaked}"
        assert not remove_cluster_cgroups(path)
        assert not remove_cluster_network(path)


def get_job(cluster, name: str) -> dict | None:
    return cluster.call("get", "jobs", name, namespace="default")


def condition(job: dict | None, ctype: str) -> dict | None:
    return next((c for c in ((job or {}).get("status") or {}).get("conditions") or []
                 if c["type"] == ctype and c["status"] == "True"), None)


def job_pods(cluster, name: str) -> list[dict] | None:
    listed = cluster.call("list", "pods", namespace="default", label_selector=f"{JOB_NAME}={name}")
    return None if listed is None else listed["items"]


def event_count(cluster, reason: str, name: str) -> int:
    listed = cluster.call("list", "events", namespace="default",
                          field_selector=f"reason={reason},involvedObject.name={name}")
    return sum(e.get("count") or 1 for e in (listed or {}).get("items") or [])


def phases(pods: list[dict]) -> list[str]:
    return sorted((p.get("status") or {}).get("phase") or "Pending" for p in pods)


def active(pods: list[dict]) -> int:
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
               and not p["metadata"].get("deletionTimestamp"))


def finished(cluster, name: str, ctype: str, watch=None) -> dict:
    def done():
        if watch is not None:
            watch()
        j = get_job(cluster, name)
        return j if condition(j, ctype) else None
    return wait_for(done, timeout=LONG, message=f"job {name} {ctype}")


def test_completions_with_parallelism(cluster):
    cluster.api.create("jobs", job("five", "import time; time.sleep(0.5)", 5, 2), namespace="default")
    most = []

    def watch():
        pods = job_pods(cluster, "five")
        if pods is not None:
            most.append(active(pods))
    done = finished(cluster, "five", "Complete", watch)
    assert max(most) <= 2
    assert done["status"]["succeeded"] == 5
    assert condition(done, "SuccessCriteriaMet")["reason"] == "CompletionsReached"
    pods = job_pods(cluster, "five")
    assert phases(pods) == ["Succeeded"] * 5
    assert not any(p["metadata"].get("finalizers") for p in pods)


def test_backoff_limit(cluster):
    cluster.api.create("jobs", job("fails", "raise SystemExit(3)", backoffLimit=2),
                       namespace="default")
    done = finished(cluster, "fails", "Failed")
    failed = condition(done, "Failed")
    assert (failed["reason"], failed["message"]) == ("BackoffLimitExceeded",
                                                     "Job has reached the specified backoff limit")
    assert done["status"]["failed"] == 3
    pods = job_pods(cluster, "fails")
    assert phases(pods) == ["Failed"] * 3
    exit_codes = {p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] for p in pods}
    assert exit_codes == {3}


def test_on_failure_restarts_count_towards_the_backoff_limit(cluster):
    spec = job("flaky", "raise SystemExit(1)", backoffLimit=1)
    spec["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    cluster.api.create("jobs", spec, namespace="default")
    done = finished(cluster, "flaky", "Failed")
    assert condition(done, "Failed")["reason"] == "BackoffLimitExceeded"
    assert done["status"]["failed"] == 1       # the one pod, restarted in place, then stopped
    wait_for(lambda: job_pods(cluster, "flaky") == [], timeout=LONG,
             message="the restarted pod deleted")


def test_indexed_job_sees_its_completion_index(cluster):
    # each pod succeeds only if its JOB_COMPLETION_INDEX is its hostname's suffix (HOSTNAME:
    # the hostname also where pods have no UTS namespace of their own)
    script = ("import os; i = os.environ['JOB_COMPLETION_INDEX']; "
              "raise SystemExit(0 if os.environ['HOSTNAME'] == 'idx-' + i else 7)")
    cluster.api.create("jobs", job("idx", script, 3, 3, completionMode="Indexed", backoffLimit=0),
                       namespace="default")
    done = finished(cluster, "idx", "Complete")
    assert done["status"]["completedIndexes"] == "0-2"
    pods = job_pods(cluster, "idx")
    assert sorted(p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
                  for p in pods) == ["0", "1", "2"]
    assert phases(pods) == ["Succeeded"] * 3


def test_kill_9_of_the_controller_manager_mid_job(cluster):
    cluster.api.create("jobs", job("steady", "import time; time.sleep(1)", 6, 2),
                       namespace="default")
    seen: set[str] = set()   # every pod uid ever listed (each lives a second at least)

    def watch():
        seen.update(p["metadata"]["uid"] for p in job_pods(cluster, "steady") or [])

    def counted(n: int):
        watch()
        return (get_job(cluster, "steady") or {}).get("status", {}).get("succeeded", 0) >= n
    wait_for(lambda: counted(2), timeout=LONG, interval=0.05, message="two pods of steady counted")
    pid = cluster.system_pid("controller-manager")
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: watch() or ((new := cluster.system_pid("controller-manager")) and new != pid),
             timeout=LONG, interval=0.05, message="the controller-manager restarted")
    done = finished(cluster, "steady", "Complete", watch)
    assert done["status"]["succeeded"] == 6
    pods = job_pods(cluster, "steady")
    assert phases(pods) == ["Succeeded"] * 6
    assert len(seen) == 6                              # no extra pod was ever made
    # nor created and gone between two looks (an event the kill cut short is one fewer)
    assert event_count(cluster, "SuccessfulCreate", "steady") <= 6
    assert event_count(cluster, "SuccessfulDelete", "steady") == 0
    assert not any(p["metadata"].get("finalizers") for p in pods)


def test_ttl_after_finished_deletes_the_job(cluster):
    cluster.api.create("jobs", job("brief", "pass", ttlSecondsAfterFinished=1), namespace="default")

    def gone():
        listed = cluster.call("list", "jobs", namespace="default")
        return listed is not None and "brief" not in {j["metadata"]["name"] for j in listed["items"]}
    wait_for(gone, timeout=LONG, message="the finished Job deleted after its TTL")
    wait_for(lambda: job_pods(cluster, "brief") == [], timeout=LONG, message="its pod deleted")


def test_no_traceback_in_the_controller_manager_log(cluster):
    logs = list(cluster.dir.glob("nodes/node-0/pods/kube-system_controller-manager-node-0_*/*/*.log"))
    assert logs and not [log for log in logs if "Traceback" in log.read_text(errors="replace")]
