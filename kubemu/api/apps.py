"""Defaulting and validation of StatefulSet, DaemonSet and ControllerRevision (apps/v1), with
objects.py's contract (DEFAULTERS, VALIDATORS, UPDATE_VALIDATORS by kind):

    default_statefulset(obj) / default_daemonset(obj) / default_controllerrevision(obj)
    validate_statefulset(obj, strict=True) / validate_daemonset / validate_controllerrevision
    validate_statefulset_update(old, new) / validate_controllerrevision_update(old, new)

As kube-apiserver has them (pkg/apis/apps/v1 defaults, pkg/apis/apps/validation):

* StatefulSet: replicas 1, podManagementPolicy OrderedReady (or Parallel), updateStrategy
  RollingUpdate with partition 0 (maxUnavailable > 0 when given) or OnDelete,
  revisionHistoryLimit 10, persistentVolumeClaimRetentionPolicy Retain/Retain (or Delete), a
  DNS-label name (its pods are `<name>-<ordinal>`). An update may change only replicas,
  ordinals, template, updateStrategy, persistentVolumeClaimRetentionPolicy and minReadySeconds.
  Upstream leaves the template's pod spec unchecked (a TODO there: claim templates' volumes
  are not in it); kubemu checks it with one volume per claim template added, as the controller
  adds them, so a bad template is refused at once instead of failing every pod creation.
* DaemonSet: updateStrategy RollingUpdate (maxUnavailable 1, maxSurge 0 by default; exactly
  one of them non-zero) or OnDelete, revisionHistoryLimit 10; the selector is immutable
  (objects.py, as a ReplicaSet's).
* ControllerRevision: data required and immutable, revision >= 0.

The selector/template rules the apps/v1 workloads share live in objects.py (_workload_spec).
"""
from __future__ import annotations

from typing import Any, Callable

from .fielderrors import FieldError, child, duplicate, forbidden, invalid, not_supported, required
from .meta import TYPES, Checker, check_int_or_percent, register, table
from .pod import _absent, _fill, _is_int, dns1123_label_errors, field_types

POD_MANAGEMENT_POLICIES = ("OrderedReady", "Parallel")
RETENTION_POLICIES = ("Retain", "Delete")
STATEFULSET_SPEC_DEFAULTS = {"replicas": 1, "podManagementPolicy": "OrderedReady",
                             "revisionHistoryLimit": 10}
DAEMONSET_ROLLING_DEFAULTS = {"maxUnavailable": 1, "maxSurge": 0}
# ValidateStatefulSetUpdate: what an update may change in a StatefulSet's spec.
STATEFULSET_MUTABLE = ("replicas", "ordinals", "template", "updateStrategy",
                       "persistentVolumeClaimRetentionPolicy", "minReadySeconds")
STATEFULSET_SPEC_FORBIDDEN = ("updates to statefulset spec for fields other than 'replicas', "
                              "'ordinals', 'template', 'updateStrategy', "
                              "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' "
                              "are forbidden")
_META = "apiVersion:string kind:string metadata:ObjectMeta"

