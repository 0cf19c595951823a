"""components.apiserver.handlers on the in-memory storage (memstorage.py): the verbs as the REST
door calls them (dry run, field validation, deletecollection, eviction, list resourceVersion
semantics), and the watch cache fed from the same memory, without a store or processes."""
from __future__ import annotations

import asyncio
import copy
import datetime
import random

import pytest

from components.apiserver import warnings
from components.apiserver.audit import AuditLog
from components.apiserver.handlers import API, WATCH_BATCH, WatchEvents
from components.apiserver.memstorage import MemStorage
from components.apiserver.serviceips import parse_port_range
from components.apiserver.servicestrategy import Allocations
from components.apiserver.storage import ABSENT, Current, encode
from components.apiserver.strategy import MethodNotAllowed, Timeout
from components.apiserver.watchcache import CacheEvent, WatchCache
from kubemu import wire
from tests.conftest import DEADLINE

from . import deployment, pod

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


def run(test, *, services: Allocations | None = None):
    """Run `test(api)` on a fresh API over a MemStorage, with its system namespaces."""
    async def main():
        storage = MemStorage()
        cache = WatchCache(storage.client)
        api = API(storage, cache, AuditLog(None), clock=lambda: NOW, rand=random.Random(1), services=services)
        await api.ensure_system_namespaces()
        try:
            return await asyncio.wait_for(test(api), DEADLINE)
        finally:
            await api.namespaces.close()
            await cache.close()
    return asyncio.run(main())


async def revision(api: API) -> int:
    return await api.storage.current_revision("/registry/")


def test_create_get_round_trip_with_the_injected_clock_and_randomness():
    async def body(api):
        a = await api.create("pods", pod(generate_name="gen-"))
        got = await api.get("pods", a["metadata"]["name"], "default")
        assert got == a and got["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"
        assert got["status"] == {"phase": "Pending"} and got["metadata"]["generation"] == 1
        return a["metadata"]["name"], a["metadata"]["uid"]
    assert run(body) == run(body)  # the same seed, the same generated name and uid


def test_dry_run_create_stores_nothing_and_answers_what_would_be_stored():
    async def body(api):
        before = await revision(api)
        would = await api.create("pods", pod("dry"), dry_run=True)
        assert "resourceVersion" not in would["metadata"] and would["metadata"]["uid"]
        assert would["status"] == {"phase": "Pending"} and would["spec"]["restartPolicy"] == "Always"
        with pytest.raises(wire.NotFound):
            await api.get("pods", "dry", "default")
        assert await revision(api) == before
        await api.create("pods", pod("dry"))
        with pytest.raises(wire.Conflict, match='pods "dry" already exists$'):
            await api.create("pods", pod("dry"), dry_run=True)
        with pytest.raises(wire.NotFound, match='namespaces "ghost" not found$'):  # admission still runs
            await api.create("pods", pod("p"), namespace="ghost", dry_run=True)
        bad = pod("bad")
        bad["spec"]["containers"][0]["name"] = ""
        with pytest.raises(wire.Invalid):  # and validation
            await api.create("pods", bad, dry_run=True)
    run(body)


def test_dry_run_update_patch_scale_and_delete_change_nothing():
    async def body(api):
        d = await api.create("deployments", deployment("web"))
        rv = d["metadata"]["resourceVersion"]
        before = await revision(api)
        d2 = dict(d, spec=dict(d["spec"], replicas=5))
        would = await api.update("deployments", d2, dry_run=True)
        assert would["spec"]["replicas"] == 5 and would["metadata"]["generation"] == 2
        assert would["metadata"]["resourceVersion"] == rv
        would = await api.patch("deployments", "web", {"spec": {"replicas": 7}}, "default", dry_run=True)
        assert would["spec"]["replicas"] == 7 and would["metadata"]["resourceVersion"] == rv
        scale = await api.update_scale("deployments", "web", 9, "default", dry_run=True)
        assert scale["spec"]["replicas"] == 9
        gone = await api.delete("deployments", "web", "default", dry_run=True)
        assert gone["metadata"]["name"] == "web"
        orphaning = await api.delete("deployments", "web", "default", propagation_policy="Orphan", dry_run=True)
        assert orphaning["metadata"]["finalizers"] == ["orphan"] and orphaning["metadata"]["deletionTimestamp"]
        assert await revision(api) == before
        assert await api.get("deployments", "web", "default") == d
    run(body)


def test_the_scale_bind_and_eviction_subresources_take_the_write_options():
    async def body(api):
        await api.create("deployments", deployment("web"))
        scale = await api.get_scale("deployments", "web", "default")
        scale["spec"]["replicas"] = 4
        scale["spec"]["surge"] = 1
        with pytest.raises(wire.BadRequest) as e:
            await api.update_scale("deployments", "web", scale, "default", field_validation="Strict")
        assert e.value.message == ('Scale in version "v1" cannot be handled as a Scale: strict decoding error: '
                                   'unknown field "spec.surge"')
        assert (await api.update_scale("deployments", "web", scale, "default", field_validation="Ignore"))[
            "spec"]["replicas"] == 4
        await api.create("pods", pod("p"))
        before = await revision(api)
        assert (await api.bind("p", "n1", "default", dry_run=True))["spec"]["nodeName"] == "n1"
        await api.evict("p", "default", {"metadata": {"name": "p"}}, dry_run=True)  # the request's dryRun
        assert await revision(api) == before
        assert "nodeName" not in (await api.get("pods", "p", "default"))["spec"]
    run(body)


def test_field_validation_strict_warn_ignore_and_the_wire_default():
    def with_unknown(name):
        p = pod(name)
        p["spec"]["bogus"] = 1
        p["spec"]["containers"][0]["colour"] = "red"
        return p

    async def body(api):
        with pytest.raises(wire.BadRequest) as e:
            await api.create("pods", with_unknown("s"), field_validation="Strict")
        assert e.value.message == ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                                   'unknown field "spec.bogus", unknown field "spec.containers[0].colour"')
        got = []
        token = warnings.current.set(got)
        try:
            warned = await api.create("pods", with_unknown("w"), field_validation="Warn")
        finally:
            warnings.current.reset(token)
        assert got == ['unknown field "spec.bogus"', 'unknown field "spec.containers[0].colour"']
        stored = await api.get("pods", "w", "default")
        assert stored == warned and "bogus" not in stored["spec"] and "colour" not in stored["spec"]["containers"][0]
        ignored = await api.create("pods", with_unknown("i"), field_validation="Ignore")
        assert "bogus" not in ignored["spec"]
        with pytest.raises(wire.Invalid) as e:  # the wire's own: Invalid, every problem at once
            await api.create("pods", with_unknown("x"))
        assert "spec.bogus: Unknown field" in e.value.message
        # an update and a patch are decoded the same way
        stored["spec"]["bogus"] = 2
        with pytest.raises(wire.BadRequest, match="strict decoding error: unknown field \"spec.bogus\"$"):
            await api.update("pods", stored, field_validation="Strict")
        patched = await api.patch("pods", "w", {"metadata": {"labels": {"a": "b"}, "colour": 1}}, "default",
                                  field_validation="Ignore")
        assert patched["metadata"]["labels"] == {"a": "b"} and "colour" not in patched["metadata"]
        with pytest.raises(wire.Invalid, match='CreateOptions.meta.k8s.io "" is invalid: fieldValidation: '
                                               'Unsupported value: "strict"'):
            await api.create("pods", pod("v"), field_validation="strict")
    run(body)


