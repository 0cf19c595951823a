"""`kubemu bench scale`: a big cluster on one machine - N hollow nodes (default 1,000) and M pods
(default 30,000) - and what living with it costs.

The cluster is the reconcile benchmark's (bench/reconcile_cluster.py): 3 fsyncing store
replicas, the apiserver, scheduler and controller-manager on node-0, the hollow nodes played by
one hollow kubelet process, Kubernetes' default timings (each node's Lease renewed every 10 s).

- startup: ceil(M / 300) Deployments of at most 300 replicas created at once; the time from the
  first create to the watch event showing the last pod Running, and each pod's startup latency
  (bench/reconcile.py's startup measurement, its CPU per pod and API writes included).
- steady window (60 s; --quick 15 s) with every pod held Running: the benchmark's own client
  plays a few users (bench/scale_load.py): single-object GETs of pods and nodes, LISTs of the
  pods in their namespace and cluster-wide in kubectl's 500-item pages, a ConfigMap created,
  updated and deleted; each call's latency by verb, resource and scope beside Kubernetes' SLO
  (p99 <= 1 s for mutating calls and single-object reads, <= 30 s for LISTs). The cluster's own
  mutating calls are counted from the audit log (which records no latency). The hollow nodes'
  Lease renewal lag (now - renewTime, the worst node, sampled every 2 s), the nodes Ready at the
  end, CPU per role over the window, and every process's RSS and PSS at its end.
- store: each replica's db size (its LevelDB files) and RSS before a compaction at the current
  revision (what kube-apiserver asks for every 5 minutes), once every replica applied it, and
  after a defragment of each replica in turn (etcd's advice: one member at a time), as an
  operator runs `etcdctl compact` then `etcdctl defrag --cluster`. The compaction alone frees
  no disk: the deleted revisions stay in LevelDB's files until a defragment rewrites them.

Anchors (published, not measured here): kwok keeps 1,000 nodes and 100,000 pods on a laptop;
kubemark's hollow nodes run Kubernetes' 5,000-node scalability tests.
"""
from __future__ import annotations

import asyncio
import math
import os
import time

from kubemu import cluster, wire
from kubemu._wire_auth import state_credentials
from kubemu.apiclient import ApiClient

from .machine import machine_with_load
from .reconcile import MAX_PODS_PER_NODE, measure_startup, open_window
from .reconcile_cluster import ProcessSampler, private_cluster
from .reconcile_figures import store_status
from .reconcile_workload import Workload, replicas_per_deployment
from .scale_load import SteadyLoad, lag_summary, memory_by_role
from .scale_table import headlines, table

__all__ = ["run", "table", "headlines"]  # what the runner calls

DEFAULTS = {"pods": 30000, "hollow_nodes": 1000, "steady_s": 60.0}
QUICK = {"pods": 2000, "hollow_nodes": 100, "steady_s": 15.0}
MAX_REPLICAS = 300  # per Deployment: clusterloader2's load test keeps its Deployments this size or smaller
COMPACTION_TIMEOUT = 30.0
DEFRAGMENT_TIMEOUT = 120.0  # per replica: it rewrites the whole database
ANCHORS = {"kwok": "1,000 nodes and 100,000 pods kept on a laptop (its README; not measured here)",
           "kubemark": "5,000 hollow nodes in Kubernetes' scalability tests (not measured here)"}
UNITS = {"seconds": "s", "*_ms": "ms", "*_s": "s", "*_mb": "MB (10^6 bytes)", "db_size": "bytes",
         "cores": "CPU seconds / wall second", "cpu_per_pod": "CPU ms per pod",
         "calls": "the benchmark's own API calls in the steady window, by verb, resource and scope",
         "api_requests": "mutating requests from the audit log (the cluster's and the benchmark's)"}


def deployments_for(pods: int) -> int:
    return math.ceil(pods / MAX_REPLICAS)


def run(quick: bool = False, kills: int | None = None, progress_factory=None, *, pods: int | None = None,
        hollow_nodes: int | None = None, steady_seconds: float | None = None,
        workdir: str | os.PathLike | None = None) -> dict:
    """`kills` is not used (the runner passes it to every suite). `steady_seconds`: the steady
    window (default 60 s, 15 s with quick). `workdir`: where the cluster's directory is made."""
    base = QUICK if quick else DEFAULTS
    pods = pods or base["pods"]
    hollow_nodes = hollow_nodes or base["hollow_nodes"]
    steady_seconds = steady_seconds or base["steady_s"]
    if pods > hollow_nodes * MAX_PODS_PER_NODE:
        raise ValueError(f"{pods} pods do not fit on {hollow_nodes} hollow nodes of {MAX_PODS_PER_NODE} pods each")
    replicas = replicas_per_deployment(pods, deployments_for(pods))
    config = {"pods": pods, "hollow_nodes": hollow_nodes, "deployments": len(replicas), "max_replicas": MAX_REPLICAS,
              "steady_s": steady_seconds, "store_replicas": 3, "quick": quick,
              "lease_renew_interval_s": cluster.DEFAULT_TIMINGS.node_status_update}
    about = machine_with_load()
    with private_cluster(hollow_nodes, False, workdir) as state, ProcessSampler(state) as sampler:
        results = asyncio.run(_measure(state, sampler, replicas, steady_seconds, config, progress_factory))
    about["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return {"suite": "scale", "machine": about, "config": config, "results": results, "anchors": ANCHORS,
            "units": UNITS}


