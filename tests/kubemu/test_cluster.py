"""kubemu/cluster.py: which processes are a node's (what kubemu started and recorded, never an
argv or environment match), `node kill` and `down` with real processes, with a cgroup per node
and without one; what the foreground `kubemu up` says when an init exits."""
from __future__ import annotations

import base64
import logging
import os
import re
import shlex
import signal
import socket
import stat

import pytest
import yaml
from cryptography import x509

from init.unitfile import load_unit
from kubemu import _wire_auth as wireauth
from kubemu import addons, cgroups, cluster, kubeconfig, netplan, network, ownership, pki
from kubemu.statedir import StateDir
from tests.conftest import alive, spawn_marked, terminate, wait_for

# A unit that leaves a process behind the way a daemon does: a subshell starts it in a session
# of its own and exits, so its parent is gone and init's stop (the unit's process group) misses it.
ESCAPING_UNIT = """\
[Service]
ExecStart=/bin/sh {script} {node_dir} --api {api}
"""
ESCAPE_SH = """\
(setsid sleep 1000 & echo $! > "$1/escapee.tmp"; mv "$1/escapee.tmp" "$1/escapee.pid")
exec sleep 1000
"""


@pytest.fixture(params=["cgroup", "fallback"])
def mode(request, monkeypatch, state_dir):
    if request.param == "fallback":
        monkeypatch.setenv(cgroups.DISABLE_ENV, "0")
    else:
        need_cgroups(state_dir)
    return request.param


def need_cgroups(state_dir) -> None:
    probe = cgroups.create(ownership.cluster_cgroup_name(state_dir) + "-probe")
    if probe is None:
        pytest.skip("no writable cgroup hierarchy on this machine")
    probe.remove()


def start_nodes(state: StateDir, names: list[str]) -> dict[str, object]:
    """Nodes whose one unit names its own node directory and node-0's (as a worker kubelet's
    --api does) and leaves an escaped process behind; node-10's directory has node-1's as prefix."""
    script = state.root / "escape.sh"
    script.write_text(ESCAPE_SH)
    inits = {}
    for name in names:
        node_dir = state.node_dir(name)
        for sub in ("units", "logs"):
            (node_dir / sub).mkdir(parents=True, exist_ok=True)
        (node_dir / "units" / "escaping.service").write_text(ESCAPING_UNIT.format(
            script=script, node_dir=node_dir, api=state.node_dir("node-0") / "apiserver.sock"))
        inits[name] = cluster.start_init(state, name)
    return inits


def node_pids(state: StateDir, name: str) -> set[int]:
    """The node's processes once its unit runs and has left its escapee: exactly init, the
    unit's sh (then sleep) and the escapee, once the subshell that started it has exited."""
    escapee = wait_for(lambda: _read_pid(state.node_dir(name) / "escapee.pid"), message=f"{name}'s escapee")
    pids = wait_for(lambda: (p := {proc.pid for proc in state.owned(name).processes()}) >= {escapee} and len(p) == 3
                    and p, message=f"{name}'s processes")
    assert state.owned(name).pid in pids
    return pids


