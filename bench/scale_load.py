"""The scale benchmark's steady window: the benchmark's own client playing a few users of a big
cluster (kubectl-style reads and lists, small writes), every call timed and judged against
Kubernetes' API call latency SLOs; the hollow nodes' Lease renewal lag, sampled; and every
process's memory.

Each kind of call runs in a loop of its own at a fixed pace (a closed loop: a call slower than
its interval delays the next one, so an overloaded apiserver is asked less, and the figures are
the latencies the calls that were made saw)."""
from __future__ import annotations

import asyncio
import itertools
import math
import random
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable

import psutil

from kubemu import cluster
from kubemu.api.times import parse_micro_time
from kubemu.apiclient import ApiClient, WireError
from kubemu.statedir import StateDir

from .reconcile_cluster import cluster_processes, role
from .stats import percentile

NAMESPACE = "default"  # where the workload's pods are (bench/reconcile_workload.py)
LEASE_NAMESPACE = "kube-node-lease"
PAGE = 500  # kubectl's --chunk-size default: every LIST page is one API call
# Kubernetes' SLO (sig-scalability api_call_latency.md): p99 per (verb, resource, scope) over the
# window <= 1 s for mutating calls and single-object reads, <= 30 s for LISTs (namespace or cluster).
SLO_S = {"mutating": 1.0, "resource": 1.0, "list": 30.0}
MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
# Seconds between calls of each loop: a handful of users, not a stress test (the cluster's own
# components are the load; these calls measure what a user would see meanwhile).
PACE_S = {"get": 0.05, "configmap": 0.2, "list": 5.0, "lease": 2.0}
MB = 1e6


def slo_seconds(verb: str, scope: str) -> float:
    """The SLO's p99 bound for one kind of call (`scope`: resource, namespace or cluster)."""
    if verb in MUTATING:
        return SLO_S["mutating"]
    return SLO_S["resource"] if scope == "resource" else SLO_S["list"]


class CallLog:
    """Every timed call by (verb, resource, scope): its seconds, and its failures by error."""

    def __init__(self):
        self.seconds: dict[tuple[str, str, str], list[float]] = defaultdict(list)
        self.errors: dict[tuple[str, str, str], dict[str, int]] = defaultdict(lambda: defaultdict(int))

    async def timed(self, verb: str, resource: str, scope: str, call: Awaitable):
        key = (verb, resource, scope)
        began = time.perf_counter()
        try:
            result = await call
        except WireError as exc:  # the latency of an error is not the latency of the call: counted apart
            self.errors[key][type(exc).__name__] += 1
            return None
        self.seconds[key].append(time.perf_counter() - began)
        return result

    def summary(self) -> dict[str, dict]:
        """Per "VERB resource (scope)": n, p50/p99/max ms, failures, the SLO and whether p99 met it."""
        rows = {}
        for key in sorted(set(self.seconds) | set(self.errors)):
            verb, resource, scope = key
            ms = [s * 1000 for s in self.seconds.get(key, [])]
            slo_ms = slo_seconds(verb, scope) * 1000
            p99 = percentile(ms, 99)
            rows[f"{verb} {resource} ({scope})"] = {
                "n": len(ms), "p50_ms": percentile(ms, 50), "p99_ms": p99, "max_ms": max(ms, default=math.nan),
                "errors": dict(self.errors.get(key, {})), "slo_p99_ms": slo_ms,
                "slo_met": bool(ms) and p99 <= slo_ms and not self.errors.get(key)}
        return rows


async def paced(interval: float, deadline: float, step: Callable[[], Awaitable]) -> None:
    """`step()` every `interval` seconds until `deadline` (time.monotonic())."""
    next_at = time.monotonic()
    while next_at < deadline:
        await step()
        next_at = max(next_at + interval, time.monotonic())  # after a slow call, no burst to catch up
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))


async def paged_list(api: ApiClient, log: CallLog, resource: str, namespace: str | None) -> list[dict] | None:
    """A LIST the way kubectl makes it: pages of PAGE items following `continue`, each page one
    timed call. Every item, or None if a page failed."""
    scope = "namespace" if namespace else "cluster"
    token, items = "", []
    while True:
        page = await log.timed("LIST", resource, scope, api.list(resource, namespace, limit=PAGE, continue_=token))
        if page is None:
            return None
        items += page.get("items") or []
        token = (page.get("metadata") or {}).get("continue") or ""
        if not token:
            return items


