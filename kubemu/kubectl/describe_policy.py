"""kubectl describe poddisruptionbudget (pkg/describe: describePodDisruptionBudget)."""
from __future__ import annotations

from kubemu.api.meta import format_selector

from .describe import Related, Writer, events_section, meta


def describe_poddisruptionbudget(pdb: dict, related: Related, now: float) -> str:
    w = Writer()
    m, spec, status = meta(pdb), pdb.get("spec") or {}, pdb.get("status") or {}
    w.write(0, f"Name:\t{m.get('name', '')}\n")
    w.write(0, f"Namespace:\t{m.get('namespace', '')}\n")
    if spec.get("minAvailable") is not None:
        w.write(0, f"Min available:\t{spec['minAvailable']}\n")
    elif spec.get("maxUnavailable") is not None:
        w.write(0, f"Max unavailable:\t{spec['maxUnavailable']}\n")
    selector = spec.get("selector")
    w.write(0, f"Selector:\t{format_selector(selector) if selector is not None else '<unset>'}\n")
    w.write(0, "Status:\n")
    for title, field in (("Allowed disruptions", "disruptionsAllowed"), ("Current", "currentHealthy"),
                         ("Desired", "desiredHealthy"), ("Total", "expectedPods")):
        w.write(2, f"{title}:\t{int(status.get(field) or 0)}\n")
    if related.events is not None:
        events_section(w, related.events, now)
    return w.text()
