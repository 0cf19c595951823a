"""The CronJob controller's reconcile core (k8s pkg/controller/cronjob, the v2 controller of
kube-controller-manager 1.32: cronjob_controllerv2.go's sync/syncCronJob/cleanupFinishedJobs and
utils.go's mostRecentScheduleTime).

`sync_cronjob(cronjob, jobs, now, gone_job_uids)` looks at one CronJob and the Jobs it
controls, at controller time `now`, and returns

* ``actions``: events, and the deletes of finished Jobs beyond the history limits and (policy
  Replace) of the running ones, Background propagation so their pods go too;
* ``job``: the Job to start now, or None. Its name is ``<cronjob>-<scheduled time in minutes
  since the epoch>``: a controller restarted between the create and the status write creates
  the same name again and gets AlreadyExists, never a second Job. A running Job of ours with
  the scheduled-timestamp annotation that ``status.active`` lacks (that write lost, and the
  next time already due) is put back into ``active``, so Forbid sees it; upstream only records
  UnexpectedJob, which is what a Job without that annotation gets;
* ``status`` (and ``update_status``): the new status without that Job; once the shell has
  created (or found) it, `job_started` adds it to ``active`` and sets ``lastScheduleTime``;
* ``requeue_after``: seconds until the next schedule time (+100 ms, as upstream's
  nextScheduleDelta), or None (suspended, deleted, unusable schedule).

Which schedule time is due: the most recent one after ``lastScheduleTime`` (else the CronJob's
creation) and not after now; with ``startingDeadlineSeconds`` none older than that many seconds.
Older missed times are never run. More than 100 of them missed (a controller down for long, a
clock jump) records TooManyMissedTimes and still starts the most recent one, as the v2
controller does (the v1 controller started nothing). ``concurrencyPolicy``: Allow starts it
anyway; Forbid skips it while a Job is active (JobAlreadyActive; lastScheduleTime stays, so it
starts as soon as the running one finishes, if still within the deadline); Replace deletes the
active Jobs first.

The time zone: ``spec.timeZone`` (a ``TZ=``/``CRON_TZ=`` prefix in the schedule wins, with an
UnsupportedSchedule warning), else UTC. A Job is finished when its Complete or Failed condition
is True.
"""
from __future__ import annotations

import copy
import datetime
import math
from dataclasses import dataclass, field

from components.controllers import DeleteObject, RecordEvent
from components.controllers.job import finished_condition
from components.controllers.podutil import (controller_ref, format_time, meta, owner_reference,
                                            parse_time)
from kubemu import cron
from kubemu.api.fielderrors import go_quote
from kubemu.events import object_reference

SCHEDULED_TIMESTAMP_ANNOTATION = "batch.kubernetes.io/cronjob-scheduled-timestamp"
NEXT_SCHEDULE_DELTA = 0.1      # requeue a bit after the schedule time (NTP skew)
TOO_MANY_MISSED = 100
BATCH_V1 = "batch/v1"
_NONE, _FEW, _MANY = "none", "few", "many"


@dataclass
class CronJobSync:
    actions: list = field(default_factory=list)
    job: dict | None = None
    scheduled_time: float | None = None
    status: dict = field(default_factory=dict)
    update_status: bool = False
    requeue_after: float | None = None


# --- jobs --------------------------------------------------------------------------------------


def finished_status(job: dict) -> str | None:
    """"Complete" or "Failed" once the Job is finished (getFinishedStatus), else None."""
    c = finished_condition(job)
    return c.get("type") if c is not None else None


def _uid(obj: dict) -> str | None:
    return meta(obj).get("uid")


def _active(status: dict) -> list[dict]:
    return list(status.get("active") or [])


def _set_active(status: dict, refs: list[dict]) -> None:
    if refs:
        status["active"] = refs
    else:
        status.pop("active", None)


def _remove_active(status: dict, uid: str | None) -> None:
    _set_active(status, [r for r in _active(status) if r.get("uid") != uid])


def unlisted_jobs(cronjob: dict, jobs: list[dict]) -> list[dict]:
    """Running Jobs of ours missing from ``status.active``: the cached CronJob may be older than
    our own status write; upstream reads the CronJob from the apiserver before calling them
    unexpected, and so does the shell."""
    active = {r.get("uid") for r in _active(cronjob.get("status") or {})}
    return [j for j in jobs if _uid(j) not in active and finished_status(j) is None]


