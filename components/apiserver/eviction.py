"""The Eviction API's disruption-budget rule (pkg/registry/core/pod/storage/eviction.go). Pure:
handlers.API.evict reads the pod and its namespace's PodDisruptionBudgets, asks these functions,
and does the writes they call for, in this order:

1. `can_ignore_budget(pod)`: a pod that is Pending, Succeeded, Failed or already being deleted
   is deleted without a budget check (a terminal pod has disrupted its workload already); the
   delete carries the pod's resourceVersion as a precondition (`guarded`) unless the pod is
   terminal or deleting, so the pod cannot turn Ready in between. A conflict is retried (not
   when the caller set a resourceVersion precondition of its own).
2. `budget_of(pod, pdbs)`: the PDBs of the pod's namespace whose selector matches its labels (an
   empty or invalid selector matches nothing here); more than one is a 500.
3. `unhealthy_may_go(pod, pdb)`: a pod that is not Ready does not count towards the budget: with
   unhealthyPodEvictionPolicy AlwaysAllow, or (IfHealthyBudget, the default) when the budget is
   met anyway, it is deleted (guarded) without spending a disruption.
4. `spend(pod_name, pdb, now, dry_run)`: the PDB with one disruption spent and the pod recorded
   in status.disruptedPods (the disruption controller drops entries after two minutes), written
   with the PDB's resourceVersion as precondition, a conflict re-reading the PDB and spending
   again; or the 429 when disruptionsAllowed is 0 or the status is older than the spec. A dry
   run checks only.
5. The pod is deleted; a conflict on a guarded delete (the pod changed since) is a 429 so the
   client retries.
"""
from __future__ import annotations

from typing import Any

from kubemu.api import policy
from kubemu.api.labels import LabelSelectorError, selector_from_label_selector
from kubemu.wire import Forbidden, TooManyRequests, WireError

from components.controllers.podutil import is_pod_ready, is_terminating, labels_of, pod_phase

RETRIES = 20  # EvictionsRetry.Steps
MAX_DISRUPTED_POD_SIZE = 2000
VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."
MORE_THAN_ONE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"


def can_ignore_budget(pod: dict) -> bool:
    return pod_phase(pod) in ("Pending", "Succeeded", "Failed") or is_terminating(pod)


def _enforces_resource_version(pod: dict) -> bool:
    return pod_phase(pod) not in ("Succeeded", "Failed") and not is_terminating(pod)


def caller_precondition(options: dict) -> bool:
    """Whether the caller's deleteOptions name a resourceVersion (then nothing is retried)."""
    pre = options.get("preconditions")
    return isinstance(pre, dict) and pre.get("resourceVersion") not in (None, "")


def guarded(options: dict, pod: dict, *, always: bool = False) -> dict:
    """The delete options with the pod's resourceVersion as precondition, unless the caller set
    one (it is honoured as it stands) or the pod is terminal or deleting (then only if
    `always`, as the budget path does)."""
    if caller_precondition(options) or not (always or _enforces_resource_version(pod)):
        return options
    pre = options.get("preconditions") if isinstance(options.get("preconditions"), dict) else {}
    rv = (pod.get("metadata") or {}).get("resourceVersion")
    return {**options, "preconditions": {**pre, "resourceVersion": rv}}


def _matches(pdb: dict, labels: dict) -> bool:
    spec = pdb.get("spec") if isinstance(pdb.get("spec"), dict) else {}
    selector = spec.get("selector")
    # a nil or empty selector that crept in matches nothing here, not everything
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    try:
        return selector_from_label_selector(selector).matches(labels)
    except (LabelSelectorError, ValueError, TypeError, AttributeError):
        return False


def budget_of(pod: dict, pdbs: list[dict]) -> dict | None:
    """The one PDB guarding `pod`, or None; more than one is an error (500)."""
    namespace = (pod.get("metadata") or {}).get("namespace")
    labels = labels_of(pod)
    mine = [p for p in pdbs if (p.get("metadata") or {}).get("namespace") == namespace
            and _matches(p, labels)]
    if len(mine) > 1:
        raise WireError(MORE_THAN_ONE, {}, code="InternalError")
    return mine[0] if mine else None


def _status(pdb: dict) -> dict:
    return pdb.get("status") if isinstance(pdb.get("status"), dict) else {}


def _count(status: dict, field: str) -> int:
    value = status.get(field)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def unhealthy_may_go(pod: dict, pdb: dict) -> bool:
    if is_pod_ready(pod):
        return False
    spec = pdb.get("spec") if isinstance(pdb.get("spec"), dict) else {}
    if spec.get("unhealthyPodEvictionPolicy") == policy.ALWAYS_ALLOW:
        return True
    status = _status(pdb)
    desired = _count(status, "desiredHealthy")
    return _count(status, "currentHealthy") >= desired > 0


def _name(pdb: dict) -> str:
    return str((pdb.get("metadata") or {}).get("name") or "")


def too_many_requests(cause: str, retry_after: int) -> TooManyRequests:
    return TooManyRequests(VIOLATES, {"reason": "TooManyRequests", "retryAfterSeconds": retry_after,
                                      "causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]})


def still_processing(pdb_name: str) -> TooManyRequests:
    """createTooManyRequestsError: the budget is not settled yet; retry in 10 s."""
    return too_many_requests(f"The disruption budget {pdb_name} is still being processed by the server.", 10)


def _forbidden(pdb_name: str, why: str) -> Forbidden:
    return Forbidden(f'poddisruptionbudget.policy "{pdb_name}" is forbidden: {why}',
                     {"reason": "Forbidden", "kind": "poddisruptionbudget", "name": pdb_name})


def spend(pod_name: str, pdb: dict, now: str, dry_run: bool) -> dict | None:
    """checkAndDecrement: the PDB to write (one disruption spent, the pod recorded), None on a
    dry run that may go ahead; raises TooManyRequests or Forbidden when it may not."""
    name, status = _name(pdb), _status(pdb)
    generation = (pdb.get("metadata") or {}).get("generation") or 0
    if _count(status, "observedGeneration") < generation:
        raise still_processing(name)
    allowed = _count(status, "disruptionsAllowed")
    if allowed < 0:
        raise _forbidden(name, "pdb disruptions allowed is negative")
    disrupted = status.get("disruptedPods") if isinstance(status.get("disruptedPods"), dict) else {}
    if len(disrupted) > MAX_DISRUPTED_POD_SIZE:
        raise _forbidden(name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
    if allowed == 0:
        raise too_many_requests(f"The disruption budget {name} needs {_count(status, 'desiredHealthy')} "
                                f"healthy pods and has {_count(status, 'currentHealthy')} currently", 0)
    if dry_run:
        return None
    new_status = {**status, "disruptionsAllowed": allowed - 1,
                  "disruptedPods": {**disrupted, pod_name: now}}
    if allowed - 1 == 0:
        policy.set_disruption_allowed(new_status, now)
    return {**pdb, "status": new_status}


def conflicts_message(pdb_name: Any) -> str:
    return f'couldn\'t update PodDisruptionBudget "{pdb_name}" due to conflicts'
