"""The node lifecycle controller's reconcile core (k8s pkg/controller/nodelifecycle, with its
taint-based eviction manager, pkg/controller/tainteviction).

``sync_nodes(nodes, leases, pods, now, limiter=..., settings=...) -> NodeLifecycleSync`` is pure:

1. **Health** (tryUpdateNodeHealth). A node's last heartbeat is the newest of its Lease's
   ``spec.renewTime`` (``kube-node-lease/<node>``), its Ready condition's ``lastHeartbeatTime``
   and (for a node that never posted status) its ``creationTimestamp``. When ``now`` is past it by
   more than ``node_monitor_grace_period`` (``node_startup_grace_period`` while the node has no
   Ready condition), Ready, MemoryPressure, DiskPressure and PIDPressure become "Unknown" with
   reason ``NodeStatusUnknown`` / "Kubelet stopped posting node status." (absent ones are added
   with ``NodeStatusNeverUpdated`` / "Kubelet never posted node status.") -> ``UpdateStatus("Node",
   "", name, status)``; a Ready True -> not-True change records a ``NodeNotReady`` event and marks
   the node's ready pods not ready (MarkPodsNotReady). kubemu's processes share one clock, so the
   heartbeat timestamps are compared with ``now`` directly (k8s keeps its own probe timestamps
   to survive clock skew).
2. **NoSchedule taints** (doNoScheduleTaintingPass), applied at once: not-ready / unreachable
   (Ready False / Unknown), memory-pressure / disk-pressure / pid-pressure / network-unavailable
   (condition True), unschedulable (``spec.unschedulable``).
3. **NoExecute taints** (processTaintBaseEviction): Ready False -> ``node.kubernetes.io/not-ready``,
   Ready Unknown -> ``node.kubernetes.io/unreachable`` (with ``timeAdded``). Swapping one for the
   other and removing them (node Ready again) are immediate; *adding* one is rate-limited like
   ``--node-eviction-rate``: a token bucket (``EvictionLimiter``, burst ``eviction_burst`` = 1, so the
   first node is immediate) shared by all nodes, oldest-unhealthy node first. The limiter is
   explicit state: passed in, returned in the result, kept by the shell. (k8s' per-zone queues and
   the partial/full-disruption rates are not modelled: one zone, always "Normal".)
4. **Taint-based eviction**: a pod bound to a node with NoExecute taints is deleted
   (``DeletePod`` + ``TaintManagerEviction`` event "Marking for deletion Pod ns/name") when some
   taint is not tolerated, or when a matching toleration's ``tolerationSeconds`` has run out,
   counted from the taint's ``timeAdded`` (the earliest deadline over the taints wins). Pods
   tolerating without ``tolerationSeconds`` stay. Pods with no toleration for not-ready /
   unreachable are treated as having the DefaultTolerationSeconds admission's ones
   (``default_toleration_seconds``). Mirror pods (``kubernetes.io/config.mirror``), DaemonSet pods
   and terminating pods are never evicted.

Node writes are one ``UpdateNode(name, {"spec": {"taints": [...]}})`` (whole list) per node.
``requeue_after`` is the delay to the next due decision: a heartbeat's grace ending, a limiter
token, a toleration running out (None: nothing pending).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Iterable

from components.controllers import DeletePod, RecordEvent, UpdateNode, UpdateStatus
from components.controllers.podutil import format_time, is_terminating, meta, parse_time

TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
NO_EXECUTE = "NoExecute"
NO_SCHEDULE = "NoSchedule"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
LEASE_NAMESPACE = "kube-node-lease"
PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")
# condition type -> NoSchedule taint key, set while the condition is True
_CONDITION_TAINTS = {"MemoryPressure": "node.kubernetes.io/memory-pressure",
                     "DiskPressure": "node.kubernetes.io/disk-pressure",
                     "PIDPressure": "node.kubernetes.io/pid-pressure",
                     "NetworkUnavailable": "node.kubernetes.io/network-unavailable"}
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_NO_SCHEDULE_KEYS = frozenset({TAINT_UNREACHABLE, TAINT_NOT_READY, TAINT_UNSCHEDULABLE,
                               *_CONDITION_TAINTS.values()})
_EPS = 1e-6


@dataclass(frozen=True)
class NodeLifecycleSettings:
    node_monitor_grace_period: float = 40.0
    node_startup_grace_period: float = 60.0
    eviction_rate: float = 0.1             # nodes per second (--node-eviction-rate)
    eviction_burst: int = 1
    default_toleration_seconds: float = 300.0


@dataclass(frozen=True)
class EvictionLimiter:
    """Token bucket (k8s flowcontrol.NewTokenBucketRateLimiter). ``last`` None = full bucket."""
    tokens: float = 0.0
    last: float | None = None

    def take(self, now: float, rate: float, burst: int) -> tuple[bool, "EvictionLimiter", float]:
        """(allowed, new state, seconds until the next token when refused)."""
        if rate <= 0:
            return False, self, math.inf
        if self.last is None:
            tokens = float(burst)
        else:
            tokens = min(float(burst), self.tokens + max(0.0, now - self.last) * rate)
        if tokens >= 1.0 - 1e-9:
            return True, EvictionLimiter(max(0.0, tokens - 1.0), now), 0.0
        return False, EvictionLimiter(tokens, now), (1.0 - tokens) / rate


@dataclass
class NodeLifecycleSync:
    actions: list
    limiter: EvictionLimiter = field(default_factory=EvictionLimiter)
    requeue_after: float | None = None


# --- helpers ----------------------------------------------------------------------------------


def get_condition(node: dict, ctype: str) -> dict | None:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def _lease_index(leases: Iterable[dict] | dict | None) -> dict[str, dict]:
    if leases is None:
        return {}
    if isinstance(leases, dict):
        return dict(leases)
    out = {}
    for lease in leases:
        m = meta(lease)
        if (m.get("namespace") or LEASE_NAMESPACE) == LEASE_NAMESPACE:
            out[m.get("name")] = lease
    return out


def last_heartbeat(node: dict, lease: dict | None) -> float | None:
    times = []
    if lease:
        times.append(parse_time((lease.get("spec") or {}).get("renewTime")))
    ready = get_condition(node, "Ready")
    if ready:
        times.append(parse_time(ready.get("lastHeartbeatTime")))
    else:
        times.append(parse_time(meta(node).get("creationTimestamp")))
    times = [t for t in times if t is not None]
    return max(times) if times else None


def toleration_matches(toleration: dict, taint: dict) -> bool:
    """k8s Toleration.ToleratesTaint."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    if operator == "Equal":
        return bool(key) and (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def effective_tolerations(pod: dict, default_seconds: float) -> list[dict]:
    """The pod's tolerations plus what the DefaultTolerationSeconds admission plugin would add."""
    tolerations = list((pod.get("spec") or {}).get("tolerations") or [])
    extra = []
    for key in (TAINT_NOT_READY, TAINT_UNREACHABLE):
        if not any((t.get("key") or "") in ("", key) and (t.get("effect") or "") in ("", NO_EXECUTE)
                   for t in tolerations):
            extra.append({"key": key, "operator": "Exists", "effect": NO_EXECUTE,
                          "tolerationSeconds": default_seconds})
    return tolerations + extra


def eviction_deadline(pod: dict, taints: list[dict], default_seconds: float) -> float | None:
    """When the pod must be evicted because of these NoExecute taints: -inf for "now" (an
    untolerated taint), a time, or None (tolerated forever)."""
    tolerations = effective_tolerations(pod, default_seconds)
    deadline = None
    for taint in taints:
        matching = [t for t in tolerations if toleration_matches(t, taint)]
        if not matching:
            return -math.inf
        secs = [t.get("tolerationSeconds") for t in matching]
        if any(s is None for s in secs):
            continue  # some matching toleration is unbounded: this taint is tolerated forever
        limit = max(0.0, float(min(secs)))
        added = parse_time(taint.get("timeAdded"))
        due = (added if added is not None else -math.inf) + limit
        deadline = due if deadline is None else min(deadline, due)
    return deadline


def is_mirror_pod(pod: dict) -> bool:
    return MIRROR_ANNOTATION in (meta(pod).get("annotations") or {})


def is_daemonset_pod(pod: dict) -> bool:
    return any(ref.get("kind") == "DaemonSet" and ref.get("controller")
               for ref in meta(pod).get("ownerReferences") or [])


def _mark_unknown(conditions: list[dict], node: dict, now: float) -> tuple[list[dict], bool]:
    """Ready + pressure conditions -> Unknown (k8s tryUpdateNodeHealth). Returns (new, changed)."""
    conditions = copy.deepcopy(conditions)
    changed = False
    stamp = format_time(now)
    created = meta(node).get("creationTimestamp") or stamp
    by_type = {c.get("type"): c for c in conditions}
    for ctype in ("Ready",) + PRESSURE_CONDITIONS:
        cond = by_type.get(ctype)
        if cond is None:
            conditions.append({"type": ctype, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                               "message": "Kubelet never posted node status.",
                               "lastHeartbeatTime": created, "lastTransitionTime": stamp})
            changed = True
        elif cond.get("status") != "Unknown":
            cond.update(status="Unknown", reason="NodeStatusUnknown",
                        message="Kubelet stopped posting node status.", lastTransitionTime=stamp)
            changed = True
    return conditions, changed


def _taint(key: str, effect: str, now: float | None = None) -> dict:
    taint = {"key": key, "effect": effect}
    if now is not None:
        taint["timeAdded"] = format_time(now)
    return taint


# --- the reconcile ----------------------------------------------------------------------------


def sync_nodes(nodes: Iterable[dict], leases: Iterable[dict] | dict | None, pods: Iterable[dict],
               now: float, limiter: EvictionLimiter | None = None,
               settings: NodeLifecycleSettings | None = None) -> NodeLifecycleSync:
    settings = settings or NodeLifecycleSettings()
    limiter = limiter or EvictionLimiter()
    lease_by_node = _lease_index(leases)
    pods = list(pods)
    pods_by_node: dict[str, list[dict]] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            pods_by_node.setdefault(node_name, []).append(pod)

    actions: list = []
    waits: list[float] = []
    plans = []  # (node, name, ready_status|None, taints-without-controller-NoExecute, existing NE, since)

    for node in sorted(nodes, key=lambda n: meta(n).get("name") or ""):
        name = meta(node).get("name")
        status = node.get("status") or {}
        conditions = list(status.get("conditions") or [])
        ready = get_condition(node, "Ready")
        grace = settings.node_monitor_grace_period if ready else settings.node_startup_grace_period
        beat = last_heartbeat(node, lease_by_node.get(name))
        old_ready = ready.get("status") if ready else None
        new_ready = old_ready
        if beat is None or now > beat + grace:
            conditions, changed = _mark_unknown(conditions, node, now)
            if changed:
                new_status = copy.deepcopy(status)
                new_status["conditions"] = conditions
                actions.append(UpdateStatus("Node", "", name, new_status))
            if ready is not None:  # a node that never posted status has no taint decisions yet
                new_ready = "Unknown"
        else:
            waits.append(beat + grace - now + _EPS)

        if old_ready == "True" and new_ready not in (None, "True"):
            actions.append(RecordEvent("default", "Node", name, "Normal", "NodeNotReady",
                                       f"Node {name} status is now: NodeNotReady"))
        if new_ready not in (None, "True"):
            for pod in pods_by_node.get(name, []):
                actions.extend(_mark_pod_not_ready(pod, now))

        # NoSchedule taints: exactly the controller-owned keys the conditions call for.
        cond_status = {c.get("type"): c.get("status") for c in conditions}
        want_ns = []
        if new_ready == "False":
            want_ns.append(TAINT_NOT_READY)
        elif new_ready == "Unknown":
            want_ns.append(TAINT_UNREACHABLE)
        want_ns += [key for ctype, key in _CONDITION_TAINTS.items() if cond_status.get(ctype) == "True"]
        if (node.get("spec") or {}).get("unschedulable"):
            want_ns.append(TAINT_UNSCHEDULABLE)
        old_taints = list((node.get("spec") or {}).get("taints") or [])
        taints = []
        have_ns = set()
        for t in old_taints:
            if t.get("effect") == NO_SCHEDULE and t.get("key") in _NO_SCHEDULE_KEYS:
                if t.get("key") in want_ns and t.get("key") not in have_ns:
                    taints.append(t)
                    have_ns.add(t.get("key"))
                continue
            taints.append(t)
        taints += [_taint(k, NO_SCHEDULE) for k in want_ns if k not in have_ns]

        ready_cond = next((c for c in conditions if c.get("type") == "Ready"), None)
        since = parse_time((ready_cond or {}).get("lastTransitionTime")) or now
        plans.append([node, name, new_ready, old_taints, taints, since])

    # NoExecute taints: removal and swap at once, additions through the rate limiter.
    candidates = []
    for plan in plans:
        node, name, new_ready, old_taints, taints, since = plan
        want = {"False": TAINT_NOT_READY, "Unknown": TAINT_UNREACHABLE}.get(new_ready)
        ours = [t for t in taints if t.get("effect") == NO_EXECUTE
                and t.get("key") in (TAINT_NOT_READY, TAINT_UNREACHABLE)]
        if want is None:
            plan[4] = [t for t in taints if t not in ours]
        elif any(t.get("key") == want for t in ours):
            plan[4] = [t for t in taints if t not in ours or t.get("key") == want]
        elif ours:  # SwapNodeControllerTaint
            plan[4] = [t for t in taints if t not in ours] + [_taint(want, NO_EXECUTE, now)]
        else:
            candidates.append((since, name, plan, want))
    for since, name, plan, want in sorted(candidates, key=lambda c: (c[0], c[1])):
        ok, limiter, wait = limiter.take(now, settings.eviction_rate, settings.eviction_burst)
        if not ok:
            if math.isfinite(wait):
                waits.append(wait + _EPS)
            break
        plan[4] = plan[4] + [_taint(want, NO_EXECUTE, now)]

    for node, name, new_ready, old_taints, taints, since in plans:
        if taints != old_taints:
            actions.append(UpdateNode(name, {"spec": {"taints": taints}}))
        no_execute = [t for t in taints if t.get("effect") == NO_EXECUTE]
        if not no_execute:
            continue
        for pod in sorted(pods_by_node.get(name, []), key=lambda p: meta(p).get("name") or ""):
            if is_terminating(pod) or is_mirror_pod(pod) or is_daemonset_pod(pod):
                continue
            deadline = eviction_deadline(pod, no_execute, settings.default_toleration_seconds)
            if deadline is None:
                continue
            if deadline <= now:
                m = meta(pod)
                ns = m.get("namespace") or "default"
                actions.append(DeletePod(ns, m.get("name"), m.get("uid")))
                actions.append(RecordEvent(ns, "Pod", m.get("name"), "Normal",
                                           "TaintManagerEviction",
                                           f"Marking for deletion Pod {ns}/{m.get('name')}"))
            else:
                waits.append(deadline - now)

    return NodeLifecycleSync(actions, limiter, min(waits) if waits else None)


def _mark_pod_not_ready(pod: dict, now: float) -> list:
    """k8s MarkPodsNotReady: a ready pod on a not-ready node gets Ready=False."""
    if is_terminating(pod):
        return []
    status = pod.get("status") or {}
    conditions = copy.deepcopy(status.get("conditions") or [])
    changed = False
    for cond in conditions:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            cond.update(status="False", lastTransitionTime=format_time(now))
            changed = True
    if not changed:
        return []
    new_status = copy.deepcopy(status)
    new_status["conditions"] = conditions
    m = meta(pod)
    return [UpdateStatus("Pod", m.get("namespace") or "default", m.get("name"), new_status)]


__all__ = ["NodeLifecycleSettings", "EvictionLimiter", "NodeLifecycleSync", "sync_nodes",
           "eviction_deadline", "effective_tolerations", "toleration_matches", "last_heartbeat",
           "TAINT_UNREACHABLE", "TAINT_NOT_READY"]
