"""`kubemu up` and `kubemu down`: the kubeadm analog. Writes each node's units, starts one
init per node in its own session, and later stops them in order, leaving no process behind."""
from __future__ import annotations

import os
import signal
import socket
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


# Until the control plane's programs exist, node-0 gets an example static pod: a web server
# with readiness and liveness probes, so `kubemu ps`, `kill -9` and `kubemu logs` have
# something to show. Written once, into an empty manifest directory only.
EXAMPLE_POD = """\
# An example static pod written by `kubemu up` (delete it freely; the kubelet stops the pod).
apiVersion: v1
kind: Pod
metadata:
  name: hello
  labels: {{app: hello}}
spec:
  containers:
  - name: web
    command: ["{python}", "-m", "http.server", "{port}", "--bind", "127.0.0.1"]
    ports: [{{containerPort: {port}, name: http}}]
    readinessProbe: {{httpGet: {{path: /, port: http}}, periodSeconds: 5}}
    livenessProbe: {{tcpSocket: {{port: http}}, periodSeconds: 10}}
    resources: {{limits: {{memory: 200Mi}}}}
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_example_pod(manifests: Path) -> None:
    if not any(manifests.iterdir()):
        (manifests / "hello.yaml").write_text(EXAMPLE_POD.format(python=sys.executable, port=free_port()))


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
    write_example_pod(state.node_dir(nodes[0]) / "manifests")
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
