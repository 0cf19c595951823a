"""`kubemu bench footprint`'s second part: what a pod's sandbox costs, beside a host-network pod
on the same node in the same run (bench/sandboxnode.py: a node whose kubelet gives pods
sandboxes, on a throw-away fabric).

N host-network pods and N pods with a sandbox, each one container running `sleep infinity`, on
one node. Per pod: its processes (the shim, the container and, with a sandbox, the holder) and
their PSS and RSS; the sandbox's kernel objects (the holder's namespaces that are not the
host's, the veths CNI ADD made in the fabric (one bridge per node besides), the cgroups made for the holder). Then the
sandbox's steps timed one by one, with the kubelet's own code and the node's CNI config:
holder start (a process that unshares its namespaces and says ready), CNI ADD (loopback, then
bridge with host-local IPAM), CNI DEL, holder kill -> gone.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import psutil

from kubemu import netplan
from kubemu.statedir import ENV

from .restart_layers import alive
from .sandboxnode import SandboxNode, sandbox_node
from .stats import summary

SLEEP = ["sleep", "infinity"]
TIMEOUT = 60.0
POLL = 0.01
MB = 1e6
NAMESPACES = ("net", "mnt", "uts", "ipc", "pid", "cgroup", "user")


def _pod_processes(node: SandboxNode, name: str) -> list[psutil.Process]:
    """The pod's shims and their children, and its holder."""
    pod_dir = node.pod_dir(name)
    found = []
    try:
        for proc in psutil.process_iter(["cmdline"]):
            cmd = proc.info["cmdline"] or []
            if pod_dir and "kubelet.shim" in cmd and any(a.startswith(f"{pod_dir}/") for a in cmd):
                found += [proc, *proc.children()]
        record = node.sandbox(name)
        if record:  # recorded before its network is made: a holder may still be replaced
            found.append(psutil.Process(record["holder"]["pid"]))
    except psutil.NoSuchProcess:
        return []  # one went away while looked at: the caller looks again
    return found


def _wait_running(node: SandboxNode, names: list[str], sandboxed: set[str]) -> dict[str, list[psutil.Process]]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        procs = {n: _pod_processes(node, n) for n in names}
        want = {n: 3 if n in sandboxed else 2 for n in names}  # shim + container (+ holder)
        if all(len(procs[n]) == want[n] for n in names):
            return procs
        if time.monotonic() > deadline:
            raise TimeoutError(f"pods not running within {TIMEOUT:g}s: "
                               f"{[n for n in names if len(procs[n]) != want[n]]}")
        time.sleep(POLL)


def _memory(procs: list[psutil.Process]) -> tuple[float, float]:
    pss = rss = 0.0
    for proc in procs:
        mem = proc.memory_full_info()
        pss, rss = pss + mem.pss / MB, rss + mem.rss / MB
    return pss, rss


def _fabric_veths(rec: netplan.Record) -> int:
    out = subprocess.run(["ip", "-n", rec.netns, "-o", "link", "show", "type", "veth"], capture_output=True, text=True,
                         check=True, stdin=subprocess.DEVNULL).stdout
    return len(out.splitlines())


def _own_namespaces(pid: int) -> list[str]:
    return [ns for ns in NAMESPACES if os.stat(f"/proc/{pid}/ns/{ns}").st_ino != os.stat(f"/proc/self/ns/{ns}").st_ino]


def _sandbox_cgroups(pid: int) -> int:
    """The hierarchies the holder has a cgroup of its own in (its pod's sandbox cgroup)."""
    with open(f"/proc/{pid}/cgroup") as f:
        return sum(1 for line in f if "/pod" in line.rsplit(":", 1)[1])


def _mean(rows: list[tuple[float, float]]) -> tuple[float, float]:
    return sum(r[0] for r in rows) / len(rows), sum(r[1] for r in rows) / len(rows)


def memory_and_objects(node: SandboxNode, pods: int, tick=None) -> dict:
    veths_before = _fabric_veths(node.record)  # the host link
    hosts, sandboxes = [f"h{i}" for i in range(pods)], [f"s{i}" for i in range(pods)]
    for h, s in zip(hosts, sandboxes):
        node.write_pod(h, SLEEP, host_network=True)
        node.write_pod(s, SLEEP)
    procs = _wait_running(node, hosts + sandboxes, set(sandboxes))
    holders = [psutil.Process(node.sandbox(s)["holder"]["pid"]) for s in sandboxes]
    host_mem = _mean([_memory(procs[h]) for h in hosts])
    sandbox_mem = _mean([_memory(procs[s]) for s in sandboxes])
    holder_mem = _mean([_memory([p]) for p in holders])
    veths = (_fabric_veths(node.record) - veths_before) / pods
    if tick:
        tick()
    return {"pods": pods,
            "host_network_pod": {"processes": len(procs[hosts[0]]), "pss_mb": host_mem[0], "rss_mb": host_mem[1]},
            "pod_with_sandbox": {"processes": len(procs[sandboxes[0]]), "pss_mb": sandbox_mem[0],
                                 "rss_mb": sandbox_mem[1]},
            "holder": {"pss_mb": holder_mem[0], "rss_mb": holder_mem[1]},
            "kernel_objects": {"namespaces": _own_namespaces(holders[0].pid), "fabric_veths_per_pod": veths,
                               "pod_links": 2,  # lo and eth0 (the veth's other end), in the pod's own netns
                               "sandbox_cgroups": _sandbox_cgroups(holders[0].pid)}}


def steps(node: SandboxNode, trials: int, tick=None) -> dict[str, dict]:
    """ms per step, `trials` times after one warm-up, with the kubelet's holder and CNI runtime."""
    from kubelet import holder
    from kubelet.cnishell import CNI
    from kubemu.nsutil import open_ns

    cni = CNI(node.cni_conf_dir, list(netplan.CNI_BIN_DIRS), node.record.netns_path)
    env = dict(os.environ, **{ENV: str(node.state.root)})  # the node's: nothing it leaves goes unseen
    pod_dir = node.state.root / "bench-sandbox"
    pod_dir.mkdir(exist_ok=True)
    samples: dict[str, list[float]] = {"holder start": [], "CNI ADD": [], "CNI DEL": [], "holder kill -> gone": []}
    for i in range(trials + 1):
        t0 = time.perf_counter()
        info = holder.start(str(pod_dir), f"bench-{i}", [], env=env)
        try:
            t1 = time.perf_counter()
            netns = open_ns(info.pid, "net", info.start_ticks, info.netns_inode)  # as the kubelet hands it over
            try:
                result = cni.add(f"bench-{i}", netns)
                t2 = time.perf_counter()
                cni.delete(f"bench-{i}", netns, "eth0", result.raw)
                t3 = time.perf_counter()
            finally:
                os.close(netns)
        finally:
            holder.kill(info.pid, info.start_ticks)
        deadline = time.monotonic() + TIMEOUT
        while alive(info.pid) and time.monotonic() < deadline:
            time.sleep(0.0005)
        t4 = time.perf_counter()
        if i:
            for key, took in zip(samples, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                samples[key].append(took * 1000)
        if tick:
            tick()
    return {k: dict(summary(v), unit="ms") for k, v in samples.items()}


def measure(workdir: Path, pods: int, trials: int, progress_factory=None) -> dict:
    tick = progress_factory("sandbox cost: pods, then each step timed", trials + 2) if progress_factory else None
    with sandbox_node(workdir) as node:
        figures = memory_and_objects(node, pods, tick)
        figures["steps_ms"] = steps(node, trials, tick)
    return figures
