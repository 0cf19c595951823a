"""`kubemu up` and `kubemu down`: the kubeadm analog. Writes the PKI and kubeconfigs (kubeadm's
certs and kubeconfig phases, kubemu/pki.py), each node's units and, on the control-plane nodes
(node-0, or node-0..N-1 with `--control-plane-nodes N`), the static pod manifests of the control
plane; starts one init per node in its own session and cgroup; waits for every node to be Ready;
creates the addons, kube-proxy's DaemonSet and the cluster DNS (kubemu/addons.py); later stops
them in order, leaving no process of theirs behind and touching no other (kubemu/ownership.py).
Worker nodes reach the control plane by its endpoints, as `kubeadm join` does.

With N control-plane nodes the layout is kubeadm's stacked etcd topology: each control-plane
node runs one store replica, an apiserver (every apiserver talks to every replica), a scheduler
and a controller-manager (those two elect one leader each). Every client of the wire gets every
apiserver's endpoint, in its own order of preference (its own node's first), and fails over
between them; the apiservers share one HTTPS port (SO_REUSEPORT), so the kernel spreads
kubectl's connections over the live ones as a load balancer in front of kubeadm's would.

With `--apiserver-advertise-address IP` (kept for the next `up`), nodes of other machines reach
the control plane too: every apiserver also serves HTTPS on IP:<api-port> (its certificate names
IP) and control-plane node-i's serves the wire with CURVE on tcp://IP:<api-port + 1 + i>;
cluster-info carries those endpoints and the CURVE server key for `kubemu join`."""
from __future__ import annotations

import functools
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from . import _wire_auth as wireauth
from . import nodemembership
from . import addons, apipreference, cgroups, kubeconfig, leaderelection, netplan, network, ownership, wire, wirekeys
from .api.identity import KUBE_PROXY
from .child import proc_stat
from .statedir import ENV, StateDir, write_atomic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timings:
    """Every Kubernetes timing `kubemu up` sets; `--fast` scales them down (README's table)."""
    kubelet_restart_sec: float = 10       # kubelet.service RestartSec (kubeadm's drop-in)
    pod_time_scale: float = 1.0           # CrashLoopBackOff 10 s -> 300 s, probes, grace periods
    lease_duration: int = 40              # kube-node-lease Lease duration
    node_status_update: float = 10        # Lease renewal and node checks
    node_status_report: float = 300       # node status post when nothing changed
    node_monitor_period: float = 5
    node_monitor_grace: float = 40
    node_startup_grace: float = 60
    eviction_rate: float = 0.1            # nodes/s (--node-eviction-rate)
    toleration_seconds: float = 300       # DefaultTolerationSeconds for not-ready/unreachable
    scheduler_backoff: tuple = (1.0, 10.0)
    file_check_frequency: float = 20
    # kube-scheduler's and kube-controller-manager's --leader-elect-lease-duration,
    # --leader-elect-renew-deadline and --leader-elect-retry-period
    leader_elect: tuple = (leaderelection.LEASE_DURATION, leaderelection.RENEW_DEADLINE, leaderelection.RETRY_PERIOD)


DEFAULT_TIMINGS = Timings()
FAST_TIMINGS = Timings(kubelet_restart_sec=1, pod_time_scale=0.1, lease_duration=4, node_status_update=1,
                       node_status_report=30, node_monitor_period=0.5, node_monitor_grace=4,
                       node_startup_grace=6, eviction_rate=1, toleration_seconds=5,
                       scheduler_backoff=(0.1, 1.0), file_check_frequency=2, leader_elect=(6.0, 4.0, 1.0))
# The first control-plane node: the only one by default; hollow nodes and kube-proxy's side of
# the host link live there.
CONTROL_PLANE_NODE = "node-0"
# kubeadm's HA clusters have an odd number of control-plane nodes: a store quorum survives
# losing (N-1)/2 of them.
CONTROL_PLANE_NODE_COUNTS = (1, 3, 5)
# Each pod's most processes (the kubelet's --pod-max-pids): a fork bomb in one pod stays in it.
POD_MAX_PIDS = 4096
CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"

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


# `--hollow-nodes M`: one process on node-0 plays M kubelets (kubemark's hollow nodes).
HOLLOW_UNIT = """\
# Written by `kubemu up --hollow-nodes {count}`: {count} hollow nodes (no processes per pod).
[Unit]
Description=hollow kubelet: {count} emulated nodes without containers (kubemu)
StartLimitIntervalSec=0

[Service]
Type=simple
ExecStart={argv}
Restart=always
RestartSec={restart_sec}

[Install]
WantedBy=multi-user.target
"""
HOLLOW_PREFIX = "hollow-node-"
HOLLOW_IDENTITY = wireauth.node_identity("hollow")  # one process plays every hollow node: one identity


# The control plane boots the way kubeadm boots it: as static pods of the control-plane nodes'
# kubelets. Each store replica is one pod (namespace kube-system, like etcd's), its data under
# its node's directory, reachable through an ipc:// socket there.
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
              "--listen", "{endpoint}", "--peers", "{peers}", "--wire-secrets", "{secrets}"{join}]
    resources: {{requests: {requests}}}
  hostNetwork: true
  terminationGracePeriodSeconds: 30
"""


# The apiserver, scheduler and controller-manager: one container each, its argv from Python.
COMPONENT_POD = """\
# Written by `kubemu up`: the {name} of the control plane as a static pod (kubeadm's way).
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: kube-system
  labels: {{component: {name}, tier: control-plane}}
spec:
  containers:
  - name: {name}
    command: {argv}
    resources: {{requests: {requests}}}
  hostNetwork: true
  terminationGracePeriodSeconds: 30
