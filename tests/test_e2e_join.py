"""`kubemu join` end to end, real processes and `--fast` timings: "another machine" is a network
namespace joined to this one by a veth pair (addresses from 198.18.0.0/15, the benchmarking
range), the cluster is `kubemu up --apiserver-advertise-address <this side>`, and the node joins
from inside the namespace with the command `up` printed (kubeadm join's discovery, TLS
bootstrap, then its kubelet over the CURVE wire). The joined node becomes Ready and runs a pod
pinned to it, and none of its processes is given the cluster's own files; a wrong token, a
wrong CA hash and the name of a Ready node are refused in kubeadm's words with nothing left
running; a wire peer with a key the apiserver does not know is refused at the handshake.

Needs root, `ip` and `nsenter` (skipped otherwise)."""
from __future__ import annotations

import os
import re
import sys

import psutil
import pytest
import zmq

from components.apiserver.nodekeys import ANNOTATION
from kubemu import wire, wirekeys
from kubemu._wire_auth import CurveCredentials, state_credentials
from kubemu.api import certificates
from kubemu.apiclient import SyncApiClient
from kubemu.statedir import StateDir
from kubemu.wire import WireError
from tests import netns
from tests.conftest import (DEADLINE, kill_marked, remove_cluster_cgroups, remove_cluster_network,
                            wait_for)
from tests.kubemu.test_cli import kubemu

pytestmark = netns.NEEDS

LONG = DEADLINE * 3
NODE = "worker-j"
JOIN_LINE = re.compile(r"kubemu join (\S+) --token (\S+) \\\n\t--discovery-token-ca-cert-hash (\S+)")


def teardown_state(path) -> list[str]:
    """`kubemu down` of a state directory, then what the conftest's state_dir checks: what was left."""
    kubemu(path, "down", check=False, timeout=LONG)
    problems = [f"leaked process {pid}" for pid in kill_marked(str(path))]
    problems += [f"cgroup {cg}" for cg in remove_cluster_cgroups(path)]
    problems += [f"network {n}" for n in remove_cluster_network(path)]
    return problems


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    cluster_dir = tmp_path_factory.mktemp("kc")
    with netns.another_machine() as machine:
        try:
            up = kubemu(cluster_dir, "up", "--nodes", "1", "--fast", "--detach", "--api-port", "0",
                        "--no-kubeconfig", "--network", "host", "--apiserver-advertise-address", machine.host,
                        timeout=LONG * 2)
            m = JOIN_LINE.search(up.stdout)
            assert m, f"`up` printed no join command:\n{up.stdout}"
            address, token, ca_hash = m.groups()
            assert address == f"{machine.host}:{StateDir(cluster_dir).api_port()}"
            with SyncApiClient(StateDir(cluster_dir).api_endpoint(), timeout=15,
                               credentials=state_credentials(cluster_dir)) as api:
                yield machine, cluster_dir, api, (address, token, ca_hash)
        finally:
            left = teardown_state(cluster_dir)
        assert not left, left


def join_args(address, token, ca_hash, *more):
    return ("join", address, "--token", token, "--discovery-token-ca-cert-hash", ca_hash, "--fast", *more)


def nothing_running(join_dir) -> None:
    state = StateDir(join_dir)
    assert not state.running_nodes()
    assert not kill_marked(str(join_dir))
    assert not remove_cluster_cgroups(join_dir)