def test_delete_collection_deletes_what_the_selectors_match():
    async def body(api):
        for i in range(4):
            await api.create("pods", pod(f"p{i}", labels={"app": "a" if i % 2 else "b"}))
        rehearsal = await api.delete_collection("pods", "default", label_selector="app=a", dry_run=True)
        assert [p["metadata"]["name"] for p in rehearsal["items"]] == ["p1", "p3"]
        assert len((await api.list("pods", "default"))["items"]) == 4
        deleted = await api.delete_collection("pods", "default", label_selector="app=a")
        assert deleted["kind"] == "PodList" and [p["metadata"]["name"] for p in deleted["items"]] == ["p1", "p3"]
        assert [p["metadata"]["name"] for p in (await api.list("pods", "default"))["items"]] == ["p0", "p2"]
    run(body)


def test_eviction_deletes_the_pod_with_its_delete_options():
    async def body(api):
        await api.create("pods", pod("bound", terminationGracePeriodSeconds=20))
        await api.bind("bound", "n1", "default")
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "bound"}}
        status = await api.evict("bound", "default", eviction)
        assert status == {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}
        evicting = await api.get("pods", "bound", "default")
        assert evicting["metadata"]["deletionGracePeriodSeconds"] == 20
        await api.evict("bound", "default", dict(eviction, deleteOptions={"gracePeriodSeconds": 0}))
        with pytest.raises(wire.NotFound):
            await api.get("pods", "bound", "default")
        await api.create("pods", pod("kept"))
        await api.evict("kept", "default", {"metadata": {"name": "kept"}, "deleteOptions": {"dryRun": ["All"]}})
        assert await api.get("pods", "kept", "default")
        with pytest.raises(wire.BadRequest, match="name in URL does not match name in Eviction object"):
            await api.evict("kept", "default", {"metadata": {"name": "other"}})
        with pytest.raises(wire.NotFound, match='pods "ghost" not found$'):
            await api.evict("ghost", "default", {})
    run(body)


async def running_pod(api, name: str, *, ready: bool = True, labels=None) -> dict:
    """A bound pod the kubelet reported Running (Ready or not)."""
    await api.create("pods", pod(name, labels=labels or {"app": "web"}))
    await api.bind(name, "n1", "default")
    got = await api.get("pods", name, "default")
    got["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return await api.update_status("pods", got, "default")


async def budget(api, name: str = "web-pdb", *, status: dict | None = None, **spec) -> dict:
    pdb = await api.create("poddisruptionbudgets", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}})
    if status is None:
        return pdb
    pdb["status"] = {"observedGeneration": 1, **status}
    return await api.update_status("poddisruptionbudgets", pdb, "default")


EVICTION = {"apiVersion": "policy/v1", "kind": "Eviction"}


