"""kubectl describe deployment / replicaset."""
from __future__ import annotations

from components.controllers.deployment import REVISION
from kubemu.api.meta import format_selector

from .describe import Related, Writer, annotations_multiline, controlled_by, events_section, labels_multiline, meta
from .describe_pod import pod_template
from .timefmt import rfc1123z

def _desired(obj: dict) -> int:
    replicas = (obj.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def _status(obj: dict, field: str) -> int:
    return int((obj.get("status") or {}).get(field) or 0)


def _conditions(w: Writer, obj: dict) -> None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tReason\n")
        w.write(1, "----\t------\t------\n")
        for c in conditions:
            w.write(1, f"{c.get('type', '')} \t{c.get('status', '')}\t{c.get('reason', '')}\n")


def owned_by(obj: dict, owner: dict) -> bool:
    uid = meta(owner).get("uid")
    return any(r.get("controller") and r.get("uid") == uid for r in meta(obj).get("ownerReferences") or [])


def new_and_old(deployment: dict, replicasets: list[dict]) -> tuple[list[dict], list[dict]]:
    """The deployment's ReplicaSets: the new one (the current revision's) and the old ones."""
    owned = [rs for rs in replicasets if owned_by(rs, deployment)]
    revision = (meta(deployment).get("annotations") or {}).get(REVISION)
    new = [rs for rs in owned if revision and (meta(rs).get("annotations") or {}).get(REVISION) == revision]
    return new[:1], [rs for rs in owned if rs not in new[:1]]


def _replicasets_text(replicasets: list[dict]) -> str:
    return ", ".join(f"{meta(rs).get('name', '')} ({_status(rs, 'replicas')}/{_desired(rs)} replicas created)"
                     for rs in replicasets) or "<none>"


def describe_deployment(d: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec = meta(d), d.get("spec") or {}
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    w.write(0, f"CreationTimestamp:\t{rfc1123z(m.get('creationTimestamp'))}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    w.write(0, f"Selector:\t{format_selector(spec.get('selector'))}\n")
    w.write(0, f"Replicas:\t{_desired(d)} desired | {_status(d, 'updatedReplicas')} updated | "
               f"{_status(d, 'replicas')} total | {_status(d, 'availableReplicas')} available | "
               f"{_status(d, 'unavailableReplicas')} unavailable\n")
    strategy = spec.get("strategy") or {}
    w.write(0, f"StrategyType:\t{strategy.get('type', '')}\n")
    w.write(0, f"MinReadySeconds:\t{spec.get('minReadySeconds', 0)}\n")
    rolling = strategy.get("rollingUpdate")
    if rolling is not None:
        w.write(0, f"RollingUpdateStrategy:\t{rolling.get('maxUnavailable', '')} max unavailable, "
                   f"{rolling.get('maxSurge', '')} max surge\n")
    pod_template(w, spec.get("template") or {})
    _conditions(w, d)
    new, old = new_and_old(d, related.replicasets)
    if new or old:
        w.write(0, f"OldReplicaSets:\t{_replicasets_text(old)}\n")
        w.write(0, f"NewReplicaSet:\t{_replicasets_text(new)}\n")
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()


def pods_status(rs: dict, pods: list[dict]) -> str:
    phases = [(p.get("status") or {}).get("phase") for p in pods if owned_by(p, rs)]
    return (f"{phases.count('Running')} Running / {phases.count('Pending')} Waiting / "
            f"{phases.count('Succeeded')} Succeeded / {phases.count('Failed')} Failed")


def describe_replicaset(rs: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec = meta(rs), rs.get("spec") or {}
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    w.write(0, f"Selector:\t{format_selector(spec.get('selector'))}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    if controlled_by(rs):
        w.write(0, f"Controlled By:\t{controlled_by(rs)}\n")
    w.write(0, f"Replicas:\t{_status(rs, 'replicas')} current / {_desired(rs)} desired\n")
    w.write(0, f"Pods Status:\t{pods_status(rs, related.pods)}\n")
    pod_template(w, spec.get("template") or {})
    _conditions(w, rs)
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()
