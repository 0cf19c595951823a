"""components.apiserver.rbaccache: RBAC decisions from roles and bindings followed through the
watch cache (on the in-memory storage, no store processes)."""
from __future__ import annotations

import asyncio
import time

import pytest

from components.apiserver import rbaccache
from components.apiserver.memstorage import MemStorage
from components.apiserver.rbaccache import RBACCache
from components.apiserver.storage import encode
from components.apiserver.watchcache import WatchCache
from kubemu import wire
from kubemu.api import rbac
from kubemu.api.authz import Attributes
from kubemu.api.bootstrap_policy import bootstrap_objects
from kubemu.api.identity import UserInfo, authenticated
from kubemu.api.resources import for_object, registry_key
from tests.conftest import DEADLINE

GROUP = "rbac.authorization.k8s.io"
JANE_LISTS_PODS = Attributes(authenticated("jane"), "list", True, "", "v1", "pods", "", "default")


def binding(name, role, user, namespace=None):
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    return {"apiVersion": f"{GROUP}/v1", "kind": kind,
            "metadata": {"name": name, **({"namespace": namespace} if namespace else {})},
            "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "apiGroup": GROUP, "name": user}]}


def key(obj):
    meta = obj["metadata"]
    return registry_key(for_object(obj), meta.get("namespace"), meta["name"])


async def put(storage, obj) -> None:
    assert isinstance(await storage.create(key(obj), encode(obj)), int), f"{key(obj)} exists"


async def remove(storage, obj) -> None:
    # a failed delete answers the key's Current (truthy), and deleting an absent key succeeds:
    # only a stored object and a revision back mean it was deleted
    current = await storage.read(key(obj))
    assert current.value is not None, f"{key(obj)} is not stored"
    assert isinstance(await storage.delete(key(obj), current.revision), int), f"{key(obj)} changed meanwhile"


async def eventually(condition, message=""):
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {message or condition}")
        await asyncio.sleep(0.01)


def run(test, *, objects=(), retry_seconds=0.01):
    async def main():
        storage = MemStorage()
        for obj in objects:
            await put(storage, obj)
        cache = WatchCache(storage.client)
        rbac_cache = RBACCache(cache, retry_seconds=retry_seconds)
        try:
            await asyncio.wait_for(test(storage, cache, rbac_cache), DEADLINE)
        finally:
            await rbac_cache.close()
            await cache.close()
    asyncio.run(main())


def test_nothing_but_system_masters_is_allowed_before_the_first_sync_then_the_policy_applies():
    async def body(storage, cache, rbac_cache):
        refused = rbac_cache.authorize(JANE_LISTS_PODS)
        assert (refused.allowed, refused.reason) == (False, rbac.NOT_LOADED)
        root = Attributes(UserInfo("root", ("system:masters",)), "delete", True, "", "v1", "nodes")
        assert rbac_cache.authorize(root).allowed
        assert rbac_cache.rules_for(authenticated("jane"), "default").incomplete
        await rbac_cache.start()
        await asyncio.wait_for(rbac_cache.wait_synced(), DEADLINE)
        assert not rbac_cache.authorize(JANE_LISTS_PODS).allowed
        assert rbac_cache.authorize(JANE_LISTS_PODS).reason == ""
        jane_reads = Attributes(authenticated("jane"), "get", False, path="/version")
        assert rbac_cache.authorize(jane_reads).allowed
    run(body, objects=bootstrap_objects())


def test_bindings_created_and_deleted_after_the_sync_are_followed():
    async def body(storage, cache, rbac_cache):
        await rbac_cache.start()
        await rbac_cache.wait_synced()
        grant = binding("jane-views", "view", "jane", namespace="default")
        await put(storage, grant)
        await eventually(lambda: rbac_cache.authorize(JANE_LISTS_PODS).allowed, "the grant")
        assert rbac_cache.authorize(JANE_LISTS_PODS).reason == (
            'RBAC: allowed by RoleBinding "jane-views/default" of ClusterRole "view" to '
            'User "jane"')
        await remove(storage, grant)
        await eventually(lambda: not rbac_cache.authorize(JANE_LISTS_PODS).allowed, "the revoke")
    run(body, objects=bootstrap_objects())


def test_a_role_changed_after_the_sync_changes_the_decision_and_aggregation():
    async def body(storage, cache, rbac_cache):
        await rbac_cache.start()
        await rbac_cache.wait_synced()
        extra = {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRole",
                 "metadata": {"name": "secrets-reader",
                              "labels": {f"{GROUP}/aggregate-to-view": "true"}},
                 "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]}
        await put(storage, extra)
        secrets = Attributes(authenticated("jane"), "get", True, "", "v1", "secrets", "",
                             "default", "s")
        await eventually(lambda: rbac_cache.authorize(secrets).allowed, "the aggregated rule")
    run(body, objects=bootstrap_objects() + [binding("jane-views", "view", "jane", "default")])


def test_decisions_remembered_without_the_name_stay_exact_when_a_resource_names_rule_comes(monkeypatch):
    """Decisions are remembered per request without the object's name while no rule names
    objects of that kind: one rbac.authorize for many pods. A rule with resourceNames added
    later makes names matter again, for that verb and resource only."""
    calls = []
    real = rbac.authorize
    monkeypatch.setattr(rbac, "authorize", lambda a, v: calls.append(a.name) or real(a, v))

    def get_secret(name):
        return Attributes(authenticated("jane"), "get", True, "", "v1", "secrets", "", "default", name)

    async def body(storage, cache, rbac_cache):
        await rbac_cache.start()
        await rbac_cache.wait_synced()
        assert not any(rbac_cache.authorize(get_secret(f"c{i}")).allowed for i in range(5))
        assert calls == ["c0"]  # one decision for the five names
        await put(storage, {"apiVersion": f"{GROUP}/v1", "kind": "Role",
                            "metadata": {"name": "one-secret", "namespace": "default"},
                            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"],
                                       "resourceNames": ["c1"]}]})
        await put(storage, {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding",
                            "metadata": {"name": "one-secret", "namespace": "default"},
                            "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "one-secret"},
                            "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "jane"}]})
        await eventually(lambda: rbac_cache.authorize(get_secret("c1")).allowed, "the named grant")
        assert not rbac_cache.authorize(get_secret("c0")).allowed
        assert not rbac_cache.authorize(get_secret("c2")).allowed
        assert rbac_cache.authorize(get_secret("c1")).allowed  # remembered per name now
        # pods: no rule names any, so one decision serves every pod name again
        calls.clear()
        pods = [Attributes(authenticated("jane"), "get", True, "", "v1", "pods", "", "default", f"p{i}")
                for i in range(3)]
        assert [rbac_cache.authorize(p).allowed for p in pods] == [False] * 3
        assert calls == ["p0"]
    run(body, objects=bootstrap_objects())


def test_the_initial_list_is_read_in_pages(monkeypatch):
    monkeypatch.setattr(rbaccache, "PAGE", 2)
    bindings = [binding(f"b{i}", "view", f"user-{i}", namespace="default") for i in range(5)]

    async def body(storage, cache, rbac_cache):
        await rbac_cache.start()
        await rbac_cache.wait_synced()
        for i in range(5):
            a = Attributes(authenticated(f"user-{i}"), "list", True, "", "v1", "pods", "",
                           "default")
            assert rbac_cache.authorize(a).allowed, i
    run(body, objects=bootstrap_objects() + bindings)


class GatedClient:
    """The in-memory store client, whose reads wait while `gate` is clear."""

    def __init__(self, client):
        self._client = client
        self.gate = asyncio.Event()
        self.gate.set()

    async def range(self, *args, **kwargs):
        await self.gate.wait()
        return await self._client.range(*args, **kwargs)


class EndingCache:
    """A watch cache whose watches deliver nothing, and end (Unavailable) when `end` is set."""

    def __init__(self, client):
        self.client = client
        self.end = asyncio.Event()
        self.opened = 0

    async def open(self, prefix, start):
        self.opened += 1
        return self._watch(self.end), None

    async def _watch(self, end):
        await end.wait()
        raise wire.Unavailable("the store watch failed")
        yield  # an async generator, as the watch cache's sources are


def test_after_a_watch_ends_the_last_state_serves_until_the_kind_is_listed_again(caplog):
    caplog.set_level("INFO", logger="kubemu.apiserver.rbaccache")
    version = Attributes(authenticated("jane"), "get", False, path="/version")

    async def main():
        storage = MemStorage()
        for obj in bootstrap_objects():
            await put(storage, obj)
        client = GatedClient(storage.client)
        cache = EndingCache(client)
        rbac_cache = RBACCache(cache, retry_seconds=0.01)
        try:
            await rbac_cache.start()
            await asyncio.wait_for(rbac_cache.wait_synced(), DEADLINE)
            await put(storage, binding("late", "view", "jane", namespace="default"))
            assert not rbac_cache.authorize(JANE_LISTS_PODS).allowed  # no watch brings it
            client.gate.clear()  # the lists after the failure wait
            ended, cache.end = cache.end, asyncio.Event()
            ended.set()
            await eventually(lambda: caplog.text.count("stopped: Unavailable") == 4, "the ends")
            assert rbac_cache.authorize(version).allowed  # the last state still decides
            assert not rbac_cache.authorize(JANE_LISTS_PODS).allowed
            client.gate.set()
            await eventually(lambda: rbac_cache.authorize(JANE_LISTS_PODS).allowed, "the relist")
            await eventually(lambda: cache.opened == 8, "the watches again")
            assert caplog.text.count("resumed at revision") == 4
        finally:
            await rbac_cache.close()
    asyncio.run(main())


def test_close_stops_following():
    async def body(storage, cache, rbac_cache):
        await rbac_cache.start()
        await rbac_cache.wait_synced()
        await rbac_cache.close()
        assert not [t for t in asyncio.all_tasks() if t.get_name().startswith("rbac cache")]
    run(body, objects=bootstrap_objects())
