"""The pod-write observer shared by the ReplicaSet and DaemonSet shells."""
from __future__ import annotations

from components.controllers import CreatePod, DeletePod
from components.controllers.replicaset import Expectation, Expectations
from components.controller_manager.podbookkeeping import PodBookkeeping

OWNER = {"kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "ns", "uid": "u"}}
CREATE = CreatePod("ns", {"metadata": {"generateName": "agent-"}})
DELETE = DeletePod("ns", "agent-x", "pod-uid")


class Recorder:
    def __init__(self):
        self.events = []

    def event(self, obj, type_, reason, message, field_path=None):
        self.events.append((obj["metadata"]["name"], type_, reason, message))


def bookkeeping(adds=2, deletes=("pod-uid",)):
    expectations, recorder = Expectations(), Recorder()
    expectations.set("ns/agent", Expectation(adds=adds, deletes=frozenset(deletes), timestamp=0))
    return PodBookkeeping(expectations, recorder, "ns/agent", OWNER), expectations, recorder


def test_successes_are_recorded_as_events_and_left_for_the_informer_to_observe():
    b, expectations, recorder = bookkeeping()
    b.pod_created(CREATE, {"metadata": {"name": "agent-abc"}})
    b.pod_deleted(DELETE)
    assert recorder.events == [("agent", "Normal", "SuccessfulCreate", "Created pod: agent-abc"),
                               ("agent", "Normal", "SuccessfulDelete", "Deleted pod: agent-x")]
    assert expectations.get("ns/agent").adds == 2
    assert expectations.get("ns/agent").deletes == {"pod-uid"}


def test_failures_lower_the_expectations_and_are_warned_about():
    b, expectations, recorder = bookkeeping()
    b.pod_create_failed(CREATE, RuntimeError("quota"))
    b.pod_delete_failed(DELETE, RuntimeError("denied"))
    record = expectations.get("ns/agent")
    assert (record.adds, record.deletes, record.failure) == (1, frozenset(), "denied")
    assert recorder.events == [("agent", "Warning", "FailedCreate", "Error creating: quota"),
                               ("agent", "Warning", "FailedDelete", "Error deleting: denied")]


def test_skipped_writes_are_observed_without_an_event():
    b, expectations, recorder = bookkeeping(adds=1)
    b.pod_skipped(CREATE)
    b.pod_skipped(DELETE)
    assert expectations.satisfied("ns/agent", now=0) and recorder.events == []