def _read_pid(path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def test_kill_node_and_down_stop_only_what_kubemu_started(state_dir, mode):
    state = StateDir(state_dir)
    names = ["node-0", "node-1", "node-10"]
    # A user's process that says it is the cluster's in every way but being started by kubemu.
    user = spawn_marked(["/bin/sh", "-c", "exec sleep 1000", str(state.node_dir("node-1"))], state_dir)
    inits = start_nodes(state, names)
    try:
        pids = {name: node_pids(state, name) for name in names}

        assert cluster.kill_node(state, "node-1") == inits["node-1"].pid
        assert not any(alive(p) for p in pids["node-1"]), "a process of node-1 (its escapee too) survived"
        assert all(alive(p) for p in pids["node-0"] | pids["node-10"]), "node kill node-1 touched another node"
        assert state.running_nodes() == ["node-0", "node-10"]
        assert inits["node-1"].wait(timeout=10) == -signal.SIGKILL

        cluster.kill_node(state, "node-0")
        assert not any(alive(p) for p in pids["node-0"])
        assert all(alive(p) for p in pids["node-10"]), "node kill node-0 touched node-10"
        with pytest.raises(RuntimeError, match="node node-0 is not running"):
            cluster.kill_node(state, "node-0")
        with pytest.raises(RuntimeError, match="there is no node node-2"):
            cluster.kill_node(state, "node-2")

        assert cluster.stoppable(state) == ["node-10"]
        stragglers = cluster.down(state, timeout=30)
        assert _read_pid(state.node_dir("node-10") / "escapee.pid") in stragglers  # outlived init's stop
        assert not any(alive(p) for p in pids["node-10"])
        assert alive(user.pid), "kubemu down killed a process it did not start"
        assert cluster.stoppable(state) == [] and cluster.processes(state) == []
        assert not any(cg.path.exists() for cg in cgroups.candidates(ownership.cluster_cgroup_name(state.root))), \
            "a cgroup was left behind"
    finally:
        terminate(user)
        for proc in inits.values():
            proc.kill()
            proc.wait()


def test_node_start_clears_what_outlived_the_node(state_dir, mode):
    """A plain kill -9 of init leaves its escapee running (PDEATHSIG only reaches init's
    children). With a cgroup kubemu still knows it is the node's: `down` would stop it, and
    booting the node again stops it first (nothing survives a machine's reboot). Without
    one it is lost to PID 1: the fallback's documented limit."""
    state = StateDir(state_dir)
    inits = start_nodes(state, ["node-0"])
    escapee = None
    try:
        old = node_pids(state, "node-0")
        escapee = _read_pid(state.node_dir("node-0") / "escapee.pid")
        (state.node_dir("node-0") / "escapee.pid").unlink()
        inits["node-0"].kill()
        inits["node-0"].wait()
        wait_for(lambda: state.running_nodes() == [], message="node-0 to be down")
        assert alive(escapee)
        assert cluster.stoppable(state) == (["node-0"] if mode == "cgroup" else [])
        cluster.start_node(state, "node-0")
        assert alive(escapee) == (mode == "fallback")
        assert not old & node_pids(state, "node-0")
    finally:
        cluster.down(state, timeout=30)
        for proc in inits.values():
            proc.wait()
        if escapee and alive(escapee):
            os.kill(escapee, signal.SIGKILL)
            wait_for(lambda: not alive(escapee), message="the escapee gone")   # before the leak check


def test_the_fallback_is_said_once(state_dir, monkeypatch, caplog):
    monkeypatch.setenv(cgroups.DISABLE_ENV, "0")
    cluster._say_fallback.cache_clear()
    state = StateDir(state_dir)
    with caplog.at_level(logging.WARNING, logger="kubemu.cluster"):
        inits = start_nodes(state, ["node-0", "node-1"])
    try:
        assert [r.getMessage() for r in caplog.records] == [f"kubemu: {ownership.FALLBACK_NOTE}"]
        assert all(state.owned(n).cgroup is None for n in inits)
        for name in inits:
            node_pids(state, name)
    finally:
        cluster.down(state, timeout=30)
        for proc in inits.values():
            proc.wait()


def test_a_refused_move_into_the_cgroup_falls_back(state_dir, monkeypatch, caplog):
    """A hierarchy where kubemu may mkdir but not move a process (a partial delegation): the
    node starts without a cgroup, and the one made for it is removed."""
    need_cgroups(state_dir)

    def refuse(_fd):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(cgroups, "join", refuse)
    cluster._say_fallback.cache_clear()
    state = StateDir(state_dir)
    with caplog.at_level(logging.WARNING, logger="kubemu.cluster"):
        inits = start_nodes(state, ["node-0"])
    try:
        assert state.owned("node-0").cgroup is None
        assert [r.getMessage() for r in caplog.records] == [f"kubemu: {ownership.FALLBACK_NOTE}"]
        assert not any(cg.path.exists() for cg in cgroups.candidates(ownership.cluster_cgroup_name(state.root)))
        node_pids(state, "node-0")
    finally:
        cluster.down(state, timeout=30)
        for proc in inits.values():
            proc.wait()


@pytest.mark.parametrize("node, code, said, stops", [
    ("node-1", -signal.SIGKILL, "node-1: init was killed (SIGKILL)", False),
    ("node-2", -signal.SIGTERM, "node-2: init was killed (SIGTERM)", False),
    ("node-1", 0, "node-1: init shut down", False),
    ("node-1", 3, "node-1: init exited with status 3", False),
    ("node-1", -99, "node-1: init was killed (signal 99)", False),
    ("node-0", -signal.SIGKILL,
     "node-0: init was killed (SIGKILL); the control plane ran there: stopping the cluster", True),
    ("node-0", 0, "node-0: init shut down; the control plane ran there: stopping the cluster", True),
])
def test_init_exit_report(node, code, said, stops):
    assert cluster.init_exit_report(node, code) == (said, stops)


HA = ["node-0", "node-1", "node-2"]


@pytest.mark.parametrize("node, running, said, stops", [
    ("node-0", ["node-1", "node-2", "node-3"],
     "node-0: init was killed (SIGKILL); the control plane runs on node-1, node-2", False),
    ("node-1", ["node-2"], "node-1: init was killed (SIGKILL); the control plane runs on node-2", False),
    ("node-3", ["node-0"], "node-3: init was killed (SIGKILL)", False),
    ("node-2", ["node-3"],
     "node-2: init was killed (SIGKILL); the control plane ran there: stopping the cluster", True),
])
def test_an_ha_cluster_stops_with_its_last_control_plane_node(node, running, said, stops):
    """With three control-plane nodes, losing node-0 is what the layout is for: the
    foreground `up` goes on while another control-plane node runs."""
    assert cluster.init_exit_report(node, -signal.SIGKILL, HA, running) == (said, stops)



# --- the apiserver's port, the PKI, kubeconfigs ----------------------------------------------

@pytest.mark.parametrize("requested, kept, preferred", [
    (None, None, 6443),    # kube-apiserver's default
    (None, 7001, 7001),    # what the last `up` of this state chose
    (7002, 7001, 7002),    # --api-port N
    (0, None, None),       # --api-port 0: any free port...
    (0, 7001, 7001),       # ...the kept one first
])
def test_preferred_api_port(requested, kept, preferred):
    assert cluster.preferred_api_port(requested, kept) == preferred


def test_a_busy_port_is_replaced_and_the_choice_kept(state_dir, caplog):
    state = StateDir(state_dir)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        with caplog.at_level(logging.WARNING, logger="kubemu.cluster"):
            port = cluster.resolve_api_port(state, taken)
        assert port != taken and cluster.port_free(port) and not cluster.port_free(taken)
        assert [r.getMessage() for r in caplog.records] == [
            f"kubemu: port {taken} is in use: the apiserver listens on 127.0.0.1:{port} instead"]
    assert state.api_port() == port
    assert cluster.resolve_api_port(state, None) == port  # a later `up` reuses it
    assert cluster.resolve_api_port(state, 0) == port


def test_write_pki_kubeadm_s_files_and_kubeconfigs(state_dir):
    state = StateDir(state_dir)
    cluster.write_pki(state, ["node-0", "node-1"], 7443)
    pki_dir = state_dir / "pki"
    assert sorted(p.name for p in pki_dir.iterdir()) == sorted(
        [f"{n}.{ext}" for n in ("ca", "apiserver", "admin", "scheduler", "controller-manager")
         for ext in ("crt", "key")]
        + ["sa.key", "sa.pub", "wire"])  # wire/: the admin's wire secret, the CLI's identity
    ca = pki.ensure_ca(pki_dir)[0]
    confs = {"admin.conf": ("kubernetes-admin", ("kubeadm:cluster-admins",)),
             "scheduler.conf": ("system:kube-scheduler", ()),
             "controller-manager.conf": ("system:kube-controller-manager", ()),
             "nodes/node-0/kubelet.conf": ("system:node:node-0", ("system:nodes",)),
             "nodes/node-1/kubelet.conf": ("system:node:node-1", ("system:nodes",))}
    for name, subject in confs.items():
        path = state_dir / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
        config = kubeconfig.load(path)
        assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:7443"
        assert base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]) == ca.cert_pem
        cert = x509.load_pem_x509_certificate(base64.b64decode(config["users"][0]["user"]["client-certificate-data"]))
        assert pki.subject_of(cert) == subject and pki.signed_by(cert, ca.cert)
    assert stat.S_IMODE((state_dir / "nodes" / "node-1" / "pki" / "kubelet-client.key").stat().st_mode) == 0o600

    before = {p: p.read_bytes() for p in state_dir.rglob("*") if p.is_file()}
    cluster.write_pki(state, ["node-0", "node-1"], 7443)  # `up` again: everything reused
    assert {p: p.read_bytes() for p in state_dir.rglob("*") if p.is_file()} == before