"""


# The first words of every manifest `kubemu up` writes: what it may remove again.
WRITTEN_BY = "# Written by `kubemu up`"
# Before kube-proxy was a DaemonSet (kubemu/addons.py), `up` wrote it as a static pod per node.
OLD_KUBE_PROXY_MANIFEST = "kube-proxy.yaml"


# kubeadm's requests for the control plane's static pods: Burstable pods, whose CPU shares keep
# them from being starved by busy pods (a pod without requests is BestEffort: 2 shares).
CONTROL_PLANE_REQUESTS = {"store": {"cpu": "100m", "memory": "100Mi"}, "apiserver": {"cpu": "250m"},
                          "controller-manager": {"cpu": "200m"}, "scheduler": {"cpu": "100m"}}

# The REST door: kube-apiserver's --secure-port default, on loopback only.
DEFAULT_API_PORT = 6443
BIND_ADDRESS = "127.0.0.1"
CONTEXT = "kubemu"  # the context `up` merges into the user's kubeconfig (kind's kind-kind)


def control_plane_nodes(count: int = 1) -> list[str]:
    return node_names(count)


def store_nodes(control_plane_count: int = 1, replicas: int = STORE_REPLICAS) -> dict[str, str]:
    """Store replica -> the node that runs it: one control-plane node runs all `replicas`;
    N of them run one each, store-i on node-i (stacked etcd: `replicas` does not apply)."""
    if control_plane_count == 1:
        return {f"store-{i}": CONTROL_PLANE_NODE for i in range(replicas)}
    return {f"store-{i}": node for i, node in enumerate(control_plane_nodes(control_plane_count))}


def store_endpoints(state: StateDir, replicas: int = STORE_REPLICAS, control_plane_count: int = 1) -> dict[str, str]:
    return {name: store_endpoint(state, name, node)
            for name, node in store_placement(state, control_plane_count, replicas).items()}


def store_endpoint(state: StateDir, name: str, node: str) -> str:
    return f"ipc://{state.node_dir(node) / f'{name}.sock'}"


def store_data_dir(state: StateDir, name: str, node: str) -> Path:
    return state.node_dir(node) / "data" / name


def apiserver_endpoint(state: StateDir, node: str) -> str:
    """Where the apiserver of control-plane node `node` serves the wire."""
    return f"ipc://{state.node_dir(node) / 'apiserver.sock'}"


def api_endpoint(state: StateDir, control_plane_count: int = 1) -> str:
    """Every apiserver's endpoint, comma-joined, node-0's first (<state>/api-endpoint)."""
    return node_api_endpoint(state, CONTROL_PLANE_NODE, control_plane_count)


def node_api_endpoint(state: StateDir, node: str, control_plane_count: int = 1) -> str:
    """The apiserver endpoints the clients on `node` use, in their order of preference."""
    endpoints = [apiserver_endpoint(state, n) for n in control_plane_of(state, control_plane_count)]
    return ",".join(apipreference.for_node(endpoints, node))


# A testing knob: seconds (a float) the CronJob controller's clock runs ahead of real time, read
# from <state>/cronjob-clock-offset whenever it changes; absent means 0. Tests move the clock by
# writing it, instead of waiting for the minutes of a schedule.
CRONJOB_CLOCK_OFFSET = "cronjob-clock-offset"
# Where the local-path provisioner puts a node's volumes: <state>/nodes/<node>/local-path.
LOCAL_PATH_DIR = "local-path"


def control_plane_argv(state: StateDir, endpoints: dict[str, str], t: Timings, api_port: int,
                       net: netplan.Record | None = None, node: str = CONTROL_PLANE_NODE,
                       control_plane_count: int = 1, advertise: str | None = None) -> dict[str, list[str]]:
    """The argv of control-plane node `node`'s apiserver, scheduler and controller-manager;
    with an `advertise` address, the apiserver serves HTTPS and the wire (CURVE) there too."""
    from . import pki  # here: importing cryptography costs every command ~0.1 s
    api = node_api_endpoint(state, node, control_plane_count)
    logs = state.node_dir(node) / "logs"
    secrets = wireauth.secrets_dir(state.root)
    # several apiservers: one HTTPS port, the kernel spreads connections over them
    sharing = ["--permit-port-sharing"] if len(control_plane_of(state, control_plane_count)) > 1 else []
    lease, renew, retry = t.leader_elect
    leader_elect = ["--leader-elect-lease-duration", f"{lease:g}s", "--leader-elect-renew-deadline", f"{renew:g}s",
                    "--leader-elect-retry-period", f"{retry:g}s"]
    return {
        "apiserver": [sys.executable, "-m", "components.apiserver", "--listen", apiserver_endpoint(state, node),
                      "--store-endpoints", ",".join(endpoints.values()),
                      "--audit-log", str(logs / "audit.log"), "--state-dir", str(state.root),
                      "--wire-secrets", str(secrets),
                      "--store-credentials", str(wireauth.secret_path(secrets, wireauth.APISERVER)),
                      "--kubelet-client-credentials", str(wireauth.secret_path(secrets, wireauth.KUBELET_CLIENT))]
                     + apiserver_tls_flags(state.pki_dir, api_port, advertise) + sharing
                     + (netplan.apiserver_flags(net) if net else [])
                     + ([] if advertise is None else
                        ["--wire-listen-address", wire_endpoint(advertise, api_port, node),
                         "--wire-curve-dir", str(wirekeys.curve_dir(state.root))]),
        "scheduler": [sys.executable, "-m", "components.scheduler", "--api", api,
                      "--wire-credentials", str(wireauth.secret_path(secrets, wireauth.SCHEDULER)),
                      "--backoff-initial", f"{t.scheduler_backoff[0]:g}",
                      "--backoff-max", f"{t.scheduler_backoff[1]:g}", *leader_elect],
        "controller-manager": [sys.executable, "-m", "components.controller_manager", "--api", api,
                               "--wire-credentials",
                               str(wireauth.secret_path(secrets, wireauth.CONTROLLER_MANAGER)), *leader_elect,
                               "--node-monitor-period", f"{t.node_monitor_period:g}",
                               "--node-monitor-grace-period", f"{t.node_monitor_grace:g}",
                               "--node-startup-grace-period", f"{t.node_startup_grace:g}",
                               "--node-eviction-rate", f"{t.eviction_rate:g}",
                               "--default-toleration-seconds", f"{t.toleration_seconds:g}",
                               "--time-scale", f"{t.pod_time_scale:g}",
                               "--root-ca-file", str(state.pki_dir / f"{pki.CA_NAME}.crt"),
                               "--cluster-signing-cert-file", str(state.pki_dir / f"{pki.CA_NAME}.crt"),
                               "--cluster-signing-key-file", str(state.pki_dir / f"{pki.CA_NAME}.key"),
                               "--cronjob-clock-offset-file", str(state.root / CRONJOB_CLOCK_OFFSET),
                               "--local-path-dir-template", str(state.node_dir("{node}") / LOCAL_PATH_DIR)]
                              + (netplan.controller_manager_flags(net) if net else []),
    }


def apiserver_tls_flags(pki_dir: Path, api_port: int, advertise: str | None = None) -> list[str]:
    """kube-apiserver's flags for the HTTPS door and its PKI (also on the `advertise` address)."""
    from . import pki, serviceaccount_token  # here: importing cryptography costs every command ~0.1 s
    return ["--secure-port", str(api_port), "--bind-address", BIND_ADDRESS,
            *(["--external-address", advertise] if advertise else []),
            "--tls-cert-file", str(pki_dir / f"{pki.APISERVER.name}.crt"),
            "--tls-private-key-file", str(pki_dir / f"{pki.APISERVER.name}.key"),
            "--client-ca-file", str(pki_dir / f"{pki.CA_NAME}.crt"),
            "--service-account-key-file", str(pki_dir / pki.SA_PUB),
            "--service-account-signing-key-file", str(pki_dir / pki.SA_KEY),
            "--service-account-issuer", serviceaccount_token.DEFAULT_ISSUER]


