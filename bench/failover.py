"""`kubemu bench failover`: how long the control plane is gone after a kill -9, per layer.

- store: kill -9 the leader of a 3-replica store under light load -> the first write sent
  after the kill that is acknowledged. This is the store suite's failover measurement
  (bench/store.py, reused as it is): a cluster with short Raft timings (--tick-ms 10
  --election-ticks 10: an election timeout of 100-200 ms), three clocks (a survivor says it
  leads; a direct prober's first write; a StoreClient's first write).
- apiserver: a `kubemu up --fast` cluster (1 node; the kubelet's CrashLoopBackOff off, so
  every kill is a "first restart": with it, the Nth kill within 10 minutes would wait N-1
  backoff steps); kill -9 the apiserver's container -> three clocks: the kubelet reports a
  new apiserver PID (status.json, polled every 5 ms); a client that connects afresh for each
  attempt (100 ms timeout, 5 ms apart) gets a `get node` answered; a long-lived ApiClient
  (one connection for the whole run, as every component holds one) gets one answered. Only
  requests sent after the kill count.
- control-plane node: on an HA cluster (3 control-plane nodes), the node of the
  controller-manager's leader loses power -> first API write, first pod scheduled, a
  Deployment scaled after the kill converged (bench/failover_ha.py); once with --fast, once
  with the default timings, the first write beside the issue's target for each.
"""
from __future__ import annotations

import asyncio
import math
import os
import signal
import tempfile
import time
from pathlib import Path

from kubemu._wire_auth import state_credentials
from kubemu.apiclient import ApiClient, WireError
from kubemu.cluster import CONTROL_PLANE_NODE

from . import failover_ha, store
from .benchcluster import NO_BACKOFF, container_pid, pod_dir, running_cluster
from .machine import machine_with_load
from .stats import summary

PAUSE = 0.005
PROBE_TIMEOUT = 0.1
STEADY_TIMEOUT = 60.0


def _ms(samples: list[float]) -> dict:
    values = [s for s in samples if not math.isnan(s)]
    return dict(summary(values), unit="ms", samples_ms=values, missing=len(samples) - len(values))


def store_failover(trials: int, workdir: Path, tick=None) -> dict:
    with store.KubemuCluster(workdir, str(workdir), **store.FAILOVER_FLAGS) as cluster:
        cluster.start()
        samples = asyncio.run(store._failover(cluster, trials, tick))
    return {"store leader kill -> a survivor says it leads": _ms([s["elected_ms"] for s in samples]),
            "store leader kill -> first write, direct prober": _ms([s["probe_first_write_ms"] for s in samples]),
            "store leader kill -> first write, StoreClient": _ms([s["storeclient_first_write_ms"]
                                                                   for s in samples])}


async def _apiserver_trial(endpoint: str, apiserver_pod: Path, api: ApiClient, credentials) -> dict[str, float]:
    """One kill of the apiserver's container; seconds from the kill to each clock that stopped
    within STEADY_TIMEOUT."""
    loop = asyncio.get_running_loop()
    victim = await _steady_apiserver(apiserver_pod, api)
    clocks: dict[str, float] = {}
    kill_at = math.inf
    done = asyncio.Event()

    def stamp(clock: str, sent_at: float) -> None:
        if sent_at >= kill_at and clock not in clocks:
            clocks[clock] = time.perf_counter() - kill_at
            if len(clocks) == 3:
                done.set()

    async def long_lived() -> None:
        while not done.is_set():
            sent = time.perf_counter()
            try:
                await api.get("nodes", CONTROL_PLANE_NODE, timeout=1.0)
                stamp("long-lived", sent)
            except WireError:
                pass
            await asyncio.sleep(PAUSE)

    async def fresh() -> None:
        while not done.is_set():
            sent = time.perf_counter()
            async with ApiClient(endpoint, timeout=PROBE_TIMEOUT, credentials=credentials) as probe:
                try:
                    await probe.get("nodes", CONTROL_PLANE_NODE)
                    stamp("fresh", sent)
                except WireError:
                    pass
            await asyncio.sleep(PAUSE)

    async def new_pid() -> None:
        while not done.is_set():
            pid = container_pid(apiserver_pod)
            if pid is not None and pid != victim:
                stamp("pid", kill_at)
                return
            await asyncio.sleep(PAUSE)

    tasks = [loop.create_task(long_lived()), loop.create_task(fresh())]
    try:
        await asyncio.sleep(0.2)  # both clients are connected and answered
        kill_at = time.perf_counter()
        os.kill(victim, signal.SIGKILL)
        tasks.append(loop.create_task(new_pid()))
        await asyncio.wait_for(done.wait(), STEADY_TIMEOUT)
    except TimeoutError:
        pass  # a clock that did not stop in time is counted as missing (a busy machine's 100 ms probe)
    finally:
        done.set()
        await asyncio.gather(*tasks, return_exceptions=True)
    return clocks


