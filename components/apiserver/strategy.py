"""The apiserver's per-kind rules (Kubernetes' REST strategies), as pure functions.

What create, update, patch, delete, bind, scale and evict do to an object, separated from the
store: each function takes the request's object, the object as read (and the revision it was
read at), the time `now` (a UTC datetime) and, for names and uids, a `random.Random`, and
returns the object to store or a typed outcome; it raises the wire errors kube-apiserver would
answer with. `handlers.py` reads, calls these, and writes conditionally on the revision read.

    prepare_create(r, obj, namespace, now=, rand=, field_validation=)  -> the object to store
        rest.BeforeCreate (server-set metadata, generateName, uid, creationTimestamp), the kind's
        PrepareForCreate (a Pod's status, a Namespace's finalizer and phase, no status for a
        Deployment/ReplicaSet, a Service's empty load balancer, a Job's generated selector),
        defaulting, generation 1, Validate.
        (A Service's clusterIP and nodePorts are allocated by the handlers: servicestrategy.)
    admit_create(r, obj, namespace_obj)       the NamespaceLifecycle admission
    prepare_update(r, old, rev, new, status=, field_validation=) -> Write | Remove | Unchanged
        the status subresource's spec/status separation, server fields kept (a Service's
        allocated clusterIP and nodePorts too), generation bumped when spec changes, ValidateUpdate; a deleting object whose last finalizer went is removed.
    patched(r, old, rev, patch, patch_type)   -> (the patched object, whether it names a stale RV)
    prepare_delete(r, old, grace, policy, now=) -> Write | Remove | Unchanged
        grace periods (a Pod's own, 0 for unbound or finished pods), propagation finalizers,
        deletion held by finalizers (and a Namespace's spec.finalizers, with phase Terminating).
    prepare_bind(r, old, node, now=)          pods/binding
    prepare_scale(old, replicas)              the scale subresource's new object
    eviction_delete_options(name, eviction)   pods/eviction: the delete it stands for
    list_revision(rv, match, limit, continuing) a list's resourceVersion/resourceVersionMatch

Field validation (kube-apiserver's fieldValidation, for unknown fields):
    None      the wire's own: unknown fields are Invalid causes beside every other error (422)
    "Strict"  400 BadRequest `Pod in version "v1" cannot be handled as a Pod: strict decoding
              error: unknown field "spec.foo", unknown field "spec.bar"` (found while decoding,
              so before the other checks)
    "Warn"    the unknown fields are dropped, each `unknown field "spec.foo"` is handed to `warn`
              (the handlers pass warnings.add) and the rest is validated
    "Ignore"  dropped silently
"""
from __future__ import annotations

import copy
import datetime
import random
import uuid
from typing import Any, Callable, NamedTuple

from kubemu.api.fielderrors import UNKNOWN_FIELD, FieldError, ValidationError, forbidden, go_quote, not_supported
from kubemu.api.objects import SCALABLE_KINDS, apply_scale, default_object, validate_object, \
    validate_object_update, validate_scale
from kubemu.api import batch, certificates
from kubemu.api.identity import UserInfo
from kubemu.api.patch import PatchError, apply_patch, schema_for
from kubemu.api.resources import Resource
from kubemu.wire import BadRequest, Conflict, Forbidden, Invalid, NotFound, WireError

from . import servicestrategy

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' utilrand alphabet
GENERATED_SUFFIX = 5
NAMESPACE_FINALIZERS = ("kubernetes",)
DEFAULT_GRACE_SECONDS = 30
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")
PROPAGATION_FINALIZERS = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}
FIELD_VALIDATIONS = ("Ignore", "Strict", "Warn")
# rest.BeforeCreate: the server's fields are the server's
_CLEARED_ON_CREATE = ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "selfLink", "generation", "creationTimestamp")
# fields an update cannot change (uid and creationTimestamp are validated as immutable instead)
_KEPT_ON_UPDATE = ("deletionTimestamp", "deletionGracePeriodSeconds", "generation")


class Timeout(WireError):
    """HTTP 504 (a resourceVersion the store has not reached)."""
    code = "Timeout"


class MethodNotAllowed(WireError):
    code = "MethodNotAllowed"


# --- outcomes ---------------------------------------------------------------------------------