def test_eviction_spends_the_pods_disruption_budget():
    async def body(api):
        for name in ("web-1", "web-2", "web-3"):
            await running_pod(api, name)
        await budget(api, minAvailable=2,
                     status={"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3})
        rehearsal = dict(EVICTION, metadata={"name": "web-1"}, deleteOptions={"dryRun": ["All"]})
        await api.evict("web-1", "default", rehearsal)  # a dry run checks only
        assert (await api.get("poddisruptionbudgets", "web-pdb", "default"))["status"]["disruptionsAllowed"] == 1
        assert not (await api.get("pods", "web-1", "default"))["metadata"].get("deletionTimestamp")

        await api.evict("web-1", "default", dict(EVICTION, metadata={"name": "web-1"}))
        assert (await api.get("pods", "web-1", "default"))["metadata"]["deletionTimestamp"]
        status = (await api.get("poddisruptionbudgets", "web-pdb", "default"))["status"]
        assert status["disruptionsAllowed"] == 0
        assert status["disruptedPods"] == {"web-1": "2026-01-02T03:04:05Z"}
        assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
            ("DisruptionAllowed", "False", "InsufficientPods")]

        with pytest.raises(wire.TooManyRequests) as blocked:
            await api.evict("web-2", "default", dict(EVICTION, metadata={"name": "web-2"}))
        assert blocked.value.message == "Cannot evict pod as it would violate the pod's disruption budget."
        assert blocked.value.details["causes"] == [{
            "reason": "DisruptionBudget",
            "message": "The disruption budget web-pdb needs 2 healthy pods and has 3 currently"}]
        assert not (await api.get("pods", "web-2", "default"))["metadata"].get("deletionTimestamp")
    run(body)


def test_eviction_without_a_settled_budget_or_with_two():
    async def body(api):
        await running_pod(api, "web-1")
        await budget(api, minAvailable=1)  # no status yet: observedGeneration 0 < generation 1
        with pytest.raises(wire.TooManyRequests) as pending:
            await api.evict("web-1", "default", {})
        assert pending.value.details["causes"][0]["message"] == \
            "The disruption budget web-pdb is still being processed by the server."
        await budget(api, "second", maxUnavailable=1, status={"disruptionsAllowed": 1})
        with pytest.raises(wire.WireError, match="^InternalError: This pod has more than one "
                           "PodDisruptionBudget, which the eviction subresource does not support.$"):
            await api.evict("web-1", "default", {})
        assert not (await api.get("pods", "web-1", "default"))["metadata"].get("deletionTimestamp")
    run(body)


def test_eviction_of_pods_the_budget_does_not_count():
    async def body(api):
        await running_pod(api, "done")
        finished = await api.get("pods", "done", "default")
        finished["status"]["phase"] = "Succeeded"
        await api.update_status("pods", finished, "default")
        await running_pod(api, "sick", ready=False)
        await running_pod(api, "sick-too", ready=False)
        await running_pod(api, "other", labels={"app": "db"})
        await budget(api, minAvailable=2,
                     status={"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 2})
        await api.evict("done", "default", {"deleteOptions": {"gracePeriodSeconds": 0}})  # terminal: no check
        with pytest.raises(wire.NotFound):
            await api.get("pods", "done", "default")
        await api.evict("other", "default", {})  # no budget selects it
        with pytest.raises(wire.TooManyRequests):  # IfHealthyBudget: the budget is not met
            await api.evict("sick", "default", {})
        pdb = await api.get("poddisruptionbudgets", "web-pdb", "default")
        pdb["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow"
        pdb = await api.update("poddisruptionbudgets", pdb, "default")
        pdb["status"]["observedGeneration"] = 2
        await api.update_status("poddisruptionbudgets", pdb, "default")
        await api.evict("sick", "default", {})  # AlwaysAllow: an unready pod may always go
        assert (await api.get("pods", "sick", "default"))["metadata"]["deletionTimestamp"]
        assert (await api.get("poddisruptionbudgets", "web-pdb", "default"))["status"].get("disruptedPods") is None
    run(body)


def test_eviction_retries_a_budget_conflict():
    async def body(api):
        for name in ("web-1", "web-2"):
            await running_pod(api, name)
        await budget(api, maxUnavailable=1, status={"disruptionsAllowed": 1, "currentHealthy": 2,
                                                    "desiredHealthy": 1})
        real_update_status = api.update_status
        raced = []

        async def racing_update_status(resource, object, namespace=None, **kw):
            if resource == "poddisruptionbudgets" and not raced:  # another writer got there first
                raced.append(True)
                other = await api.get("poddisruptionbudgets", "web-pdb", "default")
                other["status"]["currentHealthy"] = 2
                other["metadata"]["annotations"] = {"touched": "yes"}
                await api.update("poddisruptionbudgets", other, "default")
            return await real_update_status(resource, object, namespace, **kw)
        api.update_status = racing_update_status
        await api.evict("web-1", "default", {})
        assert raced and (await api.get("poddisruptionbudgets", "web-pdb", "default"))["status"]["disruptionsAllowed"] == 0
        with pytest.raises(wire.TooManyRequests):  # the re-read budget has none left
            await api.evict("web-2", "default", {})
    run(body)


def test_eviction_of_an_unready_pod_that_changed_meanwhile_is_a_429_not_a_retry():
    """upstream eviction.go: the unready pod's delete is guarded by the resourceVersion read at
    the start; a conflict (the pod changed, it may be Ready now) is answered "still being
    processed" (429, retry in 10 s) for the client to retry, not retried in the request."""
    async def body(api):
        await running_pod(api, "web-1")
        await running_pod(api, "sick", ready=False)
        await budget(api, minAvailable=1, status={"disruptionsAllowed": 0, "currentHealthy": 1,
                                                  "desiredHealthy": 1})
        real_delete = api.delete
        deletes = []

        async def racing_delete(resource, name, namespace=None, **kw):
            deletes.append(kw.get("preconditions"))
            if len(deletes) == 1:  # the kubelet reports the pod Ready before the delete lands
                got = await api.get("pods", name, namespace)
                got["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
                await api.update_status("pods", got, namespace)
            return await real_delete(resource, name, namespace, **kw)
        api.delete = racing_delete
        with pytest.raises(wire.TooManyRequests) as busy:
            await api.evict("sick", "default", {})
        assert busy.value.details["retryAfterSeconds"] == 10
        assert busy.value.details["causes"] == [{
            "reason": "DisruptionBudget",
            "message": "The disruption budget web-pdb is still being processed by the server."}]
        assert len(deletes) == 1 and deletes[0]["resourceVersion"]
        assert not (await api.get("pods", "sick", "default"))["metadata"].get("deletionTimestamp")
        with pytest.raises(wire.TooManyRequests) as blocked:  # the client's retry: Ready now
            await api.evict("sick", "default", {})
        assert "needs 1 healthy pods" in blocked.value.details["causes"][0]["message"]

        deletes.clear()
        await running_pod(api, "sick-2", ready=False)
        rv = (await api.get("pods", "sick-2", "default"))["metadata"]["resourceVersion"]
        with pytest.raises(wire.Conflict):  # the caller's own precondition: its conflict as is
            await api.evict("sick-2", "default",
                            {"deleteOptions": {"preconditions": {"resourceVersion": rv}}})
    run(body)


def test_list_resource_version_semantics():
    async def body(api):
        first = await api.create("pods", pod("a"))
        rv1 = int(first["metadata"]["resourceVersion"])
        await api.create("pods", pod("b"))
        latest = await api.list("pods", "default")
        assert [p["metadata"]["name"] for p in latest["items"]] == ["a", "b"]
        assert (await api.list("pods", "default", resource_version="0"))["items"] == latest["items"]
        at_rv1 = await api.list("pods", "default", resource_version=str(rv1), resource_version_match="Exact")
        assert [p["metadata"]["name"] for p in at_rv1["items"]] == ["a"]
        assert at_rv1["metadata"]["resourceVersion"] == str(rv1)
        # legacy: a resourceVersion with a limit is exact, without one at least
        paged = await api.list("pods", "default", resource_version=str(rv1), limit=10)
        assert [p["metadata"]["name"] for p in paged["items"]] == ["a"]
        newer = await api.list("pods", "default", resource_version=str(rv1))
        assert [p["metadata"]["name"] for p in newer["items"]] == ["a", "b"]
        assert newer == await api.list("pods", "default", resource_version=str(rv1),
                                       resource_version_match="NotOlderThan")
        future = int(latest["metadata"]["resourceVersion"]) + 100
        for match in ("NotOlderThan", "Exact"):
            with pytest.raises(Timeout, match=f"Too large resource version: {future}, current: "):
                await api.list("pods", "default", resource_version=str(future), resource_version_match=match)
        await api.storage.client.compact(int(latest["metadata"]["resourceVersion"]))
        with pytest.raises(wire.Gone, match="The resourceVersion for the provided list is too old.$") as e:
            await api.list("pods", "default", resource_version=str(rv1), resource_version_match="Exact")
        assert e.value.details["reason"] == "Expired"
        page = await api.list("pods", "default", limit=1)
        with pytest.raises(wire.BadRequest, match="specifying resource version is not allowed when using continue$"):
            await api.list("pods", "default", limit=1, resource_version="5", **{"continue": page["metadata"]["continue"]})
        with pytest.raises(wire.Invalid, match=r'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: '
                                               r"Forbidden: resourceVersionMatch is forbidden unless"):
            await api.list("pods", "default", resource_version_match="Exact")
    run(body)


def test_watch_is_fed_from_the_memory_store():
    async def body(api):
        await api.create("pods", pod("before"))
        events = api.watch("pods", "default")
        assert (await anext(events))["object"]["metadata"]["name"] == "before"  # the listed state
        await api.create("pods", pod("after"))
        await api.delete("pods", "before", "default")
        got = [(await anext(events)) for _ in range(2)]
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [("ADDED", "after"),
                                                                              ("DELETED", "before")]
        await events.aclose()
    run(body)


def test_review_kinds_are_not_stored():
    async def body(api):
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"verb": "get", "resource": "pods"}}}
        with pytest.raises(MethodNotAllowed):
            await api.create("selfsubjectaccessreviews", review)
        with pytest.raises(MethodNotAllowed):
            await api.list("selfsubjectaccessreviews")
    run(body)


def test_the_audit_time_is_when_the_request_came(tmp_path, monkeypatch):
    """A write's line carries the time it was received, not when its answer went out: a client
    that sees the write's effect (a watch event) before the handler finishes still finds it in
    the log at or before that moment (bench reconcile's request counts rely on it)."""
    import json

    from components.apiserver import handlers

    times = iter(["2026-01-02T03:04:05.000000Z", "2026-01-02T03:04:09.000000Z"])
    monkeypatch.setattr(handlers, "now_rfc3339", lambda: next(times))
    log = tmp_path / "audit.log"

    async def main():
        storage = MemStorage()
        cache = WatchCache(storage.client)
        api = API(storage, cache, AuditLog(str(log)), clock=lambda: NOW, rand=random.Random(1))
        await api.ensure_system_namespaces()
        try:
            await api.handlers()["create"](resource="pods", object=pod("p"), namespace="default")
        finally:
            await api.namespaces.close()
            await cache.close()
    asyncio.run(main())
    [line] = [json.loads(x) for x in log.read_text().splitlines()]
    assert (line["time"], line["resource"], line["name"]) == ("2026-01-02T03:04:05.000000Z", "pods", "p")


# --- Services: clusterIP and nodePort allocation ----------------------------------------------

def service(name: str, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
                     **spec}}


def allocations(cidr: str = "10.96.0.0/12", ports: str = "30000-32767") -> Allocations:
    return Allocations(cidr, parse_port_range(ports), rand=random.Random(5))


async def held(api: API) -> Allocations:
    """What the store holds allocated: what every apiserver on it sees."""
    view, _ = await api.service_allocator.view()
    return view


def test_a_service_gets_a_cluster_ip_and_its_node_ports_on_create():
    services = allocations()

    async def body(api):
        web = await api.create("services", service("web"))
        ip = web["spec"]["clusterIP"]
        assert web["spec"]["clusterIPs"] == [ip] and (await held(api)).ips.has(ip)
        assert web["status"] == {"loadBalancer": {}}
        assert (await api.get("services", "web", "default"))["spec"]["clusterIP"] == ip
        np = await api.create("services", service("np", type="NodePort"))
        port = np["spec"]["ports"][0]["nodePort"]
        assert 30086 <= port <= 32767 and (await held(api)).ports.has(port)
        lb = await api.create("services", service("lb", type="LoadBalancer"))
        assert lb["spec"]["ports"][0]["nodePort"] and lb["status"] == {"loadBalancer": {}}
        headless = await api.create("services", service("headless", clusterIP="None"))
        assert headless["spec"]["clusterIPs"] == ["None"]
        external = await api.create("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ext"},
                                                 "spec": {"type": "ExternalName", "externalName": "example.com"}})
        assert "clusterIP" not in external["spec"]
        fixed = await api.create("services", service("dns", clusterIP="10.96.0.10",
                                                      type="NodePort", ports=[{"port": 53, "nodePort": 30053}]))
        assert fixed["spec"]["clusterIP"] == "10.96.0.10" and fixed["spec"]["ports"][0]["nodePort"] == 30053
        store = await held(api)
        assert store.ips.free() == store.ips.bits.size - 4  # web, np, lb, dns
    run(body, services=services)