def write_control_plane(state: StateDir, replicas: int = STORE_REPLICAS, timings: Timings = DEFAULT_TIMINGS, *,
                        api_port: int, net: netplan.Record | None = None, control_plane_count: int = 1,
                        advertise: str | None = None, only: str | None = None) -> None:
    """Each control-plane node's static pod manifests (its store replicas, apiserver, scheduler,
    controller-manager), the control plane's manifests an earlier `up` wrote elsewhere removed,
    and <state>/store-endpoints and <state>/api-endpoint for clients; with `only`, that node's
    manifests alone and the endpoint files (`kubemu node add`). The PKI is written
    before (write_pki): the apiserver's flags name its files. RuntimeError, before anything is
    written, when a store replica's data lies on another node than this layout puts it."""
    placement = store_placement(state, control_plane_count, replicas)
    elsewhere = misplaced_store_data(state, placement)
    if elsewhere:
        raise RuntimeError(
            f"the store's data in {', '.join(map(str, elsewhere))} was written by a cluster with another number "
            "of control-plane nodes; `kubemu up` again with that number (or remove the state directory)")
    endpoints = store_endpoints(state, replicas, control_plane_count)
    secrets = wireauth.secrets_dir(state.root)
    for identity in (wireauth.APISERVER, wireauth.KUBELET_CLIENT, wireauth.SCHEDULER, wireauth.CONTROLLER_MANAGER,
                     *map(wireauth.store_identity, endpoints)):
        wireauth.ensure_secret(secrets, identity)
    peers = ",".join(f"{name}={ep}" for name, ep in endpoints.items())
    pods: dict[str, dict[str, str]] = {node: {} for node in control_plane_of(state, control_plane_count)}
    join = ', "--join"' if recorded_layout(state) is not None else ""  # see nodemembership.py
    for name, endpoint in endpoints.items():
        node = placement[name]
        pods[node][name] = STORE_POD.format(
            name=name, python=sys.executable, data_dir=store_data_dir(state, name, node), endpoint=endpoint,
            peers=peers, secrets=secrets, requests=json.dumps(CONTROL_PLANE_REQUESTS["store"]), join=join)
    for node in pods:
        for name, argv in control_plane_argv(state, endpoints, timings, api_port, net, node,
                                             control_plane_count, advertise).items():
            pods[node][name] = COMPONENT_POD.format(  # JSON is YAML: every path quoted right
                name=name, argv=json.dumps(argv), requests=json.dumps(CONTROL_PLANE_REQUESTS[name]))
    if only is not None:
        pods = {only: pods[only]}
    else:
        _remove_stale_control_plane(state, pods)
    for node, manifests in pods.items():
        for name, text in manifests.items():
            _write_if_changed(state.node_dir(node) / "manifests" / f"{name}.yaml", text)
    write_endpoint_files(state, replicas, control_plane_count)


def misplaced_store_data(state: StateDir, placement: dict[str, str]) -> list[Path]:
    """The data directories of `placement`'s store replicas that lie on another node than it
    puts them: the replica started there would begin empty while its log is elsewhere."""
    return [data for node in state.nodes() for name, there in placement.items()
            if there != node and (data := store_data_dir(state, name, node)).is_dir()]


def _remove_stale_control_plane(state: StateDir, wanted: dict[str, dict[str, str]]) -> None:
    """Remove the control plane's manifests an earlier `up` wrote that this layout does not
    want (fewer store replicas, fewer control-plane nodes); a file without kubemu's first words
    is the user's and stays."""
    for node in state.nodes():
        keep = wanted.get(node, {})
        for path in (state.node_dir(node) / "manifests").glob("*.yaml"):
            if path.stem not in keep and _control_plane_manifest(path.stem) and _written_by_up(path):
                path.unlink(missing_ok=True)


def _control_plane_manifest(stem: str) -> bool:
    return stem in CONTROL_PLANE_REQUESTS or (stem.startswith("store-") and stem[len("store-"):].isdigit())


def _written_by_up(path: Path) -> bool:
    try:
        with path.open() as f:
            return f.readline().startswith(WRITTEN_BY)
    except (OSError, UnicodeDecodeError):
        return False


def remove_old_kube_proxy(state: StateDir) -> list[Path]:
    """Remove the kube-proxy static pod manifests an older `kubemu up` wrote in the nodes'
    directories (those only: a file without kubemu's first words is the user's), so that a node
    never runs it beside the DaemonSet's pod; its kubelet then deletes the mirror pod. Returns
    the files removed."""
    removed = []
    for node in state.nodes():
        path = state.node_dir(node) / "manifests" / OLD_KUBE_PROXY_MANIFEST
        if _written_by_up(path):
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _write_if_changed(path: Path, text: str, mode: int = 0o644) -> None:
    """Rewriting a manifest with the same bytes is harmless, but an unchanged file is also not
    touched: `kubemu up` again on a running node's directory must not make the kubelet look."""
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    write_atomic(path, text.encode(), mode)


# --- the apiserver's port, the PKI, kubeconfigs ----------------------------------------------

def preferred_api_port(requested: int | None, kept: int | None) -> int | None:
    """The port `up` tries first (None: any free one). `--api-port N` asks for N; without it,
    the port the last `up` of this state chose, else 6443; `--api-port 0` asks for any free
    port, the kept one if there is one (so kubeconfigs stay valid across down/up)."""
    if requested:
        return requested
    if kept:
        return kept
    return None if requested == 0 else DEFAULT_API_PORT


def port_free(port: int, *addresses: str) -> bool:
    """Whether the apiserver could listen on BIND_ADDRESS:port (and on `addresses`' port) now."""
    return all(bindable(address, port) for address in (BIND_ADDRESS, *addresses))


