"""The scheduling cycle for the common pod, straight over the NodeInfos.

    node, processed = schedule_plain(pod, cache.node_infos(), rng, num_to_find, start)

A *plain* pod (`is_plain`: no spec.nodeName, no nodeSelector, no node affinity) on a *plain*
node (NodeInfo.plain: no taint, not cordoned) passes NodeUnschedulable, NodeName,
TaintToleration and NodeAffinity whatever its tolerations, and scores 0 raw in
TaintToleration and NodeAffinity. So on such nodes only NodeResourcesFit is checked, and the
scores are computed from the NodeInfo's totals without the framework's per-plugin tables --
both memoised per pod shape in the NodeInfo until its totals change (NodeInfo.resource_scores),
as a Deployment's replicas ask the same and a decision changes one node; any other node gets
the full filter chain and its raw TaintToleration score. Everything else is the framework's
(framework.schedule with plugins.FILTERS and plugins.SCORES): the same
percentageOfNodesToScore walk, the same plugin arithmetic and weights (shared helpers in
scores.py), the same ties. A pod that fits nowhere returns None, and the caller asks the
framework for kube-scheduler's message.
"""
from __future__ import annotations

import random
from typing import Optional

from components.scheduling import filters as F
from components.scheduling import scores as S
from components.scheduling.framework import run_filters

from . import plugins
from .nodeinfo import NodeInfo

_WEIGHTS = {score.name: score.weight for score in plugins.SCORES}
# The plugins the scores below stand for: a change to plugins.SCORES must be made here too.
PLUGINS = ("TaintToleration", "NodeAffinity", "OwnerSpread", "NodeResourcesFit",
           "NodeResourcesBalancedAllocation")


def is_plain(pod: dict) -> bool:
    """No constraint of the pod's own on which node it runs (tolerations aside: they only
    matter on tainted nodes)."""
    spec = pod.get("spec") or {}
    return not spec.get("nodeName") and not spec.get("nodeSelector") and not F.node_affinity(pod)


def schedule_plain(pod: dict, infos: list[NodeInfo], rng: Optional[random.Random],
                   num_to_find: int, start: int) -> tuple[Optional[str], int]:
    """(the chosen node's name or None when none fits, the nodes examined) for a plain pod:
    framework.schedule's decision with plugins.FILTERS and plugins.SCORES."""
    if not infos:
        return None, 0
    facts = plugins.facts(pod)
    want, want_non_zero, owner, uid = facts.requests, facts.non_zero, facts.owner, facts.uid
    shape = f"{want.cpu} {want.memory} {want_non_zero.cpu} {want_non_zero.memory}"   # a str keeps its hash
    start %= len(infos)
    ring = infos[start:] + infos[:start]
    # The feasible nodes, as columns: names, raw TaintToleration, raw OwnerSpread, weighted
    # resource scores. Built a slice of the ring at a time in list comprehensions (a Python
    # statement per node costs more than the scoring itself), each slice as long as the feasible
    # nodes still wanted, so it never overshoots num_to_find.
    names, taints, owned, resources = [], [], [], []
    examined = 0
    while len(names) < num_to_find and examined < len(ring):
        nodes = ring[examined:examined + num_to_find - len(names)]
        examined += len(nodes)
        # a memo only plain nodes hold (set_node empties it): the rest is looked at one by one
        scores = [info.resource_scores.get(shape, _UNKNOWN) for info in nodes]
        tainted = _score_the_unknown(pod, nodes, scores, shape, want, want_non_zero)
        if _UNFIT in scores:
            nodes, scores = [n for n, s in zip(nodes, scores) if s != _UNFIT], [s for s in scores if s != _UNFIT]
        names += [info.name for info in nodes]
        taints += [tainted.get(info.name, 0) for info in nodes] if tainted else [0] * len(nodes)
        # most nodes hold no sibling: the index says so without counting (no owner: in no index)
        owned += [info.count_owned(owner, uid) if owner in info.owners else 0 for info in nodes]
        resources += scores
    return (_best(names, taints, owned, resources, rng) if names else None), examined


_MEMO_SHAPES = 64   # pod shapes a NodeInfo's score memo holds at most
_UNFIT = -1   # a memoised "NodeResourcesFit refuses the pod"; scores are >= 0
_UNKNOWN = -2   # not in the memo (a node that is not plain never is)


def _score_the_unknown(pod: dict, nodes: list[NodeInfo], scores: list, shape: str,
                       want: F.Resources, want_non_zero: F.Resources) -> dict:
    """Fill in the scores the memo did not know (_UNFIT where a filter refuses the pod); the
    raw TaintToleration scores of the feasible tainted nodes, by name."""
    tainted = {}
    at = -1
    while True:
        try:
            at = scores.index(_UNKNOWN, at + 1)   # a scan in C: most slices have few unknowns
        except ValueError:
            return tainted
        info = nodes[at]
        if info.plain:
            if len(info.resource_scores) >= _MEMO_SHAPES:   # many pod shapes, a node that never changes
                info.resource_scores.clear()
            scores[at] = info.resource_scores[shape] = _resource_scores(info, want, want_non_zero)
        elif run_filters(pod, info.node, info, plugins.FILTERS)[0] is not None:
            scores[at] = _UNFIT
        else:
            scores[at] = _resource_scores(info, want, want_non_zero)
            tainted[info.name] = S.intolerable_prefer_no_schedule(pod, info.node)


def _resource_scores(info: NodeInfo, want: F.Resources, want_non_zero: F.Resources) -> int:
    """NodeResourcesFit's (LeastAllocated) and BalancedAllocation's weighted scores on `info`'s
    node for a pod asking `want`, or _UNFIT when NodeResourcesFit refuses it there."""
    alloc, non_zero, requested = info.allocatable, info.non_zero_requested, info.requested
    if plugins.insufficient(want, info, alloc):
        return _UNFIT
    least = S.least_allocated_score(non_zero.cpu + want_non_zero.cpu, non_zero.memory + want_non_zero.memory,
                                    alloc.cpu, alloc.memory)
    balanced = S.balanced_score(requested.cpu + want.cpu, requested.memory + want.memory, alloc.cpu, alloc.memory)
    return (_WEIGHTS["NodeResourcesFit"] * least
            + _WEIGHTS["NodeResourcesBalancedAllocation"] * balanced)


def _weighted_spread(raw: int, most: int) -> int:
    return _WEIGHTS["OwnerSpread"] * S.spread_score(raw, most)


def _weighted_taints(raw: int, most: int) -> int:
    return _WEIGHTS["TaintToleration"] * S.normalized_score(raw, most, reverse=True)


def _best(names: list, taints: list, owned: list, resources: list, rng: Optional[random.Random]) -> str:
    """The framework's normalisation and weighted sum over the feasible nodes' scores, and its
    pick among the best."""
    totals = resources
    # Normalised per distinct raw score (few: counts of siblings, of taints); a plugin scoring
    # every node alike (one distinct raw score) adds the same to every total, so it is left out.
    # NodeAffinity: a plain pod has no preferred term, every node's normalised score is 0.
    for raws, weighted in ((owned, _weighted_spread), (taints, _weighted_taints)):
        distinct = set(raws)
        if len(distinct) > 1:
            most = max(distinct)
            scores = {raw: weighted(raw, most) for raw in distinct}
            totals = [scores[raw] + total for raw, total in zip(raws, totals)]
    best = max(totals)
    tied = [name for name, total in zip(names, totals) if total == best]
    tied.sort()
    return rng.choice(tied) if rng is not None else tied[0]
