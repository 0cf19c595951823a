"""An HA control plane end to end, real processes and `--fast` timings: `kubemu up --nodes 3
--control-plane-nodes 3` (kubeadm's stacked etcd: every node runs a store replica, an apiserver,
a scheduler and a controller-manager), then the node of the controller-manager's leader loses
power (`kubemu node kill`): API writes succeed again through the other apiservers (the wire's
client-side failover, and the HTTPS door the apiservers share), a Deployment scaled during the
outage converges, the Leases name new holders on the nodes left, and the node, started again,
rejoins (its store replica catches up, its apiserver answers).

Needs the leader election (kubemu/leaderelector.py) and the clients' failover
(kubemu/_wire_failover.py) as well as the layout (kubemu/cluster.py)."""
from __future__ import annotations

import http.client
import json
import ssl
import sys

import pytest

from kubemu._wire_auth import state_credentials
from kubemu.apiclient import SyncApiClient
from kubemu.statedir import StateDir
from kubemu.wire import WireError
from store.client import SyncStoreClient
from tests.conftest import DEADLINE, wait_for
from tests.kubemu.test_cli import kubemu

LONG = DEADLINE * 3  # a whole node's processes restart on a loaded 2-core machine
BOOT = DEADLINE * 6  # three control planes start at once
CONTROL_PLANE = ["node-0", "node-1", "node-2"]
LEASES = ("kube-scheduler", "kube-controller-manager")
TAINT = "node-role.kubernetes.io/control-plane"


def deployment(replicas: int) -> str:
    """Pods that may run on the control-plane nodes: every node of this cluster is one."""
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                     "terminationGracePeriodSeconds": 1,
                     "tolerations": [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "web", "command": [sys.executable, "-S", "-c",
                                                                "import time; time.sleep(100000)"]}]}}}})


class HACluster:
    def __init__(self, state_dir):
        self.dir = state_dir
        self.state = StateDir(state_dir)
        self._api: SyncApiClient | None = None

    def cli(self, *args, check=True, timeout=LONG):
        return kubemu(self.dir, *args, check=check, timeout=timeout)

    @property
    def api(self) -> SyncApiClient:
        """A client of every apiserver, as `kubemu up` lists them."""
        if self._api is None:
            self._api = SyncApiClient(self.state.api_endpoint(), timeout=5, credentials=state_credentials(self.dir))
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.close()
            self._api = None

    def call(self, fn, *args, **kw):
        """None while no apiserver answers."""
        try:
            return getattr(self.api, fn)(*args, **kw)
        except WireError:
            return None

    def applied(self, name: str) -> bool:
        """`kubemu apply` of a ConfigMap NAME succeeded (again: apply is idempotent, so an
        attempt whose answer was lost does no harm)."""
        path = self.dir / f"{name}.json"
        path.write_text(json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}))
        return self.cli("apply", "-f", str(path), check=False).returncode == 0

    def holders(self) -> dict[str, str] | None:
        """Lease name -> holder identity (`<node>_<pid>`), once both Leases are held."""
        found = {}
        for name in LEASES:
            lease = self.call("get", "leases.coordination.k8s.io", name, namespace="kube-system")
            holder = ((lease or {}).get("spec") or {}).get("holderIdentity")
            if not holder:
                return None
            found[name] = holder
        return found

    def deployment_converged(self, replicas: int) -> bool:
        d = self.call("get", "deployments.apps", "web", namespace="default")
        if d is None:
            return False
        status = d.get("status") or {}
        return (status.get("observedGeneration") == d["metadata"]["generation"]
                and status.get("replicas") == status.get("readyReplicas") == status.get("availableReplicas")
                == status.get("updatedReplicas") == replicas)

    def mirror_pod_running(self, name: str) -> bool:
        pod = self.call("get", "pods", name, namespace="kube-system")
        return bool(pod) and (pod.get("status") or {}).get("phase") == "Running"

    def https_get(self, path: str) -> int:
        """One HTTPS request on a new connection to the door the apiservers share, as the admin."""
        pki = self.dir / "pki"
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        conn = http.client.HTTPSConnection("127.0.0.1", self.state.api_port(), context=ctx, timeout=DEADLINE)
        try:
            conn.request("GET", path)
            return conn.getresponse().status
        finally:
            conn.close()


def node_of(holder: str) -> str:
    return holder.rpartition("_")[0]


@pytest.fixture
def ha(state_dir):
    c = HACluster(state_dir)
    try:
        yield c
    finally:
        c.close()
        if c.state.running_nodes():
            c.cli("down", check=False)