def test_the_apiserver_manifest_names_the_pki(state_dir):
    state = StateDir(state_dir)
    cluster.write_node(state, "node-0")
    cluster.write_control_plane(state, api_port=7443)
    manifest = yaml.safe_load((state.node_dir("node-0") / "manifests" / "apiserver.yaml").read_text())
    argv = manifest["spec"]["containers"][0]["command"]
    flags = dict(zip(argv[3::2], argv[4::2]))
    assert {k: flags[k] for k in (
        "--secure-port", "--bind-address", "--tls-cert-file", "--tls-private-key-file", "--client-ca-file",
        "--service-account-key-file", "--service-account-signing-key-file", "--service-account-issuer")} == {
        "--secure-port": "7443", "--bind-address": "127.0.0.1",
        "--tls-cert-file": f"{state_dir}/pki/apiserver.crt", "--tls-private-key-file": f"{state_dir}/pki/apiserver.key",
        "--client-ca-file": f"{state_dir}/pki/ca.crt", "--service-account-key-file": f"{state_dir}/pki/sa.pub",
        "--service-account-signing-key-file": f"{state_dir}/pki/sa.key",
        "--service-account-issuer": "https://kubernetes.default.svc.cluster.local"}
    manifest = yaml.safe_load((state.node_dir("node-0") / "manifests" / "controller-manager.yaml").read_text())
    argv = manifest["spec"]["containers"][0]["command"]
    assert argv[argv.index("--root-ca-file") + 1] == f"{state_dir}/pki/ca.crt"  # kube-root-ca.crt's source
    assert argv[argv.index("--local-path-dir-template") + 1] == f"{state_dir}/nodes/{{node}}/local-path"


def test_merge_and_unmerge_the_user_kubeconfig(state_dir, tmp_path):
    state = StateDir(state_dir)
    cluster.write_pki(state, ["node-0"], 7443)
    user = tmp_path / "kube" / "config"
    kubeconfig.write(user, {"clusters": [{"name": "prod", "cluster": {"server": "https://prod"}}],
                            "contexts": [{"name": "prod", "context": {"cluster": "prod", "user": "me"}}],
                            "users": [{"name": "me", "user": {"token": "t"}}], "current-context": "prod"})
    assert cluster.merge_user_kubeconfig(state, user, "dev") == "kubemu-dev"
    config = kubeconfig.load(user)
    assert config["current-context"] == "kubemu-dev"
    assert [c["name"] for c in config["contexts"]] == ["prod", "kubemu-dev"]
    admin = kubeconfig.load(state.admin_conf)
    assert kubeconfig.find(config, "users", "kubemu-dev")["user"] == admin["users"][0]["user"]

    # up again without a name: the context it merged before goes, the new one comes.
    assert cluster.merge_user_kubeconfig(state, user) == "kubemu"
    assert [c["name"] for c in kubeconfig.load(user)["contexts"]] == ["prod", "kubemu"]

    assert cluster.unmerge_user_kubeconfig(state) == ("kubemu", user)
    config = kubeconfig.load(user)
    assert [c["name"] for c in config["contexts"]] == ["prod"] and config["current-context"] == ""
    assert cluster.unmerge_user_kubeconfig(state) is None  # nothing recorded any more


@pytest.mark.parametrize("record", ["[1, 2]", '"x"', '{"path": 1, "name": "kubemu", "cluster": {}}',
                                    '{"path": "/k", "name": "kubemu"}', '["path", "name", "cluster"]'])
def test_an_unusable_merge_record_is_no_record(state_dir, record):
    state = StateDir(state_dir)
    state.merged_kubeconfig_file.write_text(record)
    assert cluster.unmerge_user_kubeconfig(state) is None


def test_unmerge_leaves_a_context_another_state_took(tmp_path):
    user = tmp_path / "config"
    a, b = StateDir(tmp_path / "a"), StateDir(tmp_path / "b")
    for state in (a, b):
        cluster.write_pki(state, ["node-0"], 7443)
        cluster.merge_user_kubeconfig(state, user)  # both unnamed: b's replaces a's
    assert cluster.unmerge_user_kubeconfig(a) is None
    assert kubeconfig.load(user)["current-context"] == "kubemu"
    assert cluster.unmerge_user_kubeconfig(b) == ("kubemu", user)


def test_up_again_renews_a_bad_certificate_and_says_so(state_dir, caplog):
    state = StateDir(state_dir)
    cluster.write_pki(state, ["node-0"], 7443)
    before = (state_dir / "admin.conf").read_text()
    (state_dir / "pki" / "admin.key").write_bytes(pki.key_pem(pki.new_key()))
    with caplog.at_level(logging.WARNING, logger="kubemu.cluster"):
        cluster.write_pki(state, ["node-0"], 7443)
    assert [r.getMessage() for r in caplog.records] == [
        "kubemu: renewed certificate admin (kubernetes-admin): its key does not match"]
    assert (state_dir / "admin.conf").read_text() != before


CNI_RECORD = netplan.cni_record("abcd1234", "10.244.0.0/16", "10.96.0.0/12", 24, "/run/netns")
HOST_RECORD = netplan.host_record("not root: CAP_NET_ADMIN is needed for pod networks", None, "abcd1234")


def _kubelet_argv(state: StateDir, node: str, net, control_plane: int = 1) -> tuple[str, ...]:
    """The kubelet's argv as init will run it: the unit written, then parsed as init parses it."""
    cluster.write_node(state, node, kubelet_args=cluster.kubelet_args(state, node, cluster.DEFAULT_TIMINGS, net,
                                                                      control_plane))
    loaded = load_unit(str(state.node_dir(node) / "units" / "kubelet.service"))
    assert loaded.error is None, loaded.error
    return loaded.config.exec_start


