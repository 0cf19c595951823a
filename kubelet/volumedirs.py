"""A pod's volume directories on disk, as the kubelet's volume manager sets them up (the
shell over volumes.py and atomicwriter.py).

    set_up(pod_dir, pod, lookup, pod_ips, host_ips, allocatable=None, token=None, claims=None)
        -> {volume name: VolumeError}    (empty: every volume is ready)
    volume_path(pod_dir, volume) -> the directory (or, for hostPath, the path) a mount binds
    mounts(pod_dir, pod, container) -> [Mount(container_path, host_path, read_only), ...]
    mount_env(mounts) -> {"KUBEMU_MOUNT_ETC_CONFIG": host path, ...}   without mount namespaces
    runtime_mounts(mounts, files) -> [{target, source, type, read_only, size, file}, ...]
        what the runtime mounts in the container (runtime.ContainerSpec.mounts), parents first
    mount_memory_volumes(pod_dir, pod, holder_pid, holder_start) -> {volume name: VolumeError}
        the tmpfs of each `medium: Memory` emptyDir, in the pod's mount namespace

Each volume lives in `<pod dir>/volumes/<plugin>/<name>/` (plugin: kubernetes.io~configmap,
~secret, ~downward-api, ~projected, ~empty-dir, as the kubelet names them); a hostPath volume
is the host's path, checked (and made, for DirectoryOrCreate and FileOrCreate) per its type;
a persistentVolumeClaim volume is its PersistentVolume's path (`claims`: claim name ->
volumes.ClaimedVolume or VolumeError, what the shell found in the API), checked as a hostPath
is, and linked from <pod dir>/volumes/kubernetes.io~local-volume/<name>: that link is what
the containers' mounts bind, so a container restarted later finds the volume without asking
the API again.
set_up is idempotent and cheap when nothing changed: the kubelet calls it before a pod's
containers start and again at each sync (and when a ConfigMap or Secret changes), and the
AtomicWriter rewrites only the volumes whose contents differ. A failed volume does not stop
the others; each error is the FailedMount Event's text (volumes.failed_mount).
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

from kubemu import nsutil
from kubemu.child import same_process

from kubemu.api.fielderrors import go_quote
from kubemu.api.pod import volume_type
from kubemu.api.quantity import memory_bytes

from . import atomicwriter, volumes
from .configsource import Lookup
from .volumes import HostPathAction, VolumeError

VOLUMES_DIR = "volumes"
EMPTY_DIR_MODE = 0o777  # the kubelet's emptyDir: world-writable, as containers may run as anyone
MOUNT_TIMEOUT = 30.0  # seconds for one tmpfs mount (nsenter + mount(8)) in the pod's namespace
MEDIA = ("", "Memory")  # Memory: a tmpfs on the directory, in the pod's mount namespace (mount_memory_volumes)


def volume_path(pod_dir: str, volume: dict) -> str:
    if volume_type(volume) == "hostPath":
        return volume["hostPath"]["path"]
    return os.path.join(pod_dir, VOLUMES_DIR, volumes.plugin_dir(volume), volume["name"])


@dataclass(frozen=True)
class Mount:
    container_path: str  # the volumeMount's mountPath
    host_path: str       # what is bound there: the volume's directory, or a subPath inside it
    read_only: bool      # asked for (by the mount, or a persistentVolumeClaim source's readOnly),
                         # or a configMap/secret/downwardAPI/projected volume (the kubelet
                         # always mounts those read-only)


def mounts(pod_dir: str, pod: dict, container: dict) -> list[Mount]:
    """What a container's volumeMounts bind, in their order (a parent before its children
    when the author wrote it so, as the runtime mounts them)."""
    by_name = {v["name"]: v for v in (pod.get("spec") or {}).get("volumes") or []}
    out = []
    for m in container.get("volumeMounts") or []:
        volume = by_name[m["name"]]
        source = volume_path(pod_dir, volume)
        if m.get("subPath"):
            source = os.path.join(source, m["subPath"])
        out.append(Mount(m["mountPath"], source, m.get("readOnly") is True
                         or volume_type(volume) in volumes.PAYLOAD_KINDS
                         or (volume.get("persistentVolumeClaim") or {}).get("readOnly") is True))
    return out


def runtime_mounts(bound: list[Mount], files: dict[str, str]) -> list[dict]:
    """The runtime's mount list: the volume mounts, then the kubelet's files (`files`:
    container path -> host file, /etc/hosts and the like, bound unless a volume mount covers
    the same path), sorted by the depth of their target (stable), so a parent is mounted
    before what is mounted inside it, as the runtime requires. A Memory emptyDir is bound like
    any directory: its tmpfs is mounted on that directory in the pod's mount namespace
    (mount_memory_volumes), which every container's namespace is made from, so the pod's
    containers share it as they share any emptyDir."""
    out = [{"target": m.container_path, "source": m.host_path, "type": "bind", "read_only": m.read_only,
            "size": None, "file": os.path.exists(m.host_path) and not os.path.isdir(m.host_path)}
           for m in bound]
    taken = {m.container_path.rstrip("/") for m in bound}
    out += [{"target": target, "source": source, "type": "bind", "read_only": False, "size": None,
             "file": True} for target, source in files.items() if target not in taken]
    return sorted(out, key=lambda m: len([p for p in m["target"].split("/") if p]))


def memory_volumes(pod_dir: str, pod: dict) -> dict[str, tuple[str, int]]:
    """The pod's emptyDirs of medium Memory: name -> (its directory, tmpfs size in bytes, 0 for
    the kernel's default)."""
    out = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        empty_dir = volume.get("emptyDir")
        if empty_dir is not None and empty_dir.get("medium") == "Memory":
            limit = empty_dir.get("sizeLimit")
            out[volume["name"]] = (volume_path(pod_dir, volume), memory_bytes(limit) if limit else 0)
    return out


