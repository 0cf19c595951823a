"""A pod's volume directories on disk: where each volume lives, what it holds, updates, and
one error per broken volume (the others set up all the same)."""
import os
import stat

import pytest

from kubelet import holder, volumedirs
from kubemu import nsutil
from kubelet.volumes import ClaimedVolume, VolumeError

CM = {"data": {"k": "v1"}}


def pod_with(*volumes):
    return {"metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {"volumes": list(volumes), "containers": [{"name": "app"}]}}


def test_each_kind_in_its_plugin_dir_and_updates_reach_the_files(tmp_path):
    objects = {("configmaps", "ns", "cfg"): CM}
    pod = pod_with({"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 0o644}},
                   {"name": "scratch", "emptyDir": {}},
                   {"name": "info", "downwardAPI": {"items": [
                       {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}})
    lookup = lambda r, ns, n: objects.get((r, ns, n))  # noqa: E731
    assert volumedirs.set_up(str(tmp_path), pod, lookup, [], []) == {}
    cfg = tmp_path / "volumes" / "kubernetes.io~configmap" / "cfg"
    assert (cfg / "k").read_text() == "v1"
    scratch = tmp_path / "volumes" / "kubernetes.io~empty-dir" / "scratch"
    assert stat.S_IMODE(os.stat(scratch).st_mode) == 0o777
    assert (tmp_path / "volumes" / "kubernetes.io~downward-api" / "info" / "name").read_text() == "web"
    (scratch / "mine").write_text("kept")
    objects[("configmaps", "ns", "cfg")] = {"data": {"k": "v2"}}
    assert volumedirs.set_up(str(tmp_path), pod, lookup, [], []) == {}
    assert (cfg / "k").read_text() == "v2"
    assert (scratch / "mine").read_text() == "kept"  # an emptyDir is never emptied by a sync
    assert volumedirs.volume_path(str(tmp_path), pod["spec"]["volumes"][0]) == str(cfg)


def test_host_path_types_are_checked_and_made(tmp_path):
    missing_dir, missing_file = tmp_path / "a" / "b", tmp_path / "f"
    pod = pod_with({"name": "strict", "hostPath": {"path": str(tmp_path / "nope"), "type": "Directory"}},
                   {"name": "mkdir", "hostPath": {"path": str(missing_dir), "type": "DirectoryOrCreate"}},
                   {"name": "touch", "hostPath": {"path": str(missing_file), "type": "FileOrCreate"}},
                   {"name": "any", "hostPath": {"path": str(tmp_path / "whatever"), "type": ""}})
    errors = volumedirs.set_up(str(tmp_path / "pod"), pod, lambda *_a: None, [], [])
    assert errors == {"strict": VolumeError(
        f"hostPath type check failed: {tmp_path / 'nope'} is not a directory")}
    assert missing_dir.is_dir() and missing_file.is_file() and missing_file.read_bytes() == b""
    assert volumedirs.volume_path("/x", pod["spec"]["volumes"][1]) == str(missing_dir)


def test_a_claims_volume_is_made_and_linked_from_the_pod(tmp_path):
    made, other = tmp_path / "local-path" / "pvc-1", tmp_path / "elsewhere"
    pod = pod_with({"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                   {"name": "waits", "persistentVolumeClaim": {"claimName": "pending"}})
    claims = {"data": ClaimedVolume(str(made), "DirectoryOrCreate"),
              "pending": VolumeError("error processing PVC ns/pending: not bound")}
    pod_dir = tmp_path / "pod"
    errors = volumedirs.set_up(str(pod_dir), pod, lambda *_a: None, [], [], claims=claims)
    assert errors == {"waits": VolumeError("error processing PVC ns/pending: not bound")}
    link = pod_dir / "volumes" / "kubernetes.io~local-volume" / "data"
    assert made.is_dir() and os.readlink(link) == str(made)
    assert volumedirs.volume_path(str(pod_dir), pod["spec"]["volumes"][0]) == str(link)
    (link / "f").write_text("x")
    assert (made / "f").read_text() == "x"
    # set up again: the same link; a volume elsewhere (not for a bound claim, but be sure): replaced
    assert volumedirs.set_up(str(pod_dir), pod_with(pod["spec"]["volumes"][0]), lambda *_a: None, [], [],
                             claims=claims) == {}
    other.mkdir()
    volumedirs.set_up(str(pod_dir), pod_with(pod["spec"]["volumes"][0]), lambda *_a: None, [], [],
                      claims={"data": ClaimedVolume(str(other), "Directory")})
    assert os.readlink(link) == str(other)
    strict = volumedirs.set_up(str(pod_dir), pod_with(pod["spec"]["volumes"][0]), lambda *_a: None, [], [],
                               claims={"data": ClaimedVolume(str(tmp_path / "nope"), "Directory")})
    assert strict == {"data": VolumeError(f"hostPath type check failed: {tmp_path / 'nope'} is not a directory")}
    assert volumedirs.set_up(str(pod_dir), pod, lambda *_a: None, [], [])["data"] == \
        VolumeError("the claim has not been looked up")


def test_a_broken_volume_does_not_stop_the_others(tmp_path):
    pod = pod_with({"name": "gone", "secret": {"secretName": "gone"}},
                   {"name": "odd", "emptyDir": {"medium": "HugePages"}},
                   {"name": "ok", "emptyDir": {}})
    errors = volumedirs.set_up(str(tmp_path), pod, lambda *_a: None, [], [])
    assert errors == {"gone": VolumeError('secret "gone" not found'),
                      "odd": VolumeError('unknown storage medium "HugePages"')}
    assert (tmp_path / "volumes" / "kubernetes.io~empty-dir" / "ok").is_dir()
    assert not (tmp_path / "volumes" / "kubernetes.io~secret").exists()


def test_a_write_failure_is_the_volumes_error_not_a_crash(tmp_path):
    pod = pod_with({"name": "cfg", "configMap": {"name": "cfg", "items": [
        {"key": "k", "path": "a"}, {"key": "k", "path": "a/b"}]}})
    errors = volumedirs.set_up(str(tmp_path), pod, lambda *_a: CM, [], [])
    assert list(errors) == ["cfg"] and errors["cfg"].message.startswith("File exists: ")


def test_mounts_say_what_each_volume_mount_binds():
    pod = pod_with({"name": "cfg", "configMap": {"name": "cfg"}},
                   {"name": "scratch", "emptyDir": {}},
                   {"name": "host", "hostPath": {"path": "/srv/data"}},
                   {"name": "db", "persistentVolumeClaim": {"claimName": "db"}},
                   {"name": "ro", "persistentVolumeClaim": {"claimName": "ro", "readOnly": True}})
    ctr = {"name": "app", "volumeMounts": [
        {"name": "cfg", "mountPath": "/etc/app"},
        {"name": "scratch", "mountPath": "/tmp/work", "subPath": "a/b"},
        {"name": "host", "mountPath": "/data", "readOnly": True},
        {"name": "scratch", "mountPath": "/cache"},
        {"name": "db", "mountPath": "/db"},
        {"name": "ro", "mountPath": "/ro"}]}
    assert volumedirs.mounts("/p", pod, ctr) == [
        volumedirs.Mount("/etc/app", "/p/volumes/kubernetes.io~configmap/cfg", True),
        volumedirs.Mount("/tmp/work", "/p/volumes/kubernetes.io~empty-dir/scratch/a/b", False),
        volumedirs.Mount("/data", "/srv/data", True),
        volumedirs.Mount("/cache", "/p/volumes/kubernetes.io~empty-dir/scratch", False),
        volumedirs.Mount("/db", "/p/volumes/kubernetes.io~local-volume/db", False),
        volumedirs.Mount("/ro", "/p/volumes/kubernetes.io~local-volume/ro", True)]


def test_without_mounts_the_env_says_where_each_mount_is():
    mounts = [volumedirs.Mount("/etc/app", "/p/v/cfg", True),
              volumedirs.Mount("/var/lib/my-data/", "/srv/data", False)]
    assert volumedirs.mount_env(mounts) == {"KUBEMU_MOUNT_ETC_APP": "/p/v/cfg",
                                            "KUBEMU_MOUNT_VAR_LIB_MY_DATA": "/srv/data"}


def test_runtime_mounts_parents_first_memory_as_its_directory_and_the_kubelets_files(tmp_path):
    pod = pod_with({"name": "cfg", "configMap": {"name": "cfg"}},
                   {"name": "mem", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
                   {"name": "host", "hostPath": {"path": str(tmp_path)}})
    container = {"name": "app", "volumeMounts": [{"name": "cfg", "mountPath": "/srv/app/config"},
                                                 {"name": "host", "mountPath": "/srv", "readOnly": True},
                                                 {"name": "mem", "mountPath": "/cache"},
                                                 {"name": "cfg", "mountPath": "/etc/hosts", "subPath": "hosts"}]}
    bound = volumedirs.mounts("/pods/p", pod, container)
    got = volumedirs.runtime_mounts(bound, {"/etc/hosts": "/pods/p/etc-hosts", "/etc/hostname": "/pods/p/etc-hostname"})
    assert [(m["target"], m["type"], m["source"], m["read_only"], m["size"]) for m in got] == [
        ("/srv", "bind", str(tmp_path), True, None),
        ("/cache", "bind", "/pods/p/volumes/kubernetes.io~empty-dir/mem", False, None),  # its tmpfs is the pod's
        ("/etc/hosts", "bind", "/pods/p/volumes/kubernetes.io~configmap/cfg/hosts", True, None),  # the pod's own
        ("/etc/hostname", "bind", "/pods/p/etc-hostname", False, None),
        ("/srv/app/config", "bind", "/pods/p/volumes/kubernetes.io~configmap/cfg", True, None)]
    assert [m["file"] for m in got] == [False, False, False, True, False]
    (tmp_path / "f").write_text("")  # a file bound by itself (subPath of a key, hostPath of type File)
    pod["spec"]["volumes"][2]["hostPath"]["path"] = str(tmp_path / "f")
    assert volumedirs.runtime_mounts(volumedirs.mounts("/pods/p", pod, container), {})[0]["file"] is True


def test_mount_env_names_each_mount_path():
    bound = [volumedirs.Mount("/etc/config", "/p/v/cfg", True), volumedirs.Mount("/data-1/x", "/h", False)]
    assert volumedirs.mount_env(bound) == {"KUBEMU_MOUNT_ETC_CONFIG": "/p/v/cfg", "KUBEMU_MOUNT_DATA_1_X": "/h"}


MEMORY = {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}}
root = pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox holder unshares namespaces: needs root")


@pytest.fixture
def sandbox(tmp_path):
    """A real sandbox holder for a pod directory reached through a symlink (a state directory
    may be one)."""
    (tmp_path / "real" / "pod").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    pod_dir = str(tmp_path / "link" / "pod")
    info = holder.start(pod_dir, "web", [])
    yield pod_dir, info
    holder.kill(info.pid, info.start_ticks)


def _tmpfs_points(pid: int) -> list[str]:
    with open(f"/proc/{pid}/mountinfo") as f:
        return [line.split()[4] for line in f if " - tmpfs " in line]


@root
def test_a_memory_volume_is_mounted_once_in_the_pods_namespace_only(sandbox):
    pod_dir, info = sandbox
    real = os.path.realpath(volumedirs.volume_path(pod_dir, MEMORY))
    for _ in range(2):  # the second call finds it mounted, by its real path
        assert volumedirs.mount_memory_volumes(pod_dir, pod_with(MEMORY), info.pid, info.start_ticks) == {}
    assert _tmpfs_points(info.pid).count(real) == 1
    assert real not in _tmpfs_points(os.getpid())


@root
def test_a_holder_whose_pid_is_not_its_own_any_more_is_not_entered(sandbox):
    pod_dir, info = sandbox
    errors = volumedirs.mount_memory_volumes(pod_dir, pod_with(MEMORY), info.pid, info.start_ticks + 1)
    assert errors["cache"].message.startswith("mount failed: the pod's sandbox is gone: process ")
    assert os.path.realpath(volumedirs.volume_path(pod_dir, MEMORY)) not in _tmpfs_points(info.pid)


@root
def test_without_nsenter_a_memory_volume_is_one_clear_error(sandbox, monkeypatch):
    pod_dir, info = sandbox
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(nsutil, "SBIN_PATH", "/nonexistent")
    errors = volumedirs.mount_memory_volumes(pod_dir, pod_with(MEMORY), info.pid, info.start_ticks)
    assert {k: v.message for k, v in errors.items()} == {"cache": "mount failed: nsenter (util-linux) not found"}
