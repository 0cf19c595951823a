"""A standalone node whose kubelet gives pods sandboxes, for the benchmarks that measure them.

A throw-away fabric (kubemu/network.py on the row's own state directory, as `kubemu up`
makes it), one node written as `kubemu up` writes it but with static pods only (no API, so
`--pod-cidr` is the cluster CIDR's first node block), its kubelet with the network flags
`kubemu up` gives it, `--cgroup-root`, and CrashLoopBackOff off. `cluster.down` removes it
all (the nodes' processes, their cgroups, then the fabric). Where pods cannot have networks
(not root, no plugins, no `ip`), Skip with the reason `kubemu up` would give."""
from __future__ import annotations

import glob
import ipaddress
import json
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kubemu import cluster, netplan, network, ownership
from kubemu.statedir import StateDir, write_atomic

from .benchcluster import NO_BACKOFF
from .skip import Skip

NODE = cluster.CONTROL_PLANE_NODE
START_TIMEOUT = 60.0


@dataclass(frozen=True)
class SandboxNode:
    state: StateDir
    node_dir: Path
    record: netplan.Record
    pod_cidr: str

    def write_pod(self, name: str, command: list[str], host_network: bool = False) -> None:
        """A static pod, written at once (a dotfile first: the kubelet never reads half of it)."""
        spec: dict = {"containers": [{"name": "child", "command": command}]}
        if host_network:
            spec["hostNetwork"] = True
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}
        write_atomic(self.node_dir / "manifests" / f"{name}.yaml", json.dumps(pod).encode(), 0o644)

    def remove_pod(self, name: str) -> None:
        (self.node_dir / "manifests" / f"{name}.yaml").unlink()

    def pod_dir(self, name: str) -> Path | None:
        found = glob.glob(str(self.node_dir / "pods" / f"*_{name}-{NODE}_*"))  # a static pod's name ends in its node's
        return Path(found[0]) if found else None

    def sandbox(self, name: str) -> dict | None:
        """The pod's sandbox.json (kubelet/sandboxes.py) once its CNI ADD is done, else None."""
        pod_dir = self.pod_dir(name)
        try:
            record = json.loads((pod_dir / "sandbox.json").read_text()) if pod_dir else None
        except (OSError, ValueError):
            return None  # not written yet, or being replaced
        return record if isinstance(record, dict) and record.get("result") else None

    @property
    def cni_conf_dir(self) -> Path:
        return self.node_dir / "cni" / "net.d"


def first_node_block(rec: netplan.Record) -> str:
    """The podCIDR node IPAM would give the first node (the host link takes the last block)."""
    return str(next(ipaddress.IPv4Network(rec.cluster_cidr).subnets(new_prefix=rec.node_mask)))


def kubelet_args(state: StateDir, node_dir: Path, rec: netplan.Record, pod_cidr: str) -> str:
    args = [*NO_BACKOFF.split(), *netplan.kubelet_flags(rec, str(node_dir)), "--pod-cidr", pod_cidr,
            "--cgroup-root", ownership.cgroup_name(state.root, NODE)]
    return " ".join(shlex.quote(a) for a in args)


@contextmanager
def sandbox_node(workdir: Path) -> Iterator[SandboxNode]:
    """The node, running, until the block ends; then nothing of it is left (processes,
    cgroups, namespaces, links, routes)."""
    mode = network.probe(None)
    if mode.kind != netplan.CNI:
        raise Skip(f"no pod sandboxes here: {mode.reason}")
    state = StateDir(workdir / "cluster")
    state.root.mkdir(parents=True, exist_ok=True)
    rec = network.setup(state.root, nodes=1)  # not asked for explicitly: retried if another cluster races us
    if rec.mode != netplan.CNI:
        raise Skip(f"no pod sandboxes here: {rec.reason}")
    proc = None
    try:
        pod_cidr = first_node_block(rec)
        node_dir = state.node_dir(NODE)
        cluster.write_node(state, NODE, restart_sec=0, kubelet_args=kubelet_args(state, node_dir, rec, pod_cidr))
        proc = cluster.start_init(state, NODE)
        cluster.wait_started(state, [NODE], START_TIMEOUT)
        yield SandboxNode(state, node_dir, rec, pod_cidr)
    finally:
        cluster.down(state)  # the node's processes and cgroups, then the fabric
        if proc is not None:
            proc.wait()
        left = network.leftovers(rec)
        if left:
            raise RuntimeError(f"the benchmark's pod network is still there: {', '.join(left)}")
