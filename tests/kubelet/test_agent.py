"""The kubelet with real processes, started by init as kubelet.service the way `kubemu up` does:
static pods appear, crash, back off, change, go away; the kubelet dies and its pods do not."""
from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from kubelet import etcfiles
from kubelet.sandboxes import IFNAME
from kubemu import cgroups, cluster, netplan, network, ownership, wire
from kubemu.kubectl.printers import pod_row
from kubemu.statedir import StateDir
from tests.conftest import DEADLINE, alive, remove_cluster_cgroups, spawn_marked, terminate, wait_for

PY = sys.executable


class KubeletNode:
    def __init__(self, state_dir: Path, extra_args: str = ""):
        self.state = StateDir(state_dir)
        self.dir = cluster.write_node(self.state, "node-0", restart_sec=0.5, watchdog_sec=30,
                                      kubelet_args="--backoff-initial 0.5 --backoff-max 2 --file-check-frequency 2"
                                                   + (f" {extra_args}" if extra_args else ""))
        self.manifests = self.dir / "manifests"
        self.init = spawn_marked([PY, "-m", "init", "--node-dir", str(self.dir)], state_dir)

    def kubelet(self) -> dict:
        with wire.SyncClient(self.state.init_endpoint("node-0"), timeout=30) as client:
            return client.call("status", {"unit": "kubelet"}, idempotent=True)["units"][0]

    def manifest(self, name: str, containers: list[dict], **spec) -> Path:
        path = self.manifests / f"{name}.yaml"
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"containers": containers, **spec}}
        # written whole under a dotfile name (the kubelet skips those, as the real one does), then
        # renamed; a visible "web.tmp" would be a manifest of its own for a moment
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(pod))  # JSON is YAML
        os.rename(tmp, path)
        return path

    def pod(self, name: str) -> dict | None:
        for status in (self.dir / "pods").glob(f"default_{name}-node-0_*/status.json"):
            try:
                return json.loads(status.read_text())
            except (OSError, ValueError):
                return None
        return None

    def container(self, pod: str, container: str | None = None) -> dict | None:
        p = self.pod(pod)
        if not p:
            return None
        statuses = p["status"].get("containerStatuses", [])
        return next((c for c in statuses if container in (None, c["name"])), None)

    def pid(self, pod: str) -> int | None:
        c = self.container(pod)
        cid = (c or {}).get("containerID", "")
        return int(cid.removeprefix("process://")) if "running" in (c or {}).get("state", {}) and cid else None

    def shim_pid(self, pod: str, container: str = "main") -> int | None:
        """The shim of the container's current start, from the start's state file."""
        n = (self.container(pod, container) or {}).get("restartCount", 0)
        for state in (self.dir / "pods").glob(f"default_{pod}-node-0_*/{container}/{n}.state.json"):
            return json.loads(state.read_text())["shim_pid"]
        return None

    def kubelet_log(self) -> str:
        path = self.dir / "logs" / "kubelet.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        terminate(self.init)


@pytest.fixture
def node(state_dir):
    n = KubeletNode(state_dir)
    wait_for(lambda: n.state.init_pid("node-0") and _answers(n), message="init")
    wait_for(lambda: n.kubelet()["active_state"] == "active", message="the kubelet to be ready")
    yield n
    n.stop()


def _answers(n: KubeletNode) -> bool:
    try:
        n.kubelet()
        return True
    except wire.WireError:
        return False


def sleeper(name="main", extra: str = "") -> dict:
    return {"name": name, "command": [PY, "-c", f"import time\n{extra}\ntime.sleep(3600)"]}


def test_a_removed_pod_is_gone_when_its_last_shim_exits_not_at_the_next_relist(state_dir):
    """A stopped pod's directory goes when its last shim lets go of it: the shim's exit is the
    event, not the next relist (here 10 minutes away) or some other pod's."""
    n = KubeletNode(state_dir, extra_args="--file-check-frequency 600")
    try:
        wait_for(lambda: n.state.init_pid("node-0") and _answers(n), message="init")
        wait_for(lambda: n.kubelet()["active_state"] == "active", message="the kubelet to be ready")
        path = n.manifest("brief", [sleeper()])
        wait_for(lambda: n.pid("brief"), message="the pod's process")
        os.unlink(path)
        wait_for(lambda: not list((n.dir / "pods").glob("default_brief-node-0_*")),
                 message="the pod directory to be removed")
    finally:
        n.stop()


def test_static_pod_runs_restarts_and_survives_the_kubelet(node):
    node.manifest("web", [sleeper()])
    first = wait_for(lambda: node.pid("web"), message="the static pod's process")
    assert alive(first)
    pod = node.pod("web")
    assert pod["metadata"]["annotations"]["kubernetes.io/config.source"] == "file"
    assert pod["spec"]["nodeName"] == "node-0" and pod["status"]["phase"] == "Running"

    os.kill(first, signal.SIGKILL)
    second = wait_for(lambda: (p := node.pid("web")) and p != first and p, message="the restart")
    c = node.container("web")
    assert c["restartCount"] == 1
    assert c["lastState"]["terminated"]["signal"] == 9

    kubelet = node.kubelet()["main_pid"]
    os.kill(kubelet, signal.SIGKILL)
    wait_for(lambda: (k := node.kubelet())["main_pid"] not in (None, kubelet) and k["active_state"] == "active",
             message="init to restart the kubelet")
    # The restarted kubelet adopted the container: same PID, restart count carried on.
    wait_for(lambda: "1 adopted" in node.kubelet_log(), message="adoption")
    assert alive(second) and node.pid("web") == second
    assert node.container("web")["restartCount"] == 1


