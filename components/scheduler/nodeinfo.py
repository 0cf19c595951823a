"""NodeInfo: one node and the pods bound (or assumed) to it, with running totals.

kube-scheduler keeps a NodeInfo per node so a decision never re-sums the pods already placed:
the requests (real and "non-zero") are added when a pod arrives and subtracted when it leaves.
The framework's plugins take ``node_pods`` as a list and re-sum it on every call, which costs
O(bound pods) quantity parsings per decision (tens of milliseconds at a thousand pods); the
plugins in `components.scheduler.plugins` read these totals instead. Likewise an index by owner
answers OwnerSpread's "siblings on this node" without walking a thousand replicas.

A NodeInfo iterates over its pods, so it can stand wherever the framework expects the list
(its preemption pass does iterate). Terminal pods are never stored here: they hold nothing.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Optional

from components.scheduling import filters as F
from components.scheduling import scores as S


def _minus(a: F.Resources, b: F.Resources) -> F.Resources:
    return F.Resources(a.cpu - b.cpu, a.memory - b.memory)


def _footprint(pod: dict) -> tuple:
    """Every field an _Entry is computed from (F.pod_requests reads the containers, the init
    containers and the overhead): a pod update that keeps it equal -- a status change, a label
    -- changes neither the node's totals nor its owner index, and is not parsed again."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return (spec.get("containers"), spec.get("initContainers"), spec.get("overhead"),
            meta.get("ownerReferences"), bool(meta.get("deletionTimestamp")), meta.get("namespace"),
            meta.get("uid"))


def owner_index_key(namespace: str, owner: str) -> str:
    """A NodeInfo's owner index key (a namespace has no "/"); a str, whose hash Python keeps,
    as the fast path looks one up on every node."""
    return f"{namespace}/{owner}"


class _Entry:
    __slots__ = ("pod", "footprint", "requested", "non_zero", "owners", "uid")

    def __init__(self, pod: dict, footprint: tuple):
        meta = pod.get("metadata") or {}
        self.pod = pod
        self.footprint = footprint
        self.requested = F.pod_requests(pod)
        self.non_zero = F.pod_requests(pod, non_zero=True)
        # The owners OwnerSpread may count this pod for: all of them (the framework's rule),
        # none while it is being deleted (the framework skips terminating siblings).
        namespace = meta.get("namespace", "default")
        self.owners = () if meta.get("deletionTimestamp") else \
            [owner_index_key(namespace, owner) for owner in S._owner_keys(pod)]
        self.uid = meta.get("uid")


class NodeInfo:
    """The pods on one node (by key) and their summed requests; `node` is None for a node the
    pods name but the node informer does not (yet, or any more) know."""

    __slots__ = ("name", "node", "allocatable", "plain", "requested", "non_zero_requested",
                 "resource_scores", "owners", "_pods", "_uids")

    def __init__(self, name: str, node: Optional[dict] = None):
        self.name = name
        self.node: Optional[dict] = None
        self.allocatable: Optional[F.Allocatable] = None
        self.plain = False
        self.requested = F.Resources()
        self.non_zero_requested = F.Resources()
        # fastpath's memo: a pod shape (its requests and non-zero requests) -> that pod's
        # weighted resource scores here, or that it does not fit. A Deployment's replicas ask
        # the same, and a decision changes one node, so the next replica finds the others'
        # scores computed. Emptied whenever the totals or the allocatable change.
        self.resource_scores: dict = {}
        self._pods: dict[str, _Entry] = {}
        # owner_index_key(namespace, owner) -> the keys of this node's live pods with that owner
        self.owners: dict[str, dict[str, None]] = {}
        self._uids: dict[str, str] = {}   # pod uid -> key
        if node is not None:
            self.set_node(node)

    def set_node(self, node: Optional[dict]) -> None:
        self.node = node
        self.resource_scores.clear()
        # parsed once per node update, not once per plugin call
        self.allocatable = F.allocatable(node) if node is not None else None
        # No taint and not cordoned: the node-side filters pass for any pod whose own
        # constraints are plain too, and it scores no untolerated taint (fastpath.py)
        spec = (node or {}).get("spec") or {}
        self.plain = node is not None and not spec.get("taints") and not spec.get("unschedulable")

    # -- pods --

    def add_pod(self, key: str, pod: dict) -> None:
        """Store a pod, replacing any earlier version of it."""
        footprint = _footprint(pod)
        entry = self._pods.get(key)
        if entry is not None and entry.footprint == footprint:
            entry.pod = pod   # the totals, the owner index and the score memo stand
            return
        self.remove_pod(key)
        entry = _Entry(pod, footprint)
        self._pods[key] = entry
        self.resource_scores.clear()
        self.requested = self.requested + entry.requested
        self.non_zero_requested = self.non_zero_requested + entry.non_zero
        for owner in entry.owners:
            self.owners.setdefault(owner, {})[key] = None
        if entry.uid:
            self._uids[entry.uid] = key

    def remove_pod(self, key: str) -> bool:
        entry = self._pods.pop(key, None)
        if entry is None:
            return False
        self.resource_scores.clear()
        self.requested = _minus(self.requested, entry.requested)
        self.non_zero_requested = _minus(self.non_zero_requested, entry.non_zero)
        for owner in entry.owners:
            bucket = self.owners.get(owner)
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self.owners[owner]
        if entry.uid and self._uids.get(entry.uid) == key:
            del self._uids[entry.uid]
        return True

    def count_owned(self, owner: str, uid: Optional[str] = None) -> int:
        """scores.same_owner_count's count, in O(1): this node's pods, not being deleted, listing
        `owner` (an owner_index_key: the owner in a namespace) among their owners -- the pod
        `uid` itself excepted."""
        bucket = self.owners.get(owner)
        if not bucket:
            return 0
        itself = uid and self._uids.get(uid)
        return len(bucket) - (1 if itself and itself in bucket else 0)

    def __iter__(self) -> Iterator[dict]:
        return (entry.pod for entry in self._pods.values())

    def __len__(self) -> int:
        return len(self._pods)

    def __repr__(self) -> str:
        return f"NodeInfo({self.name!r}, pods={len(self._pods)}, requested={tuple(self.requested)})"