def active_refs_not_cached(cronjob: dict, jobs: list[dict]) -> list[dict]:
    """``status.active`` entries whose Job the cache does not have: the shell asks the
    apiserver, and only a NotFound makes one gone (a slow watch is not a deletion)."""
    cached = {_uid(j) for j in jobs}
    return [r for r in _active(cronjob.get("status") or {}) if r.get("uid") not in cached]


def _start_time_key(job: dict) -> tuple:
    """byJobStartTime: by status.startTime (Jobs without one last), then by name."""
    started = parse_time((job.get("status") or {}).get("startTime"))
    return (started is None, started or 0.0, meta(job).get("name") or "")


# --- schedule times ----------------------------------------------------------------------------


def _schedule(cronjob: dict, actions: list, name: str, namespace: str,
              warn_tz_prefix: bool) -> cron.Schedule:
    """formatSchedule + cron.ParseStandard; CronError if the schedule is unusable."""
    spec = cronjob.get("spec") or {}
    schedule = spec.get("schedule") or ""
    if "TZ" in schedule:
        if warn_tz_prefix:
            actions.append(RecordEvent(
                namespace, "CronJob", name, "Warning", "UnsupportedSchedule",
                f"CRON_TZ or TZ used in schedule {go_quote(schedule)} is not officially "
                "supported, see https://kubernetes.io/docs/concepts/workloads/controllers/"
                "cron-jobs/ for more details"))
        return cron.parse(schedule)
    return cron.parse(schedule, spec.get("timeZone"))


def _most_recent_schedule_time(cronjob: dict, status: dict, now: float, sched: cron.Schedule,
                               include_deadline: bool) -> tuple[float, float | None, str, str | None]:
    """mostRecentScheduleTime: (earliest time considered, the most recent due time or None,
    how many were missed: none/few/many, an error for a schedule that never fires)."""
    earliest = parse_time(status.get("lastScheduleTime"))
    if earliest is None:
        earliest = parse_time(meta(cronjob).get("creationTimestamp")) or 0.0
    deadline = (cronjob.get("spec") or {}).get("startingDeadlineSeconds")
    if include_deadline and deadline is not None and now - deadline > earliest:
        earliest = now - deadline
    t1 = sched.next_after(earliest)
    t2 = sched.next_after(t1)
    if not math.isfinite(t1):
        # robfig's Next gives the zero time for "59 23 31 2 *"; upstream then fails here
        return earliest, None, _NONE, "time difference between two schedules is less than 1 second"
    if now < t1:
        return earliest, None, _NONE, None
    if now < t2:
        return earliest, t1, _NONE, None
    between = round(t2 - t1)
    if between < 1:
        return earliest, None, _NONE, "time difference between two schedules is less than 1 second"
    # upstream's approximation: count intervals of (t2 - t1) since t1, step back to one before
    # the last and let the schedule find the most recent time from there (exact for @every)
    missed = int(now - t1) // between + 1
    potential_earliest = t1 + (missed - 2) * between
    recent = sched.times_between(potential_earliest, now)
    kind = _MANY if missed > TOO_MANY_MISSED else _FEW
    return earliest, (recent[-1] if recent else None), kind, None


def _next_schedule_delay(cronjob: dict, status: dict, now: float,
                         sched: cron.Schedule) -> float | None:
    """nextScheduleTimeDuration: seconds from now to the next schedule time (+ the delta)."""
    earliest, recent, missed, err = _most_recent_schedule_time(cronjob, status, now, sched, False)
    if err is not None:
        recent = now
    elif recent is None:
        recent = earliest if missed == _NONE else now
    nxt = sched.next_after(recent)
    if not math.isfinite(nxt):
        return None
    return max(0.0, nxt + NEXT_SCHEDULE_DELTA - now)


def requeue_after_schedule_change(cronjob: dict, now: float) -> tuple[float | None, list]:
    """updateCronJob for a changed schedule or time zone: when to look again, and the event for
    a schedule that does not parse (the key then waits for the next change)."""
    name, namespace = meta(cronjob).get("name"), meta(cronjob).get("namespace") or "default"
    try:
        sched = _schedule(cronjob, [], name, namespace, warn_tz_prefix=False)
    except cron.CronError:
        schedule = (cronjob.get("spec") or {}).get("schedule") or ""
        return None, [RecordEvent(namespace, "CronJob", name, "Warning",
                                  "UnParseableCronJobSchedule",
                                  f"unparseable schedule for cronjob: {schedule}")]
    return _next_schedule_delay(cronjob, cronjob.get("status") or {}, now, sched), []


