"""The apiserver's wire methods (see the package docstring for the API)."""
from __future__ import annotations

import asyncio
import base64
import datetime
import functools
import inspect
import json
import logging
import random
import uuid
from pathlib import Path
from typing import Any

from kubemu.api import fields as fieldsel
from kubemu.api import labels as labelsel
from kubemu.api.fielderrors import ValidationError
from kubemu.api.limits import MAX_DEPTH, MAX_VALUES, ShapeError, check_shape
from kubemu.api.objects import SCALABLE_KINDS, apply_scale, default_object, scale_of, validate_object, \
    validate_object_update
from kubemu.api.patch import PatchError, apply_patch, schema_for
from kubemu.api.resources import Resource, UnknownResourceError, field_set, registry_key, registry_prefix, \
    resolve
from kubemu.wire import BadRequest, Conflict, Gone, Invalid, NotFound, TooLarge, WireError
from store.client import Compacted

from . import podlogs
from .audit import HTTP_CODES, AuditLog
from .namespaces import NamespaceCache
from .storage import MAX_OBJECT_BYTES, Storage, encode
from .watchcache import CacheEvent, WatchCache

log = logging.getLogger("kubemu.apiserver")

NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' utilrand alphabet
GENERATED_SUFFIX = 5
PATCH_ATTEMPTS = 20  # GuaranteedUpdate retries a write without explicit preconditions on conflict
BOOKMARK_INTERVAL = 5.0
# As kube-apiserver creates them; "default" last, so whoever waits for it finds all of them.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "default")


class Forbidden(WireError):
    code = "Forbidden"


# --- helpers ---------------------------------------------------------------------------------------

def check_params(params: dict) -> None:
    """The door: a parameter nested deeper than MAX_DEPTH, or holding more values than a stored
    object can, is refused before any handler walks it (deepcopy, merges, messages recurse)."""
    for name, value in params.items():
        if isinstance(value, (dict, list, tuple)):
            try:
                check_shape(value)
            except ShapeError as err:
                raise BadRequest(f"{name} is {err}", {"field": name, "max_depth": MAX_DEPTH,
                                                      "max_values": MAX_VALUES}) from None


def _at_the_door(fn):
    """`fn` (a coroutine or async generator method) behind check_params, with its signature
    (the wire binds parameters by it)."""
    if inspect.isasyncgenfunction(fn):
        @functools.wraps(fn)
        async def stream(**params):
            check_params(params)
            items = fn(**params)
            try:
                async for item in items:
                    yield item
            finally:
                await items.aclose()
        return stream

    @functools.wraps(fn)
    async def call(**params):
        check_params(params)
        return await fn(**params)
    return call


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _resource(resource: Any) -> Resource:
    try:
        return resolve(resource)
    except UnknownResourceError as err:
        raise NotFound(str(err), {"reason": "NotFound"}) from None


def _now(offset: float = 0.0) -> str:
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: dict) -> dict:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = obj["metadata"] = {}
    return meta


