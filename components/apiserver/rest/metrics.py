"""metrics.k8s.io/v1beta1, the resource metrics API `kubectl top` reads: NodeMetrics and PodMetrics
as metrics-server serves them, from the kubelets' stats (kubelet/stats.py).

    GET /apis/metrics.k8s.io/v1beta1/nodes[/<name>]                       ?labelSelector=
    GET /apis/metrics.k8s.io/v1beta1/[namespaces/<ns>/]pods[/<name>]      ?labelSelector=&fieldSelector=

metrics-server scrapes every kubelet on a timer and answers from what it kept; kubemu's kubelets
already keep the last two readings of each cgroup (the rate is theirs), so each request asks the
kubelets it needs (the nodes the selected pods run on, or the selected nodes) at once, in
parallel, over the wire as kube-apiserver-kubelet-client, each within SCRAPE_TIMEOUT. A kubelet
that does not answer (stopped, a hollow node, no pod cgroups) is left out with one log line, as
metrics-server leaves out a node it failed to scrape: kubectl then shows the node `<unknown>`, or
says `metrics not available yet` when nothing at all is known. The pods and nodes are selected
with the apiserver's own list (namespaces, label and field selectors, as the core resources).

Objects carry what metrics-server's do: `metadata` (name, namespace, the object's labels, a
creationTimestamp of now), `timestamp` (the last reading), `window` (between the two readings,
as Go prints a duration), and `usage` per node or per container: `cpu` in nanocores as a
canonical quantity (`1234n`, `12m`, `2`), `memory` the working set in bytes (`12345Ki`). A pod
or node without figures is NotFound (`podmetrics.metrics.k8s.io "default/web" not found`), as
metrics-server answers. A Table (kubectl get) has metrics-server's columns: Name, cpu, memory,
Window.

Pure but for `Kubelets` (the wire) and `Metrics.serve` (the apiserver's handlers, passed in).
"""
from __future__ import annotations

import asyncio
import logging
from fractions import Fraction
from typing import Awaitable, Callable, Iterable

from kubelet.backoff import go_duration
from kubemu import wire
from kubemu.api.quantity import canonical, format_memory, parse_quantity
from kubemu.api.resources import Resource
from kubemu.api.times import format_time

from . import media, query, status, tables
from .requestinfo import RequestInfo

log = logging.getLogger("kubemu.apiserver.metrics")

GROUP, VERSION = "metrics.k8s.io", "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
# What discovery and OpenAPI publish; not in kubemu.api.resources.RESOURCES: nothing is stored,
# and their plurals are the core group's (`pods`, `nodes`), which name resolution keeps for those.
RESOURCES = (Resource("NodeMetrics", API_VERSION, "nodes", "", namespaced=False, verbs=("get", "list")),
             Resource("PodMetrics", API_VERSION, "pods", "", verbs=("get", "list")))
SCRAPE_TIMEOUT = 5.0  # seconds a kubelet has to answer a request's scrape


# --- the objects (pure) -------------------------------------------------------------------------

def cpu_quantity(nanocores: int) -> str:
    """metrics-server's CPU: nanocores as a canonical DecimalSI quantity."""
    return canonical(Fraction(nanocores, 10**9))


def memory_quantity(nbytes: int) -> str:
    """metrics-server's memory: bytes as a BinarySI quantity (a working set is whole pages: Ki)."""
    return format_memory(nbytes)


