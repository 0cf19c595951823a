"""kubelet/cnishell.py against real processes: fake plugins (any user), and the real reference
plugins (root, /usr/lib/cni) in a throw-away fabric namespace with throw-away pod namespaces.

Every namespace here is held by an `unshare --net sleep` this test starts (no /run/netns
names, nothing global): killing the holders removes the bridges, veths and addresses."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kubelet import cni, cnishell
from kubemu import netplan
from tests.conftest import DEADLINE, alive, terminate, wait_for

REFERENCE = "/usr/lib/cni"
CLUSTER = "10.244.0.0/16"
NSENTER = shutil.which("nsenter")
UNSHARE = shutil.which("unshare")
OWN_NETNS = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)  # for the fake plugins, which never enter it

real_plugins = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists(f"{REFERENCE}/bridge") or not NSENTER or not UNSHARE,
    reason="needs root, nsenter/unshare (util-linux) and the CNI reference plugins in /usr/lib/cni "
           "(Debian's containernetworking-plugins)")


# --- fake plugins: the shell's own behaviour ---------------------------------------------------

def fake_plugin(bin_dir: Path, name: str, body: str) -> Path:
    """A plugin written in Python; `body` runs with os, sys, json imported and `record` (a
    directory to leave evidence in) defined."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\nimport json, os, subprocess, sys\nrecord = {str(bin_dir)!r}\n"
                    + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def fake_cni(tmp_path: Path, plugin_type: str = "loopback", timeout: float = DEADLINE,
             fabric: str | None = None) -> cnishell.CNI:
    shell = cnishell.CNI(tmp_path / "net.d", [str(tmp_path / "none"), str(tmp_path / "bin")], fabric, timeout)
    shell.write_conflist({"cniVersion": "1.0.0", "name": "fake", "plugins": [{"type": plugin_type, "k": "v"}]})
    return shell