@pytest.mark.parametrize("spec, message", [
    (dict(clusterIP="10.0.0.1"), 'Service "bad" is invalid: spec.clusterIPs[0]: Invalid value: "10.0.0.1": failed to '
     "allocate IP 10.0.0.1: the provided IP (10.0.0.1) is not in the valid range. The range of valid IPs is "
     "10.96.0.0/12"),
    (dict(clusterIP="10.96.0.10"), 'Service "bad" is invalid: spec.clusterIPs[0]: Invalid value: "10.96.0.10": '
     "failed to allocate IP 10.96.0.10: provided IP is already allocated"),
    (dict(type="NodePort", ports=[{"port": 80, "nodePort": 40000}]),
     'Service "bad" is invalid: spec.ports[0].nodePort: Invalid value: 40000: provided port is not in the valid '
     "range. The range of valid ports is 30000-32767"),
    (dict(type="NodePort", ports=[{"name": "a", "port": 80}, {"name": "b", "port": 81, "nodePort": 30053}]),
     'Service "bad" is invalid: spec.ports[1].nodePort: Invalid value: 30053: provided port is already allocated'),
])
def test_what_cannot_be_allocated_is_a_422_at_its_field_and_nothing_stays_taken(spec, message):
    services = allocations()

    async def body(api):
        await api.create("services", service("dns", clusterIP="10.96.0.10", type="NodePort",
                                              ports=[{"port": 53, "nodePort": 30053}]))
        store = await held(api)
        ips, ports = store.ips.free(), store.ports.free()
        with pytest.raises(wire.Invalid) as err:
            await api.create("services", service("bad", **spec))
        assert err.value.message == message
        assert err.value.details["causes"] == [message.split(": ")[1]]
        store = await held(api)
        assert (store.ips.free(), store.ports.free()) == (ips, ports)  # the clusterIP taken first is back
    run(body, services=services)


def test_a_dry_run_or_a_failed_write_keeps_nothing():
    services = allocations()

    async def body(api):
        would = await api.create("services", service("dry", clusterIP="10.96.0.20", type="NodePort",
                                                      ports=[{"port": 80, "nodePort": 30080}]), dry_run=True)
        assert would["spec"]["clusterIP"] == "10.96.0.20"
        dynamic = await api.create("services", service("dry2", type="NodePort"), dry_run=True)
        assert dynamic["spec"]["clusterIP"] and dynamic["spec"]["ports"][0]["nodePort"]
        store = await held(api)
        assert store.ips.free() == store.ips.bits.size and store.ports.free() == 2768
        await api.create("services", service("web"))
        with pytest.raises(wire.Conflict, match="already exists"):  # the write fails: its IP goes back
            await api.create("services", service("web", clusterIP="10.96.0.20"))
        assert not (await held(api)).ips.has("10.96.0.20")
        taken = await api.create("services", service("real", clusterIP="10.96.0.20", type="NodePort",
                                                     ports=[{"port": 80, "nodePort": 30080}]))
        assert taken["spec"]["clusterIP"] == "10.96.0.20"
    run(body, services=services)


def test_a_dry_run_holds_nothing_while_it_awaits():
    """A dry-run create waiting on the store does not keep a real create of the same clusterIP
    and nodePort from having them (kube-apiserver's dry-run allocators only check)."""
    services = allocations()

    async def body(api):
        await api.create("services", service("first"))  # the allocators are rebuilt by now
        dry_waiting, real_done = asyncio.Event(), asyncio.Event()
        get = api.storage.get

        async def held_get(key, *args, **kwargs):
            if key.endswith("/services/default/dry"):
                dry_waiting.set()
                await real_done.wait()
            return await get(key, *args, **kwargs)
        api.storage.get = held_get
        spec = dict(clusterIP="10.96.0.20", type="NodePort", ports=[{"port": 80, "nodePort": 30080}])

        async def real():
            await dry_waiting.wait()
            try:
                return await api.create("services", service("real", **spec))
            finally:
                real_done.set()
        would, made = await asyncio.gather(api.create("services", service("dry", **spec), dry_run=True), real())
        assert would["spec"]["clusterIP"] == made["spec"]["clusterIP"] == "10.96.0.20"
        store = await held(api)
        assert store.ips.has("10.96.0.20") and store.ports.has(30080)
        api.storage.get = get
        with pytest.raises(wire.Invalid, match="spec.ports\\[0\\].nodePort: Invalid value: 30080: provided port "
                                               "is already allocated"):  # a dry run still sees what is taken
            await api.create("services", service("late", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]),
                             dry_run=True)
    run(body, services=services)


def test_a_health_check_node_port_is_only_a_local_load_balancers_and_is_its_own():
    services = allocations()

    async def body(api):
        await api.create("services", service("a", type="NodePort", ports=[{"port": 80, "nodePort": 30080}]))
        with pytest.raises(wire.Invalid, match="spec.healthCheckNodePort: Invalid value: 30080: may only be set when "
                                               "`type` is 'LoadBalancer' and `externalTrafficPolicy` is 'Local'"):
            await api.create("services", service("b", healthCheckNodePort=30080))
        with pytest.raises(wire.Invalid, match="spec.healthCheckNodePort: Invalid value: 30080: failed to allocate "
                                               "requested HealthCheck NodePort 30080: provided port is already "
                                               "allocated"):
            await api.create("services", service("b", type="LoadBalancer", externalTrafficPolicy="Local",
                                                 healthCheckNodePort=30080))
        assert (await held(api)).ports.has(30080)
        lb = await api.create("services", service("lb", type="LoadBalancer", externalTrafficPolicy="Local"))
        health = lb["spec"]["healthCheckNodePort"]
        assert (await held(api)).ports.has(health) and health != lb["spec"]["ports"][0]["nodePort"]
        replaced = service("lb", type="LoadBalancer", externalTrafficPolicy="Local")  # left out: kept
        replaced["metadata"]["resourceVersion"] = lb["metadata"]["resourceVersion"]
        assert (await api.update("services", replaced))["spec"]["healthCheckNodePort"] == health
        cluster = await api.patch("services", "lb", {"spec": {"externalTrafficPolicy": "Cluster"}}, "default")
        assert "healthCheckNodePort" not in cluster["spec"] and not (await held(api)).ports.has(health)
        local = await api.patch("services", "lb", {"spec": {"externalTrafficPolicy": "Local"}}, "default")
        health = local["spec"]["healthCheckNodePort"]
        assert (await held(api)).ports.has(health)
        await api.delete("services", "lb", "default")
        store = await held(api)
        assert not store.ports.has(health) and store.ports.has(30080)
    run(body, services=services)


def test_an_unnamed_port_keeps_its_node_port_when_its_number_changes():
    services = allocations()

    async def body(api):
        np = await api.create("services", service("web", type="NodePort", ports=[{"port": 80}]))
        port = np["spec"]["ports"][0]["nodePort"]
        moved = await api.update("services", {**service("web", type="NodePort", ports=[{"port": 8080}]),
                                              "metadata": {"name": "web",
                                                           "resourceVersion": np["metadata"]["resourceVersion"]}})
        assert moved["spec"]["ports"][0]["nodePort"] == port and (await held(api)).ports.free() == 2767
    run(body, services=services)


