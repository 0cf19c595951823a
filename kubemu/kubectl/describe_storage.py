"""kubectl describe persistentvolumeclaim / persistentvolume (pkg/describe:
PersistentVolumeClaimDescriber, PersistentVolumeDescriber)."""
from __future__ import annotations

from kubemu.api.storage import storage_class_of

from .describe import NONE, Related, Writer, annotations_multiline, events_section, labels_multiline, meta
from .printers import access_modes_text, storage_text
from .timefmt import since


def _phase(obj: dict, now: float) -> str:
    deleted = meta(obj).get("deletionTimestamp")
    if deleted:
        return f"Terminating (lasts {since(deleted, now)})"
    return (obj.get("status") or {}).get("phase") or ""


def _finalizers(obj: dict) -> str:
    """Go's %v of a []string: [a b]."""
    return "[" + " ".join(meta(obj).get("finalizers") or []) + "]"


def claim_users(pvc: dict, pods: list[dict]) -> list[str]:
    """The pods (of the claim's namespace) with a volume of this claim (getPodsForPVC)."""
    name, ns = meta(pvc).get("name"), meta(pvc).get("namespace")
    return [meta(p).get("name", "") for p in pods if meta(p).get("namespace", ns) == ns and any(
        ((v.get("persistentVolumeClaim") or {}).get("claimName") == name)
        for v in (p.get("spec") or {}).get("volumes") or [])]


def describe_persistentvolumeclaim(pvc: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec, status = meta(pvc), pvc.get("spec") or {}, pvc.get("status") or {}
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    w.write(0, f"StorageClass:\t{storage_class_of(pvc)}\n")
    w.write(0, f"Status:\t{_phase(pvc, now)}\n")
    w.write(0, f"Volume:\t{spec.get('volumeName', '')}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    w.write(0, f"Finalizers:\t{_finalizers(pvc)}\n")
    bound = bool(spec.get("volumeName"))
    w.write(0, f"Capacity:\t{storage_text(status.get('capacity')) if bound else ''}\n")
    w.write(0, f"Access Modes:\t{access_modes_text(status.get('accessModes')) if bound else ''}\n")
    if spec.get("volumeMode"):
        w.write(0, f"VolumeMode:\t{spec['volumeMode']}\n")
    users = sorted(claim_users(pvc, related.pods))
    w.write(0, "Used By:\t" + ("".join(("\t" if i else "") + f"{n}\n" for i, n in enumerate(users))
                               if users else NONE + "\n"))
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()


def node_affinity(w: Writer, affinity: dict | None) -> None:
    """printVolumeNodeAffinity: the required terms, one `key op [values]` line each."""
    required = (affinity or {}).get("required")
    if not required:
        w.write(0, f"Node Affinity:\t{NONE}\n")
        return
    w.write(0, "Node Affinity:\t\n")
    terms = required.get("nodeSelectorTerms") or []
    w.write(1, "Required Terms:\t" + ("\n" if terms else NONE + "\n"))
    for i, term in enumerate(terms):
        exprs = term.get("matchExpressions") or []
        w.write(2, f"Term {i}:\t")
        if not exprs:
            w.write(0, NONE + "\n")
        for j, req in enumerate(exprs):
            text = f"{req.get('key', '')} {(req.get('operator') or '').lower()}"
            if req.get("values"):
                text += f" [{', '.join(req['values'])}]"
            w.write(2 if j else 0, ("\t" if j else "") + text + "\n")


def describe_persistentvolume(pv: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec, status = meta(pv), pv.get("spec") or {}, pv.get("status") or {}
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    labels_multiline(w, "Labels", m.get("labels"))
    annotations_multiline(w, "Annotations", m.get("annotations"))
    w.write(0, f"Finalizers:\t{_finalizers(pv)}\n")
    w.write(0, f"StorageClass:\t{storage_class_of(pv)}\n")
    w.write(0, f"Status:\t{_phase(pv, now)}\n")
    ref = spec.get("claimRef")
    w.write(0, f"Claim:\t{ref.get('namespace', '')}/{ref.get('name', '')}\n" if isinstance(ref, dict)
            else "Claim:\t\n")
    w.write(0, f"Reclaim Policy:\t{spec.get('persistentVolumeReclaimPolicy', '')}\n")
    w.write(0, f"Access Modes:\t{access_modes_text(spec.get('accessModes'))}\n")
    if spec.get("volumeMode"):
        w.write(0, f"VolumeMode:\t{spec['volumeMode']}\n")
    w.write(0, f"Capacity:\t{storage_text(spec.get('capacity'))}\n")
    node_affinity(w, spec.get("nodeAffinity"))
    w.write(0, f"Message:\t{status.get('message', '')}\n")
    w.write(0, "Source:\n")
    host_path = spec.get("hostPath")
    if isinstance(host_path, dict):
        w.write(2, "Type:\tHostPath (bare host directory volume)\n")
        w.write(2, f"Path:\t{host_path.get('path', '')}\n")
        w.write(2, f"HostPathType:\t{host_path.get('type') or NONE}\n")
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()
