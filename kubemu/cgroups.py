"""Control groups as kubemu uses them: a set of processes that no fork can leave.

A process's children are born in its cgroup, and only a write to `cgroup.procs` moves one
out, so a cgroup holds everything its first process ever started, double-forked or not. That
is how kubemu knows a node's processes (kubemu/ownership.py) without trusting what a process
says about itself (its environment, its argv).

Hierarchies, in order of preference (`hierarchies()`):
- cgroup v2 (`/sys/fs/cgroup` on most machines, `/sys/fs/cgroup/unified` on hybrid ones):
  `cgroup.kill` SIGKILLs a whole subtree at once, `cgroup.events` says whether it is empty;
- a cgroup v1 hierarchy that only groups (`pids`, else `name=systemd`): the same, done by
  listing `cgroup.procs` and killing until nothing is left.
kubemu creates its cgroups at the hierarchy's root (as root), or for a user in the cgroup v2
subtree systemd delegates to them (user@UID.service); with neither `create()` returns None
and the caller falls back. `KUBEMU_CGROUPS=0` forces that fallback.

This module knows nothing of nodes: create, join, list, kill, remove, for any cgroup.
"""
from __future__ import annotations

import errno
import os
import signal
from dataclasses import dataclass
from pathlib import Path

DISABLE_ENV = "KUBEMU_CGROUPS"
V1_GROUPING = ("pids", "name=systemd")  # v1 hierarchies used when there is no v2 one


@dataclass(frozen=True)
class Hierarchy:
    mount: Path
    version: int  # 1 or 2


def parse_mountinfo(text: str) -> list[Hierarchy]:
    """The usable cgroup hierarchies in /proc/self/mountinfo text, preferred first."""
    v2, v1 = [], {}
    for line in text.splitlines():
        fields, sep, tail = line.partition(" - ")
        parts, after = fields.split(), tail.split()
        if not sep or len(parts) < 5 or len(after) < 3:
            continue
        mount = Path(parts[4].replace("\\040", " "))
        if after[0] == "cgroup2":
            v2.append(Hierarchy(mount, 2))
        elif after[0] == "cgroup":
            for opt in after[2].split(","):
                if opt in V1_GROUPING:
                    v1.setdefault(opt, Hierarchy(mount, 1))
    return v2 + [v1[name] for name in V1_GROUPING if name in v1]


def hierarchies() -> list[Hierarchy]:
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return []
    try:
        with open("/proc/self/mountinfo") as f:
            return parse_mountinfo(f.read())
    except OSError:
        return []


@dataclass(frozen=True)
class Cgroup:
    path: Path
    version: int

    def to_json(self) -> dict:
        return {"path": str(self.path), "version": self.version}

    @classmethod
    def from_json(cls, data: dict) -> Cgroup:
        return cls(Path(data["path"]), int(data["version"]))

    def child(self, name: str) -> Cgroup:
        return Cgroup(self.path / name, self.version)

    def exists(self) -> bool:
        return (self.path / "cgroup.procs").exists()

    def open_procs(self) -> int:
        """A descriptor on cgroup.procs: writing b"0" to it moves the writer into the cgroup,
        which is how a child joins before it execs (see `join`)."""
        return os.open(self.path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)

    def pids(self) -> list[int]:
        """Every process in the cgroup and the cgroups below it (zombies are not listed)."""
        found: list[int] = []
        for directory, _subdirs, _files in os.walk(self.path):
            try:
                with open(os.path.join(directory, "cgroup.procs")) as f:
                    found += [int(line) for line in f.read().split()]
            except OSError:
                continue  # removed while walking
        return found

    def populated(self) -> bool:
        if self.version == 2:
            try:
                events = (self.path / "cgroup.events").read_text()
            except FileNotFoundError:
                return False
            return "populated 1" in events
        return bool(self.pids())

    def kill(self) -> None:
        """SIGKILL every process of the subtree. v2 does it atomically; v1 (or a kernel
        before 5.14) lists and kills, so a process forked meanwhile needs another call:
        callers repeat until `populated()` is False."""
        if (self.path / "cgroup.kill").exists():
            (self.path / "cgroup.kill").write_text("1")
            return
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        """rmdir the subtree, deepest first; a cgroup that is gone already is fine. OSError
        (EBUSY) if a process is still in it."""
        if not self.path.is_dir():
            return
        for directory, _subdirs, _files in sorted(os.walk(self.path), key=lambda w: -len(Path(w[0]).parts)):
            try:
                os.rmdir(directory)
            except FileNotFoundError:
                pass


def join(procs_fd: int) -> None:
    """For subprocess's preexec_fn: the child moves itself into the cgroup whose cgroup.procs
    `procs_fd` is open on, before it execs, so nothing it ever starts is outside it. Only a
    write(2): it runs between fork() and exec()."""
    os.write(procs_fd, b"0")


def own_cgroup(proc_self_cgroup: str) -> str:
    """Our cgroup v2 path ("/..."), from /proc/self/cgroup text; "/" if it does not say."""
    for line in proc_self_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:] or "/"
    return "/"


def writable_base(mount: Path, own: str, writable=lambda p: os.access(p, os.W_OK)) -> Path:
    """Where kubemu may make cgroups in a v2 hierarchy: its root when we may write there
    (root), else the highest cgroup at or above our own that we may write to, as systemd
    delegates user@UID.service to its user (moving a process needs write access to the
    common ancestor of where it is and where it goes: the highest is the safest)."""
    parts = [p for p in own.split("/") if p]
    for depth in range(len(parts) + 1):
        base = mount.joinpath(*parts[:depth])
        if writable(base) and writable(base / "cgroup.procs"):
            return base
    return mount


def candidates(relative: str | os.PathLike) -> list[Cgroup]:
    """Where `relative` is (or would be made) in each hierarchy, preferred first."""
    own = "/"
    try:
        with open("/proc/self/cgroup") as f:
            own = own_cgroup(f.read())
    except OSError:
        pass
    return [Cgroup((writable_base(h.mount, own) if h.version == 2 else h.mount) / relative, h.version)
            for h in hierarchies()]


def create(relative: str | os.PathLike) -> Cgroup | None:
    """mkdir `relative` (and its parents) in the first hierarchy we may write to; None if
    there is none (read-only, no cgroupfs, not root and nothing delegated, KUBEMU_CGROUPS=0)."""
    for cg in candidates(relative):
        try:
            cg.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.ENOTDIR):
                continue
            raise
        if cg.exists():
            return cg
    return None