def test_plugin_gets_the_spec_environment_and_its_config_on_stdin(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBEMU_SECRET_OF_THE_KUBELET", "1")
    fake_plugin(tmp_path / "bin", "loopback", """
        with open(os.path.join(record, os.environ["CNI_COMMAND"]), "w") as f:
            json.dump({"env": dict(os.environ), "stdin": json.load(sys.stdin)}, f)
        if os.environ["CNI_COMMAND"] == "ADD":
            print(json.dumps({"cniVersion": "1.0.0", "ips": [{"address": "10.1.2.3/24"}]}))
    """)
    shell = fake_cni(tmp_path)
    res = shell.add("ctr-1", OWN_NETNS, "eth0", args={"K8S_POD_NAME": "web"})
    assert res.ips == ["10.1.2.3"]
    seen = json.loads((tmp_path / "bin" / "ADD").read_text())
    env = {k: v for k, v in seen["env"].items() if k != "LC_CTYPE"}  # Python's own locale coercion
    assert env == {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "ctr-1", "CNI_NETNS": f"/proc/self/fd/{OWN_NETNS}",
                   "CNI_IFNAME": "eth0", "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAME=web",
                   "CNI_PATH": f"{tmp_path / 'none'}:{tmp_path / 'bin'}", "PATH": cni.PLUGIN_PATH}
    assert seen["stdin"] == {"cniVersion": "1.0.0", "name": "fake", "type": "loopback", "k": "v"}

    shell.delete("ctr-1", None, "eth0", res.raw)
    seen = json.loads((tmp_path / "bin" / "DEL").read_text())
    assert seen["env"]["CNI_NETNS"] == "" and seen["stdin"]["prevResult"] == res.raw


def test_a_plugin_past_its_timeout_is_killed_with_what_it_started(tmp_path):
    fake_plugin(tmp_path / "bin", "loopback", """
        if os.environ["CNI_COMMAND"] == "ADD":
            child = subprocess.Popen(["sleep", "600"])
            with open(os.path.join(record, "pids"), "w") as f:
                f.write(f"{os.getpid()} {child.pid}")
            child.wait()
    """)
    with pytest.raises(cni.CNIError) as err:
        fake_cni(tmp_path, timeout=2).add("ctr-1", OWN_NETNS)
    assert str(err.value) == 'plugin type="loopback" name="fake" failed (add): netplugin did not finish in 2s and was killed'
    for pid in map(int, (tmp_path / "bin" / "pids").read_text().split()):
        wait_for(lambda: not alive(pid), message=f"plugin process {pid} to be gone")


def test_garbage_from_a_plugin_is_one_clear_error(tmp_path):
    fake_plugin(tmp_path / "bin", "loopback", """
        print("Traceback (most recent call last):")
        print("oops", file=sys.stderr)
        sys.exit(3)
    """)
    with pytest.raises(cni.CNIError) as err:
        fake_cni(tmp_path).add("ctr-1", OWN_NETNS)
    assert str(err.value) == ('plugin type="loopback" name="fake" failed (add): netplugin failed but error parsing '
                              'its diagnostic message "Traceback (most recent call last):": '
                              'Expecting value: line 1 column 1 (char 0)')


@pytest.mark.parametrize("fabric, says", [
    (None, 'refusing to run CNI plugin "bridge" in the host\'s network namespace'),
    ("/proc/self/ns/net", 'refusing to run CNI plugin "bridge" in the host\'s network namespace'),
    ("/nonexistent/fabric", "cannot use the fabric network namespace /nonexistent/fabric: No such file or directory"),
])
def test_a_bridge_plugin_never_runs_outside_a_fabric(tmp_path, fabric, says):
    fake_plugin(tmp_path / "bin", "bridge", """
        open(os.path.join(record, "ran"), "w").close()
    """)
    with pytest.raises(cni.CNIError) as err:
        fake_cni(tmp_path, "bridge", fabric=fabric).add("ctr-1", OWN_NETNS)
    assert str(err.value).startswith(f'plugin type="bridge" name="fake" failed (add): {says}')
    assert not (tmp_path / "bin" / "ran").exists()


def test_missing_plugin_is_libcnis_error(tmp_path):
    shell = cnishell.CNI(tmp_path / "net.d", [str(tmp_path / "a"), str(tmp_path / "b")], "/nonexistent/fabric")
    shell.write_conflist(cni.kubemu_conflist("10.244.0.0/24", CLUSTER, str(tmp_path / "networks"), "kmbr0"))
    with pytest.raises(cni.CNIError) as err:
        shell.add("ctr-1", OWN_NETNS)
    assert str(err.value) == (f'plugin type="bridge" name="kubemu" failed (add): '
                              f'failed to find plugin "bridge" in path [{tmp_path / "a"} {tmp_path / "b"}]')


def test_the_config_is_the_first_file_by_name(tmp_path):
    shell = cnishell.CNI(tmp_path / "net.d", [REFERENCE], None)
    with pytest.raises(cni.ConfigError, match=f"^no network config found in {tmp_path / 'net.d'}$"):
        shell.load()
    assert shell.write_conflist(cni.kubemu_conflist("10.244.0.0/24", CLUSTER, "/d", "kmbr0"))
    (tmp_path / "net.d" / "notes.txt").write_text("not a config")
    assert shell.load().name == "kubemu"
    (tmp_path / "net.d" / "05-mine.conf").write_text('{"cniVersion": "0.4.0", "name": "mine", "type": "ptp"}')
    assert shell.load().name == "mine"


def test_an_invalid_config_is_a_config_error(tmp_path):
    shell = cnishell.CNI(tmp_path / "net.d", [REFERENCE], None)
    shell.write_conflist(cni.kubemu_conflist("10.244.0.0/24", CLUSTER, "/d", "kmbr0"))
    bad = tmp_path / "net.d" / "00-broken.conflist"
    bad.write_text('{"cniVersion": "1.0.0", "name": "x", "plugins": [')
    with pytest.raises(cni.ConfigError) as err:
        shell.add("ctr-1", OWN_NETNS)
    assert str(err.value).startswith(f"{bad}: invalid CNI config: not JSON: ") and "\n" not in str(err.value)


def test_write_conflist_writes_only_a_change(tmp_path):
    shell = cnishell.CNI(tmp_path / "net.d", [REFERENCE], None)
    conf = cni.kubemu_conflist("10.244.0.0/24", CLUSTER, "/d", "kmbr0")
    assert shell.write_conflist(conf)
    path = tmp_path / "net.d" / cnishell.CONF_FILE
    before = path.stat()
    assert not shell.write_conflist(conf)
    assert path.stat().st_ino == before.st_ino and path.stat().st_mtime_ns == before.st_mtime_ns
    assert shell.write_conflist(cni.kubemu_conflist("10.244.1.0/24", CLUSTER, "/d", "kmbr1"))
    assert json.loads(path.read_text())["plugins"][0]["bridge"] == "kmbr1"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in path.parent.iterdir()] == [cnishell.CONF_FILE]


