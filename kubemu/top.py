"""kubemu top pods|nodes: kubectl top's tables, from the kubelets' stats.

`kubectl top` reads metrics.k8s.io, which the apiserver builds from each kubelet's stats
(kubelet/stats.py: the kubelet reads its cgroups every few seconds, and the CPU rate is theirs;
components/apiserver/rest/metrics.py: the PodMetrics and NodeMetrics). kubemu top takes the same
path without HTTPS: it lists the pods or nodes through the apiserver, asks their kubelets for
their stats as the cluster admin (a kubelet lets cluster-admin read its stats, as it lets it read
nodes/stats), builds the same objects with metrics.py, and prints them as kubectl top does: CPU
in millicores rounded up (Quantity.MilliValue), memory in Mi, a node's figures against its
allocatable, rows in the API's order.

Formatting is pure (`pod_table`, `node_table`); `collect` and the commands are the shell.
"""
from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Awaitable, Callable

import click

from components.apiserver.rest import metrics
from kubemu import wire
from kubemu._wire_auth import state_credentials

from .api.quantity import cpu_millis, memory_bytes
from .kubectl.options import all_namespaces_option, namespace_option
from .kubectl.tabwriter import GET, TabWriter
from .kubectl.targets import DEFAULT_NAMESPACE
from .statedir import StateDir

MI = 1 << 20
NOT_YET = "metrics not available yet"  # kubectl's words when the metrics API has nothing yet


def _cpu(quantity: str) -> str:
    return f"{cpu_millis(quantity)}m"


def _memory(quantity: str) -> str:
    return f"{memory_bytes(quantity) // MI}Mi"


def _table(lines: list[list[str]]) -> str:
    return TabWriter(**GET).format("".join("\t".join(cells) + "\n" for cells in lines))


def pod_table(items: list[dict], all_namespaces: bool, containers: bool = False) -> str:
    """kubectl top pod's table of PodMetrics: a pod's usage is its containers' summed; with
    `containers`, a row per container (POD, NAME)."""
    ns = ["NAMESPACE"] if all_namespaces else []
    lines = [ns + (["POD", "NAME"] if containers else ["NAME"]) + ["CPU(cores)", "MEMORY(bytes)"]]
    for m in items:
        first = [m["metadata"].get("namespace", "")] if all_namespaces else []
        if containers:
            for c in m["containers"]:
                lines.append(first + [m["metadata"]["name"], c["name"], _cpu(c["usage"]["cpu"]),
                                      _memory(c["usage"]["memory"])])
        else:
            usage = metrics.pod_usage(m)
            lines.append(first + [m["metadata"]["name"], _cpu(usage["cpu"]), _memory(usage["memory"])])
    return _table(lines)


def node_table(items: list[dict], nodes: list[dict]) -> str:
    """kubectl top node's table of NodeMetrics, with percentages of each Node's allocatable;
    a node without metrics last, `<unknown>` throughout."""
    allocatable = {n["metadata"]["name"]: (n.get("status") or {}).get("allocatable") or {} for n in nodes}
    lines = [["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"]]
    for m in items:
        name, usage = m["metadata"]["name"], m["usage"]
        alloc = allocatable.pop(name, {})
        lines.append([name, _cpu(usage["cpu"]), _percent(cpu_millis(usage["cpu"]), alloc.get("cpu"), cpu_millis),
                      _memory(usage["memory"]),
                      _percent(memory_bytes(usage["memory"]), alloc.get("memory"), memory_bytes)])
    lines += [[name] + ["<unknown>"] * 4 for name in sorted(allocatable)]
    return _table(lines)


def _percent(used: int, quantity, parse) -> str:
    try:
        total = parse(quantity) if quantity is not None else 0
    except ValueError:
        total = 0
    return f"{used * 100 // total}%" if total > 0 else "<unknown>"


# --- the shell -------------------------------------------------------------------------------

Build = Callable[[metrics.Kubelets, list[dict], float], Awaitable[list[dict]]]


def collect(state: StateDir, build: Build, listed: list[dict]) -> tuple[list[dict], dict[str, str]]:
    """(the metrics `build` makes of the `listed` objects, node -> why its kubelet did not answer)."""
    failures: dict[str, str] = {}
    credentials = state_credentials(state.root)
    clients: list[wire.Client] = []

    def client_for(node: str) -> wire.Client:
        endpoint = state.kubelet_endpoint(node)
        if not Path(endpoint.removeprefix("ipc://")).exists():
            raise wire.Unavailable(f"the kubelet of node {node} is not running (or is a hollow node's)")
        clients.append(wire.Client(endpoint, timeout=metrics.SCRAPE_TIMEOUT, credentials=credentials))
        return clients[-1]

    async def run() -> list[dict]:
        try:
            return await build(metrics.Kubelets(client_for, on_failure=failures.__setitem__), listed, time.time())
        finally:
            for client in clients:
                await client.close()
    return asyncio.run(run()), failures


def _unavailable(failures: dict[str, str]) -> str:
    """One line: why there are no metrics at all."""
    if not failures:
        return NOT_YET
    node = sorted(failures)[0]
    return f"Metrics not available: {failures[node]}"


@click.group("top")
def top() -> None:
    """CPU and memory of pods and nodes, from the kubelets' stats (kubectl top's columns)."""


@top.command("pods")
@namespace_option
@all_namespaces_option
@click.option("-l", "--selector", default="", help="label selector, e.g. app=web")
@click.option("--containers", is_flag=True, help="a row per container")
@click.pass_obj
def top_pods(obj, namespace: str | None, all_namespaces: bool, selector: str, containers: bool) -> None:
    """CPU (over the kubelet's last window) and working-set memory of each pod."""
    from .cli import fail  # kubemu.cli imports this module
    from .kubectl.session import connect

    ns = namespace or DEFAULT_NAMESPACE
    with connect(obj) as api:
        pods = api.list("pods", namespace=None if all_namespaces else ns, label_selector=selector)["items"]
    if not pods:
        click.echo("No resources found" if all_namespaces else f"No resources found in {ns} namespace.", err=True)
        return
    items, failures = collect(obj.state, metrics.pods, pods)
    if not items:
        fail(_unavailable(failures))
    click.echo(pod_table(items, all_namespaces, containers), nl=False)


@top.command("nodes")
@click.option("-l", "--selector", default="", help="label selector")
@click.pass_obj
def top_nodes(obj, selector: str) -> None:
    """CPU and memory of each node's pods (its kubepods cgroup), and their share of the Node's
    allocatable."""
    from .cli import fail
    from .kubectl.session import connect

    with connect(obj) as api:
        nodes = api.list("nodes", label_selector=selector)["items"]
    items, failures = collect(obj.state, metrics.nodes, nodes)
    if not items:
        fail(_unavailable(failures))
    click.echo(node_table(items, nodes), nl=False)


top.add_command(top_pods, "pod")
top.add_command(top_nodes, "node")
