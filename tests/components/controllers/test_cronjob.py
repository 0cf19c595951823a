"""CronJob reconcile core: a CronJob and its Jobs in, the due Job / deletes / events / status
out, on a fake clock (cronjob_controllerv2_test.go's cases)."""
from __future__ import annotations

import datetime

import pytest

from components.controllers import DeleteObject, RecordEvent
from components.controllers.cronjob import (SCHEDULED_TIMESTAMP_ANNOTATION, job_started,
                                            requeue_after_schedule_change, sync_cronjob,
                                            unlisted_jobs, active_refs_not_cached)
from components.controllers.podutil import format_time, parse_time

UTC = datetime.timezone.utc
T0 = datetime.datetime(2024, 5, 1, 10, 0, tzinfo=UTC).timestamp()   # a whole hour
MIN = 60.0


def make_cj(schedule="*/1 * * * *", *, created=T0 - 30, policy="Allow", suspend=False,
            deadline=None, time_zone=None, status=None, success_limit=3, failed_limit=1):
    spec = {"schedule": schedule, "concurrencyPolicy": policy, "suspend": suspend,
            "successfulJobsHistoryLimit": success_limit, "failedJobsHistoryLimit": failed_limit,
            "jobTemplate": {"metadata": {"labels": {"app": "tick"}, "annotations": {"a": "b"}},
                            "spec": {"template": {"spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "c", "image": "busybox"}]}}}}}
    if deadline is not None:
        spec["startingDeadlineSeconds"] = deadline
    if time_zone is not None:
        spec["timeZone"] = time_zone
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "tick", "namespace": "default", "uid": "cj-uid",
                         "creationTimestamp": format_time(created)},
            "spec": spec, "status": status or {}}


def make_job(scheduled: float, *, finished=None, started=None, completed=None, uid=None,
             annotated=True):
    name = f"tick-{int(scheduled) // 60}"
    annotations = {SCHEDULED_TIMESTAMP_ANNOTATION: format_time(scheduled)} if annotated else {}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}",
                        "resourceVersion": "7", "annotations": annotations,
                        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                                             "name": "tick", "uid": "cj-uid", "controller": True}]},
           "status": {}}
    if started is not None:
        job["status"]["startTime"] = format_time(started)
    if finished:
        job["status"]["conditions"] = [{"type": finished, "status": "True"}]
        if finished == "Complete":
            job["status"]["completionTime"] = format_time(completed or scheduled + 5)
    return job


def active_ref(job):
    return {"kind": "Job", "apiVersion": "batch/v1", "namespace": "default",
            "name": job["metadata"]["name"], "uid": job["metadata"]["uid"], "resourceVersion": "7"}


def events(result):
    return [(a.type, a.reason, a.message) for a in result.actions if isinstance(a, RecordEvent)]


def reasons(result):
    return [reason for _, reason, _ in events(result)]


def deletes(result):
    return [a.name for a in result.actions if isinstance(a, DeleteObject)]


def test_nothing_due_before_the_first_schedule_time():
    result = sync_cronjob(make_cj(), [], T0 - 10)
    assert result.job is None and not result.actions and not result.update_status
    assert result.requeue_after == pytest.approx(10.1)


def test_a_due_time_creates_the_job_from_the_template():
    cj = make_cj()
    result = sync_cronjob(cj, [], T0 + 5)
    job = result.job
    assert result.scheduled_time == T0
    assert job["metadata"]["name"] == f"tick-{int(T0) // 60}"
    assert job["metadata"]["labels"] == {"app": "tick"}
    assert job["metadata"]["annotations"] == {"a": "b", SCHEDULED_TIMESTAMP_ANNOTATION:
                                              "2024-05-01T10:00:00Z"}
    assert job["metadata"]["ownerReferences"] == [
        {"apiVersion": "batch/v1", "kind": "CronJob", "name": "tick", "uid": "cj-uid",
         "controller": True, "blockOwnerDeletion": True}]
    assert job["spec"] == cj["spec"]["jobTemplate"]["spec"]
    assert result.requeue_after == pytest.approx(MIN - 5 + 0.1)
    # the shell creates it, then the status records it
    created = {**job, "metadata": {**job["metadata"], "uid": "new-uid", "resourceVersion": "9"}}
    status = job_started(result.status, created, result.scheduled_time)
    assert status == {"lastScheduleTime": format_time(T0),
                      "active": [{"kind": "Job", "apiVersion": "batch/v1", "namespace": "default",
                                  "name": job["metadata"]["name"], "uid": "new-uid",
                                  "resourceVersion": "9"}]}


