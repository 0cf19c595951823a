"""components.apiserver.kubernetes_service: the `kubernetes` Service and its endpoints, as the
apiserver keeps them (pure decisions, then the reconciler over the handlers)."""
from __future__ import annotations

import asyncio
import copy
import logging
import random

from components.apiserver.audit import AuditLog
from components.apiserver.handlers import API
from components.apiserver.kubernetes_service import Reconciler, desired, endpoints_change, service_change
from components.apiserver.memstorage import MemStorage
from components.apiserver.serviceips import parse_port_range
from components.apiserver.servicestrategy import Allocations
from components.apiserver.watchcache import WatchCache
from kubemu.wire import NotFound
from tests.conftest import DEADLINE

WANT = desired("10.96.0.0/12", "10.244.255.254", 6443)


def test_the_desired_objects_are_kube_apiservers():
    assert WANT.service == {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
                     "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "sessionAffinity": "None",
                 "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}]}}
    assert "selector" not in WANT.service["spec"]  # the EndpointSlice controller leaves it alone
    assert WANT.endpoints["subsets"] == [{"addresses": [{"ip": "10.244.255.254"}],
                                          "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]
    assert WANT.slice["metadata"]["labels"] == {"kubernetes.io/service-name": "kubernetes"}
    assert WANT.slice["addressType"] == "IPv4"
    assert WANT.slice["endpoints"] == [{"addresses": ["10.244.255.254"], "conditions": {"ready": True}}]
    assert desired("127.96.0.0/12", "127.0.0.1", 6443).service["spec"]["clusterIP"] == "127.96.0.1"


def test_the_service_is_made_if_absent_and_only_its_ports_and_type_put_back():
    assert service_change(None, WANT.service) == WANT.service
    live = copy.deepcopy(WANT.service)
    live["spec"].update(clusterIP="10.0.0.1", clusterIPs=["10.0.0.1"], ipFamilies=["IPv4"])
    live["spec"]["ports"][0]["protocol"] = "TCP"
    assert service_change(live, WANT.service) is None  # another clusterIP: left as it is
    live["spec"]["ports"][0]["targetPort"] = 8443
    live["spec"]["type"] = "NodePort"
    fixed = service_change(live, WANT.service)
    assert fixed["spec"]["ports"] == WANT.service["spec"]["ports"] and fixed["spec"]["type"] == "ClusterIP"
    assert fixed["spec"]["clusterIP"] == "10.0.0.1"


def test_endpoints_are_made_if_absent_and_repaired_when_they_differ():
    assert endpoints_change(None, WANT.slice) == WANT.slice
    live = copy.deepcopy(WANT.slice)
    live["metadata"].update(resourceVersion="7", labels={"kubernetes.io/service-name": "kubernetes", "x": "y"})
    live["ports"][0]["appProtocol"] = "https"  # what the server (or someone) added beside ours
    assert endpoints_change(live, WANT.slice) is None
    live["endpoints"][0]["addresses"] = ["127.0.0.1"]
    fixed = endpoints_change(live, WANT.slice)
    assert fixed["endpoints"] == WANT.slice["endpoints"] and fixed["metadata"]["resourceVersion"] == "7"
    assert fixed["metadata"]["labels"]["x"] == "y"
    stale = copy.deepcopy(WANT.endpoints)
    stale["subsets"][0]["ports"][0]["port"] = 6444
    assert endpoints_change(stale, WANT.endpoints)["subsets"] == WANT.endpoints["subsets"]


def _api_run(test):
    async def main():
        storage = MemStorage()
        cache = WatchCache(storage.client)
        api = API(storage, cache, AuditLog(None), rand=random.Random(1),
                  services=Allocations("10.96.0.0/12", parse_port_range("30000-32767")))
        await api.ensure_system_namespaces()
        try:
            return await asyncio.wait_for(test(api), DEADLINE)
        finally:
            await api.namespaces.close()
            await cache.close()
    return asyncio.run(main())


def test_the_reconciler_creates_then_repairs_through_the_handlers(caplog):
    async def body(api):
        reconciler = Reconciler(api, WANT, "10.96.0.0/12")
        await reconciler.reconcile()
        svc = await api.get("services", "kubernetes", "default")
        assert svc["spec"]["clusterIP"] == "10.96.0.1" and (await api.service_allocator.view())[0].ips.has("10.96.0.1")
        ep = await api.get("endpoints", "kubernetes", "default")
        assert ep["subsets"][0]["addresses"] == [{"ip": "10.244.255.254"}]
        eps = await api.get("endpointslices", "kubernetes", "default")
        assert eps["endpoints"][0]["addresses"] == ["10.244.255.254"]
        rvs = [o["metadata"]["resourceVersion"] for o in (svc, ep, eps)]
        await reconciler.reconcile()  # nothing to do: nothing written
        again = [(await api.get(r, "kubernetes", "default"))["metadata"]["resourceVersion"]
                 for r in ("services", "endpoints", "endpointslices")]
        assert again == rvs
        # another apiserver address (a restart with another --advertise-address): repaired
        moved = Reconciler(api, desired("10.96.0.0/12", "127.0.0.1", 6443), "10.96.0.0/12")
        await moved.reconcile()
        assert (await api.get("endpointslices", "kubernetes", "default"))["endpoints"][0]["addresses"] == ["127.0.0.1"]
        # a Service made with another range is left alone, said once
        other = Reconciler(api, desired("10.100.0.0/16", "127.0.0.1", 6443), "10.100.0.0/16")
        with caplog.at_level(logging.WARNING, "kubemu.apiserver"):
            await other.reconcile()
            await other.reconcile()
        said = [r.getMessage() for r in caplog.records if "kubernetes service has clusterIP" in r.getMessage()]
        assert said == ["the kubernetes service has clusterIP 10.96.0.1, not 10.100.0.1 (the first address of "
                        "--service-cluster-ip-range 10.100.0.0/16): left as it is; delete it to have it made again"]
        assert (await api.get("services", "kubernetes", "default"))["spec"]["clusterIP"] == "10.96.0.1"
    _api_run(body)


def test_a_taken_first_address_is_said_once_while_it_lasts(caplog):
    async def body(api):
        await api.create("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "squatter"},
                                      "spec": {"clusterIP": "10.96.0.1", "ports": [{"port": 1}]}})
        reconciler = Reconciler(api, WANT, "10.96.0.0/12")
        task = asyncio.create_task(reconciler.run(interval=0.01))
        try:
            while reconciler.rounds < 3:  # each failing the same way (bounded by DEADLINE)
                await asyncio.sleep(0.01)
        finally:
            task.cancel()
        assert (await api.list("endpoints", "default"))["items"]
        said = [r.getMessage() for r in caplog.records if "the kubernetes service:" in r.getMessage()]
        assert said == ['the kubernetes service: Service "kubernetes" is invalid: spec.clusterIPs[0]: Invalid value: '
                        '"10.96.0.1": failed to allocate IP 10.96.0.1: provided IP is already allocated '
                        "(retrying every 0.01s)"]
    _api_run(body)


class _FailingFirst:
    """The handlers, but `get` raises what no wire error is for the first `n` calls."""

    def __init__(self, api, n: int):
        self.api, self.left = api, n

    async def get(self, *args):
        if self.left:
            self.left -= 1
            raise RuntimeError("boom")
        return await self.api.get(*args)

    def __getattr__(self, name):
        return getattr(self.api, name)


def test_a_round_failing_with_any_error_is_said_in_one_line_and_the_next_comes(caplog):
    async def body(api):
        reconciler = Reconciler(_FailingFirst(api, 2), WANT, "10.96.0.0/12")
        task = asyncio.create_task(reconciler.run(interval=0.01))
        try:
            while not (await api.list("endpointslices", "default"))["items"]:  # bounded by DEADLINE
                assert not task.done(), task
                await asyncio.sleep(0.01)
        finally:
            task.cancel()
        assert reconciler.rounds >= 2
        said = [r for r in caplog.records if "the kubernetes service:" in r.getMessage()]
        assert [r.getMessage() for r in said] == ["the kubernetes service: RuntimeError: boom (retrying every 0.01s)"]
        assert said[0].exc_info is None  # no traceback
    _api_run(body)


class _MadeMeanwhile:
    """The handlers, as an apiserver sees them when another one creates the three objects
    between its first look and its create: the first `get` of each answers NotFound."""

    def __init__(self, api):
        self.api, self.looked = api, set()

    async def get(self, resource, name, namespace=None):
        if resource not in self.looked:
            self.looked.add(resource)
            raise NotFound(f'{resource} "{name}" not found')
        return await self.api.get(resource, name, namespace)

    def __getattr__(self, name):
        return getattr(self.api, name)


def test_apiservers_starting_together_do_not_fight_over_it(caplog):
    """The apiservers of an HA cluster reconcile at once: the one whose create loses the race
    (its Service refused for the address the winner took) finds the objects made, says nothing
    and leaves them as they are."""
    async def body(api):
        await Reconciler(api, WANT, "10.96.0.0/12").reconcile()
        rvs = [(await api.get(r, "kubernetes", "default"))["metadata"]["resourceVersion"]
               for r in ("services", "endpoints", "endpointslices")]
        with caplog.at_level(logging.WARNING, "kubemu.apiserver"):
            await Reconciler(_MadeMeanwhile(api), WANT, "10.96.0.0/12").reconcile()
        assert not [r for r in caplog.records if "kubernetes service" in r.getMessage()]
        assert [(await api.get(r, "kubernetes", "default"))["metadata"]["resourceVersion"]
                for r in ("services", "endpoints", "endpointslices")] == rvs
    _api_run(body)
