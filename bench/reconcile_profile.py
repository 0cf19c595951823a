"""`profile_dir=`: CPU profiles of the control plane's processes over the reconcile benchmark's
first workload (startup and deletion), and a summary of where each one spent its CPU.

The sampler itself is bench/reconcile_cpuprofile.py (why not py-spy: see there). Profiled
figures carry the sampler's own cost (a signal and a stack walk per 2 ms of CPU: a few per
cent) and are marked as profiled in the report.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

from . import reconcile_cpuprofile as cpuprofile
from .reconcile_cluster import cluster_processes, role

REPO = Path(__file__).resolve().parent.parent
TOP = 15
WRITE_TIMEOUT = 30.0


@contextmanager
def profiling_environment(out_dir: Path):
    """The environment every process of a cluster booted inside this block inherits: PYTHONPATH
    with a generated sitecustomize that installs the sampler, and where it writes."""
    site = out_dir / "site"
    site.mkdir(parents=True, exist_ok=True)
    for stale in (*out_dir.glob("*.ready"), *out_dir.glob("*.speedscope.json")):  # of an earlier run
        stale.unlink()
    (site / "sitecustomize.py").write_text(
        "from bench.reconcile_cpuprofile import install\ninstall()\n")
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", cpuprofile.ENV)}
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(site), str(REPO), saved["PYTHONPATH"]) if p)
    os.environ[cpuprofile.ENV] = str(out_dir)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class Profilers:
    """Starts the sampler in every process of the cluster that announced it (`<pid>.ready`)
    on enter, stops it on exit (each process then writes `<role>.speedscope.json`);
    `summary()` afterwards."""

    def __init__(self, state, out_dir: Path):
        self.out_dir = Path(out_dir)
        ready = {int(p.stem): p.read_text() for p in self.out_dir.glob("*.ready")}
        # only this cluster's live processes: a signal to anything else could kill it
        self.roles = {p.pid: ready[p.pid] for p in cluster_processes(state)
                      if p.pid in ready and role(p) == ready[p.pid]}

    def _signal(self, signum: int) -> None:
        for pid in self.roles:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def __enter__(self) -> Profilers:
        self._signal(cpuprofile.START)
        return self

    def __exit__(self, *exc) -> None:
        self._signal(cpuprofile.STOP)
        deadline = time.monotonic() + WRITE_TIMEOUT
        while time.monotonic() < deadline and not all(self._file(r).exists() for r in self.roles.values()):
            time.sleep(0.1)

    def _file(self, role: str) -> Path:
        return cpuprofile.profile_file(self.out_dir, role)

    def summary(self) -> dict[str, dict]:
        return {r: summarize(self._file(r)) for r in sorted(set(self.roles.values())) if self._file(r).exists()}


def summarize(path: Path, top: int = TOP) -> dict:
    """CPU seconds sampled, and the functions with the most of it: on top of the stack (self)
    and anywhere on it (inclusive), as shares of the process's sampled CPU."""
    doc = json.loads(Path(path).read_text())
    frames = doc["shared"]["frames"]
    self_cpu, inclusive, total = Counter(), Counter(), 0.0
    for prof in doc["profiles"]:
        for stack, weight in zip(prof["samples"], prof["weights"]):
            if not stack:
                continue
            total += weight
            self_cpu[stack[-1]] += weight
            for index in set(stack):
                inclusive[index] += weight

    def label(index: int) -> str:
        f = frames[index]
        return f"{f['name']} ({'/'.join(Path(f.get('file') or '?').parts[-2:])}:{f.get('line', '?')})"

    def shares(counter: Counter) -> list[list]:
        return [[label(i), n / total] for i, n in counter.most_common(top)] if total else []
    return {"file": str(path), "cpu_s_sampled": total, "self": shares(self_cpu), "inclusive": shares(inclusive)}