def test_a_processed_time_is_not_started_again():
    # a restart after the status write: lastScheduleTime says the time is done
    cj = make_cj(status={"lastScheduleTime": format_time(T0)})
    result = sync_cronjob(cj, [make_job(T0, finished="Complete")], T0 + 30)
    assert result.job is None
    assert result.requeue_after == pytest.approx(30.1)


def test_a_restart_before_the_status_write_finds_its_job_active():
    # the Job exists (created before a crash) but the status never said so: it carries our
    # controller ref and its schedule time, so it is active and that time is done
    cj = make_cj()
    job = make_job(T0)
    assert unlisted_jobs(cj, [job]) == [job]
    result = sync_cronjob(cj, [job], T0 + 20)
    assert result.job is None and "UnexpectedJob" not in reasons(result)
    assert result.update_status
    assert result.status == {"active": [active_ref(job)], "lastScheduleTime": format_time(T0)}


def test_a_job_of_ours_without_a_schedule_time_is_unexpected():
    # the same name is asked for again; the apiserver's AlreadyExists is the lock
    cj = make_cj()
    job = make_job(T0, annotated=False)
    result = sync_cronjob(cj, [job], T0 + 20)
    assert ("Warning", "UnexpectedJob",
            f"Saw a job that the controller did not create or forgot: {job['metadata']['name']}") \
        in events(result)
    assert result.job["metadata"]["name"] == job["metadata"]["name"]
    assert "active" not in result.status


def test_forbid_counts_a_running_job_the_status_lost():
    # a kill -9 between the create and the status write: the next schedule time must not
    # start a second Job beside it
    running = make_job(T0)
    cj = make_cj(policy="Forbid")
    result = sync_cronjob(cj, [running], T0 + MIN + 1)
    assert result.job is None
    assert "JobAlreadyActive" in reasons(result)
    assert result.status["active"] == [active_ref(running)] and result.update_status


def test_forbid_skips_while_a_job_runs():
    running = make_job(T0)
    cj = make_cj(policy="Forbid", status={"lastScheduleTime": format_time(T0),
                                          "active": [active_ref(running)]})
    result = sync_cronjob(cj, [running], T0 + MIN + 1)
    assert result.job is None
    assert events(result) == [("Normal", "JobAlreadyActive", "Not starting job because prior "
                               "execution is running and concurrency policy is Forbid")]
    assert not result.update_status
    assert result.requeue_after == pytest.approx(MIN - 1 + 0.1)


def test_forbid_starts_the_latest_missed_time_once_the_job_finished():
    done = make_job(T0, finished="Complete")
    cj = make_cj(policy="Forbid", status={"lastScheduleTime": format_time(T0),
                                          "active": [active_ref(done)]})
    result = sync_cronjob(cj, [done], T0 + 3 * MIN + 10)
    assert ("Normal", "SawCompletedJob",
            f"Saw completed job: {done['metadata']['name']}, status: Complete") in events(result)
    assert "active" not in result.status and result.update_status
    assert result.scheduled_time == T0 + 3 * MIN   # only the most recent one


def test_allow_runs_jobs_side_by_side():
    running = make_job(T0)
    cj = make_cj(policy="Allow", status={"lastScheduleTime": format_time(T0),
                                         "active": [active_ref(running)]})
    result = sync_cronjob(cj, [running], T0 + MIN + 1)
    assert result.scheduled_time == T0 + MIN and not deletes(result)


def test_replace_deletes_the_running_jobs_first():
    running = make_job(T0)
    cj = make_cj(policy="Replace", status={"lastScheduleTime": format_time(T0),
                                           "active": [active_ref(running)]})
    result = sync_cronjob(cj, [running], T0 + MIN + 1)
    delete = [a for a in result.actions if isinstance(a, DeleteObject)]
    assert delete == [DeleteObject("batch/v1", "Job", "default", running["metadata"]["name"],
                                   running["metadata"]["uid"], "Background")]
    assert ("Normal", "SuccessfulDelete", f"Deleted job {running['metadata']['name']}") \
        in events(result)
    assert "active" not in result.status and result.update_status
    assert result.scheduled_time == T0 + MIN


