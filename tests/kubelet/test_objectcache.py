"""The kubelet's ConfigMap/Secret watches against a real store and apiserver, and its token
cache (with a fake client and clock)."""
from __future__ import annotations

import asyncio
import base64
import uuid

import pytest

from kubelet.configsource import Unavailable
from kubelet.objectcache import TOKEN_RETRY, ObjectCache, TokenCache
from kubemu.apiclient import ApiClient
from kubemu.wire import NotFound
from tests.components.apiserver import api  # noqa: F401  (a module-scoped fixture)
from tests.conftest import DEADLINE


async def until(condition, message: str):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while True:
        try:
            if condition():
                return
        except Unavailable:
            pass
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {message}")
        await asyncio.sleep(0.02)


def test_a_referenced_configmap_and_secret_are_watched_from_absent_to_edited_to_deleted(api):
    name = f"cfg-{uuid.uuid4().hex[:8]}"

    async def scenario():
        client = ApiClient(api.endpoint, timeout=10.0)
        changes = []
        cache = ObjectCache(client, changes.append)
        cm_ref, secret_ref = ("configmaps", "default", name), ("secrets", "default", name)
        try:
            with pytest.raises(Unavailable, match=f'object "default"/"{name}" not registered'):
                cache.lookup(*cm_ref)
            waiter = asyncio.create_task(cache.wait_synced({cm_ref, secret_ref}, DEADLINE))
            await asyncio.sleep(0)  # waiting before the pod's references are set
            cache.set_references({cm_ref, secret_ref})
            assert await waiter
            assert cache.lookup(*cm_ref) is None and cache.lookup(*secret_ref) is None

            await client.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": name}, "data": {"k": "v1"}},
                                namespace="default")
            await client.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": name + "-other"}},
                                namespace="default")
            await until(lambda: (cache.lookup(*cm_ref) or {}).get("data") == {"k": "v1"},
                        "the ConfigMap")
            await client.patch("configmaps", name, {"data": {"k": "v2"}}, namespace="default")
            await until(lambda: cache.lookup(*cm_ref)["data"] == {"k": "v2"}, "the edit")
            await client.create("secrets", {"apiVersion": "v1", "kind": "Secret",
                                            "metadata": {"name": name},
                                            "stringData": {"pw": "x"}}, namespace="default")
            await until(lambda: cache.lookup(*secret_ref) is not None, "the Secret")
            assert cache.lookup(*secret_ref)["data"] == {"pw": base64.b64encode(b"x").decode()}
            await client.delete("configmaps", name, namespace="default")
            await until(lambda: cache.lookup(*cm_ref) is None, "the deletion")
            # only the objects referenced are watched, and each change is heard
            assert set(changes) == {cm_ref, secret_ref}

            cache.set_references({secret_ref})
            with pytest.raises(Unavailable, match="not registered"):
                cache.lookup(*cm_ref)
            assert cache.synced({secret_ref}) and not cache.synced({cm_ref})
            assert cache.watching(secret_ref) and not cache.watching(cm_ref)
        finally:
            await cache.close()
            await client.delete("configmaps", name + "-other", namespace="default")
            await client.delete("secrets", name, namespace="default")
            await client.close()

    asyncio.run(scenario())


def test_an_immutable_object_is_kept_and_no_longer_watched(api):
    name = f"frozen-{uuid.uuid4().hex[:8]}"

    async def scenario():
        client = ApiClient(api.endpoint, timeout=10.0)
        cache = ObjectCache(client, lambda ref: None)
        ref = ("configmaps", "default", name)
        try:
            await client.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                               "metadata": {"name": name}, "data": {"k": "v"},
                                               "immutable": True}, namespace="default")
            cache.set_references({ref})
            assert await cache.wait_synced({ref}, DEADLINE)
            await until(lambda: not cache.watching(ref), "the watch to end by itself")
            await client.delete("configmaps", name, namespace="default")
            assert cache.lookup(*ref)["data"] == {"k": "v"}
        finally:
            await cache.close()
            await client.close()

    asyncio.run(scenario())


def test_waiting_for_an_object_nobody_referenced_times_out():
    async def scenario():
        cache = ObjectCache(None, lambda ref: None)
        assert not await cache.wait_synced({("configmaps", "ns", "x")}, 0.1)
    asyncio.run(scenario())


class FakeTokens:
    def __init__(self):
        self.requests = []
        self.fail = False

    async def token_request(self, name, request, namespace):
        self.requests.append((namespace, name, request))
        if self.fail:
            raise NotFound(f'serviceaccounts "{name}" not found')
        return {"spec": {"expirationSeconds": request["spec"]["expirationSeconds"]},
                "status": {"token": f"t{len(self.requests)}"}}


POD = {"metadata": {"name": "web", "uid": "u1"}}


def test_tokens_are_bound_to_the_pod_cached_and_refreshed_at_80_percent_of_their_life():
    async def scenario():
        now = [1000.0]
        client, woken = FakeTokens(), []
        tokens = TokenCache(client, lambda: woken.append(1), clock=lambda: now[0])
        with pytest.raises(Unavailable, match='requesting a token for service account "ns/robot"'):
            tokens.token("ns", "robot", "vault", 3600, POD)
        await until(lambda: woken, "the token")
        assert tokens.token("ns", "robot", "vault", 3600, POD) == "t1"
        namespace, name, request = client.requests[0]
        assert (namespace, name) == ("ns", "robot")
        assert request["spec"] == {"audiences": ["vault"], "expirationSeconds": 3600,
                                   "boundObjectRef": {"apiVersion": "v1", "kind": "Pod",
                                                      "name": "web", "uid": "u1"}}
        now[0] += 0.8 * 3600 + 1
        assert tokens.token("ns", "robot", "vault", 3600, POD) == "t1"  # still valid meanwhile
        await until(lambda: len(woken) == 2, "the refresh")
        assert tokens.token("ns", "robot", "vault", 3600, POD) == "t2"
        assert len(client.requests) == 2
    asyncio.run(scenario())


def test_a_failed_token_request_is_the_reason_and_is_retried_after_a_pause():
    async def scenario():
        now = [1000.0]
        client, woken = FakeTokens(), []
        client.fail = True
        tokens = TokenCache(client, lambda: woken.append(1), clock=lambda: now[0])
        with pytest.raises(Unavailable):
            tokens.token("ns", "robot", None, 3600, POD)
        await until(lambda: woken, "the failure")
        with pytest.raises(Unavailable, match='failed to fetch token: serviceaccounts "robot" not found'):
            tokens.token("ns", "robot", None, 3600, POD)
        await asyncio.sleep(0.05)
        assert len(client.requests) == 1  # not again at once
        client.fail = False
        now[0] += TOKEN_RETRY
        with pytest.raises(Unavailable):
            tokens.token("ns", "robot", None, 3600, POD)
        await until(lambda: len(woken) == 2, "the retry")
        assert tokens.token("ns", "robot", None, 3600, POD) == "t2"
        assert client.requests[1][2]["spec"]["audiences"] == []
    asyncio.run(scenario())
