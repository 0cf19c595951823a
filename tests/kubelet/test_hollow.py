"""The hollow kubelet: many nodes from one process; bound pods reported Running, no processes."""
from __future__ import annotations

import sys

import pytest

from kubelet.hollow import PodAddresses, hollow_status, needs_running, node_pod_cidr
from kubelet.nodestatus import NODE_IP
from kubemu import wire
from tests.components.apiserver import api  # noqa: F401  (a module-scoped fixture)
from tests.conftest import spawn_marked, terminate, wait_for


def test_hollow_status_is_running_and_ready_for_every_container():
    pod = {"metadata": {"uid": "u1"}, "spec": {"containers": [{"name": "b", "image": "x"}, {"name": "a"}]}}
    status = hollow_status(pod, 1_800_000_000)
    assert status["phase"] == "Running" and status["startTime"] == "2027-01-15T08:00:00Z"
    assert [c["name"] for c in status["containerStatuses"]] == ["a", "b"]
    assert all(c["ready"] and "running" in c["state"] for c in status["containerStatuses"])
    assert {c["type"]: c["status"] for c in status["conditions"]}["Ready"] == "True"
    assert needs_running({"status": {"phase": "Pending"}}) and not needs_running({"status": status})


def test_hollow_status_carries_the_pod_ip():
    pod = {"metadata": {"uid": "u1"}, "spec": {"containers": [{"name": "a"}]}}
    assert hollow_status(pod, 0)["podIP"] == NODE_IP
    status = hollow_status(pod, 0, "10.244.1.2")
    assert (status["podIP"], status["podIPs"], status["hostIP"]) == \
        ("10.244.1.2", [{"ip": "10.244.1.2"}], NODE_IP)


def test_pod_addresses_are_sequential_per_node_like_host_local():
    a = PodAddresses()
    assert [a.assign("n0", "10.244.1.0/24", f"u{i}") for i in range(3)] == \
        ["10.244.1.2", "10.244.1.3", "10.244.1.4"]
    assert a.assign("n1", "10.244.2.0/24", "v0") == "10.244.2.2"
    assert a.assign("n0", "10.244.1.0/24", "u1") == "10.244.1.3", "a repeat keeps its address"
    a.release("u1")
    # round-robin: the freed .3 comes back only after the range wraps
    assert a.assign("n0", "10.244.1.0/24", "u3") == "10.244.1.5"


def test_pod_addresses_skip_what_is_in_use_and_wrap():
    a = PodAddresses()
    a.observe("old", "10.9.0.3")          # a pod reported before a restart
    cidr = "10.9.0.0/29"                  # .2 to .6: .0 network, .1 gateway, .7 broadcast
    got = [a.assign("n", cidr, f"u{i}") for i in range(4)]
    assert got == ["10.9.0.2", "10.9.0.4", "10.9.0.5", "10.9.0.6"]
    assert a.assign("n", cidr, "full") is None
    a.release("u0")
    assert a.assign("n", cidr, "full") == "10.9.0.2"
    assert PodAddresses().assign("n", "10.9.0.0/31", "u") is None


def test_pod_addresses_follow_a_changed_pod_cidr_of_the_same_node():
    # the parsed ranges are cached: by the CIDR's text, never by the node's name
    a = PodAddresses()
    assert a.assign("n0", "10.244.1.0/24", "u0") == "10.244.1.2"
    assert a.assign("n0", "10.244.9.0/24", "u1") == "10.244.9.2"
    assert a.assign("n0", "10.244.9.0/30", "u2") is None, "a /30 of it has one address, taken"
    assert node_pod_cidr({"spec": {"podCIDR": "10.244.9.7/24"}}) == "10.244.9.0/24"
    assert node_pod_cidr({"spec": {"podCIDR": "10.244.1.0/24"}}) == "10.244.1.0/24"


def test_node_pod_cidr():
    assert node_pod_cidr({"spec": {"podCIDR": "10.244.3.0/24"}}) == "10.244.3.0/24"
    assert node_pod_cidr({"spec": {}}) is None and node_pod_cidr(None) is None
    assert node_pod_cidr({"spec": {"podCIDR": "fd00::/64"}}) is None


@pytest.fixture
def hollow(state_dir, api):  # noqa: F811
    proc = spawn_marked([sys.executable, "-m", "kubelet", "--hollow", "--nodes", "5", "--api", api.endpoint,
                         "--cpu", "2", "--node-status-update-frequency", "0.5"], state_dir,
                        stdout=open(state_dir / "hollow.log", "wb"))
    yield proc
    terminate(proc)


def ready(node: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])


