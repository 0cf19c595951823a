"""The apiserver's wire methods (see the package docstring for the API): the I/O around strategy.py.

Each mutating method takes the object's state (from the watch cache when its resource's cacher
runs, else a store read), asks `strategy` what the verb makes of it, and writes the result
conditionally on that state's revision (retrying from the state the failed write read when
another writer got there first and the request named no resourceVersion of its own; see
`_guaranteed`). With `dry_run` everything runs but the write: the answer is what would have been
stored, its resourceVersion unchanged. The object a write answers with is its watch event's too
(the cache takes it instead of decoding the stored value): shared read-only from then on, like
the state a write may start from (the object of the cache's latest event of its key).

A Service's clusterIP and nodePorts are taken in the store (servicealloc.py: IPAddress objects and
the NodePort bitmap, shared by every apiserver) before the write, given back if it fails and when
the Service goes; a dry run only checks them (it takes nothing, so it never stands in the way of a
real request while it awaits). A write whose outcome is unknown keeps them: if the Service was not
stored after all, the repair loops free them.
"""
from __future__ import annotations

import asyncio
import base64
import collections
import datetime
import functools
import inspect
import json
import logging
import random
from pathlib import Path
from typing import Any, Callable, Literal

from kubemu.api import certificates
from kubemu.api.authz import Attributes, Decision
from kubemu.api import fields as fieldsel
from kubemu.api.fielderrors import ValidationError
from kubemu.api import labels as labelsel
from kubemu.api.limits import MAX_DEPTH, MAX_VALUES, ShapeError, check_shape
from kubemu.api.objects import scale_of
from kubemu.api.resources import Resource, UnknownResourceError, field_set, registry_key, registry_prefix, \
    resolve
from kubemu.wire import BadRequest, Batch, Conflict, Forbidden, Gone, NotFound, OutcomeUnknown, SharedItem, TooLarge, \
    Unavailable, WireError
from store.client import Compacted, FutureRevision

from . import caller, eviction, nodekeys, podlogs, storageadmission, warnings
from . import strategy as st
from .servicealloc import Held, ServiceAllocator
from .serviceips import DEFAULT_NODE_PORT_RANGE, DEFAULT_SERVICE_CIDR, parse_port_range
from .servicestrategy import Allocations
from .audit import HTTP_CODES, AuditLog, now_rfc3339
from .caller import caller_name, caller_user_agent
from .namespaces import NamespaceCache
from .storage import MAX_OBJECT_BYTES, Current, Storage, encode
from .strategy import Remove, Unchanged, Write, modified, not_found
from .watchcache import CacheEvent, WatchCache

log = logging.getLogger("kubemu.apiserver")

EVICTED = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}
PATCH_ATTEMPTS = 20  # GuaranteedUpdate retries a write without explicit preconditions on conflict
BOOKMARK_INTERVAL = 5.0
WATCH_BATCH = 64  # watch events one wire message carries at most (the wire's watch is batched)
WATCH_EVENTS_KEPT = 1024  # watch events remembered as sent, for the watchers that follow (WatchEvents)
# As kube-apiserver creates them; "default" last, so whoever waits for it finds all of them.
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease", "default")
# How the audit log names the methods that are not plain verbs: (verb, subresource)
AUDITED_AS = {"bind": ("create", "/binding"), "update_status": ("update_status", "/status"),
              "update_scale": ("update_scale", "/scale"), "delete_collection": ("deletecollection", ""),
              "evict": ("create", "/eviction"), "finalize": ("update", "/finalize"),
              "update_approval": ("update", "/approval")}
CREATED = ("create", "evict")  # answered 201

FieldValidation = Literal["Strict", "Warn", "Ignore"]


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
    """The stored resource `resource` names (review kinds are answered elsewhere, never stored)."""
    try:
        r = resolve(resource)
    except UnknownResourceError as err:
        raise NotFound(str(err), {"reason": "NotFound"}) from None
    if not r.stored:
        raise st.not_allowed(r)
    return r