def test_a_wrong_token_or_ca_hash_is_refused_in_kubeadms_words(setup, tmp_path):
    machine, _, _, (address, token, ca_hash) = setup
    tid = token.split(".")[0]
    wrong_secret = machine.kubemu(tmp_path / "a", *join_args(address, f"{tid}.{'x' * 16}", ca_hash,
                                                             "--node-name", "w1"), timeout=LONG)
    assert wrong_secret.returncode == 1, wrong_secret.stdout
    assert wrong_secret.stderr == (
        "error execution phase preflight: couldn't validate the identity of the API Server: failed to verify JWS "
        "signature of received cluster info object, can't trust this API Server\n")
    nothing_running(tmp_path / "a")

    wrong_id = machine.kubemu(tmp_path / "b", *join_args(address, f"zzzzzz.{'x' * 16}", ca_hash, "--node-name", "w2",
                                                        "--timeout", "3"), timeout=LONG)
    assert wrong_id.returncode == 1
    assert wrong_id.stderr == ("error execution phase preflight: couldn't validate the identity of the API Server: "
                               'could not find a JWS signature in the cluster-info ConfigMap for token ID "zzzzzz"\n')
    nothing_running(tmp_path / "b")

    other_hash = "sha256:" + "0" * 64
    wrong_hash = machine.kubemu(tmp_path / "c", *join_args(address, token, other_hash, "--node-name", "w3"),
                                timeout=LONG)
    assert wrong_hash.returncode == 1
    assert wrong_hash.stderr == (
        "error execution phase preflight: couldn't validate the identity of the API Server: cluster CA found in "
        f'cluster-info ConfigMap is invalid: none of the public keys "{ca_hash}" are pinned\n')
    nothing_running(tmp_path / "c")
    assert "Traceback" not in wrong_secret.stderr + wrong_id.stderr + wrong_hash.stderr


