"""Which pods and which changes concern the scheduler (pure predicates over API objects), and
the status patch that reports a pod unschedulable.
"""
from __future__ import annotations

from typing import Optional

from components.scheduling.filters import is_terminal

SCHEDULER_NAME = "default-scheduler"


def is_bound(pod: dict) -> bool:
    return bool((pod.get("spec") or {}).get("nodeName"))


def needs_scheduling(pod: dict) -> bool:
    """Pending, alive, and ours: no node yet, not being deleted, not finished, spec.schedulerName
    absent or ours, and no scheduling gate left (a gated pod waits outside the queue)."""
    spec = pod.get("spec") or {}
    return (not spec.get("nodeName")
            and not (pod.get("metadata") or {}).get("deletionTimestamp")
            and not is_terminal(pod)
            and spec.get("schedulerName") in (None, "", SCHEDULER_NAME)
            and not spec.get("schedulingGates"))


def priority(pod: dict) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def _scheduling_view(pod: dict) -> tuple:
    meta = pod.get("metadata") or {}
    return pod.get("spec"), meta.get("labels"), meta.get("annotations")


def pod_changed(old: dict, new: dict) -> bool:
    """A pending pod changed in a way that may change where it fits (kube-scheduler's
    isPodUpdated: anything but status and bookkeeping). Status-only writes -- such as our own
    PodScheduled condition -- do not count, or every failure would retry itself at once."""
    return _scheduling_view(old) != _scheduling_view(new)


def _node_view(node: dict) -> tuple:
    spec = node.get("spec") or {}
    status = node.get("status") or {}
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return (spec.get("unschedulable"), spec.get("taints"), (node.get("metadata") or {}).get("labels"),
            status.get("allocatable"), conditions)


def node_changed(old: dict, new: dict) -> bool:
    """A node update that may let pods fit (kube-scheduler's nodeSchedulingPropertiesChange):
    cordoning, taints, labels, allocatable, a condition's status. Heartbeats are not."""
    return _node_view(old) != _node_view(new)


def _scheduled_condition(pod: dict) -> Optional[dict]:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            return cond
    return None


def unschedulable_patch(pod: dict, message: str, now: str) -> Optional[dict]:
    """The strategic-merge status patch setting PodScheduled=False, reason Unschedulable,
    `message`; None when the pod already says exactly that (kube-scheduler skips the write).
    The conditions list merges by type, so the pod's other conditions stay; the pod's
    resourceVersion is a precondition, so a pod bound since we looked is never marked."""
    current = _scheduled_condition(pod) or {}
    if (current.get("status"), current.get("reason"), current.get("message")) == \
            ("False", "Unschedulable", message):
        return None
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": message, "lastProbeTime": None}
    if current.get("status") != "False" or not current.get("lastTransitionTime"):
        condition["lastTransitionTime"] = now
    return {"metadata": {"resourceVersion": (pod.get("metadata") or {}).get("resourceVersion")},
            "status": {"conditions": [condition]}}