def test_the_kubelet_s_network_flags(state_dir):
    """A reason with blanks and a colon reaches the kubelet as one word."""
    state = StateDir(state_dir)
    argv = _kubelet_argv(state, "node-1", CNI_RECORD)
    flags = dict(zip(argv[argv.index("--api"):][::2], argv[argv.index("--api"):][1::2]))
    expected = {"--network-mode": "cni", "--fabric-netns": "/run/netns/kubemu-abcd1234",
                "--cni-conf-dir": f"{state_dir}/nodes/node-1/cni/net.d", "--cni-bin-dir": "/usr/lib/cni:/opt/cni/bin",
                "--cluster-cidr": "10.244.0.0/16", "--cgroup-root": ownership.cgroup_name(state_dir, "node-1"),
                "--pod-max-pids": "4096"}
    assert {k: flags.get(k) for k in expected} == expected
    argv = _kubelet_argv(state, "node-1", HOST_RECORD)
    assert argv[argv.index("--network-mode"):argv.index("--network-mode") + 4] == (
        "--network-mode", "host", "--network-mode-reason", "not root: CAP_NET_ADMIN is needed for pod networks")
    assert "--fabric-netns" not in argv and "--cgroup-root" in argv


def test_the_control_plane_runs_in_the_host_s_network_and_allocates_node_cidrs(state_dir):
    state = StateDir(state_dir)
    cluster.write_node(state, "node-0")
    for net, ipam in ((CNI_RECORD, True), (HOST_RECORD, False)):
        cluster.write_control_plane(state, api_port=7443, net=net)
        manifests = sorted((state.node_dir("node-0") / "manifests").glob("*.yaml"))
        assert len(manifests) == 6
        for path in manifests:  # kubeadm's: they must not wait for a podCIDR the controller-manager hands out
            assert yaml.safe_load(path.read_text())["spec"]["hostNetwork"] is True, path
        argv = yaml.safe_load((state.node_dir("node-0") / "manifests" / "controller-manager.yaml").read_text())[
            "spec"]["containers"][0]["command"]
        tail = ["--allocate-node-cidrs", "--cluster-cidr", "10.244.0.0/16", "--service-cluster-ip-range",
                "10.96.0.0/12", "--node-cidr-mask-size", "24"]
        assert (argv[-len(tail):] == tail) == ipam
        assert ("--allocate-node-cidrs" in argv) == ipam
        argv = yaml.safe_load((state.node_dir("node-0") / "manifests" / "apiserver.yaml").read_text())[
            "spec"]["containers"][0]["command"]
        services = dict(zip(argv[-4::2], argv[-3::2]))  # the `kubernetes` Service's address and endpoint
        assert services == ({"--service-cluster-ip-range": "10.96.0.0/12", "--advertise-address": "10.244.255.254"}
                            if ipam else
                            {"--service-cluster-ip-range": HOST_RECORD.service_cidr,
                             "--advertise-address": "127.0.0.1"})


def test_the_control_plane_has_kubeadms_requests_so_its_pods_are_burstable(state_dir):
    """A static pod without requests would be BestEffort, 2 CPU shares: busy pods would starve
    the control plane. kubeadm gives each component requests; so does kubemu."""
    from kubelet.podcgroups import qos_class

    state = StateDir(state_dir)
    cluster.write_node(state, "node-0")
    cluster.write_control_plane(state, api_port=7443)
    pods = {p.stem: yaml.safe_load(p.read_text()) for p in (state.node_dir("node-0") / "manifests").glob("*.yaml")}
    assert {name: pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] for name, pod in pods.items()} == {
        "apiserver": "250m", "controller-manager": "200m", "scheduler": "100m",
        "store-0": "100m", "store-1": "100m", "store-2": "100m"}
    assert {qos_class(pod) for pod in pods.values()} == {"Burstable"}


def test_a_failed_up_before_any_node_starts_removes_the_network(state_dir, monkeypatch):
    made, removed = [], []
    monkeypatch.setattr(network, "setup", lambda root, *a: made.append(root) or HOST_RECORD)
    monkeypatch.setattr(network, "down", lambda root: removed.append(root))
    monkeypatch.setattr(cluster, "start_init", lambda state, node: (_ for _ in ()).throw(OSError("no fork")))
    with pytest.raises(OSError):
        cluster.up(StateDir(state_dir), 1, api_port=0)
    assert made == removed == [state_dir]


# What the previous `kubemu up` wrote on every node, before kube-proxy became a DaemonSet.
OLD_KUBE_PROXY = """\
# Written by `kubemu up`: kube-proxy of {node} as a static pod (kubeadm runs a DaemonSet).
apiVersion: v1
kind: Pod
metadata: {{name: kube-proxy, namespace: kube-system}}
"""


def test_up_removes_the_kube_proxy_static_pods_an_older_up_wrote(state_dir, monkeypatch):
    """kube-proxy is the DaemonSet of the addons now (kubemu/addons.py): `up` on a state
    directory of the previous version removes the static pods that version wrote, on every node
    (one not started this time too), so no node runs two proxies; a manifest of that name that
    is not kubemu's stays. No kube-proxy manifest is written; its wire identity's secret is made
    before the apiserver starts. The apiserver's certificate names the address pods reach it at
    and the `kubernetes` Service's ClusterIP."""
    state = StateDir(state_dir)
    for node in ("node-0", "node-1", "node-2"):
        manifests = state.node_dir(node) / "manifests"
        manifests.mkdir(parents=True)
        (manifests / "kube-proxy.yaml").write_text(OLD_KUBE_PROXY.format(node=node))
    users = state.node_dir("node-3") / "manifests" / "kube-proxy.yaml"
    users.parent.mkdir(parents=True)
    users.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: kube-proxy}\n")
    monkeypatch.setattr(network, "setup", lambda root, *a: CNI_RECORD)
    monkeypatch.setattr(cluster, "start_init", lambda state, node: None)
    cluster.up(state, 2, hollow_nodes=3, api_port=0)
    assert list(state.nodes_dir.glob("*/manifests/kube-proxy.yaml")) == [users]
    assert wireauth.secret_path(wireauth.secrets_dir(state_dir), "system:kube-proxy").exists()
    cert = x509.load_pem_x509_certificate((state_dir / "pki" / "apiserver.crt").read_bytes())
    assert pki.sans_of(cert)[1] == {"127.0.0.1", "10.244.255.254", "10.96.0.1"}
    assert wireauth.secret_path(wireauth.secrets_dir(state_dir), "system:serviceaccount:kube-system:coredns").exists()


# --- the HA layout: --control-plane-nodes N -----------------------------------------------

def _pods(state: StateDir, node: str) -> dict[str, dict]:
    return {p.stem: yaml.safe_load(p.read_text()) for p in (state.node_dir(node) / "manifests").glob("*.yaml")}