def test_crash_loop_backs_off_with_growing_delays(node):
    node.manifest("crashy", [{"name": "main", "command": [PY, "-c", "raise SystemExit(1)"]}])
    messages = set()

    def capped():
        c = node.container("crashy")
        waiting = (c or {}).get("state", {}).get("waiting", {})
        if waiting.get("reason") == "CrashLoopBackOff":
            messages.add(waiting["message"].split(" restarting")[0])
        return "back-off 2s" in messages
    wait_for(capped, interval=0.01, message="the back-off to reach its 2 s cap")
    assert {"back-off 500ms", "back-off 1s"} <= messages  # it grew 0.5 s -> 1 s -> 2 s
    assert node.container("crashy")["restartCount"] >= 3


def test_edit_and_delete_manifest(node):
    path = node.manifest("svc", [sleeper(extra="# v1")])
    old = wait_for(lambda: node.pid("svc"), message="v1")
    old_uid = node.pod("svc")["metadata"]["uid"]
    path.write_text(path.read_text())  # identical content: nothing happens
    node.manifest("svc", [sleeper(extra="# v2")])
    new = wait_for(lambda: (p := node.pid("svc")) and p != old and p, message="v2")
    pod = node.pod("svc")
    assert pod["metadata"]["uid"] != old_uid and "# v2" in pod["spec"]["containers"][0]["command"][2]
    assert not alive(old)  # stopped gracefully before its successor started
    path.unlink()
    wait_for(lambda: not alive(new) and node.pod("svc") is None, message="the pod to be stopped and removed")


def test_invalid_manifest_is_skipped_and_others_run(node):
    (node.manifests / "broken.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\n"
                                                "spec:\n  containers:\n  - name: x\n")
    (node.manifests / "garbage.yaml").write_text("{{{ not yaml")
    node.manifest("fine", [sleeper()])
    wait_for(lambda: node.pid("fine"), message="the valid pod")
    log = wait_for(lambda: (l := node.kubelet_log()) and "garbage.yaml" in l and "broken.yaml" in l and l,
                   message="the errors to be logged")
    assert "spec.containers[0].image: Required value" in log
    events = [json.loads(line) for line in (node.dir / "events.jsonl").read_text().splitlines()]
    assert {e["reason"] for e in events} >= {"FailedToLoadManifest"}
    assert node.pod("broken") is None


