"""The EndpointSlice controller's shell: in process, a sync on a cache that has not seen the
slice it just created is retried, not repeated; in a real controller-manager process, a
Service's pods appear in its slice as they get IPs and readiness, a readiness flip is one write
(a pod change that does not concern an endpoint is none), a slice deleted by hand comes back, a
pod on an unknown node is reported on the Service, and neither a burst right after the Service
nor a kill -9 ever publishes an endpoint twice."""
from __future__ import annotations

import asyncio

import pytest

from components.controllers.endpointslice import LABEL_SERVICE_NAME
from components.controller_manager.endpointslice import EndpointSliceController
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import RetryLater
from kubemu.apiclient import ApiClient
from tests.conftest import DEADLINE, wait_for

from . import cluster, now_rfc3339  # noqa: F401  (cluster: a fixture)


def web_service(name: str = "web") -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ipFamilies": ["IPv4"],
                     "ports": [{"name": "http", "port": 80, "targetPort": "http",
                                "protocol": "TCP"}]}}


def start_pod(cluster, ns: str, name: str, ip: str, node: str = "node-1",
              app: str = "web") -> dict:
    """Create a pod bound to `node`, then play its kubelet: Running, an IP, Ready."""
    cluster.api.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                "metadata": {"name": name, "labels": {"app": app}},
                                "spec": {"nodeName": node, "containers": [
                                    {"name": "c", "image": "busybox",
                                     "ports": [{"name": "http", "containerPort": 8080}]}]}},
                       namespace=ns)
    return set_ready(cluster, ns, name, True, ip)


def set_ready(cluster, ns: str, name: str, ready: bool, ip: str | None = None) -> dict:
    pod = cluster.api.get("pods", name, namespace=ns)
    ip = ip or pod["status"]["podIP"]
    pod["status"] = {"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "conditions": [
        {"type": "Ready", "status": "True" if ready else "False",
         "lastTransitionTime": now_rfc3339()}]}
    return cluster.api.update_status("pods", pod, namespace=ns)


def slices(cluster, ns: str, service: str = "web") -> list[dict]:
    return cluster.api.list("endpointslices", namespace=ns,
                            label_selector=f"{LABEL_SERVICE_NAME}={service}")["items"]


def ready_by_pod(cluster, ns: str, service: str = "web") -> dict:
    return {e["targetRef"]["name"]: e["conditions"]["ready"]
            for s in slices(cluster, ns, service) for e in s.get("endpoints") or []}


def in_process(cluster, controller_class, steps) -> None:
    """Run `steps(controller, api)` against the test apiserver with caches the test fills itself
    (no informer runs): what a controller does when its cache lags behind its writes."""
    async def scenario():
        async with ApiClient(cluster.endpoint, timeout=15.0) as api:
            controller = controller_class(api, SharedInformers(api))
            try:
                await steps(controller, api)
            finally:
                await controller.close()
    asyncio.run(asyncio.wait_for(scenario(), DEADLINE))


def test_a_slice_sync_on_a_cache_behind_its_own_create_is_retried_not_repeated(cluster):
    assert not cluster.managers, "runs before this module starts its controller-manager"
    ns = cluster.namespace("eps-stale")
    service = cluster.api.create("services", web_service(), namespace=ns)

    async def steps(controller, api):
        controller.services.indexer.add(service)
        await controller.sync(f"{ns}/web")   # the placeholder, which the cache never shows
        with pytest.raises(RetryLater):
            await controller.sync(f"{ns}/web")
        for s in (await api.list("endpointslices", namespace=ns))["items"]:
            controller.slices.indexer.add(s)   # once the cache has it, syncs go on
        await controller.sync(f"{ns}/web")

    in_process(cluster, EndpointSliceController, steps)
    assert len(slices(cluster, ns)) == 1


@pytest.fixture(scope="module")
def cm(cluster):
    for name in ("node-1", "node-2"):
        cluster.api.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"topology.kubernetes.io/zone": f"zone-{name[-1]}"}}})
    return cluster.controller_manager("--controllers", "endpointslice,endpoint", name="cm-eps")


