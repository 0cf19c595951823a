"""The reconcile benchmark's cluster: booted in a private state directory and always torn down,
its processes labelled by role and sampled (CPU seconds, RSS) over a measured window."""
from __future__ import annotations

import shutil
import signal
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import psutil

from kubemu import cluster, ownership, wire
from kubemu.statedir import StateDir

from .reconcile_cpuprofile import role_of

BOOT_TIMEOUT = 180.0
SAMPLE_INTERVAL = 0.2  # s between psutil samples; RSS peaks shorter than this can be missed


class LeftBehind(RuntimeError):
    """Processes of the benchmark's state directory survived its teardown."""


@contextmanager
def private_cluster(hollow_nodes: int, fast: bool, workdir: Path | None = None, control_plane_nodes: int = 1):
    """Boot node-0 (3 store replicas, apiserver, scheduler, controller-manager as static pods),
    or with `control_plane_nodes` 3 node-0..2 (one store replica and one of each component on
    each: `kubemu up --control-plane-nodes 3`), and `hollow_nodes` hollow nodes in a new
    directory under `workdir` (default: the temp dir); yield the StateDir once every node is
    Ready. Always torn down (`cluster.down`, even on Ctrl-C or SIGTERM), then checked: no
    process of the state dir is left."""
    root = Path(tempfile.mkdtemp(prefix="kr", dir=workdir))  # short: ipc:// paths are limited to 107 bytes
    state = StateDir(root)
    in_main = threading.current_thread() is threading.main_thread()
    # The cluster runs in sessions of its own: nothing signals it when this process is told to stop.
    previous = signal.signal(signal.SIGTERM, _interrupted) if in_main else None
    try:
        nodes, hollow = cluster.up(state, control_plane_nodes, fast=fast, hollow_nodes=hollow_nodes, api_port=0,
                                   control_plane_count=control_plane_nodes)  # api_port 0: 6443 stays the user's
        cluster.wait_started(state, nodes, BOOT_TIMEOUT)
        cluster.wait_ready(state, nodes + hollow, BOOT_TIMEOUT)
        yield state
    finally:
        try:
            _teardown(state, in_main)
        finally:
            if in_main:
                signal.signal(signal.SIGTERM, previous)
            shutil.rmtree(root, ignore_errors=True)


def _interrupted(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _teardown(state: StateDir, in_main: bool) -> None:
    # A second Ctrl-C or SIGTERM during the teardown must not leave the cluster running.
    if in_main:
        previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        cluster.down(state)
        left = cluster.processes(state)
        if left:
            ownership.kill_all(left, 10.0)
            raise LeftBehind(f"processes of {state.root} survived `kubemu down`: {[p.pid for p in left]}")
    finally:
        if in_main:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def role(proc: psutil.Process) -> str:
    return role_of(proc.cmdline())


def control_plane_count(state: StateDir) -> int:
    """How many control-plane nodes the cluster has: one apiserver endpoint each in the
    api-endpoint file `kubemu up` wrote."""
    return len(wire.split_endpoints(state.api_endpoint() or ""))


def cluster_processes(state: StateDir) -> list[psutil.Process]:
    """Every process under every node's init (cheaper than scanning every environ on the
    machine; the hollow nodes are one process under node-0's)."""
    found = []
    for pid in filter(None, map(state.init_pid, state.nodes())):
        try:
            init = psutil.Process(pid)
            found += [init, *init.children(recursive=True)]
        except psutil.Error:  # init is gone: so is its node
            continue
    return found


class ProcessSampler:
    """Samples every process of the cluster in a thread; `start_window()` ... `end_window()`
    gives per-role CPU seconds and peak RSS over that window, and the machine's other load."""

    def __init__(self, state: StateDir, interval: float = SAMPLE_INTERVAL):
        self.state = state
        self.interval = interval
        self.cpu: dict[int, float] = {}        # pid -> user+system CPU seconds at the last sample
        self.roles: dict[int, str] = {}
        self.seen_at: dict[int, float] = {}    # pid -> when it was last sampled alive
        self.rss_peaks: list[dict[str, int]] = []  # per open window: role -> peak summed RSS
        self._procs: dict[int, psutil.Process] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="reconcile sampler", daemon=True)

    def __enter__(self) -> ProcessSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        with self._lock:
            rss: dict[str, int] = {}
            for proc in cluster_processes(self.state):
                known = self._procs.setdefault(proc.pid, proc)  # the same object keeps psutil's cache
                try:
                    with known.oneshot():
                        if proc.pid not in self.roles:
                            self.roles[proc.pid] = role(known)
                        times = known.cpu_times()
                        self.cpu[proc.pid] = times.user + times.system
                        self.seen_at[proc.pid] = time.time()
                        r = self.roles[proc.pid]
                        rss[r] = rss.get(r, 0) + known.memory_info().rss
                except psutil.Error:
                    continue  # exited between the listing and the read: its last sample stands
            for peaks in self.rss_peaks:
                for r, value in rss.items():
                    peaks[r] = max(peaks.get(r, 0), value)

    def start_window(self) -> dict:
        opened = time.time()
        self.sample()
        peaks: dict[str, int] = {}
        with self._lock:
            self.rss_peaks.append(peaks)
            cpu = dict(self.cpu)
        return {"cpu": cpu, "peaks": peaks, "machine": _machine_busy(), "own": _own_cpu(), "t": opened}

    def end_window(self, start: dict) -> dict:
        """Per role: CPU seconds, cores (CPU s / s), peak RSS in MB, PIDs; and the CPU every
        other process on the machine used meanwhile (the noise the figures carry)."""
        self.sample()
        with self._lock:
            self.rss_peaks.remove(start["peaks"])
            cpu = dict(self.cpu)
        seconds = time.time() - start["t"]
        roles: dict[str, dict] = {}
        for pid, now in cpu.items():
            if self.seen_at[pid] < start["t"]:
                continue  # gone before the window opened
            before = start["cpu"].get(pid, 0.0)  # born inside the window: all its CPU counts
            row = roles.setdefault(self.roles[pid], {"cpu_s": 0.0, "pids": []})
            row["cpu_s"] += now - before
            row["pids"].append(pid)
        for name, row in roles.items():
            row["cores"] = row["cpu_s"] / seconds if seconds > 0 else 0.0
            row["peak_rss_mb"] = start["peaks"].get(name, 0) / 2**20
        cluster_cpu = sum(r["cpu_s"] for r in roles.values())
        own = _own_cpu() - start["own"]
        machine = _machine_busy() - start["machine"]
        return {"seconds": seconds, "roles": dict(sorted(roles.items())), "cluster_cpu_s": cluster_cpu,
                "bench_client_cpu_s": own, "other_cores": max(0.0, machine - cluster_cpu - own) / seconds
                if seconds > 0 else 0.0}


def _machine_busy() -> float:
    t = psutil.cpu_times()  # guest time is already inside user time: not added again
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0)


def _own_cpu() -> float:
    t = psutil.Process().cpu_times()
    return t.user + t.system