def bindable(address: str, port: int) -> bool:
    """Whether a listener could bind address:port now (aiohttp and ZeroMQ set SO_REUSEADDR too)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError:
            return False
    return True


def any_free_port() -> int:
    with socket.socket() as sock:
        sock.bind((BIND_ADDRESS, 0))
        return sock.getsockname()[1]


def resolve_api_port(state: StateDir, requested: int | None, advertise: str | None = None) -> int:
    """The apiserver's HTTPS port for this `up` (free on loopback and on the `advertise`
    address), kept in the state directory; a busy port is replaced by a free one, said in one line."""
    preferred = preferred_api_port(requested, state.api_port())
    if preferred is not None and port_free(preferred, *([advertise] if advertise else [])):
        port = preferred
    else:
        port = any_free_port()
        if preferred is not None:
            log.warning("kubemu: port %d is in use: the apiserver listens on %s:%d instead", preferred,
                        BIND_ADDRESS, port)
    state.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(state.api_port_file, f"{port}\n".encode(), 0o644)
    return port


def server_url(port: int, address: str = BIND_ADDRESS) -> str:
    return f"https://{address}:{port}"


# --- the advertise address: the API beyond loopback (kubeadm init --apiserver-advertise-address)

ADVERTISE_ADDRESS_FILE = "apiserver-advertise-address"  # in the state directory, kept for the next `up`


def check_advertise_address(text: str, local: set[str]) -> str:
    """The address as given if other machines may reach the API there: an IPv4 unicast address
    of one of this machine's devices (`local`), not loopback nor unspecified; ValueError (one
    message) otherwise."""
    import ipaddress
    try:
        ip = ipaddress.IPv4Address(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4 address") from None
    if ip.is_loopback or ip.is_unspecified or ip.is_multicast or ip == ipaddress.IPv4Address("255.255.255.255"):
        raise ValueError(f"{ip} is not a unicast address other machines can reach (loopback, 0.0.0.0, "
                         "multicast and broadcast are not)")
    if str(ip) not in local:
        raise ValueError(f"{ip} is not an address of this machine (its devices have "
                         f"{', '.join(sorted(local)) or 'none'})")
    return str(ip)


def local_addresses() -> set[str]:
    """The IPv4 addresses of this machine's devices (`ip addr`'s), in this network namespace."""
    return {a.address for addrs in psutil.net_if_addrs().values() for a in addrs if a.family == socket.AF_INET}


def kept_advertise_address(state: StateDir) -> str | None:
    """The address the last `up` of this state directory advertised, or None."""
    try:
        return (state.root / ADVERTISE_ADDRESS_FILE).read_text().strip() or None
    except OSError:
        return None


def resolve_advertise_address(state: StateDir, requested: str | None) -> str | None:
    """The advertise address of this `up`: the one requested, else the one the last `up` kept
    (dropped, said in one line, when this machine no longer has it). RuntimeError for a
    requested address that cannot be one. `keep_advertise_address` keeps it for the next `up`
    once its ports are known free."""
    path = state.root / ADVERTISE_ADDRESS_FILE
    if requested is None:
        kept = kept_advertise_address(state)
        if kept is None:
            return None
        try:
            return check_advertise_address(kept, local_addresses())
        except ValueError as err:
            log.warning("kubemu: the API is no longer advertised on %s (kept in %s): %s", kept, path, err)
            path.unlink(missing_ok=True)
            return None
    try:
        address = check_advertise_address(requested, local_addresses())
    except ValueError as err:
        raise RuntimeError(f"--apiserver-advertise-address: {err}") from None
    return address


def keep_advertise_address(state: StateDir, address: str) -> None:
    state.root.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(state.root / ADVERTISE_ADDRESS_FILE, f"{address}\n".encode(), 0o644)


def wire_port(api_port: int, node: str) -> int:
    """Where control-plane node-i's apiserver serves the wire on the advertise address: the
    ports after the HTTPS port, one per control-plane node (api-port + 1 + i)."""
    return api_port + 1 + apipreference.node_index(node)


def wire_endpoint(address: str, api_port: int, node: str) -> str:
    return f"tcp://{address}:{wire_port(api_port, node)}"


def check_wire_ports(address: str, api_port: int, nodes: list[str]) -> None:
    """RuntimeError naming the first of the apiservers' wire ports on `address` that is taken."""
    for node in nodes:
        port = wire_port(api_port, node)
        if port > 65535 or not bindable(address, port):
            raise RuntimeError(f"--apiserver-advertise-address: the wire port {address}:{port} of {node}'s apiserver "
                               f"is {'not a port' if port > 65535 else 'in use'} (the HTTPS port {api_port} + 1 + "
                               "the node's index); choose another --api-port")


def control_plane_with_apiserver(state: StateDir) -> list[str]:
    """The nodes whose static pods include an apiserver (node-0 first)."""
    return [n for n in state.nodes() if (state.node_dir(n) / "manifests" / "apiserver.yaml").exists()]


def write_pki(state: StateDir, nodes: list[str], api_port: int, net: netplan.Record | None = None,
              advertise: str | None = None) -> None:
    """kubeadm's certs and kubeconfig phases: <state>/pki (kept and reused; a certificate near
    its expiry, from another CA or with other names is made again, and said), the components'
    kubeconfigs, and each node's kubelet.conf with its own client certificate. The apiserver's
    certificate names the addresses of the pod network `net` and the `advertise` address (see
    pki.apiserver_spec)."""
    from . import pki  # here: importing cryptography costs every command ~0.1 s
    wireauth.ensure_secret(wireauth.secrets_dir(state.root), wireauth.ADMIN)  # the CLI's wire identity
    ca, why = pki.ensure_ca(state.pki_dir)
    _say_renewed("ca", why)
    apiserver = pki.apiserver_spec(external_address=advertise) if net is None else pki.apiserver_spec(
        netplan.advertise_address(net),
        netplan.service_ip(netplan.service_cidr(net), netplan.KUBERNETES_SERVICE_INDEX), advertise)
    _say_renewed(apiserver.name, pki.ensure_cert(state.pki_dir, apiserver, ca)[1])
    pki.ensure_service_account_keys(state.pki_dir)
    server = server_url(api_port)
    confs = [(state.admin_conf, state.pki_dir, pki.ADMIN),  # kubeadm's kubeconfig phase
             (state.root / "scheduler.conf", state.pki_dir, pki.SCHEDULER),
             (state.root / "controller-manager.conf", state.pki_dir, pki.CONTROLLER_MANAGER)] + \
            [(state.kubelet_conf(n), state.node_dir(n) / "pki", pki.kubelet_spec(n)) for n in nodes]
    for path, cert_dir, spec in confs:
        pair, why = pki.ensure_cert(cert_dir, spec, ca)
        _say_renewed(f"{spec.name} ({spec.common_name})", why)
        _write_if_changed(path, kubeconfig.dump(kubeconfig.build(
            server, ca.cert_pem, spec.common_name, pair.cert_pem, pair.key_pem)), 0o600)


def _say_renewed(what: str, why: str | None) -> None:
    if why is not None and why != "missing":  # a first `up` makes them all: nothing to say
        log.warning("kubemu: renewed certificate %s: %s", what, why)


def context_name(name: str | None) -> str:
    return f"{CONTEXT}-{name}" if name else CONTEXT


def merge_user_kubeconfig(state: StateDir, path: Path, name: str | None = None) -> str:
    """Merge the admin's credentials into the user's kubeconfig at `path` as context `kubemu`
    (`kubemu-<name>`), made current, and record it for `down`; the context's name. What an
    earlier `up` of this state merged and no `down` took out goes first."""
    context = context_name(name)
    entry = kubeconfig.renamed(kubeconfig.load(state.admin_conf), context)
    unmerge_user_kubeconfig(state)
    with kubeconfig.locked(path):
        kubeconfig.write(path, kubeconfig.merge(kubeconfig.load(path), entry))
    cluster_entry = kubeconfig.find(entry, "clusters", context)
    write_atomic(state.merged_kubeconfig_file, json.dumps(
        {"path": str(path), "name": context, "cluster": cluster_entry}).encode())
    return context


def _merged_record(state: StateDir) -> dict | None:
    """What `merge_user_kubeconfig` recorded; None without a record or with an unusable one."""
    try:
        record = json.loads(state.merged_kubeconfig_file.read_text())
    except (OSError, ValueError):
        return None
    if (not isinstance(record, dict) or not isinstance(record.get("path"), str)
            or not isinstance(record.get("name"), str) or not isinstance(record.get("cluster"), dict)):
        return None
    return record


def unmerge_user_kubeconfig(state: StateDir) -> tuple[str, Path] | None:
    """Take out of the user's kubeconfig the context `up` merged, if it is still the one it
    merged (another cluster may have taken the name since); (context, file) when taken out."""
    record = _merged_record(state)
    if record is None:
        return None
    path = Path(record["path"])
    removed = False
    if path.exists():
        with kubeconfig.locked(path):
            config, removed = kubeconfig.unmerge(kubeconfig.load(path), record["name"], record["cluster"])
            if removed:
                kubeconfig.write(path, config)
    state.merged_kubeconfig_file.unlink(missing_ok=True)
    return (record["name"], path) if removed else None


