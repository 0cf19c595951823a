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

Limits need controllers, and a hybrid machine mounts them apart: memory, cpu, cpuacct and pids
may each be a v1 hierarchy of their own while the v2 one carries none of them (or only hugetlb).
`controlled()` lists the grouping hierarchy plus every hierarchy carrying one of CONTROLLERS,
each with the controllers of ours it carries; a cgroup made "everywhere" (`everywhere()`) has
the same relative path in each. cgroup v2 hands a controller to a cgroup only when its parent
lists it in `cgroup.subtree_control`, and a cgroup that holds processes may not do that (the
root excepted): `Cgroup.delegate()` enables them, and processes live only in leaves.

This module knows nothing of nodes or pods: create, join, list, kill, remove, limit and read
usage, for any cgroup.
"""
from __future__ import annotations

import errno
import os
import signal
from dataclasses import dataclass
from pathlib import Path

DISABLE_ENV = "KUBEMU_CGROUPS"
V1_GROUPING = ("pids", "name=systemd")  # v1 hierarchies used when there is no v2 one
CONTROLLERS = ("memory", "cpu", "cpuacct", "pids")  # what kubemu limits and reads (v1 names)
V2_CONTROLLERS = ("memory", "cpu", "pids")  # v2 has no cpuacct: every cgroup has cpu.stat


@dataclass(frozen=True)
class Hierarchy:
    mount: Path
    version: int  # 1 or 2


def _cgroup_mounts(text: str):
    """(mount point, "cgroup" | "cgroup2", super options) of each cgroup mount in mountinfo text."""
    for line in text.splitlines():
        fields, sep, tail = line.partition(" - ")
        parts, after = fields.split(), tail.split()
        if sep and len(parts) >= 5 and len(after) >= 3 and after[0] in ("cgroup", "cgroup2"):
            yield Path(parts[4].replace("\\040", " ")), after[0], after[2].split(",")


def parse_mountinfo(text: str) -> list[Hierarchy]:
    """The usable grouping hierarchies in /proc/self/mountinfo text, preferred first."""
    v2, v1 = [], {}
    for mount, fstype, options in _cgroup_mounts(text):
        if fstype == "cgroup2":
            v2.append(Hierarchy(mount, 2))
        else:
            for opt in options:
                if opt in V1_GROUPING:
                    v1.setdefault(opt, Hierarchy(mount, 1))
    return v2 + [v1[name] for name in V1_GROUPING if name in v1]


def parse_v1_controllers(text: str) -> dict[str, Hierarchy]:
    """Controller (of CONTROLLERS) -> the v1 hierarchy it is mounted in, from mountinfo text."""
    found: dict[str, Hierarchy] = {}
    for mount, fstype, options in _cgroup_mounts(text):
        for opt in options if fstype == "cgroup" else ():
            if opt in CONTROLLERS:
                found.setdefault(opt, Hierarchy(mount, 1))
    return found


@dataclass(frozen=True)
class Controlled:
    """A hierarchy kubemu makes cgroups in, and which of CONTROLLERS it carries."""
    hierarchy: Hierarchy
    controllers: frozenset[str]


def plan_controlled(grouping: list[Hierarchy], v1: dict[str, Hierarchy],
                    v2_controllers: dict[Path, str]) -> list[Controlled]:
    """The hierarchies a cgroup is made in "everywhere": the preferred grouping one first, then
    each v1 hierarchy carrying a controller of ours. A v2 hierarchy carries what its
    `cgroup.controllers` text (`v2_controllers[mount]`) lists of V2_CONTROLLERS."""
    chosen: dict[Path, tuple[Hierarchy, set[str]]] = {}
    for h in grouping[:1]:
        wanted = V2_CONTROLLERS if h.version == 2 else ()
        chosen[h.mount] = (h, {c for c in v2_controllers.get(h.mount, "").split() if c in wanted})
    for name in CONTROLLERS:
        if name in v1:
            chosen.setdefault(v1[name].mount, (v1[name], set()))[1].add(name)
    return [Controlled(h, frozenset(names)) for h, names in chosen.values()]


def _mountinfo() -> str:
    if os.environ.get(DISABLE_ENV, "1") == "0":
        return ""
    try:
        with open("/proc/self/mountinfo") as f:
            return f.read()
    except OSError:
        return ""


def hierarchies() -> list[Hierarchy]:
    return parse_mountinfo(_mountinfo())


def controlled() -> list[Controlled]:
    """`plan_controlled` for this machine."""
    text = _mountinfo()
    grouping = parse_mountinfo(text)
    v2 = {h.mount: Cgroup(h.mount, 2).read("cgroup.controllers") or "" for h in grouping if h.version == 2}
    return plan_controlled(grouping, parse_v1_controllers(text), v2)


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

    def read(self, name: str) -> str | None:
        """A file of the cgroup's, None if it (or the cgroup) is not there."""
        try:
            return (self.path / name).read_text()
        except OSError:
            return None

    def write(self, name: str, value: str) -> None:
        """Write a control file (OSError as the kernel answers: EINVAL, EBUSY, ...)."""
        with open(self.path / name, "w") as f:
            f.write(value)

    def delegate(self, controllers, below: Path) -> frozenset[str]:
        """cgroup v2: enable `controllers` (those available) in the `cgroup.subtree_control` of
        every cgroup below `below` (the mount, or the subtree delegated to us, which is not
        kubemu's to change: what it does not hand down, kubemu does without) down to this one,
        so its children get them; the ones this cgroup's children get. A level that refuses
        (it holds processes) keeps what it had."""
        parts = self.path.relative_to(below).parts
        for depth in range(1, len(parts) + 1):
            level_cg = Cgroup(below.joinpath(*parts[:depth]), 2)
            have = set((level_cg.read("cgroup.subtree_control") or "").split())
            add = [c for c in controllers if c in (level_cg.read("cgroup.controllers") or "").split() and c not in have]
            if add:
                try:
                    level_cg.write("cgroup.subtree_control", " ".join(f"+{c}" for c in add))
                except OSError:
                    pass
        return frozenset(c for c in (self.read("cgroup.subtree_control") or "").split() if c in controllers)

    def cpu_seconds(self) -> float | None:
        """CPU time of the subtree since it was made: cpuacct.usage (v1, ns), cpu.stat
        usage_usec (v2); None where the hierarchy has neither."""
        if self.version == 1:
            text = self.read("cpuacct.usage")
            return int(text) / 1e9 if text and text.strip().isdigit() else None
        usec = stat_field(self.read("cpu.stat") or "", "usage_usec")
        return None if usec is None else usec / 1e6

    def memory_working_set(self) -> int | None:
        """The kubelet's (cAdvisor's) working set: usage minus inactive file pages, what an
        eviction or `kubectl top` counts; None without a memory controller here."""
        if self.version == 1:
            usage, inactive = self.read("memory.usage_in_bytes"), "total_inactive_file"
        else:
            usage, inactive = self.read("memory.current"), "inactive_file"
        if usage is None or not usage.strip().isdigit():
            return None
        return max(0, int(usage) - (stat_field(self.read("memory.stat") or "", inactive) or 0))

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


