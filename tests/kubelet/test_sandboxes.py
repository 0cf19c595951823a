"""kubelet/sandboxes.py with real holders (root): fake CNI plugins for the shell's own behaviour,
the reference plugins in a throw-away fabric for the real thing, and the holder's pidfd watch."""
from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from kubelet import cni, cnishell, holder
from kubelet.sandbox import CreateSandbox
from kubelet.sandboxes import SANDBOX_FILE, HolderWatch, Record, SandboxFailed, Sandboxes, read_record
from tests.conftest import DEADLINE, wait_for
from tests.kubelet.test_cnishell import REFERENCE, fake_plugin, netns, node_cni, real_plugins  # noqa: F401

root = pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox holder unshares namespaces: needs root")

POD = {"metadata": {"name": "web", "namespace": "default", "uid": "u-1"}, "spec": {"containers": [{"name": "a"}]}}
ADD_OK = """
    with open(os.path.join(record, os.environ["CNI_COMMAND"]), "w") as f:
        json.dump({"env": dict(os.environ), "stdin": json.load(sys.stdin)}, f)
    if os.environ["CNI_COMMAND"] == "ADD":
        print(json.dumps({"cniVersion": "1.0.0", "ips": [{"address": "10.9.0.7/24"}]}))
"""
ADD_FAILS = """
    if os.environ["CNI_COMMAND"] == "ADD":
        print(json.dumps({"cniVersion": "1.0.0", "code": 999, "msg": "no IP addresses available"}))
        sys.exit(1)
    open(os.path.join(record, "DEL"), "w").close()
"""


def fake_sandboxes(tmp_path, body: str) -> Sandboxes:
    fake_plugin(tmp_path / "bin", "loopback", body)  # loopback: allowed without a fabric
    shell = cnishell.CNI(tmp_path / "net.d", [str(tmp_path / "bin")], None, DEADLINE)
    shell.write_conflist({"cniVersion": "1.0.0", "name": "kubemu", "plugins": [{"type": "loopback"}]})
    return Sandboxes(shell)


@pytest.fixture
def pod_dir(tmp_path):
    d = tmp_path / "pods" / "default_web_u-1"
    d.mkdir(parents=True)
    yield str(d)
    record = read_record(str(d))
    if record is not None:
        holder.kill(record.pid, record.start)


@root
def test_create_writes_sandbox_json_and_remove_deletes_and_kills(tmp_path, pod_dir):
    sandboxes = fake_sandboxes(tmp_path, ADD_OK)
    record = sandboxes.create(pod_dir, POD, CreateSandbox(2, "u-1-2", "web"))
    assert record.ips == ("10.9.0.7",) and record.attempt == 2 and sandboxes.alive(record)
    on_disk = json.loads((tmp_path / "pods" / "default_web_u-1" / SANDBOX_FILE).read_text())
    assert on_disk == {"attempt": 2, "id": "u-1-2", "holder": {"pid": record.pid, "start": record.start},
                       "netns_inode": record.netns_inode, "ifname": "eth0", "result": record.result,
                       "ips": ["10.9.0.7"]}
    assert record.netns_inode != os.stat("/proc/self/ns/net").st_ino
    add = json.loads((tmp_path / "bin" / "ADD").read_text())["env"]
    assert add["CNI_CONTAINERID"] == "u-1-2" and add["CNI_NETNS"] == f"/proc/{record.pid}/ns/net"
    assert "K8S_POD_NAME=web" in add["CNI_ARGS"] and "K8S_POD_INFRA_CONTAINER_ID=u-1-2" in add["CNI_ARGS"]
    assert read_record(pod_dir) == record

    sandboxes.remove(pod_dir, POD)
    deleted = json.loads((tmp_path / "bin" / "DEL").read_text())
    assert deleted["env"]["CNI_NETNS"] == f"/proc/{record.pid}/ns/net"
    assert deleted["stdin"]["prevResult"] == record.result
    wait_for(lambda: not sandboxes.alive(record), message="the holder killed")
    assert read_record(pod_dir) is None
    sandboxes.remove(pod_dir, POD)  # nothing left: nothing to do


@root
def test_a_dead_holders_sandbox_is_deleted_with_an_empty_netns(tmp_path, pod_dir):
    sandboxes = fake_sandboxes(tmp_path, ADD_OK)
    record = sandboxes.create(pod_dir, POD, CreateSandbox(0, "u-1-0", "web"))
    os.kill(record.pid, signal.SIGKILL)
    wait_for(lambda: not sandboxes.alive(record), message="the holder dead")
    sandboxes.remove(pod_dir, POD)
    assert json.loads((tmp_path / "bin" / "DEL").read_text())["env"]["CNI_NETNS"] == ""