def kubelet_args(state: StateDir, node: str, t: Timings, net: netplan.Record | None = None,
                 control_plane_count: int = 1, *, joined_api: str | None = None, curve_dir: Path | None = None) -> str:
    """The node's kubelet flags; its wire identity's secret is made here if missing. A node joined
    from another machine (`kubemu join`) gives the apiservers' tcp endpoints (`joined_api`) and its
    CURVE key directory (`curve_dir`) instead: no PLAIN secret, and no exec/attach listener (the
    apiserver dials a kubelet's unix socket in its own state directory, not on another machine)."""
    if curve_dir is None:
        credentials = wireauth.ensure_secret(wireauth.secrets_dir(state.root), wireauth.node_identity(node))
        wire_args = ["--api", node_api_endpoint(state, node, control_plane_count), "--wire-credentials",
                     str(credentials), "--listen", state.kubelet_endpoint(node),
                     "--wire-secrets", str(wireauth.secrets_dir(state.root))]
    else:
        wire_args = ["--api", joined_api, "--wire-curve-dir", str(curve_dir)]
    args = [*wire_args, "--backoff-initial", "10", "--backoff-max", "300",
            "--time-scale", f"{t.pod_time_scale:g}", "--file-check-frequency", f"{t.file_check_frequency:g}",
            "--node-lease-duration-seconds", str(t.lease_duration),
            "--node-status-update-frequency", f"{t.node_status_update:g}",
            "--node-status-report-frequency", f"{t.node_status_report:g}"]
    if curve_dir is not None:  # the addons that need this machine's files stay off it (addons.ON_LOCAL_NODES)
        args += ["--node-labels", f"{addons.JOINED_NODE_LABEL}="]
    elif node in control_plane_of(state, control_plane_count):  # kubeadm's control-plane label and taint
        args += ["--node-labels", f"{CONTROL_PLANE_ROLE}=",
                 "--register-with-taints", f"{CONTROL_PLANE_ROLE}:NoSchedule"]
    if net is not None:
        args += netplan.kubelet_flags(net, str(state.node_dir(node)))
    args += ["--cgroup-root", ownership.cgroup_name(state.root, node), "--pod-max-pids", str(POD_MAX_PIDS)]
    return " ".join(shlex.quote(a) for a in args)


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
    """Start the node's init in a session of its own and in a new cgroup of the node's
    (kubemu/ownership.py), and record both: only what is recorded is ever stopped as the node's."""
    node_dir = state.node_dir(node)
    # The environment names the cluster for tools and tests; kubemu never selects processes by it.
    env = dict(os.environ, **{ENV: str(state.root)})
    argv = [sys.executable, "-m", "init", "--node-dir", str(node_dir), "--node", node]
    with open(node_dir / "logs" / "init.stdout.log", "ab") as out:
        def popen(preexec_fn=None) -> subprocess.Popen:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    start_new_session=True, preexec_fn=preexec_fn)
        node_cgroup, proc = _start_in_new_cgroup(ownership.cgroup_name(state.root, node), popen)
    stat = proc_stat(proc.pid)
    ownership.Owned(proc.pid, stat[1] if stat else -1, node_cgroup).save(node_dir)
    return proc


def _start_in_new_cgroup(name: str, popen) -> tuple[cgroups.Cgroup | None, subprocess.Popen]:
    """popen(preexec_fn) with the child moved into cgroup `name`'s init.scope before it execs;
    without such a cgroup (or if the move is refused), plain popen(), and the fallback said once."""
    cg = cgroups.create(name)
    if cg is not None:
        leaf = cg.child(ownership.INIT_LEAF)
        try:
            leaf.path.mkdir(exist_ok=True)
            procs_fd = leaf.open_procs()
        except OSError:
            pass
        else:
            try:
                return cg, popen(lambda: cgroups.join(procs_fd))
            except subprocess.SubprocessError:  # the write to cgroup.procs failed in the child
                pass
            except BaseException:  # nothing was started: the cgroup goes too
                ownership.remove_node_cgroup(cg)
                raise
            finally:
                os.close(procs_fd)
        ownership.remove_node_cgroup(cg)
    _say_fallback()
    return None, popen()


@functools.cache
def _say_fallback() -> None:
    """Once per process: `kubemu up` starts several inits."""
    log.warning("kubemu: %s", ownership.FALLBACK_NOTE)


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


def write_hollow(state: StateDir, count: int, t: Timings, control_plane_count: int = 1) -> list[str]:
    """node-0's hollow-kubelet.service for `count` hollow nodes (none: the unit is removed)."""
    unit = state.node_dir(CONTROL_PLANE_NODE) / "units" / "hollow-kubelet.service"
    if count <= 0:
        unit.unlink(missing_ok=True)
        return []
    credentials = wireauth.ensure_secret(wireauth.secrets_dir(state.root), HOLLOW_IDENTITY)
    argv = [sys.executable, "-m", "kubelet", "--hollow", "--nodes", str(count), "--node-prefix", HOLLOW_PREFIX,
            "--api", node_api_endpoint(state, CONTROL_PLANE_NODE, control_plane_count),
            "--wire-credentials", str(credentials), "--node-lease-duration-seconds", str(t.lease_duration),
            "--node-status-update-frequency", f"{t.node_status_update:g}",
            "--node-status-report-frequency", f"{t.node_status_report:g}"]
    unit.write_text(HOLLOW_UNIT.format(count=count, argv=" ".join(f'"{a}"' for a in argv),
                                       restart_sec=f"{t.kubelet_restart_sec:g}"))
    return [f"{HOLLOW_PREFIX}{i}" for i in range(count)]


def up(state: StateDir, count: int, *, fast: bool = False, store_replicas: int = STORE_REPLICAS,
       hollow_nodes: int = 0, watchdog_sec: float = 30, api_port: int | None = None, network_mode: str | None = None,
       pod_network_cidr: str | None = None, service_cidr: str | None = None,
       control_plane_count: int = 1, advertise_address: str | None = None) -> tuple[list[str], list[str]]:
    """Write and boot the cluster; (the nodes with an init, the hollow nodes). `api_port`:
    see preferred_api_port; the port chosen is state.api_port(). The pod network (`network_mode`
    cni, host or None for cni where possible; kubemu/network.py) is made before any node starts,
    and before the PKI: the apiserver's certificate names its addresses. The first
    `control_plane_count` nodes are control-plane nodes (`store_replicas` applies to one).
    `advertise_address` (else the one the last `up` kept, see resolve_advertise_address): the
    apiservers serve HTTPS and the wire with CURVE there too, for nodes on other machines."""
    if control_plane_count not in CONTROL_PLANE_NODE_COUNTS:
        raise RuntimeError(f"{control_plane_count} control-plane nodes: choose one of "
                           f"{', '.join(map(str, CONTROL_PLANE_NODE_COUNTS))}")
    if count < control_plane_count:
        raise RuntimeError(f"{count} node(s) cannot hold {control_plane_count} control-plane nodes")
    already = stoppable(state)
    if already:
        raise RuntimeError(f"a cluster is already running in {state.root} (nodes: {', '.join(already)}); "
                           "`kubemu down` first")
    timings = FAST_TIMINGS if fast else DEFAULT_TIMINGS
    nodes = layout_nodes(state, count, control_plane_count)
    advertise = resolve_advertise_address(state, advertise_address)
    port = resolve_api_port(state, api_port, advertise)
    if advertise is not None:
        check_wire_ports(advertise, port, control_plane_of(state, control_plane_count))
        keep_advertise_address(state, advertise)
        wirekeys.ensure_server_keys(state.root)  # its public half goes into cluster-info
    net = network.setup(state.root, network_mode, pod_network_cidr, service_cidr, count + hollow_nodes)
    try:
        write_pki(state, nodes, port, net, advertise)  # the apiserver's certificate names the network's addresses
        for identity in (addons.IDENTITY, KUBE_PROXY):  # before the apiserver starts
            wireauth.ensure_secret(wireauth.secrets_dir(state.root), identity)
        for node in nodes:
            write_node(state, node, timings.kubelet_restart_sec, watchdog_sec,
                       kubelet_args(state, node, timings, net, control_plane_count))
        remove_old_kube_proxy(state)
        write_control_plane(state, store_replicas, timings, api_port=port, net=net,
                            control_plane_count=control_plane_count, advertise=advertise)
        hollow = write_hollow(state, hollow_nodes, timings, control_plane_count)
        for node in nodes:
            start_init(state, node)
    except BaseException:
        if not stoppable(state):  # no node started: nothing `down` would stop comes before the network
            network.down(state.root)
        raise
    return nodes, hollow


