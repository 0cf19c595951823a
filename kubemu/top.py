"""kubemu top pods|nodes: kubectl top's tables, read from the cgroups the kubelets made.

kubectl top reads the metrics API, which metrics-server fills from each kubelet's cgroup
figures (CPU as a rate over a short window, memory as the working set). kubemu reads the same
figures itself: a pod's cgroup (kubelet/podcgroups.py) for each pod directory a node lists
(`nodes/<node>/pods/<ns>_<name>_<uid>/`), a node's `kubepods` cgroup for the node (its pods,
what its allocatable bounds; init and the kubelet are not in it), sampled twice SAMPLE_SECONDS
apart for the CPU rate.

Formatting is pure (`pod_table`, `node_table`, `rate`); `sample` takes its clock and sleep.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import click

from kubelet.podcgroups import Usage, node_usage, pod_usage

from .api.quantity import cpu_millis, memory_bytes
from .kubectl.options import all_namespaces_option, namespace_option
from .kubectl.tabwriter import GET, TabWriter
from .kubectl.targets import DEFAULT_NAMESPACE
from .ownership import cgroup_name
from .statedir import StateDir

SAMPLE_SECONDS = 1.0
MI = 1 << 20
NO_METRICS = ("Metrics not available: no pod cgroups for this cluster (kubelets make them as root, "
              "with a memory controller; otherwise memory limits are watched by RSS)")


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str
    node: str


def parse_pod_dir(dirname: str, node: str) -> PodRef | None:
    """`<ns>_<name>_<uid>` (namespaces and names cannot hold "_"); None for anything else."""
    parts = dirname.split("_", 2)
    return PodRef(parts[0], parts[1], parts[2], node) if len(parts) == 3 and all(parts) else None


@dataclass(frozen=True)
class Metrics:
    cpu_millicores: int
    memory_bytes: int


def rate(before: Usage | None, after: Usage | None, elapsed: float) -> Metrics | None:
    """CPU millicores over the window and the memory at its end; None without both readings."""
    if before is None or after is None or before.cpu_seconds is None or after.cpu_seconds is None \
            or after.memory_bytes is None or elapsed <= 0:
        return None
    return Metrics(max(0, round((after.cpu_seconds - before.cpu_seconds) * 1000 / elapsed)), after.memory_bytes)


def sample(read: Callable[[], dict], seconds: float = SAMPLE_SECONDS, clock=time.monotonic,
           sleep=time.sleep) -> dict:
    """key -> Metrics (or None) from two readings `seconds` apart."""
    t0, first = clock(), read()
    sleep(seconds)
    t1, second = clock(), read()
    return {key: rate(first.get(key), usage, t1 - t0) for key, usage in second.items()}


def _cpu(millicores: int) -> str:
    return f"{millicores}m"


def _memory(nbytes: int) -> str:
    return f"{nbytes // MI}Mi"


def _table(lines: list[list[str]]) -> str:
    return TabWriter(**GET).format("".join("\t".join(cells) + "\n" for cells in lines))


def pod_table(metrics: dict[PodRef, Metrics | None], all_namespaces: bool) -> str:
    """kubectl top pod's table (pods without metrics are left out, as kubectl does)."""
    lines = [(["NAMESPACE"] if all_namespaces else []) + ["NAME", "CPU(cores)", "MEMORY(bytes)"]]
    for ref in sorted((r for r, m in metrics.items() if m is not None), key=lambda r: (r.namespace, r.name)):
        m = metrics[ref]
        lines.append(([ref.namespace] if all_namespaces else []) + [ref.name, _cpu(m.cpu_millicores),
                                                                     _memory(m.memory_bytes)])
    return _table(lines)


def node_table(metrics: dict[str, Metrics | None], allocatable: dict[str, dict]) -> str:
    """kubectl top node's table; percentages of the Node's allocatable, `<unknown>` where a
    figure is missing."""
    lines = [["NAME", "CPU(cores)", "CPU%", "MEMORY(bytes)", "MEMORY%"]]
    for node, m in metrics.items():
        if m is None:
            lines.append([node] + ["<unknown>"] * 4)
            continue
        alloc = allocatable.get(node) or {}
        lines.append([node, _cpu(m.cpu_millicores), _percent(m.cpu_millicores, alloc.get("cpu"), cpu_millis),
                      _memory(m.memory_bytes), _percent(m.memory_bytes, alloc.get("memory"), memory_bytes)])
    return _table(lines)


def _percent(used: int, quantity, parse) -> str:
    try:
        total = parse(quantity) if quantity is not None else 0
    except ValueError:
        total = 0
    return f"{used * 100 // total}%" if total > 0 else "<unknown>"


# --- the shell -------------------------------------------------------------------------------

def pods_on_disk(state: StateDir) -> list[PodRef]:
    refs = []
    for node in state.nodes():
        pods_dir = state.node_dir(node) / "pods"
        for entry in sorted(pods_dir.iterdir()) if pods_dir.is_dir() else ():
            ref = parse_pod_dir(entry.name, node)
            if ref is not None and entry.is_dir():
                refs.append(ref)
    return refs


@click.group("top")
def top() -> None:
    """CPU and memory of pods and nodes, from their cgroups (kubectl top's columns)."""


@top.command("pods")
@namespace_option
@all_namespaces_option
@click.pass_obj
def top_pods(obj, namespace: str | None, all_namespaces: bool) -> None:
    """CPU (millicores over a 1 s sample) and working-set memory of each pod."""
    from .cli import fail  # kubemu.cli imports this module

    state = obj.state
    ns = namespace or DEFAULT_NAMESPACE
    refs = [r for r in pods_on_disk(state) if all_namespaces or r.namespace == ns]
    metrics = sample(lambda: {r: pod_usage(cgroup_name(state.root, r.node), r.uid) for r in refs})
    if refs and all(m is None for m in metrics.values()):
        fail(NO_METRICS)
    if not any(metrics.values()):
        click.echo("No resources found" if all_namespaces else f"No resources found in {ns} namespace.", err=True)
        return
    click.echo(pod_table(metrics, all_namespaces), nl=False)


@top.command("nodes")
@click.pass_obj
def top_nodes(obj) -> None:
    """CPU and memory of each node's pods (its kubepods cgroup), and their share of the Node's
    allocatable."""
    from .cli import fail
    from .kubectl.session import connect

    state = obj.state
    nodes = state.nodes()
    if not nodes:
        fail(f"no cluster in {state.root} (start one with `kubemu up`)")
    metrics = sample(lambda: {n: node_usage(cgroup_name(state.root, n)) for n in nodes})
    if all(m is None for m in metrics.values()):
        fail(NO_METRICS)
    with connect(obj) as api:
        items = api.list("nodes")["items"]
    allocatable = {n["metadata"]["name"]: (n.get("status") or {}).get("allocatable") or {} for n in items}
    click.echo(node_table(metrics, allocatable), nl=False)


top.add_command(top_pods, "pod")
top.add_command(top_nodes, "node")
