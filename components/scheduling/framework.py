"""One scheduling cycle: filter the nodes, score the feasible ones, pick one, or explain why not.

    result = schedule(pod, nodes, pods_by_node)
    result.node      # the chosen node's name, or None
    result.message   # on failure, kube-scheduler's FailedScheduling message

What kube-scheduler does, and this does too:

  * Each node runs the filters in the default order (filters.FILTERS) and stops at the first
    failing one; that filter's reasons become the node's status (NodeResourcesFit may give
    several: "Insufficient cpu" and "Insufficient memory").
  * The message is FitError.Error(): "0/N nodes are available: " + the reason histogram +
    "." The histogram is the strings "<count> <reason>" sorted with Go's sort.Strings, i.e.
    byte-wise on the whole string, count first -- so not by count: "1 node(s) had untolerated
    taint {a: }" sorts before "2 Insufficient cpu", and "10 x" before "2 y".
  * Then the DefaultPreemption PostFilter's word, appended as " preemption: ..." --
    "not eligible due to preemptionPolicy=Never." for such pods, else a second FitError over
    the nodes' preemption statuses: "Preemption is not helpful for scheduling" for nodes that
    failed an UnschedulableAndUnresolvable filter (all but NodeResourcesFit), "No preemption
    victims found for incoming pod" where no bound pod has a lower spec.priority, else the
    fit reasons that remain after evicting every lower-priority pod. Where evicting would make
    the pod fit, kube-scheduler would preempt; this core does not evict anything: it lists
    those nodes in `preemption_candidates` and leaves the preemption sentence out.
  * Scores are computed over feasible nodes only, normalised per plugin, weighted and summed
    (scores.SCORES).
  * percentageOfNodesToScore: given ``num_to_find`` (`num_feasible_nodes_to_find`), filtering
    stops once that many feasible nodes are found, and starts at node ``start`` (round-robin),
    so successive cycles look at different nodes; `Result.processed` says how many nodes were
    examined, the caller's next ``start`` being (start + processed) mod the node count
    (schedule_one.go's nextStartNodeIndex). A pod that fits nowhere has every node examined,
    so its message counts them all.
  * No nodes at all: "no nodes available to schedule pods" (ErrNoNodesAvailable).
  * A PreFilter plugin that rejects the pod outright (VolumeBinding: a claim that does not
    exist, ...) gives every node its message (`rejected`): "0/N nodes are available: <its
    message>." then the preemption word, preemption not helping on any node.

Ties: kube-scheduler picks uniformly at random among the best-scoring nodes. Here, with an
``rng`` (a random.Random, seeded by the caller) the choice among the tied nodes, sorted by
name, is rng.choice; without one it is the tied node with the smallest name, so a call is a
pure function of its arguments.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

from . import filters as F
from .scores import SCORES, score_nodes, total_score

NO_NODES_AVAILABLE = "no nodes available to schedule pods"
NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_PREEMPTION_VICTIMS = "No preemption victims found for incoming pod"
PREEMPTION_NEVER = "not eligible due to preemptionPolicy=Never."

# kube-scheduler's minFeasibleNodesToFind and minFeasibleNodesPercentageToFind
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


@dataclass
class Result:
    node: Optional[str]                                # chosen node name, None when nothing fits
    per_filter_counts: dict = field(default_factory=dict)  # filter name -> nodes it rejected
    message: str = ""                                  # "" on success
    reasons: dict = field(default_factory=dict)        # reason -> nodes that gave it
    node_reasons: dict = field(default_factory=dict)   # rejected node -> its reasons
    scores: dict = field(default_factory=dict)         # feasible node -> {plugin: score, "total": n}
    preemption_candidates: list = field(default_factory=list)  # nodes where evicting lower-priority pods would make room
    processed: int = 0                                 # nodes examined (filtered) this cycle


def _name(node: dict) -> str:
    return F.node_name(node)


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes a cycle looks for (schedule_one.go's numFeasibleNodesToFind):
    all of them under 100 nodes; else `percentage` of them (0: adaptive, 50% minus 1% per 125
    nodes, at least 5%), at least 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


def fit_error_message(num_nodes: int, reasons: dict) -> str:
    """FitError.Error()'s first sentence from a {reason: count} histogram."""
    histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
    msg = NO_NODE_AVAILABLE_MSG.format(num_nodes) + ":"
    if histogram:
        msg += " " + ", ".join(histogram) + "."
    return msg