@root
def test_failed_add_is_containerds_error_and_leaves_nothing(tmp_path, pod_dir, monkeypatch):
    mark = f"KUBEMU_TEST_MARK={os.getpid()}-{id(tmp_path)}"
    monkeypatch.setenv(*mark.split("="))  # the holder inherits it: how its leftovers are found
    sandboxes = fake_sandboxes(tmp_path, ADD_FAILS)
    with pytest.raises(SandboxFailed) as err:
        sandboxes.create(pod_dir, POD, CreateSandbox(0, "u-1-0", "web"))
    assert str(err.value) == ('failed to setup network for sandbox "u-1-0": plugin type="loopback" name="kubemu" '
                              'failed (add): no IP addresses available')
    assert (tmp_path / "bin" / "DEL").exists()  # the ADD was undone (CNI spec)
    assert read_record(pod_dir) is None
    wait_for(lambda: not [p for p in os.listdir("/proc") if p.isdigit() and _marked(int(p), mark)],
             message="the holder of the failed sandbox killed")


@root
def test_missing_plugin_is_libcnis_error(tmp_path, pod_dir):
    shell = cnishell.CNI(tmp_path / "net.d", [str(tmp_path / "empty")], None, DEADLINE)
    shell.write_conflist({"cniVersion": "1.0.0", "name": "kubemu", "plugins": [{"type": "loopback"}]})
    with pytest.raises(SandboxFailed, match=r'failed to find plugin "loopback" in path'):
        Sandboxes(shell).create(pod_dir, POD, CreateSandbox(0, "u-1-0", "web"))
    assert read_record(pod_dir) is None


def _marked(pid: int, mark: str) -> bool:
    """A live holder (not a zombie) whose environment carries this test's mark."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if not f.read().startswith(b"kubemu-pause"):
                return False
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark.encode() in f.read().split(b"\0")
    except OSError:
        return False


@real_plugins
def test_reference_plugins_give_the_sandbox_an_ip_and_its_death_frees_it(tmp_path, pod_dir, netns):  # noqa: F811
    fabric = netns()
    shell, leases = node_cni(tmp_path, fabric, 1, "10.244.1.0/24")
    sandboxes = Sandboxes(shell)
    record = sandboxes.create(pod_dir, POD, CreateSandbox(0, "u-1-0", "web"))
    assert len(record.ips) == 1 and record.ips[0].startswith("10.244.1.")
    assert (leases / record.ips[0]).read_text().startswith("u-1-0")
    os.kill(record.pid, signal.SIGKILL)
    wait_for(lambda: not sandboxes.alive(record), message="the holder dead")
    sandboxes.remove(pod_dir, POD)
    assert not (leases / record.ips[0]).exists()


def test_record_round_trip_and_garbage():
    record = Record(1, "u-1", 10, 20, 30, {"ips": []}, ("10.0.0.1",))
    assert Record.from_json(json.loads(json.dumps(record.as_json()))) == record
    assert Record.from_json({"attempt": 1}) is None
    assert Record.from_json({**record.as_json(), "result": "x"}) is None
    assert not Record(1, "u-1", 10, 20, 30, None, ()).complete


@root
def test_holder_watch_hears_a_death_at_once(tmp_path, pod_dir):
    sandboxes = fake_sandboxes(tmp_path, ADD_OK)
    record = sandboxes.create(pod_dir, POD, CreateSandbox(4, "u-1-4", "web"))

    async def main():
        heard = asyncio.get_running_loop().create_future()
        watch = HolderWatch(asyncio.get_running_loop(), lambda d, a: heard.set_result((d, a)))
        watch.watch(pod_dir, record)
        os.kill(record.pid, signal.SIGKILL)
        try:
            return await asyncio.wait_for(heard, DEADLINE)
        finally:
            watch.close()
    assert asyncio.run(main()) == (pod_dir, 4)

    async def gone_already():  # a holder dead before it is watched is reported too
        heard = asyncio.get_running_loop().create_future()
        watch = HolderWatch(asyncio.get_running_loop(), lambda d, a: heard.set_result(a))
        watch.watch(pod_dir, record)
        return await asyncio.wait_for(heard, DEADLINE)
    assert asyncio.run(gone_already()) == 4
