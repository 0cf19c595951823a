"""The EventRecorder: core/v1 Events, repeats aggregated into a count, never blocking or raising."""
from __future__ import annotations

import asyncio

from kubemu.events import MAX_IN_FLIGHT, EventRecorder, make_event, object_reference
from kubemu.wire import Unavailable

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web-1", "namespace": "default", "uid": "u1", "resourceVersion": "7"}}


class FakeApi:
    def __init__(self, fail: bool = False, block: asyncio.Event | None = None):
        self.created: list[dict] = []
        self.patched: list[tuple[str, dict]] = []
        self.fail = fail
        self.block = block

    async def create(self, resource, obj, namespace=None):
        if self.block is not None:
            await self.block.wait()
        if self.fail:
            raise Unavailable("apiserver down")
        self.created.append(obj)
        return obj

    async def patch(self, resource, name, patch, namespace=None):
        self.patched.append((name, patch))
        return {}


def test_make_event_is_a_core_v1_event_about_the_object():
    ref = object_reference(POD, "spec.containers{web}")
    event = make_event(ref, "Warning", "BackOff", "Back-off restarting", "kubelet", "node-1", 1_800_000_000, "abc")
    assert event["metadata"] == {"name": "web-1.abc", "namespace": "default"}
    assert event["involvedObject"] == {"kind": "Pod", "apiVersion": "v1", "name": "web-1", "uid": "u1",
                                       "namespace": "default", "resourceVersion": "7",
                                       "fieldPath": "spec.containers{web}"}
    assert event["source"] == {"component": "kubelet", "host": "node-1"}
    assert event["count"] == 1 and event["firstTimestamp"] == event["lastTimestamp"] == "2027-01-15T08:00:00Z"


def test_repeats_bump_the_count_of_one_event():
    async def main():
        clock = [1000.0]
        api = FakeApi()
        rec = EventRecorder(api, "default-scheduler", clock=lambda: clock[0])
        rec.event(POD, "Warning", "FailedScheduling", "0/1 nodes are available")
        await rec.close()
        clock[0] += 5
        rec.event(POD, "Warning", "FailedScheduling", "0/1 nodes are available")
        rec.event(POD, "Normal", "Scheduled", "Successfully assigned default/web-1 to node-1")
        await rec.close()
        return api
    api = asyncio.run(main())
    assert [e["reason"] for e in api.created] == ["FailedScheduling", "Scheduled"]
    assert api.patched == [(api.created[0]["metadata"]["name"], {"count": 2, "lastTimestamp": "1970-01-01T00:16:45Z"})]


def test_a_failed_write_is_swallowed_and_forgotten():
    async def main():
        api = FakeApi(fail=True)
        rec = EventRecorder(api, "kubelet")
        rec.event(POD, "Normal", "Started", "Started container web")
        await rec.close()
        api.fail = False
        rec.event(POD, "Normal", "Started", "Started container web")  # created anew, not bumped
        await rec.close()
        return api
    api = asyncio.run(main())
    assert len(api.created) == 1 and api.patched == []


def test_events_beyond_the_in_flight_limit_are_dropped_not_queued():
    async def main():
        block = asyncio.Event()
        api = FakeApi(block=block)
        rec = EventRecorder(api, "replicaset-controller")
        for i in range(MAX_IN_FLIGHT + 10):  # one object each: no spam filter in the way
            pod = {**POD, "metadata": {**POD["metadata"], "name": f"web-{i}", "uid": f"u{i}"}}
            rec.event(pod, "Normal", "Scheduled", f"Successfully assigned default/web-{i} to node-1")
        dropped = rec.dropped
        block.set()
        await rec.close()
        return api, dropped
    api, dropped = asyncio.run(main())
    assert dropped == 10 and len(api.created) == MAX_IN_FLIGHT


def test_an_object_gets_a_burst_of_25_per_reason_then_one_per_5_minutes():
    async def main():
        clock = [0.0]
        api = FakeApi()
        rec = EventRecorder(api, "replicaset-controller", clock=lambda: clock[0])
        for i in range(40):
            rec.event(POD, "Normal", "SuccessfulCreate", f"Created pod: web-{i}")
        rec.event(POD, "Normal", "SuccessfulDelete", "Deleted pod: web-0")  # another reason: its own bucket
        await rec.close()
        throttled = rec.throttled
        clock[0] += 300
        rec.event(POD, "Normal", "SuccessfulCreate", "Created pod: web-40")
        rec.event(POD, "Normal", "SuccessfulCreate", "Created pod: web-41")
        await rec.close()
        return api, throttled, rec.throttled
    api, throttled, throttled_after = asyncio.run(main())
    reasons = [e["reason"] for e in api.created]
    assert reasons.count("SuccessfulCreate") == 26 and reasons.count("SuccessfulDelete") == 1
    assert throttled == 15 and throttled_after == 16