register(
    StatefulSet=table("apiVersion kind metadata spec status",
                      types=f"{_META} spec:StatefulSetSpec status:StatefulSetStatus"),
    StatefulSetSpec=table("""replicas selector template volumeClaimTemplates serviceName
                          podManagementPolicy updateStrategy revisionHistoryLimit minReadySeconds
                          persistentVolumeClaimRetentionPolicy ordinals""",
                          {"serviceName": "string"},
                          types="""replicas:integer selector:LabelSelector
                          template:PodTemplateSpec volumeClaimTemplates:[]PersistentVolumeClaim
                          serviceName:string podManagementPolicy:string
                          updateStrategy:StatefulSetUpdateStrategy revisionHistoryLimit:integer
                          minReadySeconds:integer
                          persistentVolumeClaimRetentionPolicy:StatefulSetPersistentVolumeClaimRetentionPolicy
                          ordinals:StatefulSetOrdinals"""),
    StatefulSetUpdateStrategy=table("type rollingUpdate",
                                    types="type:string rollingUpdate:RollingUpdateStatefulSetStrategy"),
    RollingUpdateStatefulSetStrategy=table("partition maxUnavailable",
                                           types="partition:integer maxUnavailable:IntOrString"),
    StatefulSetPersistentVolumeClaimRetentionPolicy=table(
        "whenDeleted whenScaled", {}, {"whenDeleted": RETENTION_POLICIES,
                                       "whenScaled": RETENTION_POLICIES},
        "whenDeleted:string whenScaled:string"),
    StatefulSetOrdinals=table("start", types="start:integer"),
    StatefulSetStatus=table("""observedGeneration replicas readyReplicas currentReplicas
                            updatedReplicas currentRevision updateRevision collisionCount
                            conditions availableReplicas""",
                            {"currentRevision": "string", "updateRevision": "string",
                             "conditions": "list"},
                            types="""observedGeneration:integer replicas:integer
                            readyReplicas:integer currentReplicas:integer updatedReplicas:integer
                            currentRevision:string updateRevision:string collisionCount:integer
                            conditions:[]StatefulSetCondition availableReplicas:integer"""),

    DaemonSet=table("apiVersion kind metadata spec status",
                    types=f"{_META} spec:DaemonSetSpec status:DaemonSetStatus"),
    DaemonSetSpec=table("selector template updateStrategy minReadySeconds revisionHistoryLimit",
                        types="""selector:LabelSelector template:PodTemplateSpec
                        updateStrategy:DaemonSetUpdateStrategy minReadySeconds:integer
                        revisionHistoryLimit:integer"""),
    DaemonSetUpdateStrategy=table("type rollingUpdate",
                                  types="type:string rollingUpdate:RollingUpdateDaemonSet"),
    RollingUpdateDaemonSet=table("maxUnavailable maxSurge",
                                 types="maxUnavailable:IntOrString maxSurge:IntOrString"),
    DaemonSetStatus=table("""currentNumberScheduled numberMisscheduled desiredNumberScheduled
                          numberReady observedGeneration updatedNumberScheduled numberAvailable
                          numberUnavailable collisionCount conditions""", {"conditions": "list"},
                          types="""currentNumberScheduled:integer numberMisscheduled:integer
                          desiredNumberScheduled:integer numberReady:integer
                          observedGeneration:integer updatedNumberScheduled:integer
                          numberAvailable:integer numberUnavailable:integer
                          collisionCount:integer conditions:[]DaemonSetCondition"""),

    ControllerRevision=table("apiVersion kind metadata data revision",
                             types=f"{_META} data:RawExtension revision:integer"),
)

TYPES.update({kind: field_types(text) for kind, text in {
    "StatefulSetCondition": """type:string status:string lastTransitionTime:Time reason:string
        message:string""",
    "DaemonSetCondition": """type:string status:string lastTransitionTime:Time reason:string
        message:string""",
}.items()})


def _frame():
    from . import objects  # objects.py imports this module for its tables
    return objects


# --- defaults -----------------------------------------------------------------------------------

def _labels_from_template(obj: dict, spec: dict) -> None:
    """apps/v1: an object without labels takes its template's."""
    meta = obj.get("metadata")
    template = spec.get("template")
    labels = template.get("metadata", {}).get("labels") if isinstance(template, dict) \
        and isinstance(template.get("metadata"), dict) else None
    if isinstance(meta, dict) and not meta.get("labels") and isinstance(labels, dict) and labels:
        meta["labels"] = dict(labels)


