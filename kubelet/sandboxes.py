"""Carrying out the sandbox decisions of kubelet/sandbox.py: holders, CNI, pod cgroups, files.

`Sandboxes.create` and `.remove` block (a holder's start, the CNI plugins): the
kubelet runs them in a thread, off its event loop. `HolderWatch` holds a pidfd on each holder in
the loop, so a holder's death is heard at once (as kubelet/shimwatch.py hears a shim's), never
polled.

A sandbox is written down in `<pod dir>/sandbox.json`, twice: once its holder runs (no `result`
yet, before anything else is done for it, ADD included), and once CNI ADD gave it its addresses.
Until the first, the holder's own `sandbox.pending` names it: the next create or remove for the
pod kills a holder named there but not recorded. A restarted kubelet adopts what it finds there: a
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

from kubemu.nsutil import NamespaceGone, open_ns

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
        self.cgroups = cgroups if cgroups is not None and cgroups.holds_pods else None

    def create(self, pod_dir: str, pod: dict, action: CreateSandbox) -> Record:
        """The pod cgroup, the holder (in it), CNI ADD in its network namespace. Raises
        SandboxFailed, having undone what it did; any other exception is re-raised after the
        same undoing. The holder is written down before anything else can fail, so a kubelet
        that dies meanwhile finds it and removes it (`remove`) rather than leaking it."""
        procs: list[str] = []
        if self.cgroups is not None:
            try:
                self.cgroups.ensure_pod(pod)
                procs = self.cgroups.sandbox_procs(pod)
            except CgroupError as exc:
                raise SandboxFailed(f"failed to create pod cgroup for sandbox {_quote(action.id)}: {exc}") from None
        _reap_unrecorded(pod_dir)
        try:
            info = holder.start(pod_dir, action.hostname, procs)  # never our own netns (holder checks)
        except holder.SandboxError as exc:
            raise SandboxFailed(f"failed to start sandbox {_quote(action.id)}: {exc}") from None
        path = os.path.join(pod_dir, SANDBOX_FILE)
        record = Record(action.attempt, action.id, info.pid, info.start_ticks, info.netns_inode, None, ())
        added = False  # once ADD may have begun, undoing DELs
        try:
            write_json(path, record.as_json())
            holder.forget_pending(pod_dir)  # recorded: the holder's own word is not needed any more
            failed = volumedirs.mount_memory_volumes(pod_dir, pod, info.pid, info.start_ticks)
            if failed:
                name, err = next(iter(failed.items()))
                raise SandboxFailed(f"failed to start sandbox {_quote(action.id)}: Memory emptyDir {_quote(name)}: "
                                    f"{err}")
            fd = self._open_netns(record)
            try:
                added = True
                result = self.cni.add(action.id, fd, IFNAME, cni_args(pod, action.id))  # undone by cni if failed
            finally:
                os.close(fd)
            record = Record(record.attempt, record.id, record.pid, record.start, record.netns_inode, result.raw,
                            tuple(result.ips))
            write_json(path, record.as_json())
        except (cni.CNIError, cni.ConfigError, NamespaceGone) as exc:  # a failed ADD was DELeted by cni.add
            self._undo(path, record, pod, delete=False)
            raise SandboxFailed(f"failed to setup network for sandbox {_quote(action.id)}: {exc}") from None
        except OSError as exc:  # the pod directory could not be written
            self._undo(path, record, pod, delete=added)
            raise SandboxFailed(f"failed to record sandbox {_quote(action.id)}: {exc.strerror or exc}") from None
        except SandboxFailed:
            self._undo(path, record, pod, delete=False)
            raise
        except BaseException:
            self._undo(path, record, pod, delete=added)
            raise
        return record

    def _open_netns(self, record: Record) -> int:
        """The holder's network namespace as a descriptor, checked to be the recorded holder's:
        NamespaceGone otherwise (a plugin must never be given a reused PID's namespace)."""
        return open_ns(record.pid, "net", record.start, record.netns_inode)

    def _delete(self, record: Record, pod: dict) -> None:
        """CNI DEL in the holder's namespace while the recorded holder lives, else with none
        (the plugins free what lives outside it: the IP, the bridge's end of the veth)."""
        try:
            fd = self._open_netns(record)
        except NamespaceGone:
            fd = None
        try:
            self.cni.delete(record.id, fd, IFNAME, record.result, cni_args(pod, record.id))
        finally:
            if fd is not None:
                os.close(fd)

    def _undo(self, path: str, record: Record, pod: dict, delete: bool) -> None:
        if delete:
            try:
                self._delete(record, pod)
            except (cni.CNIError, cni.ConfigError) as exc:
                log.warning("sandbox %s: %s", record.id, exc)
        holder.kill(record.pid, record.start)
        _unlink(path)

    def remove(self, pod_dir: str, pod: dict) -> None:
        """CNI DEL, kill the holder, forget the sandbox. A record without a result (a kubelet
        that died during ADD, or before it) is DELeted too: DEL is idempotent. Raises
        SandboxFailed if the DEL failed."""
        record = _reap_unrecorded(pod_dir)
        if record is None:
            return
        try:
            self._delete(record, pod)
        except (cni.CNIError, cni.ConfigError) as exc:
            raise SandboxFailed(f"failed to destroy network for sandbox {_quote(record.id)}: {exc}") from None
        holder.kill(record.pid, record.start)
        _unlink(os.path.join(pod_dir, SANDBOX_FILE))

    def check(self, pod_dir: str, record: Record) -> None:
        """CNI CHECK of an adopted sandbox against its live holder. SandboxFailed if the holder
        is gone or the plugins find its network not as ADD left it."""
        from .agent import POD_FILE  # loaded already: the agent is what calls this

        pod = read_json(os.path.join(pod_dir, POD_FILE)) or {}
        try:
            fd = self._open_netns(record)
        except NamespaceGone as exc:
            raise SandboxFailed(f"sandbox {_quote(record.id)} is not running: {exc}") from None
        try:
            self.cni.check(record.id, fd, IFNAME, record.result or {}, cni_args(pod, record.id))
        except (cni.CNIError, cni.ConfigError) as exc:
            raise SandboxFailed(f"failed to check network for sandbox {_quote(record.id)}: {exc}") from None
        finally:
            os.close(fd)

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


def _reap_unrecorded(pod_dir: str) -> Record | None:
    """The pod's recorded sandbox, after killing a holder that was started for it but never
    recorded (its kubelet died in between: holder.reap_pending)."""
    record = read_record(pod_dir)
    holder.reap_pending(pod_dir, None if record is None else (record.pid, record.start))
    return record


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
