"""The action executor against a fake API client: what runs concurrently, what stops a sync,
what the ReplicaSet bookkeeping is told, and which preconditions each write carries."""
from __future__ import annotations

import asyncio

import pytest

from components.controllers import (Adopt, CreatePod, DeleteObject, DeletePod, RemoveFinalizer,
                                    UpdateNode, UpdateStatus)
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from kubemu.apiclient import Conflict, NotFound
from tests.conftest import DEADLINE


class FakeApi:
    """Records every write; `fail` maps (verb, name) to the error that write raises."""

    def __init__(self, fail: dict | None = None):
        self.calls: list[tuple] = []
        self.fail = fail or {}
        self.in_flight = self.most_in_flight = 0
        self.rv = 100

    async def _write(self, verb: str, name: str, **params) -> dict:
        self.calls.append((verb, name, params))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001)
            if (verb, name) in self.fail:
                raise self.fail[(verb, name)]
            self.rv += 1
            return {"metadata": {"name": name, "resourceVersion": str(self.rv)}}
        finally:
            self.in_flight -= 1

    async def create(self, resource, obj, namespace=None):
        name = obj["metadata"]["generateName"] + "x"
        return await self._write("create", name, resource=resource)

    async def patch(self, resource, name, patch, namespace=None, patch_type="merge",
                    subresource=None):
        return await self._write("patch", name, resource=resource, patch=patch,
                                 subresource=subresource)

    async def delete(self, resource, name, namespace=None, *, propagation_policy=None,
                     preconditions=None, grace_period_seconds=None):
        return await self._write("delete", name, resource=resource, policy=propagation_policy,
                                 preconditions=preconditions)


class Bookkeeping:
    def __init__(self):
        self.seen: list[tuple] = []

    def pod_created(self, action, pod):
        self.seen.append(("created", pod["metadata"]["name"]))

    def pod_create_failed(self, action, err):
        self.seen.append(("create failed", type(err).__name__))

    def pod_deleted(self, action):
        self.seen.append(("deleted", action.name))

    def pod_delete_failed(self, action, err):
        self.seen.append(("delete failed", action.name))

    def pod_skipped(self, action):
        self.seen.append(("skipped", type(action).__name__))


class Recorder:
    def __init__(self):
        self.events = []

    def event(self, obj, type_, reason, message):
        self.events.append((reason, message))


def setup(api: FakeApi, *cached: tuple[str, dict]):
    informers = SharedInformers(api)
    for resource, obj in cached:
        informers.informer(resource).indexer.add(obj)
    return ActionExecutor(api, informers, Recorder())


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


def pod_template(prefix: str) -> dict:
    return {"metadata": {"generateName": prefix}, "spec": {}}


def test_a_pod_batch_runs_concurrently_and_failures_dont_stop_the_status():
    api = FakeApi(fail={("create", "b-x"): Conflict("boom")})
    executor = setup(api)
    book = Bookkeeping()
    actions = [CreatePod("ns", pod_template(p)) for p in ("a-", "b-", "c-")] + [
        UpdateStatus("ReplicaSet", "ns", "rs", {"replicas": 2})]
    with pytest.raises(Conflict):
        run(executor.execute(actions, book))
    assert api.most_in_flight == 3
    assert sorted(book.seen) == [("create failed", "Conflict"), ("created", "a-x"),
                                 ("created", "c-x")]
    assert api.calls[-1][:2] == ("patch", "rs")   # the status was still written


def test_a_failed_write_stops_the_sync_and_reports_the_pods_it_skips():
    cached = {"metadata": {"name": "orphan", "namespace": "ns", "uid": "u1",
                           "resourceVersion": "7"}}
    api = FakeApi(fail={("patch", "orphan"): Conflict("modified")})
    executor = setup(api, ("pods", cached))
    book = Bookkeeping()
    ref = {"kind": "ReplicaSet", "uid": "rs-uid", "controller": True}
    actions = [Adopt("Pod", "ns", "orphan", "u1", ref), CreatePod("ns", pod_template("a-")),
               DeletePod("ns", "old", "u2"), UpdateStatus("ReplicaSet", "ns", "rs", {})]
    with pytest.raises(Conflict):
        run(executor.execute(actions, book))
    assert [c[:2] for c in api.calls] == [("patch", "orphan")]
    # the adoption was guarded by the uid and the resourceVersion it was computed from
    assert api.calls[0][2]["patch"]["metadata"] == {"ownerReferences": [ref], "uid": "u1",
                                                    "resourceVersion": "7"}
    assert book.seen == [("skipped", "CreatePod"), ("skipped", "DeletePod")]


