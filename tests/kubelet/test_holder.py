"""kubelet/holder.py with real processes (as root): a pod's sandbox holder, and containers
(real shims through a Runtime) joining its namespaces. The test process plays init."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from pathlib import Path

import psutil
import pytest

from kubelet import holder
from kubelet.holder import HolderInfo, SandboxError, pod_hostname
from kubemu.nsutil import ns_inode
from tests.conftest import alive, wait_for
from tests.kubelet.test_runtime import POD, exited, output, runtime, spec  # noqa: F401 - fixtures
from tests.kubelet.test_shim import SLEEP, make_cgroup, marker_env, node, py, subreaper  # noqa: F401 - fixtures

NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox's namespaces need root (CAP_SYS_ADMIN)")
HOSTNAME = "web-0"


# --- the pod's hostname (pure)

@pytest.mark.parametrize("pod, hostname", [
    ({"metadata": {"name": "web-0"}, "spec": {}}, "web-0"),
    ({"metadata": {"name": "web-0"}, "spec": {"hostname": "db"}}, "db"),
    ({"metadata": {"name": "web-0"}, "spec": {"hostname": "db", "subdomain": "backend"}}, "db"),
    ({"metadata": {"name": "web-0"}, "spec": {"subdomain": "backend"}}, "web-0"),
    ({"metadata": {"name": "a" * 70}, "spec": {}}, "a" * 63),
    ({"metadata": {"name": "a" * 61 + "-.b" + "c" * 10}, "spec": {}}, "a" * 61),  # no trailing - or .
])
def test_the_pods_hostname_is_its_hostname_else_its_name_cut_to_63(pod, hostname):
    assert pod_hostname(pod) == hostname


# --- holders

def start(rt, hostname: str = HOSTNAME, cgroup_procs: list[str] | None = None) -> HolderInfo:
    return holder.start(rt.pod_dir(POD), hostname, cgroup_procs or [], env=rt.env_base)


@pytest.fixture
def sandbox(runtime):  # noqa: F811 - the fixture imported above
    info = start(runtime)
    yield info
    holder.kill(info.pid, info.start_ticks)
    wait_for(lambda: not alive(info.pid), message="the holder to die")


def sandbox_of(info: HolderInfo) -> dict:
    return {"pid": info.pid, "start": info.start_ticks}


@NEEDS_ROOT
def test_a_holder_holds_new_namespaces_detached_as_a_shim_is(sandbox):
    info = sandbox
    assert info.netns_inode == ns_inode(info.pid, "net")
    for kind in ("net", "mnt", "uts", "ipc"):
        assert ns_inode(info.pid, kind) != ns_inode(os.getpid(), kind), kind
    proc = psutil.Process(info.pid)
    assert proc.ppid() == os.getpid(), "re-parented to the subreaper (init)"
    assert os.getsid(info.pid) == info.pid, "its own session: init killing the kubelet's group spares it"
    assert Path(f"/proc/{info.pid}/cgroup").read_text() == Path("/proc/self/cgroup").read_text(), \
        "in the kubelet's cgroups (the node's), as a shim is, when it is given none of its own"
    wait_for(lambda: proc.cmdline() == ["kubemu-pause", "infinity"], message="the holder to exec sleep")
    assert holder.alive(info.pid, info.start_ticks)
    assert not holder.alive(info.pid, info.start_ticks + 1), "a later process with its PID is not it"


@NEEDS_ROOT
def test_without_sleep_the_holder_pauses_in_python(runtime):  # noqa: F811
    info = holder.start(runtime.pod_dir(POD), HOSTNAME, [], env={**runtime.env_base, "PATH": "/nonexistent-kmtest"})
    try:
        proc = psutil.Process(info.pid)
        wait_for(lambda: proc.cmdline() == ["kubemu-pause", "-c", holder.PAUSE_LOOP], message="the Python pause")
        assert ns_inode(info.pid, "net") == info.netns_inode != ns_inode(os.getpid(), "net")
    finally:
        holder.kill(info.pid, info.start_ticks)
        wait_for(lambda: not alive(info.pid), message="the holder to die")


@NEEDS_ROOT
def test_kill_ends_the_holder_and_spares_a_later_process_with_its_pid(runtime):  # noqa: F811
    info = start(runtime)
    holder.kill(info.pid, info.start_ticks + 1)  # names another process: nothing happens
    assert alive(info.pid)
    holder.kill(info.pid, info.start_ticks)
    wait_for(lambda: not alive(info.pid), message="the holder to die")
    assert not holder.alive(info.pid, info.start_ticks)
    holder.kill(info.pid, info.start_ticks)  # gone: nothing to do


# What a container that changes its namespaces runs first: were it in the host's (a bug), it
# stops before leaving anything behind on the machine. argv[1] is the host's inode of that kind.
NOT_THE_HOSTS = r"""
import os, sys
if os.stat(f"/proc/self/ns/{KIND}").st_ino == int(sys.argv.pop(1)):
    sys.exit("in the host's namespace")
