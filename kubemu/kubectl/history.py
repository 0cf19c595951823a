"""kubectl rollout history and undo (pure): a Deployment's from its ReplicaSets, a
StatefulSet's or DaemonSet's from its ControllerRevisions."""
from __future__ import annotations

import copy

from components.controllers.deployment import DESIRED_REPLICAS, MAX_REPLICAS, REVISION, revision
from components.controllers.history import sort_revisions
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


# --- StatefulSets and DaemonSets: their ControllerRevisions -----------------------------------


def controller_revisions(owner: dict, all_revisions: list[dict]) -> dict[int, dict]:
    """Revision number -> the owner's ControllerRevision (kubectl's controlledHistories)."""
    uid = (owner.get("metadata") or {}).get("uid")
    return {int(r.get("revision") or 0): r for r in sort_revisions(all_revisions)
            if (controller_ref(r) or {}).get("uid") == uid}


def template_text(template: dict) -> str:
    """A pod template as `rollout history --revision` prints it."""
    w = Writer()
    pod_template(w, template)
    return w.text()


class UndoError(Exception):
    pass


def undo_revision(by_revision: dict[int, dict], to_revision: int) -> dict:
    """The ControllerRevision undo goes back to (kubectl's findHistory): `to_revision`'s, else
    the one before the newest."""
    if to_revision < 0:
        raise UndoError(f"unable to find specified revision {to_revision} in history")
    if to_revision == 0:
        if len(by_revision) <= 1:
            raise UndoError("no last revision to roll back to")
        return by_revision[sorted(by_revision)[-2]]
    if to_revision not in by_revision:
        raise UndoError(f"unable to find specified revision {to_revision} in history")
    return by_revision[to_revision]
