"""`kubemu bench restart`: kill -9 -> new PID alive, per supervisor and per layer, in one run.

Each supervisor keeps the same child alive (bench/restart_child.py), which reports its PID
over a datagram socket the moment it runs. A trial kills the current child with SIGKILL
and stops the clock when the replacement reports in. Rows measured side by side:

- floor: a bare os.waitpid loop re-spawning the child (bench/floor.py), the least possible;
- kubemu init -> unit: a unit with Restart=always, RestartSec=0, StartLimitIntervalSec=0;
- kubemu init -> kubelet: the kubelet itself, killed (bench/restart_layers.py), two clocks:
  its new PID alive, and READY=1;
- kubemu kubelet -> static pod container and -> API pod container (bench/restart_layers.py):
  the kubelet started with --backoff-initial 0 so every restart is a "first restart"
  (CrashLoopBackOff's first restart is immediate; later ones wait 10 s, 20 s, ... by design);
- kubemu kubelet -> pod with a sandbox (bench/restart_sandbox.py): the same static pod, not
  hostNetwork, on a node whose kubelet gives pods sandboxes (holder, CNI, cgroups), its holder
  killed (the sandbox re-created); and, a host-network pod and a pod with a sandbox in turn on
  such a node: create -> running, container killed (the sandbox kept), delete -> gone.
  Skipped, with the reason, where pods cannot have networks (not root, no CNI plugins);
- supervisord: autorestart=true, startsecs=0 (installed with pip only for the benchmark).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from . import restart_sandbox
from .machine import machine_with_load
from .restart_layers import init_kubelet, kubelet_api_pod
from .restart_sandbox import kubelet_sandbox_holder
from .skip import Skip
from .stats import summary

HERE = Path(__file__).parent
CHILD = HERE / "restart_child.py"


class Reporter:
    """Receives the PID each new child sends at start-up."""

    def __init__(self, path: str):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.seen_at = 0.0
        self.also: dict[str, float] = {}  # no other clock than the PID's

    def before_kill(self, pid: int) -> None:
        """Nothing to note: the new child tells its PID itself."""

    def next_pid(self, timeout: float) -> int:
        self.sock.settimeout(timeout)
        try:
            pid = int(self.sock.recv(64))
            self.seen_at = time.perf_counter()
            return pid
        except socket.timeout:
            raise TimeoutError(f"no child reported within {timeout:g}s") from None

    def close(self) -> None:
        self.sock.close()


def _popen(argv: list[str], workdir: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, KUBEMU_STATE_DIR=str(workdir))
    log = open(workdir / f"{Path(argv[1]).stem}.out", "ab")
    return subprocess.Popen(argv, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, **kw)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    try:
        os.killpg(proc.pid, sig)
        proc.wait(30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@contextmanager
def floor(child: list[str], workdir: Path):
    proc = _popen([sys.executable, str(HERE / "floor.py"), *child], workdir)
    try:
        yield
    finally:
        _stop(proc, signal.SIGKILL)


@contextmanager
def kubemu_init(child: list[str], workdir: Path):
    node = workdir / "node"
    (node / "units").mkdir(parents=True)
    quoted = " ".join(f'"{a}"' for a in child)
    (node / "units" / "child.service").write_text(
        "[Unit]\nStartLimitIntervalSec=0\n[Service]\n"
        f"ExecStart={quoted}\nRestart=always\nRestartSec=0\n")
    proc = _popen([sys.executable, "-m", "init", "--node-dir", str(node)], workdir)
    try:
        yield
    finally:
        _stop(proc)


@contextmanager
def kubelet_static_pod(child: list[str], workdir: Path):
    from kubemu import cluster
    from kubemu.statedir import StateDir

    node_dir = cluster.write_node(StateDir(workdir / "cluster"), "node-0", restart_sec=0,
                                  kubelet_args="--backoff-initial 0 --backoff-max 0")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "child"},
           "spec": {"containers": [{"name": "child", "command": child}]}}
    (node_dir / "manifests" / "child.yaml").write_text(json.dumps(pod))
    proc = _popen([sys.executable, "-m", "init", "--node-dir", str(node_dir)], workdir)
    try:
        yield
    finally:
        _stop(proc)


def supervisord_path(install: bool) -> str:
    found = shutil.which("supervisord", path=str(Path(sys.executable).parent)) or shutil.which("supervisord")
    if found or not install:
        if not found:
            raise Skip("supervisord is not installed (pip install supervisor)")
        return found
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "supervisor"],
                          capture_output=True, text=True)
    found = shutil.which("supervisord", path=str(Path(sys.executable).parent))
    if done.returncode != 0 or not found:
        raise Skip(f"could not install supervisor: {done.stderr.strip()[-200:]}")
    return found


@contextmanager
def supervisord(child: list[str], workdir: Path, install: bool = True):
    exe = supervisord_path(install)
    conf = workdir / "supervisord.conf"
    conf.write_text(
        f"[supervisord]\nnodaemon=true\nlogfile={workdir}/supervisord.log\npidfile={workdir}/supervisord.pid\n"
        f"[program:child]\ncommand={' '.join(child)}\nautorestart=true\nstartsecs=0\nstartretries=100000\n")
    proc = _popen([exe, "-c", str(conf)], workdir)
    try:
        yield
    finally:
        _stop(proc)


def measure(supervisor, kills: int, workdir: Path, progress=None) -> tuple[dict[str, list[float]], str | None]:
    """Latency samples in seconds, `kills` trials after one warm-up kill: "" -> kill to new PID
    alive, and one list per other clock the supervisor's watcher keeps (its `also`). A
    supervisor yields None when the reporting child tells the new PID, or a watcher of its own,
    whose `clock` says what it measures instead (returned beside the samples), or one with only
    a `victim(child_pid)`: the PID to kill instead of the child (the child still reports)."""
    reporter = Reporter(str(workdir / "report.sock"))
    child = [sys.executable, str(CHILD), reporter.path]
    samples: dict[str, list[float]] = {"": []}
    try:
        with supervisor(child, workdir) as watcher:
            victim = getattr(watcher, "victim", None)
            source = reporter if watcher is None or victim else watcher
            pid = source.next_pid(60)
            for i in range(kills + 1):
                source.before_kill(pid)
                target = victim(pid) if victim else pid
                started = time.perf_counter()
                os.kill(target, signal.SIGKILL)
                pid = source.next_pid(60)
                if i:  # the first kill warms caches and is not counted
                    samples[""].append(source.seen_at - started)
                    for clock, at in source.also.items():
                        samples.setdefault(clock, []).append(at - started)
                if progress:
                    progress()
            os.kill(pid, signal.SIGKILL)
    finally:
        reporter.close()
    return samples, getattr(watcher, "clock", None)


def create_delete(trials: int, workdir: Path, progress=None) -> dict[str, list[float]]:
    """bench/restart_sandbox.py's create and delete rows, with the reporting child."""
    reporter = Reporter(str(workdir / "report.sock"))

    def next_report(timeout: float) -> tuple[int, float]:
        return reporter.next_pid(timeout), reporter.seen_at

    try:
        return restart_sandbox.create_delete([sys.executable, str(CHILD), reporter.path], next_report, workdir,
                                             trials, progress)
    finally:
        reporter.close()


