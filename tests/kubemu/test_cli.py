"""The `kubemu` command end to end: up, ps, kill -9 a kubelet, systemctl, journalctl, down."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request

import psutil
import pytest
import yaml

from kubemu import kubeconfig, netplan, network
from tests.conftest import DEADLINE, alive, marked_processes, spawn_marked, terminate, wait_for


def kubemu(state_dir, *args, check=True, timeout=DEADLINE * 3) -> subprocess.CompletedProcess:
    env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir), COLUMNS="200")
    done = subprocess.run([sys.executable, "-m", "kubemu.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0, f"kubemu {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def ps_json(state_dir) -> dict:
    return {n["name"]: n["init"] for n in json.loads(kubemu(state_dir, "ps", "-o", "json").stdout)["nodes"]}


def ps_json_pods(state_dir, node: str) -> list[dict]:
    return next(n["pods"] for n in json.loads(kubemu(state_dir, "ps", "-o", "json").stdout)["nodes"] if n["name"] == node)


def kubelet_row(init: dict) -> dict:
    return next(u for u in init["units"] if u["name"] == "kubelet.service")


def test_no_cluster_is_one_line_and_non_zero(state_dir):
    for args in (["ps"], ["systemctl", "status"], ["journalctl", "-u", "kubelet"], ["node", "kill", "node-1"],
                 ["kubeconfig"]):
        done = kubemu(state_dir, *args, check=False)
        assert done.returncode != 0
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_cluster_name_must_fit_a_context_name(state_dir):
    done = kubemu(state_dir, "up", "--name", "My_Cluster", check=False)
    assert done.returncode == 2 and "Invalid value for '--name': 'My_Cluster': lowercase letters" in done.stderr
    assert not (state_dir / "pki").exists()


def test_down_with_nothing_running_says_so_and_succeeds(state_dir):
    """As `kind delete cluster` does: nothing to stop is not an error."""
    done = kubemu(state_dir, "down")
    assert done.stdout == f"no kubemu cluster was running in {state_dir}: nothing to stop\n" and not done.stderr


def test_down_stops_the_cluster_whatever_the_user_kubeconfig_holds(state_dir, tmp_path, monkeypatch):
    """A malformed user kubeconfig made `down` crash before stopping anything: now the cluster
    is stopped first, and the kubeconfig problem is one line."""
    from click.testing import CliRunner

    from kubemu import cli, cluster

    user = tmp_path / "config"
    user.write_text("clusters: [oops]\nusers: [null]\n")
    (state_dir / "merged-kubeconfig.json").write_text(json.dumps(
        {"path": str(user), "name": "kubemu", "cluster": {"name": "kubemu", "cluster": {}}}))
    stopped = []
    monkeypatch.setattr(cluster, "stoppable", lambda state: ["node-0"])
    monkeypatch.setattr(cluster, "down", lambda state, timeout=150.0: stopped.append(state.root) or [])
    done = CliRunner().invoke(cli.main, ["--state-dir", str(state_dir), "down"])
    assert done.exit_code == 0 and stopped == [state_dir], (done.output, done.exception)
    assert done.stdout == "cluster stopped\n"
    assert done.stderr.count("\n") == 1 and "is not a kubeconfig" in done.stderr, done.stderr
    assert user.read_text() == "clusters: [oops]\nusers: [null]\n"  # left as it was


def test_up_kill_kubelet_down(state_dir):
    user_kubeconfig = kubeconfig.user_path()  # the test session's own (tests/conftest.py)
    kubeconfig.write(user_kubeconfig, {"clusters": [{"name": "prod", "cluster": {"server": "https://prod"}}],
                                       "current-context": "prod"})
    out = kubemu(state_dir, "up", "--nodes", "2", "--detach").stdout
    assert "node-0" in out and "node-1" in out and "kubelet.service" in out
    net = network.load(state_dir)  # made before the nodes started, removed by `down` below
    assert net.mode == network.probe(None).kind
    if net.mode == netplan.CNI:
        assert network.leftovers(net)
    # As kind does: a context merged into $KUBECONFIG, made current; `kubemu kubeconfig` is admin.conf.
    port = int((state_dir / "api-port").read_text())
    assert f'Set kubectl context to "kubemu" (https://127.0.0.1:{port}, in {user_kubeconfig})' in out
    merged = kubeconfig.load(user_kubeconfig)
    assert merged["current-context"] == "kubemu" and [c["name"] for c in merged["clusters"]] == ["prod", "kubemu"]
    admin = kubemu(state_dir, "kubeconfig").stdout
    assert admin == (state_dir / "admin.conf").read_text()
    assert yaml.safe_load(admin)["users"][0]["user"] == kubeconfig.find(merged, "users", "kubemu")["user"]
    if shutil.which("kubectl"):  # the README's quick tour: kubectl right after `kubemu up`
        home = state_dir / "home"  # kubectl caches discovery under ~/.kube/cache
        home.mkdir()
        done = subprocess.run(["kubectl", "get", "nodes", "-o", "name"], capture_output=True, text=True,
                              timeout=DEADLINE, env=dict(os.environ, HOME=str(home)), stdin=subprocess.DEVNULL)
        assert done.stdout.split() == ["node/node-0", "node/node-1"], done.stderr
    nodes = ps_json(state_dir)
    assert sorted(nodes) == ["node-0", "node-1"]
    for init in nodes.values():
        assert kubelet_row(init)["active_state"] == "active"
        assert kubelet_row(init)["status_text"].startswith("running ")  # node-0 has the example pod
    # The control plane runs as static pods on node-0; the store is found through the state directory.
    assert kubemu(state_dir, "store", "put", "greeting", "hello").stdout.strip() == "OK"
    assert kubemu(state_dir, "store", "get", "greeting").stdout.split() == ["greeting", "hello"]
    # kube-proxy on every node, kubeadm's DaemonSet (`up` waits for its rollout); the DNS addon's
    # pods wherever they were scheduled.
    system_pods = {n: sorted(p["metadata"].get("generateName") or p["metadata"]["name"]
                             for p in ps_json_pods(state_dir, n)
                             if p["metadata"]["namespace"] == "kube-system" and not p["metadata"]["name"].startswith(
                                 "coredns-")) for n in ("node-0", "node-1")}
    assert system_pods == {"node-0": ["apiserver-node-0", "controller-manager-node-0", "kube-proxy-",
                                      "scheduler-node-0", "store-0-node-0", "store-1-node-0", "store-2-node-0"],
                           "node-1": ["kube-proxy-"]}
    # kubeadm's addon phase, done by `up` (even --detach) once the API answers.
    dns = json.loads(kubemu(state_dir, "get", "service", "kube-dns", "-n", "kube-system", "-o", "json").stdout)
    assert dns["spec"]["clusterIP"] == netplan.dns_service_ip(net)
    coredns = json.loads(kubemu(state_dir, "get", "deployment", "coredns", "-n", "kube-system", "-o", "json").stdout)
    assert coredns["spec"]["replicas"] == (2 if net.mode == netplan.CNI else 1)
    unit = (state_dir / "nodes" / "node-1" / "units" / "kubelet.service").read_text()
    assert "Restart=always" in unit and "RestartSec=10" in unit and "StartLimitIntervalSec=0" in unit

    victim = kubelet_row(nodes["node-1"])["main_pid"]
    os.kill(victim, signal.SIGKILL)
    # kubeadm's RestartSec=10: init brings it back ten seconds later.
    row = wait_for(lambda: (lambda r: r if r["active_state"] == "active" and r["main_pid"] != victim else None)(
        kubelet_row(ps_json(state_dir)["node-1"])), message="kubelet on node-1 to come back")
    assert row["n_restarts"] == 1
    assert kubelet_row(ps_json(state_dir)["node-0"])["n_restarts"] == 0  # the other node is untouched
    table = kubemu(state_dir, "ps").stdout
    assert str(row["main_pid"]) in table

    status = kubemu(state_dir, "systemctl", "--node", "node-1", "status", "kubelet").stdout
    assert "Active: active (running)" in status and f"Main PID: {row['main_pid']}" in status
    journal = kubemu(state_dir, "journalctl", "--node", "node-1", "-u", "kubelet", "-n", "50").stdout
    assert "Scheduled restart job, restart counter is at 1." in journal

    kubemu(state_dir, "systemctl", "--node", "node-0", "stop", "kubelet")
    assert kubelet_row(ps_json(state_dir)["node-0"])["active_state"] == "inactive"
    kubemu(state_dir, "systemctl", "--node", "node-0", "start", "kubelet")
    assert kubelet_row(ps_json(state_dir)["node-0"])["active_state"] == "active"

    (state_dir / "nodes" / "node-1" / "manifests" / "echo.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: echo}\nspec:\n  containers:\n  - name: echo\n"
        f"    command: [{sys.executable!r}, -c, \"print('hello from echo', flush=True); import time; time.sleep(3600)\"]\n")
    pod = wait_for(lambda: next((p for p in ps_json_pods(state_dir, "node-1") if p["metadata"]["name"] == "echo-node-1"
                                 and p["status"]["phase"] == "Running"), None), message="the static pod")
    assert "echo-node-1" in kubemu(state_dir, "ps").stdout
    wait_for(lambda: "hello from echo" in kubemu(state_dir, "logs", "echo-node-1").stdout, message="its log")
    assert kubemu(state_dir, "logs", "nope", check=False).stderr.strip() == 'Error from server (NotFound): pods "nope" not found'

    pids = [p.pid for p in marked_processes(str(state_dir))]
    assert len(pids) >= 12  # two inits, two kubelets, four shims and their containers
    assert int(pod["status"]["containerStatuses"][0]["containerID"].removeprefix("process://")) in pids
    out = kubemu(state_dir, "down").stdout
    assert out.startswith(f'Deleted kubectl context "kubemu" from {user_kubeconfig}\n') and \
        out.endswith("cluster stopped\n"), out
    assert kubeconfig.load(user_kubeconfig)["clusters"] == [{"name": "prod", "cluster": {"server": "https://prod"}}]
    assert marked_processes(str(state_dir)) == []
    assert not any(alive(p) for p in pids)
    assert network.leftovers(net) == []
    assert kubemu(state_dir, "ps", check=False).returncode != 0


def test_foreground_up_stops_everything_on_ctrl_c(state_dir):
    env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir))
    log = state_dir / "up.out"
    with open(log, "w") as out_file:
        # Ctrl-C in a terminal: SIGINT at its default, even when this run inherited it ignored
        # (a job started in the background by a shell without job control), which the child
        # would inherit too: Python then never raises KeyboardInterrupt
        fg = subprocess.Popen([sys.executable, "-m", "kubemu.cli", "up", "--nodes", "1", "--fast"], env=env,
                              stdout=out_file, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        wait_for(lambda: "running in the foreground" in log.read_text(), message="the cluster to be up")
        row = kubelet_row(ps_json(state_dir)["node-0"])
        fg.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
        fg.wait(timeout=DEADLINE * 2)
    finally:
        if fg.poll() is None:
            fg.kill()
    out = log.read_text()
    assert fg.returncode == 0, out
    assert "cluster stopped" in out
    assert not alive(row["main_pid"])
    assert marked_processes(str(state_dir)) == []


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.read() if answer.status == 200 else None
    except OSError:
        return None


def test_a_deployment_from_the_docs_runs_and_logs_finds_its_pods(state_dir, tmp_path):
    """The Kubernetes docs' nginx Deployment (image, no command) runs from the image catalog and
    answers on loopback; `logs` takes TYPE/NAME as kubectl does; an unknown image is ErrImagePull."""
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    manifest = tmp_path / "nginx.yaml"
    manifest.write_text(f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment
  labels:
    app: nginx
spec:
  replicas: 2
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:1.14.2
        ports:
        - containerPort: {port}
---
apiVersion: v1
kind: Pod
metadata:
  name: ghost
spec:
  containers:
  - name: main
    image: nosuch/image:1
""")
    before = kubeconfig.load(kubeconfig.user_path())
    out = kubemu(state_dir, "up", "--nodes", "2", "--fast", "--detach", "--no-kubeconfig").stdout
    assert "Set kubectl context" not in out and f"kubectl --kubeconfig {state_dir}/admin.conf get nodes" in out
    assert kubeconfig.load(kubeconfig.user_path()) == before
    try:
        kubemu(state_dir, "apply", "-f", str(manifest))

        def pods() -> dict[str, dict]:
            items = json.loads(kubemu(state_dir, "get", "pods", "-o", "json").stdout)["items"]
            return {p["metadata"]["name"]: p for p in items}

        def web_running():
            web = [p for n, p in pods().items() if n.startswith("nginx-deployment-")]
            return len(web) == 2 and all(p["status"].get("phase") == "Running" for p in web) and web
        web = wait_for(web_running, message="both replicas to run (one port, SO_REUSEPORT)")
        ips = {p["status"]["podIP"] for p in web}  # 127.0.0.1 for both without pod networks (SO_REUSEPORT)
        for ip in ips:  # Running is the process started: it listens a moment later
            assert b"Welcome to kubemu!" in wait_for(lambda: _get(f"http://{ip}:{port}/"), message=f"{ip} to answer")
        listening = "127.0.0.1" if ips == {"127.0.0.1"} else "0.0.0.0"  # every address of a pod's own namespace

        done = wait_for(lambda: (d := kubemu(state_dir, "logs", "deployment/nginx-deployment")).stdout and d,
                        message="the log of the deployment's pod")
        assert f"httpd: serving a welcome page on http://{listening}:{port}/" in done.stdout
        chosen = done.stderr.strip().removeprefix("Found 2 pods, using pod/")
        assert chosen in {p["metadata"]["name"] for p in web}, done.stderr
        for arg in (f"pod/{chosen}", f"po/{chosen}", chosen, "deploy/nginx-deployment"):
            assert "httpd: serving" in kubemu(state_dir, "logs", arg).stdout
        assert kubemu(state_dir, "logs", chosen, "--tail", "0").stdout == ""
        assert kubemu(state_dir, "logs", chosen, "--tail", "1").stdout == done.stdout.splitlines(True)[-1]
        rs = web[0]["metadata"]["ownerReferences"][0]["name"]
        assert "httpd: serving" in kubemu(state_dir, "logs", f"rs/{rs}").stdout
        for arg, error in (("deploy/nosuch", 'Error from server (NotFound): deployments.apps "nosuch" not found'),
                           ("pod/nosuch", 'Error from server (NotFound): pods "nosuch" not found'),
                           ("node/node-0", "error: cannot get the logs from *v1.Node: selector for *v1.Node "
                                           "not implemented"),
                           ("foo/x", 'error: the server doesn\'t have a resource type "foo"')):
            assert kubemu(state_dir, "logs", arg, check=False).stderr.strip() == error

        def ghost_waiting():
            state = (pods()["ghost"]["status"].get("containerStatuses") or [{}])[0].get("state") or {}
            return state.get("waiting", {}).get("reason") in ("ErrImagePull", "ImagePullBackOff") and state
        wait_for(ghost_waiting, message="the unknown image to fail to pull")
        assert str(state_dir / "images.yaml") in kubemu(state_dir, "describe", "pod", "ghost").stdout
        assert kubemu(state_dir, "logs", "ghost", check=False).stderr.strip() in {  # it alternates
            'Error from server (BadRequest): container "main" in pod "ghost" is waiting to start: ' + why
            for why in ("image can't be pulled", "trying and failing to pull image")}
    finally:
        kubemu(state_dir, "down")