class Write(NamedTuple):
    """Store `obj` (if the key is still at the revision read); answer it with its new version."""
    obj: dict


class Remove(NamedTuple):
    """Delete the key (if still at the revision read); answer `obj`."""
    obj: dict


class Unchanged(NamedTuple):
    """Nothing to write; answer `obj`."""
    obj: dict


Outcome = Write | Remove | Unchanged
Warn = Callable[[str], None] | None  # where a fieldValidation=Warn warning goes


# --- errors, in Kubernetes' words -------------------------------------------------------------

def qualified(r: Resource) -> str:
    """schema.GroupResource.String(): pods, deployments.apps"""
    return f"{r.plural}.{r.group}" if r.group else r.plural


def not_found(r: Resource, name: str) -> NotFound:
    return NotFound(f'{qualified(r)} "{name}" not found', {"reason": "NotFound", "kind": r.plural, "name": name})


def already_exists(r: Resource, name: str) -> Conflict:
    return Conflict(f'{qualified(r)} "{name}" already exists',
                    {"reason": "AlreadyExists", "kind": r.plural, "name": name})


def modified(r: Resource, name: str) -> Conflict:
    return Conflict(f'Operation cannot be fulfilled on {qualified(r)} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    {"reason": "Conflict", "kind": r.plural, "name": name})


def invalid(err: ValidationError) -> Invalid:
    return Invalid(err.message(), {"reason": "Invalid", "kind": err.kind, "name": err.name,
                                   "causes": [e.path for e in err.errors],
                                   "messages": [str(e) for e in err.errors]})


def not_allowed(r: Resource) -> MethodNotAllowed:
    return MethodNotAllowed("the server does not allow this method on the requested resource",
                            {"reason": "MethodNotAllowed", "kind": r.plural})


def timestamp(now: datetime.datetime, offset: float = 0.0) -> str:
    return (now + datetime.timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: dict) -> dict:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    return meta


def _shallow(obj: dict) -> dict:
    """A copy of `obj` and its metadata map that shares every other part with `obj`."""
    out = dict(obj)
    if isinstance(out.get("metadata"), dict):
        out["metadata"] = dict(out["metadata"])
    return out


def _without_rv(obj: dict) -> dict:
    out = dict(obj)
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return out


def object_name(obj: dict) -> str:
    name = _meta(obj).get("name")
    return name if isinstance(name, str) else ""


def has_status(r: Resource) -> bool:
    return "status" in r.subresources


def spec_finalizers(r: Resource, obj: dict) -> list:
    """A Namespace's spec.finalizers hold its deletion too (the namespace controller removes
    "kubernetes" once the namespace is empty)."""
    if r.kind != "Namespace":
        return []
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    return list(spec.get("finalizers") or [])


def parse_resource_version(rv: Any, what: str = "resourceVersion") -> int:
    try:
        n = int(rv)
        if n < 0:
            raise ValueError
        return n
    except (TypeError, ValueError):
        raise BadRequest(f"invalid {what}: {rv!r}", {"field": what}) from None


def check_resource_version(r: Resource, name: str, given: Any, rev: int) -> None:
    """An update naming a resourceVersion is conditional on it."""
    if given not in (None, "") and parse_resource_version(given) != rev:
        raise modified(r, name)


# --- field validation -------------------------------------------------------------------------

def check_field_validation(value: Any, options_kind: str = "CreateOptions") -> None:
    """ValidateFieldValidation: None (the wire's own) or one of Kubernetes' three values."""
    if value is not None and value not in FIELD_VALIDATIONS:
        raise invalid(ValidationError([not_supported("fieldValidation", value, ("", *FIELD_VALIDATIONS))],
                                      kind=f"{options_kind}.meta.k8s.io", name=""))


def strict_decoding_error(kind: str, version: str, problems: list[str]) -> BadRequest:
    """What a body with unknown (or duplicate) fields gets under fieldValidation=Strict:
    transformDecodeError's wording around the strict decoder's messages."""
    return BadRequest(f"{kind} in version {go_quote(version)} cannot be handled as a {kind}: "
                      f"strict decoding error: {', '.join(problems)}", {"reason": "BadRequest", "causes": problems})


def _unknown_fields(kind: str, version: str, obj: dict, errors: list[FieldError], field_validation: str | None,
                    warn: Warn) -> list[FieldError]:
    """The errors that are not unknown fields, once those are dealt with as `field_validation`
    says: refused (Strict), or dropped from `obj` with a warning (Warn) or without (Ignore)."""
    unknown = [e for e in errors if e.type == UNKNOWN_FIELD]
    if not unknown:
        return errors
    problems = [f"unknown field {go_quote(e.path)}" for e in unknown]
    if field_validation == "Strict":
        raise strict_decoding_error(kind, version, problems)
    for e in unknown:  # dropped, as decoding into the typed object drops them
        _drop(obj, e.path)
    if field_validation == "Warn" and warn is not None:
        for text in problems:
            warn(text)
    return [e for e in errors if e.type != UNKNOWN_FIELD]


def _validated(r: Resource, obj: dict, errors: list[FieldError], field_validation: str | None,
               warn: Warn) -> dict:
    """`obj` once its unknown fields are dealt with as `field_validation` says; raises for the rest."""
    if field_validation is not None:
        errors = _unknown_fields(r.kind, r.version, obj, errors, field_validation, warn)
    if errors:
        raise invalid(ValidationError(errors, kind=r.kind, name=object_name(obj)))
    return obj


def _drop(node: Any, path: str) -> bool:
    """Remove the field a validator's path names (`spec.containers[0].foo`) from `node`. A field
    name may itself hold '.' or '[': every reading of the path is tried."""
    if not isinstance(node, dict):
        return False
    for key in list(node):
        if not isinstance(key, str) or not path.startswith(key):
            continue
        rest = path[len(key):]
        if rest == "":
            del node[key]
            return True
        if _descend(node[key], rest):
            return True
    return False


def _descend(node: Any, rest: str) -> bool:
    """Follow `rest` (".field..." or "[index]...") from `node`."""
    if rest.startswith("."):
        return _drop(node, rest[1:])
    if not rest.startswith("["):
        return False
    end = rest.find("]")
    while end > 0:
        inner, after = rest[1:end], rest[end + 1:]
        if isinstance(node, list) and inner.isdigit() and int(inner) < len(node):
            if _descend(node[int(inner)], after):
                return True
        elif isinstance(node, dict) and inner in node and _descend(node[inner], after):
            return True
        end = rest.find("]", end + 1)
    return False


# --- list ------------------------------------------------------------------------------------

MATCHES = ("Exact", "NotOlderThan")


def list_revision(resource_version: str, match: str, limit: int, continuing: bool) -> tuple[int, int]:
    """(the revision to read at, 0: the latest; the least revision the answer may be at) for a
    list's resourceVersion and resourceVersionMatch, as kube-apiserver reads etcd: "" the latest
    (a quorum read); "0" any (the latest here); N with NotOlderThan at least N; N with Exact
    exactly N; N alone exactly N when paginated (limit), else at least N."""
    errors = []
    if match:
        if not resource_version:
            errors.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless "
                                                            "resourceVersion is provided"))
        if continuing:
            errors.append(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when "
                                                            "continue is provided"))
        if match == "Exact" and resource_version == "0":
            errors.append(forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for '
                                                            'resourceVersion "0"'))
        elif match not in MATCHES:
            errors.append(not_supported("resourceVersionMatch", match, ("Exact", "NotOlderThan", "")))
    if errors:
        raise invalid(ValidationError(errors, kind="ListOptions.meta.k8s.io", name=""))
    if continuing and resource_version not in ("", "0"):
        raise BadRequest("specifying resource version is not allowed when using continue",
                         {"field": "resource_version"})
    if not resource_version:
        return 0, 0
    rv = parse_resource_version(resource_version)
    if match == "Exact" or (not match and limit and rv):
        return rv, 0
    return 0, rv


