"""The CronJob controller in a real controller-manager process, its clock moved through the
offset file: a due time makes its Job at once, a Job made by a killed predecessor (before its
status write) is taken into ``active`` rather than made twice, a finished Job leaves
``active``; a garbage offset file is one warning, never a traceback."""
from __future__ import annotations

import time

import pytest

from components.controller_manager.cronjob import OffsetClock, parse_offset
from components.controllers.cronjob import SCHEDULED_TIMESTAMP_ANNOTATION
from components.controllers.podutil import parse_time
from tests.conftest import wait_for

from . import cluster, now_rfc3339  # noqa: F401  (cluster: a fixture)

MINUTE = 60


@pytest.fixture(scope="module")
def offset_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("clock") / "offset"
    path.write_text(str(-3600))   # an hour behind: nothing is due until a test moves the clock
    return path


@pytest.fixture(scope="module")
def cm(cluster, offset_file):
    return cluster.controller_manager("--controllers", "cronjob",
                                      "--cronjob-clock-offset-file", str(offset_file),
                                      name="cm-cronjob")


@pytest.fixture(autouse=True)
def _nothing_due(offset_file):
    """Each test starts with the clock an hour behind, whatever the last one left: a clock
    left ahead would make a new CronJob's first minute due before the test gets to it."""
    set_clock(offset_file, time.time() - 3600)


def set_clock(offset_file, controller_time: float) -> None:
    """Move the controller's clock so that it reads `controller_time` now (a rename: the
    controller never reads a half-written file)."""
    staged = offset_file.with_suffix(".new")
    staged.write_text(repr(controller_time - time.time()))
    staged.rename(offset_file)


def cronjob(name: str, policy: str = "Allow") -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": "*/1 * * * *", "concurrencyPolicy": policy,
                     "jobTemplate": {"metadata": {"labels": {"app": name}},
                                     "spec": {"template": {"spec": {
                                         "restartPolicy": "Never",
                                         "containers": [{"name": "c", "image": "busybox",
                                                         "command": ["sleep", "600"]}]}}}}}}