def test_suspended_starts_nothing():
    result = sync_cronjob(make_cj(suspend=True), [], T0 + 5)
    assert result.job is None and result.requeue_after is None


def test_more_than_100_missed_times_warns_and_starts_only_the_latest():
    # created long ago, never scheduled: 1,000 minutes missed (a clock jump, a long outage)
    cj = make_cj(created=T0 - 1000 * MIN - 30)
    result = sync_cronjob(cj, [], T0 + 5)
    assert ("Warning", "TooManyMissedTimes", "too many missed start times. Set or decrease "
            ".spec.startingDeadlineSeconds or check clock skew") in events(result)
    assert result.scheduled_time == T0


def test_up_to_100_missed_times_start_the_latest_silently():
    cj = make_cj(created=T0 - 50 * MIN - 30)
    result = sync_cronjob(cj, [], T0 + 5)
    assert "TooManyMissedTimes" not in reasons(result)
    assert result.scheduled_time == T0


def test_starting_deadline_bounds_what_counts_as_missed():
    # 1,000 missed, but only the last 200 s count: no warning, the latest time starts
    cj = make_cj(created=T0 - 1000 * MIN - 30, deadline=200)
    result = sync_cronjob(cj, [], T0 + 5)
    assert "TooManyMissedTimes" not in reasons(result)
    assert result.scheduled_time == T0


def test_a_time_older_than_the_deadline_is_not_started():
    hourly = make_cj("0 * * * *", created=T0 - 30, deadline=60)
    result = sync_cronjob(hourly, [], T0 + 61)
    assert result.job is None
    assert result.requeue_after == pytest.approx(3600 - 61 + 0.1)
    assert sync_cronjob(hourly, [], T0 + 59).scheduled_time == T0


def test_history_limits_delete_the_oldest_finished_jobs():
    complete = [make_job(T0 + i * MIN, finished="Complete", started=T0 + i * MIN)
                for i in range(5)]
    failed = [make_job(T0 + i * MIN, finished="Failed", started=T0 + i * MIN)
              for i in range(5, 8)]
    cj = make_cj(status={"lastScheduleTime": format_time(T0 + 7 * MIN)})
    result = sync_cronjob(cj, complete + failed, T0 + 7 * MIN + 10)
    assert deletes(result) == [j["metadata"]["name"] for j in complete[:2] + failed[:2]]
    assert all(a.propagation_policy == "Background"
               for a in result.actions if isinstance(a, DeleteObject))
    assert reasons(result).count("SuccessfulDelete") == 4


def test_history_limit_zero_keeps_nothing_and_unstarted_jobs_go_first():
    unstarted = make_job(T0 + MIN, finished="Complete")
    older = make_job(T0, finished="Complete", started=T0)
    cj = make_cj(success_limit=1, status={"lastScheduleTime": format_time(T0 + MIN)})
    assert deletes(sync_cronjob(cj, [unstarted, older], T0 + MIN + 10)) == [older["metadata"]["name"]]
    cj = make_cj(success_limit=0, status={"lastScheduleTime": format_time(T0 + MIN)})
    assert sorted(deletes(sync_cronjob(cj, [unstarted, older], T0 + MIN + 10))) == sorted(
        [older["metadata"]["name"], unstarted["metadata"]["name"]])


def test_last_successful_time_follows_the_newest_completion():
    a = make_job(T0, finished="Complete", completed=T0 + 20)
    b = make_job(T0 + MIN, finished="Complete", completed=T0 + MIN + 20)
    cj = make_cj(status={"lastScheduleTime": format_time(T0 + MIN),
                         "lastSuccessfulTime": format_time(T0 + 20)})
    result = sync_cronjob(cj, [a, b], T0 + MIN + 30)
    assert result.status["lastSuccessfulTime"] == format_time(T0 + MIN + 20)
    assert result.update_status