def default_statefulset(obj: Any) -> Any:
    """SetDefaults_StatefulSet: replicas 1, podManagementPolicy OrderedReady, updateStrategy
    RollingUpdate with partition 0, revisionHistoryLimit 10, persistentVolumeClaimRetentionPolicy
    Retain/Retain, labels from the template; the template's pod spec as a Pod's."""
    objects = _frame()

    def fill(sts: dict) -> None:
        spec = objects._sub(sts, "spec")
        if spec is None:
            return
        _labels_from_template(sts, spec)
        _fill(spec, STATEFULSET_SPEC_DEFAULTS)
        strategy = objects._sub(spec, "updateStrategy")
        if strategy is not None:
            _fill(strategy, {"type": "RollingUpdate"})
            if strategy["type"] == "RollingUpdate":
                rolling = objects._sub(strategy, "rollingUpdate")
                if rolling is not None:
                    _fill(rolling, {"partition": 0})
        policy = objects._sub(spec, "persistentVolumeClaimRetentionPolicy")
        if policy is not None:
            _fill(policy, {"whenDeleted": "Retain", "whenScaled": "Retain"})
        objects._default_template(spec)
    return objects._defaulted(obj, fill, namespaced=True)


def default_daemonset(obj: Any) -> Any:
    """SetDefaults_DaemonSet: updateStrategy RollingUpdate with maxUnavailable 1 and maxSurge 0,
    revisionHistoryLimit 10, labels from the template; the template's pod spec as a Pod's."""
    objects = _frame()

    def fill(ds: dict) -> None:
        spec = objects._sub(ds, "spec")
        if spec is None:
            return
        _labels_from_template(ds, spec)
        _fill(spec, {"revisionHistoryLimit": 10})
        strategy = objects._sub(spec, "updateStrategy")
        if strategy is not None:
            _fill(strategy, {"type": "RollingUpdate"})
            if strategy["type"] == "RollingUpdate":
                rolling = objects._sub(strategy, "rollingUpdate")
                if rolling is not None:
                    _fill(rolling, DAEMONSET_ROLLING_DEFAULTS)
        objects._default_template(spec)
    return objects._defaulted(obj, fill, namespaced=True)


def default_controllerrevision(obj: Any) -> Any:
    """ControllerRevisions have no defaults (the namespace aside)."""
    return _frame()._defaulted(obj, lambda revision: None, namespaced=True)


# --- StatefulSet --------------------------------------------------------------------------------

def _spec_of(c: Checker, obj: dict, kind: str) -> dict:
    spec = c.obj(obj.get("spec"), "spec", kind)
    return spec if spec is not None else {}


def _claim_templates(c: Checker, value: Any, path: str) -> list[str]:
    """volumeClaimTemplates: PersistentVolumeClaims, each with a unique name (the claim and the
    pod's volume are named after it). Returns the names."""
    names: list[str] = []
    for t_path, claim in c.each_obj(c.array(value, path) or [], path, "PersistentVolumeClaim"):
        meta = c.obj(claim.get("metadata"), child(t_path, "metadata"), "ObjectMeta")
        name_path = child(t_path, "metadata.name")
        name = c.string((meta or {}).get("name"), name_path)
        if _absent(name):
            c.add(required(name_path))
            continue
        for msg in dns1123_label_errors(name):
            c.invalid(name_path, name, msg)
        if name in names:
            c.add(duplicate(name_path, name))
        names.append(name)
    return names


def _with_claim_volumes(template: Any, claims: list[str]) -> Any:
    """The template as its pods will be: one volume per claim template, replacing a template
    volume of the same name (the claim's source is checked with the claim, so it stands in as
    an emptyDir here)."""
    if not claims or not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        return None
    spec = dict(template["spec"])
    volumes = spec.get("volumes") if isinstance(spec.get("volumes"), list) else []
    spec["volumes"] = [v for v in volumes if not (isinstance(v, dict) and v.get("name") in claims)] \
        + [{"name": name, "emptyDir": {}} for name in dict.fromkeys(claims)]
    return {**template, "spec": spec}


