"""Carrying out the sandbox decisions of kubelet/sandbox.py: holders, CNI, pod cgroups, files.

`Sandboxes.create` and `.remove` block (a holder's start, the CNI plugins): the
kubelet runs them in a thread, off its event loop. `HolderWatch` holds a pidfd on each holder in
the loop, so a holder's death is heard at once (as kubelet/shimwatch.py hears a shim's), never
polled.

A sandbox is written down in `<pod dir>/sandbox.json`, twice: once its holder runs (no `result`
yet), and once CNI ADD gave it its addresses. A restarted kubelet adopts what it finds there: a
holder alive with the same start ticks and a result is the same sandbox (same IP, no ADD); a
dead holder, or one whose ADD never finished, is a sandbox that changed (torn down, replaced).
The holder's identity is its PID and start ticks, as a shim's container's is.

    {"attempt": n, "id": "<uid>-<n>", "holder": {"pid", "start"}, "netns_inode": int,
     "ifname": "eth0", "result": <the CNI ADD result> | null, "ips": ["10.244.1.5"]}

The error texts are containerd's, which the kubelet puts after "Failed to create pod sandbox:
rpc error: code = Unknown desc = " (kubelet/podworker.py).
"""
from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from kubemu.nsutil import ns_inode

from . import cni, holder, volumedirs
from .cnishell import CNI
from .podcgroups import CgroupError, PodCgroups
from .sandbox import CreateSandbox
from .shim import read_json, write_json

log = logging.getLogger("kubelet")

SANDBOX_FILE = "sandbox.json"
IFNAME = "eth0"


class SandboxFailed(Exception):
    """A sandbox could not be made or removed; the text is the runtime's description."""


@dataclass(frozen=True)
class Record:
    attempt: int
    id: str
    pid: int
    start: int
    netns_inode: int
    result: dict | None  # None: the ADD never finished
    ips: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return self.result is not None

    def as_json(self) -> dict:
        return {"attempt": self.attempt, "id": self.id, "holder": {"pid": self.pid, "start": self.start},
                "netns_inode": self.netns_inode, "ifname": IFNAME, "result": self.result, "ips": list(self.ips)}

    @classmethod
    def from_json(cls, data) -> "Record | None":
        """None unless the file says what the kubelet wrote."""
        try:
            h = data["holder"]
            record = cls(int(data["attempt"]), str(data["id"]), int(h["pid"]), int(h["start"]),
                         int(data["netns_inode"]), data.get("result"), tuple(str(ip) for ip in data.get("ips") or ()))
        except (KeyError, TypeError, ValueError):
            return None
        return record if record.result is None or isinstance(record.result, dict) else None


def read_record(pod_dir: str) -> Record | None:
    data = read_json(os.path.join(pod_dir, SANDBOX_FILE))
    return None if data is None else Record.from_json(data)