def _admit_node_key(r: Resource, old: dict | None, new, key_owners: Callable[[str], list[str]] | None) -> None:
    """NodeRestriction on a Node's CURVE key annotation, and no key another Node names
    (nodekeys.py; `key_owners`: the Nodes that name a key now, None when not followed): `new`
    is the object a create stores, or an update's outcome (a delete's or an unchanged one
    keeps the key)."""
    if r.kind != "Node" or isinstance(new, (Remove, Unchanged)):
        return
    obj = new.obj if isinstance(new, Write) else new
    name = st.object_name(obj)
    refused = nodekeys.admission_error(caller.current_user(), name, old, obj)
    key = nodekeys.key_of(obj)
    if refused is None and key is not None and key_owners is not None and key != nodekeys.key_of(old):
        refused = nodekeys.duplicate_error(name, key_owners(key))
    if refused is not None:
        raise Forbidden(refused, {"reason": "Forbidden", "kind": "nodes", "name": name})


def _key(r: Resource, namespace: str | None, name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise BadRequest("a name is required", {"field": "name"})
    if r.namespaced and not namespace:
        raise BadRequest(f"{r.plural} are namespaced: a namespace is required", {"field": "namespace"})
    try:
        return registry_key(r, namespace if r.namespaced else None, name)
    except ValueError as err:
        raise BadRequest(str(err)) from None


def _size_check(value: bytes) -> None:
    if len(value) > MAX_OBJECT_BYTES:
        raise TooLarge(f"Request entity too large: the object is {len(value)} bytes, "
                       f"more than the limit of {MAX_OBJECT_BYTES}", {"reason": "RequestEntityTooLarge"})


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
    """match(obj, its field_set if known) -> whether the selectors select obj."""
    ls, fs = _label_selector(label_selector), _field_selector(r, field_selector)
    if ls.empty() and fs.empty():
        return lambda obj, fields=None: True

    def match(obj: dict, fields: dict[str, str] | None = None) -> bool:
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        if not ls.matches(meta.get("labels") or {}):
            return False
        if fs.terms:
            values = fields if fields is not None else field_set(r, obj)
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


class _Changed(Conflict):
    """modified(): a conditional write found the key changed; `current` is its state, read by
    the same txn (the retry starts from it, without a read of its own)."""

    def __init__(self, r: Resource, name: str, current: Current):
        conflict = modified(r, name)
        super().__init__(conflict.message, conflict.details)
        self.current = current


# --- the API ----------------------------------------------------------------------------------------

class API:
    """The wire methods. `handlers()` is the Server's handler table. `clock` (a UTC datetime) and
    `rand` (generateName suffixes, uids) are for tests; `services` are the ranges of Services'
    clusterIPs and nodePorts (--service-cluster-ip-range, --service-node-port-range), allocated
    in the store by `service_allocator`."""

    def __init__(self, storage: Storage, cache: WatchCache, audit: AuditLog, *,
                 bookmark_interval: float = BOOKMARK_INTERVAL, state_dir: str | None = None,
                 clock: Callable[[], datetime.datetime] | None = None, rand: random.Random | None = None,
                 services: Allocations | None = None,
                 authorize: Callable[[Attributes], Decision] | None = None,
                 key_owners: Callable[[str], list[str]] | None = None):
        """`authorize` (RBAC's) answers the admission checks that ask the authorizer: who may
        approve or sign a CertificateSigningRequest for its signer. `key_owners` names the Nodes
        whose annotation names a CURVE key (the apiserver's NodeKeyCache, when it serves the
        wire with CURVE): a key another Node names is refused."""
        self.storage = storage
        self.key_owners = key_owners
        self.authorize = authorize
        self.state_dir = Path(state_dir) if state_dir else None
        self.cache = cache
        self.audit = audit
        self.bookmark_interval = bookmark_interval
        self._watch_events = WatchEvents()
        self.namespaces = NamespaceCache(storage, cache)
        self.clock = clock or (lambda: datetime.datetime.now(datetime.timezone.utc))
        self.rand = rand or random.SystemRandom()
        self.service_allocator = ServiceAllocator(
            storage, services or Allocations(DEFAULT_SERVICE_CIDR, parse_port_range(DEFAULT_NODE_PORT_RANGE)),
            clock=self.clock)

    def handlers(self) -> dict:
        mutating = {"create": self.create, "update": self.update, "update_status": self.update_status,
                    "patch": self.patch, "delete": self.delete, "bind": self.bind,
                    "update_scale": self.update_scale, "delete_collection": self.delete_collection,
                    "evict": self.evict, "finalize": self.finalize,
                    "update_approval": self.update_approval}
        out = {verb: self._audited(verb, fn) for verb, fn in mutating.items()}
        out.update({"get": _at_the_door(self.get), "list": _at_the_door(self.list),
                    "get_scale": _at_the_door(self.get_scale),
                    "watch": _at_the_door(functools.partial(self.watch, batched=True)),
                    "log": _at_the_door(self.log), "healthz": self.healthz})
        return out

    def _audited(self, verb: str, fn):
        audit_verb, subresource = AUDITED_AS.get(verb, (verb, ""))

        async def wrapper(**params):
            received = now_rfc3339()
            code, reason = (201 if verb in CREATED else 200), None
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
                resource = params.get("resource", "pods" if verb in ("bind", "evict") else "")
                try:
                    resource = resolve(resource).plural
                except UnknownResourceError:
                    resource = _text(resource)
                obj = params.get("object") if isinstance(params.get("object"), dict) else {}
                if isinstance(result, dict) and result.get("kind") not in (None, "Scale", "Status"):
                    obj = result
                meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
                name = _text(params.get("name")) or _text(meta.get("name")) or _text(meta.get("generateName"))
                self.audit.record(verb=audit_verb, resource=resource + subresource,
                                  namespace=_text(params.get("namespace")) or _text(meta.get("namespace")) or
                                  (self._default_ns(resource)),
                                  name=name, code=code, user=caller_name(), reason=reason, received=received,
                                  user_agent=caller_user_agent())
        wrapper.__name__ = wrapper.__qualname__ = verb
        wrapper.__signature__ = inspect.signature(fn, eval_str=True)  # the wire checks params against it
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
                   field_selector: str = "", limit: int = 0, resource_version: str | None = "",
                   resource_version_match: str | None = "", **extra) -> dict:
        token = extra.pop("continue", "") or ""
        if extra:
            raise BadRequest(f"unexpected parameters: {', '.join(sorted(extra))}")
        r = _resource(resource)
        prefix = self._prefix(r, namespace)
        match = _matcher(r, label_selector, field_selector)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise BadRequest(f"invalid limit: {limit!r}", {"field": "limit"})
        # A list is how a watch begins (list, then watch from its resourceVersion): with the
        # resource's cacher started first, that version is one the cache reaches, and the watch
        # is served from it rather than by a store watch of its own (as kube's cachers, which
        # start with the apiserver)
        try:
            await self.cache.cacher(registry_prefix(r)).ensure_started()
        except Unavailable:   # the list never depends on the cache: it reads the store below
            pass
        exact, minimum = st.list_revision(resource_version or "", resource_version_match or "", limit, bool(token))
        start, rev = (_decode_continue(token, prefix) if token else (None, exact))
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
            if exact:
                raise Gone("The resourceVersion for the provided list is too old.", {"reason": "Expired"}) from None
            raise
        except FutureRevision:
            raise st.too_large_resource_version(rev, await self.storage.current_revision(prefix)) from None
        if minimum > rev:
            raise st.too_large_resource_version(minimum, rev)
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

    # --- writes

    async def _allocate(self, old: dict | None, obj: dict, dry_run: bool) -> tuple[dict, Held]:
        """`obj` with its clusterIP and nodePorts, and what was taken for it (on a dry run:
        found free)."""
        try:
            return await self.service_allocator.update(old, obj, dry_run=dry_run)
        except ValidationError as err:
            raise st.invalid(err) from None

    @staticmethod
    async def _give_back(held: Held, err: BaseException) -> None:
        """The Service write failed with `err`: give back what it took, unless the write may have
        happened (then the repair loops free what no stored Service holds)."""
        if not isinstance(err, OutcomeUnknown):
            await held.revert()

    async def _commit(self, r: Resource, key: str, rev: int, outcome: st.Outcome, dry_run: bool,
                      old: dict) -> dict:
        """Carry out a strategy's outcome on `key`, read at `rev` (as `old`): Conflict if it
        changed since. A Service's allocations follow its writes."""
        if r.kind != "Service" or isinstance(outcome, Unchanged):
            return await self._write(r, key, rev, outcome, dry_run)
        if isinstance(outcome, Remove):
            out = await self._write(r, key, rev, outcome, dry_run)
            if not dry_run:
                await self.service_allocator.release(old)
            return out
        obj, held = await self._allocate(old, outcome.obj, dry_run)
        try:
            out = await self._write(r, key, rev, Write(obj), dry_run)
        except BaseException as err:
            await self._give_back(held, err)
            raise
        if not dry_run:
            await held.commit()
        return out

    async def _write(self, r: Resource, key: str, rev: int, outcome: st.Outcome, dry_run: bool) -> dict:
        obj = outcome.obj
        if isinstance(outcome, Unchanged):
            return obj
        name = obj["metadata"].get("name", "")
        if isinstance(outcome, Remove):
            if not dry_run:
                new_rev = await self.storage.delete(key, rev)
                if isinstance(new_rev, Current):
                    raise _Changed(r, name, new_rev)
                self._wrote(r, key, name, new_rev)
            return obj
        value = encode(obj)
        _size_check(value)
        if dry_run:
            return obj
        new_rev = await self.storage.update(key, value, rev)
        if isinstance(new_rev, Current):
            raise _Changed(r, name, new_rev)
        self._wrote(r, key, name, new_rev, obj)
        return obj

    async def _guaranteed(self, r: Resource, key: str, name: Any, change, *, dry_run: bool = False) -> dict:
        """GuaranteedUpdate: `change(old, rev) -> (Outcome, explicit)` on the key's state, then
        commit it conditionally on `rev`; on a conflict, again on the state the failed txn read,
        unless `explicit` (the request named the version it changes). `change` never changes
        `old` (it builds what it writes): `old` may be the watch cache's object, shared.

        The first state is the watch cache's when it runs (kube's cachedExistingObject): no
        store read, but it may be behind the store. Only a successful compare-and-swap confirms
        such a state, so whatever else it leads to (an error from `change`, NotFound, nothing to
        write) is decided again on the store's state (kube's origStateIsCurrent): a stale cache
        never answers what the store's state would not. A dry run writes nothing, so nothing
        would confirm it; a Service takes its allocations from `old` before the write: both
        start from the store."""
        prefix = registry_prefix(r)
        cached = None if dry_run or r.kind == "Service" else self.cache.current(prefix, key)
        confirmed = cached is None
        current = await self.storage.read(key) if confirmed else cached
        # only the answered attempt's warnings reach the client, not those of one decided again
        attempt_warnings: list[str] | None = None
        try:
            for attempt in range(PATCH_ATTEMPTS):
                rev = current.revision
                # the cache's state decoded already, while its event is in the window: no decode
                old = self.cache.decoded(prefix, key, current) if current is cached else None
                if old is None:
                    old = current.decoded()
                try:
                    with warnings.held() as attempt_warnings:
                        if old is None:
                            raise not_found(r, name)
                        outcome, explicit = change(old, rev)
                except WireError:
                    if confirmed:
                        raise
                    outcome = None
                if not confirmed and not isinstance(outcome, (Write, Remove)):
                    # an answer no write will confirm: decide again on the store's state
                    current, confirmed = await self.storage.read(key), True
                    continue
                try:
                    return await self._commit(r, key, rev, outcome, dry_run, old)
                except Conflict as err:
                    final = explicit or attempt == PATCH_ATTEMPTS - 1
                    if err.details.get("reason") != "Conflict" or confirmed and final:
                        raise
                    if confirmed:  # a real race, not a cache behind the store
                        await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))  # de-synchronize contenders
                    current = err.current if isinstance(err, _Changed) else await self.storage.read(key)
                except TooLarge:  # the change made of a stale state may be larger than of the current one
                    if confirmed:
                        raise
                    current = await self.storage.read(key)
                confirmed = True
            raise modified(r, name)  # not reached
        finally:
            warnings.add_all(attempt_warnings)

    # --- create

    async def create(self, resource: Any, object: Any, namespace: str | None = None, dry_run: bool = False,
                     field_validation: FieldValidation | None = None, field_manager: str | None = None) -> dict:
        """`field_manager` is accepted (kubectl sends it) and not recorded: no managedFields yet."""
        r = _resource(resource)
        obj = st.prepare_create(r, object, namespace, now=self.clock(), rand=self.rand,
                                field_validation=field_validation, warn=warnings.add,
                                user=caller.current_user())
        if r.kind in storageadmission.FINALIZERS:
            await storageadmission.admit(self.storage, obj)
        _admit_node_key(r, None, obj, self.key_owners)
        if r.kind != "Service":
            return await self._create(r, obj, dry_run)
        obj, held = await self._allocate(None, obj, dry_run)
        try:
            return await self._create(r, obj, dry_run)
        except BaseException as err:
            await self._give_back(held, err)
            raise

    async def _create(self, r: Resource, obj: dict, dry_run: bool) -> dict:
        meta = obj["metadata"]
        name = st.object_name(obj)
        key = _key(r, meta.get("namespace") if r.namespaced else None, name)
        value = encode(obj)
        _size_check(value)
        if r.namespaced:
            st.admit_create(r, obj, await self.namespaces.get(meta["namespace"]))
        if dry_run:
            existing, _ = await self.storage.get(key)
            if existing is not None:
                raise st.already_exists(r, name)
            return obj
        rev = await self.storage.create(key, value)
        if rev is None:
            raise st.already_exists(r, name)
        self._wrote(r, key, name, rev, obj)
        return obj

    # --- update

    async def update(self, resource: Any, object: Any, namespace: str | None = None, dry_run: bool = False,
                     field_validation: FieldValidation | None = None, field_manager: str | None = None) -> dict:
        return await self._update(resource, object, namespace, status=False, dry_run=dry_run,
                                  field_validation=field_validation)

    async def update_status(self, resource: Any, object: Any, namespace: str | None = None, dry_run: bool = False,
                            field_validation: FieldValidation | None = None,
                            field_manager: str | None = None) -> dict:
        return await self._update(resource, object, namespace, status=True, dry_run=dry_run,
                                  field_validation=field_validation)

    async def finalize(self, resource: Any, object: Any, dry_run: bool = False,
                       field_validation: FieldValidation | None = None, field_manager: str | None = None) -> dict:
        """A Namespace's finalize subresource: an update that may change spec.finalizers."""
        if _resource(resource).kind != "Namespace":
            raise NotFound(f"{resource} have no finalize subresource", {"reason": "NotFound"})
        return await self._update(resource, object, None, status=False, finalize=True, dry_run=dry_run,
                                  field_validation=field_validation)

    async def update_approval(self, resource: Any, object: Any, dry_run: bool = False,
                              field_validation: FieldValidation | None = None,
                              field_manager: str | None = None) -> dict:
        """A CertificateSigningRequest's approval subresource: an update of its Approved and
        Denied conditions."""
        if _resource(resource).kind != certificates.KIND:
            raise NotFound(f"{resource} have no approval subresource", {"reason": "NotFound"})
        return await self._update(resource, object, None, status=False, approval=True, dry_run=dry_run,
                                  field_validation=field_validation)

    async def _update(self, resource: Any, new: Any, namespace: str | None, *, status: bool, dry_run: bool,
                      field_validation: str | None, finalize: bool = False, approval: bool = False) -> dict:
        r = _resource(resource)
        name, ns, precondition = st.update_target(r, new, namespace, status=status)
        key = _key(r, ns, name)

        def change(old: dict, rev: int):
            st.check_resource_version(r, name, precondition, rev)
            outcome = st.prepare_update(r, old, rev, new, status=status, finalize=finalize, approval=approval,
                                        now=self.clock(), field_validation=field_validation, warn=warnings.add)
            self._admit_signer(r, old, outcome, "approval" if approval else "status" if status else "")
            _admit_node_key(r, old, outcome, self.key_owners)
            # explicit: the client sent the whole object as it read it, so a change made meanwhile
            # is the client's to merge (kube retries only when the strategy allows unconditional
            # updates and the request named no resourceVersion; here an update never retries)
            return outcome, True
        return await self._guaranteed(r, key, name, change, dry_run=dry_run)

    def _admit_signer(self, r: Resource, old: dict, outcome, subresource: str) -> None:
        """The CertificateApproval and CertificateSigning admissions: approving, and issuing a
        certificate, need `approve` / `sign` on the request's signer (a caller the transport
        did not authenticate is not asked about, as RBAC does not ask it either)."""
        user = caller.current_user()
        if r.kind != certificates.KIND or self.authorize is None or user is None \
                or not isinstance(outcome, Write):
            return
        needed = certificates.signer_permission(old, outcome.obj, subresource)
        if needed is None:
            return
        verb, signer = needed
        if not any(self.authorize(a).allowed for a in certificates.signer_attributes(user, verb, signer)):
            raise Forbidden(f'{r.plural}.{r.group} "{st.object_name(old)}" is forbidden: user not '
                            f'permitted to {verb} requests with signerName "{signer}"', {"reason": "Forbidden"})

    # --- patch

    async def patch(self, resource: Any, name: Any, patch: Any, namespace: str | None = None,
                    patch_type: str = "merge", subresource: str | None = None, dry_run: bool = False,
                    field_validation: FieldValidation | None = None, field_manager: str | None = None) -> dict:
        r = _resource(resource)
        sub = st.patch_subresource(r, subresource)
        key = _key(r, namespace if r.namespaced else None, name)

        def change(old: dict, rev: int):
            new, explicit = st.patched(r, old, rev, patch, patch_type)
            outcome = st.prepare_update(r, old, rev, new, status=sub == "status", approval=sub == "approval",
                                        now=self.clock(), field_validation=field_validation, warn=warnings.add)
            self._admit_signer(r, old, outcome, sub)
            _admit_node_key(r, old, outcome, self.key_owners)
            return outcome, explicit
        return await self._guaranteed(r, key, name, change, dry_run=dry_run)

    # --- delete

    async def delete(self, resource: Any, name: Any, namespace: str | None = None,
                     grace_period_seconds: int | None = None, propagation_policy: str | None = "Background",
                     preconditions: dict | None = None, dry_run: bool = False) -> dict:
        r = _resource(resource)
        policy = st.delete_options(grace_period_seconds, propagation_policy)
        key = _key(r, namespace if r.namespaced else None, name)
        return await self._delete(r, key, name, grace_period_seconds, policy, preconditions, dry_run)

    async def _delete(self, r: Resource, key: str, name: Any, grace: int | None, policy: str,
                      preconditions: Any, dry_run: bool) -> dict:
        def change(old: dict, rev: int):
            st.check_preconditions(r, name, old, preconditions)
            return st.prepare_delete(r, old, grace, policy, now=self.clock()), False
        return await self._guaranteed(r, key, name, change, dry_run=dry_run)

    async def delete_collection(self, resource: Any, namespace: str | None = None, label_selector: str = "",
                                field_selector: str = "", grace_period_seconds: int | None = None,
                                propagation_policy: str | None = "Background", dry_run: bool = False) -> dict:
        """Delete every object the selectors match (in `namespace`, or everywhere): the List of
        what each delete answered (objects deleted meanwhile by others are left out)."""
        r = _resource(resource)
        policy = st.delete_options(grace_period_seconds, propagation_policy)
        listed = await self.list(r, namespace=namespace, label_selector=label_selector,
                                 field_selector=field_selector)
        items = []
        for obj in listed["items"]:
            meta = obj["metadata"]
            key = _key(r, meta.get("namespace"), meta.get("name"))
            try:
                items.append(await self._delete(r, key, meta.get("name"), grace_period_seconds, policy,
                                                None, dry_run))
            except NotFound:
                continue
        return {**listed, "items": items}

    async def evict(self, name: Any, namespace: str | None = None, object: Any = None, dry_run: bool = False,
                    field_validation: FieldValidation | None = None, field_manager: str | None = None) -> dict:
        """pods/eviction: the pod deleted with the policy/v1 Eviction's deleteOptions once its
        PodDisruptionBudget allows it (the rule and its order: eviction.py); answers
        kube-apiserver's Status. An Eviction has no fields to validate beyond its deleteOptions."""
        ns = namespace or "default"
        options = st.eviction_delete_options(name, {} if object is None else object, dry_run)
        retry = not eviction.caller_precondition(options)
        for attempt in range(eviction.RETRIES):
            pod = await self.get("pods", name, ns)
            if not eviction.can_ignore_budget(pod):
                break
            try:
                await self.delete("pods", name, ns, **eviction.guarded(options, pod))
                return EVICTED
            except Conflict:
                if not retry or attempt == eviction.RETRIES - 1:
                    raise
                await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        pdbs = (await self.list("poddisruptionbudgets", ns))["items"]
        pdb = eviction.budget_of(pod, pdbs)
        guard = pdb is not None and eviction.unhealthy_may_go(pod, pdb)
        if pdb is not None and not guard:
            await self._spend_disruption(pod, pdb, options["dry_run"])
        try:
            await self.delete("pods", name, ns, **(eviction.guarded(options, pod, always=True) if guard else options))
        except Conflict:
            if guard and retry:
                raise eviction.still_processing(pdb["metadata"]["name"])
            raise
        return EVICTED

    async def _spend_disruption(self, pod: dict, pdb: dict, dry_run: bool) -> None:
        """checkAndDecrement under RetryOnConflict: the PDB written with its resourceVersion, re-read
        after a conflict (another eviction spent a disruption meanwhile)."""
        pdb_name, ns = pdb["metadata"]["name"], pdb["metadata"].get("namespace")
        for attempt in range(eviction.RETRIES):
            spent = eviction.spend(pod["metadata"]["name"], pdb, st.timestamp(self.clock()), dry_run)
            if spent is None:
                return
            try:
                await self.update_status("poddisruptionbudgets", spent, ns)
                return
            except Conflict:
                await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                pdb = await self.get("poddisruptionbudgets", pdb_name, ns)
        raise st.Timeout(eviction.conflicts_message(pdb_name), {"reason": "Timeout", "retryAfterSeconds": 10})

    def _wrote(self, r: Resource, key: str, name: str, revision: int, obj: dict | None = None) -> None:
        """Note a write this apiserver made at `revision`: of `obj` (None: a delete), which gets
        that resourceVersion. Creates check their namespace's state; the watch cache takes `obj`
        as its event's object instead of decoding the stored value, so from here on `obj` is
        shared read-only, with every watcher and with the caller the handler returns it to."""
        if r.kind == "Namespace":
            self.namespaces.wrote(name, revision)
        if obj is not None:
            meta = obj["metadata"]
            # last, where decode puts it (encode left it out): the object is then what the cacher
            # would decode, down to its keys' order in what watchers are sent
            meta.pop("resourceVersion", None)
            meta["resourceVersion"] = str(revision)
            self.cache.wrote(registry_prefix(r), key, revision, obj)

    # --- subresources

    async def log(self, name: Any, namespace: str | None = None, container: str | None = None,
                  previous: bool = False, tail_lines: int | None = None, limit_bytes: int | None = None) -> dict:
        """The pod log subresource (podlogs.py): {"log": text}."""
        if self.state_dir is None:
            raise podlogs.no_state_dir()
        pod = await self.get("pods", name, namespace or "default")
        path = podlogs.log_path(self.state_dir, pod, container, bool(previous))
        return {"log": await asyncio.to_thread(podlogs.read_log, path, tail_lines, limit_bytes)}

    async def bind(self, name: Any, node: Any, namespace: str | None = None, resource: Any = "pods",
                   dry_run: bool = False, field_validation: FieldValidation | None = None,
                   field_manager: str | None = None) -> dict:
        r = _resource(resource)
        st.check_binding(r, name, node)
        key = _key(r, namespace or "default", name)
        return await self._guaranteed(r, key, name, lambda old, rev: (
            Write(st.prepare_bind(r, old, node, now=self.clock())), False), dry_run=dry_run)

    def _scalable(self, resource: Any) -> Resource:
        r = _resource(resource)
        st.check_scalable(r)
        return r

    async def get_scale(self, resource: Any, name: Any, namespace: str | None = None) -> dict:
        r = self._scalable(resource)
        obj, _ = await self.storage.get(_key(r, namespace or "default", name))
        if obj is None:
            raise not_found(r, name)
        return scale_of(obj)

    async def update_scale(self, resource: Any, name: Any, replicas: Any, namespace: str | None = None,
                           resource_version: str | None = None, dry_run: bool = False,
                           field_validation: FieldValidation | None = None, field_manager: str | None = None) -> dict:
        """`replicas`: a count, or an autoscaling/v1 Scale."""
        r = self._scalable(resource)
        key = _key(r, namespace or "default", name)
        explicit = resource_version not in (None, "")

        def change(old: dict, rev: int):
            st.check_resource_version(r, name, resource_version, rev)
            new = st.prepare_scale(old, replicas, field_validation=field_validation, warn=warnings.add)
            return st.prepare_update(r, old, rev, new, status=False), explicit
        return scale_of(await self._guaranteed(r, key, name, change, dry_run=dry_run))

    # --- watch

    async def watch(self, resource: Any, namespace: str | None = None, label_selector: str = "",
                    field_selector: str = "", resource_version: Any = "", allow_bookmarks: bool = False,
                    batched: bool = False):
        """Watch events, one at a time; `batched` (the wire's): the events at hand together, as a
        `Batch` of up to WATCH_BATCH (a write burst reaches each watcher in a few messages)."""
        r = _resource(resource)
        prefix = self._prefix(r, namespace)
        type_prefix = registry_prefix(r)
        match = _matcher(r, label_selector, field_selector)
        rv = "" if resource_version is None else str(resource_version)
        if rv in ("", "0"):
            listed = await self.list(r, namespace=namespace or None, label_selector=label_selector,
                                     field_selector=field_selector)
            start = int(listed["metadata"]["resourceVersion"])
            added = [{"type": "ADDED", "object": obj} for obj in listed["items"]]
            if batched:
                for i in range(0, len(added), WATCH_BATCH):
                    yield Batch(added[i:i + WATCH_BATCH])
            else:
                for event in added:
                    yield event
        else:
            start = st.parse_resource_version(rv, "resource_version")
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
                outs = []
                while item is not done and not isinstance(item, BaseException):
                    last = max(last, item.revision)
                    out = self._translate(item, prefix, match)
                    if out is not None:
                        outs.append(out)
                    if not batched or len(outs) >= WATCH_BATCH or queue.empty():
                        item = None
                        break
                    item = queue.get_nowait()
                if len(outs) > 1:
                    yield Batch(outs)
                elif outs:
                    yield outs[0]
                if item is done:
                    return
                if item is not None:
                    raise item
        finally:
            task.cancel()
            try:
                await task
            except BaseException:
                pass
            if watcher is not None:
                self.cache.cacher(type_prefix).unregister(watcher)

    def _translate(self, ev: CacheEvent, prefix: str, match) -> dict | None:
        if not ev.key.startswith(prefix):
            return None
        old_match = ev.old is not None and match(ev.old, ev.old_fields)
        if ev.type == "PUT":
            cur_match = match(ev.obj, ev.fields)
            if cur_match:
                return self._watch_events.get(ev, "MODIFIED" if old_match else "ADDED")
            if old_match:  # left the selection
                return self._watch_events.get(ev, "DELETED")
            return None
        if old_match:
            return self._watch_events.get(ev, "DELETED")
        return None

    # --- startup

    async def ensure_system_namespaces(self) -> None:
        for ns in SYSTEM_NAMESPACES:
            if await self.namespaces.get(ns) is not None:
                continue
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


