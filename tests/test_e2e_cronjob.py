"""CronJobs end to end (issue 17 §5), real processes on a `kubemu up --nodes 3 --fast` cluster,
the CronJob controller's clock moved through <state>/cronjob-clock-offset (kubemu up's testing
knob) instead of waiting for minutes: an every-minute CronJob makes its Job when the minute
comes; with concurrencyPolicy Forbid and a Job still running (a long sleep) the next minute
starts nothing (JobAlreadyActive); the controller-manager killed with kill -9 right after a
schedule time, while another CronJob's Job is being made, comes back without making any Job
twice."""
from __future__ import annotations

import os
import signal
import sys
import time

from components.controllers.podutil import parse_time
from kubemu.cluster import CRONJOB_CLOCK_OFFSET
from tests.conftest import wait_for
from tests.test_e2e import LONG, cluster  # noqa: F401 (cluster: the fixture)

MINUTE = 60


def cronjob(name: str, policy: str, code: str = "import time; time.sleep(3600)") -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "*/1 * * * *", "concurrencyPolicy": policy,
                     "successfulJobsHistoryLimit": 1,
                     "jobTemplate": {"spec": {"template": {"spec": {
                         "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "run", "command": [sys.executable, "-c", code]}]}}}}}}


class Clock:
    """The CronJob controller's clock: real time + the offset in the state dir's file."""

    def __init__(self, state_dir):
        self.path = state_dir / CRONJOB_CLOCK_OFFSET

    def set(self, controller_time: float) -> None:
        """From now on the controller's clock reads `controller_time` (and runs on)."""
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(repr(controller_time - time.time()))
        os.replace(tmp, self.path)


def job_names(cluster, cronjob_name: str) -> list[str] | None:
    listed = cluster.call("list", "jobs", namespace="default")
    if listed is None:
        return None
    return sorted(j["metadata"]["name"] for j in listed["items"]
                  if j["metadata"]["name"].startswith(f"{cronjob_name}-"))


def active_names(cluster, cronjob_name: str) -> set[str]:
    cj = cluster.call("get", "cronjobs", cronjob_name, namespace="default") or {}
    return {r["name"] for r in (cj.get("status") or {}).get("active") or []}


def event_count(cluster, reason: str, name: str) -> int:
    listed = cluster.call("list", "events", namespace="default",
                          field_selector=f"reason={reason},involvedObject.name={name}")
    return sum(e.get("count") or 1 for e in (listed or {}).get("items") or [])


def running_pods(cluster, job: str) -> list[dict] | None:
    listed = cluster.call("list", "pods", namespace="default", label_selector=f"job-name={job}")
    return [p for p in (listed or {}).get("items") or []
            if (p.get("status") or {}).get("phase") == "Running"]


def test_every_minute_forbid_and_a_killed_controller_manager(cluster):
    cluster.cli("up", "--nodes", "3", "--fast", "--detach")
    clock = Clock(cluster.dir)
    clock.set(time.time() - 3600)   # an hour behind: no minute comes until the test says so
    tick = cluster.api.create("cronjobs", cronjob("tick", "Forbid"), namespace="default")
    beat = cluster.api.create("cronjobs", cronjob("beat", "Allow"), namespace="default")
    done = cluster.api.create("cronjobs", cronjob("done", "Allow", "pass"), namespace="default")
    due = (max(int(parse_time(obj["metadata"]["creationTimestamp"])) for obj in (tick, beat, done))
           // MINUTE + 1) * MINUTE

    def name(cj: str, t: int) -> str:
        return f"{cj}-{t // MINUTE}"

    # the minute comes: each CronJob makes its Job, recorded in status.active
    clock.set(due + 1)
    wait_for(lambda: job_names(cluster, "tick") == [name("tick", due)], timeout=LONG,
             message="tick's first Job")
    wait_for(lambda: active_names(cluster, "tick") == {name("tick", due)}, timeout=LONG,
             message="tick's Job active")
    job = cluster.api.get("jobs", name("tick", due), namespace="default")
    assert job["metadata"]["ownerReferences"][0]["uid"] == tick["metadata"]["uid"]
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == \
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due))
    wait_for(lambda: job_names(cluster, "beat") == [name("beat", due)], timeout=LONG,
             message="beat's first Job")
    wait_for(lambda: running_pods(cluster, name("tick", due)), timeout=LONG,
             message="tick's Job running")
    # a Job that succeeds leaves active and sets lastSuccessfulTime
    wait_for(lambda: (st := cluster.call("get", "cronjobs", "done", namespace="default")
                      .get("status") or {}).get("lastSuccessfulTime") and "active" not in st,
             timeout=LONG, message="done's Job finished")

    # the next minute, tick's Job still running: Forbid starts nothing; Allow does
    clock.set(due + MINUTE + 1)
    wait_for(lambda: event_count(cluster, "JobAlreadyActive", "tick") >= 1, timeout=LONG,
             message="tick's JobAlreadyActive event")
    wait_for(lambda: job_names(cluster, "beat") == [name("beat", due), name("beat", due + MINUTE)],
             timeout=LONG, message="beat's second Job")
    assert job_names(cluster, "tick") == [name("tick", due)]
    # done's history limit is 1: its second Job, once complete, pushes the first out
    wait_for(lambda: job_names(cluster, "done") == [name("done", due + MINUTE)], timeout=LONG,
             message="done's first Job deleted past the history limit")

    # a minute later, the controller-manager is killed as soon as beat's Job for it exists
    # (before or after its status write): the one that comes back makes no Job twice
    pid = cluster.system_pid("controller-manager")
    clock.set(due + 2 * MINUTE + 1)
    wait_for(lambda: name("beat", due + 2 * MINUTE) in (job_names(cluster, "beat") or []),
             timeout=LONG, interval=0.05, message="beat's third Job")
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: (new := cluster.system_pid("controller-manager")) and new != pid, timeout=LONG,
             interval=0.25, message="the controller-manager restarted")
    wait_for(lambda: name("beat", due + 2 * MINUTE) in active_names(cluster, "beat"), timeout=LONG,
             message="beat's third Job active")
    # the restarted one works: the next minute is one more Job, and nothing was made twice
    skipped = event_count(cluster, "JobAlreadyActive", "tick")
    clock.set(due + 3 * MINUTE + 1)
    expected = [name("beat", due + i * MINUTE) for i in range(4)]
    wait_for(lambda: job_names(cluster, "beat") == expected, timeout=LONG,
             message="beat's fourth Job")
    wait_for(lambda: event_count(cluster, "JobAlreadyActive", "tick") > skipped, timeout=LONG,
             message="tick skipped again by the restarted controller")
    assert job_names(cluster, "tick") == [name("tick", due)]
    assert job_names(cluster, "beat") == expected
    logs = list(cluster.dir.glob("nodes/node-0/pods/kube-system_controller-manager-node-0_*/*/*.log"))
    assert logs and not [log for log in logs if "Traceback" in log.read_text(errors="replace")]