def _argv(pod: dict) -> list[str]:
    return pod["spec"]["containers"][0]["command"]


def _flag(argv, name: str):
    return argv[argv.index(name) + 1] if name in argv else None


def _write_ha(state: StateDir, nodes: int = 4, control_plane: int = 3, timings=cluster.FAST_TIMINGS) -> None:
    for node in cluster.node_names(nodes):
        cluster.write_node(state, node)
    cluster.write_control_plane(state, timings=timings, api_port=7443, control_plane_count=control_plane)


def test_each_control_plane_node_runs_a_store_replica_and_the_components(state_dir):
    """kubeadm's stacked etcd: node-i runs store-i (its data and socket under node-i), an
    apiserver on every replica with its own audit log, a scheduler and a controller-manager
    that ask their own node's apiserver first; the apiservers share the HTTPS port; the worker
    runs none of it."""
    state = StateDir(state_dir)
    _write_ha(state)
    api = {n: f"ipc://{state_dir}/nodes/{n}/apiserver.sock" for n in HA}
    stores = [f"ipc://{state_dir}/nodes/node-{i}/store-{i}.sock" for i in range(3)]
    for i, node in enumerate(HA):
        pods = _pods(state, node)
        assert set(pods) == {f"store-{i}", "apiserver", "scheduler", "controller-manager"}
        store = _argv(pods[f"store-{i}"])
        assert (_flag(store, "--data-dir"), _flag(store, "--listen")) == (
            f"{state_dir}/nodes/{node}/data/store-{i}", stores[i])
        assert _flag(store, "--peers") == ",".join(f"store-{j}={ep}" for j, ep in enumerate(stores))
        apiserver = _argv(pods["apiserver"])
        assert _flag(apiserver, "--listen") == api[node]
        assert _flag(apiserver, "--store-endpoints") == ",".join(stores)
        assert _flag(apiserver, "--audit-log") == f"{state_dir}/nodes/{node}/logs/audit.log"
        assert _flag(apiserver, "--secure-port") == "7443" and "--permit-port-sharing" in apiserver
        mine_first = ",".join(api[n] for n in HA[i:] + HA[:i])
        for component in ("scheduler", "controller-manager"):
            argv = _argv(pods[component])
            assert _flag(argv, "--api") == mine_first
            assert [_flag(argv, f"--leader-elect-{f}") for f in ("lease-duration", "renew-deadline", "retry-period")] \
                == ["6s", "4s", "1s"]
    assert _pods(state, "node-3") == {}
    assert state.api_endpoint() == ",".join(api.values())
    assert (state_dir / "store-endpoints").read_text().split() == stores


def test_one_control_plane_node_is_the_single_node_layout(state_dir):
    """The default: every replica on node-0, one apiserver endpoint, the port not shared; the
    leader election flags as Kubernetes' defaults."""
    state = StateDir(state_dir)
    _write_ha(state, nodes=2, control_plane=1, timings=cluster.DEFAULT_TIMINGS)
    pods = _pods(state, "node-0")
    assert set(pods) == {"store-0", "store-1", "store-2", "apiserver", "scheduler", "controller-manager"}
    assert {_flag(_argv(pods[f"store-{i}"]), "--data-dir") for i in range(3)} == {
        f"{state_dir}/nodes/node-0/data/store-{i}" for i in range(3)}
    assert "--permit-port-sharing" not in _argv(pods["apiserver"])
    assert _flag(_argv(pods["scheduler"]), "--api") == f"ipc://{state_dir}/nodes/node-0/apiserver.sock"
    assert _flag(_argv(pods["controller-manager"]), "--leader-elect-lease-duration") == "15s"
    assert state.api_endpoint() == f"ipc://{state_dir}/nodes/node-0/apiserver.sock"
    assert _pods(state, "node-1") == {}


@pytest.mark.parametrize("node, first, tainted", [
    ("node-0", 0, True), ("node-1", 1, True), ("node-2", 2, True), ("node-3", 0, False), ("node-4", 1, False),
])
def test_every_kubelet_knows_every_apiserver_in_its_own_order(state_dir, node, first, tainted):
    state = StateDir(state_dir)
    argv = _kubelet_argv(state, node, None, 3)
    api = [f"ipc://{state_dir}/nodes/node-{i}/apiserver.sock" for i in range(3)]
    assert _flag(argv, "--api") == ",".join(api[first:] + api[:first])
    assert (_flag(argv, "--register-with-taints") == "node-role.kubernetes.io/control-plane:NoSchedule") is tainted
    assert ("--node-labels" in argv) is tainted


def test_another_layout_removes_the_control_plane_it_replaces(state_dir):
    """From three control-plane nodes to one and back: what an earlier `up` wrote where the
    new layout has nothing goes; the user's own manifests stay."""
    state = StateDir(state_dir)
    _write_ha(state)
    users = state.node_dir("node-1") / "manifests" / "scheduler.yaml"
    users.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: scheduler}\n")
    cluster.write_control_plane(state, api_port=7443)
    assert set(_pods(state, "node-0")) == {"store-0", "store-1", "store-2", "apiserver", "scheduler",
                                            "controller-manager"}
    assert set(_pods(state, "node-1")) == {"scheduler"} and _pods(state, "node-2") == {}
    cluster.write_control_plane(state, api_port=7443, control_plane_count=3)
    assert set(_pods(state, "node-0")) == {"store-0", "apiserver", "scheduler", "controller-manager"}
    assert set(_pods(state, "node-2")) == {"store-2", "apiserver", "scheduler", "controller-manager"}


@pytest.mark.parametrize("before, after, where", [(1, 3, "node-0/data/store-1"), (3, 1, "node-2/data/store-2")])
def test_store_data_of_another_layout_is_refused(state_dir, before, after, where):
    """A replica started where the new layout puts it would begin empty while its log lies
    on another node: `up` says so and writes nothing."""
    state = StateDir(state_dir)
    _write_ha(state, control_plane=before)
    for name, node in cluster.store_nodes(before).items():
        (state.node_dir(node) / "data" / name).mkdir(parents=True)
    manifests = {p: p.read_bytes() for p in state.nodes_dir.glob("*/manifests/*")}
    with pytest.raises(RuntimeError, match=f"the store's data in .*{where}.* was written by a cluster with another "
                                           "number of control-plane nodes"):
        cluster.write_control_plane(state, api_port=7443, control_plane_count=after)
    assert {p: p.read_bytes() for p in state.nodes_dir.glob("*/manifests/*")} == manifests