class WatchEvents:
    """Watch events as sent, one per (cache event, type) however many watchers it goes to, and
    their objects: SharedItems, so the wire packs each once (kube-apiserver's cachingObject).
    Every watcher of a resource translates the same CacheEvent within moments of the others;
    the last `kept` items are remembered (a watcher further behind gets an equal event of its
    own)."""

    def __init__(self, kept: int = WATCH_EVENTS_KEPT):
        self._kept = kept
        # (revision, key, type or what object) -> the SharedItem; a revision and a key name one
        # write, so the memory is exact. Ordered: the oldest is forgotten first.
        self._made: collections.OrderedDict[tuple[int, str, str], SharedItem] = collections.OrderedDict()

    def get(self, ev: CacheEvent, type_: str) -> SharedItem:
        """The event of type `type_`: ADDED and MODIFIED carry ev's object, DELETED the state
        it replaced at ev's revision (kube's cacher does so for a PUT leaving a selection too);
        ADDED and MODIFIED share their object."""
        out = self._made.get((ev.revision, ev.key, type_))
        if out is None:
            which = "old" if type_ == "DELETED" else "new"
            obj = self._made.get((ev.revision, ev.key, which))
            if obj is None:
                obj = self._remember((ev.revision, ev.key, which), SharedItem(
                    _at(ev.old, ev.revision) if which == "old" else ev.obj))
            out = self._remember((ev.revision, ev.key, type_), SharedItem(type=type_, object=obj))
        return out

    def _remember(self, key: tuple[int, str, str], item: SharedItem) -> SharedItem:
        if len(self._made) >= self._kept:
            self._made.popitem(last=False)
        self._made[key] = item
        return item
