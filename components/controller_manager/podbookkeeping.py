"""The pod-write observer of the controllers that keep expectations (ReplicaSet, DaemonSet):
what the executor reports of a sync's pod writes goes to the owner's expectations and events.

    await executor.execute(actions, observer=PodBookkeeping(expectations, recorder, key, owner))
"""
from __future__ import annotations

from components.controllers import CreatePod, DeletePod
from components.controllers.podutil import meta
from components.controllers.replicaset import Expectations
from kubemu.events import EventRecorder


class PodBookkeeping:
    """One sync's pod writes: tell the expectations what won't be observed, and record the
    events k8s records (only the shell knows a created pod's generated name)."""

    def __init__(self, expectations: Expectations, recorder: EventRecorder, key: str,
                 owner: dict):
        self.expectations = expectations
        self.recorder = recorder
        self.key = key
        self.owner = owner

    def pod_created(self, action: CreatePod, pod: dict) -> None:
        self.recorder.event(self.owner, "Normal", "SuccessfulCreate",
                            f"Created pod: {meta(pod).get('name')}")

    def pod_create_failed(self, action: CreatePod, err: Exception) -> None:
        self.expectations.creation_failed(self.key, str(err))
        self.recorder.event(self.owner, "Warning", "FailedCreate", f"Error creating: {err}")

    def pod_deleted(self, action: DeletePod) -> None:
        self.recorder.event(self.owner, "Normal", "SuccessfulDelete",
                            f"Deleted pod: {action.name}")

    def pod_delete_failed(self, action: DeletePod, err: Exception) -> None:
        self.expectations.deletion_failed(self.key, action.uid, str(err))
        self.recorder.event(self.owner, "Warning", "FailedDelete", f"Error deleting: {err}")

    def pod_skipped(self, action: CreatePod | DeletePod) -> None:
        # never sent (an earlier write of the sync failed): nothing to wait for (k8s counts
        # the pods a failed slow-start batch skipped as observed, too)
        if isinstance(action, CreatePod):
            self.expectations.creation_observed(self.key)
        else:
            self.expectations.deletion_observed(self.key, action.uid)