# --- the Job -----------------------------------------------------------------------------------


def job_name(cronjob: dict, scheduled: float) -> str:
    return f"{meta(cronjob).get('name')}-{int(scheduled) // 60}"


def _rfc3339_in(t: float, time_zone: str | None) -> str:
    """Go's Format(time.RFC3339) of the scheduled time in the CronJob's zone (UTC without one)."""
    try:
        zone = cron.load_zone(time_zone or "")
    except cron.CronError:
        zone = datetime.timezone.utc
    moment = datetime.datetime.fromtimestamp(int(t), zone)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    offset = moment.utcoffset() or datetime.timedelta(0)
    if not offset:
        return text + "Z"
    minutes = int(offset.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    return f"{text}{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def job_from_template(cronjob: dict, scheduled: float) -> dict:
    """getJobFromTemplate2: the jobTemplate's labels, annotations (+ the scheduled timestamp)
    and spec, a controller reference to the CronJob."""
    spec = cronjob.get("spec") or {}
    template = spec.get("jobTemplate") or {}
    template_meta = template.get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    annotations[SCHEDULED_TIMESTAMP_ANNOTATION] = _rfc3339_in(scheduled, spec.get("timeZone"))
    metadata = {"name": job_name(cronjob, scheduled),
                "namespace": meta(cronjob).get("namespace") or "default",
                "annotations": annotations,
                "ownerReferences": [owner_reference(cronjob, "CronJob", BATCH_V1)]}
    if template_meta.get("labels"):
        metadata["labels"] = dict(template_meta["labels"])
    return {"apiVersion": BATCH_V1, "kind": "Job", "metadata": metadata,
            "spec": copy.deepcopy(template.get("spec") or {})}


def _job_ref(job: dict) -> dict:
    return object_reference({**job, "apiVersion": BATCH_V1, "kind": "Job"})


def _scheduled_time(job: dict) -> float | None:
    """The schedule time a Job was made for (its scheduled-timestamp annotation)."""
    return parse_time((meta(job).get("annotations") or {}).get(SCHEDULED_TIMESTAMP_ANNOTATION))


def job_started(status: dict, job: dict, scheduled: float) -> dict:
    """The status once ``job`` (as the apiserver returned it) runs for ``scheduled``."""
    status = copy.deepcopy(status)
    _set_active(status, _active(status) + [_job_ref(job)])
    status["lastScheduleTime"] = format_time(scheduled)
    return status


def controls(cronjob: dict, job: dict) -> bool:
    ref = controller_ref(job)
    return ref is not None and ref.get("uid") == _uid(cronjob)


# --- the sync ----------------------------------------------------------------------------------


def _delete_job(result: CronJobSync, namespace: str, name: str, job_ref: dict) -> None:
    """deleteJob: the Job (its pods follow, Background), its active entry, the event."""
    result.actions.append(DeleteObject(BATCH_V1, "Job", namespace, job_ref.get("name"),
                                       job_ref.get("uid"), "Background"))
    _remove_active(result.status, job_ref.get("uid"))
    result.actions.append(RecordEvent(namespace, "CronJob", name, "Normal", "SuccessfulDelete",
                                      f"Deleted job {job_ref.get('name')}"))
    result.update_status = True


def _cleanup_finished_jobs(cronjob: dict, jobs: list[dict], result: CronJobSync,
                           namespace: str, name: str) -> None:
    spec = cronjob.get("spec") or {}
    for kind, limit in (("Complete", spec.get("successfulJobsHistoryLimit")),
                        ("Failed", spec.get("failedJobsHistoryLimit"))):
        if limit is None:
            continue
        finished = sorted((j for j in jobs if finished_status(j) == kind), key=_start_time_key)
        for job in finished[:max(0, len(finished) - limit)]:
            _delete_job(result, namespace, name,
                        {"name": meta(job).get("name"), "uid": _uid(job)})


def sync_cronjob(cronjob: dict, jobs: list[dict], now: float,
                 gone_job_uids: frozenset[str] | set[str] = frozenset()) -> CronJobSync:
    """One sync of ``cronjob`` given the Jobs it controls (the cache) and the uids of active
    Jobs the apiserver said NotFound."""
    name = meta(cronjob).get("name")
    namespace = meta(cronjob).get("namespace") or "default"
    spec = cronjob.get("spec") or {}
    result = CronJobSync(status=copy.deepcopy(cronjob.get("status") or {}))
    status = result.status

    def event(type_: str, reason: str, message: str) -> None:
        result.actions.append(RecordEvent(namespace, "CronJob", name, type_, reason, message))

    _cleanup_finished_jobs(cronjob, jobs, result, namespace, name)

    children = set()
    for job in jobs:
        uid = _uid(job)
        children.add(uid)
        found = any(r.get("uid") == uid for r in _active(status))
        finished = finished_status(job)
        scheduled = _scheduled_time(job)
        if not found and finished is None and controls(cronjob, job) and scheduled is not None:
            # ours, made for a schedule time, its status write lost (a controller killed between
            # the create and the write): active, as the create's AlreadyExists path finds it
            _set_active(status, _active(status) + [_job_ref(job)])
            last = parse_time(status.get("lastScheduleTime"))
            if last is None or scheduled > last:
                status["lastScheduleTime"] = format_time(scheduled)
            result.update_status = True
        elif not found and finished is None:
            event("Warning", "UnexpectedJob",
                  f"Saw a job that the controller did not create or forgot: {meta(job).get('name')}")
        elif found and finished is not None:
            _remove_active(status, uid)
            event("Normal", "SawCompletedJob",
                  f"Saw completed job: {meta(job).get('name')}, status: {finished}")
            result.update_status = True
        elif finished == "Complete":
            # a Job need not be active to count: any success moves lastSuccessfulTime on
            completed = (job.get("status") or {}).get("completionTime")
            last = parse_time(status.get("lastSuccessfulTime"))
            if completed and (last is None or (parse_time(completed) or 0.0) > last):
                status["lastSuccessfulTime"] = completed
                result.update_status = True
    for ref in _active(status):
        if ref.get("uid") not in children and ref.get("uid") in gone_job_uids:
            event("Normal", "MissingJob", f"Active job went missing: {ref.get('name')}")
            _remove_active(status, ref.get("uid"))
            result.update_status = True

    if meta(cronjob).get("deletionTimestamp"):
        return result
    time_zone = spec.get("timeZone")
    if time_zone is not None:
        try:
            cron.load_zone(time_zone)
        except cron.CronError as err:
            event("Warning", "UnknownTimeZone",
                  f"invalid timeZone: {go_quote(time_zone)}: {err.message}")
            return result
    if spec.get("suspend"):
        return result
    try:
        sched = _schedule(cronjob, result.actions, name, namespace, warn_tz_prefix=True)
    except cron.CronError as err:
        event("Warning", "UnparseableSchedule",
              f"unparseable schedule: {go_quote(spec.get('schedule') or '')} : {err.message}")
        return result

    _, scheduled, missed, err = _most_recent_schedule_time(cronjob, status, now, sched, True)
    if err is not None:
        event("Warning", "InvalidSchedule", f"invalid schedule: {spec.get('schedule')} : {err}")
        return result
    if scheduled is None or scheduled > now:
        result.requeue_after = _next_schedule_delay(cronjob, status, now, sched)
        return result
    if missed == _MANY:
        event("Warning", "TooManyMissedTimes", "too many missed start times. Set or decrease "
              ".spec.startingDeadlineSeconds or check clock skew")

    deadline = spec.get("startingDeadlineSeconds")
    if deadline is not None and scheduled + deadline < now:
        stamp = datetime.datetime.fromtimestamp(int(scheduled), datetime.timezone.utc)
        event("Warning", "MissSchedule", "Missed scheduled time to start a job: "
              + stamp.strftime("%a, %d %b %Y %H:%M:%S +0000"))
        result.requeue_after = _next_schedule_delay(cronjob, status, now, sched)
        return result
    name_taken = any(r.get("name") == job_name(cronjob, scheduled) for r in _active(status))
    if name_taken or parse_time(status.get("lastScheduleTime")) == float(int(scheduled)):
        result.requeue_after = _next_schedule_delay(cronjob, status, now, sched)
        return result
    policy = spec.get("concurrencyPolicy") or "Allow"
    if policy == "Forbid" and _active(status):
        event("Normal", "JobAlreadyActive",
              "Not starting job because prior execution is running and concurrency policy is Forbid")
        result.requeue_after = _next_schedule_delay(cronjob, status, now, sched)
        return result
    if policy == "Replace":
        for ref in _active(status):
            _delete_job(result, namespace, name, ref)

    result.job = job_from_template(cronjob, scheduled)
    result.scheduled_time = scheduled
    started = {**status, "lastScheduleTime": format_time(scheduled)}
    result.requeue_after = _next_schedule_delay(cronjob, started, now, sched)
    return result