def lease_lag(leases: list[dict], now: float) -> dict:
    """The hollow nodes' Leases at `now`: the oldest renewal (seconds since its renewTime, and
    whose), and the Leases found."""
    lags = {}
    for lease in leases:
        name, spec = lease["metadata"]["name"], lease.get("spec") or {}
        if name.startswith(cluster.HOLLOW_PREFIX) and spec.get("renewTime"):
            lags[name] = now - parse_micro_time(spec["renewTime"])
    worst = max(lags, key=lags.get, default=None)
    return {"leases": len(lags), "max_lag_s": lags[worst] if worst else math.nan, "node": worst,
            "duration_s": next((lease["spec"].get("leaseDurationSeconds") for lease in leases
                                if lease["metadata"]["name"] == worst), None)}


def lag_summary(samples: list[dict], renew_interval_s: float) -> dict:
    """The samples' worst lags: a lag up to the renew interval is the kubelet's schedule; beyond
    it, a late renewal; at the lease's duration the node controller would call the node NotReady."""
    worst = [s["max_lag_s"] for s in samples if not math.isnan(s["max_lag_s"])]
    durations = [s["duration_s"] for s in samples if s["duration_s"]]
    duration = min(durations) if durations else math.nan
    top = max(worst, default=math.nan)
    return {"samples": len(samples), "leases": max((s["leases"] for s in samples), default=0),
            "max_lag_s": top, "p50_max_lag_s": percentile(worst, 50), "renew_interval_s": renew_interval_s,
            "late_by_s": max(0.0, top - renew_interval_s) if worst else math.nan, "lease_duration_s": duration,
            "within_duration": bool(worst) and top < duration}


def memory_by_role(state: StateDir) -> dict:
    """RSS and PSS (shared pages split among the processes mapping them, so the sum is what the
    cluster occupies) per role and summed, in MB."""
    roles: dict[str, dict] = defaultdict(lambda: {"processes": 0, "rss_mb": 0.0, "pss_mb": 0.0})
    for proc in cluster_processes(state):
        try:
            name, mem = role(proc), proc.memory_full_info()
        except psutil.Error:
            continue  # exited between the listing and the read
        row = roles[name]
        row["processes"] += 1
        row["rss_mb"] += mem.rss / MB
        row["pss_mb"] += mem.pss / MB
    total = {k: sum(r[k] for r in roles.values()) for k in ("processes", "rss_mb", "pss_mb")}
    return {"by_role": dict(sorted(roles.items(), key=lambda kv: -kv[1]["pss_mb"])), "total": total,
            "benchmark_client_rss_mb": psutil.Process().memory_info().rss / MB}  # its watch holds every pod


class SteadyLoad:
    """The steady window's calls. `pods` and `nodes`: names the single-object GETs pick from."""

    def __init__(self, api: ApiClient, pods: list[str], nodes: list[str]):
        self.api, self.pods, self.nodes = api, pods, nodes
        self.log = CallLog()
        self.lease_samples: list[dict] = []
        self.listed: dict[str, list[dict]] = defaultdict(list)  # scope -> each whole LIST's items and seconds
        self._configmaps = itertools.count()

    async def run(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        await asyncio.gather(paced(PACE_S["get"], deadline, self._get),
                             paced(PACE_S["configmap"], deadline, self._configmap),
                             paced(PACE_S["list"], deadline, self._lists),
                             paced(PACE_S["lease"], deadline, self._leases))

    async def _get(self) -> None:
        if self.pods:
            await self.log.timed("GET", "pods", "resource", self.api.get("pods", random.choice(self.pods), NAMESPACE))
        if self.nodes:
            await self.log.timed("GET", "nodes", "resource", self.api.get("nodes", random.choice(self.nodes)))

    async def _configmap(self) -> None:
        """One small ConfigMap's life: created, updated (with the resourceVersion it was created
        with, as a controller would), deleted."""
        name = f"scale-load-{next(self._configmaps)}"
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}
        made = await self.log.timed("POST", "configmaps", "resource", self.api.create("configmaps", body, NAMESPACE))
        if made is None:
            return
        made["data"] = {"k": "w"}
        await self.log.timed("PUT", "configmaps", "resource", self.api.update("configmaps", made, NAMESPACE))
        await self.log.timed("DELETE", "configmaps", "resource", self.api.delete("configmaps", name, NAMESPACE))

    async def _lists(self) -> None:
        for scope, namespace in (("namespace", NAMESPACE), ("cluster", None)):
            began = time.perf_counter()
            items = await paged_list(self.api, self.log, "pods", namespace)
            if items is not None:  # what `kubectl get pods` waits for: every page
                self.listed[scope].append({"items": len(items), "seconds": time.perf_counter() - began})

    async def _leases(self) -> None:
        leases = await paged_list(self.api, self.log, "leases", LEASE_NAMESPACE)
        if leases is not None:  # `now` after the list: a lag reads long by the list's latency at most
            self.lease_samples.append(lease_lag(leases, time.time()))