def _key(r: Resource, namespace: str | None, name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise BadRequest("a name is required", {"field": "name"})
    if r.namespaced and not namespace:
        raise BadRequest(f"{r.plural} are namespaced: a namespace is required", {"field": "namespace"})
    try:
        return registry_key(r, namespace if r.namespaced else None, name)
    except ValueError as err:
        raise BadRequest(str(err)) from None


NAMESPACE_FINALIZERS = ("kubernetes",)


def _spec_finalizers(r: Resource, obj: dict) -> list:
    """A Namespace's spec.finalizers hold its deletion too (the namespace controller removes
    "kubernetes" once the namespace is empty)."""
    if r.kind != "Namespace":
        return []
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    return list(spec.get("finalizers") or [])


def qualified(r: Resource) -> str:
    """schema.GroupResource.String(): pods, deployments.apps"""
    return f"{r.plural}.{r.group}" if r.group else r.plural


def not_found(r: Resource, name: str) -> NotFound:
    return NotFound(f'{qualified(r)} "{name}" not found', {"reason": "NotFound", "kind": r.plural, "name": name})


def modified(r: Resource, name: str) -> Conflict:
    return Conflict(f'Operation cannot be fulfilled on {qualified(r)} "{name}": the object has been modified; '
                    "please apply your changes to the latest version and try again",
                    {"reason": "Conflict", "kind": r.plural, "name": name})


def invalid(err: ValidationError) -> Invalid:
    return Invalid(err.message(), {"reason": "Invalid", "kind": err.kind, "name": err.name,
                                   "causes": [e.path for e in err.errors],
                                   "messages": [str(e) for e in err.errors]})


def _check_valid(errors: list, kind: str, name: str) -> None:
    if errors:
        raise invalid(ValidationError(errors, kind=kind, name=name))


def _has_status(r: Resource) -> bool:
    return "status" in r.subresources


def _size_check(value: bytes) -> None:
    if len(value) > MAX_OBJECT_BYTES:
        raise TooLarge(f"Request entity too large: the object is {len(value)} bytes, "
                       f"more than the limit of {MAX_OBJECT_BYTES}", {"reason": "RequestEntityTooLarge"})


def _rv_int(rv: Any, what: str = "resourceVersion") -> int:
    try:
        n = int(rv)
        if n < 0:
            raise ValueError
        return n
    except (TypeError, ValueError):
        raise BadRequest(f"invalid {what}: {rv!r}", {"field": what}) from None


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


def _label_selector(text: Any) -> labelsel.Selector:
    try:
        return labelsel.parse_selector(text or "")
    except ValueError as err:
        raise BadRequest(f"unable to parse requirement: {err}", {"field": "label_selector"}) from None


def _field_selector(r: Resource, text: Any) -> fieldsel.FieldSelector:
    try:
        return fieldsel.parse_field_selector(text or "", r.field_selectors)
    except ValueError as err:
        raise BadRequest(str(err), {"field": "field_selector"}) from None


def _matcher(r: Resource, label_selector: Any, field_selector: Any):
    ls, fs = _label_selector(label_selector), _field_selector(r, field_selector)
    if ls.empty() and fs.empty():
        return lambda obj: True

    def match(obj: dict) -> bool:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        if not ls.matches(meta.get("labels") or {}):
            return False
        if fs.terms:
            values = field_set(r, obj)
            for t in fs.terms:
                have = values.get(t.field, "")
                if (have != t.value) if t.operator != fieldsel.NOT_EQUALS else (have == t.value):
                    return False
        return True
    return match


def _encode_continue(key: bytes, rev: int) -> str:
    raw = json.dumps({"v": 1, "rv": rev, "start": base64.b64encode(key).decode()}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_continue(token: str, prefix: str) -> tuple[bytes, int]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        key, rev = base64.b64decode(data["start"]), int(data["rv"])
    except Exception:
        raise BadRequest("invalid continue token", {"field": "continue"}) from None
    if not key.startswith(prefix.encode()) or rev <= 0:
        raise BadRequest("invalid continue token", {"field": "continue"})
    return key, rev


# --- the API ----------------------------------------------------------------------------------------

class API:
    """The wire methods. `handlers()` is the Server's handler table."""

    def __init__(self, storage: Storage, cache: WatchCache, audit: AuditLog, *,
                 bookmark_interval: float = BOOKMARK_INTERVAL, state_dir: str | None = None):
        self.storage = storage
        self.state_dir = Path(state_dir) if state_dir else None
        self.cache = cache
        self.audit = audit
        self.bookmark_interval = bookmark_interval
        self.namespaces = NamespaceCache(storage, cache)

    def handlers(self) -> dict:
        mutating = {"create": self.create, "update": self.update, "update_status": self.update_status,
                    "patch": self.patch, "delete": self.delete, "bind": self.bind,
                    "update_scale": self.update_scale}
        out = {verb: self._audited(verb, fn) for verb, fn in mutating.items()}
        out.update({"get": _at_the_door(self.get), "list": _at_the_door(self.list),
                    "get_scale": _at_the_door(self.get_scale), "watch": _at_the_door(self.watch),
                    "log": _at_the_door(self.log), "healthz": self.healthz})
        return out

    def _audited(self, verb: str, fn):
        async def wrapper(**params):
            user = params.pop("user", None)
            code, reason = (201 if verb == "create" else 200), None
            result = None
            try:
                check_params(params)
                result = await fn(**params)
                return result
            except WireError as err:
                code, reason = HTTP_CODES.get(err.code, 500), err.code
                raise
            except Exception:
                code, reason = 500, "Internal"
                raise
            finally:  # params may be anything: the record takes only their strings
                resource = params.get("resource", "pods" if verb == "bind" else "")
                try:
                    resource = resolve(resource).plural
                except UnknownResourceError:
                    resource = _text(resource)
                obj = params.get("object") if isinstance(params.get("object"), dict) else {}
                if isinstance(result, dict) and result.get("kind") not in (None, "Scale"):
                    obj = result
                meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
                name = _text(params.get("name")) or _text(meta.get("name")) or _text(meta.get("generateName"))
                self.audit.record(verb="create" if verb == "bind" else verb,
                                  resource=resource + ("/binding" if verb == "bind" else
                                                       "/status" if verb == "update_status" else
                                                       "/scale" if verb == "update_scale" else ""),
                                  namespace=_text(params.get("namespace")) or _text(meta.get("namespace")) or
                                  (self._default_ns(resource)),
                                  name=name, code=code, user=user, reason=reason)
        wrapper.__name__ = wrapper.__qualname__ = verb
        # the wire checks params against this: the handler's own, plus the audited user
        sig = inspect.signature(fn, eval_str=True)
        wrapper.__signature__ = sig.replace(parameters=[*sig.parameters.values(), inspect.Parameter(
            "user", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=str | None)])
        return wrapper

    @staticmethod
    def _default_ns(plural: str) -> str:
        try:
            return "default" if resolve(plural).namespaced else ""
        except UnknownResourceError:
            return ""

    async def healthz(self) -> dict:
        return {"ok": True}

    # --- reads

    async def get(self, resource: Any, name: Any, namespace: str | None = None) -> dict:
        r = _resource(resource)
        obj, _ = await self.storage.get(_key(r, namespace, name))
        if obj is None:
            raise not_found(r, name)
        return obj

    async def list(self, resource: Any, namespace: str | None = None, label_selector: str = "",
                   field_selector: str = "", limit: int = 0, **extra) -> dict:
        token = extra.pop("continue", "") or ""
        extra.pop("resource_version", None)
        if extra:
            raise BadRequest(f"unexpected parameters: {', '.join(sorted(extra))}")
        r = _resource(resource)
        prefix = self._prefix(r, namespace)
        match = _matcher(r, label_selector, field_selector)
        if not isinstance(limit, int) or limit < 0:
            raise BadRequest(f"invalid limit: {limit!r}", {"field": "limit"})
        start, rev = (_decode_continue(token, prefix) if token else (None, 0))
        items: list[dict] = []
        next_key: bytes | None = None
        chunk = max(limit, 100) if limit else 0
        try:
            while True:
                batch, rev, more = await self.storage.list(prefix, start=start, revision=rev, limit=chunk)
                for i, (key, obj) in enumerate(batch):
                    if match(obj):
                        items.append(obj)
                        if limit and len(items) >= limit:
                            if i + 1 < len(batch) or more:
                                next_key = key + b"\0"
                            break
                if next_key is not None or not more or (limit and len(items) >= limit):
                    break
                start = batch[-1][0] + b"\0"
        except Compacted:
            if token:
                raise Gone("continue token expired: the list revision was compacted; start a new list "
                           "without the continue parameter", {"reason": "Expired"}) from None
            raise
        meta: dict = {"resourceVersion": str(rev)}
        if next_key is not None:
            meta["continue"] = _encode_continue(next_key, rev)
        return {"apiVersion": r.api_version, "kind": r.list_kind, "metadata": meta, "items": items}

    def _prefix(self, r: Resource, namespace: str | None) -> str:
        if namespace and not r.namespaced:
            raise BadRequest(f"{r.plural} are cluster-scoped: no namespace", {"field": "namespace"})
        try:
            return registry_prefix(r, namespace or None)
        except ValueError as err:
            raise BadRequest(str(err)) from None

    # --- create

    async def create(self, resource: Any, object: Any, namespace: str | None = None) -> dict:
        r = _resource(resource)
        if not isinstance(object, dict):
            raise BadRequest("object must be a map", {"field": "object"})
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
        # rest.BeforeCreate: the server's fields are the server's
        for field in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "selfLink", "generation", "creationTimestamp"):
            meta.pop(field, None)
        if not meta.get("name") and isinstance(meta.get("generateName"), str) and meta["generateName"]:
            meta["name"] = meta["generateName"] + "".join(random.choice(NAME_ALPHABET)
                                                           for _ in range(GENERATED_SUFFIX))
        meta["uid"] = str(uuid.uuid4())
        if r.kind == "Namespace":  # the namespace strategy: the namespace controller's finalizer
            obj["spec"] = dict(obj.get("spec") or {})
            if obj["spec"].get("finalizers") is None:
                obj["spec"]["finalizers"] = list(NAMESPACE_FINALIZERS)
        meta["creationTimestamp"] = _now()
        if r.kind == "Pod":
            obj["status"] = {"phase": "Pending", **({"qosClass": obj["status"]["qosClass"]}
                                                   if isinstance(obj.get("status"), dict)
                                                   and obj["status"].get("qosClass") else {})}
        elif r.kind in SCALABLE_KINDS:
            obj.pop("status", None)
        elif r.kind == "Namespace":
            obj["status"] = {"phase": "Active"}
        obj = default_object(obj)
        meta = _meta(obj)
        if "spec" in obj:
            meta["generation"] = 1
        name = meta.get("name") if isinstance(meta.get("name"), str) else ""
        _check_valid(validate_object(obj, strict=True), r.kind, name)
        key = _key(r, meta.get("namespace") if r.namespaced else None, name)
        value = encode(obj)
        _size_check(value)
        if r.namespaced:
            ns_obj = await self.namespaces.get(meta["namespace"])
            if ns_obj is None:
                raise NotFound(f'namespaces "{meta["namespace"]}" not found',
                               {"reason": "NotFound", "kind": "namespaces", "name": meta["namespace"]})
            if (ns_obj.get("metadata") or {}).get("deletionTimestamp") and r.kind != "Event":
                raise Forbidden(f"{r.plural} \"{name}\" is forbidden: unable to create new content in "
                                f"namespace {meta['namespace']} because it is being terminated",
                                {"reason": "Forbidden"})
        rev = await self.storage.create(key, value)
        if rev is None:
            raise Conflict(f'{qualified(r)} "{name}" already exists',
                           {"reason": "AlreadyExists", "kind": r.plural, "name": name})
        meta["resourceVersion"] = str(rev)
        return obj

    # --- update

    async def update(self, resource: Any, object: Any, namespace: str | None = None) -> dict:
        return await self._update(resource, object, namespace, status=False)

    async def update_status(self, resource: Any, object: Any, namespace: str | None = None) -> dict:
        return await self._update(resource, object, namespace, status=True)

    async def _update(self, resource: Any, new: Any, namespace: str | None, *, status: bool) -> dict:
        r = _resource(resource)
        if not isinstance(new, dict):
            raise BadRequest("object must be a map", {"field": "object"})
        meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
        name = meta.get("name")
        ns = (namespace or meta.get("namespace") or "default") if r.namespaced else None
        if r.namespaced and meta.get("namespace") not in (None, "", ns):
            raise BadRequest("the namespace of the provided object does not match the namespace sent on the "
                             "request", {"field": "metadata.namespace"})
        if status and not _has_status(r):
            raise NotFound(f"{r.plural} have no status subresource", {"reason": "NotFound"})
        key = _key(r, ns, name)
        old, rev = await self.storage.get(key)
        if old is None:
            raise not_found(r, name)
        precondition = meta.get("resourceVersion")
        if precondition not in (None, ""):
            if _rv_int(precondition) != rev:
                raise modified(r, name)
        return await self._write_update(r, key, old, rev, new, status=status)

    async def _write_update(self, r: Resource, key: str, old: dict, rev: int, new: dict, *,
                            status: bool) -> dict:
        """Write `new` over `old` (read at `rev`), or raise Conflict if the key changed since."""
        name = old["metadata"].get("name", "")
        obj = _shallow(new)  # default_object deep-copies below: no nested part is changed before
        obj["apiVersion"], obj["kind"] = obj.get("apiVersion") or r.api_version, obj.get("kind") or r.kind
        meta = _meta(obj)
        old_meta = old["metadata"]
        if r.namespaced and not meta.get("namespace"):
            meta["namespace"] = old_meta.get("namespace")
        if _has_status(r):
            if status:  # only status (and metadata) may change
                obj["spec"] = old.get("spec")
                if "spec" not in old:
                    obj.pop("spec", None)
            else:
                if "status" in old:
                    obj["status"] = old["status"]
                else:
                    obj.pop("status", None)
        # fields the client cannot change through an update
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "generation"):
            if field in ("uid", "creationTimestamp") and meta.get(field) not in (None, ""):
                continue  # validated as immutable below
            if field in old_meta:
                meta[field] = old_meta[field]
            else:
                meta.pop(field, None)
        meta["resourceVersion"] = str(rev)
        obj = default_object(obj)
        meta = _meta(obj)
        if r.kind == "Pod" and not status:
            # spec.nodeName is set by binding only (the apiserver forbids changing it on update)
            pass
        if obj.get("spec") != old.get("spec") and "generation" in old_meta:
            meta["generation"] = int(old_meta.get("generation") or 0) + 1
        _check_valid(validate_object_update(old, obj, strict=True, require_resource_version=False),
                     r.kind, name)
        if _without_rv(obj) == _without_rv(old):
            return old  # nothing changed: no write (as the apiserver does)
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers") and \
                not _spec_finalizers(r, obj) and self._may_finish(r, obj):
            new_rev = await self.storage.delete(key, rev)
            if new_rev is None:
                raise modified(r, name)
            self._wrote(r, name, new_rev)
            return obj
        value = encode(obj)
        _size_check(value)
        new_rev = await self.storage.update(key, value, rev)
        if new_rev is None:
            raise modified(r, name)
        self._wrote(r, name, new_rev)
        meta["resourceVersion"] = str(new_rev)
        return obj

    @staticmethod
    def _may_finish(r: Resource, obj: dict) -> bool:
        """A deleting object whose last finalizer went away is removed, unless it is a pod still in its
        grace period (the kubelet's grace-0 delete removes it)."""
        if r.kind != "Pod":
            return True
        grace = (obj.get("metadata") or {}).get("deletionGracePeriodSeconds")
        return not grace

    # --- patch

    async def patch(self, resource: Any, name: Any, patch: Any, namespace: str | None = None,
                    patch_type: str = "merge", subresource: str | None = None) -> dict:
        r = _resource(resource)
        if subresource not in (None, "", "status"):
            raise BadRequest(f"unsupported subresource {subresource!r} for patch", {"field": "subresource"})
        status = subresource == "status"
        if status and not _has_status(r):
            raise NotFound(f"{r.plural} have no status subresource", {"reason": "NotFound"})
        key = _key(r, namespace if r.namespaced else None, name)
        for attempt in range(PATCH_ATTEMPTS):
            old, rev = await self.storage.get(key)
            if old is None:
                raise not_found(r, name)
            try:
                patched = apply_patch(old, patch, patch_type, schema_for(r.kind))
            except PatchError as err:
                raise BadRequest(str(err), {"reason": "BadRequest"}) from None
            pmeta = patched.get("metadata") if isinstance(patched.get("metadata"), dict) else {}
            explicit = pmeta.get("resourceVersion") not in (None, "", str(rev))
            if explicit and _rv_int(pmeta.get("resourceVersion")) != rev:
                raise modified(r, name)
            try:
                return await self._write_update(r, key, old, rev, patched, status=status)
            except Conflict as err:
                if err.details.get("reason") != "Conflict" or explicit or attempt == PATCH_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))  # de-synchronize contenders
        raise modified(r, name)  # not reached

    # --- delete

    async def delete(self, resource: Any, name: Any, namespace: str | None = None,
                     grace_period_seconds: int | None = None, propagation_policy: str | None = "Background",
                     preconditions: dict | None = None) -> dict:
        r = _resource(resource)
        if grace_period_seconds is not None and (not isinstance(grace_period_seconds, int)
                                                 or isinstance(grace_period_seconds, bool)
                                                 or grace_period_seconds < 0):
            raise BadRequest(f"invalid grace_period_seconds: {grace_period_seconds!r}")
        policy = propagation_policy or "Background"
        if policy not in ("Background", "Foreground", "Orphan"):
            raise BadRequest(f'unsupported propagation policy "{policy}": must be one of Background, '
                             "Foreground, Orphan", {"field": "propagation_policy"})
        key = _key(r, namespace if r.namespaced else None, name)
        for attempt in range(PATCH_ATTEMPTS):
            old, rev = await self.storage.get(key)
            if old is None:
                raise not_found(r, name)
            self._check_preconditions(r, name, old, preconditions)
            try:
                return await self._delete_once(r, key, old, rev, grace_period_seconds, policy)
            except Conflict as err:
                if err.details.get("reason") != "Conflict" or attempt == PATCH_ATTEMPTS - 1:
                    raise
        raise modified(r, name)  # not reached

    @staticmethod
    def _check_preconditions(r: Resource, name: str, old: dict, pre: Any) -> None:
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

    async def _delete_once(self, r: Resource, key: str, old: dict, rev: int, grace: int | None,
                           policy: str) -> dict:
        name = old["metadata"].get("name", "")
        obj = _shallow(old)  # only metadata changes (finalizers as a new list)
        meta = obj["metadata"]
        finalizers = list(meta.get("finalizers") or [])
        wanted = {"Orphan": "orphan", "Foreground": "foregroundDeletion"}.get(policy)
        changed = False
        if wanted and wanted not in finalizers and not meta.get("deletionTimestamp"):
            finalizers.append(wanted)
            changed = True
        if r.kind == "Pod":
            spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
            if grace is None:
                grace = spec.get("terminationGracePeriodSeconds")
                grace = grace if isinstance(grace, int) and grace >= 0 else 30
            status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
            if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
                grace = 0
        else:
            grace = 0
        current_grace = meta.get("deletionGracePeriodSeconds")
        held = bool(finalizers) or bool(_spec_finalizers(r, obj))
        if meta.get("deletionTimestamp"):
            # already deleting: a shorter grace period may be given; finalizers still hold it
            if current_grace is not None and grace < current_grace:
                meta["deletionGracePeriodSeconds"] = grace
                meta["deletionTimestamp"] = _now(grace)
                changed = True
            if (meta.get("deletionGracePeriodSeconds") or 0) == 0 and not held:
                return await self._remove(r, key, old, rev)
        elif grace > 0 or held:
            meta["deletionTimestamp"] = _now(grace)
            meta["deletionGracePeriodSeconds"] = grace
            if r.kind == "Namespace":  # until the namespace controller has emptied it
                obj["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}
            changed = True
        else:
            return await self._remove(r, key, old, rev)
        if not changed:
            return old
        if finalizers:
            meta["finalizers"] = finalizers
        value = encode(obj)
        new_rev = await self.storage.update(key, value, rev)
        if new_rev is None:
            raise modified(r, name)
        self._wrote(r, name, new_rev)
        meta["resourceVersion"] = str(new_rev)
        return obj

    async def _remove(self, r: Resource, key: str, old: dict, rev: int) -> dict:
        name = old["metadata"].get("name", "")
        new_rev = await self.storage.delete(key, rev)
        if new_rev is None:
            raise modified(r, name)
        self._wrote(r, name, new_rev)
        return old

    def _wrote(self, r: Resource, name: str, revision: int) -> None:
        """Note a write this apiserver made (creates check their namespace's state)."""
        if r.kind == "Namespace":
            self.namespaces.wrote(name, revision)

    # --- subresources

    async def log(self, name: Any, namespace: str | None = None, container: str | None = None,
                  previous: bool = False, tail_lines: int | None = None, limit_bytes: int | None = None) -> dict:
        """The pod log subresource (podlogs.py): {"log": text}."""
        if self.state_dir is None:
            raise podlogs.no_state_dir()
        pod = await self.get("pods", name, namespace or "default")
        path = podlogs.log_path(self.state_dir, pod, container, bool(previous))
        return {"log": await asyncio.to_thread(podlogs.read_log, path, tail_lines, limit_bytes)}

    async def bind(self, name: Any, node: Any, namespace: str | None = None, resource: Any = "pods") -> dict:
        r = _resource(resource)
        if r.kind != "Pod":
            raise NotFound(f"{r.plural} have no binding subresource", {"reason": "NotFound"})
        if not isinstance(node, str) or not node:
            raise Invalid('Binding "' + str(name) + '" is invalid: target.name: Required value',
                          {"reason": "Invalid", "causes": ["target.name"]})
        key = _key(r, namespace or "default", name)
        for attempt in range(PATCH_ATTEMPTS):
            old, rev = await self.storage.get(key)
            if old is None:
                raise not_found(r, name)
            spec = old.get("spec") if isinstance(old.get("spec"), dict) else {}
            if old["metadata"].get("deletionTimestamp"):
                raise Conflict(f"pod {name} is being deleted, cannot be assigned to a host",
                               {"reason": "Conflict", "kind": "pods", "name": name})
            if spec.get("nodeName"):
                raise Conflict(f"pod {name} is already assigned to node {spec['nodeName']}",
                               {"reason": "Conflict", "kind": "pods", "name": name})
            obj = old  # decoded from the store for this request alone: changed in place
            obj["spec"]["nodeName"] = node
            status = obj.setdefault("status", {})
            conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": _now(),
                          "lastProbeTime": None})
            status["conditions"] = conds
            new_rev = await self.storage.update(key, encode(obj), rev)
            if new_rev is not None:
                obj["metadata"]["resourceVersion"] = str(new_rev)
                return obj
        raise modified(r, name)

    def _scalable(self, resource: Any) -> Resource:
        r = _resource(resource)
        if r.kind not in SCALABLE_KINDS:
            raise NotFound(f"{r.plural} have no scale subresource", {"reason": "NotFound"})
        return r

    async def get_scale(self, resource: Any, name: Any, namespace: str | None = None) -> dict:
        r = self._scalable(resource)
        obj, _ = await self.storage.get(_key(r, namespace or "default", name))
        if obj is None:
            raise not_found(r, name)
        return scale_of(obj)

    async def update_scale(self, resource: Any, name: Any, replicas: Any, namespace: str | None = None,
                           resource_version: str | None = None) -> dict:
        r = self._scalable(resource)
        key = _key(r, namespace or "default", name)
        for attempt in range(PATCH_ATTEMPTS):
            old, rev = await self.storage.get(key)
            if old is None:
                raise not_found(r, name)
            if resource_version not in (None, "") and _rv_int(resource_version) != rev:
                raise modified(r, name)
            try:
                new = apply_scale(old, replicas)
            except ValidationError as err:
                raise invalid(err) from None
            try:
                obj = await self._write_update(r, key, old, rev, new, status=False)
            except Conflict:
                if resource_version or attempt == PATCH_ATTEMPTS - 1:
                    raise
                continue
            return scale_of(obj)
        raise modified(r, name)

    # --- watch

    async def watch(self, resource: Any, namespace: str | None = None, label_selector: str = "",
                    field_selector: str = "", resource_version: Any = "", allow_bookmarks: bool = False):
        r = _resource(resource)
        prefix = self._prefix(r, namespace)
        type_prefix = registry_prefix(r)
        match = _matcher(r, label_selector, field_selector)
        rv = "" if resource_version is None else str(resource_version)
        if rv in ("", "0"):
            listed = await self.list(r, namespace=namespace or None, label_selector=label_selector,
                                     field_selector=field_selector)
            start = int(listed["metadata"]["resourceVersion"])
            for obj in listed["items"]:
                yield {"type": "ADDED", "object": obj}
        else:
            start = _rv_int(rv, "resource_version")
        # one feed per resource: the namespace is filtered here
        source, watcher = await self.cache.open(type_prefix, start)
        queue: asyncio.Queue = asyncio.Queue(maxsize=64)
        done = object()

        async def pump():
            try:
                async for ev in source:
                    await queue.put(ev)
                await queue.put(done)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # handed over to the consumer
                await queue.put(exc)
            finally:
                await source.aclose()

        task = asyncio.create_task(pump(), name=f"watch {r.plural}")
        last = start
        try:
            while True:
                try:
                    # only an idle watch needs the bookmark timer (a task and a timer per wait)
                    if not queue.empty():
                        item = queue.get_nowait()
                    elif allow_bookmarks and self.bookmark_interval > 0:
                        item = await asyncio.wait_for(queue.get(), self.bookmark_interval)
                    else:
                        item = await queue.get()
                except asyncio.TimeoutError:
                    if watcher is not None and not watcher.queue and queue.empty() and watcher.error is None:
                        # everything the cache has seen was delivered (or filtered out)
                        last = max(last, self.cache.latest(type_prefix))
                    yield {"type": "BOOKMARK", "object": {"apiVersion": r.api_version, "kind": r.kind,
                                                          "metadata": {"resourceVersion": str(last)}}}
                    continue
                if item is done:
                    return
                if isinstance(item, BaseException):
                    raise item
                last = max(last, item.revision)
                out = self._translate(item, prefix, match)
                if out is not None:
                    yield out
        finally:
            task.cancel()
            try:
                await task
            except BaseException:
                pass
            if watcher is not None:
                self.cache.cacher(type_prefix).unregister(watcher)

    @staticmethod
    def _translate(ev: CacheEvent, prefix: str, match) -> dict | None:
        if not ev.key.startswith(prefix):
            return None
        old_match = ev.old is not None and match(ev.old)
        if ev.type == "PUT":
            cur_match = match(ev.obj)
            if cur_match:
                return {"type": "MODIFIED" if old_match else "ADDED", "object": ev.obj}
            if old_match:  # left the selection
                return {"type": "DELETED", "object": _at(ev.old, ev.revision)}
            return None
        if old_match:
            return {"type": "DELETED", "object": _at(ev.old, ev.revision)}
        return None

    # --- startup

    async def ensure_system_namespaces(self) -> None:
        for ns in SYSTEM_NAMESPACES:
            try:
                await self.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": ns}})
                log.info("created namespace %s", ns)
            except Conflict:
                pass


def _at(obj: dict, revision: int) -> dict:
    """`obj` with its resourceVersion set to `revision` (a DELETED event carries the delete's RV)."""
    out = dict(obj)
    out["metadata"] = {**(obj.get("metadata") or {}), "resourceVersion": str(revision)}
    return out
