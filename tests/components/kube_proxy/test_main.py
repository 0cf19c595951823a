"""`python -m components.kube_proxy`: the mode decision (pure), and the nftables mode as a real
process beside a real apiserver, programming a throw-away `unshare --net` namespace."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from components.kube_proxy import nftshell
from components.kube_proxy.__main__ import NFTABLES, USERSPACE, build_parser, for_this_node, proxy_mode
from kubemu import netplan
from kubemu.api.times import format_micro_time
from tests.components.apiserver import REPO, APIServerEnv, running
from tests.components.kube_proxy.test_nftshell import NFT, Netns
from tests.conftest import DEADLINE, terminate, wait_for


def test_proxy_mode():
    assert proxy_mode(NFTABLES, 0, True, None) == (NFTABLES, None)
    assert proxy_mode(USERSPACE, 0, True, None) == (USERSPACE, None)
    mode, reason = proxy_mode(NFTABLES, 1000, True, None)
    assert mode == USERSPACE and reason.startswith("not root")
    assert proxy_mode(NFTABLES, 0, False, None) == (USERSPACE, "nft not found (Debian's nftables package)")
    assert proxy_mode(NFTABLES, 0, True, "no --fabric-netns: pods share the host's network") == \
        (USERSPACE, "no --fabric-netns: pods share the host's network")


def test_parses_the_flags_kubemu_up_writes():
    common = ["--api", "ipc:///x/api.sock", "--hostname-override", "node-0"]
    rec = netplan.cni_record("0123abcd", "10.244.0.0/16", "10.96.0.0/12", 24, "/run/netns")
    args = build_parser().parse_args(common + netplan.kube_proxy_flags(rec, "node-0"))
    assert (args.proxy_mode, args.cluster_cidr, args.fabric_netns) == (NFTABLES, "10.244.0.0/16",
                                                                        "/run/netns/kubemu-0123abcd")
    assert (args.host_side_node, args.host_interface, args.host_address) == ("node-0", "host0", "10.244.255.253")
    host = netplan.host_record("no", None, "0123abcd")
    args = build_parser().parse_args(common + netplan.kube_proxy_flags(host, "node-0"))
    assert (args.proxy_mode, args.nodeport_addresses) == (USERSPACE, ["127.0.0.1/32"])
    # kube-proxy's flag: comma-separated, and repeatable
    args = build_parser().parse_args(common + ["--nodeport-addresses", "127.0.0.1/32,127.0.0.2",
                                               "--nodeport-addresses", "127.0.0.3/32"])
    assert args.nodeport_addresses == ["127.0.0.1/32", "127.0.0.2/32", "127.0.0.3/32"]


@pytest.mark.parametrize("mode", ["cni", "host"])
def test_the_host_side_flags_apply_on_the_host_side_node_only(mode):
    """One DaemonSet template for every node: node-0's proxy keeps the host side's flags (the
    host link, or the NodePorts on 127.0.0.1), the others drop them; without --host-side-node
    every proxy keeps what it is given."""
    rec = (netplan.cni_record("0123abcd", "10.244.0.0/16", "10.96.0.0/12", 24, "/run/netns") if mode == "cni"
           else netplan.host_record("no", None, "0123abcd"))

    def effective(node: str, flags: list[str]) -> tuple:
        args = for_this_node(build_parser().parse_args(["--api", "ipc:///x/api.sock", "--hostname-override",
                                                        node, *flags]))
        return args.host_interface, args.host_address, args.nodeport_addresses, args.proxy_mode

    flags = netplan.kube_proxy_flags(rec, "node-0")
    on_host_side = (("host0", "10.244.255.253", []) if mode == "cni" else (None, None, ["127.0.0.1/32"]))
    proxy_mode = NFTABLES if mode == "cni" else USERSPACE
    assert effective("node-0", flags) == (*on_host_side, proxy_mode)
    assert effective("node-1", flags) == (None, None, [], proxy_mode)
    without = [f for f in flags if f not in ("--host-side-node", "node-0")]
    assert effective("node-1", without) == (*on_host_side, proxy_mode)


NEEDS_NFT = pytest.mark.skipif(os.geteuid() != 0 or NFT is None, reason="needs root and nft (throw-away netns)")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    path = tmp_path_factory.mktemp("kp")
    yield from running(APIServerEnv(path), path)


class ProxyProc:
    def __init__(self, env: APIServerEnv, fabric: Netns | None, *args: str):
        self.env, self.fabric, self.args = env, fabric, list(args)
        self.metrics = env.dir / "kp-metrics.json"
        self.log_path = env.dir / "kube-proxy.log"
        self.proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        fabric = ["--fabric-netns", self.fabric.path] if self.fabric else []
        return [sys.executable, "-m", "components.kube_proxy", "--api", self.env.endpoint,
                "--hostname-override", "n1", "--cluster-cidr", "10.244.0.0/16", *fabric,
                "--min-sync-period", "0.1", "--metrics-file", str(self.metrics), *self.args]

    def start(self) -> None:
        notify_path = self.env.dir / f"kp-notify-{time.monotonic_ns()}.sock"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify, open(self.log_path, "ab") as log:
            notify.bind(str(notify_path))
            notify.settimeout(0.2)
            env = dict(os.environ, KUBEMU_STATE_DIR=str(self.env.dir), PYTHONPATH=str(REPO),
                       NOTIFY_SOCKET=str(notify_path))
            self.proc = subprocess.Popen(self.argv(), env=env, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)

            def ready() -> bool:
                assert self.proc.poll() is None, f"kube-proxy exited:\n{self.log_text()}"
                try:
                    return b"READY=1" in notify.recv(256)
                except socket.timeout:
                    return False
            wait_for(ready, message="kube-proxy to report READY=1")

    def stop(self) -> int | None:
        return terminate(self.proc) if self.proc else None

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(DEADLINE)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def _node(env: APIServerEnv) -> None:
    env.call("create", resource="nodes", object={
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"podCIDR": "10.244.1.0/24"}})


def _service(env: APIServerEnv, name: str, cluster_ip: str) -> None:
    env.call("create", resource="services", namespace="default", object={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
        "spec": {"clusterIP": cluster_ip, "ports": [{"name": "http", "port": 80, "targetPort": 8000}]}})


def _slice(name: str, ips: list[str], trigger: float) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-1", "labels": {"kubernetes.io/service-name": name},
                         "annotations": {"endpoints.kubernetes.io/last-change-trigger-time": format_micro_time(trigger)}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "nodeName": "n1"} for ip in ips],
            "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}]}


def _table(fabric: Netns) -> str:
    try:
        return fabric.sh(NFT, "list", "table", "ip", "kube-proxy-1")
    except subprocess.CalledProcessError:
        return ""


@NEEDS_NFT
def test_programs_the_fabric_converges_after_kill_and_cleans_up(env):
    fabric = Netns()
    proxy = ProxyProc(env, fabric)
    try:
        _node(env)
        _service(env, "web", "10.96.0.50")
        env.call("create", resource="endpointslices", namespace="default",
                 object=_slice("web", ["10.244.1.2"], time.time() - 1))
        proxy.start()
        assert "10.96.0.50 . tcp . 80 : goto service-SUSTUHLJ-default/web/tcp/http" in _table(fabric)

        # an endpoint change: a partial sync, and its latency measured from the trigger time
        stamp = time.time()
        s = env.call("get", resource="endpointslices", namespace="default", name="web-1")
        s.update({k: v for k, v in _slice("web", ["10.244.1.2", "10.244.1.3"], stamp).items() if k != "metadata"})
        s["metadata"]["annotations"] = _slice("web", [], stamp)["metadata"]["annotations"]
        env.call("update", resource="endpointslices", namespace="default", object=s)
        wait_for(lambda: "dnat to 10.244.1.3:8000" in _table(fabric), message="the new endpoint's chain")
        metrics = wait_for(lambda: proxy.metrics.exists() and json.loads(proxy.metrics.read_text())["latencies"]
                           and json.loads(proxy.metrics.read_text()), message="a latency in the metrics file")
        assert 0 <= metrics["latencies"][-1] < DEADLINE
        assert "network programming latency: seconds=" in proxy.log_text()

        # kill -9: the rules stay; the Service goes meanwhile; the restarted proxy converges
        proxy.kill()
        assert "10.96.0.50" in _table(fabric)
        env.call("delete", resource="services", namespace="default", name="web")
        env.call("delete", resource="endpointslices", namespace="default", name="web-1")
        _service(env, "db", "10.96.0.60")
        proxy.start()
        table = _table(fabric)
        assert "10.96.0.50" not in table and "10.96.0.60 . tcp . 80 : goto reject-chain" in table
        wait_for(lambda: "default/web/" not in _table(fabric), message="the stale chains deleted")

        assert proxy.stop() == 0
        assert "Traceback" not in proxy.log_text()
        cleanup = subprocess.run(proxy.argv() + ["--cleanup"], cwd=str(REPO), capture_output=True, text=True,
                                 timeout=DEADLINE, env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
        assert fabric.sh(NFT, "list", "tables") == ""
    finally:
        proxy.stop()
        fabric.close()
        for resource, name in (("services", "db"), ("services", "web"), ("endpointslices", "web-1"), ("nodes", "n1")):
            try:
                env.call("delete", resource=resource, namespace=None if resource == "nodes" else "default", name=name)
            except Exception:
                pass


@NEEDS_NFT
def test_bad_fabric_falls_back_to_userspace_said_once(env, tmp_path):
    _node(env)
    proxy = ProxyProc(env, None, "--fabric-netns", str(tmp_path / "no-such-netns"))
    try:
        proxy.start()
        log = proxy.log_text()
        assert log.count("proxy mode userspace instead of nftables: the fabric network namespace") == 1
        assert proxy.stop() == 0
        assert "Traceback" not in proxy.log_text()
    finally:
        proxy.stop()
        env.call("delete", resource="nodes", name="n1")


def test_nft_found():
    assert nftshell.find_nft() is None or os.access(nftshell.find_nft(), os.X_OK)


def _free_node_port() -> int:
    for port in range(30000 + os.getpid() % 2000, 32768):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port in 30000-32767 on 127.0.0.1")


def test_userspace_a_node_port_held_elsewhere_is_said_once_and_tried_again(env):
    """Another cluster's proxy holds 127.0.0.1:<nodePort> (a NodePort listener is not shared):
    this proxy says so once, tries again every few seconds, and serves it once freed."""
    node_port = _free_node_port()
    other = socket.socket()            # no SO_REUSEPORT, as the other cluster's NodePort listener
    other.bind(("127.0.0.1", node_port))
    other.listen()
    proxy = ProxyProc(env, None, "--proxy-mode", "userspace", "--nodeport-addresses", "127.0.0.1/32",
                      "--log-level", "DEBUG")
    said = f"default/web: cannot listen on 127.0.0.1:{node_port}/TCP: Address already in use"
    try:
        env.call("create", resource="services", namespace="default", object={
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
            "spec": {"type": "NodePort", "ports": [{"port": 80, "targetPort": 8000, "nodePort": node_port}]}})
        proxy.start()
        wait_for(lambda: proxy.log_text().count("partial sync in") >= 2, message="the listen tried again")
        other.close()

        def served() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", node_port)) == 0
        wait_for(served, message="the freed NodePort served")
        assert proxy.log_text().count(said) == 1
        assert proxy.stop() == 0
        assert "Traceback" not in proxy.log_text()
    finally:
        other.close()
        proxy.stop()
        env.call("delete", resource="services", namespace="default", name="web")


def test_the_apiservers_are_tried_in_this_node_s_order():
    def api(node: str, given: str = "ipc:///a,ipc:///b,ipc:///c") -> str:
        return for_this_node(build_parser().parse_args(["--api", given, "--hostname-override", node])).api

    assert api("node-0") == "ipc:///a,ipc:///b,ipc:///c"
    assert api("node-2") == "ipc:///c,ipc:///a,ipc:///b"
    assert api("node-4") == "ipc:///b,ipc:///c,ipc:///a"     # a worker: rotated
    assert api("node-1", "ipc:///a, ipc:///b,") == "ipc:///b,ipc:///a"
