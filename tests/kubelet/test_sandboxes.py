"""kubelet/sandboxes.py with real holders (root): fake CNI plugins for the shell's own behaviour,
the reference plugins in a throw-away fabric for the real thing, and the holder's pidfd watch."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from kubelet import cni, cnishell, holder, volumedirs
from kubelet.sandbox import CreateSandbox
from kubelet.sandboxes import SANDBOX_FILE, HolderWatch, Record, SandboxFailed, Sandboxes, read_record
from kubelet.shim import write_json
from kubemu.child import proc_stat
from tests.conftest import DEADLINE, wait_for
from tests.kubelet.test_cnishell import REFERENCE, fake_plugin, netns, node_cni, real_plugins  # noqa: F401

root = pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox holder unshares namespaces: needs root")

POD = {"metadata": {"name": "web", "namespace": "default", "uid": "u-1"}, "spec": {"containers": [{"name": "a"}]}}
ADD_OK = """
    netns = os.environ["CNI_NETNS"]
    with open(os.path.join(record, os.environ["CNI_COMMAND"]), "w") as f:
        json.dump({"env": dict(os.environ), "stdin": json.load(sys.stdin),
                   "netns_inode": os.stat(netns).st_ino if netns else None}, f)
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
    seen = json.loads((tmp_path / "bin" / "ADD").read_text())
    add = seen["env"]
    assert add["CNI_CONTAINERID"] == "u-1-2" and add["CNI_NETNS"].startswith("/proc/self/fd/")
    assert seen["netns_inode"] == record.netns_inode  # the holder's, through the descriptor it inherited
    assert "K8S_POD_NAME=web" in add["CNI_ARGS"] and "K8S_POD_INFRA_CONTAINER_ID=u-1-2" in add["CNI_ARGS"]
    assert read_record(pod_dir) == record

    sandboxes.remove(pod_dir, POD)
    deleted = json.loads((tmp_path / "bin" / "DEL").read_text())
    assert deleted["netns_inode"] == record.netns_inode
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
    sandboxes.check(pod_dir, record)  # the reference plugins find it as ADD left it
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


@pytest.fixture
def host_process():
    """A process in the host's network namespace: what a dead holder's PID may have become."""
    proc = subprocess.Popen(["sleep", "infinity"], stdin=subprocess.DEVNULL)
    yield proc
    proc.kill()
    proc.wait()


@root
def test_a_reused_holder_pid_is_never_given_to_a_plugin(tmp_path, pod_dir, host_process, monkeypatch):
    sandboxes = fake_sandboxes(tmp_path, ADD_OK)
    start = proc_stat(host_process.pid)[1]
    # the holder said ready, then died, and its PID went to a process of the host's
    reused = holder.HolderInfo(host_process.pid, start - 1, 12345)
    monkeypatch.setattr(holder, "start", lambda *a, **kw: reused)
    with pytest.raises(SandboxFailed, match=r'failed to setup network for sandbox "u-1-0": process \d+ has exited'):
        sandboxes.create(pod_dir, POD, CreateSandbox(0, "u-1-0", "web"))
    assert not (tmp_path / "bin" / "ADD").exists() and not (tmp_path / "bin" / "DEL").exists()
    assert host_process.poll() is None and read_record(pod_dir) is None

    # a recorded sandbox whose holder's PID was reused is DELeted without a namespace
    write_json(os.path.join(pod_dir, SANDBOX_FILE), Record(0, "u-1-0", host_process.pid, start - 1, 12345,
                                                           {"cniVersion": "1.0.0"}, ()).as_json())
    sandboxes.remove(pod_dir, POD)
    assert json.loads((tmp_path / "bin" / "DEL").read_text())["env"]["CNI_NETNS"] == ""
    assert host_process.poll() is None


@root
def test_the_holder_is_recorded_before_anything_else_can_fail(tmp_path, pod_dir, monkeypatch):
    sandboxes = fake_sandboxes(tmp_path, ADD_OK)
    seen = []

    def mount(pod_dir_, pod, pid, start):
        seen.append(read_record(pod_dir_))
        return {}
    monkeypatch.setattr(volumedirs, "mount_memory_volumes", mount)
    record = sandboxes.create(pod_dir, POD, CreateSandbox(0, "u-1-0", "web"))
    assert seen[0] is not None and (seen[0].pid, seen[0].start, seen[0].complete) == (record.pid, record.start, False)


@root
def test_an_unexpected_exception_during_add_kills_the_holder_and_deletes(tmp_path, pod_dir, monkeypatch):
    sandboxes = fake_sandboxes(tmp_path, ADD_OK)
    started = []
    real_start = holder.start
    monkeypatch.setattr(holder, "start", lambda *a, **kw: started.append(real_start(*a, **kw)) or started[-1])

    def add_then_die(*args, **kwargs):
        cni_add(*args, **kwargs)
        raise KeyboardInterrupt
    cni_add = sandboxes.cni.add
    monkeypatch.setattr(sandboxes.cni, "add", add_then_die)
    with pytest.raises(KeyboardInterrupt):
        sandboxes.create(pod_dir, POD, CreateSandbox(0, "u-1-0", "web"))
    info = started[0]
    wait_for(lambda: not holder.alive(info.pid, info.start_ticks), message="the holder killed")
    assert json.loads((tmp_path / "bin" / "DEL").read_text())["netns_inode"] == info.netns_inode
    assert read_record(pod_dir) is None


@root
def test_check_runs_cni_check_in_the_live_holders_namespace(tmp_path, pod_dir):
    sandboxes = fake_sandboxes(tmp_path, ADD_OK)
    (Path(pod_dir) / "pod.json").write_text(json.dumps(POD))
    record = sandboxes.create(pod_dir, POD, CreateSandbox(0, "u-1-0", "web"))
    sandboxes.check(pod_dir, record)
    seen = json.loads((tmp_path / "bin" / "CHECK").read_text())
    assert seen["netns_inode"] == record.netns_inode and seen["stdin"]["prevResult"] == record.result
    assert "K8S_POD_NAME=web" in seen["env"]["CNI_ARGS"]
    os.kill(record.pid, signal.SIGKILL)
    wait_for(lambda: not sandboxes.alive(record), message="the holder dead")
    with pytest.raises(SandboxFailed, match='sandbox "u-1-0" is not running'):
        sandboxes.check(pod_dir, record)


@root
def test_a_holder_started_for_a_kubelet_that_died_before_recording_it_is_killed(tmp_path, pod_dir):
    sandboxes = fake_sandboxes(tmp_path, ADD_OK)
    orphan = holder.start(pod_dir, "web", [])  # ... and the kubelet died here, before sandbox.json
    record = sandboxes.create(pod_dir, POD, CreateSandbox(0, "u-1-0", "web"))
    wait_for(lambda: not holder.alive(orphan.pid, orphan.start_ticks), message="the orphan holder killed")
    assert sandboxes.alive(record) and not (Path(pod_dir) / holder.PENDING).exists()
    sandboxes.remove(pod_dir, POD)

    orphan = holder.start(pod_dir, "web", [])
    sandboxes.remove(pod_dir, POD)  # the pod went while the kubelet was away
    wait_for(lambda: not holder.alive(orphan.pid, orphan.start_ticks), message="the orphan holder killed")