def too_large_resource_version(wanted: int, current: int) -> Timeout:
    return Timeout(f"Too large resource version: {wanted}, current: {current}",
                   {"reason": "Timeout", "retryAfterSeconds": 1, "causes": ["ResourceVersionTooLarge"]})


# --- create -----------------------------------------------------------------------------------

def prepare_create(r: Resource, object: Any, namespace: str | None, *, now: datetime.datetime,
                   rand: random.Random, field_validation: str | None = None, warn: Warn = None,
                   user: UserInfo | None = None) -> dict:
    """The object a create stores (without a resourceVersion), or the error it is refused with.
    `user` is the caller (a CertificateSigningRequest records its requester)."""
    if not isinstance(object, dict):
        raise BadRequest("object must be a map", {"field": "object"})
    check_field_validation(field_validation, "CreateOptions")
    obj = _shallow(object)  # default_object deep-copies below: no nested part is changed before
    for field, want in (("apiVersion", r.api_version), ("kind", r.kind)):
        if obj.get(field) in (None, ""):
            obj[field] = want
        elif obj[field] != want:
            raise BadRequest(f"the {field} of the object ({obj[field]!r}) does not match the resource "
                             f"{r.plural} ({want!r})", {"field": field})
    meta = _meta(obj)
    if r.namespaced:
        ns = namespace or meta.get("namespace") or "default"
        if meta.get("namespace") not in (None, "", ns):
            raise BadRequest("the namespace of the provided object does not match the namespace sent "
                             "on the request", {"field": "metadata.namespace"})
        meta["namespace"] = ns
    elif namespace:
        raise BadRequest(f"{r.plural} are cluster-scoped: no namespace", {"field": "namespace"})
    for field in _CLEARED_ON_CREATE:
        meta.pop(field, None)
    if not meta.get("name") and isinstance(meta.get("generateName"), str) and meta["generateName"]:
        meta["name"] = meta["generateName"] + "".join(rand.choice(NAME_ALPHABET)
                                                       for _ in range(GENERATED_SUFFIX))
    meta["uid"] = str(uuid.UUID(int=rand.getrandbits(128), version=4))
    if r.kind == "Namespace":  # the namespace strategy: the namespace controller's finalizer
        obj["spec"] = dict(obj.get("spec") or {})
        if obj["spec"].get("finalizers") is None:
            obj["spec"]["finalizers"] = list(NAMESPACE_FINALIZERS)
    meta["creationTimestamp"] = timestamp(now)
    if r.kind == "Pod":
        obj["status"] = {"phase": "Pending", **({"qosClass": obj["status"]["qosClass"]}
                                               if isinstance(obj.get("status"), dict)
                                               and obj["status"].get("qosClass") else {})}
    elif r.kind in SCALABLE_KINDS:
        obj.pop("status", None)
    elif r.kind == "Namespace":
        obj["status"] = {"phase": "Active"}
    elif r.kind == "Service":
        servicestrategy.prepare_for_create(obj)
    elif r.kind == "PodDisruptionBudget":  # its status is the disruption controller's word
        obj.pop("status", None)
    elif r.kind == "Job":
        obj = batch.prepare_job_for_create(obj)
    elif r.kind == certificates.KIND:
        certificates.prepare_for_create(obj, user)
    obj = default_object(obj)
    if "spec" in obj:
        _meta(obj)["generation"] = 1
    obj = _validated(r, obj, validate_object(obj, strict=True), field_validation, warn)
    if r.kind == certificates.KIND and (refused := certificates.subject_restriction_error(obj)):
        raise Forbidden(f"{r.plural}.{r.group} \"{object_name(obj)}\" is forbidden: {refused}",
                        {"reason": "Forbidden"})
    return obj