FLOOR = "floor (bare waitpid loop)"
SANDBOX_HOLDER = "kubemu kubelet -> pod with a sandbox, holder killed (sandbox re-created)"
SUPERVISORS = {FLOOR: floor, "kubemu init -> unit": kubemu_init, "kubemu init -> kubelet": init_kubelet,
               "kubemu kubelet -> static pod container": kubelet_static_pod,
               "kubemu kubelet -> API pod container": kubelet_api_pod,
               SANDBOX_HOLDER: kubelet_sandbox_holder,
               "supervisord": supervisord}
# The sandbox's rows, the rows beside them (their p50s' ratio is printed) and a short label.
PEERS = {SANDBOX_HOLDER: (restart_sandbox.KILL_SANDBOX, "holder killed / container killed"),
         restart_sandbox.KILL_SANDBOX: (restart_sandbox.KILL_HOST, "container killed, with a sandbox / host network"),
         restart_sandbox.CREATE_SANDBOX: (restart_sandbox.CREATE_HOST, "create, with a sandbox / host network"),
         restart_sandbox.DELETE_SANDBOX: (restart_sandbox.DELETE_HOST, "delete, with a sandbox / host network")}
# Rows measured by a run of their own (trials -> {row: samples}), after the supervisors'.
TRIALS = {"create and delete, host network and with a sandbox": create_delete}


