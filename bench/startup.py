"""`kubemu bench startup`: `kubemu up --detach` -> every node Ready, in seconds.

Each trial runs the real command (`python -m kubemu.cli --state-dir DIR up --detach [--fast]`,
1 node: the control plane's store replicas, apiserver, scheduler and controller-manager as
static pods of node-0) in a fresh state directory, and stops the clock when the command
returns: it returns once the API shows every node Ready. Then `kubemu down`. Both timing sets
are measured: Kubernetes' own and --fast. Printed beside: kind and minikube's usual time to a
Ready single-node cluster (anchors from their users' reports, not measured here).
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubemu import cluster
from kubemu.statedir import StateDir

from .machine import machine_with_load
from .stats import summary

ANCHORS_S = {"kind (kind create cluster)": 30.0, "minikube (minikube start)": 50.0}
UP_TIMEOUT = 180


def one_start(root: Path, fast: bool) -> float:
    # A benchmark's cluster leaves the user's kubeconfig and port 6443 alone.
    argv = [sys.executable, "-m", "kubemu.cli", "--state-dir", str(root), "up", "--detach", "--no-kubeconfig",
            "--api-port", "0", "--timeout", str(UP_TIMEOUT), *(["--fast"] if fast else [])]
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=UP_TIMEOUT + 60)
        elapsed = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"kubemu up failed ({done.returncode}): {done.stderr.strip()[-400:]}")
        return elapsed
    finally:
        cluster.down(StateDir(root))


def run(quick: bool = False, kills: int | None = None, progress_factory=None, workdir: Path | None = None,
        trials: int | None = None) -> dict:
    """`trials` per timing set (default 3, 1 with quick). `workdir`: where the state
    directories go (default: a temp dir, removed after)."""
    del kills  # nothing is killed here: one CLI signature for every suite
    trials = trials or (1 if quick else 3)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="kbu", dir=workdir) as tmp:
        for label, fast in (("kubemu up --detach", False), ("kubemu up --detach --fast", True)):
            tick = progress_factory(label, trials) if progress_factory else None
            samples = []
            for i in range(trials):
                samples.append(one_start(Path(tmp) / f"{'fast' if fast else 'default'}-{i}", fast))
                if tick:
                    tick()
            results[label] = dict(summary(samples), unit="s", samples_s=samples)
    for row in results.values():
        row["ratio_p50_to_anchors"] = {name: row["p50"] / secs for name, secs in ANCHORS_S.items()}
    return {"suite": "startup", "trials": trials, "machine": machine_with_load(), "results": results,
            "anchors_s": ANCHORS_S, "nodes": 1,
            "clock": "start of the `kubemu up --detach` process -> it returns (every node Ready in the API)"}


def table(report: dict):
    from rich.table import Table

    from .tables import machine_line, number

    t = Table(title=f"startup: `kubemu up` -> every node Ready, 1 node, {report['trials']} trial(s) each "
                    f"({machine_line(report['machine'])})")
    anchors = report["anchors_s"]
    for col in ("", "p50 s", "min s", "max s", *(f"/ {a.split()[0]}" for a in anchors)):
        t.add_column(col, justify="left" if not col else "right")
    for name, row in report["results"].items():
        t.add_row(name, number(row["p50"]), number(row["min"]), number(row["max"]),
                  *(number(row["ratio_p50_to_anchors"][a], "{:.3f}x") for a in anchors))
    for name, secs in anchors.items():
        t.add_row(f"{name} (anchor, not measured)", number(secs, "{:.0f}"), "", "", *[""] * len(anchors))
    return t