def _statefulset_strategy(c: Checker, value: Any, path: str) -> None:
    """The updateStrategy: RollingUpdate (partition >= 0, maxUnavailable > 0 and <= 100%) or
    OnDelete (without rollingUpdate); an absent type is RollingUpdate, its default."""
    strategy = c.obj(value, path, "StatefulSetUpdateStrategy")
    if strategy is None:
        return
    stype = strategy.get("type") or "RollingUpdate"
    ru_path = child(path, "rollingUpdate")
    if stype == "OnDelete":
        if strategy.get("rollingUpdate") is not None:
            c.invalid(ru_path, strategy["rollingUpdate"], "only allowed for updateStrategy 'RollingUpdate'")
    elif stype == "RollingUpdate":
        rolling = c.obj(strategy.get("rollingUpdate"), ru_path, "RollingUpdateStatefulSetStrategy")
        if rolling is not None:
            c.nonnegative(rolling.get("partition"), child(ru_path, "partition"))
            unavailable = rolling.get("maxUnavailable")
            un_path = child(ru_path, "maxUnavailable")
            number = check_int_or_percent(c, unavailable, un_path)
            if number == 0:
                c.invalid(un_path, unavailable, "cannot be 0")
            _frame().check_at_most_100_percent(c, unavailable, number, un_path)
    else:
        c.invalid(path, strategy, "must be 'RollingUpdate' or 'OnDelete'")


