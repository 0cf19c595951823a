"""The framework's default plugins, reading a NodeInfo's running totals instead of re-summing
the node's pods on every call.

    schedule(pod, cache.nodes(), cache.infos, rng, filters=FILTERS, scores=SCORES)

Only the plugins that look at ``node_pods`` are replaced; the others are the framework's own
objects. Each replacement computes exactly what the framework's function computes (the
scheduler's tests check that on random clusters), and when handed a plain list (the
framework's preemption pass filters lists it builds) it simply calls that function.

The pod being scheduled is the same object for every node of a decision, so its requests are
parsed once per decision (`_Requests`), not once per node and plugin.
"""
from __future__ import annotations

from components.scheduling import filters as F
from components.scheduling import scores as S

from .nodeinfo import NodeInfo


class _Requests:
    """pod_requests of the last pod asked about, remembered by identity."""

    def __init__(self) -> None:
        self._pod: dict | None = None
        self._values: dict[bool, F.Resources] = {}

    def __call__(self, pod: dict, non_zero: bool = False) -> F.Resources:
        if pod is not self._pod:
            self._pod, self._values = pod, {}
        value = self._values.get(non_zero)
        if value is None:
            value = self._values[non_zero] = F.pod_requests(pod, non_zero)
        return value


_requests = _Requests()


def _allocatable(node: dict, info: NodeInfo) -> F.Allocatable:
    return info.allocatable if info.node is node else F.allocatable(node)


def node_resources_fit_reasons(pod: dict, node: dict, node_pods) -> list:
    """filters.node_resources_fit_reasons over the totals."""
    if not isinstance(node_pods, NodeInfo):
        return F.node_resources_fit_reasons(pod, node, node_pods)
    alloc = _allocatable(node, node_pods)
    reasons = []
    if alloc.pods is not None and len(node_pods) + 1 > alloc.pods:
        reasons.append(F.ERR_TOO_MANY_PODS)
    want, used = _requests(pod), node_pods.requested
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
    requested = node_pods.non_zero_requested + _requests(pod, non_zero=True)
    total = (S.least_requested_score(requested.cpu, alloc.cpu)
             + S.least_requested_score(requested.memory, alloc.memory))
    return total // 2   # both terms are >= 0: Go's truncating division is floor division here


def balanced_allocation(pod: dict, node: dict, node_pods) -> int:
    """scores.balanced_allocation over the totals."""
    if not isinstance(node_pods, NodeInfo):
        return S.balanced_allocation(pod, node, node_pods)
    alloc = _allocatable(node, node_pods)
    requested = node_pods.requested + _requests(pod)
    fractions = [min(req / cap, 1.0)
                 for req, cap in ((requested.cpu, alloc.cpu), (requested.memory, alloc.memory)) if cap]
    std = abs((fractions[0] - fractions[1]) / 2) if len(fractions) == 2 else 0.0
    return int((1 - std) * S.MAX_NODE_SCORE)


def same_owner_count(pod: dict, node: dict, node_pods) -> int:
    """scores.same_owner_count from the node's owner index."""
    if not isinstance(node_pods, NodeInfo):
        return S.same_owner_count(pod, node, node_pods)
    owner = S.owner_key(pod)
    if owner is None:
        return 0
    meta = pod.get("metadata") or {}
    return node_pods.count_owned(meta.get("namespace", "default"), owner, meta.get("uid"))


_FILTERS = {"NodeResourcesFit": node_resources_fit_reasons}
_SCORES = {"NodeResourcesFit": least_allocated, "NodeResourcesBalancedAllocation": balanced_allocation,
           "OwnerSpread": same_owner_count}

FILTERS = [f._replace(reasons=_FILTERS[f.name]) if f.name in _FILTERS else f for f in F.FILTERS]
SCORES = [s._replace(raw=_SCORES[s.name]) if s.name in _SCORES else s for s in S.SCORES]
