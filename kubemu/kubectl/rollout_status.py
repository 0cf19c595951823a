"""What `kubectl rollout status` says of a StatefulSet or a DaemonSet (kubectl's
StatefulSetStatusViewer and DaemonSetStatusViewer; the Deployment's is the Deployment
controller's `rollout_status`), pure."""
from __future__ import annotations

from components.controllers.deployment import RolloutStatus, rollout_status

_ONLY_ROLLING = "error: rollout status is only available for RollingUpdate strategy type"


def _int(value) -> int:
    return int(value or 0)


def _strategy(obj: dict) -> dict:
    return (obj.get("spec") or {}).get("updateStrategy") or {}


def statefulset_status(sts: dict) -> RolloutStatus:
    spec, status = sts.get("spec") or {}, sts.get("status") or {}
    strategy = _strategy(sts)
    if (strategy.get("type") or "RollingUpdate") != "RollingUpdate":
        return RolloutStatus(_ONLY_ROLLING, True, True)
    observed = _int(status.get("observedGeneration"))
    if observed == 0 or _int((sts.get("metadata") or {}).get("generation")) > observed:
        return RolloutStatus("Waiting for statefulset spec update to be observed...", False)
    replicas = spec.get("replicas")
    ready, updated = _int(status.get("readyReplicas")), _int(status.get("updatedReplicas"))
    if replicas is not None and ready < replicas:
        return RolloutStatus(f"Waiting for {replicas - ready} pods to be ready...", False)
    rolling = strategy.get("rollingUpdate")
    if rolling is not None:
        partition = rolling.get("partition")
        if replicas is not None and partition is not None and updated < replicas - partition:
            return RolloutStatus(f"Waiting for partitioned roll out to finish: {updated} out of "
                                 f"{replicas - partition} new pods have been updated...", False)
        return RolloutStatus(f"partitioned roll out complete: {updated} new pods have been "
                             f"updated...", True)
    if status.get("updateRevision") != status.get("currentRevision"):
        return RolloutStatus(f"waiting for statefulset rolling update to complete {updated} pods "
                             f"at revision {status.get('updateRevision')}...", False)
    return RolloutStatus(f"statefulset rolling update complete "
                         f"{_int(status.get('currentReplicas'))} pods at revision "
                         f"{status.get('currentRevision')}...", True)


def daemonset_status(ds: dict) -> RolloutStatus:
    status = ds.get("status") or {}
    name = (ds.get("metadata") or {}).get("name")
    if (_strategy(ds).get("type") or "RollingUpdate") != "RollingUpdate":
        return RolloutStatus(_ONLY_ROLLING, True, True)
    if _int((ds.get("metadata") or {}).get("generation")) > _int(status.get("observedGeneration")):
        return RolloutStatus("Waiting for daemon set spec update to be observed...", False)
    desired = _int(status.get("desiredNumberScheduled"))
    updated, available = _int(status.get("updatedNumberScheduled")), _int(status.get("numberAvailable"))
    if updated < desired:
        return RolloutStatus(f"Waiting for daemon set \"{name}\" rollout to finish: {updated} out of "
                             f"{desired} new pods have been updated...", False)
    if available < desired:
        return RolloutStatus(f"Waiting for daemon set \"{name}\" rollout to finish: {available} of "
                             f"{desired} updated pods are available...", False)
    return RolloutStatus(f"daemon set \"{name}\" successfully rolled out", True)


VIEWERS = {"Deployment": rollout_status, "StatefulSet": statefulset_status,
           "DaemonSet": daemonset_status}
