"""The hollow kubelet: many nodes from one process; bound pods reported Running, no processes."""
from __future__ import annotations

import sys

import pytest

from kubelet.hollow import hollow_status, needs_running
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
