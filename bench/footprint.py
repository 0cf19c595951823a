"""`kubemu bench footprint`: what an idle cluster costs: memory and CPU, per role and in total.

`kubemu up` (Kubernetes' own timings, 1 control-plane node: init, the kubelet, 3 store
replicas, apiserver, scheduler, controller-manager, one shim per container), left alone for a
settling period, then sampled once a second over the window. Every process of the cluster's
nodes (what kubemu started: kubemu/ownership.py) counts.

- memory: PSS (proportional set size: each shared page divided among the processes mapping
  it, so the sum is what the cluster really occupies; the Python interpreter's pages are
  shared by all of them) and RSS (each process counted whole: the sum over-counts shared
  pages), both summed at the end of the window;
- CPU: user+system seconds each process used over the window / the window, in % of one core.

Anchor: k3s, a single-node server idle at ~500 MB (its documented minimum is 512 MB of RAM).
"""
from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil

from kubemu import cluster
from kubemu.statedir import StateDir

from .benchcluster import role, running_cluster
from .machine import machine_with_load

ANCHOR_MB = {"k3s server, idle": 500.0}
SETTLE_S = 5.0
MB = 1e6


def _cpu_seconds(procs: dict[int, psutil.Process]) -> dict[int, float]:
    out = {}
    for pid, proc in procs.items():
        try:
            t = proc.cpu_times()
            out[pid] = t.user + t.system
        except psutil.Error:
            continue
    return out


def sample(state: StateDir, window: float, tick=None) -> dict:
    procs = {p.pid: p for p in cluster.processes(state)}
    roles = {pid: role(p) for pid, p in procs.items()}
    start = _cpu_seconds(procs)
    began = last = time.perf_counter()
    previous = start
    timeline = []  # (seconds since start, % of a core for the whole cluster) every second
    while last - began < window:
        time.sleep(min(1.0, window - (last - began)))
        now = time.perf_counter()
        current = _cpu_seconds(procs)
        used = sum(current.get(pid, 0.0) - previous.get(pid, 0.0) for pid in procs)
        timeline.append((round(now - began, 3), 100 * used / (now - last)))
        previous, last = current, now
        if tick:
            tick()
    elapsed = last - began
    per_role: dict[str, dict] = defaultdict(lambda: {"processes": 0, "pss_mb": 0.0, "rss_mb": 0.0, "cpu_pct": 0.0})
    for pid, proc in procs.items():
        try:
            mem = proc.memory_full_info()
        except psutil.Error:
            continue  # gone during the window: it would have shown as a restart
        row = per_role[roles[pid]]
        row["processes"] += 1
        row["pss_mb"] += mem.pss / MB
        row["rss_mb"] += mem.rss / MB
        row["cpu_pct"] += 100 * (previous.get(pid, 0.0) - start.get(pid, 0.0)) / elapsed
    total = {k: sum(r[k] for r in per_role.values()) for k in ("processes", "pss_mb", "rss_mb", "cpu_pct")}
    return {"per_role": dict(sorted(per_role.items(), key=lambda kv: -kv[1]["pss_mb"])), "total": total,
            "window_s": elapsed, "cpu_timeline": timeline}


def run(quick: bool = False, kills: int | None = None, progress_factory=None, workdir: Path | None = None,
        window: float | None = None) -> dict:
    """`window`: seconds of sampling (default 30, 5 with quick), after SETTLE_S seconds idle."""
    del kills  # nothing is killed here: one CLI signature for every suite
    window = window or (5.0 if quick else 30.0)
    with tempfile.TemporaryDirectory(prefix="kbp", dir=workdir) as tmp:
        tick = progress_factory("idle cluster, sampling once a second", int(window + 0.999)) \
            if progress_factory else None
        with running_cluster(Path(tmp) / "cluster", fast=False) as state:
            time.sleep(SETTLE_S)
            figures = sample(state, window, tick)
    total = figures["total"]
    return {"suite": "footprint", "machine": machine_with_load(), "results": figures,
            "anchors_mb": ANCHOR_MB, "ratio_pss_to_anchors": {a: total["pss_mb"] / mb for a, mb in ANCHOR_MB.items()},
            "units": {"pss_mb": "MB (10^6 bytes)", "rss_mb": "MB (10^6 bytes)", "cpu_pct": "% of one core"},
            "config": {"cluster": "kubemu up (default timings), 1 control-plane node", "settle_s": SETTLE_S,
                       "window_s": window, "memory": "PSS summed (RSS shown beside; it counts shared pages "
                                                     "once per process)"}}


def table(report: dict):
    from rich.table import Table

    from .tables import machine_line, number

    res = report["results"]
    t = Table(title=f"footprint: idle `kubemu up` (1 node), CPU over {res['window_s']:.0f} s "
                    f"({machine_line(report['machine'])})")
    for col in ("role", "processes", "PSS MB", "RSS MB", "CPU % of a core"):
        t.add_column(col, justify="left" if col == "role" else "right")
    for name, row in res["per_role"].items():
        t.add_row(name, str(row["processes"]), number(row["pss_mb"], "{:.1f}"), number(row["rss_mb"], "{:.1f}"),
                  number(row["cpu_pct"]))
    tot = res["total"]
    t.add_row("total", str(tot["processes"]), number(tot["pss_mb"], "{:.1f}"), number(tot["rss_mb"], "{:.1f}"),
              number(tot["cpu_pct"]), style="bold")
    for name, mb in report["anchors_mb"].items():
        t.add_row(f"{name} (anchor, not measured)", "", number(mb, "{:.0f}"), "", "")
    ratios = ", ".join(f"{number(v, '{:.2f}')}x {a}" for a, v in report["ratio_pss_to_anchors"].items())
    t.caption = f"kubemu's PSS = {ratios}"
    return t