def test_the_name_of_a_ready_node_is_refused_before_the_tls_bootstrap(setup, tmp_path):
    machine, _, api, (address, token, ca_hash) = setup
    before = api.get("nodes", "node-0")
    assert [c["status"] for c in before["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
    taken = machine.kubemu(tmp_path / "d", *join_args(address, token, ca_hash, "--node-name", "node-0"),
                           timeout=LONG)
    assert taken.returncode == 1, f"{taken.stdout}\n{taken.stderr}"
    assert taken.stderr == (
        'error execution phase kubelet-start: a Node with name "node-0" and status "Ready" already exists in the '
        "cluster. You must delete the existing Node or change the name of this new joining Node\n")
    nothing_running(tmp_path / "d")
    assert not (StateDir(tmp_path / "d").pki_dir / "kubelet.conf").exists()  # no certificate was asked for
    assert not [csr for csr in api.list("certificatesigningrequests")["items"]
                if certificates.request_subject(certificates.parse_request(csr))[0] == "system:node:node-0"]
    after = api.get("nodes", "node-0")
    assert ANNOTATION not in (after["metadata"].get("annotations") or {})
    assert after["metadata"]["uid"] == before["metadata"]["uid"]


def cmdlines(processes: list[psutil.Process]) -> list[str]:
    out = []
    for p in processes:
        try:
            out.append(" ".join(p.cmdline()))
        except psutil.Error:
            pass  # gone meanwhile
    return out


def test_a_joined_node_is_ready_and_runs_a_pod_pinned_to_it(setup, tmp_path_factory):
    machine, cluster_dir, api, (address, token, ca_hash) = setup
    join_dir = tmp_path_factory.mktemp("kj")
    try:
        joined = machine.kubemu(join_dir, *join_args(address, token, ca_hash, "--node-name", NODE), timeout=LONG)
        assert joined.returncode == 0, f"{joined.stdout}\n{joined.stderr}"
        assert "This node has joined the cluster:" in joined.stdout
        node = api.get("nodes", NODE)
        assert [c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
        assert node["metadata"]["labels"]["kubernetes.io/hostname"] == NODE
        key = wirekeys.load_public(wirekeys.clients_dir(wirekeys.curve_dir(join_dir)) / f"system:node:{NODE}.key")
        assert node["metadata"]["annotations"]["kubemu.io/wire-curve-public-key"] == key.decode()
        state = StateDir(join_dir)
        assert state.api_endpoint().startswith(f"tcp://{machine.host}:")
        again = machine.kubemu(join_dir, *join_args(address, token, ca_hash, "--node-name", NODE), timeout=LONG)
        conf, nodes = str(state.pki_dir / "kubelet.conf"), str(state.nodes_dir)
        assert again.returncode == 1 and again.stderr == (
            "error execution phase preflight: [preflight] Some fatal errors occurred:\n"
            f"\t[ERROR FileAvailable-{conf.replace('/', '-')}]: {conf} already exists\n"
            f"\t[ERROR DirAvailable-{nodes.replace('/', '-')}]: {nodes} is not empty\n"
            "[preflight] This state directory holds a node: give `kubemu join` a new --state-dir\n")
        assert state.running_nodes() == [NODE]  # the node that was there is left alone
        for secret in ("kubelet-client.key", "kubelet.conf"):
            assert (state.pki_dir / secret).stat().st_mode & 0o777 == 0o600

        marker = f"joined-pod-{os.getpid()}"
        api.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pinned"}, "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE}, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "command": [
                sys.executable, "-S", "-c", f"import time; print('{marker}', flush=True); time.sleep(100000)"]}]}},
                   "default")

        def running():
            pod = api.get("pods", "pinned", "default")
            return pod if (pod.get("status") or {}).get("phase") == "Running" else None
        pod = wait_for(running, timeout=LONG, message="the pinned pod to run on the joined node")
        assert pod["spec"]["nodeName"] == NODE
        # its container runs under the joined node's kubelet, in the joined node's cgroup; its
        # log is read on that machine, while the apiserver, which cannot reach it, says so
        assert any(p["metadata"]["name"] == "pinned" for _d, p in state.pods(NODE))
        assert state.owned(NODE).cgroup is not None
        assert wait_for(lambda: marker in machine.kubemu(join_dir, "logs", "pinned", timeout=LONG).stdout,
                        message="the pod's log on the joined machine")
        with pytest.raises(WireError) as err:
            api.log("pinned", "default")
        assert err.value.code == "Unavailable" and err.value.message == (
            f'error dialing backend: the kubelet of node "{NODE}" is not on this machine (a node joined with '
            "`kubemu join`, or a hollow node): its pods' logs, exec and attach are not served")
        api.delete("pods", "pinned", "default")
        # another machine has none of the cluster's files: no process of the joined node (the
        # kube-proxy and cluster DNS pods are kept off it) is given a path into them
        assert not [cmdline for cmdline in cmdlines(state.owned(NODE).processes()) if str(cluster_dir) in cmdline]
    finally:
        down = machine.kubemu(join_dir, "down", timeout=LONG)
        left = teardown_state(join_dir)
    assert down.returncode == 0, down.stderr
    assert not left, left


def test_an_unknown_curve_key_is_refused_at_the_handshake(setup):
    machine, cluster_dir, _, _ = setup
    endpoint = StateDir(cluster_dir).root.joinpath("api-endpoint").read_text()  # ipc: the cluster's own
    assert endpoint.startswith("ipc://")
    server_key = wirekeys.load_public(wirekeys.curve_dir(cluster_dir) / "server.key")
    public, secret = zmq.curve_keypair()
    port = StateDir(cluster_dir).api_port() + 1
    stranger = wire.SyncClient(f"tcp://{machine.host}:{port}", timeout=5,
                               credentials=CurveCredentials(server_key, public, secret))
    try:
        with pytest.raises(wire.WireError) as err:
            stranger.call("list", {"resource": "nodes"}, idempotent=True)
    finally:
        stranger.close()
    assert "refused" in str(err.value), err.value
    pods = StateDir(cluster_dir).node_dir("node-0") / "pods"
    wait_for(lambda: any(f"refused a connection with CURVE key {public.decode()}" in p.read_text(errors="replace")
                         for p in pods.glob("kube-system_apiserver-*/apiserver/*.log")),
             message="the refusal in the apiserver's log")