@pytest.mark.parametrize("count, control_plane, said", [
    (2, 3, "2 node(s) cannot hold 3 control-plane nodes"),
    (4, 2, "2 control-plane nodes: choose one of 1, 3, 5"),
])
def test_up_refuses_a_control_plane_it_cannot_lay_out(state_dir, count, control_plane, said):
    with pytest.raises(RuntimeError, match=re.escape(said)):
        cluster.up(StateDir(state_dir), count, api_port=0, control_plane_count=control_plane)
    assert not (state_dir / "nodes").exists()


def test_hollow_nodes_stay_on_node_0_and_know_every_apiserver(state_dir):
    state = StateDir(state_dir)
    cluster.write_node(state, "node-0")
    cluster.write_hollow(state, 2, cluster.FAST_TIMINGS, 3)
    argv = load_unit(str(state.node_dir("node-0") / "units" / "hollow-kubelet.service")).config.exec_start
    assert _flag(argv, "--api") == ",".join(f"ipc://{state_dir}/nodes/node-{i}/apiserver.sock" for i in range(3))


@pytest.mark.parametrize("timings", [cluster.DEFAULT_TIMINGS, cluster.FAST_TIMINGS])
def test_the_components_take_the_flags_up_writes(state_dir, timings):
    """Every flag a control-plane manifest names is one its component knows, with a value it
    takes (the leader election's durations, --permit-port-sharing)."""
    from components.apiserver.__main__ import build_parser as apiserver_parser
    from components.controller_manager.__main__ import build_parser as controller_manager_parser
    from components.scheduler.__main__ import build_parser as scheduler_parser
    from kubemu.leaderelector import settings_from

    state = StateDir(state_dir)
    _write_ha(state, timings=timings)
    pods = _pods(state, "node-1")
    assert apiserver_parser().parse_args(_argv(pods["apiserver"])[3:]).permit_port_sharing
    for name, parser in (("scheduler", scheduler_parser()), ("controller-manager", controller_manager_parser())):
        settings = settings_from(parser, parser.parse_args(_argv(pods[name])[3:]))
        assert (settings.timings.lease_duration, settings.timings.renew_deadline, settings.timings.retry_period) \
            == timings.leader_elect


# --- the advertise address (kubeadm init --apiserver-advertise-address) --------------------------

@pytest.mark.parametrize("text, problem", [
    ("example.com", "'example.com' is not an IPv4 address"), ("fd00::2", "not an IPv4 address"),
    ("127.0.0.1", "loopback, 0.0.0.0"), ("0.0.0.0", "loopback, 0.0.0.0"), ("224.0.0.1", "multicast"),
    ("255.255.255.255", "broadcast"), ("198.18.0.9", "198.18.0.9 is not an address of this machine")])
def test_an_advertise_address_must_be_a_unicast_ipv4_address_of_this_machine(text, problem):
    local = {"127.0.0.1", "0.0.0.0", "224.0.0.1", "255.255.255.255", "198.18.0.1"}
    with pytest.raises(ValueError, match=re.escape(problem)):
        cluster.check_advertise_address(text, local)
    assert cluster.check_advertise_address("198.18.0.1", local) == "198.18.0.1"


def test_the_advertise_address_is_kept_for_the_next_up_and_dropped_once_the_machine_lost_it(state_dir, monkeypatch,
                                                                                           caplog):
    state = StateDir(state_dir)
    monkeypatch.setattr(cluster, "local_addresses", lambda: {"127.0.0.1", "198.18.0.1"})
    with pytest.raises(RuntimeError, match="--apiserver-advertise-address: 198.18.0.2 is not an address"):
        cluster.resolve_advertise_address(state, "198.18.0.2")
    assert cluster.resolve_advertise_address(state, None) is None
    assert cluster.resolve_advertise_address(state, "198.18.0.1") == "198.18.0.1"
    assert cluster.resolve_advertise_address(state, None) is None  # kept once `up` found its ports free
    cluster.keep_advertise_address(state, "198.18.0.1")
    assert cluster.resolve_advertise_address(state, None) == "198.18.0.1"  # re-`up` without the flag
    monkeypatch.setattr(cluster, "local_addresses", lambda: {"127.0.0.1"})
    assert cluster.resolve_advertise_address(state, None) is None
    assert "no longer advertised on 198.18.0.1" in caplog.text and cluster.kept_advertise_address(state) is None


def test_advertised_apiservers_serve_https_and_the_curve_wire_there_and_the_certificate_names_it(state_dir):
    state = StateDir(state_dir)
    for node in cluster.node_names(4):
        cluster.write_node(state, node)
    cluster.write_control_plane(state, api_port=7443, control_plane_count=3, advertise="198.18.0.1")
    for i, node in enumerate(HA):
        argv = _argv(_pods(state, node)["apiserver"])
        assert _flag(argv, "--external-address") == "198.18.0.1" and _flag(argv, "--bind-address") == "127.0.0.1"
        assert _flag(argv, "--wire-listen-address") == f"tcp://198.18.0.1:{7444 + i}"
        assert _flag(argv, "--wire-curve-dir") == str(state.root / "pki" / "wire-curve")
    assert cluster.control_plane_with_apiserver(state) == HA
    cluster.write_control_plane(state, api_port=7443, control_plane_count=3)  # advertised no more
    assert "--external-address" not in _argv(_pods(state, "node-0")["apiserver"])
    assert "--wire-listen-address" not in _argv(_pods(state, "node-0")["apiserver"])
    cluster.write_pki(state, ["node-0"], 7443, advertise="198.18.0.1")
    cert = x509.load_pem_x509_certificate((state.pki_dir / "apiserver.crt").read_bytes())
    assert "198.18.0.1" in pki.sans_of(cert)[1]
    cluster.write_pki(state, ["node-0"], 7443)  # a certificate without it is made again, and the other way
    cert = x509.load_pem_x509_certificate((state.pki_dir / "apiserver.crt").read_bytes())
    assert "198.18.0.1" not in pki.sans_of(cert)[1]


def test_a_busy_wire_port_is_named(state_dir):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"the wire port 127.0.0.1:{port} of node-1's apiserver is in use"):
            cluster.check_wire_ports("127.0.0.1", port - 2, HA)
    with pytest.raises(RuntimeError, match="127.0.0.1:65536 of node-0's apiserver is not a port"):
        cluster.check_wire_ports("127.0.0.1", 65535, ["node-0"])