def start_node(state: StateDir, node: str) -> None:
    """Boot a node that was written before (`kubemu node start`)."""
    if node not in state.nodes():
        raise RuntimeError(f"there is no node {node} in {state.root}")
    if state.init_pid(node) is not None:
        raise RuntimeError(f"node {node} is already running")
    left = state.owned(node)
    if left is not None:  # what outlived the node's last init does not outlive a reboot
        left.kill(10.0)
        left.release()
    start_init(state, node)


def kill_node(state: StateDir, node: str, timeout: float = 10.0) -> int:
    """SIGKILL every process of the node at once (a machine failure) and return init's PID
    once they are gone; the node's cgroup is removed (`node start` makes a new one)."""
    if node not in state.nodes():
        raise RuntimeError(f"there is no node {node} in {state.root}")
    owned = state.owned(node)
    if owned is None or owned.init() is None:
        raise RuntimeError(f"node {node} is not running")
    owned.kill(timeout)
    owned.release()
    return owned.pid


def init_exit_report(node: str, returncode: int, control_plane: Sequence[str] = (CONTROL_PLANE_NODE,),
                     running: Sequence[str] = ()) -> tuple[str, bool]:
    """What the foreground `kubemu up` says when a node's init, its child, has exited (its
    Popen-style return code: -N for signal N), and whether the cluster stops with it: it
    does when the node was the last running one of the `control_plane` nodes (`running`: the
    nodes whose init still runs)."""
    if returncode < 0:
        try:
            how = f"init was killed ({signal.Signals(-returncode).name})"
        except ValueError:
            how = f"init was killed (signal {-returncode})"
    elif returncode == 0:
        how = "init shut down"
    else:
        how = f"init exited with status {returncode}"
    if node not in control_plane:
        return f"{node}: {how}", False
    left = [n for n in control_plane if n != node and n in running]
    if left:
        return f"{node}: {how}; the control plane runs on {', '.join(left)}", False
    return f"{node}: {how}; the control plane ran there: stopping the cluster", True


def ready_nodes(state: StateDir, timeout: float = 5.0) -> dict[str, bool] | None:
    """Node name -> Ready, as the API has them; None while the apiserver does not answer."""
    from .apiclient import SyncApiClient  # the wire's asyncio client only when asked

    endpoint = state.api_endpoint()
    if not endpoint:
        return None
    try:
        with SyncApiClient(endpoint, timeout=timeout, credentials=wireauth.state_credentials(state.root)) as api:
            items = api.list("nodes")["items"]
    except wire.WireError:
        return None
    return {n["metadata"]["name"]: any(c.get("type") == "Ready" and c.get("status") == "True"
                                       for c in (n.get("status") or {}).get("conditions") or [])
            for n in items}


def wait_ready(state: StateDir, nodes: list[str], timeout: float) -> None:
    """Wait until the API shows every node Ready (what `kubemu get nodes` shows)."""
    deadline = time.monotonic() + timeout
    seen: dict[str, bool] | None = None
    while time.monotonic() < deadline:
        seen = ready_nodes(state)
        if seen is not None and all(seen.get(n) for n in nodes):
            return
        time.sleep(0.2)
    if seen is None:
        raise TimeoutError(f"the apiserver did not answer within {timeout:g}s")
    missing = [n for n in nodes if not seen.get(n)]
    raise TimeoutError(f"node(s) {', '.join(missing)} not Ready within {timeout:g}s")


def apply_addons(state: StateDir, timeout: float) -> tuple[list[str], list[str]]:
    """kubeadm's addon phase, once the API answers: kube-proxy's DaemonSet, the cluster DNS and
    the default StorageClass (kubemu/addons.py), each object created unless it exists; then
    kube-proxy's rollout waited for, within the same `timeout`: Services answer once its pods
    run. (What was created, what could not be or did not roll out, one line each.)"""
    from . import clusterinfo
    from .apiclient import SyncApiClient  # the wire's asyncio client only when asked

    net = network.load(state.root) or network.host_record(state.root, "no network record", None)
    secrets = wireauth.secrets_dir(state.root)  # the secrets are made by `up`
    api_endpoints = state.api_endpoint()  # every apiserver's, as `up` wrote them
    proxy = addons.kube_proxy(net, api_endpoints, str(wireauth.secret_path(secrets, KUBE_PROXY)), CONTROL_PLANE_NODE)
    objects = (proxy + addons.coredns(net, api_endpoints, str(wireauth.secret_path(secrets, addons.IDENTITY)))
               + [addons.storage_class()])
    deadline = time.monotonic() + timeout
    with SyncApiClient(api_endpoints, timeout=10, credentials=wireauth.state_credentials(state.root)) as api:
        created, problems = addons.create_if_absent(api, objects, timeout)
        try:  # kubeadm's bootstrap-token phase: what `kubemu join` discovers the cluster by
            clusterinfo.ensure(api, *cluster_info_args(state))
        except wire.WireError as err:
            problems.append(f"configmap kube-public/cluster-info: {err}")
        late = addons.wait_rolled_out(api, proxy[-1], max(0.0, deadline - time.monotonic()))
    return created, problems + ([late] if late else [])


def cluster_info_args(state: StateDir) -> tuple:
    """clusterinfo.ensure's arguments for this state: the API's URL (on the advertise address,
    if any), the CA, and the wire's endpoints and server key beyond loopback (none without)."""
    from . import pki
    advertise, port = kept_advertise_address(state), state.api_port()
    ca = (state.pki_dir / f"{pki.CA_NAME}.crt").read_bytes()
    if advertise is None:
        return server_url(port), ca, (), None
    endpoints = [wire_endpoint(advertise, port, node) for node in control_plane_with_apiserver(state)]
    key = wirekeys.load_public(wirekeys.curve_dir(state.root) / (wirekeys.SERVER + wirekeys.PUBLIC_SUFFIX))
    return server_url(port, advertise), ca, endpoints, key.decode()