def test_concurrent_creates_never_share_an_address():
    services = allocations("10.96.0.0/27")  # 30 addresses, 16 in the static band

    async def body(api):
        made = await asyncio.gather(*(api.create("services", service(f"s{i}", type="NodePort"))
                                      for i in range(30)), return_exceptions=True)
        ips = [m["spec"]["clusterIP"] for m in made]
        ports = [m["spec"]["ports"][0]["nodePort"] for m in made]
        assert len(set(ips)) == 30 and len(set(ports)) == 30
        with pytest.raises(wire.Invalid, match=r"spec.clusterIPs: Invalid value: \[\]: failed to allocate a "
                                               r"serviceIP: range is full$"):
            await api.create("services", service("one-too-many"))
    run(body, services=services)


def test_updates_keep_what_was_allocated_and_allocate_or_release_what_changed():
    services = allocations()

    async def body(api):
        web = await api.create("services", service("web"))
        ip = web["spec"]["clusterIP"]
        replaced = service("web")  # a replace that leaves the allocated values out keeps them
        replaced["metadata"]["resourceVersion"] = web["metadata"]["resourceVersion"]
        replaced["spec"]["selector"] = {"app": "other"}
        assert (await api.update("services", replaced))["spec"]["clusterIP"] == ip
        with pytest.raises(wire.Invalid) as err:
            await api.patch("services", "web", {"spec": {"clusterIP": "10.96.0.99", "clusterIPs": ["10.96.0.99"]}},
                            "default")
        assert err.value.message == ('Service "web" is invalid: spec.clusterIP: Invalid value: "10.96.0.99": '
                                     "field is immutable")
        assert not (await held(api)).ips.has("10.96.0.99")
        # ClusterIP -> NodePort allocates; a port added gets one; one removed gives its back
        np = await api.patch("services", "web", {"spec": {"type": "NodePort"}}, "default")
        first = np["spec"]["ports"][0]["nodePort"]
        assert (await held(api)).ports.has(first) and np["spec"]["externalTrafficPolicy"] == "Cluster"
        two = await api.patch("services", "web", {"spec": {"ports": [
            {"name": "http", "port": 80, "targetPort": 8080, "nodePort": first},
            {"name": "https", "port": 443, "targetPort": 8443, "nodePort": 30443}]}}, "default", patch_type="merge")
        assert [p["nodePort"] for p in two["spec"]["ports"]] == [first, 30443] and (await held(api)).ports.has(30443)
        one = await api.patch("services", "web", {"spec": {"ports": [
            {"name": "https", "port": 443, "targetPort": 8443, "nodePort": 30443}]}}, "default")
        store = await held(api)
        assert not store.ports.has(first) and store.ports.has(30443)
        assert one["spec"]["clusterIP"] == ip
        # a dry-run update takes nothing
        await api.patch("services", "web", {"spec": {"ports": [{"name": "https", "port": 443, "nodePort": 30444}]}},
                        "default", dry_run=True)
        assert not (await held(api)).ports.has(30444)
        # NodePort -> ClusterIP: the nodePorts it still lists go, and are released
        back = await api.patch("services", "web", {"spec": {"type": "ClusterIP"}}, "default")
        assert "nodePort" not in back["spec"]["ports"][0] and "externalTrafficPolicy" not in back["spec"]
        assert (await held(api)).ports.free() == 2768
        # -> ExternalName gives the clusterIP back; -> ClusterIP again takes a new one
        ext = await api.patch("services", "web", {"spec": {"type": "ExternalName", "externalName": "example.com"}},
                              "default")
        assert "clusterIP" not in ext["spec"] and not (await held(api)).ips.has(ip)
        again = await api.patch("services", "web", {"spec": {"type": "ClusterIP", "externalName": None}}, "default")
        assert (await held(api)).ips.has(again["spec"]["clusterIP"])
    run(body, services=services)


def test_deleting_a_service_releases_its_address_and_ports():
    services = allocations()

    async def body(api):
        np = await api.create("services", service("web", type="NodePort", clusterIP="10.96.0.30"))
        port = np["spec"]["ports"][0]["nodePort"]
        await api.delete("services", "web", "default", dry_run=True)
        store = await held(api)
        assert store.ips.has("10.96.0.30") and store.ports.has(port)
        await api.delete("services", "web", "default")
        store = await held(api)
        assert not store.ips.has("10.96.0.30") and not store.ports.has(port)
        await api.create("services", service("web2", type="NodePort", clusterIP="10.96.0.30",
                                             ports=[{"port": 80, "nodePort": port}]))
    run(body, services=services)


def test_a_restarted_apiserver_rebuilds_its_allocations_from_the_store(caplog):
    async def body(api):
        await api.create("services", service("web", type="NodePort", clusterIP="10.96.0.40",
                                             ports=[{"port": 80, "nodePort": 30040}]))
        # the next apiserver serves a smaller range: the Service outside it is said once, and kept
        later = API(api.storage, api.cache, AuditLog(None), clock=lambda: NOW,
                    services=Allocations("10.96.1.0/24", parse_port_range("30000-30039")))
        with pytest.raises(wire.Invalid, match="provided IP is already allocated"):
            await API(api.storage, api.cache, AuditLog(None), services=allocations()).create(
                "services", service("copy", clusterIP="10.96.0.40"))
        await later.create("services", service("new"))
        assert [r.getMessage() for r in caplog.records if "repair" in r.getMessage()] == [
            "service allocation repair: the cluster IP 10.96.0.40 for service default/web is not within the "
            "service CIDR 10.96.1.0/24; please recreate",
            "service allocation repair: the node port 30040 for service default/web is not within the port "
            "range 30000-30039; please recreate"]
        await later.create("services", service("another"))  # repaired once
        assert len([r for r in caplog.records if "repair" in r.getMessage()]) == 2
    run(body)


def test_apply_of_a_deployment_and_its_service_creates_both_and_reapplying_keeps_the_cluster_ip():
    """`kubemu apply -f` of such a file: create with the last-applied annotation, then the
    three-way patch of a changed manifest (kubemu/kubectl/cmd_apply.py's calls)."""
    import yaml

    from kubemu.kubectl.apply import PATCH_TYPE, apply_patch, with_last_applied

    manifest = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: http}]
