"""kubectl describe statefulset / daemonset (pkg/describe: describeStatefulSet, describeDaemonSet)."""
from __future__ import annotations

from kubemu.api.labels import format_labels
from kubemu.api.meta import format_selector

from .describe import NONE, Related, Writer, annotations_multiline, events_section, labels_multiline, meta
from .describe_pod import pod_template
from .describe_workloads import pods_status
from .timefmt import rfc1123z


def _status(obj: dict, field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def indented_labels(w: Writer, title: str, labels: dict | None) -> None:
    """printLabelsMultilineWithIndent with a two-space indent (a claim template's labels)."""
    w.write(1, f"{title}:\t")
    if not labels:
        w.write(0, NONE + "\n")
        return
    for i, key in enumerate(sorted(labels)):
        w.write(0, ("  \t" if i else "") + f"{key}={labels[key]}\n")


def claim_templates(w: Writer, templates: list[dict]) -> None:
    """describeVolumeClaimTemplates."""
    if not templates:
        w.write(0, f"Volume Claims:\t{NONE}\n")
        return
    w.write(0, "Volume Claims:\n")
    for claim in templates:
        m, spec = meta(claim), claim.get("spec") or {}
        w.write(1, f"Name:\t{m.get('name', '')}\n")
        w.write(1, f"StorageClass:\t{spec.get('storageClassName') or ''}\n")
        indented_labels(w, "Labels", m.get("labels"))
        indented_labels(w, "Annotations", m.get("annotations"))
        capacity = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        w.write(1, f"Capacity:\t{capacity if capacity is not None else '<default>'}\n")
        w.write(1, f"Access Modes:\t[{' '.join(spec.get('accessModes') or [])}]\n")


def describe_statefulset(sts: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec = meta(sts), sts.get("spec") or {}
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    w.write(0, f"CreationTimestamp:\t{rfc1123z(m.get('creationTimestamp'))}\n")
    w.write(0, f"Selector:\t{format_selector(spec.get('selector'))}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    replicas = spec.get("replicas")
    w.write(0, f"Replicas:\t{1 if replicas is None else replicas} desired | {_status(sts, 'replicas')} total\n")
    strategy = spec.get("updateStrategy") or {}
    w.write(0, f"Update Strategy:\t{strategy.get('type', '')}\n")
    rolling = strategy.get("rollingUpdate")
    if isinstance(rolling, dict) and rolling.get("partition") is not None:
        w.write(1, f"Partition:\t{rolling['partition']}\n")
        if rolling.get("maxUnavailable") is not None:
            w.write(1, f"MaxUnavailable:\t{rolling['maxUnavailable']}\n")
    w.write(0, f"Pods Status:\t{pods_status(sts, related.pods)}\n")
    pod_template(w, spec.get("template") or {})
    claim_templates(w, spec.get("volumeClaimTemplates") or [])
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()


def describe_daemonset(ds: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec = meta(ds), ds.get("spec") or {}
    node_selector = ((spec.get("template") or {}).get("spec") or {}).get("nodeSelector")
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Selector:\t{format_selector(spec.get('selector'))}\n")
    w.write(0, f"Node-Selector:\t{format_labels(node_selector) or NONE}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    for title, field in (("Desired Number of Nodes Scheduled", "desiredNumberScheduled"),
                         ("Current Number of Nodes Scheduled", "currentNumberScheduled"),
                         ("Number of Nodes Scheduled with Up-to-date Pods", "updatedNumberScheduled"),
                         ("Number of Nodes Scheduled with Available Pods", "numberAvailable"),
                         ("Number of Nodes Misscheduled", "numberMisscheduled")):
        w.write(0, f"{title}: {_status(ds, field)}\n")
    w.write(0, f"Pods Status:\t{pods_status(ds, related.pods)}\n")
    pod_template(w, spec.get("template") or {})
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()