def run_filters(pod: dict, node: dict, node_pods: list, filters: list = F.FILTERS):
    """(failing filter, its reasons), or (None, []) when the node passes every filter."""
    for flt in filters:
        reasons = flt.reasons(pod, node, node_pods)
        if reasons:
            return flt, reasons
    return None, []


def _priority(pod: dict) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def _preemption(pod: dict, nodes: list, pods_by_node: dict, failed: dict):
    """(the " preemption: ..." suffix, the candidate nodes)."""
    if (pod.get("spec") or {}).get("preemptionPolicy") == "Never":
        return f" preemption: {PREEMPTION_NEVER}", []
    statuses: dict = {}
    candidates = []
    prio = _priority(pod)
    for node in nodes:
        name = _name(node)
        flt, _ = failed[name]
        if flt.unresolvable:
            statuses[name] = [PREEMPTION_NOT_HELPFUL]
            continue
        node_pods = pods_by_node.get(name, [])  # not `or []`: an empty NodeInfo is falsy but must stay itself
        live = [p for p in node_pods if not F.is_terminal(p)]
        remaining = [p for p in live if _priority(p) >= prio]
        if len(remaining) == len(live):
            statuses[name] = [NO_PREEMPTION_VICTIMS]
            continue
        _, reasons = run_filters(pod, node, remaining)
        if reasons:
            statuses[name] = reasons
        else:
            candidates.append(name)
    if candidates:
        return "", candidates
    histogram: dict = {}
    for reasons in statuses.values():
        for r in reasons:
            histogram[r] = histogram.get(r, 0) + 1
    return " preemption: " + fit_error_message(len(nodes), histogram), []


def rejected(pod: dict, nodes: list, plugin: str, message: str) -> Result:
    """A PreFilter plugin found the pod unschedulable on every node (UnschedulableAndUnresolvable):
    FitError's message is "0/N nodes are available: <message>." and the preemption word
    follows, every node being one where preemption does not help."""
    if not nodes:
        return Result(None, {}, NO_NODES_AVAILABLE)
    stub = F.Filter(plugin, lambda *_: [message], True)
    failed = {_name(node): (stub, [message]) for node in nodes}
    suffix, _ = _preemption(pod, nodes, {}, failed)
    return Result(None, {plugin: len(nodes)}, f"{NO_NODE_AVAILABLE_MSG.format(len(nodes))}: {message}.{suffix}",
                  {message: len(nodes)}, {name: [message] for name in failed})


def schedule(pod: dict, nodes: list, pods_by_node: dict,
             rng: Optional[random.Random] = None,
             filters: list = F.FILTERS, scores: list = SCORES,
             num_to_find: Optional[int] = None, start: int = 0) -> Result:
    """Pick a node for ``pod`` among ``nodes``; ``pods_by_node`` maps a node name to the pods
    already bound there (missing names: no pods). ``num_to_find`` and ``start``: see the
    module's percentageOfNodesToScore."""
    if not nodes:
        return Result(None, {}, NO_NODES_AVAILABLE)
    start %= len(nodes)
    wanted = len(nodes) if num_to_find is None else num_to_find
    feasible = []
    failed: dict = {}
    per_filter: dict = {}
    histogram: dict = {}
    for node in nodes[start:] + nodes[:start]:
        name = _name(node)
        flt, reasons = run_filters(pod, node, pods_by_node.get(name, []), filters)
        if flt is None:
            feasible.append(node)
            if len(feasible) >= wanted:
                break
            continue
        failed[name] = (flt, reasons)
        per_filter[flt.name] = per_filter.get(flt.name, 0) + 1
        for r in reasons:
            histogram[r] = histogram.get(r, 0) + 1

    node_reasons = {name: reasons for name, (_, reasons) in failed.items()}
    if not feasible:
        message = fit_error_message(len(nodes), histogram)
        suffix, candidates = _preemption(pod, nodes, pods_by_node, failed)
        return Result(None, per_filter, message + suffix, histogram, node_reasons,
                      preemption_candidates=candidates, processed=len(nodes))

    table = score_nodes(pod, feasible, pods_by_node, scores)
    for per_plugin in table.values():
        per_plugin["total"] = total_score(per_plugin, scores)
    best = max(s["total"] for s in table.values())
    tied = sorted(name for name, s in table.items() if s["total"] == best)
    chosen = rng.choice(tied) if rng is not None else tied[0]
    return Result(chosen, per_filter, "", histogram, node_reasons, table, processed=len(feasible) + len(failed))
