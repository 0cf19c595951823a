"""TTL-after-finished core: when a finished Job expires, with a fake clock."""
from __future__ import annotations

import pytest

from components.controllers import DeleteObject
from components.controllers.podutil import format_time
from components.controllers.ttlafterfinished import delete, needs_cleanup, time_left

NOW = 1_700_000_000.0


def make_job(ttl=30, finished_at=NOW, ctype="Complete", status="True", deleting=False):
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "pi", "namespace": "ns", "uid": "u1"},
           "spec": {}, "status": {}}
    if ttl is not None:
        job["spec"]["ttlSecondsAfterFinished"] = ttl
    if ctype is not None:
        job["status"]["conditions"] = [
            {"type": "SuccessCriteriaMet", "status": "True",
             "lastTransitionTime": format_time(finished_at - 5)},
            {"type": ctype, "status": status, "lastTransitionTime": format_time(finished_at)}]
    if deleting:
        job["metadata"]["deletionTimestamp"] = format_time(NOW)
    return job


@pytest.mark.parametrize("ctype", ["Complete", "Failed"])
def test_expires_ttl_seconds_after_the_finish(ctype):
    job = make_job(ttl=30, ctype=ctype)
    assert time_left(job, NOW) == 30
    assert time_left(job, NOW + 29) == 1
    assert time_left(job, NOW + 30) == 0
    assert time_left(job, NOW + 100) == -70


def test_ttl_zero_expires_at_once():
    assert time_left(make_job(ttl=0), NOW) == 0


@pytest.mark.parametrize("job", [
    make_job(ttl=None),                         # no TTL
    make_job(ctype=None),                       # still running
    make_job(ctype="Complete", status="False"),
    make_job(ctype="FailureTarget"),            # not finished yet: pods still terminating
    make_job(deleting=True),                    # being deleted already
])
def test_not_our_concern(job):
    assert time_left(job, NOW + 1000) is None


def test_needs_cleanup():
    assert needs_cleanup(make_job())
    assert not needs_cleanup(make_job(ttl=None))


def test_delete_is_foreground_with_the_uid():
    assert delete(make_job()) == DeleteObject("batch/v1", "Job", "ns", "pi", "u1", "Foreground")
