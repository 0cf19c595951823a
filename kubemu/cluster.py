"""`kubemu up` and `kubemu down`: the kubeadm analog. Writes each node's units, starts one
init per node in its own session, and later stops them in order, leaving no process behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from . import wire
from .statedir import ENV, StateDir

# kubeadm's kubelet.service drop-in: Restart=always, RestartSec=10, StartLimitIntervalSec=0;
# kubemu adds Type=notify and a watchdog so init notices a hung kubelet too.
KUBELET_UNIT = """\
# Written by `kubemu up`, like the kubelet.service kubeadm installs.
[Unit]
Description=kubelet: The Kubernetes Node Agent (kubemu, node {node})
Documentation=https://kubernetes.io/docs/
StartLimitIntervalSec=0

[Service]
Type=notify
ExecStart="{python}" -m kubelet --node {node} --node-dir "{node_dir}"{kubelet_args}
Restart=always
RestartSec={restart_sec}
WatchdogSec={watchdog_sec}
TimeoutStopSec=30

[Install]
WantedBy=multi-user.target
"""


# The control plane boots the way kubeadm boots it: as static pods of node-0's kubelet. Each
# store replica is one pod (namespace kube-system, like etcd's), its data under node-0's
# directory, all of them reachable through ipc:// sockets there.
STORE_REPLICAS = 3
STORE_POD = """\
# Written by `kubemu up`: store replica {name} (the etcd of kubemu) as a static pod.
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: kube-system
  labels: {{component: store, tier: control-plane}}
spec:
  containers:
  - name: store
    command: ["{python}", "-m", "store", "--name", "{name}", "--data-dir", "{data_dir}",
              "--listen", "{endpoint}", "--peers", "{peers}"]
  terminationGracePeriodSeconds: 30
"""


def store_endpoints(state: StateDir, replicas: int = STORE_REPLICAS) -> dict[str, str]:
    node_dir = state.node_dir(node_names(1)[0])
    return {f"store-{i}": f"ipc://{node_dir / f'store-{i}.sock'}" for i in range(replicas)}


def write_control_plane(state: StateDir, replicas: int = STORE_REPLICAS) -> None:
    """node-0's static pod manifests for the store, and <state>/store-endpoints for clients."""
    endpoints = store_endpoints(state, replicas)
    node_dir = state.node_dir(node_names(1)[0])
    peers = ",".join(f"{name}={ep}" for name, ep in endpoints.items())
    for name, endpoint in endpoints.items():
        (node_dir / "manifests" / f"{name}.yaml").write_text(STORE_POD.format(
            name=name, python=sys.executable, data_dir=node_dir / "data" / name, endpoint=endpoint, peers=peers))
    (state.root / "store-endpoints").write_text("".join(f"{ep}\n" for ep in endpoints.values()))


def node_names(count: int) -> list[str]:
    return [f"node-{i}" for i in range(count)]


def write_node(state: StateDir, node: str, restart_sec: float = 10, watchdog_sec: float = 30,
               kubelet_args: str = "") -> Path:
    node_dir = state.node_dir(node)
    for sub in ("units", "manifests", "logs"):
        (node_dir / sub).mkdir(parents=True, exist_ok=True)
    for path in (state.root, state.nodes_dir, node_dir):
        os.chmod(path, 0o700)
    (node_dir / "units" / "kubelet.service").write_text(KUBELET_UNIT.format(
        node=node, node_dir=node_dir, python=sys.executable, restart_sec=f"{restart_sec:g}",
        watchdog_sec=f"{watchdog_sec:g}", kubelet_args=f" {kubelet_args}" if kubelet_args else ""))
    return node_dir


def start_init(state: StateDir, node: str) -> subprocess.Popen:
    node_dir = state.node_dir(node)
    env = dict(os.environ, **{ENV: str(state.root)})
    with open(node_dir / "logs" / "init.stdout.log", "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "init", "--node-dir", str(node_dir), "--node", node],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)


def node_status(state: StateDir, node: str, timeout: float = 3.0) -> dict | None:
    """init's `status` answer for a node, or None if its init does not answer."""
    if state.init_pid(node) is None:
        return None
    try:
        with wire.SyncClient(state.init_endpoint(node), timeout=timeout) as client:
            return client.call("status", idempotent=True)
    except wire.WireError:
        return None


def wait_started(state: StateDir, nodes: list[str], timeout: float) -> dict[str, dict]:
    """Wait until every node's init answers and none of its units is still activating."""
    deadline = time.monotonic() + timeout
    statuses: dict[str, dict] = {}
    while time.monotonic() < deadline:
        for node in nodes:
            st = node_status(state, node)
            if st and all(u["active_state"] != "activating" for u in st["units"]):
                statuses[node] = st
        if len(statuses) == len(nodes):
            return statuses
        time.sleep(0.1)
    missing = [n for n in nodes if n not in statuses]
    raise TimeoutError(f"node(s) {', '.join(missing)} did not finish starting within {timeout:g}s")


def up(state: StateDir, count: int, restart_sec: float = 10, watchdog_sec: float = 30) -> list[str]:
    already = state.running_nodes()
    if already:
        raise RuntimeError(f"a cluster is already running in {state.root} (nodes: {', '.join(already)}); "
                           "`kubemu down` first")
    nodes = node_names(count)
    for node in nodes:
        write_node(state, node, restart_sec, watchdog_sec)
    write_control_plane(state)
    for node in nodes:
        start_init(state, node)
    return nodes


def down(state: StateDir, timeout: float = 150.0) -> list[int]:
    """Stop every node's init (which stops its units in order, TimeoutStopSec respected) and
    return once no process of the state directory is left. Returns stragglers it had to kill."""
    inits = []
    for node in state.nodes():
        pid = state.init_pid(node)
        if pid is None:
            continue
        try:
            with wire.SyncClient(state.init_endpoint(node), timeout=3.0) as client:
                client.call("shutdown")
        except wire.WireError:
            os.kill(pid, signal.SIGTERM)
        inits.append(psutil.Process(pid))
    _gone, alive = psutil.wait_procs(inits, timeout=timeout)
    for proc in alive:
        proc.kill()
    # Anything still marked with this state directory was leaked by a layer below: no survivors.
    return state.kill_processes()
