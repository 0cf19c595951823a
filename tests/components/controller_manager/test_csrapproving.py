"""The CSR approver's shell, with a fake API: it asks the reviews the core names, approves on
the first allowed, and retries later when none is (a binding may come)."""
from __future__ import annotations

import asyncio
import random

import pytest

from components.apiserver import strategy as st
from components.controller_manager.csrapproving import CSRApprover
from components.controller_manager.workers import RetryLater
from kubemu.api.identity import UserInfo
from kubemu.api.resources import resolve
from tests.kubemu.api.test_certificates import NOW, csr_object


class FakeInformer:
    def __init__(self, objects):
        self.objects = objects

    def add_event_handler(self, *handlers):
        pass

    def get(self, key):
        return self.objects.get(key)


class FakeInformers:
    def __init__(self, objects):
        self.fake = FakeInformer(objects)

    def informer(self, resource):
        assert resource == "certificatesigningrequests"
        return self.fake


class FakeAPI:
    def __init__(self, allowed: set[str]):
        self.allowed = allowed
        self.reviews, self.approved = [], []

    async def review(self, resource, obj):
        sub = obj["spec"]["resourceAttributes"]["subresource"]
        self.reviews.append(sub)
        return {**obj, "status": {"allowed": sub in self.allowed}}

    async def update_approval(self, obj):
        self.approved.append(obj)
        return obj


def approver(allowed: set[str], user: UserInfo):
    csr = st.prepare_create(resolve("csr"), csr_object("c"), None, now=NOW, rand=random.Random(1), user=user)
    api = FakeAPI(allowed)
    return CSRApprover(api, FakeInformers({"c": csr}), clock=NOW.timestamp), api


def test_a_node_renewing_is_approved_as_selfnodeclient():
    a, api = approver({"selfnodeclient"}, UserInfo("system:node:worker-1", ("system:nodes",)))
    asyncio.run(a.sync("c"))
    assert api.reviews == ["selfnodeclient"] and len(api.approved) == 1
    assert api.approved[0]["status"]["conditions"][0]["message"].startswith("Auto approving self kubelet")


def test_a_request_no_permission_allows_is_retried_later():
    a, api = approver(set(), UserInfo("system:bootstrap:abcdef", ("system:bootstrappers",)))
    with pytest.raises(RetryLater, match="recognized csr 'c' as \\['nodeclient'\\] but subject access review"):
        asyncio.run(a.sync("c"))
    assert api.reviews == ["nodeclient"] and api.approved == []