def test_a_vanished_active_job_leaves_the_active_list():
    ghost = make_job(T0)
    cj = make_cj(policy="Forbid", status={"lastScheduleTime": format_time(T0),
                                          "active": [active_ref(ghost)]})
    assert active_refs_not_cached(cj, []) == [active_ref(ghost)]
    # not cached but the apiserver still has it: kept (a slow watch is not a deletion)
    kept = sync_cronjob(cj, [], T0 + MIN + 1)
    assert kept.status["active"] == [active_ref(ghost)] and "JobAlreadyActive" in reasons(kept)
    gone = sync_cronjob(cj, [], T0 + MIN + 1, {ghost["metadata"]["uid"]})
    assert ("Normal", "MissingJob", f"Active job went missing: {ghost['metadata']['name']}") \
        in events(gone)
    assert "active" not in gone.status and gone.scheduled_time == T0 + MIN


def test_time_zone_schedules_and_the_annotation():
    # 08:00 in Paris (CEST, UTC+2) is 06:00 UTC
    six_utc = datetime.datetime(2024, 5, 1, 6, 0, tzinfo=UTC).timestamp()
    cj = make_cj("0 8 * * *", created=six_utc - 3600, time_zone="Europe/Paris")
    assert sync_cronjob(cj, [], six_utc - 1).job is None
    result = sync_cronjob(cj, [], six_utc + 1)
    assert result.scheduled_time == six_utc
    assert result.job["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION] == \
        "2024-05-01T08:00:00+02:00"


def test_unknown_time_zone_and_unparseable_schedule_are_events():
    bad_zone = sync_cronjob(make_cj(time_zone="Mars/Olympus"), [], T0 + 5)
    assert events(bad_zone) == [("Warning", "UnknownTimeZone",
                                 'invalid timeZone: "Mars/Olympus": unknown time zone Mars/Olympus')]
    assert bad_zone.job is None and bad_zone.requeue_after is None
    bad = sync_cronjob(make_cj("61 * * * *"), [], T0 + 5)
    assert events(bad) == [("Warning", "UnparseableSchedule", 'unparseable schedule: "61 * * * *" : '
                            "end of range (61) above maximum (59): 61")]
    never = sync_cronjob(make_cj("0 0 30 2 *"), [], T0 + 5)
    assert reasons(never) == ["InvalidSchedule"] and never.job is None


def test_tz_prefix_warns_and_wins():
    result = sync_cronjob(make_cj("TZ=UTC */1 * * * *", time_zone="Europe/Paris"), [], T0 + 5)
    assert reasons(result) == ["UnsupportedSchedule"]
    assert result.scheduled_time == T0


def test_deleted_cronjob_only_tidies_its_status():
    done = make_job(T0, finished="Failed")
    cj = make_cj(status={"lastScheduleTime": format_time(T0), "active": [active_ref(done)]})
    cj["metadata"]["deletionTimestamp"] = format_time(T0 + 90)
    result = sync_cronjob(cj, [done], T0 + 2 * MIN)
    assert result.job is None and result.requeue_after is None and result.update_status


def test_a_schedule_change_requeues_for_its_own_next_time():
    cj = make_cj("0 * * * *", status={"lastScheduleTime": format_time(T0)})
    delay, evs = requeue_after_schedule_change(cj, T0 + 60)
    assert delay == pytest.approx(3600 - 60 + 0.1) and evs == []
    delay, evs = requeue_after_schedule_change(make_cj("nope"), T0)
    assert delay is None and [e.reason for e in evs] == ["UnParseableCronJobSchedule"]


def test_every_minute_over_many_syncs_creates_one_job_per_minute():
    """A simulated controller (the shell's create-then-status) on a clock ticking by 7 s: one
    Job per minute, each under its own name, never twice."""
    cj = make_cj(created=T0 - 1)
    jobs: dict[str, dict] = {}
    now = T0 - 1
    while now < T0 + 10 * MIN:
        result = sync_cronjob(cj, list(jobs.values()), now)
        status = result.status
        if result.job is not None:
            name = result.job["metadata"]["name"]
            assert name not in jobs
            jobs[name] = {**result.job, "metadata": {**result.job["metadata"], "uid": name,
                                                     "resourceVersion": "1"}}
            status = job_started(status, jobs[name], result.scheduled_time)
        cj = {**cj, "status": status}
        now += 7
    assert sorted(jobs) == [f"tick-{int(T0) // 60 + i}" for i in range(10)]
    assert parse_time(cj["status"]["lastScheduleTime"]) == T0 + 9 * MIN