"""


def guarded(code: str, kind: str, *args: str) -> list[str]:
    return py(NOT_THE_HOSTS.replace("{KIND}", kind) + code, str(ns_inode(os.getpid(), kind)), *args)


# Container "server": listens on 127.0.0.1, creates a SysV message queue, says both, serves one
# greeting. Container "client": connects, opens the queue, prints what it saw and its hostname.
LIBC = "import ctypes; libc = ctypes.CDLL(None, use_errno=True)\n"
SERVER = LIBC + r"""
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
queue = libc.msgget(0x6b6d7431, 0o1600)  # IPC_CREAT | 0600
print(s.getsockname()[1], queue, flush=True)
conn, _ = s.accept(); conn.sendall(b"hello from the server"); conn.close()
time.sleep(600)
"""
CLIENT = LIBC + r"""
import json, socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print(json.dumps({"greeting": c.recv(100).decode(), "queue": libc.msgget(0x6b6d7431, 0),
                  "hostname": socket.gethostname()}), flush=True)
"""


def loopback_up(info: HolderInfo) -> None:
    """What CNI's loopback plugin does for the kubelet: the pod's `lo` up."""
    subprocess.run(["nsenter", f"--net=/proc/{info.pid}/ns/net", "ip", "link", "set", "lo", "up"], check=True)


@NEEDS_ROOT
def test_two_containers_of_a_pod_share_localhost_ipc_and_the_hostname(runtime, sandbox):  # noqa: F811
    loopback_up(sandbox)
    runtime.start(spec(runtime, guarded(SERVER, "ipc"), name="server", sandbox=sandbox_of(sandbox)))
    port, queue = wait_for(lambda: output(runtime, "server").split() or None, message="the server's port")
    assert int(queue) >= 0
    runtime.start(spec(runtime, py(CLIENT, port), name="client", sandbox=sandbox_of(sandbox)))
    assert exited(runtime, "client").exit_code == 0, output(runtime, "client")
    seen = json.loads(output(runtime, "client"))
    assert seen == {"greeting": "hello from the server", "queue": int(queue), "hostname": HOSTNAME}
    assert socket.gethostname() != HOSTNAME
    libc = __import__("ctypes").CDLL(None)
    assert libc.msgget(0x6b6d7431, 0) == -1, "the pod's queue is not in the host's IPC namespace"
    with socket.socket() as s:  # the server's port is not the host's
        assert s.connect_ex(("127.0.0.1", int(port))) != 0
    runtime.stop(runtime.pod_dir(POD), "server", grace=5)
    exited(runtime, "server")


MOUNTS_TMPFS = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
if libc.mount(b"tmpfs", sys.argv[1].encode(), b"tmpfs", 0, b"size=1m") != 0:
    sys.exit(os.strerror(ctypes.get_errno()))
open(os.path.join(sys.argv[1], "inside"), "w").close()
print("mounted", flush=True)
time.sleep(600)
"""
LISTS = "import os, sys; print(os.listdir(sys.argv[1]))"


@NEEDS_ROOT
def test_a_mount_in_a_container_is_its_own(runtime, sandbox, tmp_path):  # noqa: F811
    point = tmp_path / "mnt"
    point.mkdir()
    runtime.start(spec(runtime, guarded(MOUNTS_TMPFS, "mnt", str(point)), name="mounter", sandbox=sandbox_of(sandbox)))
    assert output(runtime, "mounter") == "mounted\n"
    runtime.start(spec(runtime, py(LISTS, str(point)), name="lister", sandbox=sandbox_of(sandbox)))
    assert output(runtime, "lister") == "[]\n", "each container of a pod has a mount namespace of its own"
    assert os.listdir(point) == [] and str(point) not in Path("/proc/self/mountinfo").read_text()
    runtime.stop(runtime.pod_dir(POD), "mounter", grace=5)
    exited(runtime, "mounter")


