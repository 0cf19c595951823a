"""kubelet/mounts.py: the plan of a container's mounts (pure), and the plan performed by the
shim (kubelet/shim.py ContainerMounts) with real processes as root: containers in a pod's
sandbox (kubelet/holder.py) with volumes mounted in their own mount namespace."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from kubelet import atomicwriter
from kubelet.mounts import (Bind, Create, Mount, MountError, Overlay, ReadOnly, Tmpfs, mount_point_of,
                            nearest_existing, parse, steps, submounts)
from kubelet.volumes import File
from tests.conftest import wait_for
from tests.kubelet.test_holder import NEEDS_ROOT, loopback_up, sandbox, sandbox_of  # noqa: F401 - fixtures
from tests.kubelet.test_runtime import POD, exited, running, runtime, spec  # noqa: F401 - fixtures
from tests.kubelet.test_shim import SLEEP, node, py, subreaper  # noqa: F401 - fixtures
from tests.kubelet.test_streaming import exec_params, outcome, serve

# --- the plan (pure)


def bind(target: str, source: str = "/vol", **kw) -> dict:
    return {"target": target, "source": source, "type": "bind", **kw}


def test_parse_keeps_the_order_and_cleans_the_paths():
    assert parse([bind("/etc//app/./config/", "/vol/"), {"target": "/mem", "type": "tmpfs", "size": 1024,
                                                         "source": None}]) == [
        Mount("/etc/app/config", "/vol", "bind"), Mount("/mem", None, "tmpfs", size=1024)]


@pytest.mark.parametrize("entry, message", [
    (bind("data"), "error mounting \"/vol\" to rootfs at \"data\": the target must be an absolute path, got 'data'"),
    (bind("/a/../etc"), "error mounting \"/vol\" to rootfs at \"/a/../etc\": the target must not contain '..'"),
    (bind("/data", "vol"), "error mounting \"vol\" to rootfs at \"/data\": the source must be an absolute path, "
                           "got 'vol'"),
    (bind("/data", "/x/../etc"), "error mounting \"/x/../etc\" to rootfs at \"/data\": the source must not contain "
                                 "'..'"),
    (bind("/data", None), "error mounting \"bind\" to rootfs at \"/data\": the source must be an absolute path, "
                          "got None"),
    (bind("/", "/vol"), "error mounting \"/vol\" to rootfs at \"/\": a volume cannot be mounted on the container's "
                        "root"),
    (bind("/a\0b"), "error mounting \"/vol\" to rootfs at \"/a\0b\": the target contains a NUL byte"),
    ({"target": "/m", "type": "nfs"}, "error mounting \"nfs\" to rootfs at \"/m\": unknown mount type 'nfs'"),
    ({"target": "/m", "type": "tmpfs", "source": "/x"}, "error mounting \"/x\" to rootfs at \"/m\": a tmpfs mount "
                                                          "has no source"),
    ({"target": "/m", "type": "tmpfs", "size": 0}, "error mounting \"tmpfs\" to rootfs at \"/m\": invalid tmpfs "
                                                     "size 0"),
    ({"target": "/m", "type": "tmpfs", "file": True}, "error mounting \"tmpfs\" to rootfs at \"/m\": only a bind "
                                                        "mount can be of a single file"),
    (bind("/m", read_only="yes"), "error mounting \"/vol\" to rootfs at \"/m\": read_only and file must be true "
                                  "or false"),
    ("/m", "mounts: expected an object, got '/m'"),
])
def test_unsafe_or_malformed_mounts_are_refused_with_runcs_words(entry, message):
    with pytest.raises(MountError) as caught:
        parse([bind("/ok"), entry])
    assert str(caught.value) == message


def test_the_nearest_existing_ancestor():
    existing = {"/", "/etc", "/etc/app"}
    assert nearest_existing("/etc/app/conf/x", existing.__contains__) == "/etc/app"
    assert nearest_existing("/kmtest/data", existing.__contains__) == "/"
    assert nearest_existing("/etc", existing.__contains__) == "/etc"


def test_the_mount_point_a_path_is_on_is_the_deepest_above_it():
    points = ["/", "/proc", "/etc", "/etc/hosts", "/etcetera"]
    assert mount_point_of("/etc/app", points) == "/etc"
    assert mount_point_of("/etcetera/x", points) == "/etcetera"
    assert mount_point_of("/etc", points) == "/etc"
    assert mount_point_of("/usr/lib", points) == "/"


def test_only_the_topmost_submounts_are_bound_back_without_the_containers_own():
    points = ["/", "/proc", "/sys", "/sys/fs/cgroup", "/sys/fs/cgroup/memory", "/dev", "/dev/shm", "/dev/shm",
              "/tmp/k/pods/p/c/rootfs", "/tmp/k/pods/p/c/rootfs/orig0", "/etc/hosts", "/etcetera"]
    assert submounts("/", points, "/tmp/k/pods/p/c/rootfs") == ["/proc", "/sys", "/dev", "/etc/hosts", "/etcetera"]
    assert submounts("/etc", points, "/tmp/k/pods/p/c/rootfs") == ["/etc/hosts"]
    assert submounts("/tmp", points, "/tmp/k/pods/p/c/rootfs") == []


@pytest.mark.parametrize("mount, existing, overlaid, expected", [
    (Mount("/data", "/vol", "bind"), {"/", "/data"}, set(), [Bind("/vol", "/data")]),
    (Mount("/data", "/vol", "bind", read_only=True), {"/", "/data"}, set(),
     [Bind("/vol", "/data"), ReadOnly("/data")]),
    (Mount("/etc/app/config", "/vol", "bind"), {"/", "/etc"}, set(),
     [Overlay("/etc"), Create("/etc/app/config", False), Bind("/vol", "/etc/app/config")]),
    (Mount("/kmtest/data", "/vol", "bind", read_only=True), {"/"}, set(),
     [Overlay("/"), Create("/kmtest/data", False), Bind("/vol", "/kmtest/data"), ReadOnly("/kmtest/data")]),
    (Mount("/etc/app.conf", "/f", "bind", file=True), {"/", "/etc"}, {"/etc"},
     [Create("/etc/app.conf", True), Bind("/f", "/etc/app.conf")]),
    (Mount("/kmtest/mem", None, "tmpfs", size=4096, read_only=True), {"/", "/kmtest"}, {"/kmtest"},
     [Create("/kmtest/mem", False), Tmpfs("/kmtest/mem", 4096, True)]),
])
def test_steps_make_a_missing_target_in_an_overlay_of_its_nearest_existing_ancestor(mount, existing, overlaid,
                                                                                    expected):
    assert steps(mount, existing.__contains__, overlaid.__contains__) == expected


# --- performed by the shim, with real processes (root)

# Reports what the container sees at the paths it is given (a directory's entries, a file's
# text, an error's name), tries to write a file into each, then sleeps.
SEES = r"""
import errno, json, os, sys, time
seen = {}
for path in sys.argv[1:]:
    try:
        seen[path] = sorted(os.listdir(path)) if os.path.isdir(path) else open(path).read()
    except OSError as exc:
        seen[path] = errno.errorcode[exc.errno]
    try:
        if os.path.isdir(path):
            open(os.path.join(path, "written"), "w").write("by the container")
            seen[path + " write"] = "ok"
    except OSError as exc:
        seen[path + " write"] = errno.errorcode[exc.errno]
