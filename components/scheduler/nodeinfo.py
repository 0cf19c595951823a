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


class _Entry:
    __slots__ = ("pod", "requested", "non_zero", "owners", "namespace", "uid")

    def __init__(self, pod: dict):
        meta = pod.get("metadata") or {}
        self.pod = pod
        self.requested = F.pod_requests(pod)
        self.non_zero = F.pod_requests(pod, non_zero=True)
        # The owners OwnerSpread may count this pod for: all of them (the framework's rule),
        # none while it is being deleted (the framework skips terminating siblings).
        self.owners = () if meta.get("deletionTimestamp") else S._owner_keys(pod)
        self.namespace = meta.get("namespace", "default")
        self.uid = meta.get("uid")


class NodeInfo:
    """The pods on one node (by key) and their summed requests; `node` is None for a node the
    pods name but the node informer does not (yet, or any more) know."""

    __slots__ = ("name", "node", "allocatable", "requested", "non_zero_requested", "_pods", "_owners",
                 "_uids")

    def __init__(self, name: str, node: Optional[dict] = None):
        self.name = name
        self.node: Optional[dict] = None
        self.allocatable: Optional[F.Allocatable] = None
        self.requested = F.Resources()
        self.non_zero_requested = F.Resources()
        self._pods: dict[str, _Entry] = {}
        # (namespace, owner key) -> the keys of this node's live pods with that owner
        self._owners: dict[tuple[str, str], dict[str, None]] = {}
        self._uids: dict[str, str] = {}   # pod uid -> key
        if node is not None:
            self.set_node(node)

    def set_node(self, node: Optional[dict]) -> None:
        self.node = node
        # parsed once per node update, not once per plugin call
        self.allocatable = F.allocatable(node) if node is not None else None

    # -- pods --

    def add_pod(self, key: str, pod: dict) -> None:
        """Store a pod, replacing any earlier version of it."""
        self.remove_pod(key)
        entry = _Entry(pod)
        self._pods[key] = entry
        self.requested = self.requested + entry.requested
        self.non_zero_requested = self.non_zero_requested + entry.non_zero
        for owner in entry.owners:
            self._owners.setdefault((entry.namespace, owner), {})[key] = None
        if entry.uid:
            self._uids[entry.uid] = key

    def remove_pod(self, key: str) -> bool:
        entry = self._pods.pop(key, None)
        if entry is None:
            return False
        self.requested = _minus(self.requested, entry.requested)
        self.non_zero_requested = _minus(self.non_zero_requested, entry.non_zero)
        for owner in entry.owners:
            bucket = self._owners.get((entry.namespace, owner))
            if bucket is not None:
                bucket.pop(key, None)
                if not bucket:
                    del self._owners[(entry.namespace, owner)]
        if entry.uid and self._uids.get(entry.uid) == key:
            del self._uids[entry.uid]
        return True

    def count_owned(self, namespace: str, owner: str, uid: Optional[str] = None) -> int:
        """scores.same_owner_count's count, in O(1): this node's pods in `namespace`, not being
        deleted, listing `owner` among their owners -- the pod `uid` itself excepted."""
        bucket = self._owners.get((namespace, owner))
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