@NEEDS_ROOT
def test_joining_a_dead_holder_is_a_start_error(runtime):  # noqa: F811
    info = start(runtime)
    holder.kill(info.pid, info.start_ticks)
    wait_for(lambda: not alive(info.pid), message="the holder to die")
    runtime.start(spec(runtime, py(SLEEP), sandbox={**sandbox_of(info), "id": "0123-1"}))
    state = exited(runtime)
    assert state.start_failed and state.message == 'sandbox container "0123-1" is not running'


def test_a_later_process_with_the_holders_pid_is_not_joined(runtime):  # noqa: F811
    """Not root needed: the identity check comes before any setns."""
    me = psutil.Process()
    runtime.start(spec(runtime, py(SLEEP), sandbox={"pid": me.pid, "start": 1}))
    state = exited(runtime)
    assert state.start_failed and state.message == f'sandbox container "{me.pid}" is not running'


@NEEDS_ROOT
def test_a_holder_outlives_its_starter_and_its_process_group(runtime):  # noqa: F811
    """The kubelet that started it exits (init kills the kubelet's whole process group when the
    kubelet dies): the holder, and the pod's network with it, stay."""
    starter = subprocess.run(
        py("import sys; from kubelet import holder; h = holder.start(sys.argv[1], 'web-0', []); "
           "print(h.pid, h.start_ticks, flush=True); import os; os.killpg(0, 9)", runtime.pod_dir(POD)),
        env=marker_env(Path(runtime.node_dir)), stdin=subprocess.DEVNULL, capture_output=True, text=True,
        start_new_session=True, timeout=60)
    assert starter.returncode == -signal.SIGKILL
    pid, start_ticks = (int(w) for w in starter.stdout.split())
    try:
        assert holder.alive(pid, start_ticks)
        assert psutil.Process(pid).ppid() == os.getpid()
    finally:
        holder.kill(pid, start_ticks)
        wait_for(lambda: not alive(pid), message="the holder to die")


FAKE_INIT = r"""
import signal, subprocess, sys
from kubemu import prctl
prctl.set_child_subreaper()
subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]])
while True:
    signal.pause()
"""
FAKE_KUBELET = r"""
import signal, sys, time
from kubemu import prctl
from kubelet import holder
prctl.set_pdeathsig(signal.SIGKILL)
h = holder.start(sys.argv[1], "web-0", [])
print(h.pid, flush=True)
time.sleep(600)
"""


