"""Defaulting and validation of PersistentVolume and PersistentVolumeClaim (v1) and StorageClass
(storage.k8s.io/v1), with objects.py's contract (DEFAULTERS, VALIDATORS, UPDATE_VALIDATORS by kind),
as kube-apiserver has them (pkg/apis/core/v1 defaults, pkg/apis/core/validation
ValidatePersistentVolume[Claim][Update], pkg/apis/storage/validation ValidateStorageClass[Update]):

* PersistentVolume: accessModes (at least one, ReadWriteOncePod alone), capacity (`storage` only,
  greater than zero), persistentVolumeReclaimPolicy Retain (default) | Delete | Recycle,
  volumeMode Filesystem (default) | Block, exactly one volume source, nodeAffinity (a required
  node selector; a `local` volume needs one), storageClassName a DNS subdomain. kubemu mounts
  `hostPath` and `local` volumes only: another source is Forbidden with that said. On update the
  source, volumeMode and (once set) nodeAffinity are immutable.
* PersistentVolumeClaim: accessModes (at least one), resources.requests.storage (greater than
  zero), selector, storageClassName, volumeMode Filesystem (default) | Block. On update the spec
  is immutable but for volumeName while it is "", storageClassName from unset (the retroactive
  default class) and, for a Bound claim, resources.requests (expansion: never below
  status.capacity).
* StorageClass: provisioner required (a qualified name), parameters (at most 512, keys
  non-empty), reclaimPolicy Delete (default) | Retain, volumeBindingMode Immediate (default) |
  WaitForFirstConsumer; parameters, provisioner, reclaimPolicy and volumeBindingMode immutable.

Also the default StorageClass rule (`default_class`), which the apiserver's DefaultStorageClass
admission and the PV controller share.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Iterable

from . import quantity
from .fielderrors import FieldError, child, forbidden, invalid, key, not_supported, required, too_long
from .meta import Checker, check_label_selector, register, table
from .pod import (BOOL, field_types, LIST, OBJ, STR, STRS, _absent, _fill, _host_path, _name_rule, _no_backsteps,
                  dns1123_subdomain_errors, qualified_name_errors)
from .times import parse_micro_time

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")  # sorted, as listed
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
CLASS_RECLAIM_POLICIES = ("Delete", "Retain")
VOLUME_MODES = ("Block", "Filesystem")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
IMMEDIATE, WAIT_FOR_FIRST_CONSUMER = BINDING_MODES
NODE_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
OBJECT_NAME_FIELD = "metadata.name"
STORAGE = "storage"
# Every persistent volume source, in the order ValidatePersistentVolumeSpec looks at them;
# kubemu's kubelet mounts MOUNTABLE ones only.
PV_SOURCES = ("hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "flocker", "nfs",
              "rbd", "quobyte", "cephfs", "iscsi", "cinder", "fc", "flexVolume", "azureFile",
              "vsphereVolume", "photonPersistentDisk", "portworxVolume", "azureDisk", "scaleIO",
              "local", "storageos", "csi")
MOUNTABLE = ("hostPath", "local")
_SOURCE_PATHS = {"cephfs": "cephFS"}   # where a second source is reported (sic, kube-apiserver's)
MAX_PARAMETERS = 512
MAX_PARAMETERS_SIZE = 256 * 1024
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BETA_DEFAULT_CLASS_ANNOTATION = "storageclass.beta.kubernetes.io/is-default-class"
BETA_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
# StorageObjectInUseProtection: held until no pod uses the claim / the volume is not Bound
PVC_PROTECTION_FINALIZER = "kubernetes.io/pvc-protection"
PV_PROTECTION_FINALIZER = "kubernetes.io/pv-protection"
_META = {"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta"}

register(
    PersistentVolume=table("apiVersion kind metadata spec status",
                           types={**_META, "spec": "PersistentVolumeSpec",
                                  "status": "PersistentVolumeStatus"}),
    PersistentVolumeSpec=table(
        "accessModes capacity claimRef mountOptions nodeAffinity persistentVolumeReclaimPolicy "
        "storageClassName volumeMode volumeAttributesClassName " + " ".join(PV_SOURCES),
        {"accessModes": STRS, "capacity": OBJ, "claimRef": OBJ, "mountOptions": STRS,
         "nodeAffinity": OBJ, "storageClassName": STR, "volumeAttributesClassName": STR,
         **{s: OBJ for s in PV_SOURCES}},
        {"persistentVolumeReclaimPolicy": RECLAIM_POLICIES, "volumeMode": VOLUME_MODES},
        {**field_types("""accessModes:[]string capacity:map[string]Quantity claimRef:ObjectReference
        mountOptions:[]string nodeAffinity:VolumeNodeAffinity persistentVolumeReclaimPolicy:string
        storageClassName:string volumeMode:string volumeAttributesClassName:string
        hostPath:HostPathVolumeSource local:LocalVolumeSource"""),
         # the sources kubemu refuses are described as open objects
         **{s: "" for s in PV_SOURCES if s not in ("hostPath", "local")}}),
    PersistentVolumeStatus=table("phase message reason lastPhaseTransitionTime",
                                 {"phase": STR, "message": STR, "reason": STR},
                                 types="phase:string message:string reason:string "
                                       "lastPhaseTransitionTime:Time"),
    LocalVolumeSource=table("path fsType", {"path": STR, "fsType": STR},
                            types="path:string fsType:string"),
    VolumeNodeAffinity=table("required", {"required": OBJ}, types="required:NodeSelector"),
    NodeSelector=table("nodeSelectorTerms", {"nodeSelectorTerms": LIST},
                       types="nodeSelectorTerms:[]NodeSelectorTerm"),
    NodeSelectorTerm=table("matchExpressions matchFields",
                           {"matchExpressions": LIST, "matchFields": LIST},
                           types="matchExpressions:[]NodeSelectorRequirement "
                                 "matchFields:[]NodeSelectorRequirement"),
    NodeSelectorRequirement=table("key operator values", {"key": STR, "operator": STR, "values": STRS},
                                  types="key:string operator:string values:[]string"),

    PersistentVolumeClaim=table("apiVersion kind metadata spec status",
                                types={**_META, "spec": "PersistentVolumeClaimSpec",
                                       "status": "PersistentVolumeClaimStatus"}),
    PersistentVolumeClaimSpec=table(
        "accessModes selector resources volumeName storageClassName volumeMode dataSource "
        "dataSourceRef volumeAttributesClassName",
        {"accessModes": STRS, "resources": OBJ, "volumeName": STR, "storageClassName": STR,
         "dataSource": OBJ, "dataSourceRef": OBJ, "volumeAttributesClassName": STR},
        {"volumeMode": VOLUME_MODES},
        """accessModes:[]string selector:LabelSelector resources:VolumeResourceRequirements
        volumeName:string storageClassName:string volumeMode:string
        dataSource:TypedLocalObjectReference dataSourceRef:TypedObjectReference
        volumeAttributesClassName:string"""),
    VolumeResourceRequirements=table("limits requests", {"limits": OBJ, "requests": OBJ},
                                     types="limits:map[string]Quantity requests:map[string]Quantity"),
    PersistentVolumeClaimStatus=table(
        "phase accessModes capacity conditions allocatedResources allocatedResourceStatuses "
        "currentVolumeAttributesClassName modifyVolumeStatus",
        {"phase": STR, "accessModes": STRS, "capacity": OBJ, "conditions": LIST,
         "allocatedResources": OBJ, "allocatedResourceStatuses": OBJ,
         "currentVolumeAttributesClassName": STR, "modifyVolumeStatus": OBJ},
        types="""phase:string accessModes:[]string capacity:map[string]Quantity
        conditions:[]PersistentVolumeClaimCondition allocatedResources:map[string]Quantity
        allocatedResourceStatuses:map[string]string currentVolumeAttributesClassName:string
        modifyVolumeStatus:ModifyVolumeStatus"""),

    StorageClass=table("apiVersion kind metadata provisioner parameters reclaimPolicy mountOptions "
                       "allowVolumeExpansion volumeBindingMode allowedTopologies",
                       {"provisioner": STR, "parameters": OBJ, "mountOptions": STRS,
                        "allowVolumeExpansion": BOOL, "allowedTopologies": LIST},
                       {"reclaimPolicy": CLASS_RECLAIM_POLICIES, "volumeBindingMode": BINDING_MODES},
                       {**_META, "provisioner": "string", "parameters": "map[string]string",
                        "reclaimPolicy": "string", "mountOptions": "[]string",
                        "allowVolumeExpansion": "boolean", "volumeBindingMode": "string",
                        "allowedTopologies": "[]TopologySelectorTerm"}),
)


# --- defaults -----------------------------------------------------------------------------------

def _defaulted(obj: Any, fill: Callable[[dict], None], *, namespaced: bool) -> Any:
    from .objects import _defaulted as frame  # objects.py imports this module for its tables
    return frame(obj, fill, namespaced=namespaced)


def _spec_and_status(obj: dict) -> tuple[dict | None, dict | None]:
    for field in ("spec", "status"):
        if obj.get(field) is None:
            obj[field] = {}
    spec, status = obj["spec"], obj["status"]
    return (spec if isinstance(spec, dict) else None, status if isinstance(status, dict) else None)


def default_persistentvolume(obj: Any) -> Any:
    """SetDefaults_PersistentVolume: status.phase Pending, persistentVolumeReclaimPolicy Retain,
    volumeMode Filesystem."""
    def fill(pv: dict) -> None:
        spec, status = _spec_and_status(pv)
        if spec is not None:
            _fill(spec, {"persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Filesystem"})
        if status is not None:
            _fill(status, {"phase": "Pending"})
    return _defaulted(obj, fill, namespaced=False)


def default_persistentvolumeclaim(obj: Any) -> Any:
    """SetDefaults_PersistentVolumeClaim: status.phase Pending, volumeMode Filesystem. (No
    storageClassName: that is the DefaultStorageClass admission's, on create only.)"""
    def fill(pvc: dict) -> None:
        spec, status = _spec_and_status(pvc)
        if spec is not None:
            _fill(spec, {"volumeMode": "Filesystem"})
        if status is not None:
            _fill(status, {"phase": "Pending"})
    return _defaulted(obj, fill, namespaced=True)


def default_storageclass(obj: Any) -> Any:
    """SetDefaults_StorageClass: reclaimPolicy Delete, volumeBindingMode Immediate."""
    def fill(sc: dict) -> None:
        _fill(sc, {"reclaimPolicy": "Delete", "volumeBindingMode": IMMEDIATE})
    return _defaulted(obj, fill, namespaced=False)


# --- shared checks ------------------------------------------------------------------------------

def _validate(obj: Any, kind: str, strict: bool, body: Callable[[Checker, dict], None]):
    from .objects import _validate as frame  # see _defaulted
    return frame(obj, kind, strict, body)


def _class_name(c: Checker, value: Any, path: str) -> None:
    """ValidateClassName (a DNS subdomain), when set."""
    if isinstance(value, str) and value:
        _name_rule(c, value, path, dns1123_subdomain_errors)


def _access_modes(c: Checker, spec: dict, path: str, missing: str) -> None:
    modes = spec.get("accessModes") if isinstance(spec.get("accessModes"), list) else []
    if not modes:
        c.add(required(path, missing))
    strings = [m for m in modes if isinstance(m, str)]
    for mode in strings:
        if mode not in ACCESS_MODES:
            c.add(not_supported(path, mode, ACCESS_MODES))
    if "ReadWriteOncePod" in strings and any(m in ACCESS_MODES and m != "ReadWriteOncePod"
                                             for m in strings):
        c.add(forbidden(path, "may not use ReadWriteOncePod with other access modes"))


def _quantity(c: Checker, value: Any, path: str):
    """The exact value of a quantity, or None (reported) when it is not one."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        c.invalid(path, value, "must be a string or a number")
        return None
    try:
        return quantity.parse_quantity(value)
    except (ValueError, OverflowError) as e:
        c.invalid(path, value, str(e))
        return None


def _positive(c: Checker, value: Any, path: str, *, basic: bool = False) -> None:
    """ValidatePositiveQuantityValue (after validateBasicResource for a PV's capacity)."""
    parsed = _quantity(c, value, path)
    if parsed is None:
        return
    if basic and parsed < 0:
        c.invalid(path, int(parsed), "must be a valid resource quantity")
    if parsed <= 0:
        c.invalid(path, quantity.canonical(value), "must be greater than zero")


def storage_request(pvc: dict) -> Any:
    """A claim's spec.resources.requests.storage (None when absent)."""
    spec = pvc.get("spec") if isinstance(pvc.get("spec"), dict) else {}
    resources = spec.get("resources") if isinstance(spec.get("resources"), dict) else {}
    requests = resources.get("requests") if isinstance(resources.get("requests"), dict) else {}
    return requests.get(STORAGE)


def storage_capacity(pv: dict) -> Any:
    """A volume's spec.capacity.storage (None when absent)."""
    spec = pv.get("spec") if isinstance(pv.get("spec"), dict) else {}
    capacity = spec.get("capacity") if isinstance(spec.get("capacity"), dict) else {}
    return capacity.get(STORAGE)


def check_node_selector(c: Checker, value: Any, path: str) -> None:
    """ValidateNodeSelector: at least one term; each requirement's key, operator and values."""
    selector = c.obj(value, path, "NodeSelector")
    if selector is None:
        return
    terms_path = child(path, "nodeSelectorTerms")
    terms = selector.get("nodeSelectorTerms") if isinstance(selector.get("nodeSelectorTerms"), list) else []
    if not terms:
        c.add(required(terms_path, "must have at least one node selector term"))
        return
    for t_path, term in c.each_obj(terms, terms_path, "NodeSelectorTerm"):
        exprs = term.get("matchExpressions") if isinstance(term.get("matchExpressions"), list) else []
        for e_path, expr in c.each_obj(exprs, child(t_path, "matchExpressions"), "NodeSelectorRequirement"):
            _node_selector_requirement(c, expr, e_path)
        fields = term.get("matchFields") if isinstance(term.get("matchFields"), list) else []
        for f_path, expr in c.each_obj(fields, child(t_path, "matchFields"), "NodeSelectorRequirement"):
            _node_field_requirement(c, expr, f_path)


def _node_selector_requirement(c: Checker, expr: dict, path: str) -> None:
    op, values = expr.get("operator"), expr.get("values") or []
    values_path = child(path, "values")
    if op in ("In", "NotIn"):
        if not values:
            c.add(required(values_path, "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            c.add(forbidden(values_path, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            c.add(required(values_path, "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        c.invalid(child(path, "operator"), op, "not a valid selector operator")
    k = expr.get("key")
    if isinstance(k, str):
        _name_rule(c, k, child(path, "key"), qualified_name_errors)


def _node_field_requirement(c: Checker, expr: dict, path: str) -> None:
    if expr.get("key") != OBJECT_NAME_FIELD:
        c.add(not_supported(child(path, "key"), expr.get("key"), (OBJECT_NAME_FIELD,)))
    op = expr.get("operator")
    if op in ("In", "NotIn"):
        if len(expr.get("values") or []) != 1:
            c.add(required(child(path, "values"),
                           "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
    else:
        c.invalid(child(path, "operator"), op, "not a valid selector operator")


# --- PersistentVolume ---------------------------------------------------------------------------

def validate_persistentvolume(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, pv: dict) -> None:
        spec = c.obj(pv.get("spec"), "spec", "PersistentVolumeSpec")
        if spec is None:
            spec = {}
        _access_modes(c, spec, "spec.accessModes", "")
        _capacity(c, spec.get("capacity"))
        affinity = spec.get("nodeAffinity")
        if affinity is not None:
            a = c.obj(affinity, "spec.nodeAffinity", "VolumeNodeAffinity")
            if a is not None and a.get("required") is None:
                c.add(required("spec.nodeAffinity.required", "must specify required node constraints"))
            elif a is not None:
                check_node_selector(c, a["required"], "spec.nodeAffinity.required")
        _pv_source(c, spec, affinity is not None)
        _class_name(c, spec.get("storageClassName"), "spec.storageClassName")
        c.obj(spec.get("claimRef"), "spec.claimRef")
        c.obj(pv.get("status"), "status", "PersistentVolumeStatus")
    return _validate(obj, "PersistentVolume", strict, body)


def _capacity(c: Checker, value: Any) -> None:
    capacity = value if isinstance(value, dict) else {}
    if not capacity:
        c.add(required("spec.capacity"))
    if STORAGE not in capacity or len(capacity) > 1:
        c.add(not_supported("spec.capacity", capacity, (STORAGE,)))
    for name, q in capacity.items():
        _positive(c, q, key("spec.capacity", name), basic=True)


def _pv_source(c: Checker, spec: dict, has_affinity: bool) -> None:
    present = [s for s in PV_SOURCES if spec.get(s) is not None]
    if not present:
        c.add(required("spec", "must specify a volume type"))
        return
    for extra in present[1:]:
        c.add(forbidden(child("spec", _SOURCE_PATHS.get(extra, extra)),
                        "may not specify more than 1 volume type"))
    source = present[0]
    path = child("spec", source)
    if source not in MOUNTABLE:
        c.add(forbidden(path, "kubemu mounts hostPath and local persistent volumes only"))
    elif source == "hostPath":
        _host_path(c, spec[source], path)
        host = spec[source].get("path") if isinstance(spec[source], dict) else None
        if isinstance(host, str) and host.rstrip("/") == "" and host \
                and spec.get("persistentVolumeReclaimPolicy") == "Recycle":
            c.add(forbidden("spec.persistentVolumeReclaimPolicy",
                            "may not be 'recycle' for a hostPath mount of '/'"))
    else:
        local = c.obj(spec[source], path, "LocalVolumeSource")
        if local is not None:
            if _absent(local.get("path")):
                c.add(required(child(path, "path")))
            elif isinstance(local.get("path"), str):
                _no_backsteps(c, local["path"], child(path, "path"))
        if not has_affinity:
            c.add(required("spec.nodeAffinity", "Local volume requires node affinity"))


def validate_persistentvolume_update(old: Any, new: Any) -> list[FieldError]:
    """ValidatePersistentVolumeUpdate: the volume source, volumeMode and a set nodeAffinity stay."""
    old_spec, new_spec = _spec(old), _spec(new)
    errors = []
    if {s: old_spec.get(s) for s in PV_SOURCES} != {s: new_spec.get(s) for s in PV_SOURCES}:
        errors.append(forbidden("spec.persistentvolumesource",
                                "spec.persistentvolumesource is immutable after creation"))
    if old_spec.get("volumeMode") != new_spec.get("volumeMode"):
        errors.append(invalid("volumeMode", new_spec.get("volumeMode"), "field is immutable"))
    if old_spec.get("nodeAffinity") is not None and old_spec.get("nodeAffinity") != new_spec.get("nodeAffinity"):
        errors.append(invalid("nodeAffinity", new_spec.get("nodeAffinity"),
                              "field is immutable, except for updating from beta label to GA"))
    return errors


def _spec(obj: Any) -> dict:
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec if isinstance(spec, dict) else {}


# --- PersistentVolumeClaim ----------------------------------------------------------------------

def validate_persistentvolumeclaim(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, pvc: dict) -> None:
        spec = c.obj(pvc.get("spec"), "spec", "PersistentVolumeClaimSpec")
        if spec is None:
            spec = {}
        _access_modes(c, spec, "spec.accessModes", "at least 1 access mode is required")
        if spec.get("selector") is not None:
            check_label_selector(c, spec["selector"], "spec.selector")
        resources = c.obj(spec.get("resources"), "spec.resources", "VolumeResourceRequirements") or {}
        c.obj(resources.get("limits"), "spec.resources.limits")
        requests = c.obj(resources.get("requests"), "spec.resources.requests") or {}
        storage_path = key("spec.resources", STORAGE)
        if requests.get(STORAGE) is None:
            c.add(required(storage_path))
        else:
            _positive(c, requests[STORAGE], storage_path)
        _class_name(c, spec.get("storageClassName"), "spec.storageClassName")
        c.obj(pvc.get("status"), "status", "PersistentVolumeClaimStatus")
    return _validate(obj, "PersistentVolumeClaim", strict, body)


def validate_persistentvolumeclaim_update(old: Any, new: Any) -> list[FieldError]:
    """ValidatePersistentVolumeClaimUpdate. The spec is compared with what may change put back:
    volumeName while the old one is unset (the PV controller binds once), storageClassName
    from unset (no beta annotation, or one naming the same class), and for a Bound claim
    resources.requests.storage (expansion), which may not go below the old request unless
    still above status.capacity (RecoverVolumeExpansionFailure)."""
    old_spec, new_spec = copy.deepcopy(_spec(old)), copy.deepcopy(_spec(new))
    errors = []
    if not old_spec.get("volumeName"):
        old_spec["volumeName"] = new_spec.get("volumeName")
    old_beta = _annotations(old).get(BETA_CLASS_ANNOTATION)
    if old_spec.get("storageClassName") is None and new_spec.get("storageClassName") is not None \
            and (old_beta is None or old_beta == new_spec["storageClassName"]):
        old_spec["storageClassName"] = new_spec["storageClassName"]
    if _annotations(old).get(BETA_CLASS_ANNOTATION) != _annotations(new).get(BETA_CLASS_ANNOTATION):
        errors.append(invalid(f"metadata.annotations[{BETA_CLASS_ANNOTATION}]",
                              _annotations(new).get(BETA_CLASS_ANNOTATION), "field is immutable"))
    status = new.get("status") if isinstance(new, dict) and isinstance(new.get("status"), dict) else {}
    if status.get("phase") == "Bound":
        _set_request(new_spec, storage_request({"spec": old_spec}))
    for spec in (old_spec, new_spec):
        spec.pop("volumeAttributesClassName", None)
    if {k: v for k, v in old_spec.items() if v is not None} != \
            {k: v for k, v in new_spec.items() if v is not None}:
        errors.append(forbidden("spec", "spec is immutable after creation except resources.requests "
                                        "and volumeAttributesClassName for bound claims"))
    old_size, new_size = _size(storage_request(old)), _size(storage_request(new))
    old_status = old.get("status") if isinstance(old.get("status"), dict) else {}
    capacity = old_status.get("capacity") if isinstance(old_status.get("capacity"), dict) else {}
    if old_size is not None and new_size is not None and new_size < old_size:
        status_size = _size(capacity.get(STORAGE))
        if new_size <= (status_size if status_size is not None else 0):
            errors.append(forbidden("spec.resources.requests.storage",
                                    "field can not be less than status.capacity"))
    if _spec(old).get("volumeMode") != _spec(new).get("volumeMode"):
        errors.append(invalid("volumeMode", _spec(new).get("volumeMode"), "field is immutable"))
    return errors


def _annotations(obj: Any) -> dict:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations if isinstance(annotations, dict) else {}


def _set_request(spec: dict, value: Any) -> None:
    resources = spec.get("resources")
    if isinstance(resources, dict) and isinstance(resources.get("requests"), dict):
        resources["requests"][STORAGE] = value


def _size(value: Any):
    try:
        return quantity.parse_quantity(value) if value is not None and not isinstance(value, bool) else None
    except (ValueError, OverflowError, TypeError):
        return None


# --- StorageClass -------------------------------------------------------------------------------

def validate_storageclass(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, sc: dict) -> None:
        provisioner = sc.get("provisioner")
        if _absent(provisioner):
            c.add(required("provisioner"))
        elif isinstance(provisioner, str):
            for msg in qualified_name_errors(provisioner.lower()):
                c.invalid("provisioner", provisioner, msg)
        params = sc.get("parameters") if isinstance(sc.get("parameters"), dict) else {}
        if len(params) > MAX_PARAMETERS:
            c.add(too_long("parameters", MAX_PARAMETERS))
        else:
            size = 0
            for k, v in params.items():
                if k == "":
                    c.invalid("parameters", k, "field can not be empty.")
                if not isinstance(v, str):
                    c.invalid(key("parameters", k), v, "must be a string")
                size += len(str(k)) + len(str(v))
            if size > MAX_PARAMETERS_SIZE:
                c.add(too_long("parameters", MAX_PARAMETERS_SIZE))
        if sc.get("volumeBindingMode") is None:
            c.add(required("volumeBindingMode"))
    return _validate(obj, "StorageClass", strict, body)


def validate_storageclass_update(old: Any, new: Any) -> list[FieldError]:
    """ValidateStorageClassUpdate."""
    old, new = (o if isinstance(o, dict) else {} for o in (old, new))
    errors = []
    if (old.get("parameters") or {}) != (new.get("parameters") or {}):
        errors.append(forbidden("parameters", "updates to parameters are forbidden."))
    if old.get("provisioner") != new.get("provisioner"):
        errors.append(forbidden("provisioner", "updates to provisioner are forbidden."))
    if old.get("reclaimPolicy") != new.get("reclaimPolicy"):
        errors.append(forbidden("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
    if old.get("volumeBindingMode") != new.get("volumeBindingMode"):
        errors.append(invalid("volumeBindingMode", new.get("volumeBindingMode"), "field is immutable"))
    return errors


# --- the default StorageClass -------------------------------------------------------------------

def is_default_class(sc: dict) -> bool:
    """storageutil.IsDefaultAnnotation: the GA or beta annotation says "true"."""
    annotations = _annotations(sc)
    return "true" in (annotations.get(DEFAULT_CLASS_ANNOTATION), annotations.get(BETA_DEFAULT_CLASS_ANNOTATION))


def default_class(classes: Iterable[dict]) -> dict | None:
    """storageutil.GetDefaultClass: of the classes marked default, the newest (several: since
    1.28 the newest wins, the name breaking a tie), or None."""
    def created(sc: dict) -> float:
        stamp = (sc.get("metadata") or {}).get("creationTimestamp")
        try:
            return parse_micro_time(stamp) if isinstance(stamp, str) else 0.0
        except ValueError:
            return 0.0

    marked = [sc for sc in classes if isinstance(sc, dict) and is_default_class(sc)]
    if not marked:
        return None
    return min(marked, key=lambda sc: (-created(sc), (sc.get("metadata") or {}).get("name") or ""))


def storage_class_of(obj: Any) -> str:
    """GetPersistentVolumeClaimClass / GetPersistentVolumeClass (one rule for both): the beta
    annotation, else spec.storageClassName, else "" (no class)."""
    beta = _annotations(obj).get(BETA_CLASS_ANNOTATION)
    if beta is not None:
        return beta
    return _spec(obj).get("storageClassName") or ""


def binding_mode(sc: dict) -> str:
    mode = sc.get("volumeBindingMode")
    return mode if isinstance(mode, str) and mode else IMMEDIATE


DEFAULTERS = {"PersistentVolume": default_persistentvolume,
              "PersistentVolumeClaim": default_persistentvolumeclaim,
              "StorageClass": default_storageclass}
VALIDATORS = {"PersistentVolume": validate_persistentvolume,
              "PersistentVolumeClaim": validate_persistentvolumeclaim,
              "StorageClass": validate_storageclass}
UPDATE_VALIDATORS = {"PersistentVolume": validate_persistentvolume_update,
                     "PersistentVolumeClaim": validate_persistentvolumeclaim_update,
                     "StorageClass": validate_storageclass_update}

__all__ = ["default_persistentvolume", "default_persistentvolumeclaim", "default_storageclass",
           "validate_persistentvolume", "validate_persistentvolumeclaim", "validate_storageclass",
           "validate_persistentvolume_update", "validate_persistentvolumeclaim_update",
           "validate_storageclass_update", "check_node_selector", "is_default_class",
           "default_class", "storage_class_of", "binding_mode", "storage_request", "storage_capacity", "DEFAULTERS",
           "VALIDATORS", "UPDATE_VALIDATORS", "DEFAULT_CLASS_ANNOTATION", "IMMEDIATE",
           "WAIT_FOR_FIRST_CONSUMER", "ACCESS_MODES", "MOUNTABLE", "BETA_CLASS_ANNOTATION",
           "PVC_PROTECTION_FINALIZER", "PV_PROTECTION_FINALIZER"]
