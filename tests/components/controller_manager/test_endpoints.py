"""The Endpoints controller's shell: in process, a sync on a cache still showing the version its
own update replaced is retried; in a real controller-manager process, a Service's pods appear
as ready and not-ready addresses, an Endpoints of the user's (no Service, or a Service without a
selector) is left alone, and the controller's own Endpoints go with their Service."""
from __future__ import annotations

import pytest

from components.controller_manager.endpoints import EndpointsController
from components.controller_manager.workers import RetryLater
from kubemu.apiclient import NotFound
from tests.conftest import wait_for

from . import cluster  # noqa: F401  (a fixture)
from .test_endpointslice import in_process, set_ready, start_pod, web_service


def endpoints(cluster, ns: str, name: str = "web") -> dict | None:
    try:
        return cluster.api.get("endpoints", name, namespace=ns)
    except NotFound:
        return None


def addresses(ep: dict | None) -> tuple[set, set]:
    subsets = (ep or {}).get("subsets") or []
    return ({a["ip"] for s in subsets for a in s.get("addresses") or []},
            {a["ip"] for s in subsets for a in s.get("notReadyAddresses") or []})


def users_endpoints(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name},
            "subsets": [{"addresses": [{"ip": "192.0.2.10"}],
                         "ports": [{"port": 5432, "protocol": "TCP"}]}]}


def test_an_endpoints_sync_on_a_cache_behind_its_own_update_is_retried(cluster):
    assert not cluster.managers, "runs before this module starts its controller-manager"
    ns = cluster.namespace("ep-stale")
    service = cluster.api.create("services", web_service(), namespace=ns)
    pod = start_pod(cluster, ns, "a", "10.244.5.5")

    async def steps(controller, api):
        controller.services.indexer.add(service)
        await controller.sync(f"{ns}/web")
        controller.endpoints.indexer.add(await api.get("endpoints", "web", namespace=ns))
        controller.pods.indexer.add(pod)
        await controller.sync(f"{ns}/web")   # the update; the cache keeps the old version
        with pytest.raises(RetryLater):
            await controller.sync(f"{ns}/web")
        controller.endpoints.indexer.update(await api.get("endpoints", "web", namespace=ns))
        await controller.sync(f"{ns}/web")

    in_process(cluster, EndpointsController, steps)
    assert addresses(endpoints(cluster, ns)) == ({"10.244.5.5"}, set())


@pytest.fixture(scope="module")
def cm(cluster):
    cluster.api.create("nodes", {"apiVersion": "v1", "kind": "Node",
                                 "metadata": {"name": "node-1"}})
    ns = cluster.namespace("ep-users")
    # the user's own, there before the controller starts (k8s' start-up leftover check)
    cluster.api.create("endpoints", users_endpoints("external-db"), namespace=ns)
    return cluster.controller_manager("--controllers", "endpoint", name="cm-ep")


def test_addresses_follow_the_pods_and_go_with_the_service(cluster, cm):
    api, ns = cluster.api, cluster.namespace("ep-basic")
    api.create("services", web_service(), namespace=ns)
    wait_for(lambda: endpoints(cluster, ns), message="the Endpoints")
    start_pod(cluster, ns, "a", "10.244.1.5")
    start_pod(cluster, ns, "b", "10.244.1.6")
    wait_for(lambda: addresses(endpoints(cluster, ns)) == ({"10.244.1.5", "10.244.1.6"}, set()),
             message="both addresses ready")
    set_ready(cluster, ns, "b", False)
    wait_for(lambda: addresses(endpoints(cluster, ns)) == ({"10.244.1.5"}, {"10.244.1.6"}),
             message="b not ready")
    ep = endpoints(cluster, ns)
    assert ep["metadata"]["labels"] == {"endpoints.kubernetes.io/managed-by":
                                        "endpoint-controller"}
    assert ep["subsets"][0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]

    api.delete("services", "web", namespace=ns)
    wait_for(lambda: endpoints(cluster, ns) is None, message="the Endpoints deleted")


def test_the_users_endpoints_are_left_alone(cluster, cm):
    api, ns = cluster.api, cluster.namespace("ep-users")
    # a Service without a selector and its hand-made Endpoints
    api.create("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db"},
                            "spec": {"ipFamilies": ["IPv4"], "ports": [{"port": 5432}]}},
               namespace=ns)
    api.create("endpoints", users_endpoints("db"), namespace=ns)
    # a selector Service, to know the controller has looked at this namespace since
    api.create("services", web_service(), namespace=ns)
    wait_for(lambda: endpoints(cluster, ns), message="the selector Service's Endpoints")
    api.delete("services", "db", namespace=ns)
    api.delete("services", "web", namespace=ns)
    wait_for(lambda: endpoints(cluster, ns) is None, message="web's Endpoints deleted")
    for name in ("external-db", "db"):
        ep = endpoints(cluster, ns, name)
        assert ep is not None and ep["subsets"] == users_endpoints(name)["subsets"], name