def test_deleting_what_is_gone_is_success():
    api = FakeApi(fail={("delete", "p1"): NotFound("gone"),
                        ("delete", "p2"): Conflict("Precondition failed: UID in precondition: x"),
                        ("delete", "rs"): NotFound("gone")})
    executor = setup(api)
    book = Bookkeeping()
    run(executor.execute([DeletePod("ns", "p1", "u1"), DeletePod("ns", "p2", "u2"),
                          DeleteObject("apps/v1", "ReplicaSet", "ns", "rs", "u3")], book))
    assert book.seen == []
    assert all(c[2]["preconditions"] for c in api.calls)


def test_node_writes_chain_their_resource_versions_and_a_status_drops_stale_fields():
    node = {"metadata": {"name": "n1", "resourceVersion": "5"},
            "status": {"conditions": [], "phase": "Running"}}
    api = FakeApi()
    executor = setup(api, ("nodes", node))
    run(executor.execute([UpdateStatus("Node", "", "n1", {"conditions": [{"type": "Ready"}]}),
                          UpdateNode("n1", {"spec": {"taints": []}})]))
    status_patch, taint_patch = (c[2] for c in api.calls)
    assert status_patch["subresource"] == "status"
    assert status_patch["patch"] == {"status": {"phase": None, "conditions": [{"type": "Ready"}]},
                                     "metadata": {"resourceVersion": "5"}}
    assert taint_patch["patch"]["metadata"] == {"resourceVersion": "101"}  # the status write's


def test_independent_actions_go_out_together():
    api = FakeApi(fail={("delete", "p3"): Conflict("modified")})
    executor = setup(api)
    actions = [DeleteObject("v1", "Pod", "ns", f"p{i}", f"u{i}") for i in range(6)]
    with pytest.raises(Conflict):
        run(executor.execute_independent(actions))
    assert len(api.calls) == 6 and api.most_in_flight == 6


class StrategicApi(FakeApi):
    async def patch(self, resource, name, patch, namespace=None, patch_type="merge",
                    subresource=None):
        return await self._write("patch", name, resource=resource, namespace=namespace,
                                 patch=patch, patch_type=patch_type)


def test_a_finalizer_removal_takes_off_that_one_finalizer_of_that_object():
    api = StrategicApi(fail={("patch", "gone"): NotFound("gone"),
                             ("patch", "namesake"): Conflict("Precondition failed: UID in "
                                                             "precondition: u3, UID in object meta: u9")})
    executor = setup(api)
    run(executor.execute([
        RemoveFinalizer("v1", "PersistentVolumeClaim", "db", "data", "u1", "kubernetes.io/pvc-protection"),
        RemoveFinalizer("v1", "PersistentVolume", None, "pv1", "u2", "kubernetes.io/pv-protection"),
        RemoveFinalizer("v1", "PersistentVolume", None, "gone", "u3", "kubernetes.io/pv-protection"),
        RemoveFinalizer("v1", "PersistentVolume", None, "namesake", "u3", "kubernetes.io/pv-protection")]))
    assert api.calls[:2] == [
        ("patch", "data", {"resource": "persistentvolumeclaims", "namespace": "db", "patch_type": "strategic",
                           "patch": {"metadata": {"$deleteFromPrimitiveList/finalizers":
                                                  ["kubernetes.io/pvc-protection"], "uid": "u1"}}}),
        ("patch", "pv1", {"resource": "persistentvolumes", "namespace": None, "patch_type": "strategic",
                          "patch": {"metadata": {"$deleteFromPrimitiveList/finalizers":
                                                 ["kubernetes.io/pv-protection"], "uid": "u2"}}})]
    # gone, or a namesake: done; anything else is the sync's error
    api = StrategicApi(fail={("patch", "data"): Conflict("the object has been modified")})
    with pytest.raises(Conflict):
        run(setup(api).execute([RemoveFinalizer("v1", "PersistentVolumeClaim", "db", "data", "u1", "x")]))


def test_a_csr_status_write_is_guarded_by_the_version_it_was_computed_from():
    """The approver writes a request's conditions too (the approval subresource): the signer's
    status, computed from the cached request, must not overwrite a newer one."""
    csr = {"metadata": {"name": "node-csr-1", "resourceVersion": "9"},
           "status": {"conditions": [{"type": "Approved"}]}}
    api = FakeApi()
    executor = setup(api, ("certificatesigningrequests", csr))
    status = {"conditions": [{"type": "Approved"}], "certificate": "Y2VydA=="}
    run(executor.execute([UpdateStatus("CertificateSigningRequest", None, "node-csr-1", status)]))
    [(verb, name, params)] = api.calls
    assert (verb, name, params["resource"], params["subresource"]) == (
        "patch", "node-csr-1", "certificatesigningrequests", "status")
    assert params["patch"] == {"status": status, "metadata": {"resourceVersion": "9"}}
