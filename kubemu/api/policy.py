"""Defaulting and validation of PodDisruptionBudget (policy/v1), with objects.py's contract
(DEFAULTERS, VALIDATORS, UPDATE_VALIDATORS by kind), as kube-apiserver has them
(pkg/apis/policy/validation ValidatePodDisruptionBudget and ...StatusUpdate):

* spec: minAvailable and maxUnavailable are each an int >= 0 or a percent <= 100%, not both;
  the selector is a valid LabelSelector (policy/v1: absent or empty selects every pod of the
  namespace); unhealthyPodEvictionPolicy IfHealthyBudget or AlwaysAllow.
* status: disruptionsAllowed, currentHealthy, desiredHealthy, expectedPods >= 0; conditions
  with a type and a status, one of each type; disruptedPods maps pod names to timestamps.

A PodDisruptionBudget has no defaults in policy/v1 (the namespace aside); the spec may change.
"""
from __future__ import annotations

from typing import Any

from .fielderrors import FieldError, child, key
from .meta import Checker, check_int_or_percent, check_label_selector, register, table
from .pod import LIST, OBJ, STR

IF_HEALTHY_BUDGET = "IfHealthyBudget"
ALWAYS_ALLOW = "AlwaysAllow"
UNHEALTHY_POD_EVICTION_POLICIES = (ALWAYS_ALLOW, IF_HEALTHY_BUDGET)
STATUS_COUNTS = ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods")
DISRUPTION_ALLOWED = "DisruptionAllowed"  # the status condition
SUFFICIENT_PODS = "SufficientPods"
INSUFFICIENT_PODS = "InsufficientPods"
SYNC_FAILED = "SyncFailed"

register(
    PodDisruptionBudget=table("apiVersion kind metadata spec status",
                              types={"apiVersion": "string", "kind": "string",
                                     "metadata": "ObjectMeta", "spec": "PodDisruptionBudgetSpec",
                                     "status": "PodDisruptionBudgetStatus"}),
    PodDisruptionBudgetSpec=table(
        "minAvailable maxUnavailable selector unhealthyPodEvictionPolicy", {},
        {"unhealthyPodEvictionPolicy": UNHEALTHY_POD_EVICTION_POLICIES},
        """minAvailable:IntOrString maxUnavailable:IntOrString selector:LabelSelector
        unhealthyPodEvictionPolicy:string"""),
    PodDisruptionBudgetStatus=table(
        """observedGeneration disruptedPods disruptionsAllowed currentHealthy desiredHealthy
        expectedPods conditions""",
        {"disruptedPods": OBJ, "conditions": LIST},
        types="""observedGeneration:integer disruptedPods:map[string]Time
        disruptionsAllowed:integer currentHealthy:integer desiredHealthy:integer
        expectedPods:integer conditions:[]Condition"""),
    # metav1.Condition (its types for explain are service.py's)
    Condition=table("type status observedGeneration lastTransitionTime reason message",
                    {"type": STR, "reason": STR, "message": STR},
                    {"status": ("True", "False", "Unknown")}),
)


def default_pdb(obj: Any) -> Any:
    from .objects import _defaulted  # objects.py imports this module for its tables
    return _defaulted(obj, lambda pdb: None, namespaced=True)


def set_disruption_allowed(status: dict, now: str, *, reason: str | None = None,
                           message: str = "") -> None:
    """pdbhelper.UpdateDisruptionAllowedCondition (and the controller's SyncFailed): the
    DisruptionAllowed condition of `status` (changed in place) from its disruptionsAllowed, as
    meta.SetStatusCondition keeps it: lastTransitionTime moves only when the status flips."""
    allowed = reason is None and isinstance(status.get("disruptionsAllowed"), int) \
        and status["disruptionsAllowed"] > 0
    if reason is None:
        reason = SUFFICIENT_PODS if allowed else INSUFFICIENT_PODS
    cond = {"type": DISRUPTION_ALLOWED, "status": "True" if allowed else "False",
            "observedGeneration": status.get("observedGeneration") or 0, "reason": reason,
            "message": message, "lastTransitionTime": now}
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    old = next((c for c in conditions if c.get("type") == DISRUPTION_ALLOWED), None)
    if old is not None and old.get("status") == cond["status"] and old.get("lastTransitionTime"):
        cond["lastTransitionTime"] = old["lastTransitionTime"]
    status["conditions"] = [cond if c is old else c for c in conditions] if old is not None \
        else conditions + [cond]


def _budget(c: Checker, value: Any, path: str) -> None:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent."""
    from .objects import check_at_most_100_percent  # see default_pdb
    check_at_most_100_percent(c, value, check_int_or_percent(c, value, path), path)


def _spec(c: Checker, spec: dict) -> None:
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        c.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set")
    for field in ("minAvailable", "maxUnavailable"):
        _budget(c, spec.get(field), child("spec", field))
    if spec.get("selector") is not None:
        check_label_selector(c, spec["selector"], "spec.selector")


def _status(c: Checker, value: Any) -> None:
    from .objects import _conditions  # see default_pdb
    status = c.obj(value, "status", "PodDisruptionBudgetStatus")
    if status is None:
        return
    for field in STATUS_COUNTS + ("observedGeneration",):
        c.nonnegative(status.get(field), child("status", field))
    disrupted = status.get("disruptedPods")
    if isinstance(disrupted, dict):
        for name, when in disrupted.items():
            c.timestamp(when, key("status.disruptedPods", name))
    _conditions(c, status.get("conditions"), "status.conditions", "Condition",
                ("lastTransitionTime",))


def validate_pdb(obj: Any, *, strict: bool = True) -> list[FieldError]:
    from .objects import _validate  # see default_pdb

    def body(c: Checker, pdb: dict) -> None:
        spec = c.obj(pdb.get("spec"), "spec", "PodDisruptionBudgetSpec")
        _spec(c, spec if spec is not None else {})
        _status(c, pdb.get("status"))
    return _validate(obj, "PodDisruptionBudget", strict, body)


DEFAULTERS = {"PodDisruptionBudget": default_pdb}
VALIDATORS = {"PodDisruptionBudget": validate_pdb}
UPDATE_VALIDATORS: dict = {}
