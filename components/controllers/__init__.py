"""Pure reconcile cores of the controller-manager's controllers.

Each controller is a pure function of (cached objects, now) -> actions. The controller-manager
shell (informers, workqueues, API writes) executes the actions; these modules never do I/O and
never read a clock. Objects are Kubernetes-shaped dicts; ``now`` is seconds since the epoch.

Actions are small frozen dataclasses, defined here so both controllers and the shell share them:

* ``CreatePod(namespace, pod)``                 - POST the pod (it carries ``generateName``).
* ``DeletePod(namespace, name, uid)``           - DELETE with a uid precondition.
* ``Adopt(kind, namespace, name, uid, owner_reference)``  - patch ownerReferences to add a
  controller reference (orphan adoption; k8s' ControllerRefManager).
* ``Release(kind, namespace, name, uid, owner_uid)``       - remove our ownerReference from an
  object that no longer matches our selector.
* ``UpdateStatus(kind, namespace, name, status)``          - PUT the status subresource.
* ``CreateReplicaSet(namespace, replicaset)``
* ``UpdateReplicaSet(namespace, name, changes)``  - ``changes`` is a JSON merge patch (RFC 7386).
* ``DeleteReplicaSet(namespace, name, uid)``
* ``UpdateDeployment(namespace, name, changes)``  - merge patch (revision annotation).
* ``RecordEvent(namespace, kind, name, type, reason, message)``
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CreatePod:
    namespace: str
    pod: dict


@dataclass(frozen=True)
class DeletePod:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class Adopt:
    kind: str
    namespace: str
    name: str
    uid: str
    owner_reference: dict


@dataclass(frozen=True)
class Release:
    kind: str
    namespace: str
    name: str
    uid: str
    owner_uid: str


@dataclass(frozen=True)
class UpdateStatus:
    kind: str
    namespace: str
    name: str
    status: dict


@dataclass(frozen=True)
class CreateReplicaSet:
    namespace: str
    replicaset: dict


@dataclass(frozen=True)
class UpdateReplicaSet:
    namespace: str
    name: str
    changes: dict


@dataclass(frozen=True)
class DeleteReplicaSet:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class UpdateDeployment:
    namespace: str
    name: str
    changes: dict


@dataclass(frozen=True)
class RecordEvent:
    namespace: str
    kind: str
    name: str
    type: str  # "Normal" | "Warning"
    reason: str
    message: str


Action = (CreatePod | DeletePod | Adopt | Release | UpdateStatus | CreateReplicaSet
          | UpdateReplicaSet | DeleteReplicaSet | UpdateDeployment | RecordEvent)


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply a JSON merge patch (RFC 7386) to a copy of ``target``: how the shell (and the tests'
    simulators) apply ``UpdateReplicaSet.changes`` / ``UpdateDeployment.changes``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


__all__ = ["CreatePod", "DeletePod", "Adopt", "Release", "UpdateStatus", "CreateReplicaSet",
           "UpdateReplicaSet", "DeleteReplicaSet", "UpdateDeployment", "RecordEvent", "Action",
           "merge_patch"]


# --- actions on any object: node patches, deletes and patches (node lifecycle, garbage collector) ---


@dataclass(frozen=True)
class UpdateNode:
    """JSON merge patch (RFC 7386) on a Node object, e.g. ``{"spec": {"taints": [...]}}`` (a list
    in a merge patch replaces the whole list). Node conditions go through ``UpdateStatus("Node",
    "", name, status)`` instead."""
    name: str
    changes: dict


@dataclass(frozen=True)
class DeleteObject:
    """DELETE any object with a uid precondition and ``propagationPolicy`` ("Background",
    "Foreground" or "Orphan"). The shell maps (api_version, kind) to its resource path."""
    api_version: str
    kind: str
    namespace: str | None
    name: str
    uid: str
    propagation_policy: str = "Background"


@dataclass(frozen=True)
class PatchObject:
    """JSON merge patch on any object (ownerReferences / finalizers edits of the garbage
    collector), to be sent with a uid precondition and, when given, ``resource_version`` as an
    optimistic-concurrency precondition (the patch was computed from that version's lists)."""
    api_version: str
    kind: str
    namespace: str | None
    name: str
    uid: str
    changes: dict
    resource_version: str | None = None


Action = Action | UpdateNode | DeleteObject | PatchObject
__all__ += ["UpdateNode", "DeleteObject", "PatchObject"]


# --- creating and updating any object (ServiceAccount, root CA publisher, workloads) ---------


@dataclass(frozen=True)
class CreateObject:
    """POST any object (its apiVersion and kind say where). AlreadyExists counts as done: the
    informer reports the object that won, and its sync compares that one."""
    namespace: str | None
    object: dict


@dataclass(frozen=True)
class UpdateObject:
    """PUT any object; the resourceVersion it carries (the cached one it was computed from)
    makes a concurrent change a Conflict, and the retry recomputes from fresher caches."""
    namespace: str | None
    object: dict


Action = Action | CreateObject | UpdateObject
__all__ += ["CreateObject", "UpdateObject"]


# --- finalizer removal (the Job controller's pod tracking) -----------------------------------


@dataclass(frozen=True)
class RemoveFinalizer:
    """Take one finalizer off an object, leaving the others as they are then (a strategic
    merge patch's ``$deleteFromPrimitiveList``, with a uid precondition): the Job controller
    releasing the pods it has counted. Its outcome matters to the controller (a pod whose
    finalizer removal failed is not counted yet), so its shell executes it and reports it."""
    api_version: str
    kind: str
    namespace: str | None
    name: str
    uid: str
    finalizer: str


Action = Action | RemoveFinalizer
__all__ += ["RemoveFinalizer"]
