"""kubectl rollout history and undo, from a Deployment and its ReplicaSets (pure)."""
from __future__ import annotations

import copy

from components.controllers.deployment import DESIRED_REPLICAS, MAX_REPLICAS, REVISION, revision
from components.controllers.podutil import controller_ref

from .apply import LAST_APPLIED
from .describe import Writer
from .describe_pod import pod_template
from .tabwriter import tabbed

CHANGE_CAUSE = "kubernetes.io/change-cause"
# Annotations that belong to the Deployment itself, never copied from a ReplicaSet on undo
# (kubectl's annotationsToSkip).
OWN_ANNOTATIONS = (LAST_APPLIED, REVISION, DESIRED_REPLICAS, MAX_REPLICAS,
                   "deployment.kubernetes.io/revision-history", "deprecated.deployment.rollback.to")


def owned_replicasets(deployment: dict, replicasets: list[dict]) -> list[dict]:
    uid = (deployment.get("metadata") or {}).get("uid")
    return [rs for rs in replicasets if (controller_ref(rs) or {}).get("uid") == uid]


def revisions(deployment: dict, replicasets: list[dict]) -> dict[int, dict]:
    """Revision number -> its ReplicaSet."""
    return {revision(rs): rs for rs in owned_replicasets(deployment, replicasets) if revision(rs) > 0}


def _change_cause(rs: dict) -> str:
    return ((rs.get("metadata") or {}).get("annotations") or {}).get(CHANGE_CAUSE, "")


def history_table(by_revision: dict[int, dict]) -> str:
    """`REVISION  CHANGE-CAUSE` and a row per revision, oldest first."""
    if not by_revision:
        return "No rollout history found."
    rows = "".join(f"{n}\t{_change_cause(by_revision[n]) or '<none>'}\n" for n in sorted(by_revision))
    return tabbed("REVISION\tCHANGE-CAUSE\n" + rows)


def revision_template(rs: dict) -> str:
    """The pod template of one revision, with its change cause among the annotations."""
    template = copy.deepcopy((rs.get("spec") or {}).get("template") or {})
    if _change_cause(rs):
        template.setdefault("metadata", {}).setdefault("annotations", {})[CHANGE_CAUSE] = _change_cause(rs)
    w = Writer()
    pod_template(w, template)
    return w.text()


def rollback_annotations(deployment: dict, rs: dict) -> dict:
    """The Deployment's annotations after undo: its own, and the ReplicaSet's others."""
    own = (deployment.get("metadata") or {}).get("annotations") or {}
    out = {k: v for k, v in own.items() if k in OWN_ANNOTATIONS}
    out.update({k: v for k, v in ((rs.get("metadata") or {}).get("annotations") or {}).items()
                if k not in OWN_ANNOTATIONS})
    return out


def rollback_target(deployment: dict, replicasets: list[dict], to_revision: int) -> dict | None:
    """The ReplicaSet undo goes back to: `to_revision`'s, else the one before the latest."""
    by_revision = revisions(deployment, replicasets)
    if to_revision:
        return by_revision.get(to_revision)
    ordered = sorted(by_revision)
    return by_revision[ordered[-2]] if len(ordered) >= 2 else None