@NEEDS_ROOT
def test_a_holder_dies_with_init(runtime):  # noqa: F811
    init = subprocess.Popen(py(FAKE_INIT, FAKE_KUBELET, runtime.pod_dir(POD)), env=marker_env(Path(runtime.node_dir)),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        pid = int(init.stdout.readline())
        assert psutil.Process(pid).ppid() == init.pid, "re-parented to init past the living kubelet"
        init.kill()
        init.wait()
        wait_for(lambda: not alive(pid), message="the holder to die with init")
    finally:
        init.kill()
        init.wait()
        init.stdout.close()


@NEEDS_ROOT
def test_a_holder_drops_the_namespace_mounts_it_inherited(runtime, tmp_path):  # noqa: F811
    """A namespace file bind-mounted on the host (as `ip netns add` does) would be copied into the
    pod's mount namespace and keep that namespace alive after its owner deletes it."""
    target = tmp_path / "uts"
    target.touch()
    subprocess.run(["mount", "--bind", "/proc/self/ns/uts", str(target)], check=True)
    try:
        info = start(runtime)
        try:
            assert str(target) in Path("/proc/self/mountinfo").read_text()
            assert " - nsfs " not in Path(f"/proc/{info.pid}/mountinfo").read_text()
        finally:
            holder.kill(info.pid, info.start_ticks)
            wait_for(lambda: not alive(info.pid), message="the holder to die")
    finally:
        subprocess.run(["umount", str(target)], check=True)


@NEEDS_ROOT
def test_a_holder_joins_its_cgroups_before_unsharing(runtime, make_cgroup):  # noqa: F811
    cg = make_cgroup()
    info = start(runtime, cgroup_procs=[str(cg / "cgroup.procs")])
    try:
        assert info.pid in [int(p) for p in (cg / "cgroup.procs").read_text().split()]
    finally:
        holder.kill(info.pid, info.start_ticks)
        wait_for(lambda: not alive(info.pid), message="the holder to die")


@pytest.mark.parametrize("hostname, cgroup_procs, message", [
    (HOSTNAME, ["/nonexistent-kmtest/cgroup.procs"],
     "cannot join the cgroup /nonexistent-kmtest/cgroup.procs: No such file or directory"),
    ("x" * 65, [], "--hostname: expected 1-64 bytes, got '" + "x" * 65 + "'"),
])
def test_a_holder_that_cannot_start_is_one_clear_error(runtime, hostname, cgroup_procs, message):  # noqa: F811
    with pytest.raises(SandboxError) as caught:
        start(runtime, hostname, cgroup_procs)
    assert str(caught.value) == message  # and no holder is left: the state_dir fixture checks


@NEEDS_ROOT
def test_a_holder_in_the_kubelets_own_network_namespace_is_refused_and_killed(runtime, monkeypatch):  # noqa: F811
    """The readiness check's last line of defence: a CNI plugin given the kubelet's own
    namespace would configure the host."""
    pids = []
    monkeypatch.setattr(holder, "ns_inode", lambda pid, kind: pids.append(pid) or 4026531833)
    with pytest.raises(SandboxError, match=r"is in the kubelet's own network namespace: refusing it"):
        start(runtime)
    wait_for(lambda: not alive(pids[0]), message="the refused holder to be killed")


@NEEDS_ROOT
def test_a_holder_nobody_waits_for_any_more_exits(runtime, tmp_path):  # noqa: F811
    """The kubelet gave up waiting (its timeout) and closed the pipe: a holder it will never
    know of must not hold a pod's namespaces for nobody."""
    ready_r, ready_w = os.pipe()
    pid_r, pid_w = os.pipe()

    def fds():
        os.dup2(ready_w, holder.READY_FD)
        os.dup2(pid_w, holder.PID_FD)

    os.close(ready_r)  # nobody will read what it says
    subprocess.run(py("from kubelet.holder import main; main()", "--hostname", HOSTNAME,
                      "--pending", str(tmp_path / holder.PENDING)),
                   env=runtime.env_base, stdin=subprocess.DEVNULL, preexec_fn=fds,
                   pass_fds=(holder.READY_FD, holder.PID_FD), check=False, timeout=60)
    os.close(ready_w)
    os.close(pid_w)
    with os.fdopen(pid_r) as f:
        pid = int(f.read())
    wait_for(lambda: not alive(pid), message="the unwanted holder to exit")


@NEEDS_ROOT
def test_a_holder_names_itself_before_it_is_ready_and_an_unrecorded_one_is_reaped(runtime):  # noqa: F811
    """The kubelet may die between a holder's start and its record: the holder's own word
    (sandbox.pending) is how it is found and killed, never the recorded one."""
    info = start(runtime)
    pod_dir = runtime.pod_dir(POD)
    pending = json.loads(Path(pod_dir, holder.PENDING).read_text())
    assert pending == {"pid": info.pid, "start": info.start_ticks}
    holder.reap_pending(pod_dir, (info.pid, info.start_ticks))  # the recorded one: kept, the file forgotten
    assert holder.alive(info.pid, info.start_ticks) and not Path(pod_dir, holder.PENDING).exists()
    orphan = start(runtime)
    holder.reap_pending(pod_dir, (info.pid, info.start_ticks))  # a kubelet that recorded only the first
    wait_for(lambda: not holder.alive(orphan.pid, orphan.start_ticks), message="the unrecorded holder killed")
    assert holder.alive(info.pid, info.start_ticks)
    holder.kill(info.pid, info.start_ticks)
    holder.reap_pending(pod_dir, None)  # nothing pending: nothing to do
    # kill() does not wait, and the leak check must not find it still dying
    wait_for(lambda: not holder.alive(info.pid, info.start_ticks), message="the holder gone")
