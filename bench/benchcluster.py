"""Clusters for the benchmarks: `kubemu up` as it is, or with extra kubelet flags, in a
directory of the benchmark's own; and which part of kubemu each of its processes plays."""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import psutil

from kubemu import cluster
from kubemu.statedir import StateDir

# Every restart of a pod's container is then immediate, as the first one after an exit is
# anyway: without it, trial N would measure CrashLoopBackOff's Nth wait, not the kubelet.
NO_BACKOFF = "--backoff-initial 0 --backoff-max 0"
BOOT_TIMEOUT = 180.0


@contextmanager
def running_cluster(root: Path, *, fast: bool = True, kubelet_extra: str = "", nodes: int = 1):
    """`kubemu up [--fast]` in `root` with `kubelet_extra` appended to every kubelet's flags
    (the kubelet's argparse lets the last occurrence win); yields the StateDir once every node
    is Ready, and leaves no process behind. Every process is marked KUBEMU_STATE_DIR=root."""
    state = StateDir(root)
    timings = cluster.FAST_TIMINGS if fast else cluster.DEFAULT_TIMINGS
    names = cluster.node_names(nodes)
    port = cluster.resolve_api_port(state, 0)
    cluster.write_pki(state, names, port)
    for node in names:
        flags = f"{cluster.kubelet_args(state, node, timings)} {kubelet_extra}".strip()
        cluster.write_node(state, node, timings.kubelet_restart_sec, kubelet_args=flags)
    cluster.write_control_plane(state, timings=timings, api_port=port)
    try:
        for node in names:
            cluster.start_init(state, node)
        cluster.wait_started(state, names, BOOT_TIMEOUT)
        cluster.wait_ready(state, names, BOOT_TIMEOUT)
        yield state
    finally:
        cluster.down(state)


def pod_dir(state: StateDir, name: str, namespace: str = "kube-system",
            node: str = cluster.CONTROL_PLANE_NODE) -> Path | None:
    found = sorted((state.node_dir(node) / "pods").glob(f"{namespace}_{name}_*"))
    return found[-1] if found else None


def container_pid(pod: Path | None) -> int | None:
    """The PID the kubelet last reported for the pod's (first) container in its status.json
    ("process://PID"), if that container is running."""
    if pod is None:
        return None
    try:
        status = json.loads((pod / "status.json").read_text())["status"]["containerStatuses"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None  # being replaced right now, or not written yet
    if "running" not in (status.get("state") or {}):
        return None
    return int(status["containerID"].rpartition("/")[2])


def role(proc: psutil.Process) -> str:
    """What a process of a cluster is, from its command line: `python -m MODULE ...` gives
    init, kubelet, kubelet.shim, store, components.apiserver, ...; anything else by its name."""
    try:
        argv = proc.cmdline()
    except psutil.Error:
        return "gone"
    if "-m" in argv[:-1]:
        module = argv[argv.index("-m") + 1]
        hollow = module == "kubelet" and "--hollow" in argv
        return "hollow kubelet" if hollow else module.rpartition(".")[2].replace("_", "-")
    return Path(argv[0]).name if argv else proc.name()