def test_pods_flow_into_the_slice(cluster, cm):
    api, ns = cluster.api, cluster.namespace("eps-basic")
    api.create("services", web_service(), namespace=ns)
    # no pods yet: one placeholder slice
    placeholder = wait_for(lambda: slices(cluster, ns), message="the placeholder slice")
    assert len(placeholder) == 1 and not placeholder[0].get("endpoints")

    start_pod(cluster, ns, "a", "10.244.1.5")
    start_pod(cluster, ns, "b", "10.244.2.5", node="node-2")
    wait_for(lambda: ready_by_pod(cluster, ns) == {"a": True, "b": True},
             message="both pods ready in the slice")
    (s,) = slices(cluster, ns)
    assert s["metadata"]["name"] == placeholder[0]["metadata"]["name"]   # reused, not replaced
    assert s["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert {e["zone"] for e in s["endpoints"]} == {"zone-1", "zone-2"}
    assert s["metadata"]["annotations"]["endpoints.kubernetes.io/last-change-trigger-time"]

    # a pod change no endpoint shows writes nothing; a readiness flip is one write
    before = s["metadata"]["resourceVersion"]
    api.patch("pods", "a", {"metadata": {"annotations": {"note": "irrelevant"}}}, namespace=ns)
    set_ready(cluster, ns, "b", False)
    wait_for(lambda: ready_by_pod(cluster, ns) == {"a": True, "b": False},
             message="b not ready in the slice")
    writes = []
    with api.watch("endpointslices", namespace=ns, resource_version=before) as events:
        for type_, obj in events:
            writes.append(type_)
            if {e["targetRef"]["name"]: e["conditions"]["ready"]
                    for e in obj.get("endpoints") or []} == {"a": True, "b": False}:
                break
    assert writes == ["MODIFIED"], writes

    # a slice deleted by hand comes back
    api.delete("endpointslices", s["metadata"]["name"], namespace=ns)
    wait_for(lambda: ready_by_pod(cluster, ns) == {"a": True, "b": False}
             and len(slices(cluster, ns)) == 1, message="the slice back")


def test_a_pod_on_an_unknown_node_is_reported_on_the_service(cluster, cm):
    api, ns = cluster.api, cluster.namespace("eps-ghost")
    api.create("services", web_service(), namespace=ns)
    start_pod(cluster, ns, "a", "10.244.1.7")
    start_pod(cluster, ns, "lost", "10.244.9.7", node="ghost")
    wait_for(lambda: ready_by_pod(cluster, ns) == {"a": True}, message="a in the slice")
    events = wait_for(lambda: cluster.events(ns, "FailedToUpdateEndpointSlices", "web"),
                      message="a FailedToUpdateEndpointSlices event")
    assert "lost" in events[0]["message"] and "ghost" in events[0]["message"]
    assert "Traceback" not in cm.log_text()


def test_kill_9_during_a_burst_never_duplicates_slices(cluster, cm):
    api, ns = cluster.api, cluster.namespace("eps-restart")
    api.create("services", web_service(), namespace=ns)
    wait_for(lambda: slices(cluster, ns), message="the placeholder slice")
    for i in range(30):
        start_pod(cluster, ns, f"p{i:02d}", f"10.244.3.{i + 2}")
        if i == 10:
            cm.kill()
            cm.start()
    wait_for(lambda: len(ready_by_pod(cluster, ns)) == 30, message="30 endpoints")
    names = [e["targetRef"]["name"] for s in slices(cluster, ns) for e in s["endpoints"]]
    assert len(names) == len(set(names)) == 30
    assert len(slices(cluster, ns)) == 1


def test_a_burst_right_after_the_service_never_publishes_an_endpoint_twice(cluster, cm):
    # each pod change syncs the Service again, often before the slice just created is in the
    # controller's cache: only the record of its own writes keeps it from creating another
    api, ns = cluster.api, cluster.namespace("eps-burst")
    for i in range(20):
        start_pod(cluster, ns, f"p{i:02d}", f"10.244.4.{i + 2}")
    api.create("services", web_service(), namespace=ns)
    for i in range(20, 40):
        start_pod(cluster, ns, f"p{i:02d}", f"10.244.4.{i + 2}")
    wait_for(lambda: len(ready_by_pod(cluster, ns)) == 40, message="40 endpoints")
    names = [e["targetRef"]["name"] for s in slices(cluster, ns) for e in s["endpoints"]]
    assert sorted(names) == sorted(set(names)) and len(slices(cluster, ns)) == 1