def join_token(state: StateDir) -> str:
    """A new bootstrap token for nodes joining this cluster, as kubeadm init makes its default
    one (24 h, system:bootstrappers:kubeadm:default-node-token), stored in kube-system."""
    import random

    from . import bootstraptoken as bt
    from .apiclient import SyncApiClient
    from .token_cli import create_token
    token = bt.BootstrapToken.new(bt.generate(random.SystemRandom()), time.time(),
                                  description=bt.DEFAULT_DESCRIPTION_INIT)
    with SyncApiClient(state.api_endpoint(), timeout=10, credentials=wireauth.state_credentials(state.root)) as api:
        create_token(api, token)
    return token.token


def join_text(state: StateDir, token: str) -> str:
    """kubeadm init's closing words for nodes of other machines: the `kubemu join` command."""
    from . import bootstraptoken as bt, pki
    address = f"{kept_advertise_address(state)}:{state.api_port()}"
    ca_hash = bt.ca_cert_hash((state.pki_dir / f"{pki.CA_NAME}.crt").read_bytes())
    return ("Then you can join any number of worker nodes by running the following on each as root:\n\n"
            + bt.join_command(address, token, ca_hash))


def processes(state: StateDir) -> list[psutil.Process]:
    """Every live process of the nodes kubemu started in the state directory."""
    return [p for n in state.nodes() if (o := state.owned(n)) is not None for p in o.processes()]


def stoppable(state: StateDir) -> list[str]:
    """The nodes `kubemu down` has something to stop on: a running init, or processes left
    in a node's cgroup after its init died."""
    return [n for n in state.nodes()
            if state.init_pid(n) is not None or ((o := state.owned(n)) is not None and o.processes())]


def down(state: StateDir, timeout: float = 150.0) -> list[int]:
    """Stop every node's init (which stops its units in order, TimeoutStopSec respected),
    then SIGKILL what is left of each node kubemu started, and remove its cgroups, then the
    pod network `up` made. Returns the PIDs of the stragglers it had to kill."""
    nodes = state.nodes()
    owned = {n: o for n in nodes if (o := state.owned(n)) is not None}
    # Without a cgroup a node's processes are init's descendants: listed while init lives.
    before = {n: o.processes() for n, o in owned.items() if o.cgroup is None}
    inits = []
    for node in nodes:
        pid = state.init_pid(node)
        if pid is None:
            continue
        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            continue
        try:
            with wire.SyncClient(state.init_endpoint(node), timeout=3.0) as client:
                client.call("shutdown")
        except wire.WireError:
            try:
                proc.terminate()
            except psutil.NoSuchProcess:  # on its way out already (another `down`, a crash)
                continue
        inits.append(proc)
    for proc in ownership.wait_gone(inits, timeout):
        try:
            proc.kill()
        except psutil.Error:
            pass
    stragglers = []
    settle_by = time.monotonic() + 2.0
    for node, o in owned.items():
        if o.cgroup is not None:
            o.settle(max(0.0, settle_by - time.monotonic()))
            stragglers += o.kill(10.0)
        else:
            stragglers += ownership.kill_all([p for p in before[node] if not ownership.gone(p)], 10.0)
        o.release()
    network.down(state.root)  # last: the pods' namespaces were in the nodes' processes
    return stragglers


# --- node add / node remove (kubemu/nodemembership.py decides) -------------------------------

MEMBERSHIP_FILE = "membership.json"  # the layout once `kubemu node add|remove` changed it
PINNED_BECAUSE = "it keeps the host side of the pod network (its kube-proxy) and the hollow nodes"


def recorded_layout(state: StateDir) -> nodemembership.Layout | None:
    """The layout `kubemu node add|remove` recorded; None while `up`'s flags decide it."""
    path = state.root / MEMBERSHIP_FILE
    try:
        return nodemembership.Layout.from_json(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"{path}: {exc}") from None


def store_placement(state: StateDir, control_plane_count: int = 1, replicas: int = STORE_REPLICAS) -> dict[str, str]:
    """Store replica -> node: the recorded layout's, else `up`'s flags' (store_nodes)."""
    recorded = recorded_layout(state)
    return dict(recorded.stores) if recorded else store_nodes(control_plane_count, replicas)


def control_plane_of(state: StateDir, control_plane_count: int = 1) -> list[str]:
    """The control-plane nodes: the recorded layout's, else the first `control_plane_count`."""
    recorded = recorded_layout(state)
    return list(recorded.control_plane) if recorded else control_plane_nodes(control_plane_count)


def layout_nodes(state: StateDir, count: int, control_plane_count: int = 1) -> list[str]:
    """The nodes `up` boots: the recorded layout's (said when the flags ask for another), else
    node-0..count-1."""
    recorded = recorded_layout(state)
    if recorded is None:
        return node_names(count)
    if count != len(recorded.nodes) or control_plane_count != len(recorded.control_plane):
        log.warning("kubemu: `kubemu node add|remove` changed this cluster: booting its %d node(s) %s "
                    "(control plane: %s) as %s records, not --nodes/--control-plane-nodes",
                    len(recorded.nodes), ", ".join(recorded.nodes), ", ".join(recorded.control_plane),
                    state.root / MEMBERSHIP_FILE)
    return list(recorded.nodes)


def write_endpoint_files(state: StateDir, replicas: int = STORE_REPLICAS, control_plane_count: int = 1) -> None:
    """<state>/store-endpoints and <state>/api-endpoint, for clients."""
    endpoints = store_endpoints(state, replicas, control_plane_count)
    write_atomic(state.root / "store-endpoints", "".join(f"{ep}\n" for ep in endpoints.values()).encode(), 0o644)
    write_atomic(state.api_endpoint_file, (api_endpoint(state, control_plane_count) + "\n").encode(), 0o644)


def current_layout(state: StateDir) -> nodemembership.Layout:
    """The running cluster's layout: recorded, else read from the store manifests `up` wrote."""
    recorded = recorded_layout(state)
    if recorded is not None:
        return recorded
    nodes = state.nodes()
    found = {path.stem: node for node in nodes for path in (state.node_dir(node) / "manifests").glob("store-*.yaml")
             if _control_plane_manifest(path.stem) and _written_by_up(path)}
    if not found:
        raise RuntimeError(f"no control plane written by `kubemu up` in {state.root}")
    stores = {name: found[name] for name in sorted(found, key=lambda s: int(s.rpartition("-")[2]))}
    return nodemembership.Layout(tuple(nodes), stores)


def _store_client(state: StateDir, layout: nodemembership.Layout, timeout: float = 10.0):
    from store.client import SyncStoreClient  # the store's client only when asked

    return SyncStoreClient([store_endpoint(state, s, n) for s, n in layout.stores.items()], timeout=timeout,
                           credentials=wireauth.state_credentials(state.root))


def healthy_members(state: StateDir, layout: nodemembership.Layout) -> set[str]:
    """The store members that answer their status now."""
    with _store_client(state, layout, timeout=5.0) as client:  # generous: a busy member is a healthy one
        rows = client.status_all(timeout=5.0)
    return {r["name"] for r in rows if "error" not in r and r.get("name") in layout.stores}


