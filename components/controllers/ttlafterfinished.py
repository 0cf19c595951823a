"""The TTL-after-finished controller's core (k8s pkg/controller/ttlafterfinished).

A finished Job (a True Complete or Failed condition) with ``spec.ttlSecondsAfterFinished`` is
deleted, with Foreground propagation and a uid precondition, once that many seconds have passed
since it finished (the condition's lastTransitionTime). The shell asks ``time_left`` of the
cached Job, and before deleting asks again of a fresh read of it: the TTL may have been
changed or the Job replaced since the cache saw it.
"""
from __future__ import annotations

from components.controllers import DeleteObject
from components.controllers.job import API_VERSION, KIND, finished_at, is_finished
from components.controllers.podutil import is_terminating, meta


def needs_cleanup(job: dict) -> bool:
    return ((job.get("spec") or {}).get("ttlSecondsAfterFinished") is not None
            and is_finished(job) and not is_terminating(job))


def time_left(job: dict, now: float) -> float | None:
    """Seconds until the Job expires (<= 0: expired now); None when it is no concern of ours
    (no TTL, not finished, being deleted already, or no finish time to go by)."""
    if not needs_cleanup(job):
        return None
    finish = finished_at(job)
    if finish is None:
        return None
    return finish + int(job["spec"]["ttlSecondsAfterFinished"]) - now


def delete(job: dict) -> DeleteObject:
    m = meta(job)
    return DeleteObject(API_VERSION, KIND, m.get("namespace") or "default", m.get("name"),
                        m.get("uid"), "Foreground")