def test_hollow_nodes_register_and_run_bound_pods(hollow, api):  # noqa: F811
    def hollow_nodes() -> list[dict]:
        return [n for n in api.call("list", resource="nodes")["items"]
                if n["metadata"]["name"].startswith("hollow-node-") and ready(n)]
    nodes = wait_for(lambda: len(hollow_nodes()) == 5 and hollow_nodes(), message="5 Ready hollow nodes")
    assert nodes[0]["status"]["capacity"]["cpu"] == "2"
    for i in range(3):
        api.call("create", resource="pods", namespace="default", object={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"h{i}"},
            "spec": {"nodeName": f"hollow-node-{i}", "containers": [{"name": "c", "command": ["serve"]}]}})
    for i in range(3):
        wait_for(lambda: api.call("get", resource="pods", namespace="default", name=f"h{i}")["status"].get("phase")
                 == "Running", message=f"pod h{i} Running")
    api.call("delete", resource="pods", namespace="default", name="h1")

    def gone() -> bool:
        try:
            api.call("get", resource="pods", namespace="default", name="h1")
            return False
        except wire.NotFound:
            return True
    wait_for(gone, message="the hollow kubelet to finish the graceful delete")
    for i in (0, 2):
        api.call("delete", resource="pods", namespace="default", name=f"h{i}", grace_period_seconds=0)


def test_hollow_kubelet_runs_a_pod_bound_after_its_creation(hollow, api):  # noqa: F811
    # the hollow kubelet watches bound pods only: binding must bring the pod to it (ADDED)
    wait_for(lambda: any(n["metadata"]["name"] == "hollow-node-4"
                         for n in api.call("list", resource="nodes")["items"]), message="hollow-node-4")
    api.call("create", resource="pods", namespace="default", object={
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "late"},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "command": ["serve"]}]}})
    try:
        api.call("bind", namespace="default", name="late", node="hollow-node-4")
        wait_for(lambda: api.call("get", resource="pods", namespace="default", name="late")["status"]
                 .get("phase") == "Running", message="the pod bound after its creation Running")
    finally:
        api.call("delete", resource="pods", namespace="default", name="late", grace_period_seconds=0)


def test_hollow_pods_get_ips_from_their_nodes_pod_cidr(state_dir, api):  # noqa: F811
    proc = spawn_marked([sys.executable, "-m", "kubelet", "--hollow", "--nodes", "3", "--api",
                         api.endpoint, "--node-prefix", "ipam-node-"], state_dir,
                        stdout=open(state_dir / "hollow-ipam.log", "wb"))
    try:
        wait_for(lambda: {n["metadata"]["name"] for n in api.call("list", resource="nodes")["items"]}
                 >= {"ipam-node-0", "ipam-node-1", "ipam-node-2"}, message="3 hollow nodes")
        # node IPAM's part, played here: ipam-node-1 gets no podCIDR, ipam-node-2 a /30 with
        # room for one pod
        for name, cidr in (("ipam-node-0", "10.244.7.0/24"), ("ipam-node-2", "10.244.8.0/30")):
            api.call("patch", resource="nodes", name=name, patch_type="merge",
                     patch={"spec": {"podCIDR": cidr, "podCIDRs": [cidr]}})

        def pod(name, node, host_network=False):
            spec = {"nodeName": node, "containers": [{"name": "c", "command": ["serve"]}]}
            if host_network:
                spec["hostNetwork"] = True
            api.call("create", resource="pods", namespace="default", object={
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})

        def pod_ip(name):
            status = api.call("get", resource="pods", namespace="default", name=name)["status"]
            return status.get("podIP") if status.get("phase") == "Running" else None

        for i in range(3):
            pod(f"ip{i}", "ipam-node-0")
            wait_for(lambda: pod_ip(f"ip{i}"), message=f"pod ip{i} Running")
        pod("host", "ipam-node-0", host_network=True)
        pod("other", "ipam-node-1")
        assert [pod_ip(f"ip{i}") for i in range(3)] == ["10.244.7.2", "10.244.7.3", "10.244.7.4"]
        assert wait_for(lambda: pod_ip("host"), message="the hostNetwork pod") == NODE_IP
        assert wait_for(lambda: pod_ip("other"), message="the pod on the node without a podCIDR") \
            == NODE_IP
        pod("small0", "ipam-node-2")
        assert wait_for(lambda: pod_ip("small0"), message="small0 Running") == "10.244.8.2"
        pod("small1", "ipam-node-2")
        assert wait_for(lambda: pod_ip("small1"), message="small1 Running") == NODE_IP
    finally:
        terminate(proc)
        for name in ("ip0", "ip1", "ip2", "host", "other", "small0", "small1"):
            try:
                api.call("delete", resource="pods", namespace="default", name=name,
                         grace_period_seconds=0)
            except wire.NotFound:
                pass