ESCAPING_POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: escaping}}
spec:
  containers:
  - name: main
    command: ["/bin/sh", "-c", "(setsid sleep 1000 & echo $! > {dir}/escapee.tmp; mv {dir}/escapee.tmp {dir}/escapee.pid);
              exec sleep 1000"]
"""


def test_down_and_node_kill_stop_only_what_kubemu_started(state_dir):
    """The issue's reproduction: a user's process with the cluster's KUBEMU_STATE_DIR (and the
    node's directory in its argv) outlives `node kill` and `down`; a container's double-forked
    escapee does not outlive `node kill`; the node's cgroups go with `down`."""
    kubemu(state_dir, "up", "--nodes", "2", "--fast", "--detach")
    user = spawn_marked(["/bin/sh", "-c", "exec sleep 1000", str(state_dir / "nodes" / "node-1")], state_dir)
    try:
        (state_dir / "nodes" / "node-1" / "manifests" / "escaping.yaml").write_text(ESCAPING_POD.format(dir=state_dir))
        pidfile = state_dir / "escapee.pid"
        escapee = wait_for(lambda: pidfile.exists() and int(pidfile.read_text()), message="the container's escapee")
        node_0 = ps_json(state_dir)["node-0"]["pid"]
        for args, error in ((["node", "kill", "node-10"], "there is no node node-10"),
                            (["systemctl", "--node", "node-10", "status"], "node node-10 is not running"),
                            (["journalctl", "--node", "node-10", "-u", "kubelet"], "there is no node node-10"),
                            (["journalctl", "--node", "../nodes/node-1", "-u", "kubelet"], "there is no node ../"),
                            (["logs", "--node", "../nodes/node-1", "x"], "there is no node ../")):
            done = kubemu(state_dir, *args, check=False)
            assert done.returncode == 1 and done.stderr.startswith(f"error: {error}"), done.stderr

        done = kubemu(state_dir, "node", "kill", "node-1")
        assert done.stdout.startswith("node/node-1 killed (init pid ") and not done.stderr
        assert not alive(escapee), "the escaped process of node-1's container outlived `node kill`"
        assert alive(user.pid) and alive(node_0)

        done = kubemu(state_dir, "down")
        assert done.stdout.endswith("cluster stopped\n") and not done.stderr
        assert alive(user.pid), "kubemu down killed a process it did not start"
        assert not alive(node_0)
        assert kubemu(state_dir, "down").stdout.startswith("no kubemu cluster was running")
        assert marked_processes(str(state_dir)) == [psutil.Process(user.pid)]
    finally:
        terminate(user)
        kubemu(state_dir, "down")


def test_foreground_up_reports_each_node_death(state_dir):
    """`node kill` from another terminal: the foreground `up` reaps its child init at once, says
    how it ended in one line and keeps running; when node-0 dies it says why the cluster stops."""
    env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir))
    log = state_dir / "up.out"
    with open(log, "w") as out_file:
        fg = subprocess.Popen([sys.executable, "-m", "kubemu.cli", "up", "--nodes", "2", "--fast"], env=env,
                              stdout=out_file, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: "running in the foreground" in log.read_text(), message="the cluster to be up")
        inits = {name: init["pid"] for name, init in ps_json(state_dir).items()}
        done = kubemu(state_dir, "node", "kill", "node-1")
        assert done.stdout == f"node/node-1 killed (init pid {inits['node-1']})\n" and not done.stderr
        wait_for(lambda: "node-1: init was killed (SIGKILL)\n" in log.read_text(), message="the foreground's line")
        wait_for(lambda: not psutil.pid_exists(inits["node-1"]), message="the dead init to be reaped")
        assert fg.poll() is None, log.read_text()
        assert ps_json(state_dir)["node-0"]["pid"] == inits["node-0"]

        kubemu(state_dir, "node", "kill", "node-0")
        fg.wait(timeout=DEADLINE * 2)
    finally:
        if fg.poll() is None:
            fg.kill()
            kubemu(state_dir, "down")
    out = log.read_text()
    assert fg.returncode == 0, out
    tail = out[out.index("running in the foreground"):].splitlines()[1:]
    assert tail == ["node-1: init was killed (SIGKILL)",
                    "node-0: init was killed (SIGKILL); the control plane ran there: stopping the cluster",
                    f'Deleted kubectl context "kubemu" from {kubeconfig.user_path()}',
                    "cluster stopped"], out


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to drop privileges")
def test_network_cni_without_the_privileges_is_one_line_and_starts_nothing(state_dir):
    done = subprocess.run(["setpriv", "--inh-caps=-net_admin,-sys_admin", "--bounding-set=-net_admin,-sys_admin",
                           sys.executable, "-m", "kubemu.cli", "up", "--network", "cni", "--detach"],
                          env=dict(os.environ, KUBEMU_STATE_DIR=str(state_dir)), capture_output=True, text=True,
                          timeout=DEADLINE, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert done.stderr == "error: --network cni: CAP_NET_ADMIN and CAP_SYS_ADMIN are needed for pod networks\n"
    assert not list(state_dir.glob("nodes/*/owner.json")) and not (state_dir / "network.json").exists()


@pytest.mark.parametrize("args, said", [
    (["--pod-network-cidr", "10.244.0.1/16"], "Invalid value for '--pod-network-cidr': not an IPv4 CIDR "
                                              "(10.244.0.1/16 has host bits set)"),
    (["--service-cidr", "banana"], "Invalid value for '--service-cidr': not an IPv4 CIDR"),
    (["--network", "bridge"], "Invalid value for '--network': 'bridge' is not one of 'cni', 'host'."),
    (["--apiserver-advertise-address", "127.0.0.1"],
     "Invalid value for '--apiserver-advertise-address': 127.0.0.1 is not a unicast address other machines can reach"),
    (["--apiserver-advertise-address", "0.0.0.0"],
     "Invalid value for '--apiserver-advertise-address': 0.0.0.0 is not a unicast address"),
    (["--apiserver-advertise-address", "my-host"],
     "Invalid value for '--apiserver-advertise-address': 'my-host' is not an IPv4 address"),
    (["--apiserver-advertise-address", "198.19.255.253"],
     "Invalid value for '--apiserver-advertise-address': 198.19.255.253 is not an address of this machine"),
])
def test_up_s_network_flags_are_checked_first(state_dir, args, said):
    done = kubemu(state_dir, "up", *args, check=False)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert not (state_dir / "pki").exists()


@pytest.mark.parametrize("args, said", [
    (["--control-plane-nodes", "2"], "Invalid value for '--control-plane-nodes': '2' is not one of '1', '3', '5'."),
    (["--control-plane-nodes", "3", "--nodes", "2"], "Invalid value for --nodes: 2 is fewer than "
                                                     "--control-plane-nodes 3"),
    (["--control-plane-nodes", "3", "--store-replicas", "5"],
     "Invalid value for --store-replicas: applies to one control-plane node: with --control-plane-nodes 3 the "
     "store has one replica on each"),
])
def test_up_s_control_plane_flags_are_checked_first(state_dir, args, said):
    done = kubemu(state_dir, "up", *args, check=False)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert not (state_dir / "pki").exists()