print(json.dumps(seen), flush=True)
time.sleep(600)
"""


def rand() -> str:
    return secrets.token_hex(4)


def line(rt, name: str = "c") -> dict:
    """The container's first line of output, as JSON."""
    path = Path(rt.log_path(rt.pod_dir(POD), name, 0))
    text = wait_for(lambda: path.exists() and "\n" in path.read_text() and path.read_text(),
                    message=f"{name}'s output")
    return json.loads(text.splitlines()[0])


def stop(rt, name: str = "c") -> None:
    rt.stop(rt.pod_dir(POD), name, grace=5)
    exited(rt, name)


def not_on_the_host(*paths: str) -> None:
    mounted = Path("/proc/self/mountinfo").read_text()
    for path in paths:
        assert not os.path.lexists(path), f"{path} was created on the host"
        assert path not in mounted, f"{path} is mounted on the host"


@pytest.fixture
def volume(tmp_path) -> Path:
    path = tmp_path / "vol"
    path.mkdir()
    (path / "a").write_text("A")
    return path


@NEEDS_ROOT
@pytest.mark.parametrize("where", ["/etc/kubemu-test-{}/config", "/kmtest-{}/data"])
def test_a_volume_at_a_missing_target_is_seen_by_the_container_alone(runtime, sandbox, volume, where):  # noqa: F811
    target = where.format(rand())
    top = "/" + target.split("/")[1] if where.startswith("/kmtest") else os.path.dirname(target)
    runtime.start(spec(runtime, py(SEES, target), sandbox=sandbox_of(sandbox),
                       mounts=[{"target": target, "source": str(volume), "type": "bind"}]))
    assert line(runtime) == {target: ["a"], f"{target} write": "ok"}
    assert (volume / "written").read_text() == "by the container", "the bind writes through to the volume"
    not_on_the_host(top)
    stop(runtime)
    not_on_the_host(top)
    scratch = Path(runtime.container_dir(runtime.pod_dir(POD), "c")) / "rootfs"
    assert list(scratch.iterdir()) == [], "the writable layer lived in the container's namespace only"