def admit_create(r: Resource, obj: dict, namespace_obj: dict | None) -> None:
    """NamespaceLifecycle: a namespaced object needs its namespace, and one being deleted takes
    nothing new (but Events)."""
    if not r.namespaced:
        return
    ns = obj["metadata"]["namespace"]
    if namespace_obj is None:
        raise NotFound(f'namespaces "{ns}" not found', {"reason": "NotFound", "kind": "namespaces", "name": ns})
    if (namespace_obj.get("metadata") or {}).get("deletionTimestamp") and r.kind != "Event":
        raise Forbidden(f"{r.plural} \"{object_name(obj)}\" is forbidden: unable to create new content in "
                        f"namespace {ns} because it is being terminated", {"reason": "Forbidden"})


# --- update -----------------------------------------------------------------------------------

def update_target(r: Resource, new: Any, namespace: str | None, *, status: bool) -> tuple[Any, str | None, Any]:
    """(name, namespace, the resourceVersion it is conditional on) of an update of `new`."""
    if not isinstance(new, dict):
        raise BadRequest("object must be a map", {"field": "object"})
    meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
    ns = (namespace or meta.get("namespace") or "default") if r.namespaced else None
    if r.namespaced and meta.get("namespace") not in (None, "", ns):
        raise BadRequest("the namespace of the provided object does not match the namespace sent on the "
                         "request", {"field": "metadata.namespace"})
    if status and not has_status(r):
        raise NotFound(f"{r.plural} have no status subresource", {"reason": "NotFound"})
    return meta.get("name"), ns, meta.get("resourceVersion")