async def _steady_apiserver(apiserver_pod: Path, api: ApiClient) -> int:
    """The running apiserver's PID once the kubelet reports it and it answers."""
    deadline = time.monotonic() + STEADY_TIMEOUT
    while time.monotonic() < deadline:
        pid = container_pid(apiserver_pod)
        if pid is not None:
            try:
                await api.get("nodes", CONTROL_PLANE_NODE, timeout=1.0)
                return pid
            except WireError:
                pass
        await asyncio.sleep(0.05)
    raise TimeoutError("the apiserver did not come back")


async def _apiserver_trials(endpoint: str, apiserver_pod: Path, trials: int, tick=None,
                            credentials=None) -> list[dict]:
    out = []
    async with ApiClient(endpoint, timeout=10, credentials=credentials) as api:
        for _ in range(trials + 1):
            out.append(await _apiserver_trial(endpoint, apiserver_pod, api, credentials))
            if tick:
                tick()
    return out[1:]  # the first kill warms caches and is not counted


def apiserver_failover(trials: int, workdir: Path, tick=None) -> dict:
    with running_cluster(workdir, fast=True, kubelet_extra=NO_BACKOFF) as state:
        pod = pod_dir(state, f"apiserver-{CONTROL_PLANE_NODE}")
        samples = asyncio.run(_apiserver_trials(state.api_endpoint(), pod, trials, tick,
                                                state_credentials(state.root)))

    def ms(clock: str) -> dict:
        return _ms([s.get(clock, math.nan) * 1000 for s in samples])

    return {"apiserver kill -> kubelet reports a new apiserver PID": ms("pid"),
            "apiserver kill -> first request, fresh connection": ms("fresh"),
            "apiserver kill -> first request, long-lived ApiClient": ms("long-lived")}


def ha_kills(quick: bool, kills: int | None) -> int:
    """Control-plane node kills per timing mode: `kills` if given, else 10 (3 with quick: too
    few for a p99)."""
    return kills or (3 if quick else 10)


def run(quick: bool = False, kills: int | None = None, progress_factory=None, workdir: Path | None = None) -> dict:
    """`kills`: trials per layer (default 20, 5 with quick; control-plane node kills: see
    ha_kills). `workdir`: where clusters live (default: a temp dir, removed after)."""
    trials = kills or (5 if quick else 20)
    node_kills = ha_kills(quick, kills)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="kbf", dir=workdir) as tmp:
        tick = progress_factory("store leader kill -9", trials) if progress_factory else None
        results.update(store_failover(trials, Path(tmp) / "store", tick))
        tick = progress_factory("apiserver kill -9", trials + 1) if progress_factory else None
        results.update(apiserver_failover(trials, Path(tmp) / "api", tick))
        node_trials = {}
        for i, mode in enumerate(failover_ha.MODES):
            tick = progress_factory(f"control-plane node kill, {mode}", node_kills) if progress_factory else None
            rows, node_trials[mode] = failover_ha.ha_failover(node_kills, Path(tmp) / f"ha{i}", tick, mode)
            results.update(rows)
    return {"suite": "failover", "trials": trials, "node_kills": node_kills, "quick": quick,
            "machine": machine_with_load(), "results": results, "node_kill_trials": node_trials,
            "settings": {"store": "3 replicas on TCP loopback, --tick-ms 10 --election-ticks 10 --heartbeat-ticks 1; "
                                  f"{store.FAILOVER_WRITERS} writers through one StoreClient and a direct prober",
                         "apiserver": f"kubemu up --fast, 1 node, kubelet {NO_BACKOFF}; probes 5 ms apart",
                         **{f"control-plane node, {mode}": failover_ha.settings(mode) for mode in failover_ha.MODES}}}


def title(report: dict) -> str:
    quick = " (--quick: too few for a p99)" if report.get("quick") else ""
    return (f"failover: kill -9 -> served again, {report['trials']} trials per process layer, "
            f"{report['node_kills']} control-plane node kills per timing ({', '.join(failover_ha.MODES)}){quick}")


def table(report: dict):
    from .tables import latency_table, machine_line

    return latency_table(f"{title(report)} ({machine_line(report['machine'])})", report["results"],
                         note=failover_ha.target_note, note_label="target")
