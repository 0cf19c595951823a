"""The roles and bindings RBAC decides with, kept current from the watch cache.

Each of the four RBAC kinds (ClusterRoles, Roles, ClusterRoleBindings, RoleBindings) is listed
(in pages, at one revision) and then followed through the apiserver's watch cache, as
kube-apiserver's RBAC authorizer follows them through its informers. If a watch ends (the store
watch failed, the history was compacted), that kind is listed again after a pause, and
meanwhile the last state known keeps serving, as an informer's cache does.

Decisions are `kubemu.api.rbac.authorize` on a snapshot (`RBACView`), rebuilt on the first
decision after a change. Until every kind has been listed once, the cache knows nothing: a
request is refused with a reason saying so (`rbac.NOT_LOADED`), members of system:masters
aside. A refusal rather than a wait, because `authorize` is called on every request and must
not block; the window is the apiserver's first moments, and `wait_synced` lets a caller (a
readiness check, a test) wait for its end.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from kubemu.api import rbac
from kubemu.api.authz import Attributes, Decision
from kubemu.api.identity import UserInfo
from kubemu.api.resources import for_object, registry_key, registry_prefix

from .storage import Storage
from .watchcache import WatchCache

log = logging.getLogger("kubemu.apiserver.rbaccache")

DECISIONS_KEPT = 4096  # decisions remembered per view (every distinct request, bounded)
PREFIXES = tuple(registry_prefix(plural) for plural in
                 ("clusterroles", "roles", "clusterrolebindings", "rolebindings"))
PAGE = 500           # objects per list call: a list reply stays well under the wire's frame limit
RETRY_SECONDS = 1.0  # pause before listing a kind again after its watch ended


async def list_all(storage: Storage, prefix: str) -> tuple[dict[str, dict], int]:
    """Every object under `prefix` (registry key -> object) at one revision, read in pages."""
    objects: dict[str, dict] = {}
    start, revision = None, 0
    while True:
        items, revision, more = await storage.list(prefix, start=start, revision=revision, limit=PAGE)
        for key, obj in items:
            objects[key.decode() if isinstance(key, bytes) else key] = obj
        if not more or not items:
            return objects, revision
        last = items[-1][0]
        start = (last if isinstance(last, bytes) else last.encode()) + b"\0"


class RBACCache:
    def __init__(self, cache: WatchCache, *, retry_seconds: float = RETRY_SECONDS):
        self._cache = cache
        self._storage = Storage(cache.client)
        self._retry = retry_seconds
        self._objects: dict[str, dict[str, dict]] = {}  # prefix -> registry key -> object
        self._view: rbac.RBACView | None = None          # None: rebuild on the next decision
        self._synced = asyncio.Event()
        self._decided: dict[Attributes, Decision] = {}
        self._decided_for: rbac.RBACView | None = None
        self._names_matter: dict[tuple[str, str, str, str], bool] = {}  # for _decided_for
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        """Start following the four kinds (returns at once; see `wait_synced`)."""
        if not self._tasks:
            self._tasks = [asyncio.create_task(self._follow(p), name=f"rbac cache {p}")
                           for p in PREFIXES]

    @property
    def synced(self) -> bool:
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Until every kind has been listed once."""
        await self._synced.wait()

    def view(self) -> rbac.RBACView | None:
        """The current snapshot, or None before the first sync."""
        if not self.synced:
            return None
        if self._view is None:
            self._view = rbac.view(obj for objs in self._objects.values() for obj in objs.values())
        return self._view

    def has(self, obj: dict) -> bool:
        """Whether an object of the four kinds, with obj's kind, namespace and name, is known."""
        r = for_object(obj)
        meta = obj.get("metadata") or {}
        key = registry_key(r, meta.get("namespace") if r.namespaced else None, meta.get("name"))
        return key in self._objects.get(registry_prefix(r), {})

    def authorize(self, attrs: Attributes) -> Decision:
        """rbac.authorize on the current view, remembered until the view changes: components
        ask the same few questions thousands of times a second."""
        v = self.view()
        if v is None:
            return rbac.authorize(attrs, None)
        if self._decided_for is not v:
            self._decided, self._names_matter, self._decided_for = {}, {}, v
        # Keyed without the object's name when no rule could match by name: otherwise every
        # pod, event and binding is a distinct question and the memory never hits.
        key = attrs if not attrs.name or self._name_matters(attrs, v) else replace(attrs, name="")
        decision = self._decided.get(key)
        if decision is None:
            if len(self._decided) >= DECISIONS_KEPT:
                self._decided.clear()
            decision = self._decided[key] = rbac.authorize(attrs, v)
        return decision

    def _name_matters(self, attrs: Attributes, v: rbac.RBACView) -> bool:
        """Whether a rule with resourceNames in `v` matches the request's verb, group and
        resource: only such a rule makes a decision depend on the name (a rule without
        resourceNames allows any name; a decision's reason never names the object)."""
        what = (attrs.verb, attrs.api_group, attrs.resource, attrs.subresource)
        matters = self._names_matter.get(what)
        if matters is None:
            if len(self._names_matter) >= DECISIONS_KEPT:  # HTTPS asks of any resource named in a path
                self._names_matter.clear()
            matters = self._names_matter[what] = any(
                rule.resource_names and rule.allows(replace(attrs, name=rule.resource_names[0]))
                for rules in (*v.cluster_roles.values(), *v.roles.values()) for rule in rules)
        return matters

    def rules_for(self, user: UserInfo, namespace: str) -> rbac.Rules:
        return rbac.rules_for(user, namespace, self.view())

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except BaseException:
                pass
        self._tasks = []

    # -- following one kind --

    async def _follow(self, prefix: str) -> None:
        failing = False
        while True:
            try:
                objects, revision = await self._list(prefix)
                self._replace(prefix, objects)
                if failing:
                    log.info("RBAC cache of %s resumed at revision %d", prefix, revision)
                failing = False
                source, _ = await self._cache.open(prefix, revision)
                try:
                    async for ev in source:
                        self._apply(prefix, ev.key, ev.obj)
                finally:
                    await source.aclose()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the last state known keeps serving until the relist
                if not failing:
                    log.warning("RBAC cache of %s stopped: %s; listing again", prefix, exc)
                failing = True
            await asyncio.sleep(self._retry)

    async def _list(self, prefix: str) -> tuple[dict[str, dict], int]:
        return await list_all(self._storage, prefix)

    def _replace(self, prefix: str, objects: dict[str, dict]) -> None:
        self._objects[prefix] = objects
        self._view = None
        if len(self._objects) == len(PREFIXES):
            self._synced.set()

    def _apply(self, prefix: str, key: str, obj: dict | None) -> None:
        if obj is None:
            self._objects[prefix].pop(key, None)
        else:
            self._objects[prefix][key] = obj
        self._view = None