def mount_memory_volumes(pod_dir: str, pod: dict, holder_pid: int, holder_start: int) -> dict[str, VolumeError]:
    """Mount each Memory emptyDir's tmpfs on its directory inside the pod's mount namespace
    (the sandbox holder's, as the sandbox is made: the machine never sees it, and it goes with
    the sandbox), unless it is mounted there already. The namespace is entered through a
    descriptor checked to be the holder's (PID and start ticks): never a later process's that
    was given its PID. The errors, by volume name."""
    wanted = memory_volumes(pod_dir, pod)
    if not wanted:
        return {}
    try:
        fd = nsutil.open_ns(holder_pid, "mnt", holder_start)
    except nsutil.NamespaceGone as err:
        return {name: VolumeError(f"mount failed: the pod's sandbox is gone: {err}") for name in wanted}
    try:
        return _mount_tmpfs(fd, holder_pid, holder_start, wanted)
    finally:
        os.close(fd)


def _mount_tmpfs(fd: int, pid: int, start: int, wanted: dict[str, tuple[str, int]]) -> dict[str, VolumeError]:
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            mounted = set(nsutil.mount_points(f.read()))
    except OSError as err:
        return {name: VolumeError(f"mount failed: the pod's sandbox is gone: {err.strerror}") for name in wanted}
    if not same_process(pid, start):  # what was read may be a later process's, given the PID
        return {name: VolumeError("mount failed: the pod's sandbox is gone: its holder exited") for name in wanted}
    nsenter = nsutil.nsenter_path()
    if nsenter is None:
        return {name: VolumeError("mount failed: nsenter (util-linux) not found") for name in wanted}
    errors = {}
    for name, (path, size) in wanted.items():
        try:
            _make_dir(path, EMPTY_DIR_MODE)
        except OSError as err:
            errors[name] = VolumeError(f"{err.strerror}: {path}")
            continue
        real = os.path.realpath(path)  # mountinfo names the resolved path: a symlinked state dir too
        if real in mounted:
            continue
        options = f"mode=1777,size={size}" if size else "mode=1777"
        argv = [nsenter, f"--mount={nsutil.fd_path(fd)}", "--", "mount", "-t", "tmpfs", "-o", options, "tmpfs", real]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=MOUNT_TIMEOUT, pass_fds=(fd,),
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            errors[name] = VolumeError(f"mount failed: mount did not finish in {MOUNT_TIMEOUT:g}s")
            continue
        except OSError as err:
            errors[name] = VolumeError(f"mount failed: cannot run {nsenter}: {err.strerror}")
            continue
        if done.returncode != 0:
            errors[name] = VolumeError(f"mount failed: {done.stderr.strip() or done.returncode}")
    return errors