def validate_statefulset(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateStatefulSet (and its status)."""
    objects = _frame()

    def body(c: Checker, sts: dict) -> None:
        spec = _spec_of(c, sts, "StatefulSetSpec")
        claims = _claim_templates(c, spec.get("volumeClaimTemplates"), "spec.volumeClaimTemplates")
        objects._workload_spec(c, spec, "spec", "StatefulSet",
                               pod_template=_with_claim_volumes(spec.get("template"), claims))
        policy = spec.get("podManagementPolicy")
        if policy == "":
            c.add(required("spec.podManagementPolicy"))
        elif policy is not None and policy not in POD_MANAGEMENT_POLICIES:
            c.invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'")
        _statefulset_strategy(c, spec.get("updateStrategy"), "spec.updateStrategy")
        c.obj(spec.get("persistentVolumeClaimRetentionPolicy"),
              "spec.persistentVolumeClaimRetentionPolicy",
              "StatefulSetPersistentVolumeClaimRetentionPolicy")
        ordinals = c.obj(spec.get("ordinals"), "spec.ordinals", "StatefulSetOrdinals")
        if ordinals is not None:
            c.nonnegative(ordinals.get("start"), "spec.ordinals.start")
        c.integer(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
        objects._workload_status(c, sts.get("status"), "StatefulSetStatus",
                                 ("replicas", "readyReplicas", "currentReplicas",
                                  "updatedReplicas", "availableReplicas", "observedGeneration",
                                  "collisionCount"),
                                 ("readyReplicas", "currentReplicas", "updatedReplicas",
                                  "availableReplicas"), "status.readyReplicas")
    # ValidateStatefulSetName: a DNS label, as its pods' names and hostnames are built on it.
    return objects._validate(obj, "StatefulSet", strict, body, name_rule=dns1123_label_errors)


def _spec_dict(obj: Any) -> dict:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec if isinstance(spec, dict) else {}


def validate_statefulset_update(old: Any, new: Any) -> list[FieldError]:
    """ValidateStatefulSetUpdate: only replicas, ordinals, template, updateStrategy,
    persistentVolumeClaimRetentionPolicy and minReadySeconds may change."""
    def fixed(spec: dict) -> dict:
        return {k: v for k, v in spec.items() if k not in STATEFULSET_MUTABLE}
    if fixed(_spec_dict(old)) != fixed(_spec_dict(new)):
        return [forbidden("spec", STATEFULSET_SPEC_FORBIDDEN)]
    return []


def _collision_count_update(old: Any, new: Any) -> list[FieldError]:
    """status.collisionCount may not go down (ValidateStatefulSetStatusUpdate and the DaemonSet's)."""
    def count(obj: Any) -> Any:
        status = obj.get("status") if isinstance(obj, dict) else None
        return status.get("collisionCount") if isinstance(status, dict) else None
    before, after = count(old), count(new)
    if _is_int(before) and (after is None or (_is_int(after) and after < before)):
        return [invalid("status.collisionCount", after or 0, "cannot be decremented")]
    return []


# --- DaemonSet ----------------------------------------------------------------------------------

def _daemonset_strategy(c: Checker, value: Any, path: str) -> None:
    """ValidateDaemonSetUpdateStrategy: RollingUpdate (exactly one of maxUnavailable and
    maxSurge non-zero, each <= 100%) or OnDelete. An absent type is RollingUpdate and an absent
    rollingUpdate or field is its default."""
    strategy = c.obj(value, path, "DaemonSetUpdateStrategy")
    if strategy is None:
        return
    stype = strategy.get("type") or "RollingUpdate"
    if stype == "OnDelete":
        return
    if stype != "RollingUpdate":
        c.add(not_supported(path, strategy, ("RollingUpdate", "OnDelete")))
        return
    ru_path = child(path, "rollingUpdate")
    rolling = c.obj(strategy.get("rollingUpdate"), ru_path, "RollingUpdateDaemonSet")
    if rolling is None:
        return
    numbers = {}
    for field in ("maxUnavailable", "maxSurge"):
        value = rolling.get(field, DAEMONSET_ROLLING_DEFAULTS[field])
        numbers[field] = check_int_or_percent(c, value, child(ru_path, field))
        _frame().check_at_most_100_percent(c, value, numbers[field], child(ru_path, field))
    has_unavailable, has_surge = bool(numbers["maxUnavailable"]), bool(numbers["maxSurge"])
    if has_unavailable and has_surge:
        c.invalid(child(ru_path, "maxSurge"), rolling.get("maxSurge"),
                  "may not be set when maxUnavailable is non-zero")
    elif numbers["maxUnavailable"] == 0 and numbers["maxSurge"] == 0:
        c.add(required(child(ru_path, "maxUnavailable"), "cannot be 0 when maxSurge is 0"))


def validate_daemonset(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateDaemonSet (and its status)."""
    objects = _frame()

    def body(c: Checker, ds: dict) -> None:
        spec = _spec_of(c, ds, "DaemonSetSpec")
        objects._workload_spec(c, spec, "spec", "DaemonSet")
        _daemonset_strategy(c, spec.get("updateStrategy"), "spec.updateStrategy")
        c.nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
        objects._workload_status(c, ds.get("status"), "DaemonSetStatus",
                                 ("currentNumberScheduled", "numberMisscheduled",
                                  "desiredNumberScheduled", "numberReady", "observedGeneration",
                                  "updatedNumberScheduled", "numberAvailable", "numberUnavailable",
                                  "collisionCount"), ())
    return objects._validate(obj, "DaemonSet", strict, body)


# --- ControllerRevision -------------------------------------------------------------------------

def validate_controllerrevision(obj: Any, *, strict: bool = True) -> list[FieldError]:
    """ValidateControllerRevision: data is mandatory, revision >= 0."""
    def body(c: Checker, revision: dict) -> None:
        if revision.get("data") is None:
            c.add(required("data", "data is mandatory"))
        c.nonnegative(revision.get("revision"), "revision")
    return _frame()._validate(obj, "ControllerRevision", strict, body)


def validate_controllerrevision_update(old: Any, new: Any) -> list[FieldError]:
    """ValidateControllerRevisionUpdate: data is immutable."""
    before = old.get("data") if isinstance(old, dict) else None
    after = new.get("data") if isinstance(new, dict) else None
    return [invalid("data", after, "field is immutable")] if before != after else []


DEFAULTERS: dict[str, Callable[[Any], Any]] = {
    "StatefulSet": default_statefulset, "DaemonSet": default_daemonset,
    "ControllerRevision": default_controllerrevision}
VALIDATORS: dict[str, Callable[..., list[FieldError]]] = {
    "StatefulSet": validate_statefulset, "DaemonSet": validate_daemonset,
    "ControllerRevision": validate_controllerrevision}
UPDATE_VALIDATORS: dict[str, Callable[[Any, Any], list[FieldError]]] = {
    "StatefulSet": lambda old, new: validate_statefulset_update(old, new)
    + _collision_count_update(old, new),
    "DaemonSet": _collision_count_update,
    "ControllerRevision": validate_controllerrevision_update}