async def _measure(state, sampler: ProcessSampler, replicas: list[int], steady_seconds: float, config: dict,
                   progress_factory) -> dict:
    def progress(label: str, total: int):
        return progress_factory(label, total) if progress_factory else None

    api = ApiClient(state.api_endpoint(), timeout=30, credentials=state_credentials(state.root))
    try:
        async with Workload(api, "scale", replicas) as w:
            startup = await measure_startup(state, sampler, w, progress("startup: pods Running", w.pods))
            steady = await _steady(state, sampler, api, w, steady_seconds, config, progress)
            store = await store_compaction(state)
        return {"startup": startup, "steady": steady, "store": store}
    finally:
        await api.close()


async def _steady(state, sampler, api: ApiClient, w: Workload, seconds: float, config: dict, progress) -> dict:
    """The load held (every pod Running) for `seconds` while the benchmark's client calls."""
    nodes = [n["metadata"]["name"] for n in (await api.list_all("nodes"))["items"]]
    load = SteadyLoad(api, [p["metadata"]["name"] for p in w.informer.list()], nodes)
    tick = progress("steady window: seconds", int(math.ceil(seconds)))
    window = await open_window(state, sampler)
    start = time.time()
    await asyncio.gather(load.run(seconds), _ticks(seconds, tick))
    end = time.time()
    figures = await window.figures(start, end)
    ready = sum(_ready(n) for n in (await api.list_all("nodes"))["items"])
    return {"seconds": end - start, "pods_running": len(w.tracker.running), "calls": load.log.summary(),
            "listed_items": dict(load.listed),
            "lease_renewal": lag_summary(load.lease_samples, config["lease_renew_interval_s"]),
            "nodes": {"ready": ready, "total": len(nodes)}, "memory": memory_by_role(state), **figures}


async def _ticks(seconds: float, tick) -> None:
    for _ in range(int(math.ceil(seconds))):
        await asyncio.sleep(1.0)
        if tick:
            tick()


def _ready(node: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


async def store_compaction(state) -> dict:
    """Each replica's db size and RSS, then a compaction at the leader's revision, the db sizes
    once every replica applied it, then a defragment of each replica in turn and the same
    figures as before."""
    before, rss_before = await store_status(state), _store_memory(state)
    leader = next((n for n, st in before.items() if st["role"] == "leader"), None)
    if leader is None:
        return {"skipped": "no store replica says it leads"}
    revision = before[leader]["revision"]
    endpoints = cluster.store_endpoints(state)
    credentials = state_credentials(state.root)
    began = time.monotonic()
    try:
        async with wire.Client(endpoints[leader], timeout=COMPACTION_TIMEOUT, credentials=credentials) as c:
            await c.call("compact", {"revision": revision})
    except wire.WireError as exc:  # e.g. the leader changed since its status: the figures before still stand
        return {"skipped": f"compaction at revision {revision} on {leader} failed: {exc}"}
    applied = await _compacted_everywhere(state, revision, began)
    compacted = await store_status(state)
    defragmented = {name: await _defragment(endpoints[name], credentials) for name in before}
    after, rss_after = await store_status(state), _store_memory(state)
    replicas = {name: {"db_size_before": st["db_size"],
                       "db_size_after_compaction": compacted.get(name, {}).get("db_size"),
                       "db_size_after": after.get(name, {}).get("db_size"),
                       "rss_mb_before": rss_before.get(name), "rss_mb_after": rss_after.get(name),
                       **defragmented[name]}
                for name, st in before.items()}
    return {"leader": leader, "compacted_at_revision": revision, "applied_everywhere_after_s": applied,
            "replicas": replicas}


async def _defragment(endpoint: str, credentials) -> dict:
    """One replica's defragment: {"defragment_s"}, or {"defragment_error"} if it failed."""
    began = time.monotonic()
    try:
        async with wire.Client(endpoint, timeout=DEFRAGMENT_TIMEOUT, credentials=credentials) as c:
            await c.call("defragment", {})
    except wire.WireError as exc:
        return {"defragment_error": str(exc)}
    return {"defragment_s": time.monotonic() - began}


async def _compacted_everywhere(state, revision: int, began: float) -> float | None:
    """Seconds from `began` (time.monotonic()) until every replica's compact revision reached
    `revision`; None if that took over COMPACTION_TIMEOUT."""
    while time.monotonic() < began + COMPACTION_TIMEOUT:
        status = await store_status(state)
        if status and all(st["compact_revision"] >= revision for st in status.values()):
            return time.monotonic() - began
        await asyncio.sleep(0.1)
    return None


def _store_memory(state) -> dict[str, float]:
    return {name: row["rss_mb"] for name, row in memory_by_role(state)["by_role"].items()
            if name.startswith("store")}