def stat_field(text: str, name: str) -> int | None:
    """A "key value" line's value in a cgroup stat file (cpu.stat, memory.stat, memory.events,
    memory.oom_control), None if absent."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name and value.strip().lstrip("-").isdigit():
            return int(value)
    return None


def oom_kills(text: str) -> int:
    """How many of a memory cgroup's processes the kernel's OOM killer killed, from its
    memory.oom_control (v1, `oom_kill N`, kernel >= 4.13) or memory.events (v2) text."""
    return stat_field(text, "oom_kill") or 0


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


def base(h: Hierarchy) -> Path:
    """Where kubemu makes cgroups in a hierarchy: a v2 one's writable base (`writable_base`),
    a v1 one's root (only root may write there; v1 knows no delegation)."""
    if h.version == 1:
        return h.mount
    own = "/"
    try:
        with open("/proc/self/cgroup") as f:
            own = own_cgroup(f.read())
    except OSError:
        pass
    return writable_base(h.mount, own)


def candidates(relative: str | os.PathLike) -> list[Cgroup]:
    """Where `relative` is (or would be made) in each hierarchy, preferred first."""
    return [Cgroup(base(h) / relative, h.version) for h in hierarchies()]


def everywhere(relative: str | os.PathLike) -> list[tuple[Cgroup, frozenset[str]]]:
    """Where `relative` is (or would be made) in every hierarchy of `controlled()`, with the
    controllers of ours each carries."""
    return [(Cgroup(base(c.hierarchy) / relative, c.hierarchy.version), c.controllers) for c in controlled()]


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