def prepare_update(r: Resource, old: dict, rev: int, new: dict, *, status: bool, finalize: bool = False,
                   approval: bool = False, now: datetime.datetime | None = None,
                   field_validation: str | None = None, warn: Warn = None) -> Outcome:
    """`new` written over `old` (read at `rev`): what to store, or Remove if it finishes a deletion.
    `finalize` is a Namespace's finalize subresource: the only way to change its spec.finalizers
    (a plain update keeps them, as kube-apiserver's namespace strategy does). `approval` is a
    CertificateSigningRequest's approval subresource; `now` stamps its conditions."""
    check_field_validation(field_validation, "UpdateOptions")
    obj = _shallow(new)  # default_object deep-copies below: no nested part is changed before
    obj["apiVersion"], obj["kind"] = obj.get("apiVersion") or r.api_version, obj.get("kind") or r.kind
    meta = _meta(obj)
    old_meta = old["metadata"]
    if r.namespaced and not meta.get("namespace"):
        meta["namespace"] = old_meta.get("namespace")
    if r.kind == "Namespace" and not finalize and not status and isinstance(obj.get("spec") or {}, dict):
        new_spec = obj.get("spec") or {}
        kept = (old.get("spec") or {}).get("finalizers")
        if new_spec.get("finalizers") != kept:
            obj["spec"] = {k: v for k, v in new_spec.items() if k != "finalizers"}
            if kept is not None:
                obj["spec"]["finalizers"] = kept
    subresource = "approval" if approval else "status" if status else ""
    if r.kind == certificates.KIND:
        obj = certificates.prepare_for_update(old, obj, subresource,
                                              timestamp(now or datetime.datetime.now(datetime.timezone.utc)))
        meta = _meta(obj)
    elif has_status(r):
        if status:  # only status (and metadata) may change
            obj["spec"] = old.get("spec")
            if "spec" not in old:
                obj.pop("spec", None)
        elif "status" in old:
            obj["status"] = old["status"]
        else:
            obj.pop("status", None)
    for field in _KEPT_ON_UPDATE + ("uid", "creationTimestamp"):
        if field in ("uid", "creationTimestamp") and meta.get(field) not in (None, ""):
            continue  # validated as immutable below
        if field in old_meta:
            meta[field] = old_meta[field]
        else:
            meta.pop(field, None)
    meta["resourceVersion"] = str(rev)
    if r.kind == "Service" and not status:
        servicestrategy.prepare_for_update(old, obj)
    obj = default_object(obj)
    meta = _meta(obj)
    if obj.get("spec") != old.get("spec") and "generation" in old_meta:
        meta["generation"] = int(old_meta.get("generation") or 0) + 1
    errors = validate_object_update(old, obj, strict=True, require_resource_version=False, status=status)
    if r.kind == certificates.KIND:
        errors += certificates.update_errors(old, obj, subresource)
    obj = _validated(r, obj, errors, field_validation, warn)
    meta = _meta(obj)
    if _without_rv(obj) == _without_rv(old):
        return Unchanged(old)  # nothing changed: no write (as the apiserver does)
    if old_meta.get("deletionTimestamp") and not meta.get("finalizers") and \
            not spec_finalizers(r, obj) and _may_finish(r, obj):
        return Remove(obj)
    return Write(obj)


def _may_finish(r: Resource, obj: dict) -> bool:
    """A deleting object whose last finalizer went away is removed, unless it is a pod still in its
    grace period (the kubelet's grace-0 delete removes it)."""
    if r.kind != "Pod":
        return True
    return not (obj.get("metadata") or {}).get("deletionGracePeriodSeconds")