def add_node(state: StateDir, control_plane: bool, *, fast: bool = False, timeout: float = 180.0,
             say=lambda line: None) -> str:
    """`kubemu node add [--control-plane]`: the new node's name once it is Ready (and, for a
    control-plane node, its store member caught up). RuntimeError, in one line, when refused."""
    state.require_running()
    layout = current_layout(state)
    healthy = healthy_members(state, layout) if control_plane else set()
    try:
        plan = nodemembership.plan_add(layout, control_plane, healthy)
    except nodemembership.MembershipError as exc:
        raise RuntimeError(str(exc)) from None
    advertise = kept_advertise_address(state)
    if advertise is not None and plan.node in plan.layout.control_plane:  # its apiserver serves the wire there
        check_wire_ports(advertise, state.api_port() or DEFAULT_API_PORT, [plan.node])
    _carry_out(state, plan, layout, FAST_TIMINGS if fast else DEFAULT_TIMINGS, timeout, say)
    cluster_info_in_line(state, layout, plan.layout)
    return plan.node


def remove_node(state: StateDir, node: str, *, timeout: float = 60.0, say=lambda line: None) -> None:
    """`kubemu node remove NAME` (kubeadm reset with etcd's member remove); RuntimeError when refused."""
    state.require_running()
    layout = current_layout(state)
    healthy = healthy_members(state, layout) if layout.stores_of(node) else set()
    try:
        plan = nodemembership.plan_remove(layout, node, healthy, {CONTROL_PLANE_NODE: PINNED_BECAUSE})
    except nodemembership.MembershipError as exc:
        raise RuntimeError(str(exc)) from None
    _carry_out(state, plan, layout, DEFAULT_TIMINGS, timeout, say)
    cluster_info_in_line(state, layout, plan.layout)


def cluster_info_in_line(state: StateDir, before: nodemembership.Layout, after: nodemembership.Layout) -> None:
    """cluster-info's wire endpoints follow the apiservers a membership change added or removed
    (when the API is advertised: joiners read them there); a failure said in one line."""
    from . import clusterinfo
    from .apiclient import SyncApiClient  # the wire's asyncio client only when asked

    if kept_advertise_address(state) is None or before.control_plane == after.control_plane:
        return
    try:
        with SyncApiClient(state.api_endpoint(), timeout=10, credentials=wireauth.state_credentials(state.root)) as api:
            clusterinfo.ensure(api, *cluster_info_args(state))
    except wire.WireError as err:
        log.warning("kubemu: configmap kube-public/cluster-info: %s (its %s are not those of the control plane "
                    "now)", err, clusterinfo.WIRE_ENDPOINTS_KEY)


def _carry_out(state: StateDir, plan: nodemembership.Plan, before: nodemembership.Layout, t: Timings,
               timeout: float, say) -> None:
    nm = nodemembership
    deadline = time.monotonic() + timeout
    recorded = False
    with _store_client(state, before) as store:
        for step in plan.steps:
            left = max(1.0, deadline - time.monotonic())
            try:
                if isinstance(step, nm.MemberAdd):
                    wireauth.ensure_secret(wireauth.secrets_dir(state.root), wireauth.store_identity(step.store))
                    store.member_add(step.store, store_endpoint(state, step.store, step.node))
                    say(f"store member {step.store} added")
                elif isinstance(step, nm.MemberRemove):
                    if any(m["name"] == step.store for m in store.member_list()):
                        store.member_remove(step.store)
                    say(f"store member {step.store} removed")
                elif isinstance(step, nm.Record):
                    write_atomic(state.root / MEMBERSHIP_FILE, step.layout.to_json().encode(), 0o644)
                    write_endpoint_files(state)
                    recorded = True
                elif isinstance(step, nm.WriteNode):
                    _write_joining_node(state, step.node, plan.layout, t)
                elif isinstance(step, nm.StartNode):
                    start_init(state, step.node)
                    say(f"node/{step.node} started")
                elif isinstance(step, nm.WaitCaughtUp):
                    _wait_caught_up(store, store_endpoint(state, step.store, plan.layout.stores[step.store]), left)
                    say(f"store member {step.store} caught up")
                elif isinstance(step, nm.WaitReady):
                    wait_started(state, [step.node], left)
                    wait_ready(state, [step.node], max(1.0, deadline - time.monotonic()))
                elif isinstance(step, nm.StopNode):
                    owned = state.owned(step.node)
                    if owned is not None:
                        owned.kill(10.0)
                        owned.release()
                    say(f"node/{step.node} stopped")
                elif isinstance(step, nm.DeleteNode):
                    _delete_node(state, step.node, left)
            except (wire.WireError, TimeoutError, RuntimeError) as exc:
                undo = (f"; `kubemu node remove {plan.node}` takes it out again"
                        if recorded and plan.node in plan.layout.nodes else "")
                raise RuntimeError(f"{plan.node}: {_STEP_SAYS[type(step)]} failed: {exc}{undo}") from None


_STEP_SAYS = {nodemembership.MemberAdd: "adding the store member", nodemembership.MemberRemove:
              "removing the store member", nodemembership.Record: "recording the layout",
              nodemembership.WriteNode: "writing the node", nodemembership.StartNode: "starting the node",
              nodemembership.WaitCaughtUp: "waiting for the store member to catch up",
              nodemembership.WaitReady: "waiting for the node to be Ready", nodemembership.StopNode:
              "stopping the node", nodemembership.DeleteNode: "deleting the Node"}


def _write_joining_node(state: StateDir, node: str, layout: nodemembership.Layout, t: Timings) -> None:
    """The node's directory, kubelet.conf and units, and on a control-plane node its static pods
    (kubeadm join's phases). The other control-plane nodes' manifests stay as they are: rewritten,
    every component of theirs would restart at once; their apiservers keep the store endpoints
    they were given, of which a quorum lives (`up` gives every one the new list)."""
    net = network.load(state.root)
    port = state.api_port() or DEFAULT_API_PORT
    advertise = kept_advertise_address(state)
    write_pki(state, list(layout.nodes), port, net, advertise)
    write_node(state, node, t.kubelet_restart_sec, kubelet_args=kubelet_args(state, node, t, net))
    if node in layout.control_plane:
        write_control_plane(state, timings=t, api_port=port, net=net, advertise=advertise, only=node)


def _wait_caught_up(store, endpoint: str, timeout: float) -> None:
    """Until the member at `endpoint` has applied what the leader had committed when asked."""
    deadline = time.monotonic() + timeout
    target = None
    while time.monotonic() < deadline:
        try:
            if target is None:
                target = store.status()["commit_index"]  # the leader's, when known
            if store.status(endpoint, timeout=2.0)["applied_index"] >= target:
                return
        except wire.WireError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"the store member at {endpoint} did not catch up within {timeout:g}s")


def _delete_node(state: StateDir, node: str, timeout: float) -> None:
    """The directory kubemu made for the node, and its Node object (kubectl delete node), asked
    again while no apiserver answers."""
    from .apiclient import SyncApiClient  # the wire's asyncio client only when asked

    shutil.rmtree(state.node_dir(node), ignore_errors=True)
    deadline = time.monotonic() + timeout
    with SyncApiClient(state.api_endpoint(), timeout=10, credentials=wireauth.state_credentials(state.root)) as api:
        while True:
            try:
                api.delete("nodes", node)
                return
            except wire.NotFound:
                return
            except wire.WireError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.5)