class Sandboxes:
    def __init__(self, network: CNI, cgroups: PodCgroups | None = None):
        self.cni = network
        self.cgroups = cgroups if cgroups is not None and cgroups.roots else None

    def create(self, pod_dir: str, pod: dict, action: CreateSandbox) -> Record:
        """The pod cgroup, the holder (in it), CNI ADD in its network namespace. Raises
        SandboxFailed, having undone what it did."""
        procs: list[str] = []
        if self.cgroups is not None:
            try:
                self.cgroups.ensure_pod(pod)
                procs = self.cgroups.sandbox_procs(pod)
            except CgroupError as exc:
                raise SandboxFailed(f"failed to create pod cgroup for sandbox {_quote(action.id)}: {exc}") from None
        try:
            info = holder.start(pod_dir, action.hostname, procs)
        except holder.SandboxError as exc:
            raise SandboxFailed(f"failed to start sandbox {_quote(action.id)}: {exc}") from None
        if info.netns_inode == ns_inode(os.getpid(), "net"):  # never let a plugin loose on ours
            holder.kill(info.pid, info.start_ticks)
            raise SandboxFailed(f"failed to start sandbox {_quote(action.id)}: its network namespace is the kubelet's")
        for name, err in volumedirs.mount_memory_volumes(pod_dir, pod, info.pid).items():
            holder.kill(info.pid, info.start_ticks)
            raise SandboxFailed(f"failed to start sandbox {_quote(action.id)}: Memory emptyDir {_quote(name)}: {err}")
        path = os.path.join(pod_dir, SANDBOX_FILE)
        record = Record(action.attempt, action.id, info.pid, info.start_ticks, info.netns_inode, None, ())
        try:
            write_json(path, record.as_json())
            result = self.cni.add(action.id, info.netns_path, IFNAME, cni_args(pod, action.id))  # undone if failed
            record = Record(record.attempt, record.id, record.pid, record.start, record.netns_inode, result.raw,
                            tuple(result.ips))
            write_json(path, record.as_json())
        except (cni.CNIError, cni.ConfigError) as exc:
            self._undo(path, record, delete=False)
            raise SandboxFailed(f"failed to setup network for sandbox {_quote(action.id)}: {exc}") from None
        except OSError as exc:  # the pod directory could not be written
            self._undo(path, record, delete=record.complete)
            raise SandboxFailed(f"failed to record sandbox {_quote(action.id)}: {exc.strerror or exc}") from None
        return record

    def _undo(self, path: str, record: Record, delete: bool) -> None:
        if delete:
            try:
                self.cni.delete(record.id, f"/proc/{record.pid}/ns/net", IFNAME, record.result)
            except (cni.CNIError, cni.ConfigError) as exc:
                log.warning("sandbox %s: %s", record.id, exc)
        holder.kill(record.pid, record.start)
        _unlink(path)

    def remove(self, pod_dir: str, pod: dict) -> None:
        """CNI DEL (the holder's namespace while it lives, else none: the plugins free the IP),
        kill the holder, forget the sandbox. Raises SandboxFailed if the DEL failed."""
        record = read_record(pod_dir)
        if record is None:
            return
        alive = holder.alive(record.pid, record.start)
        try:
            self.cni.delete(record.id, f"/proc/{record.pid}/ns/net" if alive else None, IFNAME, record.result,
                            cni_args(pod, record.id))
        except (cni.CNIError, cni.ConfigError) as exc:
            raise SandboxFailed(f"failed to destroy network for sandbox {_quote(record.id)}: {exc}") from None
        holder.kill(record.pid, record.start)
        _unlink(os.path.join(pod_dir, SANDBOX_FILE))

    @staticmethod
    def alive(record: Record) -> bool:
        return holder.alive(record.pid, record.start)


class HolderWatch:
    """A pidfd per holder in the loop: `on_death(pod_dir, attempt)` the moment one exits."""

    def __init__(self, loop: asyncio.AbstractEventLoop, on_death: Callable[[str, int], None]):
        self.loop = loop
        self.on_death = on_death
        self._fds: dict[str, tuple[int, int]] = {}  # pod dir -> (pidfd, attempt)

    def watch(self, pod_dir: str, record: Record) -> None:
        self.forget(pod_dir)
        try:
            fd = os.pidfd_open(record.pid)
        except ProcessLookupError:
            fd = None
        except OSError as exc:
            log.warning("cannot watch the sandbox holder %d of %s: %s", record.pid, os.path.basename(pod_dir),
                        exc.strerror)
            return
        if fd is not None and not holder.alive(record.pid, record.start):  # the PID is another's by now
            os.close(fd)
            fd = None
        if fd is None:
            self.loop.call_soon(self.on_death, pod_dir, record.attempt)
            return
        self._fds[pod_dir] = (fd, record.attempt)
        self.loop.add_reader(fd, self._exited, pod_dir)

    def forget(self, pod_dir: str) -> None:
        held = self._fds.pop(pod_dir, None)
        if held is not None:
            self.loop.remove_reader(held[0])
            os.close(held[0])

    def close(self) -> None:
        for pod_dir in list(self._fds):
            self.forget(pod_dir)

    def _exited(self, pod_dir: str) -> None:
        attempt = self._fds[pod_dir][1]
        self.forget(pod_dir)
        self.on_death(pod_dir, attempt)


def cni_args(pod: dict, sandbox: str) -> dict[str, str]:
    """CNI_ARGS as containerd passes them for a Kubernetes pod."""
    meta = pod.get("metadata") or {}
    return {"K8S_POD_NAMESPACE": meta.get("namespace") or "default", "K8S_POD_NAME": meta.get("name") or "",
            "K8S_POD_INFRA_CONTAINER_ID": sandbox, "K8S_POD_UID": meta.get("uid") or ""}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