# --- the real plugins in a throw-away fabric ---------------------------------------------------

class Netns:
    """A network namespace held by `unshare --net sleep infinity`, ready once its namespace
    differs from ours (reading /proc/<pid>/ns/net before unshare(2) gives the host's)."""

    def __init__(self):
        self.proc = subprocess.Popen([UNSHARE, "--net", "--", "sleep", "infinity"],
                                     start_new_session=True, stdin=subprocess.DEVNULL)
        self.path = f"/proc/{self.proc.pid}/ns/net"
        host = os.stat("/proc/self/ns/net").st_ino
        wait_for(lambda: self._inode() not in (None, host), message="the holder's network namespace")
        self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)  # what the kubelet hands the plugins

    def _inode(self) -> int | None:
        try:
            return os.stat(self.path).st_ino
        except FileNotFoundError:
            return None

    def run(self, *argv: str, **kw) -> subprocess.CompletedProcess:
        return subprocess.run([NSENTER, f"--net={self.path}", "--", *argv], capture_output=True, text=True,
                              timeout=DEADLINE, **kw)

    def kill(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def netns():
    """netns() makes a namespace; all of them die at teardown, and the host's ip_forward is
    what it was (the bridge plugin sets it in the namespace it runs in: never ours)."""
    made: list[Netns] = []
    forward = Path("/proc/sys/net/ipv4/ip_forward").read_text()

    def make() -> Netns:
        made.append(Netns())
        return made[-1]
    yield make
    for ns in made:
        ns.kill()
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text() == forward


def node_cni(tmp_path: Path, fabric: Netns, node: int, pod_cidr: str) -> tuple[cnishell.CNI, Path]:
    """A node's CNI (its own config dir and host-local dataDir) and where its IPs are recorded."""
    shell = cnishell.CNI(tmp_path / f"node{node}" / "net.d", [REFERENCE], fabric.path, DEADLINE)
    data_dir = tmp_path / f"node{node}" / "networks"
    shell.write_conflist(cni.kubemu_conflist(pod_cidr, CLUSTER, str(data_dir), netplan.bridge_name(pod_cidr, CLUSTER)))
    return shell, data_dir / "kubemu"


def eth0_addresses(pod: Netns) -> list[str] | None:
    out = pod.run("ip", "-o", "-4", "addr", "show", "dev", "eth0")
    return [line.split()[3] for line in out.stdout.splitlines()] if out.returncode == 0 else None


@real_plugins
def test_add_check_delete_with_the_reference_plugins(tmp_path, netns):
    fabric, pod = netns(), netns()
    shell, ips = node_cni(tmp_path, fabric, 3, "10.244.3.0/24")
    res = shell.add("ctr-1", pod.fd, "eth0")
    assert len(res.ips) == 1 and res.ips[0].startswith("10.244.3.") and res.ips[0] != "10.244.3.1"
    assert eth0_addresses(pod) == [f"{res.ips[0]}/24"]
    assert (ips / res.ips[0]).read_text().split() == ["ctr-1", "eth0"]
    assert "kmbr3" in fabric.run("ip", "-br", "link").stdout
    assert fabric.run("cat", "/proc/sys/net/ipv4/ip_forward").stdout.strip() == "1"
    assert subprocess.run(["ip", "link", "show", "kmbr3"], capture_output=True).returncode != 0  # not in the host

    again = os.dup(pod.fd)  # the same namespace under another descriptor: a later CHECK's
    try:
        shell.check("ctr-1", again, "eth0", res.raw)
    finally:
        os.close(again)

    shell.delete("ctr-1", pod.fd, "eth0", res.raw)
    assert not (ips / res.ips[0]).exists()
    assert eth0_addresses(pod) is None
    shell.delete("ctr-1", pod.fd, "eth0", res.raw)  # DEL is idempotent


@real_plugins
def test_pods_on_two_nodes_reach_each_other_by_ip_without_nat(tmp_path, netns):
    fabric, pod_a, pod_b = netns(), netns(), netns()
    node0, _ = node_cni(tmp_path, fabric, 0, "10.244.0.0/24")
    node1, _ = node_cni(tmp_path, fabric, 1, "10.244.1.0/24")
    a = node0.add("pod-a", pod_a.fd)
    b = node1.add("pod-b", pod_b.fd)
    server = subprocess.Popen(
        [NSENTER, f"--net={pod_b.path}", "--", sys.executable, "-c", textwrap.dedent(f"""
            import socket
            s = socket.create_server(({b.ips[0]!r}, 8000))
            print("ready", flush=True)
            conn, peer = s.accept()
            conn.sendall(b"hello from b")
            print(peer[0], flush=True)
        """)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert server.stdout.readline() == "ready\n"
        client = pod_a.run(sys.executable, "-c", textwrap.dedent(f"""
            import socket
            print(socket.create_connection(({b.ips[0]!r}, 8000), timeout=10).recv(100).decode())
        """))
        assert client.stdout.strip() == "hello from b", client.stderr
        assert server.stdout.readline().strip() == a.ips[0]  # the client's own address: routed, not NATed
    finally:
        terminate(server)
        server.stdout.close()
    node0.delete("pod-a", pod_a.fd, "eth0", a.raw)
    node1.delete("pod-b", pod_b.fd, "eth0", b.raw)


@real_plugins
def test_dead_sandbox_is_deleted_with_an_empty_netns(tmp_path, netns):
    fabric, pod = netns(), netns()
    shell, ips = node_cni(tmp_path, fabric, 0, "10.244.0.0/24")
    res = shell.add("ctr-1", pod.fd)
    pod.kill()
    assert (ips / res.ips[0]).exists()
    shell.delete("ctr-1", None, "eth0", res.raw)
    assert not (ips / res.ips[0]).exists()


@real_plugins
def test_exhausted_range_is_the_plugins_error_and_is_cleaned_up(tmp_path, netns):
    fabric, pod_a, pod_b = netns(), netns(), netns()
    shell, ips = node_cni(tmp_path, fabric, 9, "10.244.9.0/30")  # .1 is the gateway: one pod fits
    a = shell.add("pod-a", pod_a.fd)
    assert a.ips == ["10.244.9.2"]
    with pytest.raises(cni.CNIError) as err:
        shell.add("pod-b", pod_b.fd)
    assert (err.value.plugin_type, err.value.command, err.value.code) == ("bridge", "add", 999)
    assert str(err.value).startswith('plugin type="bridge" name="kubemu" failed (add): failed to allocate for range 0: '
                                     'no IP addresses available in range set: 10.244.9.1-10.244.9.2')
    assert eth0_addresses(pod_b) is None  # the half-built veth went with the DEL after the failed ADD
    assert sorted(p.name for p in ips.iterdir() if p.name[0].isdigit()) == ["10.244.9.2"]
    shell.delete("pod-a", pod_a.fd, "eth0", a.raw)