def _usage(stat: dict) -> dict | None:
    """A kubelet Stat's usage, None if it is not one (a kubelet of another build)."""
    try:
        cpu, memory = stat["cpu"]["usageNanoCores"], stat["memory"]["workingSetBytes"]
        float(stat["time"]), float(stat["window"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (isinstance(cpu, int) and isinstance(memory, int)):
        return None
    return {"cpu": cpu_quantity(cpu), "memory": memory_quantity(memory)}


def _meta(obj: dict, now: float) -> dict:
    meta = obj.get("metadata") or {}
    out = {"name": meta.get("name", ""), "creationTimestamp": format_time(now)}
    if meta.get("namespace"):
        out["namespace"] = meta["namespace"]
    if meta.get("labels"):
        out["labels"] = dict(meta["labels"])
    return out


def _times(stat: dict) -> dict:
    return {"timestamp": format_time(float(stat["time"])), "window": go_duration(round(float(stat["window"]), 3))}


def node_metrics(node: dict, summary: dict | None, now: float) -> dict | None:
    """The NodeMetrics of `node` from its kubelet's summary; None without figures."""
    stat = (summary or {}).get("node")
    usage = _usage(stat) if isinstance(stat, dict) else None
    if usage is None:
        return None
    return {"kind": "NodeMetrics", "apiVersion": API_VERSION, "metadata": _meta(node, now), **_times(stat),
            "usage": usage}


def pod_metrics(pod: dict, summary: dict | None, now: float) -> dict | None:
    """The PodMetrics of `pod` from its node's kubelet's summary; None without figures for it
    and each of its containers. A pod is found by namespace and name, as metrics-server finds
    it: a static pod's uid on its node is not its mirror pod's in the API."""
    meta = pod.get("metadata") or {}
    entries = (summary or {}).get("pods")
    key = {"namespace": meta.get("namespace"), "name": meta.get("name")}
    entry = next((e for e in entries if isinstance(e, dict) and isinstance(e.get("podRef"), dict)
                  and {k: e["podRef"].get(k) for k in key} == key), None) if isinstance(entries, list) else None
    if entry is None or not entry.get("containers"):
        return None
    containers = []
    for c in entry["containers"]:
        usage = _usage(c) if isinstance(c, dict) else None
        if usage is None:
            return None
        containers.append({"name": str(c.get("name", "")), "usage": usage})
    if _usage(entry) is None:
        return None
    return {"kind": "PodMetrics", "apiVersion": API_VERSION, "metadata": _meta(pod, now), **_times(entry),
            "containers": containers}


def metrics_list(kind: str, items: list[dict]) -> dict:
    return {"kind": f"{kind}List", "apiVersion": API_VERSION, "metadata": {}, "items": items}


def not_found(kind: str, namespace: str | None, name: str) -> wire.NotFound:
    key = f"{namespace}/{name}" if namespace else name
    return wire.NotFound(f'{kind.lower()}.{GROUP} "{key}" not found', {"name": key})


def pod_usage(metrics: dict) -> dict:
    """A PodMetrics' usage summed over its containers (what kubectl top pod shows), as quantities."""
    cpu = sum(parse_quantity(c["usage"]["cpu"]) for c in metrics["containers"])
    memory = sum(parse_quantity(c["usage"]["memory"]) for c in metrics["containers"])
    return {"cpu": canonical(Fraction(cpu)), "memory": memory_quantity(int(memory))}


COLUMNS = [{"name": "Name", "type": "string", "format": "name", "description": "Name of the resource"},
           {"name": "cpu", "type": "string", "format": "quantity", "description": ""},
           {"name": "memory", "type": "string", "format": "quantity", "description": ""},
           {"name": "Window", "type": "string", "format": "duration", "description": ""}]


def table(objects: list[dict], include: str, version: str) -> dict:
    """metrics-server's Table: Name, cpu, memory, Window (a pod's usage summed over its containers)."""
    rows = []
    for obj in objects:
        usage = obj["usage"] if obj["kind"] == "NodeMetrics" else pod_usage(obj)
        row: dict = {"cells": [obj["metadata"]["name"], usage["cpu"], usage["memory"], obj["window"]]}
        included = tables.row_object(obj, include, version)
        if included is not None:
            row["object"] = included
        rows.append(row)
    return {"kind": "Table", "apiVersion": f"{tables.GROUP}/{version}", "metadata": {},
            "columnDefinitions": COLUMNS, "rows": rows}


# --- asking the kubelets ------------------------------------------------------------------------

def log_failure(node: str, reason: str) -> None:
    log.warning('Failed to scrape node "%s": %s', node, reason)


class Kubelets:
    """The stats of nodes' kubelets: `client_for(node)` gives a node's wire Client (a WireError
    if it has none); `on_failure(node, reason)` hears of each kubelet that did not answer."""

    def __init__(self, client_for: Callable[[str], wire.Client], timeout: float = SCRAPE_TIMEOUT,
                 on_failure: Callable[[str, str], None] = log_failure):
        self.client_for = client_for
        self.timeout = timeout
        self.on_failure = on_failure

    async def summaries(self, nodes: Iterable[str]) -> dict[str, dict]:
        """node -> its kubelet's summary, for the nodes that answered in time."""
        async def scrape(node: str) -> tuple[str, dict | None]:
            try:
                answer = await self.client_for(node).call("stats", {}, timeout=self.timeout)
            except wire.WireError as err:
                self.on_failure(node, err.message or type(err).__name__)
                return node, None
            if not isinstance(answer, dict):
                self.on_failure(node, f"unexpected answer {type(answer).__name__}")
                return node, None
            return node, answer
        found = await asyncio.gather(*(scrape(n) for n in sorted(set(nodes))))
        return {node: summary for node, summary in found if summary is not None}


def node_of(pod: dict) -> str:
    return (pod.get("spec") or {}).get("nodeName") or ""


async def pods(kubelets: Kubelets, listed: list[dict], now: float) -> list[dict]:
    """The PodMetrics of the `listed` pods that have figures, in their order."""
    summaries = await kubelets.summaries(n for n in map(node_of, listed) if n)
    found = (pod_metrics(p, summaries.get(node_of(p)), now) for p in listed)
    return [m for m in found if m is not None]


async def nodes(kubelets: Kubelets, listed: list[dict], now: float) -> list[dict]:
    """The NodeMetrics of the `listed` nodes that have figures, in their order."""
    summaries = await kubelets.summaries(n["metadata"]["name"] for n in listed)
    found = (node_metrics(n, summaries.get(n["metadata"]["name"]), now) for n in listed)
    return [m for m in found if m is not None]


# --- the REST door --------------------------------------------------------------------------------

Call = Callable[..., Awaitable[dict]]


class Metrics:
    """Answers a request under /apis/metrics.k8s.io: `call(method, **params)` is the apiserver's
    handler table (list and get of pods and nodes)."""

    def __init__(self, kubelets: Kubelets, clock: Callable[[], float]):
        self.kubelets = kubelets
        self.clock = clock

    async def serve(self, info: RequestInfo, q, out: media.Output, call: Call) -> tuple[int, dict]:
        """(HTTP code, body) for RequestInfo `info` with query `q`."""
        include = q.get("includeObject", "Metadata")
        if include not in tables.INCLUDE:
            raise query.QueryError(f'includeObject: Unsupported value: "{include}"')
        r = next((r for r in RESOURCES if r.plural == info.resource), None)
        if r is None or info.api_version != VERSION or (info.namespace and not r.namespaced):
            return status.not_found_path()
        if info.verb not in r.verbs or info.subresource:
            return 405, status.status(405, "the server does not allow this method on the requested resource",
                                      "MethodNotAllowed")
        core = "pods" if r.kind == "PodMetrics" else "nodes"
        build = pods if r.kind == "PodMetrics" else nodes
        if info.verb == "get":
            namespace = (info.namespace or "default") if r.namespaced else None
            obj = await call("get", resource=core, name=info.name, namespace=namespace)
            items = await build(self.kubelets, [obj], self.clock())
            if not items:
                raise not_found(r.kind, namespace, info.name)
        else:
            listed = await call("list", resource=core, namespace=(info.namespace or None) if r.namespaced else None,
                                label_selector=q.get("labelSelector", ""), field_selector=q.get("fieldSelector", ""))
            items = await build(self.kubelets, listed["items"], self.clock())
        if out.form == "Table":
            return 200, table(items, include, out.version)
        if out.form.startswith("PartialObjectMetadata"):
            partial = [tables.row_object(o, "Metadata", out.version) for o in items]
            if info.verb == "get":
                return 200, partial[0]
            return 200, {"kind": "PartialObjectMetadataList", "apiVersion": f"{tables.GROUP}/{out.version}",
                         "metadata": {}, "items": partial}
        return 200, items[0] if info.verb == "get" else metrics_list(r.kind, items)