def _busy_port_for_up(monkeypatch) -> socket.socket:
    """A socket holding a port of 127.0.0.1 (close it), and `up` made to advertise 127.0.0.1
    (its check of the address skipped) and start no node."""
    monkeypatch.setattr(cluster, "check_advertise_address", lambda text, local: text)
    monkeypatch.setattr(network, "setup", lambda root, *a: HOST_RECORD)
    monkeypatch.setattr(network, "down", lambda root: None)
    monkeypatch.setattr(cluster, "start_init", lambda state, node: None)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    return busy


def test_a_failed_up_keeps_no_advertise_address(state_dir, monkeypatch):
    """The address is kept for the next `up` only once its wire ports are known free: an `up`
    refused for a busy one leaves nothing that would advertise it again."""
    state = StateDir(state_dir)
    with _busy_port_for_up(monkeypatch) as busy:
        port = busy.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"wire port 127.0.0.1:{port} of node-1's apiserver is in use"):
            cluster.up(state, 3, control_plane_count=3, api_port=port - 2, advertise_address="127.0.0.1")
    assert cluster.kept_advertise_address(state) is None


def test_up_checks_the_wire_ports_of_the_recorded_control_plane(state_dir, monkeypatch):
    """After `node add --control-plane` and `node remove node-1` the apiservers are node-0, 2
    and 3 (as write_control_plane lays them out): node-3's wire port is the one checked."""
    state = StateDir(state_dir)
    _record(state, ["node-0", "node-2", "node-3"], {"store-0": "node-0", "store-2": "node-2", "store-3": "node-3"})
    with _busy_port_for_up(monkeypatch) as busy:
        port = busy.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"wire port 127.0.0.1:{port} of node-3's apiserver is in use"):
            cluster.up(state, 3, control_plane_count=3, api_port=port - 4, advertise_address="127.0.0.1")


def test_wire_ports_follow_the_node_index_rule():
    from kubemu import apipreference
    for node in ("node-0", "node-3", "node-12", "myhost"):
        assert cluster.wire_port(7443, node) == 7444 + apipreference.node_index(node)


# --- the layout `kubemu node add|remove` recorded (kubemu/nodemembership.py) -------------------

def _record(state: StateDir, nodes: list[str], stores: dict[str, str]) -> None:
    from kubemu.nodemembership import Layout
    (state.root / cluster.MEMBERSHIP_FILE).write_text(Layout(tuple(nodes), stores).to_json())


def test_a_recorded_layout_decides_the_control_plane_up_writes(state_dir, caplog):
    """After `node add --control-plane` (node-3, store-3) and `node remove node-1`, `up` lays the
    cluster out as recorded, whatever its flags say: store-i on node-i for 0, 2, 3, each
    replica joining (a changed cluster never bootstraps again), every apiserver with every
    replica, the clients with every apiserver, and the kubelets' control-plane labels."""
    state = StateDir(state_dir)
    _write_ha(state)
    _record(state, ["node-0", "node-2", "node-3"], {"store-0": "node-0", "store-2": "node-2", "store-3": "node-3"})
    caplog.set_level(logging.WARNING)
    assert cluster.layout_nodes(state, 4, 3) == ["node-0", "node-2", "node-3"]
    assert "`kubemu node add|remove` changed this cluster" in caplog.text
    cluster.write_control_plane(state, api_port=7443, control_plane_count=3)
    stores = [f"ipc://{state_dir}/nodes/node-{i}/store-{i}.sock" for i in (0, 2, 3)]
    apis = [f"ipc://{state_dir}/nodes/node-{i}/apiserver.sock" for i in (0, 2, 3)]
    assert (state_dir / "store-endpoints").read_text().split() == stores
    assert state.api_endpoint() == ",".join(apis)
    for node in ("node-0", "node-2", "node-3"):
        pods = _pods(state, node)
        store = f"store-{node[-1]}"
        assert set(pods) == {store, "apiserver", "scheduler", "controller-manager"}
        argv = _argv(pods[store])
        assert "--join" in argv and _flag(argv, "--peers").count("=ipc://") == 3
        assert _flag(_argv(pods["apiserver"]), "--store-endpoints") == ",".join(stores)
        assert set(_flag(_argv(pods["scheduler"]), "--api").split(",")) == set(apis)
    args = cluster.kubelet_args(state, "node-3", cluster.FAST_TIMINGS)
    assert f"{cluster.CONTROL_PLANE_ROLE}=" in args
    assert "--node-labels" not in cluster.kubelet_args(state, "node-1", cluster.FAST_TIMINGS)


def test_without_a_record_the_stores_bootstrap(state_dir):
    """A first `up` bootstraps its replicas: --join only once a recorded layout exists."""
    state = StateDir(state_dir)
    _write_ha(state)
    assert all("--join" not in _argv(_pods(state, n)[f"store-{i}"]) for i, n in enumerate(HA))


def test_write_control_plane_only_one_node_leaves_the_others_as_they_are(state_dir):
    """`node add --control-plane` writes the new node's static pods alone: rewriting the
    others' would restart every component of theirs at once."""
    state = StateDir(state_dir)
    _write_ha(state)
    before = {p: p.read_bytes() for p in state.nodes_dir.glob("*/manifests/*")}
    _record(state, ["node-0", "node-1", "node-2", "node-3"],
            {"store-0": "node-0", "store-1": "node-1", "store-2": "node-2", "store-3": "node-3"})
    cluster.write_node(state, "node-3")
    cluster.write_control_plane(state, api_port=7443, only="node-3")
    assert {p: p.read_bytes() for p in state.nodes_dir.glob("*/manifests/*") if "node-3" not in str(p)} == before
    assert set(_pods(state, "node-3")) == {"store-3", "apiserver", "scheduler", "controller-manager"}
    assert len((state_dir / "store-endpoints").read_text().split()) == 4


def test_a_damaged_record_is_one_clear_error(state_dir):
    state = StateDir(state_dir)
    (state_dir / cluster.MEMBERSHIP_FILE).write_text("{")
    with pytest.raises(RuntimeError, match="membership.json: "):
        cluster.control_plane_of(state, 3)