def _beside(results: dict[str, dict]) -> None:
    for row, (peer, _) in PEERS.items():
        if "p50" in results.get(row, {}) and results.get(peer, {}).get("p50"):
            results[row]["beside"] = {"row": peer, "ratio_p50": results[row]["p50"] / results[peer]["p50"]}


def _ms_row(samples: list[float]) -> dict:
    row = {k: (v * 1000 if k != "n" else v) for k, v in summary(samples).items()}
    return dict(row, unit="ms", samples_ms=[s * 1000 for s in samples])


def run(quick: bool = False, kills: int | None = None, progress_factory=None, workdir: Path | None = None) -> dict:
    """`kills` per row (default 30, 5 with quick). `workdir`: where every row's files go, one
    subdirectory each (default: temp dirs, removed after)."""
    kills = kills or (5 if quick else 30)
    results: dict[str, dict] = {}
    for name, supervisor in SUPERVISORS.items():
        with tempfile.TemporaryDirectory(prefix="kb", dir=workdir) as tmp:
            tick = progress_factory(name, kills + 1) if progress_factory else None
            try:
                clocks, own_clock = measure(supervisor, kills, Path(tmp), tick)
            except Skip as exc:
                results[name] = {"skipped": str(exc)}
                continue
        results[name] = _ms_row(clocks.pop(""))
        for clock, samples in clocks.items():
            results[f"{name} ({clock})"] = _ms_row(samples)
        if own_clock:  # not the reporting child's clock: no ratio to the floor's
            for key in [name] + [f"{name} ({clock})" for clock in clocks]:
                results[key]["clock"] = own_clock
    for name, trials in TRIALS.items():
        with tempfile.TemporaryDirectory(prefix="kb", dir=workdir) as tmp:
            tick = progress_factory(name, kills + 1) if progress_factory else None
            try:
                rows = trials(kills, Path(tmp), tick)
            except Skip as exc:
                results[name] = {"skipped": str(exc)}
                continue
        for row, samples in rows.items():
            results[row] = _ms_row(samples)
            clock = restart_sandbox.clock_of(row)
            if clock:
                results[row]["clock"] = clock
    _beside(results)
    base = results.get(FLOOR, {}).get("p50")
    for row in results.values():
        if "p50" in row and base and "clock" not in row:
            row["ratio_p50_to_floor"] = row["p50"] / base
    return {"suite": "restart", "kills": kills, "machine": machine_with_load(), "results": results,
            "clock": "kill -9 -> the reporting child runs again and says so (a row with a clock of its own "
                     "says what it measures instead, and has no ratio to the floor)",
            "target": "kubemu init p50 <= 1.2x the floor"}


def table(report: dict):
    from .tables import latency_table, machine_line

    return latency_table(f"restart: kill -9 -> new PID alive, {report['kills']} kills each "
                         f"({machine_line(report['machine'])})", report["results"],
                         ratio_key="ratio_p50_to_floor", ratio_label="p50 / floor",
                         caption=f"target: {report['target']}. kubemu init -> kubelet: kill -9 the kubelet -> "
                                 "init's new child exists (no interpreter start-up in it, unlike the other rows), "
                                 "and -> READY=1 (the kubelet's whole start-up). " + _beside_caption(report["results"]))


def _beside_caption(results: dict[str, dict]) -> str:
    """The sandbox's rows against their peers: create and delete have clocks of their own."""
    from .tables import number

    pairs = [f"{label} {number(results[row]['beside']['ratio_p50'], '{:.2f}x')}"
             for row, (_, label) in PEERS.items() if "beside" in results.get(row, {})]
    if not pairs:
        return ""
    return (f"Pod with a sandbox, p50: {', '.join(pairs)}. Create: {restart_sandbox.CREATE_CLOCK}; "
            f"delete: {restart_sandbox.DELETE_CLOCK}.")