def test_sigterm_ignoring_container_is_killed_after_its_grace(node, tmp_path):
    armed = tmp_path / "armed"
    path = node.manifest("stubborn", [sleeper(extra=f"import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                                    f"open({str(armed)!r}, 'w').close()")],
                         terminationGracePeriodSeconds=1)
    pid = wait_for(lambda: node.pid("stubborn"), message="the pod")
    wait_for(armed.exists, message="the SIGTERM handler")
    started = time.monotonic()
    path.unlink()
    wait_for(lambda: not alive(pid), message="the kill")
    assert time.monotonic() - started >= 1.0  # it outlived SIGTERM until the grace period ended


def test_liveness_probe_failure_restarts_the_container(node, tmp_path):
    healthy = tmp_path / "healthy"
    healthy.touch()
    probe = {"exec": {"command": ["test", "-f", str(healthy)]}, "periodSeconds": 1, "failureThreshold": 1}
    node.manifest("probed", [dict(sleeper(), livenessProbe=probe)])
    first = wait_for(lambda: node.pid("probed"), message="the pod")
    healthy.unlink()
    wait_for(lambda: (node.container("probed") or {}).get("restartCount") == 1, message="the liveness restart")
    healthy.touch()
    second = wait_for(lambda: (p := node.pid("probed")) and p != first and p, message="the new process")
    assert alive(second) and not alive(first)
    events = (node.dir / "events.jsonl").read_text()
    assert "Unhealthy" in events and "failed liveness probe" in events


def test_missing_program_waits_with_a_clear_reason(node):
    node.manifest("typo", [{"name": "main", "command": ["/no/such/program", "--flag"]}])
    node.manifest("fine", [sleeper()])

    def waiting():
        c = node.container("typo")
        return ((c or {}).get("state") or {}).get("waiting")
    # The first failure shows CreateContainerError; retries then back off (CrashLoopBackOff),
    # with containerd's message kept in lastState.
    first = wait_for(lambda: (w := waiting()) and w.get("reason") in ("CreateContainerError", "CrashLoopBackOff") and w,
                     message="the typo pod to wait")
    c = node.container("typo")
    message = first.get("message", "") + json.dumps(c.get("lastState", {}))
    assert "/no/such/program" in message
    wait_for(lambda: node.pid("fine"), message="the other pod")  # nothing else is disturbed
    assert node.kubelet()["active_state"] == "active"


def test_many_pods_ending_together_do_not_trip_the_kubelet(node):
    """Removing one terminated pod re-syncs, which may remove the others first: the kubelet
    must take that in its stride (it once died on a KeyError and was restarted by init)."""
    paths = [node.manifest(f"batch{i}", [sleeper()], terminationGracePeriodSeconds=0) for i in range(6)]
    pids = [wait_for(lambda i=i: node.pid(f"batch{i}"), message=f"batch{i}") for i in range(6)]
    kubelet_pid = node.kubelet()["main_pid"]
    for path in paths:
        path.unlink()
    wait_for(lambda: all(not alive(p) for p in pids) and all(node.pod(f"batch{i}") is None for i in range(6)),
             message="every pod stopped and removed")
    assert node.kubelet()["main_pid"] == kubelet_pid
    assert "kubelet task failed" not in node.kubelet_log()


def test_a_killed_shim_is_noticed_and_its_container_restarted(node):
    node.manifest("web", [sleeper()])
    first = wait_for(lambda: node.pid("web"), message="the pod")
    os.kill(node.shim_pid("web"), signal.SIGKILL)
    wait_for(lambda: not alive(first), message="the container to die with its shim")
    # Heard at once through the pidfd: the status says how it ended, and a new start runs.
    second = wait_for(lambda: (p := node.pid("web")) and p != first and p, message="the restart")
    c = node.container("web")
    assert c["restartCount"] == 1 and alive(second)
    term = c["lastState"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (137, "Error") and "shim" in term["message"]


def test_a_container_that_outlives_its_killed_shim_is_stopped(node, tmp_path):
    armed = tmp_path / "armed"
    # It clears the death signal its shim set (prctl PR_SET_PDEATHSIG, 0): only the kubelet can stop it now.
    clear = f"import ctypes\nctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\nopen({str(armed)!r}, 'w').close()"
    node.manifest("stray", [sleeper(extra=clear)], restartPolicy="Never")
    pid = wait_for(lambda: node.pid("stray"), message="the pod")
    wait_for(armed.exists, message="the death signal to be cleared")
    os.kill(node.shim_pid("stray"), signal.SIGKILL)
    wait_for(lambda: not alive(pid), message="the kubelet to kill the container")
    term = wait_for(lambda: (node.container("stray") or {}).get("state", {}).get("terminated"),
                    message="the pod's status to show the end")
    assert term["exitCode"] == 137 and node.pod("stray")["status"]["phase"] == "Failed"
    assert node.pid("stray") is None  # nothing reported running (what `kubemu ps` shows)


def test_status_reads_the_same_after_a_kubelet_restart(node):
    node.manifest("web", [sleeper()])
    first = wait_for(lambda: node.pid("web"), message="the pod")
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: (p := node.pid("web")) and p != first, message="the restart")
    before = node.pod("web")
    status_file = next((node.dir / "pods").glob("default_web-node-0_*/status.json"))
    written = _identity(status_file)

    kubelet = node.kubelet()["main_pid"]
    os.kill(kubelet, signal.SIGKILL)
    wait_for(lambda: (k := node.kubelet())["main_pid"] not in (None, kubelet) and k["active_state"] == "active",
             message="init to restart the kubelet")
    wait_for(lambda: _identity(status_file) != written, message="the new kubelet to write the status")
    after = node.pod("web")
    assert after["status"]["containerStatuses"] == before["status"]["containerStatuses"]
    assert after["status"]["startTime"] == before["status"]["startTime"]
    now = time.time()
    assert pod_row(after, now) == pod_row(before, now)  # RESTARTS "1 (Ns ago)" included
    assert before["status"]["containerStatuses"][0]["lastState"]["terminated"]["signal"] == 9


def test_a_shim_killed_with_the_kubelet_is_reported_by_the_next_one(node):
    node.manifest("web", [sleeper()])
    first = wait_for(lambda: node.pid("web"), message="the pod")
    kubelet = node.kubelet()["main_pid"]
    os.kill(kubelet, signal.SIGKILL)
    os.kill(node.shim_pid("web"), signal.SIGKILL)
    second = wait_for(lambda: (p := node.pid("web")) and p != first and p, message="the restart")
    c = node.container("web")
    assert c["restartCount"] == 1 and alive(second) and not alive(first)
    term = c["lastState"]["terminated"]
    assert (term["exitCode"], term["reason"]) == (137, "Error") and "shim" in term["message"]

def _identity(path: Path) -> tuple[int, int]:
    """Tells a rewritten file (written whole and renamed over: a new inode, a later mtime)."""
    st = path.stat()
    return st.st_ino, st.st_mtime_ns


# --- pod sandboxes (--network-mode cni) -----------------------------------------------------------

needs_pod_networks = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/usr/lib/cni/bridge") or not shutil.which("nsenter")
    or not shutil.which("ip"),
    reason="pod sandboxes need root, iproute2, nsenter (util-linux) and the CNI reference plugins in /usr/lib/cni")


class CniNode(KubeletNode):
    """A node in a pod network of its own: the cluster's fabric as `kubemu up` makes it
    (kubemu/network.py: a free cluster CIDR, the host reaches pods), the node's podCIDR its
    first block (--pod-cidr: no API to hand it out), or the first of `pod_prefix` bits."""

    def __init__(self, state_dir: Path, extra_args: str = "", pod_prefix: int | None = None):
        self.net = network.setup(state_dir, netplan.CNI)
        assert self.net.mode == netplan.CNI, self.net.reason
        self.pod_cidr = str(next(ipaddress.ip_network(self.net.cluster_cidr).subnets(
            new_prefix=pod_prefix or self.net.node_mask)))
        flags = netplan.kubelet_flags(self.net, str(StateDir(state_dir).node_dir("node-0")))
        super().__init__(state_dir, " ".join(flags) + f" --pod-cidr {self.pod_cidr} {extra_args}")

    def stop(self) -> None:
        super().stop()
        network.down(self.state.root)


@pytest.fixture
def cni_node(state_dir):
    forward = Path("/proc/sys/net/ipv4/ip_forward").read_text()
    n = CniNode(state_dir)
    try:
        wait_for(lambda: n.state.init_pid("node-0") and _answers(n), message="init")
        wait_for(lambda: n.kubelet()["active_state"] == "active", message="the kubelet to be ready")
        yield n
    finally:
        n.stop()
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == forward  # the plugins ran in the fabric


def get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status


def http_server(name: str) -> list[dict]:
    return [{"name": "web", "command": [PY, "-m", "http.server", "8000"],
             # both default to the pod: the pod IP (httpGet) and the pod's namespaces (exec)
             "readinessProbe": {"httpGet": {"port": 8000}, "periodSeconds": 1},
             "livenessProbe": {"exec": {"command": [PY, "-c", "import socket, sys\n"
                                                                f"sys.exit(socket.gethostname() != {name!r})"]},
                               "periodSeconds": 1}}]


def sandbox_of(node: KubeletNode, pod: str) -> dict | None:
    for path in (node.dir / "pods").glob(f"default_{pod}-node-0_*/sandbox.json"):
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None
    return None


def ready_ip(node: KubeletNode, pod: str) -> str | None:
    p = node.pod(pod)
    if not p or p["status"]["phase"] != "Running":
        return None
    ready = next(c for c in p["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    return p["status"].get("podIP") if ready else None


def events(node: KubeletNode, reason: str, pod: str) -> list[dict]:
    path = node.dir / "events.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [e for e in map(json.loads, lines)
            if e["reason"] == reason and e.get("involvedObject", {}).get("name") == f"{pod}-node-0"]


@needs_pod_networks
def test_pods_get_sandboxes_with_ips_survive_holder_death_and_kubelet_restart(cni_node):
    node = cni_node
    # Two servers on one port: on the host network the second would fail with EADDRINUSE.
    node.manifest("a", http_server("a-node-0"))
    node.manifest("b", http_server("b-node-0"))
    ip_a = wait_for(lambda: ready_ip(node, "a"), message="pod a Running and Ready (probes at its IP, in its sandbox)")
    ip_b = wait_for(lambda: ready_ip(node, "b"), message="pod b Running and Ready")
    assert ip_a != ip_b and {ip_a, ip_b} <= {str(h) for h in ipaddress.ip_network(node.pod_cidr).hosts()}
    for ip in (ip_a, ip_b):
        assert get(f"http://{ip}:8000/") == 200
    assert node.container("a", "web")["restartCount"] == 0

    # kill -9 of a's holder: SandboxChanged, a new sandbox (attempt 1), the container restarted in it
    first = sandbox_of(node, "a")
    os.kill(first["holder"]["pid"], signal.SIGKILL)
    wait_for(lambda: events(node, "SandboxChanged", "a"), message="the SandboxChanged event")
    assert events(node, "SandboxChanged", "a")[0]["message"] == "Pod sandbox changed, it will be killed and re-created."
    wait_for(lambda: (s := sandbox_of(node, "a")) and s["attempt"] == 1 and s.get("result"), message="a new sandbox")
    new_ip = wait_for(lambda: ready_ip(node, "a"), message="pod a Running again")
    assert node.container("a", "web")["restartCount"] == 1
    assert get(f"http://{new_ip}:8000/") == 200
    assert not (node.dir / "cni" / "networks" / "kubemu" / ip_a).exists() or new_ip == ip_a  # the old IP freed

    # kill -9 of the kubelet: the sandboxes are adopted (same holder, same IP, no new attempt)
    held = sandbox_of(node, "b")
    kubelet = node.kubelet()["main_pid"]
    os.kill(kubelet, signal.SIGKILL)
    wait_for(lambda: (k := node.kubelet())["main_pid"] not in (None, kubelet) and k["active_state"] == "active",
             message="init to restart the kubelet")
    wait_for(lambda: "2 adopted" in node.kubelet_log(), message="adoption")
    assert sandbox_of(node, "b") == held and alive(held["holder"]["pid"])
    assert wait_for(lambda: ready_ip(node, "b"), message="pod b still Ready") == ip_b

    # the manifest goes: containers stopped, CNI DEL (its IP freed), holder killed
    os.unlink(node.manifests / "b.yaml")
    wait_for(lambda: node.pod("b") is None, message="pod b removed")
    wait_for(lambda: not alive(held["holder"]["pid"]), message="b's holder gone")
    assert not (node.dir / "cni" / "networks" / "kubemu" / ip_b).exists()
    assert "Traceback" not in node.kubelet_log()


@needs_pod_networks
def test_an_adopted_sandbox_whose_network_was_broken_is_checked_and_replaced(cni_node):
    node = cni_node
    node.manifest("a", [sleeper()])
    wait_for(lambda: ready_ip(node, "a"), message="pod a Running in its sandbox")
    first = sandbox_of(node, "a")
    # Its interface gone while the holder lives: only CNI CHECK can tell.
    subprocess.run([shutil.which("nsenter"), f"--net=/proc/{first['holder']['pid']}/ns/net", "ip", "link", "del",
                    IFNAME], check=True)
    kubelet = node.kubelet()["main_pid"]
    os.kill(kubelet, signal.SIGKILL)
    wait_for(lambda: events(node, "SandboxChanged", "a"), message="the adopted sandbox to fail its CNI CHECK")
    wait_for(lambda: (s := sandbox_of(node, "a")) and s["attempt"] == 1 and s.get("result"), message="a new sandbox")
    wait_for(lambda: ready_ip(node, "a"), message="pod a Running again")
    assert not alive(first["holder"]["pid"])
    assert "failed to check network for sandbox" in node.kubelet_log()
    assert "Traceback" not in node.kubelet_log()


@needs_pod_networks
def test_a_failing_plugin_is_an_event_on_the_pod_and_the_node_runs_on(state_dir, tmp_path):
    n = CniNode(state_dir, f"--cni-bin-dir {tmp_path}/nothing-here")
    try:
        wait_for(lambda: n.state.init_pid("node-0") and _answers(n), message="init")
        n.manifest("a", [sleeper()])
        n.manifest("host", [sleeper()], hostNetwork=True)
        wait_for(lambda: events(n, "FailedCreatePodSandBox", "a"), message="the FailedCreatePodSandBox event")
        message = events(n, "FailedCreatePodSandBox", "a")[0]["message"]
        assert message.startswith('Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup '
                                  'network for sandbox "')
        assert message.endswith(f'failed to find plugin "bridge" in path [{tmp_path}/nothing-here]')
        assert n.pod("a")["status"]["phase"] == "Pending" and "podIP" not in n.pod("a")["status"]
        # the hostNetwork pod needs no sandbox: it runs, with the node's IP
        wait_for(lambda: n.pid("host"), message="the hostNetwork pod")
        assert n.pod("host")["status"]["podIP"] == "127.0.0.1"
    finally:
        n.stop()


@needs_pod_networks
def test_an_exhausted_ip_range_fails_only_the_pod_that_found_it_full(state_dir):
    n = CniNode(state_dir, pod_prefix=30)  # .1 the gateway, .2 the only pod address
    try:
        wait_for(lambda: n.state.init_pid("node-0") and _answers(n), message="init")
        n.manifest("first", [sleeper()])
        wait_for(lambda: n.pid("first"), message="the first pod")
        assert n.pod("first")["status"]["podIP"] == str(ipaddress.ip_network(n.pod_cidr)[2])
        n.manifest("second", [sleeper()])
        wait_for(lambda: events(n, "FailedCreatePodSandBox", "second"), message="the FailedCreatePodSandBox event")
        assert "no IP addresses available in range set" in events(n, "FailedCreatePodSandBox", "second")[0]["message"]
        assert n.pod("second")["status"]["phase"] == "Pending"
        assert n.pid("first") and n.pod("first")["status"]["phase"] == "Running"
    finally:
        n.stop()


def test_host_network_mode_runs_pods_as_before_and_says_why(state_dir):
    n = KubeletNode(state_dir,
                    extra_args="--network-mode host --network-mode-reason 'not root: CAP_NET_ADMIN is needed'")
    try:
        wait_for(lambda: n.state.init_pid("node-0") and _answers(n), message="init")
        n.manifest("a", [sleeper()])
        wait_for(lambda: n.pid("a"), message="the pod's process")
        assert n.pod("a")["status"]["podIP"] == "127.0.0.1"
        assert not list((n.dir / "pods").glob("*/sandbox.json"))
        assert "pods share the host's network: not root: CAP_NET_ADMIN is needed" in n.kubelet_log()
    finally:
        n.stop()


@pytest.mark.skipif(os.geteuid() != 0 or not any("memory" in c for _, c in cgroups.everywhere("kubemu")),
                    reason="pod cgroups need root and a memory controller hierarchy")
def test_pod_cgroups_hold_the_containers_and_the_kernel_enforces_memory(state_dir):
    n = KubeletNode(state_dir, extra_args=f"--cgroup-root {ownership.cgroup_name(state_dir, 'node-0')} "
                                          "--pod-max-pids 64")
    try:
        wait_for(lambda: n.state.init_pid("node-0") and _answers(n), message="init")
        n.manifest("a", [dict(sleeper(), resources={"limits": {"memory": "64Mi", "cpu": "500m"}})])
        pid = wait_for(lambda: n.pid("a"), message="the pod's process")
        spec = json.loads(next((n.dir / "pods").glob("default_a-node-0_*/main/0.spec.json")).read_text())
        assert spec["oom_counter"] and spec["memory_limit"] is None  # the kernel's limit, not the shim's RSS watch
        uid = n.pod("a")["metadata"]["uid"]
        leaves = [Path(p).parent for p in spec["cgroups"]]
        assert leaves and all(leaf.name == "main" and leaf.parent.name == f"pod{uid}" for leaf in leaves)
        assert f"pod{uid}/main" in Path(f"/proc/{pid}/cgroup").read_text()
        memory = next(leaf for leaf in leaves if (leaf / "memory.limit_in_bytes").exists()
                      or (leaf / "memory.max").exists())
        limit = memory / ("memory.limit_in_bytes" if (memory / "memory.limit_in_bytes").exists() else "memory.max")
        assert int(limit.read_text()) == 64 * 1024 * 1024
        pids = next(leaf.parent / "pids.max" for leaf in leaves if (leaf.parent / "pids.max").exists())
        assert pids.read_text().strip() == "64"  # --pod-max-pids: the pod's, not the container's

        os.unlink(n.manifests / "a.yaml")  # removed with the pod
        wait_for(lambda: n.pod("a") is None, message="the pod removed")
        wait_for(lambda: not any(leaf.parent.exists() for leaf in leaves), message="the pod's cgroups removed")
        assert "pod cgroup" not in n.kubelet_log()  # no warning: removed at the first try
    finally:
        n.stop()
        remove_cluster_cgroups(state_dir)  # what `kubemu down` does


@needs_pod_networks
def test_a_sandboxed_pods_volumes_and_etc_files_are_mounted_in_its_containers(cni_node, tmp_path):
    node = cni_node
    data = tmp_path / "data"
    data.mkdir()
    (data / "in").write_text("from the host")
    report = ("import json, os, socket\n"
              "json.dump({'in': open('/data/in').read(), 'hostname': open('/etc/hostname').read(),\n"
              "           'hosts': open('/etc/hosts').read(), 'scratch': os.access('/scratch', os.W_OK),\n"
              "           'env': sorted(k for k in os.environ if k.startswith('KUBEMU_MOUNT_'))},\n"
              "          open('/data/out.json', 'w'))\n")
    node.manifest("vols", [dict(sleeper(extra=report), volumeMounts=[{"name": "data", "mountPath": "/data"},
                                                                     {"name": "scratch", "mountPath": "/scratch"}])],
                  volumes=[{"name": "data", "hostPath": {"path": str(data), "type": "Directory"}},
                           {"name": "scratch", "emptyDir": {}}])
    ip = wait_for(lambda: ready_ip(node, "vols"), message="the pod to run in its sandbox")
    pod_dir = next((node.dir / "pods").glob("default_vols-node-0_*"))
    assert (pod_dir / "etc-hostname").read_text() == "vols-node-0\n"
    assert f"{ip}\tvols-node-0\n" in (pod_dir / "etc-hosts").read_text()
    spec = json.loads((pod_dir / "main" / "0.spec.json").read_text())
    assert [(m["target"], m["type"], m["read_only"], m["file"]) for m in spec["mounts"]] == [
        ("/data", "bind", False, False), ("/scratch", "bind", False, False), ("/etc/hosts", "bind", False, True),
        ("/etc/hostname", "bind", False, True), ("/etc/resolv.conf", "bind", False, True)]
    out = json.loads(wait_for(lambda: (data / "out.json").exists() and (data / "out.json").read_text(),
                              message="the container's report through its hostPath mount"))
    assert out["in"] == "from the host" and out["hostname"] == "vols-node-0\n"
    assert f"{ip}\tvols-node-0\n" in out["hosts"] and out["scratch"] and out["env"] == []
    assert not Path("/scratch").exists()  # the host's file system untouched


@needs_pod_networks
def test_an_exec_probe_runs_in_the_container_as_kubectl_exec_with_its_mounts_and_etc_files(cni_node, tmp_path):
    node = cni_node
    data = tmp_path / "data"
    data.mkdir()
    (data / "ready").write_text("yes")
    # Only the container's own mount namespace has /data and the kubelet's /etc/hostname.
    check = [PY, "-c", "import sys\n"
                       "sys.exit(open('/data/ready').read() != 'yes'\n"
                       "         or open('/etc/hostname').read() != 'probed-node-0\\n')"]
    node.manifest("probed", [dict(sleeper(), volumeMounts=[{"name": "data", "mountPath": "/data"}],
                                  readinessProbe={"exec": {"command": check}, "periodSeconds": 1})],
                  volumes=[{"name": "data", "hostPath": {"path": str(data), "type": "Directory"}}])
    wait_for(lambda: ready_ip(node, "probed"), message="the exec probe to read the container's mounts")


@needs_pod_networks
def test_a_memory_empty_dir_is_one_tmpfs_the_pods_containers_share_and_the_host_never_sees(cni_node, tmp_path):
    node = cni_node
    out = tmp_path / "out"
    out.mkdir()
    writer = "open('/shm/note', 'w').write('from the writer')\n"
    reader = ("import json, os, subprocess, time\n"
              "while not os.path.exists('/shm/note'): time.sleep(0.05)\n"
              "fs = subprocess.run(['stat', '-f', '-c', '%T %b %S', '/shm'], capture_output=True, text=True).stdout\n"
              "json.dump({'note': open('/shm/note').read(), 'fs': fs.split()}, open('/out/report.json', 'w'))\n")
    node.manifest("shm", [dict(sleeper("writer", extra=writer), volumeMounts=[{"name": "shm", "mountPath": "/shm"}]),
                          dict(sleeper("reader", extra=reader), volumeMounts=[{"name": "shm", "mountPath": "/shm"},
                                                                              {"name": "out", "mountPath": "/out"}])],
                  volumes=[{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}},
                           {"name": "out", "hostPath": {"path": str(out), "type": "Directory"}}])
    report = json.loads(wait_for(lambda: (out / "report.json").exists() and (out / "report.json").read_text(),
                                 message="the reader's report"))
    fs_type, blocks, block_size = report["fs"]
    assert report["note"] == "from the writer" and fs_type == "tmpfs"
    assert int(blocks) * int(block_size) == 16 * 1024 * 1024
    pod_dir = next((node.dir / "pods").glob("default_shm-node-0_*"))
    with open("/proc/self/mountinfo") as f:
        assert str(pod_dir) not in f.read()  # the tmpfs is the pod's, not the machine's
    assert list((pod_dir / "volumes" / "kubernetes.io~empty-dir" / "shm").iterdir()) == []


@needs_pod_networks
def test_a_host_network_pods_volumes_are_mounted_too_with_the_nodes_hosts_file(cni_node, tmp_path):
    node = cni_node
    data = tmp_path / "data"
    data.mkdir()
    (data / "in").write_text("from the host")
    report = ("import json, os, socket\n"
              "json.dump({'in': open('/data/in').read(), 'hosts': open('/etc/hosts').read(),\n"
              "           'hostname': socket.gethostname()}, open('/data/out.json', 'w'))\n")
    node.manifest("hn", [dict(sleeper(extra=report), volumeMounts=[{"name": "data", "mountPath": "/data"}])],
                  hostNetwork=True, hostAliases=[{"ip": "10.1.2.3", "hostnames": ["alias.example"]}],
                  volumes=[{"name": "data", "hostPath": {"path": str(data), "type": "Directory"}}])
    out = json.loads(wait_for(lambda: (data / "out.json").exists() and (data / "out.json").read_text(),
                              message="the container's report through its hostPath mount"))
    assert out["in"] == "from the host" and out["hostname"] == os.uname().nodename
    assert out["hosts"] == ("# Kubernetes-managed hosts file (host network).\n" + Path("/etc/hosts").read_text()
                            + "\n# Entries added by HostAliases.\n10.1.2.3\talias.example\n")
    assert "alias.example" not in Path("/etc/hosts").read_text()  # the node's own file untouched


@needs_pod_networks
def test_pods_resolv_conf_points_at_the_cluster_dns_as_their_dns_policy_says(cni_node, tmp_path):
    node = cni_node
    dns = netplan.dns_service_ip(node.net)  # the --cluster-dns `kubemu up` gives a CNI node
    data = tmp_path / "data"
    data.mkdir()

    def pod(name: str, **spec) -> None:
        copy = f"open('/data/{name}', 'w').write(open('/etc/resolv.conf').read())\n"
        node.manifest(name, [dict(sleeper(extra=copy), volumeMounts=[{"name": "data", "mountPath": "/data"}])],
                      volumes=[{"name": "data", "hostPath": {"path": str(data), "type": "Directory"}}], **spec)
    pod("sandboxed")
    pod("hostnet", hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    pod("hostdefault", hostNetwork=True)
    seen = {name: wait_for(lambda: (data / name).exists() and (data / name).read_text(),
                           message=f"{name}'s resolv.conf")
            for name in ("sandboxed", "hostnet", "hostdefault")}
    node_conf = etcfiles.parse_resolv_conf(Path("/etc/resolv.conf").read_text())
    cluster = ("search " + " ".join(dict.fromkeys(["default.svc.cluster.local", "svc.cluster.local", "cluster.local",
                                                   *node_conf.searches]))
               + f"\nnameserver {dns}\noptions ndots:5\n")
    assert seen["sandboxed"] == seen["hostnet"] == cluster
    assert etcfiles.parse_resolv_conf(seen["hostdefault"]) == node_conf  # a hostNetwork pod's ClusterFirst
    assert not events(node, "MissingClusterDNS", "sandboxed")


def _start_failure(k, tmp_path) -> dict:
    """A sandboxed pod's first container started by an in-process kubelet `k`: its
    lastState.terminated (the start failed), or None if it started."""
    from kubelet.podworker import StartContainer

    pod_dir, worker = _pod_worker(k, tmp_path, sandboxed=True, sandbox=(0, ["10.244.0.5"]))
    actions = worker.sync(k.now())
    assert [a.container for a in actions if isinstance(a, StartContainer)] == ["app"]
    k._execute(str(pod_dir), actions)
    assert not (pod_dir / "app").exists()  # no shim was started
    return worker.status(k.now())["containerStatuses"][0]["lastState"]["terminated"]


def _cni_kubelet(tmp_path):
    from kubelet.agent import NetworkOptions

    k = _in_process_kubelet(tmp_path, network=NetworkOptions(str(tmp_path / "cni"), (), None, "10.244.0.0/16"))
    k.loop = asyncio.new_event_loop()
    return k


def test_a_sandboxed_pods_container_is_refused_rather_than_started_without_its_sandbox(tmp_path):
    """A worker whose sandbox is ready but the kubelet has no running sandbox of that attempt
    (an adopted stand-in) gets a start failure, never a start on the host's network."""
    k = _cni_kubelet(tmp_path)
    try:
        assert _start_failure(k, tmp_path)["message"] == 'pod sandbox "u-1-0" is not ready'
    finally:
        k.loop.close()


def test_the_network_config_routes_the_service_cidr_to_the_bridge(tmp_path):
    from kubelet.agent import NetworkOptions
    from kubelet.cnishell import CONF_FILE

    k = _in_process_kubelet(tmp_path, network=NetworkOptions(str(tmp_path / "cni"), (), None, "10.244.0.0/16",
                                                             service_cidr="10.96.0.0/12"))
    k.loop = asyncio.new_event_loop()
    try:
        k._configure_network("10.244.3.0/24")
        conflist = json.loads((tmp_path / "cni" / CONF_FILE).read_text())
        assert conflist["plugins"][0]["ipam"]["routes"] == [{"dst": "10.244.0.0/16", "gw": "10.244.3.1"},
                                                            {"dst": "10.96.0.0/12", "gw": "10.244.3.1"}]
    finally:
        k.loop.close()


def test_without_a_cluster_dns_a_pod_gets_the_nodes_resolv_conf_and_one_missing_cluster_dns_event(
        tmp_path, monkeypatch):
    from kubelet import agent

    node_resolv = tmp_path / "node-resolv.conf"
    node_resolv.write_text("nameserver 192.0.2.53\nsearch lan\n")
    monkeypatch.setattr(agent, "NODE_RESOLV_CONF", str(node_resolv))
    k = _cni_kubelet(tmp_path)
    try:
        pod_dir, worker = _pod_worker(k, tmp_path, sandboxed=True, sandbox=(0, ["10.244.0.5"]))
        for _start in range(2):  # two container starts: one Event
            k._mounts(str(pod_dir), worker, worker.pod["spec"]["containers"][0], {})
        assert (pod_dir / etcfiles.RESOLV_CONF).read_text() == "search lan\nnameserver 192.0.2.53\n"
        said = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
        assert [(e["type"], e["reason"]) for e in said] == [("Warning", "MissingClusterDNS")]
    finally:
        k.loop.close()


def test_an_unreadable_node_resolv_conf_is_said_as_such(tmp_path, monkeypatch):
    from kubelet import agent
    from kubelet.sandboxes import Record

    monkeypatch.setattr(agent, "NODE_RESOLV_CONF", str(tmp_path))  # a directory: open() fails
    k = _cni_kubelet(tmp_path)
    try:
        k.sandbox_records[str(tmp_path / "pods" / "default_web_u-1")] = Record(0, "u-1-0", 1, 1, 1, {}, ("10.244.0.5",))
        message = _start_failure(k, tmp_path)["message"]
        assert message == f"cannot read the node's {tmp_path}: Is a directory"
    finally:
        k.loop.close()


def _in_process_kubelet(tmp_path, **options):
    from kubelet.agent import Kubelet, Options

    return Kubelet(Options(node="node-0", node_dir=str(tmp_path), manifests_dir=str(tmp_path / "manifests"),
                           **options))


def _pod_worker(k, tmp_path, **adopt):
    """A static pod's worker, nothing of it started yet (`adopt`: PodWorker.adopt's sandbox)."""
    from kubelet.podworker import PodWorker, Settings

    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default", "uid": "u-1"},
           "spec": {"containers": [{"name": "app", "command": [PY, "-c", "pass"]}]}}
    pod_dir = tmp_path / "pods" / "default_web_u-1"
    pod_dir.mkdir(parents=True)
    worker = PodWorker.adopt(pod, Settings(), k.now(), {}, **adopt)
    k.workers[str(pod_dir)] = worker
    return pod_dir, worker


class Blocking:
    """What the kubelet hands to a thread: it returns once the loop (still running) releases it."""

    def __init__(self):
        self.release = threading.Event()
        self.waited_out = False
        self.calls = []

    def __call__(self, *args):
        self.waited_out = not self.release.wait(10.0)
        self.calls.append(args)


def test_a_pods_cgroups_are_removed_off_the_loop_and_before_the_pod(tmp_path):
    k = _in_process_kubelet(tmp_path)
    remove_pod = Blocking()
    k.cgroups = type("SlowCgroups", (), {"holds_pods": True, "remove_pod": staticmethod(remove_pod)})()

    async def main():
        k.loop = asyncio.get_running_loop()
        pod_dir, worker = _pod_worker(k, tmp_path)
        k._execute(str(pod_dir), worker.stop(k.now()))
        assert worker.is_terminated()
        k._after_event()
        await asyncio.sleep(0)
        assert str(pod_dir) in k.workers and pod_dir.exists()  # not before its cgroups are gone
        remove_pod.release.set()
        while str(pod_dir) in k.workers:
            await asyncio.sleep(0.01)
        return pod_dir

    pod_dir = asyncio.run(asyncio.wait_for(main(), DEADLINE))
    assert not remove_pod.waited_out and remove_pod.calls == [("u-1",)] and not pod_dir.exists()


def test_a_relists_volume_rewrite_is_off_the_loop_and_looks_objects_up_on_it(tmp_path, monkeypatch):
    from kubelet import agent

    k = _in_process_kubelet(tmp_path)
    set_up = Blocking()
    looked_up = []

    def slow_set_up(pod_dir, pod, lookup, *args):
        on_main_thread = threading.current_thread() is threading.main_thread()
        looked_up.append((lookup("configmaps", "default", "conf"), on_main_thread))
        set_up(pod_dir)
        return {}

    monkeypatch.setattr(agent.volumedirs, "set_up", slow_set_up)

    async def main():
        k.loop = asyncio.get_running_loop()
        pod_dir, worker = _pod_worker(k, tmp_path)
        worker._volumes_ready = True  # its volumes were set up once: a relist rewrites them
        refresh = asyncio.ensure_future(k._refresh_volumes([str(pod_dir)]))
        await asyncio.sleep(0)
        set_up.release.set()  # the loop runs while the volumes are written
        await refresh

    asyncio.run(asyncio.wait_for(main(), DEADLINE))
    assert not set_up.waited_out and looked_up == [(None, False)]


def test_the_hostname_variable_is_the_pods_hostname():
    from kubelet.agent import _base_env
    pod = {"metadata": {"name": "idx-1-x7k2p", "namespace": "default"}, "spec": {"hostname": "idx-1"}}
    assert _base_env(pod, "node-1")["HOSTNAME"] == "idx-1"     # an Indexed Job's <job>-<index>
    del pod["spec"]["hostname"]
    assert _base_env(pod, "node-1")["HOSTNAME"] == "idx-1-x7k2p"


def test_a_host_network_pods_hostname_variable_is_the_nodes_name():
    """A hostNetwork pod shares the node's hostname (leader election's identity starts with it)."""
    from kubelet.agent import _base_env
    pod = {"metadata": {"name": "kube-scheduler-node-1", "namespace": "kube-system"},
           "spec": {"hostNetwork": True, "hostname": "ignored"}}
    assert _base_env(pod, "node-1")["HOSTNAME"] == "node-1"


def test_a_mounted_claim_is_not_looked_up_again_at_each_remount():
    """The volume manager's rule: a claim resolved to its volume for a pod stays resolved for that
    pod (a remount while the apiserver is away raises no FailedMount); an unbound one is asked
    again; another pod asks for itself."""
    from types import SimpleNamespace

    from kubelet import volumes
    from kubelet.agent import Kubelet

    answers = {"data": volumes.ClaimedVolume("/v/data", "DirectoryOrCreate"),
               "pending": volumes.VolumeError("not bound")}
    asked = []

    async def claimed_volume(namespace, claim):
        asked.append((namespace, claim))
        return answers[claim]

    agent = SimpleNamespace(claimed={}, opts=SimpleNamespace(api="ipc://x"),
                            api=SimpleNamespace(claimed_volume=claimed_volume))
    pod = {"metadata": {"namespace": "ns"},
           "spec": {"volumes": [{"name": "a", "persistentVolumeClaim": {"claimName": "data"}},
                                {"name": "b", "persistentVolumeClaim": {"claimName": "pending"}}]}}
    first = asyncio.run(Kubelet._claims(agent, "pod-1", pod))
    answers["data"] = volumes.VolumeError("the apiserver is away")
    second = asyncio.run(Kubelet._claims(agent, "pod-1", pod))
    assert first["data"] == second["data"] == volumes.ClaimedVolume("/v/data", "DirectoryOrCreate")
    assert asked == [("ns", "data"), ("ns", "pending"), ("ns", "pending")]
    assert isinstance(asyncio.run(Kubelet._claims(agent, "pod-2", pod))["data"], volumes.VolumeError)
