"""Which processes are a node's: only what kubemu itself started and recorded.

When kubemu starts a node's init it writes <node dir>/owner.json: init's PID and start time,
and the cgroup it created for the node, if it could create one (kubemu/cgroups.py):

    <cgroup hierarchy or delegated subtree>/kubemu/<hash of the state dir>/<node>/init.scope

init is moved into `init.scope` before it execs, so the node's cgroup holds everything init
ever starts, including a process that double-forked away from its parent. init sits in a leaf
of its own because cgroup v2 lets a cgroup hand controllers down only when no process sits in
it: per-pod cgroups can later be siblings of init.scope, with the node's limits above them.

The kubelet makes the node's pod cgroups below the same name in every hierarchy that carries a
controller it limits with (kubelet/podcgroups.py: on hybrid machines the v1 memory, cpu,
cpuacct and pids hierarchies): releasing a node removes its subtree in each of them too.

Without a cgroup (not root, read-only cgroupfs, KUBEMU_CGROUPS=0) a node's processes are its
init (PID and start time as recorded, so a reused PID is never taken for it) and init's
descendants: init is a child subreaper and every shim re-parents to it, so while init lives
that is every process of the node; one that escaped to PID 1 is not found.

Never by environment variable or command line: a user's process may carry either.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from . import cgroups
from .cgroups import Cgroup
from .child import proc_stat

RECORD = "owner.json"
CGROUP_ROOT = "kubemu"
INIT_LEAF = "init.scope"
FALLBACK_NOTE = ("no cgroup kubemu may create (it takes root, or a cgroup v2 subtree delegated to you): "
                 "a node's processes are found as its init's descendants, and one that escapes them "
                 "may outlive `kubemu down`")


def cluster_cgroup_name(state_root: Path) -> str:
    """A state directory's cgroup, relative to where kubemu makes cgroups (cgroups.create):
    a hash of its path (a path may hold characters a cgroup name may not)."""
    return f"{CGROUP_ROOT}/{hashlib.sha256(str(state_root).encode()).hexdigest()[:12]}"


def cgroup_name(state_root: Path, node: str) -> str:
    """A node's cgroup, relative to where kubemu makes cgroups."""
    return f"{cluster_cgroup_name(state_root)}/{node}"


@dataclass(frozen=True)
class Owned:
    """What kubemu recorded about a node it started."""
    pid: int
    start: int  # init's start time in clock ticks since boot (/proc/<pid>/stat), exact
    cgroup: Cgroup | None
    name: str | None = field(default=None, compare=False)  # the node's cgroup name, known once loaded

    def save(self, node_dir: Path) -> None:
        tmp = node_dir / f".{RECORD}.tmp"
        tmp.write_text(json.dumps({"init": {"pid": self.pid, "start": self.start},
                                   "cgroup": self.cgroup.to_json() if self.cgroup else None,
                                   "node_dir": _where(node_dir)}))
        os.replace(tmp, node_dir / RECORD)

    @classmethod
    def load(cls, node_dir: Path) -> Owned | None:
        try:
            data = json.loads((node_dir / RECORD).read_text())
            cg = Cgroup.from_json(data["cgroup"]) if data["cgroup"] else None
            name = cgroup_name(node_dir.parent.parent, node_dir.name)
            owned = cls(int(data["init"]["pid"]), int(data["init"]["start"]), cg, name)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        # a record naming any other cgroup is not one kubemu wrote: never kill by it
        if cg is not None and not cg.path.as_posix().endswith("/" + name):
            return None
        # nor one written for another directory (a copied state dir names another cluster's
        # init); a record from before kubemu wrote `node_dir` has none to compare
        if data.get("node_dir", _where(node_dir)) != _where(node_dir):
            return None
        return owned

    def init(self) -> psutil.Process | None:
        """The recorded init if it still runs (same PID and start time, not a zombie)."""
        stat = proc_stat(self.pid)
        if stat is None or stat[1] != self.start or stat[0] == "Z":
            return None
        try:
            return psutil.Process(self.pid)
        except psutil.Error:
            return None

    def processes(self) -> list[psutil.Process]:
        """The node's live processes: its cgroup's, or its init and init's descendants."""
        if self.cgroup is not None:
            return _live(self.cgroup.pids())
        init = self.init()
        if init is None:
            return []
        try:
            return [init] + init.children(recursive=True)
        except psutil.Error:
            return [init]

    def settle(self, timeout: float) -> None:
        """Wait, up to `timeout`, for the node's cgroup to empty by itself: once init has gone,
        its shims and sandbox holders follow it, and their containers them (PR_SET_PDEATHSIG),
        within moments; only what outlives that is a straggler to kill."""
        deadline = time.monotonic() + timeout
        while self.cgroup is not None and self.cgroup.populated() and time.monotonic() < deadline:
            time.sleep(0.02)

    def kill(self, timeout: float) -> list[int]:
        """SIGKILL every process of the node at once (a power cut) and wait until they are
        gone (or zombies: their parent reaps them, not us); the PIDs that were killed."""
        procs = self.processes()
        if self.cgroup is not None:
            deadline = time.monotonic() + timeout
            while self.cgroup.populated() and time.monotonic() < deadline:
                self.cgroup.kill()  # again if one forked meanwhile (v1)
                time.sleep(0.02)
            return [p.pid for p in procs]
        return kill_all(procs, timeout)

    def release(self, timeout: float = 10.0) -> None:
        """Remove the cgroups kubemu created for the node once they are empty: the recorded one,
        and the node's subtree in every other hierarchy (a process left there is SIGKILLed
        first: only kubemu's kubelet puts processes in them)."""
        if self.cgroup is not None:
            remove_node_cgroup(self.cgroup)
        for cg, _ in cgroups.everywhere(self.name) if self.name else ():
            deadline = time.monotonic() + timeout
            while cg.populated() and time.monotonic() < deadline:
                cg.kill()
                time.sleep(0.02)
            remove_node_cgroup(cg)


def _where(node_dir: Path) -> str:
    """A node directory's identity: its absolute path (a copy of it elsewhere is not it)."""
    return os.path.abspath(node_dir)


def remove_node_cgroup(cg: Cgroup) -> None:
    """Remove a node's cgroup, then the state directory's and kubemu's above it as each is
    left empty: all three were made by kubemu (`cgroup_name`), and `down` leaves none."""
    try:
        cg.remove()
        os.rmdir(cg.path.parent)
        os.rmdir(cg.path.parent.parent)
    except OSError:
        pass  # another node's (or another cluster's) cgroup is still there, or a process is


def _live(pids: list[int]) -> list[psutil.Process]:
    procs = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE:
                procs.append(proc)
        except psutil.Error:
            continue
    return procs


def kill_all(procs: list[psutil.Process], timeout: float) -> list[int]:
    """SIGKILL the processes and wait until they are gone; their PIDs."""
    for proc in procs:
        try:
            proc.kill()  # psutil checks the start time first: a reused PID is not killed
        except psutil.Error:
            pass
    wait_gone(procs, timeout)
    return [p.pid for p in procs]


def gone(proc: psutil.Process) -> bool:
    """Exited: no such process, or a zombie (only its parent can reap it, and a process that
    is not the parent must not wait for that)."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def wait_gone(procs: list[psutil.Process], timeout: float, interval: float = 0.05) -> list[psutil.Process]:
    """Wait until every process is gone or a zombie; those still running at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in procs if not gone(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(interval)