@pytest.mark.timeout(2400)  # three nodes' control planes boot, one of them twice, on a loaded 2-core machine
def test_losing_a_control_plane_node_loses_no_control(ha, tmp_path):
    ha.cli("up", "--nodes", "3", "--control-plane-nodes", "3", "--fast", "--detach", "--timeout", str(BOOT),
           timeout=BOOT * 2)
    api = [f"ipc://{ha.dir}/nodes/{n}/apiserver.sock" for n in CONTROL_PLANE]
    assert ha.state.api_endpoint() == ",".join(api)
    for i, node in enumerate(CONTROL_PLANE):  # kubeadm's layout on each: mirror pods of its static pods
        for name in (f"store-{i}-{node}", f"apiserver-{node}", f"scheduler-{node}", f"controller-manager-{node}"):
            wait_for(lambda: ha.mirror_pod_running(name), timeout=LONG, interval=0.25, message=f"{name} Running")
        labels = ha.api.get("nodes", node)["metadata"]["labels"]
        assert TAINT in labels
    holders = wait_for(ha.holders, timeout=LONG, interval=0.25, message="a scheduler and a controller-manager leader")
    assert {node_of(h) for h in holders.values()} <= set(CONTROL_PLANE), holders

    manifest = tmp_path / "web.json"
    manifest.write_text(deployment(3))
    ha.cli("apply", "-f", str(manifest))
    wait_for(lambda: ha.deployment_converged(3), timeout=LONG, interval=0.25, message="3 web pods ready")

    # The controller-manager leader's node loses power.
    victim = node_of(holders["kube-controller-manager"])
    ha.cli("node", "kill", victim)

    # Writes succeed again through the apiservers left: the CLI's, and the Deployment scaled now.
    wait_for(lambda: ha.applied("after-the-loss"), timeout=LONG, interval=0.25,
             message="an API write after the node's loss")
    wait_for(lambda: ha.cli("scale", "deployment/web", "--replicas", "5", check=False).returncode == 0,
             timeout=LONG, interval=0.25, message="the scale during the outage")
    # The HTTPS door: each new connection lands on a live apiserver's listener.
    for _ in range(6):
        assert ha.https_get("/api/v1/namespaces/default/configmaps/after-the-loss") == 200

    # New leaders on the nodes left, and the Deployment converges without the dead node's pods.
    def new_holders():
        now = ha.holders()
        return now if now and all(node_of(h) != victim for h in now.values()) else None
    wait_for(new_holders, timeout=LONG, interval=0.25, message=f"leaders elsewhere than {victim}")
    wait_for(lambda: ha.deployment_converged(5), timeout=LONG, interval=0.25,
             message="the Deployment scaled during the outage converged")
    pods = ha.api.list("pods", "default", label_selector="app=web")["items"]
    assert {p["spec"].get("nodeName") for p in pods if not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") == "Running"} <= set(CONTROL_PLANE) - {victim}

    # The node boots again: its store replica catches up, its own apiserver answers.
    ha.cli("node", "start", victim)
    wait_for(lambda: ha.mirror_pod_running(f"apiserver-{victim}"), timeout=LONG, interval=0.25,
             message=f"{victim}'s apiserver back")
    with SyncApiClient(api[CONTROL_PLANE.index(victim)], timeout=5, credentials=state_credentials(ha.dir)) as own:
        def own_answers():
            try:
                return own.get("configmaps", "after-the-loss", "default")
            except WireError:
                return None
        wait_for(own_answers, timeout=LONG, interval=0.25, message=f"{victim}'s apiserver serving")
    wait_for(lambda: ha.applied("after-rejoin"), timeout=LONG, interval=0.25, message="a write after the rejoin")
    replica = f"store-{CONTROL_PLANE.index(victim)}"
    endpoints = (ha.dir / "store-endpoints").read_text().split()
    with SyncStoreClient(endpoints, credentials=state_credentials(ha.dir)) as store:
        committed = max(s.get("commit_index", 0) for s in store.status_all() if "error" not in s)

        def caught_up():
            try:
                return store.status(endpoints[CONTROL_PLANE.index(victim)]).get("applied_index", 0) >= committed
            except WireError:
                return False
        wait_for(caught_up, timeout=LONG, interval=0.25, message=f"{replica} caught up with the store")
    wait_for(lambda: (n := ha.call("get", "nodes", victim)) and any(
        c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]),
        timeout=LONG, interval=0.25, message=f"{victim} Ready again")