@NEEDS_ROOT
def test_a_read_only_volume_refuses_writes(runtime, sandbox, volume):  # noqa: F811
    target = f"/kmtest-{rand()}/ro"
    runtime.start(spec(runtime, py(SEES, target), sandbox=sandbox_of(sandbox),
                       mounts=[{"target": target, "source": str(volume), "type": "bind", "read_only": True}]))
    assert line(runtime) == {target: ["a"], f"{target} write": "EROFS"}
    assert not (volume / "written").exists()
    stop(runtime)


@NEEDS_ROOT
def test_a_file_bound_over_etc_hosts_is_the_containers_alone(runtime, sandbox, tmp_path):  # noqa: F811
    before = Path("/etc/hosts").read_bytes()
    hosts = tmp_path / "hosts"
    hosts.write_text("10.244.0.5\tweb-0\n")
    runtime.start(spec(runtime, py(SEES, "/etc/hosts"), sandbox=sandbox_of(sandbox),
                       mounts=[{"target": "/etc/hosts", "source": str(hosts), "type": "bind", "file": True}]))
    assert line(runtime) == {"/etc/hosts": "10.244.0.5\tweb-0\n"}
    assert Path("/etc/hosts").read_bytes() == before
    stop(runtime)
    assert Path("/etc/hosts").read_bytes() == before


@NEEDS_ROOT
def test_a_directory_over_a_file_or_a_missing_source_is_a_start_error(runtime, sandbox, volume):  # noqa: F811
    runtime.start(spec(runtime, py(SLEEP), sandbox=sandbox_of(sandbox),
                       mounts=[{"target": "/etc/hosts", "source": str(volume), "type": "bind"}]))
    state = exited(runtime)
    assert state.start_failed and state.message == f'error mounting "{volume}" to rootfs at "/etc/hosts": not a directory'
    runtime.start(spec(runtime, py(SLEEP), name="f", sandbox=sandbox_of(sandbox),
                       mounts=[{"target": "/etc/hosts", "source": str(volume), "type": "bind", "file": True}]))
    state = exited(runtime, "f")
    assert state.start_failed and state.message == (f'error mounting "{volume}" to rootfs at "/etc/hosts": '
                                                     f"{volume} is a directory, the mount is of a file")
    missing = f"/nonexistent-{rand()}"
    runtime.start(spec(runtime, py(SLEEP), name="d", sandbox=sandbox_of(sandbox),
                       mounts=[{"target": "/data", "source": missing, "type": "bind"}]))
    state = exited(runtime, "d")
    assert state.start_failed and state.message == (f'error mounting "{missing}" to rootfs at "/data": '
                                                     f"stat {missing}: no such file or directory")


def test_an_unsafe_target_is_a_start_error_before_anything_runs(runtime, volume):  # noqa: F811
    runtime.start(spec(runtime, py(SLEEP), mounts=[{"target": "/a/../etc", "source": str(volume), "type": "bind"}]))
    state = exited(runtime)
    assert state.start_failed and state.message == (f'error mounting "{volume}" to rootfs at "/a/../etc": '
                                                    "the target must not contain '..'")


NS_INODES = r"""
import json, os, sys
print(json.dumps([os.stat(p).st_ino for p in sys.argv[1:]]), flush=True)
"""


@NEEDS_ROOT
def test_a_namespace_file_a_volume_names_is_bound_and_no_other(runtime, tmp_path):  # noqa: F811
    """kube-proxy (a hostNetwork pod: no sandbox) enters the cluster's fabric by its namespace
    file (`ip netns add`'s bind mount), given as a hostPath volume; every other namespace file
    stays out of the container (a copy would keep that namespace alive)."""
    named, other = tmp_path / "named", tmp_path / "other"
    for path in (named, other):
        path.touch()
        subprocess.run(["mount", "--bind", "/proc/self/ns/uts", str(path)], check=True)
    try:
        target = f"/kmtest-{rand()}/fabric"
        runtime.start(spec(runtime, py(NS_INODES, target, str(other)),
                           mounts=[{"target": target, "source": str(named), "type": "bind", "file": True}]))
        uts = os.stat("/proc/self/ns/uts").st_ino
        seen = line(runtime)
        assert seen[0] == uts, "the named namespace file is the namespace in the container"
        assert seen[1] != uts, "another namespace file is not"
        stop(runtime)
    finally:
        for path in (named, other):
            subprocess.run(["umount", str(path)], check=True)


TMPFS_SIZE = r"""
import os, sys
st = os.statvfs(sys.argv[1])
kinds = [l.split(" - ")[1].split()[0] for l in open("/proc/self/mountinfo") if l.split()[4] == sys.argv[1]]
print(st.f_blocks * st.f_frsize, kinds, flush=True)
"""


