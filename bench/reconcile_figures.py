"""Figures of one measured window of the reconcile benchmark: pod startup latencies, API
requests by verb (from the audit log) and the store's commits and fsyncs (its `status`)."""
from __future__ import annotations

import asyncio
import datetime
import json
import math
from collections import Counter
from pathlib import Path

from kubemu import cluster, wire
from kubemu._wire_auth import state_credentials
from kubemu.statedir import StateDir

from .stats import percentile
from .reconcile_cluster import control_plane_count
from .reconcile_workload import PodTracker


def latency_ms(samples: list[float]) -> dict:
    ms = [s * 1000 for s in samples]
    return {"n": len(ms), "p50_ms": percentile(ms, 50), "p90_ms": percentile(ms, 90), "p99_ms": percentile(ms, 99),
            "min_ms": min(ms, default=math.nan), "max_ms": max(ms, default=math.nan),
            "mean_ms": sum(ms) / len(ms) if ms else math.nan}


def startup_latency(tracker: PodTracker) -> dict:
    """Per pod, to the watch event that showed it Running: from the watch's first sight of it
    (the headline: sub-second resolution) and from its creationTimestamp (Kubernetes' SLI, but
    truncated to the second, so it reads up to 1 s long); and its two stages, scheduling
    (first sight -> on a node) and the kubelet (on a node -> Running)."""
    seen, bound, ran = tracker.first_seen, tracker.bound_at, tracker.running_at
    headline = [ran[u] - seen[u] for u in ran]
    return {"from_first_seen": {**latency_ms(headline), "samples_ms": sorted(round(x * 1000, 1) for x in headline)},
            "from_creation_timestamp": latency_ms([ran[u] - tracker.created[u] for u in ran]),
            "scheduling": latency_ms([bound[u] - seen[u] for u in ran if u in bound]),
            "kubelet": latency_ms([ran[u] - bound[u] for u in ran if u in bound])}


def over_time(times: dict[str, float], start: float) -> list[float]:
    """When each step happened, in seconds after `start`, in order (a pod count over time)."""
    return sorted(round(t - start, 3) for t in times.values())


def pipeline(tracker: PodTracker, start: float) -> dict:
    """Seconds from the first create until the last pod was seen, on a node, Running: which
    stage the others waited on (pods created late point at the controller-manager)."""
    return {f"last_{stage}_after_s": max(times.values()) - start if times else math.nan
            for stage, times in (("created", tracker.first_seen), ("bound", tracker.bound_at),
                                 ("running", tracker.running_at))}


def audit_logs(state: StateDir) -> list[Path]:
    """Every apiserver's audit log (one per control-plane node)."""
    return [state.node_dir(node) / "logs" / "audit.log"
            for node in cluster.control_plane_nodes(control_plane_count(state))]


class AuditWindow:
    """The audit logs' lines of one window: each opened at its end, read when the window closes."""

    def __init__(self, paths: list[Path]):
        self.offsets = {path: path.stat().st_size if path.exists() else 0 for path in paths}

    def requests(self, start: float, end: float) -> dict:
        """Mutating requests the apiservers received within [start, end], by verb and by
        verb + resource, per second; failures by HTTP code. (Reads - get, list, watch - are not
        audited, so they are not here.)"""
        verbs, by_resource, failed = Counter(), Counter(), Counter()
        for path, offset in self.offsets.items():
            with open(path, "rb") as f:
                f.seek(offset)
                for raw in f:
                    line = json.loads(raw)
                    at = datetime.datetime.strptime(line["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                        tzinfo=datetime.timezone.utc).timestamp()
                    if not start <= at <= end:
                        continue
                    verbs[line["verb"]] += 1
                    by_resource[f"{line['verb']} {line['resource']}"] += 1
                    if line["code"] >= 300:
                        failed[f"{line['code']} {line.get('reason', '')}".strip()] += 1
        seconds = end - start
        return {"total": sum(verbs.values()), "per_s": sum(verbs.values()) / seconds,
                "by_verb_per_s": {v: n / seconds for v, n in verbs.most_common()},
                "by_verb_resource": dict(by_resource.most_common()), "failed": dict(failed.most_common())}


async def store_status(state: StateDir, timeout: float = 5.0) -> dict[str, dict]:
    """Each replica's `status` (replicas that do not answer are left out)."""
    credentials = state_credentials(state.root)

    async def one(endpoint: str) -> dict | None:
        try:
            async with wire.Client(endpoint, timeout=timeout, credentials=credentials) as client:
                return await client.call("status", {}, idempotent=True)
        except wire.WireError:
            return None
    names = cluster.store_endpoints(state, control_plane_count=control_plane_count(state))
    answers = await asyncio.gather(*(one(ep) for ep in names.values()))
    return {name: st for name, st in zip(names, answers) if st is not None}


def store_figures(before: dict[str, dict], after: dict[str, dict], seconds: float) -> dict:
    """Raft entries committed (the leader's commit index), the leader's ReadIndex rounds (the
    linearizable reads in flight together share one), fsyncs per replica, and leader changes
    (the most any replica saw) over a window."""
    leader = next((n for n, st in after.items() if st["role"] == "leader"), None)
    both = [n for n in after if n in before]

    def leader_delta(field: str) -> float:
        return after[leader][field] - before[leader][field] if leader in before else math.nan
    commits, reads = leader_delta("commit_index"), leader_delta("read_index_requests")
    fsyncs = {n: after[n]["fsyncs"] - before[n]["fsyncs"] for n in both}
    elections = max((after[n]["leader_changes"] - before[n]["leader_changes"] for n in both), default=0)
    return {"leader": leader, "leader_changes": elections, "commits": commits, "commits_per_s": commits / seconds,
            "read_index_rounds": reads, "read_index_rounds_per_s": reads / seconds,
            "fsyncs": fsyncs, "fsyncs_per_s": {n: f / seconds for n, f in fsyncs.items()},
            "leader_fsyncs_per_commit": fsyncs[leader] / commits if leader in fsyncs and commits else math.nan}


def cpu_per_pod(processes: dict, pods: int, cpus: int) -> dict:
    """CPU milliseconds each pod cost every role, and the rate the cluster's CPU alone would
    allow on this machine with every core busy and no other load (a ceiling, whatever the noise)."""
    total = processes["cluster_cpu_s"] * 1000 / pods
    return {"cluster_ms": total, "ceiling_pods_per_s": cpus * 1000 / total if total else math.nan,
            "by_role_ms": {name: row["cpu_s"] * 1000 / pods for name, row in
                           sorted(processes["roles"].items(), key=lambda kv: -kv[1]["cpu_s"]) if row["cpu_s"] > 0}}
