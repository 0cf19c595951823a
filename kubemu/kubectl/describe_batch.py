"""kubectl describe job / cronjob (pkg/describe: describeJob, describeCronJob)."""
from __future__ import annotations

from kubemu.api.meta import format_selector

from .describe import NONE, Related, Writer, annotations_multiline, controlled_by, events_section, \
    labels_multiline, meta
from .describe_pod import pod_template
from .timefmt import human_duration, parse_time, rfc1123z

UNSET = "<unset>"
COMPLETED_INDEXES_SHOWN = 50


def _status(obj: dict) -> dict:
    return obj.get("status") or {}


def capped_indexes(indexes: str, soft_limit: int = COMPLETED_INDEXES_SHOWN) -> str:
    """capIndexesListOrNone: the list up to the first comma past the limit, then `...`."""
    if not indexes:
        return NONE
    cut = indexes.find(",", soft_limit)
    return indexes if cut < 0 else indexes[:cut + 1] + "..."


def describe_job(job: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec, status = meta(job), job.get("spec") or {}, _status(job)
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    w.write(0, f"Selector:\t{format_selector(spec.get('selector'))}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    if controlled_by(job):
        w.write(0, f"Controlled By:\t{controlled_by(job)}\n")
    if spec.get("parallelism") is not None:
        w.write(0, f"Parallelism:\t{spec['parallelism']}\n")
    w.write(0, f"Completions:\t{spec['completions'] if spec.get('completions') is not None else UNSET}\n")
    for title, field in (("Completion Mode", "completionMode"), ("Suspend", "suspend"),
                         ("Backoff Limit", "backoffLimit"), ("TTL Seconds After Finished", "ttlSecondsAfterFinished")):
        value = spec.get(field)
        if value is not None:
            w.write(0, f"{title}:\t{str(value).lower() if isinstance(value, bool) else value}\n")
    start, end = status.get("startTime"), status.get("completionTime")
    if start:
        w.write(0, f"Start Time:\t{rfc1123z(start)}\n")
    if end:
        w.write(0, f"Completed At:\t{rfc1123z(end)}\n")
    if start and end and parse_time(start) is not None and parse_time(end) is not None:
        w.write(0, f"Duration:\t{human_duration(parse_time(end) - parse_time(start))}\n")
    if spec.get("activeDeadlineSeconds") is not None:
        w.write(0, f"Active Deadline Seconds:\t{spec['activeDeadlineSeconds']}s\n")
    counts = {f: int(status.get(f) or 0) for f in ("active", "succeeded", "failed")}
    ready = "" if status.get("ready") is None else f" ({int(status['ready'])} Ready)"
    w.write(0, f"Pods Statuses:\t{counts['active']} Active{ready} / {counts['succeeded']} Succeeded / "
               f"{counts['failed']} Failed\n")
    if spec.get("completionMode") == "Indexed":
        w.write(0, f"Completed Indexes:\t{capped_indexes(status.get('completedIndexes') or '')}\n")
    pod_template(w, spec.get("template") or {})
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()


def _or_unset(value, suffix: str = "") -> str:
    return UNSET if value is None else f"{value}{suffix}"


def describe_cronjob(cj: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec, status = meta(cj), cj.get("spec") or {}, _status(cj)
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    w.write(0, f"Schedule:\t{spec.get('schedule', '')}\n")
    w.write(0, f"Concurrency Policy:\t{spec.get('concurrencyPolicy', '')}\n")
    suspend = spec.get("suspend")
    w.write(0, f"Suspend:\t{UNSET if suspend is None else str(bool(suspend))}\n")
    w.write(0, f"Successful Job History Limit:\t{_or_unset(spec.get('successfulJobsHistoryLimit'))}\n")
    w.write(0, f"Failed Job History Limit:\t{_or_unset(spec.get('failedJobsHistoryLimit'))}\n")
    w.write(0, f"Starting Deadline Seconds:\t{_or_unset(spec.get('startingDeadlineSeconds'), 's')}\n")
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    selector = job_spec.get("selector")
    w.write(0, f"Selector:\t{format_selector(selector) if selector is not None else UNSET}\n")
    w.write(0, f"Parallelism:\t{_or_unset(job_spec.get('parallelism'))}\n")
    w.write(0, f"Completions:\t{_or_unset(job_spec.get('completions'))}\n")
    if job_spec.get("activeDeadlineSeconds") is not None:
        w.write(0, f"Active Deadline Seconds:\t{job_spec['activeDeadlineSeconds']}s\n")
    pod_template(w, job_spec.get("template") or {})
    last = status.get("lastScheduleTime")
    w.write(0, f"Last Schedule Time:\t{rfc1123z(last) if last else UNSET}\n")
    active = [ref.get("name", "") for ref in status.get("active") or []]
    w.write(0, f"Active Jobs:\t{', '.join(active) or NONE}\n")
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()