"""
    deploy, svc = yaml.safe_load_all(manifest)

    async def body(api):
        await api.create("deployments", with_last_applied(deploy), "default")
        created = await api.create("services", with_last_applied(svc), "default")
        ip = created["spec"]["clusterIP"]
        assert created["spec"]["ports"] == [{"port": 80, "targetPort": "http", "protocol": "TCP"}]
        changed = {**svc, "spec": {**svc["spec"], "type": "NodePort"}}
        current = await api.get("services", "web", "default")
        patched = await api.patch("services", "web", apply_patch(changed, current), "default", patch_type=PATCH_TYPE)
        assert patched["spec"]["clusterIP"] == ip and patched["spec"]["ports"][0]["nodePort"]
        current = await api.get("services", "web", "default")
        back = await api.patch("services", "web", apply_patch(svc, current), "default", patch_type=PATCH_TYPE)
        assert back["spec"]["type"] == "ClusterIP" and "nodePort" not in back["spec"]["ports"][0]
        assert (await api.get("deployments", "web", "default"))["spec"]["replicas"] == 3
    run(body, services=allocations())


def test_a_new_budget_starts_without_the_status_its_creator_wrote():
    async def body(api):
        created = await api.create("poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web-pdb"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 0},
            "status": {"disruptionsAllowed": 100, "observedGeneration": 1}})
        assert "status" not in created
        await running_pod(api, "web-1")
        with pytest.raises(wire.TooManyRequests):  # not a budget of 100 disruptions
            await api.evict("web-1", "default", {})
    run(body)


# --- CertificateSigningRequests: the requester, and the approval subresource ---------------------

def test_a_csr_records_its_requester_and_is_approved_only_through_approval():
    from components.apiserver import caller
    from kubemu.api.identity import UserInfo
    from tests.kubemu.api.test_certificates import csr_object

    async def body(api):
        caller.current.set(UserInfo("system:bootstrap:abcdef", ("system:bootstrappers",)))
        csr = await api.create("certificatesigningrequests", csr_object("node-csr-a"))
        assert csr["spec"]["username"] == "system:bootstrap:abcdef" and csr["status"] == {}
        approved = {**csr, "status": {"conditions": [{"type": "Approved", "status": "True",
                                                      "reason": "KubectlApprove"}]}}
        with pytest.raises(wire.Invalid, match='updates may not add a condition of type "Approved"'):
            await api.update_status("certificatesigningrequests", approved)
        with pytest.raises(wire.NotFound, match="pods have no approval subresource"):
            await api.update_approval("pods", approved)
        out = await api.update_approval("certificatesigningrequests", approved)
        assert out["status"]["conditions"][0]["lastUpdateTime"] == "2026-01-02T03:04:05Z"
        got = await api.get("certificatesigningrequests", "node-csr-a")
        assert got["status"]["conditions"][0]["type"] == "Approved"
        other = await api.create("certificatesigningrequests", csr_object("node-csr-b"))
        denial = {"status": {"conditions": [{"type": "Denied", "status": "True", "reason": "No"}]}}
        ignored = await api.patch("certificatesigningrequests", "node-csr-b", denial)
        assert ignored["status"] == {}  # the object itself never changes its status
        out = await api.patch("certificatesigningrequests", "node-csr-b", denial, subresource="approval")
        assert [c["type"] for c in out["status"]["conditions"]] == ["Denied"]
        with pytest.raises(wire.NotFound, match="pods have no approval subresource"):
            await api.patch("pods", "x", denial, namespace="default", subresource="approval")
        assert other["metadata"]["name"] == "node-csr-b"
    run(body)


def test_approving_and_signing_need_approve_and_sign_on_the_signer():
    """The CertificateApproval and CertificateSigning admissions, asked of the authorizer."""
    import base64
    from cryptography.hazmat.primitives import serialization
    from components.apiserver import caller
    from kubemu import pki
    from kubemu.api.authz import Decision
    from kubemu.api.identity import UserInfo
    from tests.kubemu.api.test_certificates import _ca, csr_object

    granted = {("approve", "example.com/*"), ("sign", "example.com/mine")}
    asked = []

    def authorize(a):
        asked.append((a.verb, a.resource, a.name))
        return Decision((a.verb, a.name) in granted)

    async def main():
        storage = MemStorage()
        cache = WatchCache(storage.client)
        api = API(storage, cache, AuditLog(None), clock=lambda: NOW, rand=random.Random(1), authorize=authorize)
        try:
            caller.current.set(UserInfo("jane", ("system:authenticated",)))
            kubelet = await api.create("csr", csr_object("k"))
            mine = await api.create("csr", csr_object("m", signer="example.com/mine", usages=("client auth",)))
            approval = {"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "R"}]}}
            with pytest.raises(wire.Forbidden) as err:
                await api.update_approval("csr", {**kubelet, **approval})
            assert err.value.message == ('certificatesigningrequests.certificates.k8s.io "k" is forbidden: user not '
                                         'permitted to approve requests with signerName '
                                         '"kubernetes.io/kube-apiserver-client-kubelet"')
            assert asked == [("approve", "signers", "kubernetes.io/kube-apiserver-client-kubelet"),
                             ("approve", "signers", "kubernetes.io/*")]
            approved = await api.patch("csr", "m", approval, subresource="approval")  # by the wildcard
            ca = pki.Pair(*_ca())
            cert = pki.issue(pki.kubelet_spec("x"), ca.key.public_key(), ca, NOW)
            issued = {**approved, "status": {**approved["status"], "certificate": base64.b64encode(
                cert.public_bytes(serialization.Encoding.PEM)).decode()}}
            granted.discard(("sign", "example.com/mine"))
            with pytest.raises(wire.Forbidden, match="user not permitted to sign requests"):
                await api.update_status("csr", issued)
            granted.add(("sign", "example.com/mine"))
            assert (await api.update_status("csr", issued))["status"]["certificate"]
        finally:
            await api.namespaces.close()
            await cache.close()
    asyncio.run(main())


# --- NodeRestriction on a Node's CURVE key annotation (nodekeys.py) ------------------------------

def test_a_node_sets_the_curve_key_of_its_own_node_only_by_create_update_and_patch():
    from components.apiserver import caller
    from components.apiserver.nodekeys import ANNOTATION
    from kubemu.api.identity import UserInfo

    def annotated(name, key):
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": {ANNOTATION: key}}}

    async def body(api):
        caller.current.set(UserInfo("system:node:a", ("system:nodes",)))
        created = await api.create("nodes", annotated("a", "k1"))
        with pytest.raises(wire.Forbidden, match='node "a" is not allowed to modify node "b"'):
            await api.create("nodes", annotated("b", "k1"))
        caller.current.set(UserInfo("kubernetes-admin", ("kubeadm:cluster-admins",)))
        await api.create("nodes", annotated("b", "k2"))
        caller.current.set(UserInfo("system:node:a", ("system:nodes",)))
        for change in (lambda: api.patch("nodes", "b", {"metadata": {"annotations": {ANNOTATION: "k1"}}}),
                       lambda: api.patch("nodes", "b", {"metadata": {"annotations": {ANNOTATION: None}}}),
                       lambda: api.update("nodes", annotated("b", "k3"))):
            with pytest.raises(wire.Forbidden, match='node "a" is not allowed to modify node "b"'):
                await change()
        assert (await api.get("nodes", "b"))["metadata"]["annotations"] == {ANNOTATION: "k2"}
        await api.patch("nodes", "b", {"metadata": {"labels": {"x": "y"}}})  # not the key: not this rule's
        patched = await api.patch("nodes", "a", {"metadata": {"annotations": {ANNOTATION: "k4"}}})
        assert patched["metadata"]["annotations"] == {ANNOTATION: "k4"}
        updated = await api.update("nodes", {**created, "metadata": {"name": "a", "annotations": {}}})
        assert updated["metadata"].get("annotations") in (None, {})
    run(body)


# -- GuaranteedUpdate from the watch cache ---------------------------------------------------------
# A write starts from the state in its resource's watch cache (no store read); that state may be
# behind the store. `behind` puts the cache back to an earlier state of the pod, as a cache that
# has not yet seen the writes after it: the API reads it synchronously when a write starts.

PODS, KEY = "/registry/pods/", "/registry/pods/default/web"


async def caught_up(api: API, key: str = KEY):
    """The pods cacher, running and holding `key` as the store does."""
    cacher = api.cache.cacher(PODS)
    await cacher.ensure_started()
    while cacher.current(key) != await api.storage.read(key):
        await asyncio.sleep(0.001)
    return cacher


def behind(cacher, state: Current, key: str = KEY) -> None:
    if state.value is None:
        cacher.state.pop(key, None)
    else:
        cacher.state[key] = state


def store_reads(api: API) -> list[str]:
    """The keys the API reads from the store from now on."""
    reads: list[str] = []
    read = api.storage.read

    async def counted(key: str):
        reads.append(key)
        return await read(key)
    api.storage.read = counted
    return reads


async def labels_in_store(api: API, key: str = KEY) -> dict:
    return (await api.storage.read(key)).decoded()["metadata"].get("labels", {})



def test_a_write_from_the_cache_starts_from_its_decoded_object_and_changes_none_of_it(monkeypatch):
    """While a key's latest event is in the window, a write's old state is the cache's own object,
    not decoded again: shared read-only with every watcher, so no kind of change may touch it."""
    decodes: list[Current] = []
    real = Current.decoded
    monkeypatch.setattr(Current, "decoded", lambda self: decodes.append(self) or real(self))

    def edited(obj: dict, **fields) -> dict:
        out = copy.deepcopy(obj)
        out["metadata"]["labels"] = {**out["metadata"].get("labels", {}), **fields}
        return out

    async def body(api):
        await api.cache.cacher(PODS).ensure_started()  # the pod's events come, as after a watch
        await api.create("pods", pod("web", labels={"a": "1"}))
        cached = lambda: api.cache.cacher(PODS).latest[KEY].obj  # noqa: E731
        changes = [
            lambda: api.patch("pods", "web", {"metadata": {"labels": {"b": "2", "a": None}}}, "default"),
            lambda: api.patch("pods", "web", {"spec": {"containers": [{"name": "c", "image": "x"}]}}, "default",
                              patch_type="strategic"),
            lambda: api.patch("pods", "web", [{"op": "add", "path": "/metadata/labels/c", "value": "3"}], "default",
                              patch_type="json"),
            lambda: api.update("pods", edited(cached(), d="4"), "default"),
            lambda: api.bind("web", "n1", "default"),
            lambda: api.patch("pods", "web", {"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}]}}, "default", subresource="status"),
            lambda: api.update_status("pods", dict(cached(), status={"phase": "Running"}), "default"),
            # nothing to write: decided again on the store's state (decoded), as a cached state is unconfirmed
            lambda: api.update("pods", cached(), "default"),
            lambda: api.delete("pods", "web", "default", propagation_policy="Foreground"),  # held: a write
            lambda: api.delete("pods", "web", "default", grace_period_seconds=0),
        ]
        for change in changes:
            await caught_up(api)
            shared = cached()
            before = copy.deepcopy(shared)
            decodes.clear()
            await change()
            assert shared == before
            assert len(decodes) == (change is changes[7])
    run(body)

def test_a_write_starts_from_the_cache_and_a_conflict_retries_from_what_the_failed_txn_read():
    async def body(api):
        await api.create("pods", pod("web", labels={"a": "1"}))
        cacher = await caught_up(api)
        first = cacher.current(KEY)
        reads = store_reads(api)
        await api.patch("pods", "web", {"metadata": {"labels": {"b": "2"}}}, "default")
        assert reads == []  # the cache was current: no read
        behind(cacher, first)  # the cache has not seen the patch yet
        got = await api.patch("pods", "web", {"metadata": {"labels": {"c": "3"}}}, "default")
        assert reads == []  # the retry started from the kv its failed txn read
        assert got["metadata"]["labels"] == {"a": "1", "b": "2", "c": "3"} == await labels_in_store(api)
    run(body)


def test_a_stale_cache_with_the_clients_current_version_succeeds():
    async def body(api):
        await api.create("pods", pod("web"))
        cacher = await caught_up(api)
        first = cacher.current(KEY)
        now = await api.patch("pods", "web", {"metadata": {"labels": {"b": "2"}}}, "default")
        behind(cacher, first)
        now["metadata"]["labels"]["u"] = "1"
        now = await api.update("pods", now, "default")
        behind(cacher, first)
        patch = {"metadata": {"resourceVersion": now["metadata"]["resourceVersion"], "labels": {"p": "1"}}}
        now = await api.patch("pods", "web", patch, "default")
        assert await labels_in_store(api) == {"b": "2", "u": "1", "p": "1"}
        behind(cacher, first)
        await api.delete("pods", "web", "default", grace_period_seconds=0,
                         preconditions={"resourceVersion": now["metadata"]["resourceVersion"]})
        assert (await api.storage.read(KEY)).value is None
    run(body)


def test_an_explicit_stale_version_read_from_a_stale_cache_is_still_a_409():
    async def body(api):
        await api.create("pods", pod("web"))
        cacher = await caught_up(api)
        first = cacher.current(KEY)
        stale = first.decoded()
        await api.patch("pods", "web", {"metadata": {"labels": {"b": "2"}}}, "default")
        behind(cacher, first)  # the cache agrees with the client's stale version
        stale["metadata"]["labels"] = {"u": "1"}
        with pytest.raises(wire.Conflict):
            await api.update("pods", stale, "default")
        behind(cacher, first)
        with pytest.raises(wire.Conflict):
            await api.patch("pods", "web", {"metadata": {"resourceVersion": str(first.revision),
                                                         "labels": {"p": "1"}}}, "default")
        assert await labels_in_store(api) == {"b": "2"}
    run(body)


def test_not_found_from_a_stale_cache_is_asked_of_the_store():
    async def body(api):
        await api.create("pods", pod("web"))
        cacher = await caught_up(api)
        behind(cacher, ABSENT)  # created, not yet seen by the cache
        got = await api.patch("pods", "web", {"metadata": {"labels": {"b": "2"}}}, "default")
        assert got["metadata"]["labels"] == {"b": "2"}
        # deleted, still in the cache: the failed txn read that it is gone, and that is the answer
        first = (await caught_up(api)).current(KEY)
        await api.delete("pods", "web", "default", grace_period_seconds=0)
        behind(cacher, first)
        reads = store_reads(api)
        with pytest.raises(wire.NotFound):
            await api.patch("pods", "web", {"metadata": {"labels": {"c": "3"}}}, "default")
        assert reads == []
    run(body)


def test_a_uid_precondition_failing_on_a_stale_cache_is_asked_of_the_store():
    async def body(api):
        await api.create("pods", pod("web"))
        cacher = await caught_up(api)
        first = cacher.current(KEY)
        await api.delete("pods", "web", "default", grace_period_seconds=0)
        again = await api.create("pods", pod("web"))  # the same name, a new uid
        behind(cacher, first)
        await api.delete("pods", "web", "default", grace_period_seconds=0,
                         preconditions={"uid": again["metadata"]["uid"]})
        assert (await api.storage.read(KEY)).value is None
    run(body)


def test_nothing_to_write_on_a_stale_cache_is_decided_on_the_stores_state():
    async def body(api):
        await api.create("pods", pod("web", labels={"a": "1"}))
        cacher = await caught_up(api)
        first = cacher.current(KEY)
        await api.patch("pods", "web", {"metadata": {"labels": {"a": "2"}}}, "default")
        behind(cacher, first)  # the cache still says a=1: the patch below changes nothing there
        got = await api.patch("pods", "web", {"metadata": {"labels": {"a": "1"}}}, "default")
        assert got["metadata"]["labels"] == {"a": "1"} == await labels_in_store(api)
        assert int(got["metadata"]["resourceVersion"]) == (await api.storage.read(KEY)).revision
    run(body)


def test_only_the_answered_attempts_warnings_reach_the_client():
    """An attempt decided on a stale cached state and then run again on the store's is discarded,
    with its warnings: the client hears only those of the attempt it is answered by."""
    def with_bogus(state: Current) -> Current:
        obj = state.decoded()
        obj["spec"]["bogus"] = 1  # the stale state's own unknown field: a warning only it gives
        return Current(encode(obj), state.revision)

    async def patch_warned(api, patch, got: list[str]) -> None:
        token = warnings.current.set(got)
        try:
            await api.patch("pods", "web", patch, "default", field_validation="Warn")
        finally:
            warnings.current.reset(token)

    async def body(api):
        await api.create("pods", pod("web"))
        cacher = await caught_up(api)
        first = cacher.current(KEY)
        await api.patch("pods", "web", {"metadata": {"labels": {"b": "2"}}}, "default")
        behind(cacher, with_bogus(first))  # conflicts, then runs again on the store's state
        got: list[str] = []
        await patch_warned(api, {"metadata": {"labels": {"c": "3"}, "colour": 1}}, got)
        assert got == ['unknown field "metadata.colour"']  # the request's own, once
        first = (await caught_up(api)).current(KEY)
        await api.delete("pods", "web", "default", grace_period_seconds=0)
        behind(cacher, with_bogus(first))  # gone from the store: the answer is NotFound, no warning
        got = []
        with pytest.raises(wire.NotFound):
            await patch_warned(api, {"metadata": {"labels": {"d": "4"}}}, got)
        assert got == []
    run(body)


def test_a_dry_run_answers_from_the_stores_state_not_a_stale_cache():
    async def body(api):
        await api.create("pods", pod("web"))
        cacher = await caught_up(api)
        first = cacher.current(KEY)
        await api.patch("pods", "web", {"metadata": {"labels": {"b": "2"}}}, "default")
        behind(cacher, first)
        got = await api.patch("pods", "web", {"metadata": {"labels": {"c": "3"}}}, "default", dry_run=True)
        assert got["metadata"]["labels"] == {"b": "2", "c": "3"}
        assert await labels_in_store(api) == {"b": "2"}
    run(body)


def test_a_list_starts_its_resources_cache_so_a_watch_from_its_version_is_served_by_the_cache():
    async def body(api):
        await api.create("pods", pod("a"))
        listed = await api.list("pods", "default")
        await api.create("pods", pod("b"))  # written between the list and its watch
        events = api.watch("pods", "default", resource_version=listed["metadata"]["resourceVersion"])
        got = await anext(events)
        assert (got["type"], got["object"]["metadata"]["name"]) == ("ADDED", "b")
        assert len(api.cache.cachers[PODS].watchers) == 1  # not a store watch of its own
        await events.aclose()
    run(body)


def test_watchers_of_one_change_share_its_event_unless_their_selection_makes_it_another():
    """Each change is one SharedItem for every watcher that sees it alike (packed once on the
    wire); a watcher whose selector the change enters sees ADDED, one it leaves DELETED at the
    change's revision, whatever the others were sent."""
    async def body(api):
        created = await api.create("pods", pod("web", labels={"app": "no"}))
        rv = created["metadata"]["resourceVersion"]
        plain = [api.watch("pods", "default", resource_version=rv) for _ in range(2)]
        entered = api.watch("pods", "default", label_selector="app=yes", resource_version=rv)
        left = api.watch("pods", "default", label_selector="app=no", resource_version=rv)
        patched = await api.patch("pods", "web", {"metadata": {"labels": {"app": "yes"}}}, "default")
        first, second, added, deleted = [await anext(w) for w in (*plain, entered, left)]
        assert first is second and isinstance(first, wire.SharedItem)
        assert first["type"] == "MODIFIED" and first["object"] == patched
        assert added["type"] == "ADDED" and added["object"] == patched
        assert deleted["type"] == "DELETED" and deleted["object"]["metadata"]["labels"] == {"app": "no"}
        assert deleted["object"]["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
        for w in (*plain, entered, left):
            await w.aclose()
    run(body)


def test_a_batched_watch_gives_what_an_unbatched_one_does_in_batches_of_what_is_at_hand():
    n = WATCH_BATCH + 6

    def names(events):
        return [(e["type"], e["object"]["metadata"]["name"]) for e in events]

    async def body(api):
        rv = (await api.list("pods", "default"))["metadata"]["resourceVersion"]  # starts the cache
        for i in range(n):
            await api.create("pods", pod(f"p{i}"))
        plain = api.watch("pods", "default", resource_version=rv)
        batched = api.watch("pods", "default", resource_version=rv, batched=True)
        want = [await anext(plain) for _ in range(n)]
        got, sizes = [], []
        while len(got) < n:
            item = await anext(batched)
            sizes.append(len(item) if type(item) is wire.Batch else 1)
            got.extend(item if type(item) is wire.Batch else [item])
        assert names(got) == names(want) == [("ADDED", f"p{i}") for i in range(n)]
        assert max(sizes) == WATCH_BATCH and 1 < len(sizes) < n  # a burst in few messages, none too big
        assert not any(type(e) is wire.Batch for e in want)
        listing = api.watch("pods", "default", resource_version="0", batched=True)
        first, second = await anext(listing), await anext(listing)  # the list's ADDED, batched alike
        assert (type(first), type(second)) == (wire.Batch, wire.Batch)
        assert sorted(names([*first, *second])) == sorted(names(want))  # a list is in key order
        for w in (plain, batched, listing):
            await w.aclose()
    run(body)


def test_a_batched_watch_sends_the_events_it_has_before_the_error_that_ends_it():
    async def body(api):
        rv = (await api.list("pods", "default"))["metadata"]["resourceVersion"]
        watch = api.watch("pods", "default", resource_version=rv, batched=True)
        await api.create("pods", pod("a"))
        await api.create("pods", pod("b"))
        first = await anext(watch)
        await api.create("pods", pod("c"))
        await api.create("pods", pod("d"))
        cacher = api.cache.cachers[PODS]
        await asyncio.sleep(0.05)  # c and d reach the watcher's queue
        for w in list(cacher.watchers):
            w.fail(wire.Unavailable("the watch cache stopped"))
        await asyncio.sleep(0.05)  # the error queued behind them
        got = [*(first if type(first) is wire.Batch else [first])]
        with pytest.raises(wire.Unavailable):
            while True:
                item = await anext(watch)
                got.extend(item if type(item) is wire.Batch else [item])
        assert [e["object"]["metadata"]["name"] for e in got] == ["a", "b", "c", "d"]
    run(body)


def test_watch_events_remember_the_last_ones_only_and_share_an_object_between_types():
    events = WatchEvents(kept=4)  # two events and their objects
    old, new = {"metadata": {"name": "a", "resourceVersion": "4"}}, {"metadata": {"name": "a"}}
    changes = [CacheEvent(rev, "PUT", f"/registry/pods/default/{rev}", new, old) for rev in (5, 6, 7)]
    shared = [events.get(ev, "MODIFIED") for ev in changes]
    assert events.get(changes[2], "MODIFIED") is shared[2]
    assert events.get(changes[0], "MODIFIED") is not shared[0]  # forgotten, made again alike
    assert events.get(changes[0], "MODIFIED") == shared[0] == {"type": "MODIFIED", "object": new}
    added = events.get(changes[0], "ADDED")
    assert added["object"] is events.get(changes[0], "MODIFIED")["object"]
    gone = events.get(changes[1], "DELETED")
    assert gone["object"]["metadata"] == {"name": "a", "resourceVersion": "6"}
    assert old["metadata"]["resourceVersion"] == "4"


def test_a_list_does_not_depend_on_the_watch_cache_starting(monkeypatch):
    """The cacher's store watch cannot start: the list is still answered from the store."""
    async def body(api):
        await api.create("pods", pod("web"))

        def refused(*a, **kw):
            raise ConnectionError("store watch refused")
        monkeypatch.setattr(api.cache.client, "watch", refused)
        got = await api.list("pods", "default")
        assert [p["metadata"]["name"] for p in got["items"]] == ["web"]
    run(body)
