"""The framework's default plugins, reading a NodeInfo's running totals instead of re-summing
the node's pods on every call.

    schedule(pod, cache.nodes(), cache.infos, rng, filters=FILTERS, scores=SCORES)

Only the plugins that look at ``node_pods`` are replaced; the others are the framework's own
objects. Each replacement computes exactly what the framework's function computes (the
scheduler's tests check that on random clusters), and when handed a plain list (the
framework's preemption pass filters lists it builds) it simply calls that function.

The pod being scheduled is the same object for every node of a decision, so what the plugins
read of it (`PodFacts`: requests, owner) is worked out once per decision (`facts`), not once
per node and plugin.
"""
from __future__ import annotations

from components.scheduling import filters as F
from components.scheduling import scores as S

from .nodeinfo import NodeInfo, owner_index_key


class PodFacts:
    """What the plugins read of the pod being scheduled, the same for every node."""

    __slots__ = ("requests", "non_zero", "owner", "uid")

    def __init__(self, pod: dict):
        meta = pod.get("metadata") or {}
        self.requests = F.pod_requests(pod)
        self.non_zero = F.pod_requests(pod, non_zero=True)
        owner = S.owner_key(pod)
        # NodeInfo's owner index key, None when OwnerSpread counts nothing
        self.owner = None if owner is None else owner_index_key(meta.get("namespace", "default"), owner)
        self.uid = meta.get("uid")


class _LastFacts:
    """PodFacts of the last pod asked about, remembered by identity (a decision asks once per
    node and plugin about the same pod object)."""

    def __init__(self) -> None:
        self._pod: dict | None = None
        self._facts: PodFacts | None = None

    def __call__(self, pod: dict) -> PodFacts:
        if pod is not self._pod:
            self._pod, self._facts = pod, PodFacts(pod)
        return self._facts


facts = _LastFacts()


def _allocatable(node: dict, info: NodeInfo) -> F.Allocatable:
    return info.allocatable if info.node is node else F.allocatable(node)


def node_resources_fit_reasons(pod: dict, node: dict, node_pods) -> list:
    """filters.node_resources_fit_reasons over the totals."""
    if not isinstance(node_pods, NodeInfo):
        return F.node_resources_fit_reasons(pod, node, node_pods)
    return insufficient(facts(pod).requests, node_pods, _allocatable(node, node_pods))


def insufficient(want: F.Resources, info: NodeInfo, alloc: F.Allocatable) -> list:
    """NodeResourcesFit's reasons for a pod requesting `want` on the node of `info`."""
    reasons = []
    if alloc.pods is not None and len(info) + 1 > alloc.pods:
        reasons.append(F.ERR_TOO_MANY_PODS)
    used = info.requested
    if want.cpu > 0 and want.cpu > alloc.cpu - used.cpu:
        reasons.append(F.ERR_INSUFFICIENT.format(resource="cpu"))
    if want.memory > 0 and want.memory > alloc.memory - used.memory:
        reasons.append(F.ERR_INSUFFICIENT.format(resource="memory"))
    return reasons


def least_allocated(pod: dict, node: dict, node_pods) -> int:
    """scores.least_allocated over the totals."""
    if not isinstance(node_pods, NodeInfo):
        return S.least_allocated(pod, node, node_pods)
    alloc = _allocatable(node, node_pods)
    requested = node_pods.non_zero_requested + facts(pod).non_zero
    return S.least_allocated_score(requested.cpu, requested.memory, alloc.cpu, alloc.memory)


def balanced_allocation(pod: dict, node: dict, node_pods) -> int:
    """scores.balanced_allocation over the totals."""
    if not isinstance(node_pods, NodeInfo):
        return S.balanced_allocation(pod, node, node_pods)
    alloc = _allocatable(node, node_pods)
    requested = node_pods.requested + facts(pod).requests
    return S.balanced_score(requested.cpu, requested.memory, alloc.cpu, alloc.memory)


def same_owner_count(pod: dict, node: dict, node_pods) -> int:
    """scores.same_owner_count from the node's owner index."""
    if not isinstance(node_pods, NodeInfo):
        return S.same_owner_count(pod, node, node_pods)
    pod_facts = facts(pod)
    if pod_facts.owner is None:
        return 0
    return node_pods.count_owned(pod_facts.owner, pod_facts.uid)


_FILTERS = {"NodeResourcesFit": node_resources_fit_reasons}
_SCORES = {"NodeResourcesFit": least_allocated, "NodeResourcesBalancedAllocation": balanced_allocation,
           "OwnerSpread": same_owner_count}

FILTERS = [f._replace(reasons=_FILTERS[f.name]) if f.name in _FILTERS else f for f in F.FILTERS]
SCORES = [s._replace(raw=_SCORES[s.name]) if s.name in _SCORES else s for s in S.SCORES]
