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

Then what a pod's sandbox costs beside a host-network pod, in the same run
(bench/footprint_sandbox.py); skipped, with the reason, where pods cannot have networks.
"""
from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from pathlib import Path

import psutil

from kubemu import cluster
from kubemu.statedir import StateDir

from . import footprint_sandbox
from .benchcluster import role, running_cluster
from .machine import machine_with_load
from .skip import Skip

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
        window: float | None = None, sandbox_pods: int | None = None) -> dict:
    """`window`: seconds of sampling (default 30, 5 with quick), after SETTLE_S seconds idle.
    `sandbox_pods`: pods of each kind for the sandbox's cost (default 10, 3 with quick), its
    steps timed `kills` times (default 20, 5 with quick)."""
    window = window or (5.0 if quick else 30.0)
    with tempfile.TemporaryDirectory(prefix="kbp", dir=workdir) as tmp:
        tick = progress_factory("idle cluster, sampling once a second", int(window + 0.999)) \
            if progress_factory else None
        with running_cluster(Path(tmp) / "cluster", fast=False) as state:
            time.sleep(SETTLE_S)
            figures = sample(state, window, tick)
        try:
            sandbox = footprint_sandbox.measure(Path(tmp) / "sandbox", sandbox_pods or (3 if quick else 10),
                                                kills or (5 if quick else 20), progress_factory)
        except Skip as exc:
            sandbox = {"skipped": str(exc)}
    total = figures["total"]
    return {"suite": "footprint", "machine": machine_with_load(), "results": figures, "sandbox": sandbox,
            "anchors_mb": ANCHOR_MB, "ratio_pss_to_anchors": {a: total["pss_mb"] / mb for a, mb in ANCHOR_MB.items()},
            "units": {"pss_mb": "MB (10^6 bytes)", "rss_mb": "MB (10^6 bytes)", "cpu_pct": "% of one core"},
            "config": {"cluster": "kubemu up (default timings), 1 control-plane node", "settle_s": SETTLE_S,
                       "window_s": window, "memory": "PSS summed (RSS shown beside; it counts shared pages "
                                                     "once per process)"}}


def table(report: dict):
    from rich.console import Group
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
    return Group(t, sandbox_table(report["sandbox"]))


def sandbox_table(sb: dict):
    from rich.table import Table

    from .tables import number

    t = Table(title="footprint: a pod's sandbox, beside a host-network pod on the same node (per pod)")
    for col in ("", "processes", "PSS MB", "RSS MB", "p50 ms", "p99 ms"):
        t.add_column(col, justify="left" if not col else "right")
    if "skipped" in sb:
        t.add_row(f"skipped: {sb['skipped']}", "", "", "", "", "")
        return t
    for label, key in (("host-network pod (shim + container)", "host_network_pod"),
                       ("pod with a sandbox (shim + container + holder)", "pod_with_sandbox")):
        row = sb[key]
        t.add_row(label, str(row["processes"]), number(row["pss_mb"], "{:.2f}"), number(row["rss_mb"], "{:.2f}"),
                  "", "")
    t.add_row("the sandbox's holder (kubemu-pause)", "1", number(sb["holder"]["pss_mb"], "{:.2f}"),
              number(sb["holder"]["rss_mb"], "{:.2f}"), "", "", style="bold")
    for step, row in sb["steps_ms"].items():
        t.add_row(f"{step} (n={row['n']})", "", "", "", number(row["p50"]), number(row["p99"]))
    k = sb["kernel_objects"]
    t.caption = (f"{sb['pods']} pods of each kind. Kernel objects per sandbox: namespaces "
                 f"{', '.join(k['namespaces'])}; {number(k['fabric_veths_per_pod'], '{:g}')} veth end(s) in the fabric, "
                 f"{k['pod_links']} links in the pod (lo, eth0); the holder's cgroup in {k['sandbox_cgroups']} "
                 "hierarchies. Steps with the kubelet's own holder and CNI code: holder start -> ready, CNI ADD, "
                 "CNI DEL, holder kill -> gone")
    return t