def first_minute_after(obj: dict) -> int:
    return (int(parse_time(obj["metadata"]["creationTimestamp"])) // MINUTE + 1) * MINUTE


def jobs_of(api, ns: str) -> list[dict]:
    return api.list("jobs", namespace=ns)["items"]


def status(api, name: str, ns: str) -> dict:
    return api.get("cronjobs", name, namespace=ns).get("status") or {}


def test_parse_offset():
    assert parse_offset("") == 0.0 and parse_offset(" \n") == 0.0
    assert parse_offset("90.5\n") == 90.5 and parse_offset("-3600") == -3600.0
    assert parse_offset("3e9") == 3e9                # 95 years: a test may go that far
    for garbage in ("soon", "nan", "inf", "1e999", "\x00\xff", "1e12", "-4e9"):
        assert parse_offset(garbage) is None


def test_offset_clock_reads_the_file_each_time(tmp_path, caplog):
    path = tmp_path / "offset"
    clock = OffsetClock(str(path))
    assert clock.read() == 0.0                       # absent
    path.write_text("120")
    assert abs(clock.now() - time.time() - 120) < 1
    path.write_text("garbage")
    assert clock.read() == 0.0 and clock.read() == 0.0
    assert sum("not a number" in r.getMessage() for r in caplog.records) == 1
    assert OffsetClock(None).read() == 0.0


def test_a_due_time_creates_one_job_and_records_it(cluster, cm, offset_file):
    api, ns = cluster.api, cluster.namespace("cj-due")
    cj = api.create("cronjobs", cronjob("tick"), namespace=ns)
    due = first_minute_after(cj)
    set_clock(offset_file, due + 1)
    job = wait_for(lambda: next(iter(jobs_of(api, ns)), None), message="the Job")
    assert job["metadata"]["name"] == f"tick-{due // MINUTE}"
    assert job["metadata"]["labels"]["app"] == "tick"
    assert job["metadata"]["annotations"]["batch.kubernetes.io/cronjob-scheduled-timestamp"] == \
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due))
    assert job["metadata"]["ownerReferences"][0]["uid"] == cj["metadata"]["uid"]
    st = wait_for(lambda: (s := status(api, "tick", ns)).get("active") and s,
                  message="status.active")
    assert [r["uid"] for r in st["active"]] == [job["metadata"]["uid"]]
    assert st["lastScheduleTime"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(due))
    wait_for(lambda: cluster.events(ns, "SuccessfulCreate", "tick"), message="SuccessfulCreate")

    # the Job finishes: it leaves active, and lastSuccessfulTime follows
    stamp = now_rfc3339()[:19] + "Z"
    job["status"] = {"startTime": stamp, "completionTime": stamp, "succeeded": 1, "conditions": [
        {"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}
    api.update_status("jobs", job, namespace=ns)
    wait_for(lambda: "active" not in status(api, "tick", ns), message="active emptied")
    wait_for(lambda: cluster.events(ns, "SawCompletedJob", "tick"), message="SawCompletedJob")
    wait_for(lambda: status(api, "tick", ns).get("lastSuccessfulTime") == stamp,
             message="lastSuccessfulTime")
    assert len(jobs_of(api, ns)) == 1
    api.delete("cronjobs", "tick", namespace=ns)


def test_a_job_made_before_a_crash_is_taken_not_made_twice(cluster, cm, offset_file):
    """A predecessor made the Job, then died before writing the status: the same name comes
    back AlreadyExists and the Job goes into active."""
    api, ns = cluster.api, cluster.namespace("cj-crash")
    cj = api.create("cronjobs", cronjob("once", policy="Forbid"), namespace=ns)
    due = first_minute_after(cj)
    template = cronjob("once")["spec"]["jobTemplate"]
    orphan = {"apiVersion": "batch/v1", "kind": "Job",
              "metadata": {"name": f"once-{due // MINUTE}", "labels": {"app": "once"},
                           "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                                                "name": "once", "uid": cj["metadata"]["uid"],
                                                "controller": True, "blockOwnerDeletion": True}]},
              "spec": template["spec"]}
    made = api.create("jobs", orphan, namespace=ns)
    set_clock(offset_file, due + 1)
    st = wait_for(lambda: (s := status(api, "once", ns)).get("active") and s,
                  message="the Job taken into active")
    assert [r["uid"] for r in st["active"]] == [made["metadata"]["uid"]]
    assert [j["metadata"]["uid"] for j in jobs_of(api, ns)] == [made["metadata"]["uid"]]
    api.delete("cronjobs", "once", namespace=ns)


def test_forbid_counts_a_job_whose_status_write_was_lost(cluster, cm, offset_file):
    """A predecessor made the Job for one minute and died before writing the status; at the
    next minute, Forbid sees that Job running and starts nothing."""
    api, ns = cluster.api, cluster.namespace("cj-lost")
    cj = api.create("cronjobs", cronjob("lost", policy="Forbid"), namespace=ns)
    due = first_minute_after(cj)
    orphan = {"apiVersion": "batch/v1", "kind": "Job",
              "metadata": {"name": f"lost-{due // MINUTE}", "labels": {"app": "lost"},
                           "annotations": {SCHEDULED_TIMESTAMP_ANNOTATION: time.strftime(
                               "%Y-%m-%dT%H:%M:%SZ", time.gmtime(due))},
                           "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                                                "name": "lost", "uid": cj["metadata"]["uid"],
                                                "controller": True, "blockOwnerDeletion": True}]},
              "spec": cronjob("lost")["spec"]["jobTemplate"]["spec"]}
    made = api.create("jobs", orphan, namespace=ns)
    # the Job's event puts it into `active` (the lost write, made good); the clock moves only
    # once the controller has seen it, or a loaded machine could let the next minute come
    # before the informer has the Job, which a real controller would meet the same way
    wait_for(lambda: [r["uid"] for r in status(api, "lost", ns).get("active") or []]
             == [made["metadata"]["uid"]], message="the orphan taken into active")
    set_clock(offset_file, due + MINUTE + 1)
    wait_for(lambda: cluster.events(ns, "JobAlreadyActive", "lost"), message="JobAlreadyActive")
    assert [r["uid"] for r in status(api, "lost", ns)["active"]] == [made["metadata"]["uid"]]
    assert [j["metadata"]["uid"] for j in jobs_of(api, ns)] == [made["metadata"]["uid"]]
    api.delete("cronjobs", "lost", namespace=ns)


def test_garbage_in_the_offset_file_is_one_warning(cluster, cm, offset_file):
    """A word, then an offset of 30 000 years (the schedule arithmetic would leave datetime's
    years on every sync): each is one warning and the real clock; 95 years ahead still works."""
    api, ns = cluster.api, cluster.namespace("cj-garbage")
    yearly = cronjob("yearly")
    yearly["spec"]["schedule"] = "0 0 1 1 *"
    api.create("cronjobs", yearly, namespace=ns)
    try:
        offset_file.write_text("next tuesday")
        wait_for(lambda: "holds 'next tuesday', not a number of seconds" in cm.log_text(),
                 message="the warning about the word")
        offset_file.write_text("3e9")
        wait_for(lambda: jobs_of(api, ns), message="the yearly Job, 95 years ahead")
        offset_file.write_text("1e12")
        wait_for(lambda: "holds '1e12', not a number of seconds" in cm.log_text(),
                 message="the warning about 30 000 years")
    finally:
        offset_file.write_text(str(-3600))
        api.delete("cronjobs", "yearly", namespace=ns)
    log = cm.log_text()
    assert log.count("'next tuesday', not a number of seconds") == 1
    assert log.count("'1e12', not a number of seconds") == 1
    assert "Traceback" not in log
