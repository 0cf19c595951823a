"""kubectl describe: the pieces every describer shares, and the dispatch by kind.

Output is built as kubectl's describers build it (pkg/describe/describe.go): lines with
tab-separated cells, two spaces per nesting level, aligned by Go's tabwriter (minwidth 0,
padding 2) per block of consecutive tabbed lines. Pure: objects, related objects and the
time in, text out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from .apply import LAST_APPLIED
from .printers import event_interval, sort_events
from .tabwriter import tabbed

MAX_ANNOTATION_LEN = 140
NONE = "<none>"


@dataclass
class Related:
    """What a describer shows beside the object itself (fetched by the command)."""
    events: list[dict] | None = None          # None: events are not shown
    pods: list[dict] = field(default_factory=list)
    replicasets: list[dict] = field(default_factory=list)
    lease: dict | None = None
    endpointslices: list[dict] = field(default_factory=list)


class Writer:
    """kubectl's PrefixWriter: `write(level, text)` indents by two spaces a level."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def write(self, level: int, text: str) -> None:
        self._parts.append("  " * level + text)

    def text(self) -> str:
        return tabbed("".join(self._parts))


def meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def labels_multiline(w: Writer, title: str, labels: dict | None) -> None:
    """printLabelsMultiline: `Labels:  a=b` then one `k=v` line each, sorted."""
    w.write(0, f"{title}:\t")
    if not labels:
        w.write(0, NONE + "\n")
        return
    for i, key in enumerate(sorted(labels)):
        if i:
            w.write(0, "\t")
        w.write(0, f"{key}={labels[key]}\n")


def annotations_multiline(w: Writer, title: str, annotations: dict | None) -> None:
    """printAnnotationsMultiline: like labels, `key: value`, long or multi-line values below
    their key, and the last-applied-configuration left out."""
    w.write(0, f"{title}:\t")
    keys = sorted(k for k in annotations or {} if k != LAST_APPLIED)
    if not keys:
        w.write(0, NONE + "\n")
        return
    for i, key in enumerate(keys):
        if i:
            w.write(0, "\t")
        value = str(annotations[key]).removesuffix("\n")
        if len(value) + len(key) + 2 > MAX_ANNOTATION_LEN or "\n" in value:
            w.write(0, f"{key}:\n")
            for line in value.split("\n"):
                short = line if len(line) <= MAX_ANNOTATION_LEN - 2 else line[:MAX_ANNOTATION_LEN - 5] + "..."
                w.write(0, f"\t  {short}\n")
        else:
            w.write(0, f"{key}: {value}\n")


def tolerations_multiline(w: Writer, title: str, tolerations: list | None) -> None:
    w.write(0, f"{title}:\t")
    if not tolerations:
        w.write(0, NONE + "\n")
        return
    for i, t in enumerate(sorted(tolerations, key=lambda t: t.get("key") or "")):
        if i:
            w.write(0, "\t")
        text = t.get("key") or ""
        if t.get("value"):
            text += f"={t['value']}"
        if t.get("effect"):
            text += f":{t['effect']}"
        if t.get("operator") == "Exists" and not t.get("value"):
            text += " op=Exists" if t.get("key") or t.get("effect") else "op=Exists"
        if t.get("tolerationSeconds") is not None:
            text += f" for {t['tolerationSeconds']}s"
        w.write(0, text + "\n")


def controlled_by(obj: dict) -> str:
    ref = next((r for r in meta(obj).get("ownerReferences") or [] if r.get("controller")), None)
    return f"{ref.get('kind')}/{ref.get('name')}" if ref else ""


def yes_no(value: Any) -> str:
    return "True" if value else "False"


def events_section(w: Writer, events: list[dict], now: float) -> None:
    """DescribeEvents: the object's events, oldest first, or `Events:  <none>`."""
    if not events:
        w.write(0, "Events:\t<none>\n")
        return
    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
    w.write(1, "----\t------\t----\t----\t-------\n")
    for e in sort_events(events):
        source = (e.get("source") or {}).get("component") or e.get("reportingController") or ""
        w.write(1, f"{e.get('type', '')}\t{e.get('reason', '')}\t{event_interval(e, now)}\t{source}\t"
                   f"{(e.get('message') or '').strip()}\n")


# --- kinds without a describer of their own: kubectl's generic describer ---------------------

_ACRONYMS = ("API", "URL", "UID", "OSB", "GUID")


def smart_label(name: str) -> str:
    """kubectl's smartLabelFor: `holderIdentity` -> `Holder Identity`, `apiVersion` ->
    `API Version`; a name with characters other than letters and `-` is left as it is."""
    if not re.fullmatch(r"[A-Za-z-]+", name):
        return name
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[A-Z]|-", name)  # fatih/camelcase's split
    return " ".join(w.upper() if w.upper() in _ACRONYMS else w[:1].upper() + w[1:] for w in words)


def _unstructured(w: Writer, level: int, value: Any) -> None:
    if isinstance(value, dict):
        for key in sorted(value):
            item = value[key]
            if isinstance(item, (dict, list)):
                w.write(level, f"{smart_label(key)}:\n")
                _unstructured(w, level + 1, item)
            else:
                w.write(level, f"{smart_label(key)}:\t{_scalar(item)}\n")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)):
                _unstructured(w, level, item)
            else:
                w.write(level, f"{_scalar(item)}\n")


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def describe_generic(obj: dict, related: Related, now: float) -> str:
    w = Writer()
    m = meta(obj)
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    if m.get("namespace"):
        w.write(0, f"Namespace:\t{m['namespace']}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    rest = {k: v for k, v in obj.items() if k != "metadata"}
    _unstructured(w, 0, rest)
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()


def describe_namespace(ns: dict, related: Related, now: float) -> str:
    w = Writer()
    m = meta(ns)
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    w.write(0, f"Status:\t{(ns.get('status') or {}).get('phase', '')}\n")
    w.write(0, "\nNo resource quota.\n\nNo LimitRange resource.\n")
    return w.text()


Describer = Callable[[dict, Related, float], str]


def describer(kind: str) -> Describer:
    from .describe_node import describe_node
    from .describe_pod import describe_pod
    from .describe_service import describe_endpoints, describe_endpointslice, describe_service
    from .describe_workloads import describe_deployment, describe_replicaset
    from .describe_apps import describe_daemonset, describe_statefulset
    from .describe_batch import describe_cronjob, describe_job
    from .describe_policy import describe_poddisruptionbudget
    from .describe_storage import describe_persistentvolume, describe_persistentvolumeclaim

    return {"Pod": describe_pod, "Node": describe_node, "Deployment": describe_deployment,
            "ReplicaSet": describe_replicaset, "Namespace": describe_namespace,
            "Service": describe_service, "Endpoints": describe_endpoints,
            "EndpointSlice": describe_endpointslice, "StatefulSet": describe_statefulset,
            "DaemonSet": describe_daemonset, "Job": describe_job, "CronJob": describe_cronjob,
            "PersistentVolumeClaim": describe_persistentvolumeclaim,
            "PersistentVolume": describe_persistentvolume,
            "PodDisruptionBudget": describe_poddisruptionbudget}.get(kind, describe_generic)


def describe(obj: dict, related: Related, now: float) -> str:
    return describer(obj.get("kind") or "")(obj, related, now)