@NEEDS_ROOT
def test_a_tmpfs_has_its_size(runtime, sandbox):  # noqa: F811
    target = f"/kmtest-{rand()}/mem"
    runtime.start(spec(runtime, py(TMPFS_SIZE, target), sandbox=sandbox_of(sandbox),
                       mounts=[{"target": target, "type": "tmpfs", "size": 2 << 20, "source": None}]))
    assert exited(runtime).exit_code == 0
    log = Path(runtime.log_path(runtime.pod_dir(POD), "c", 0)).read_text()
    assert log == f"{2 << 20} ['tmpfs']\n"
    not_on_the_host(os.path.dirname(target))


SERVES = r"""
import os, socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], os.listdir(sys.argv[1]), flush=True)
conn, _ = s.accept(); conn.sendall(b"hello"); conn.close()
import time; time.sleep(600)
"""
CONNECTS = r"""
import json, os, socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
print(json.dumps({"greeting": c.recv(100).decode(), "sees": os.path.exists(sys.argv[2])}), flush=True)
"""


@NEEDS_ROOT
def test_two_containers_of_a_pod_share_localhost_not_their_mounts(runtime, sandbox, volume):  # noqa: F811
    target = f"/kmtest-{rand()}/a"
    loopback_up(sandbox)
    runtime.start(spec(runtime, py(SERVES, target), name="server", sandbox=sandbox_of(sandbox),
                       mounts=[{"target": target, "source": str(volume), "type": "bind"}]))
    path = Path(runtime.log_path(runtime.pod_dir(POD), "server", 0))
    port, seen = wait_for(lambda: path.exists() and "\n" in path.read_text() and path.read_text(),
                          message="the server's port").split(" ", 1)
    assert seen == "['a']\n"
    runtime.start(spec(runtime, py(CONNECTS, port, target), name="client", sandbox=sandbox_of(sandbox)))
    assert exited(runtime, "client").exit_code == 0
    assert line(runtime, "client") == {"greeting": "hello", "sees": False}
    stop(runtime, "server")
    not_on_the_host(os.path.dirname(target))


@NEEDS_ROOT
def test_an_exec_sees_the_containers_mounts(runtime, sandbox, volume):  # noqa: F811
    target = f"/kmtest-{rand()}/data"
    runtime.start(spec(runtime, py(SLEEP), sandbox=sandbox_of(sandbox),
                       mounts=[{"target": target, "source": str(volume), "type": "bind"}]))
    container = running(runtime).pid
    mnt = os.readlink(f"/proc/{container}/ns/mnt")

    async def scenario(client):
        out, err, code = await outcome(client.stream("exec", exec_params(
            ["sh", "-c", f'cat {target}/a; echo; readlink /proc/self/ns/mnt'])))
        assert (out, err, code) == (f"A\n{mnt}\n".encode(), b"", 0)
    serve(runtime, scenario)
    stop(runtime)


WATCHES = r"""
import sys, time
last = None
while True:
    try:
        text = open(sys.argv[1]).read()
    except OSError as exc:
        text = repr(exc)
    if text != last:
        print(text, flush=True)
        last = text
    time.sleep(0.05)
"""


@NEEDS_ROOT
def test_an_atomic_update_of_the_volume_shows_in_the_running_container(runtime, sandbox, tmp_path):  # noqa: F811
    source = tmp_path / "configmap"
    source.mkdir()
    atomicwriter.write(str(source), {"key": File(b"one", 0o644)})
    target = f"/etc/kubemu-test-{rand()}/config"
    runtime.start(spec(runtime, py(WATCHES, f"{target}/key"), sandbox=sandbox_of(sandbox),
                       mounts=[{"target": target, "source": str(source), "type": "bind", "read_only": True}]))
    log = Path(runtime.log_path(runtime.pod_dir(POD), "c", 0))
    wait_for(lambda: log.exists() and log.read_text() == "one\n", message="the first version")
    atomicwriter.write(str(source), {"key": File(b"two", 0o644)})
    wait_for(lambda: log.read_text() == "one\ntwo\n", message="the update inside the container")
    stop(runtime)
    not_on_the_host(os.path.dirname(target))


@NEEDS_ROOT
def test_the_containers_program_may_come_from_its_volume(runtime, sandbox, tmp_path):  # noqa: F811
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "run").write_text("#!/bin/sh\necho from the volume\n")
    (scripts / "run").chmod(0o755)
    target = f"/kmtest-{rand()}/bin"
    runtime.start(spec(runtime, [f"{target}/run"], sandbox=sandbox_of(sandbox),
                       mounts=[{"target": target, "source": str(scripts), "type": "bind", "read_only": True}]))
    assert exited(runtime).exit_code == 0
    assert Path(runtime.log_path(runtime.pod_dir(POD), "c", 0)).read_text() == "from the volume\n"
