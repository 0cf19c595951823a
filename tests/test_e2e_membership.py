"""Store membership follows the control-plane nodes, end to end with real processes and `--fast`
timings: on `kubemu up --nodes 3 --control-plane-nodes 3`, `kubemu node add --control-plane`
(kubeadm join --control-plane) adds store member store-3 and node-3's control plane, whose
apiserver serves writes; `kubemu node remove node-1` (kubeadm reset, with etcd's member
remove) takes store-1 out and every process of node-1 down while writes go on; a worker joins
and leaves without a store member; a removal that would leave the store without a quorum of
healthy members is refused; `down` then `up` brings the changed cluster back as it was; `down`
leaves nothing (the state_dir fixture checks)."""
from __future__ import annotations

import psutil
import pytest

from kubemu._wire_auth import state_credentials
from kubemu.apiclient import SyncApiClient
from kubemu.wire import WireError
from tests.conftest import wait_for
from tests import test_e2e_ha
from tests.test_e2e_ha import BOOT, LONG, TAINT, HACluster

ha = test_e2e_ha.ha  # the fixture: a 3-control-plane cluster, brought down afterwards


def members(ha: HACluster) -> list[str] | None:
    done = ha.cli("store", "member", "list", "-w", "simple", check=False)
    return sorted(line.split(",")[0] for line in done.stdout.splitlines()) if done.returncode == 0 else None


def written_through(ha: HACluster, endpoint: str, name: str) -> bool:
    """A ConfigMap NAME created through the apiserver at `endpoint` alone (again after a lost
    answer: AlreadyExists then means the first attempt went through)."""
    try:
        with SyncApiClient(endpoint, timeout=10, credentials=state_credentials(ha.dir)) as api:
            try:
                api.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}},
                           namespace="default")
            except WireError as err:
                if err.code != "AlreadyExists":
                    raise
            return api.get("configmaps", name, "default")["metadata"]["name"] == name
    except WireError:
        return False


def ready(ha: HACluster, node: str) -> bool:
    n = ha.call("get", "nodes", node)
    return bool(n) and any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])


@pytest.mark.timeout(3600)  # two boots of three control planes, a fourth joining, on a loaded 2-core machine
def test_control_plane_nodes_join_and_leave_with_their_store_members(ha):
    ha.cli("up", "--nodes", "3", "--control-plane-nodes", "3", "--fast", "--detach", "--api-port", "0",
           "--no-kubeconfig", "--timeout", str(BOOT), timeout=BOOT * 2)
    assert members(ha) == ["store-0", "store-1", "store-2"]

    # kubeadm join --control-plane: the member first, then node-3 with its control plane.
    done = ha.cli("node", "add", "--control-plane", "--fast", "--timeout", str(BOOT), timeout=BOOT * 2)
    assert "store member store-3 added" in done.stdout and "node/node-3 joined the control plane" in done.stdout
    assert members(ha) == ["store-0", "store-1", "store-2", "store-3"]
    node3 = f"ipc://{ha.dir}/nodes/node-3/apiserver.sock"
    assert node3 in ha.state.api_endpoint().split(",")
    assert f"ipc://{ha.dir}/nodes/node-3/store-3.sock" in (ha.dir / "store-endpoints").read_text().split()
    wait_for(lambda: written_through(ha, node3, "through-node-3"), timeout=LONG, interval=0.5,
             message="a write through node-3's apiserver")
    assert TAINT in ha.api.get("nodes", "node-3")["metadata"]["labels"]

    # kubeadm reset on node-1: store-1 leaves first, then every process of node-1 goes.
    node1 = ha.state.owned("node-1").processes()
    assert node1
    done = ha.cli("node", "remove", "node-1", timeout=LONG * 2)
    assert "store member store-1 removed" in done.stdout, done.stdout
    assert members(ha) == ["store-0", "store-2", "store-3"]
    # is_running() compares start times: a PID reused since is not node-1's
    assert not [p.pid for p in node1 if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not (ha.dir / "nodes" / "node-1").exists()
    assert "node-1" not in ha.state.api_endpoint()
    wait_for(lambda: ha.applied("after-node-1-left"), timeout=LONG, interval=0.5, message="a write after the removal")
    wait_for(lambda: ha.call("list", "nodes") and {n["metadata"]["name"] for n in ha.call("list", "nodes")["items"]}
             == {"node-0", "node-2", "node-3"}, timeout=LONG, interval=0.5, message="node-1's Node deleted")

    # A worker joins and leaves without touching the store's membership.
    done = ha.cli("node", "add", "--fast", "--timeout", str(BOOT), timeout=BOOT * 2)
    assert "node/node-4 joined" in done.stdout and "store member" not in done.stdout
    assert TAINT not in ha.api.get("nodes", "node-4")["metadata"]["labels"]
    ha.cli("node", "remove", "node-4", timeout=LONG * 2)
    assert members(ha) == ["store-0", "store-2", "store-3"] and not (ha.dir / "nodes" / "node-4").exists()

    # Refusals, one line each, nothing changed: node-0, and a removal that loses the quorum
    # (node-2 down: store-0 and a dead store-2 would be left).
    refused = ha.cli("node", "remove", "node-0", check=False)
    assert refused.returncode == 1 and refused.stderr.startswith("error: node-0 cannot be removed")
    ha.cli("node", "kill", "node-2")
    refused = ha.cli("node", "remove", "node-3", check=False)
    assert refused.returncode == 1, refused.stdout
    assert "fewer than a quorum of 2 (store-2 not answering)" in refused.stderr and "Traceback" not in refused.stderr
    assert members(ha) == ["store-0", "store-2", "store-3"]

    # down, then up with the flags of the first: the recorded layout comes back.
    ha.close()
    ha.cli("down", timeout=LONG * 3)
    assert not ha.state.running_nodes()
    ha.cli("up", "--nodes", "3", "--control-plane-nodes", "3", "--fast", "--detach", "--api-port", "0",
           "--no-kubeconfig", "--timeout", str(BOOT), timeout=BOOT * 2)
    assert sorted(ha.state.running_nodes()) == ["node-0", "node-2", "node-3"]
    wait_for(lambda: members(ha) == ["store-0", "store-2", "store-3"], timeout=LONG, interval=0.5,
             message="the store's members after up")
    for node in ("node-0", "node-2", "node-3"):
        wait_for(lambda: ready(ha, node), timeout=LONG, interval=0.5, message=f"{node} Ready after up")
    assert ha.api.get("configmaps", "through-node-3", "default")
    wait_for(lambda: written_through(ha, node3, "after-up"), timeout=LONG, interval=0.5,
             message="a write through node-3's apiserver after up")
    ha.close()
    ha.cli("down", timeout=LONG * 3)
    assert not ha.state.running_nodes()