def mount_env(bound: list[Mount]) -> dict[str, str]:
    """Where each mount's files are when the kubelet cannot mount them (no mount namespace):
    `KUBEMU_MOUNT_<mountPath, upper-cased, every run of other characters an underscore>`,
    e.g. /etc/config -> KUBEMU_MOUNT_ETC_CONFIG."""
    return {"KUBEMU_MOUNT_" + re.sub(r"[^A-Z0-9]+", "_", m.container_path.upper()).strip("_"):
            m.host_path for m in bound}


def set_up(pod_dir: str, pod: dict, lookup: Lookup, pod_ips: list[str], host_ips: list[str],
           allocatable: dict | None = None, token: volumes.TokenSource | None = None,
           claims: dict | None = None) -> dict[str, VolumeError]:
    errors = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        error = _set_up_one(pod_dir, pod, volume, lookup, pod_ips, host_ips, allocatable, token, claims or {})
        if error is not None:
            errors[volume["name"]] = error
    return errors


def _set_up_one(pod_dir: str, pod: dict, volume: dict, lookup: Lookup, pod_ips: list[str],
                host_ips: list[str], allocatable: dict | None,
                token: volumes.TokenSource | None, claims: dict) -> VolumeError | None:
    kind = volume_type(volume)
    path = volume_path(pod_dir, volume)
    try:
        if kind == "hostPath":
            return _host_path(path, volume["hostPath"].get("type") or "")
        if kind == "persistentVolumeClaim":
            claimed = claims.get(volume[kind].get("claimName"))
            if claimed is None:
                return VolumeError("the claim has not been looked up")
            if isinstance(claimed, VolumeError):
                return claimed
            error = _host_path(claimed.path, claimed.type)
            if error is None:
                _link(path, claimed.path)
            return error
        if kind == "emptyDir":
            medium = (volume.get("emptyDir") or {}).get("medium") or ""
            if medium not in MEDIA:
                return VolumeError(f"unknown storage medium {go_quote(medium)}")
            _make_dir(path, EMPTY_DIR_MODE)
            return None
        files = volumes.payload(pod, volume, lookup, pod_ips, host_ips, allocatable, token)
        if isinstance(files, VolumeError):
            return files
        _make_dir(path, 0o755)
        atomicwriter.write(path, files)
    except atomicwriter.AtomicWriteError as err:
        return VolumeError(str(err))
    except OSError as err:
        return VolumeError(f"{err.strerror}: {err.filename}" if err.filename else str(err))
    return None


def _link(path: str, target: str) -> None:
    """`path` a symbolic link to `target`, replaced at once if it pointed elsewhere."""
    if os.path.islink(path) and os.readlink(path) == target:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, path)


def _make_dir(path: str, mode: int) -> None:
    if not os.path.isdir(path):
        os.makedirs(path, exist_ok=True)
        os.chmod(path, mode)  # makedirs' mode goes through the umask


def _host_path(path: str, kind: str) -> VolumeError | None:
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    action = volumes.host_path_check(kind, path, mode)
    if action is HostPathAction.MAKE_DIRECTORY:
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o755)
    elif action is HostPathAction.MAKE_FILE:
        os.makedirs(os.path.dirname(path) or "/", exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))
    return action if isinstance(action, VolumeError) else None