# --- patch ------------------------------------------------------------------------------------

def patch_subresource(r: Resource, subresource: Any) -> str:
    """The subresource a patch is of: "", "status" or (a CertificateSigningRequest's) "approval"."""
    if subresource not in (None, "", "status", "approval"):
        raise BadRequest(f"unsupported subresource {subresource!r} for patch", {"field": "subresource"})
    if subresource and subresource not in r.subresources:
        raise NotFound(f"{r.plural} have no {subresource} subresource", {"reason": "NotFound"})
    return subresource or ""


def patched(r: Resource, old: dict, rev: int, patch: Any, patch_type: Any) -> tuple[dict, bool]:
    """(`old` patched, whether the patch names a resourceVersion of its own: then it is a
    precondition, and a conflict is not retried). Conflict if that version is not `rev`.
    The patched object may share parts with `old` and `patch`: it is for prepare_update, which
    changes nothing nested before its defaulting has copied the whole object."""
    try:
        out = apply_patch(old, patch, patch_type, schema_for(r.kind), shared=True)
    except PatchError as err:
        raise BadRequest(str(err), {"reason": "BadRequest"}) from None
    meta = out.get("metadata") if isinstance(out.get("metadata"), dict) else {}
    explicit = meta.get("resourceVersion") not in (None, "", str(rev))
    if explicit:
        check_resource_version(r, object_name(old), meta.get("resourceVersion"), rev)
    return out, explicit


# --- delete -----------------------------------------------------------------------------------

def delete_options(grace_period_seconds: Any, propagation_policy: Any) -> str:
    """Check DeleteOptions; the propagation policy, defaulted."""
    if grace_period_seconds is not None and (not isinstance(grace_period_seconds, int)
                                             or isinstance(grace_period_seconds, bool)
                                             or grace_period_seconds < 0):
        raise BadRequest(f"invalid grace_period_seconds: {grace_period_seconds!r}")
    policy = propagation_policy or "Background"
    if policy not in PROPAGATION_POLICIES:
        raise BadRequest(f'unsupported propagation policy "{policy}": must be one of Background, '
                         "Foreground, Orphan", {"field": "propagation_policy"})
    return policy


def check_preconditions(r: Resource, name: str, old: dict, pre: Any) -> None:
    if not pre:
        return
    if not isinstance(pre, dict):
        raise BadRequest("preconditions must be a map", {"field": "preconditions"})
    meta = old["metadata"]
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        raise Conflict(f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
                       f"{meta.get('uid')}", {"reason": "Conflict", "kind": r.plural, "name": name})
    if pre.get("resourceVersion") and str(pre["resourceVersion"]) != meta.get("resourceVersion"):
        raise Conflict(f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                       f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
                       {"reason": "Conflict", "kind": r.plural, "name": name})


def _grace(r: Resource, obj: dict, asked: int | None) -> int:
    """The grace period a delete gets: a Pod's (asked, else its own, else 30s; 0 if it never ran
    or has finished), 0 for every other kind."""
    if r.kind != "Pod":
        return 0
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    if asked is not None:
        return asked
    own = spec.get("terminationGracePeriodSeconds")
    return own if isinstance(own, int) and own >= 0 else DEFAULT_GRACE_SECONDS