def test_a_joined_nodes_kubelet_presents_its_curve_keys_to_the_tcp_endpoints(state_dir):
    """`kubemu join`'s node: the apiservers' tcp endpoints and its CURVE key directory, no PLAIN
    secret made, no exec/attach listener (the apiserver could not dial it on another machine)."""
    state = StateDir(state_dir)
    api = "tcp://198.18.0.1:6444,tcp://198.18.0.1:6445"
    curve = state_dir / "pki" / "wire-curve"
    cluster.write_node(state, "w1", kubelet_args=cluster.kubelet_args(
        state, "w1", cluster.FAST_TIMINGS, joined_api=api, curve_dir=curve))
    argv = load_unit(str(state.node_dir("w1") / "units" / "kubelet.service")).config.exec_start
    assert _flag(argv, "--api") == api and _flag(argv, "--wire-curve-dir") == str(curve)
    for absent in ("--wire-credentials", "--listen", "--wire-secrets"):
        assert absent not in argv
    assert not (state_dir / "pki" / "wire").exists()
    assert _flag(argv, "--node-lease-duration-seconds") == str(cluster.FAST_TIMINGS.lease_duration)


def test_a_joined_node_is_labelled_joined_and_never_control_plane_whatever_its_name(state_dir):
    """A node of another machine named node-0 is not the control-plane node: no kubeadm label
    nor taint; the kubemu.io/joined label keeps the addons that need this machine off it."""
    state = StateDir(state_dir)
    argv = shlex.split(cluster.kubelet_args(state, "node-0", cluster.FAST_TIMINGS, joined_api="tcp://198.18.0.1:6444",
                                            curve_dir=state_dir / "pki" / "wire-curve"))
    assert _flag(argv, "--node-labels") == f"{addons.JOINED_NODE_LABEL}="
    assert "--register-with-taints" not in argv and cluster.CONTROL_PLANE_ROLE not in " ".join(argv)


# --- node add|remove on an advertised cluster -------------------------------------------------

def _membership_without_a_cluster(monkeypatch) -> tuple[list, list]:
    """add_node/remove_node on the three-node HA layout with no process behind it: (the plans
    carried out, the cluster-info changes asked for)."""
    from kubemu.nodemembership import Layout
    layout = Layout(tuple(HA), {f"store-{i}": n for i, n in enumerate(HA)})
    carried, synced = [], []
    monkeypatch.setattr(StateDir, "require_running", lambda self: HA)
    monkeypatch.setattr(cluster, "current_layout", lambda state: layout)
    monkeypatch.setattr(cluster, "healthy_members", lambda state, layout: set(layout.stores))
    monkeypatch.setattr(cluster, "_carry_out", lambda state, plan, *a: carried.append(plan.node))
    monkeypatch.setattr(cluster, "cluster_info_in_line",
                        lambda state, before, after: synced.append((before.control_plane, after.control_plane)))
    return carried, synced


def test_node_add_control_plane_refuses_a_busy_wire_port_before_changing_anything(state_dir, monkeypatch):
    state = StateDir(state_dir)
    carried, synced = _membership_without_a_cluster(monkeypatch)
    (state_dir / cluster.ADVERTISE_ADDRESS_FILE).write_text("127.0.0.1\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        state.api_port_file.write_text(f"{port - 4}\n")  # node-3's: api-port + 1 + 3
        with pytest.raises(RuntimeError, match=f"wire port 127.0.0.1:{port} of node-3's apiserver is in use"):
            cluster.add_node(state, True)
        assert carried == [] and synced == []
        assert cluster.add_node(state, False) == "node-3"  # a worker runs no apiserver: no port of its own
    assert cluster.add_node(state, True) == "node-3"
    assert synced[-1] == (tuple(HA), (*HA, "node-3"))
    cluster.remove_node(state, "node-2")
    assert synced[-1] == (tuple(HA), ("node-0", "node-1"))


def test_an_added_control_plane_node_s_apiserver_is_advertised_and_cluster_info_names_it(state_dir):
    """`node add --control-plane` writes the new apiserver's flags as `up` would (the kept
    advertise address), and cluster-info's wire endpoints then name it, node-0's first."""
    from kubemu import wirekeys
    from kubemu.nodemembership import Layout
    state = StateDir(state_dir)
    _write_ha(state)
    (state_dir / cluster.ADVERTISE_ADDRESS_FILE).write_text("198.18.0.1\n")
    state.api_port_file.write_text("7443\n")
    wirekeys.ensure_server_keys(state.root)
    cluster.write_pki(state, HA, 7443)
    after = Layout((*HA, "node-3"), {f"store-{i}": f"node-{i}" for i in range(4)})
    _record(state, list(after.nodes), dict(after.stores))
    cluster._write_joining_node(state, "node-3", after, cluster.FAST_TIMINGS)
    argv = _argv(_pods(state, "node-3")["apiserver"])
    assert _flag(argv, "--external-address") == "198.18.0.1"
    assert _flag(argv, "--wire-listen-address") == "tcp://198.18.0.1:7447"
    endpoints = cluster.cluster_info_args(state)[2]
    assert endpoints[0] == "tcp://198.18.0.1:7444" and endpoints[-1] == "tcp://198.18.0.1:7447"


def test_cluster_info_follows_a_changed_control_plane_of_an_advertised_cluster(state_dir, monkeypatch):
    from contextlib import nullcontext

    from kubemu import apiclient, clusterinfo, wirekeys
    from kubemu.nodemembership import Layout
    state = StateDir(state_dir)
    _write_ha(state)
    state.api_port_file.write_text("7443\n")
    cluster.write_pki(state, HA, 7443)
    wirekeys.ensure_server_keys(state.root)
    asked = []
    monkeypatch.setattr(apiclient, "SyncApiClient", lambda *a, **k: nullcontext("api"))
    monkeypatch.setattr(clusterinfo, "ensure", lambda api, *args: asked.append(args[2]))
    three, two = Layout(tuple(HA), {f"store-{i}": n for i, n in enumerate(HA)}), Layout(("node-0", "node-1"))
    cluster.cluster_info_in_line(state, three, two)
    assert asked == []  # not advertised: cluster-info names no wire
    (state_dir / cluster.ADVERTISE_ADDRESS_FILE).write_text("198.18.0.1\n")
    cluster.cluster_info_in_line(state, three, Layout((*HA, "node-3"), three.stores))
    assert asked == []  # a worker added: the apiservers are the same
    cluster.cluster_info_in_line(state, three, two)
    assert asked == [[f"tcp://198.18.0.1:{7444 + i}" for i in range(3)]]
