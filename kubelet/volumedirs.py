"""A pod's volume directories on disk, as the kubelet's volume manager sets them up (the
shell over volumes.py and atomicwriter.py).

    set_up(pod_dir, pod, lookup, pod_ips, host_ips, allocatable=None, token=None)
        -> {volume name: VolumeError}    (empty: every volume is ready)
    volume_path(pod_dir, volume) -> the directory (or, for hostPath, the path) a mount binds
    mounts(pod_dir, pod, container) -> [Mount(container_path, host_path, read_only), ...]
    mount_env(mounts) -> {"KUBEMU_MOUNT_ETC_CONFIG": host path, ...}   without mount namespaces

Each volume lives in `<pod dir>/volumes/<plugin>/<name>/` (plugin: kubernetes.io~configmap,
~secret, ~downward-api, ~projected, ~empty-dir, as the kubelet names them); a hostPath volume
is the host's path, checked (and made, for DirectoryOrCreate and FileOrCreate) per its type.
set_up is idempotent and cheap when nothing changed: the kubelet calls it before a pod's
containers start and again at each sync (and when a ConfigMap or Secret changes), and the
AtomicWriter rewrites only the volumes whose contents differ. A failed volume does not stop
the others; each error is the FailedMount Event's text (volumes.failed_mount).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from kubemu.api.fielderrors import go_quote
from kubemu.api.pod import volume_type

from . import atomicwriter, volumes
from .configsource import Lookup
from .volumes import HostPathAction, VolumeError

VOLUMES_DIR = "volumes"
EMPTY_DIR_MODE = 0o777  # the kubelet's emptyDir: world-writable, as containers may run as anyone
MEDIA = ("", "Memory")  # Memory: a tmpfs once mounted in the pod's namespace; a directory until


def volume_path(pod_dir: str, volume: dict) -> str:
    if volume_type(volume) == "hostPath":
        return volume["hostPath"]["path"]
    return os.path.join(pod_dir, VOLUMES_DIR, volumes.plugin_dir(volume), volume["name"])


@dataclass(frozen=True)
class Mount:
    container_path: str  # the volumeMount's mountPath
    host_path: str       # what is bound there: the volume's directory, or a subPath inside it
    read_only: bool      # asked for, or a configMap/secret/downwardAPI/projected volume (the
                         # kubelet always mounts those read-only)


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
                         or volume_type(volume) in volumes.PAYLOAD_KINDS))
    return out


def mount_env(bound: list[Mount]) -> dict[str, str]:
    """Where each mount's files are when the kubelet cannot mount them (no mount namespace):
    `KUBEMU_MOUNT_<mountPath, upper-cased, every run of other characters an underscore>`,
    e.g. /etc/config -> KUBEMU_MOUNT_ETC_CONFIG."""
    return {"KUBEMU_MOUNT_" + re.sub(r"[^A-Z0-9]+", "_", m.container_path.upper()).strip("_"):
            m.host_path for m in bound}


def set_up(pod_dir: str, pod: dict, lookup: Lookup, pod_ips: list[str], host_ips: list[str],
           allocatable: dict | None = None, token: volumes.TokenSource | None = None
           ) -> dict[str, VolumeError]:
    errors = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        error = _set_up_one(pod_dir, pod, volume, lookup, pod_ips, host_ips, allocatable, token)
        if error is not None:
            errors[volume["name"]] = error
    return errors


def _set_up_one(pod_dir: str, pod: dict, volume: dict, lookup: Lookup, pod_ips: list[str],
                host_ips: list[str], allocatable: dict | None,
                token: volumes.TokenSource | None) -> VolumeError | None:
    kind = volume_type(volume)
    path = volume_path(pod_dir, volume)
    try:
        if kind == "hostPath":
            return _host_path(path, volume["hostPath"].get("type") or "")
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