def prepare_delete(r: Resource, old: dict, grace_period_seconds: int | None, policy: str, *,
                   now: datetime.datetime) -> Outcome:
    """What a delete of `old` does: Remove it, or Write it marked for deletion (held by a grace
    period or finalizers), or leave it Unchanged (being deleted already)."""
    obj = _shallow(old)  # only metadata changes (finalizers as a new list)
    meta = obj["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    wanted = PROPAGATION_FINALIZERS.get(policy)
    changed = False
    if wanted and wanted not in finalizers and not meta.get("deletionTimestamp"):
        finalizers.append(wanted)
        changed = True
    grace = _grace(r, obj, grace_period_seconds)
    current_grace = meta.get("deletionGracePeriodSeconds")
    held = bool(finalizers) or bool(spec_finalizers(r, obj))
    if meta.get("deletionTimestamp"):
        # already deleting: a shorter grace period may be given; finalizers still hold it
        if current_grace is not None and grace < current_grace:
            meta["deletionGracePeriodSeconds"] = grace
            meta["deletionTimestamp"] = timestamp(now, grace)
            changed = True
        if (meta.get("deletionGracePeriodSeconds") or 0) == 0 and not held:
            return Remove(old)
    elif grace > 0 or held:
        meta["deletionTimestamp"] = timestamp(now, grace)
        meta["deletionGracePeriodSeconds"] = grace
        if r.kind == "Namespace":  # until the namespace controller has emptied it
            obj["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
        changed = True
    else:
        return Remove(old)
    if not changed:
        return Unchanged(old)
    if finalizers:
        meta["finalizers"] = finalizers
    return Write(obj)


def eviction_delete_options(name: Any, eviction: Any, dry_run_asked: bool = False) -> dict:
    """The delete a pods/eviction request stands for: {grace_period_seconds, propagation_policy,
    preconditions, dry_run} from the policy/v1 Eviction's deleteOptions (a dry run if those or the
    request's own options say so, as propagateDryRun merges them)."""
    if not isinstance(eviction, dict):
        raise BadRequest("object must be a map", {"field": "object"})
    meta = eviction.get("metadata") if isinstance(eviction.get("metadata"), dict) else {}
    if meta.get("name") not in (None, "", name):
        raise BadRequest("name in URL does not match name in Eviction object", {"field": "metadata.name"})
    opts = eviction.get("deleteOptions")
    if opts is None:
        opts = {}
    if not isinstance(opts, dict):
        raise BadRequest("deleteOptions must be a map", {"field": "deleteOptions"})
    dry_run = opts.get("dryRun") or []
    if not isinstance(dry_run, list) or any(v != "All" for v in dry_run):
        raise BadRequest(f"invalid dryRun: {dry_run!r}: only \"All\" is supported", {"field": "deleteOptions.dryRun"})
    return {"grace_period_seconds": opts.get("gracePeriodSeconds"),
            "propagation_policy": opts.get("propagationPolicy"),
            "preconditions": opts.get("preconditions"), "dry_run": bool(dry_run) or dry_run_asked}


# --- subresources -----------------------------------------------------------------------------

def prepare_bind(r: Resource, old: dict, node: Any, *, now: datetime.datetime) -> dict:
    """pods/binding: `old` assigned to `node`, with its PodScheduled condition."""
    name = object_name(old)
    spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
    if old["metadata"].get("deletionTimestamp"):
        raise Conflict(f"pod {name} is being deleted, cannot be assigned to a host",
                       {"reason": "Conflict", "kind": "pods", "name": name})
    if spec.get("nodeName"):
        raise Conflict(f"pod {name} is already assigned to node {spec['nodeName']}",
                       {"reason": "Conflict", "kind": "pods", "name": name})
    obj = _shallow(old)
    obj["spec"] = {**spec, "nodeName": node}
    status = dict(old.get("status") or {})
    conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": timestamp(now),
                  "lastProbeTime": None})
    status["conditions"] = conds
    obj["status"] = status
    return obj


def check_binding(r: Resource, name: Any, node: Any) -> None:
    if r.kind != "Pod":
        raise NotFound(f"{r.plural} have no binding subresource", {"reason": "NotFound"})
    if not isinstance(node, str) or not node:
        raise Invalid('Binding "' + str(name) + '" is invalid: target.name: Required value',
                      {"reason": "Invalid", "causes": ["target.name"]})


def check_scalable(r: Resource) -> None:
    if r.kind not in SCALABLE_KINDS:
        raise NotFound(f"{r.plural} have no scale subresource", {"reason": "NotFound"})


def prepare_scale(old: dict, replicas: Any, *, field_validation: str | None = None, warn: Warn = None) -> dict:
    """The scale subresource's write: `old` with the replicas of `replicas` (a count, or an
    autoscaling/v1 Scale, whose unknown fields are dealt with as `field_validation` says)."""
    check_field_validation(field_validation, "UpdateOptions")
    if isinstance(replicas, dict) and field_validation is not None:
        replicas = copy.deepcopy(replicas)
        _unknown_fields("Scale", "v1", replicas, validate_scale(replicas), field_validation, warn)
    try:
        return apply_scale(old, replicas)
    except ValidationError as err:
        raise invalid(err) from None
