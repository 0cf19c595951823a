"""A container's mounts, planned: what the shim's child does in the container's own mount
namespace, step by step, before exec (kubelet/shim.py performs the steps). I/O-free: whether a
path exists and which mount it is on are asked through callbacks.

A mount (ContainerSpec.mounts, kubelet/runtime.py) is {target, source, type "bind"|"tmpfs",
read_only, size, file}, performed in the order given (parents before children). As runc does
without an image, the container's root is the host's; so a target that does not exist cannot
simply be created, that would write to the host's file system. Instead its nearest existing
ancestor A is covered, in the container's namespace only, by an overlay whose lower layer is A
and whose upper layer is on a tmpfs private to the container (its writable layer, gone with
it, as a container's is when it restarts); the missing directories (or the file, for a file
bind) are made in that overlay, then the volume is mounted there. Every mount the host had
below A is bound back on top of the overlay, so the container still sees /proc, /dev, ...
When A is `/`, the overlay becomes the container's root. Nothing is ever created outside a
tmpfs the container owns; what the container writes into A lands in its writable layer.
"""
from __future__ import annotations

import posixpath
from collections.abc import Callable
from dataclasses import dataclass

TYPES = ("bind", "tmpfs")


class MountError(Exception):
    """A mount that cannot be performed; the message is runc's."""


@dataclass(frozen=True)
class Mount:
    target: str
    source: str | None
    type: str
    read_only: bool = False
    size: int | None = None  # tmpfs bytes
    file: bool = False  # a bind of one file (e.g. /etc/hosts), not a directory

    def error(self, why: str) -> MountError:
        return MountError(f'error mounting "{self.source or self.type}" to rootfs at "{self.target}": {why}')


# --- the steps ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Overlay:
    """Cover the existing directory `lower` with an overlay (upper layer on the container's
    tmpfs), binding back the mounts below it; `/` becomes the container's new root."""
    lower: str


@dataclass(frozen=True)
class Create:
    """Make the missing `path` (and its missing parents) inside an overlay: a directory, or an
    empty file when `file`."""
    path: str
    file: bool


@dataclass(frozen=True)
class Bind:
    source: str
    target: str


@dataclass(frozen=True)
class ReadOnly:
    """Remount the bind at `target` read-only (a bind mount cannot be made read-only at once)."""
    target: str


@dataclass(frozen=True)
class Tmpfs:
    target: str
    size: int | None
    read_only: bool


Step = Overlay | Create | Bind | ReadOnly | Tmpfs


def parse(entries: object) -> list[Mount]:
    """The spec's `mounts`, checked: MountError for the first that is malformed or unsafe."""
    if not isinstance(entries, list):
        raise MountError(f"mounts: expected a list, got {entries!r}")
    mounts = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise MountError(f"mounts: expected an object, got {entry!r}")
        mount = Mount(target=entry.get("target"), source=entry.get("source"), type=entry.get("type"),
                      read_only=entry.get("read_only") or False, size=entry.get("size"),
                      file=entry.get("file") or False)
        _check(mount)
        mounts.append(Mount(_clean(mount.target), mount.source and _clean(mount.source), mount.type,
                            mount.read_only, mount.size, mount.file))
    return mounts


def _clean(path: str) -> str:
    """An absolute path without empty or "." components (".." was refused)."""
    return "/" + "/".join(part for part in path.split("/") if part not in ("", "."))


def _check(mount: Mount) -> None:
    if mount.type not in TYPES:
        raise mount.error(f"unknown mount type {mount.type!r}")
    _check_path(mount, mount.target, "target")
    if _clean(mount.target) == "/":
        raise mount.error("a volume cannot be mounted on the container's root")
    if mount.type == "bind":
        _check_path(mount, mount.source, "source")
    elif mount.source is not None:
        raise mount.error("a tmpfs mount has no source")
    if mount.size is not None and not (isinstance(mount.size, int) and not isinstance(mount.size, bool)
                                       and mount.size > 0):
        raise mount.error(f"invalid tmpfs size {mount.size!r}")
    if mount.file and mount.type != "bind":
        raise mount.error("only a bind mount can be of a single file")
    if not isinstance(mount.read_only, bool) or not isinstance(mount.file, bool):
        raise mount.error("read_only and file must be true or false")


def _check_path(mount: Mount, path: object, what: str) -> None:
    if not isinstance(path, str) or not path.startswith("/"):
        raise mount.error(f"the {what} must be an absolute path, got {path!r}")
    if "\0" in path:
        raise mount.error(f"the {what} contains a NUL byte")
    if ".." in path.split("/"):
        raise mount.error(f"the {what} must not contain '..'")


def nearest_existing(path: str, exists: Callable[[str], bool]) -> str:
    """The deepest ancestor of `path` (itself included) that exists; `/` always does."""
    while path != "/" and not exists(path):
        path = posixpath.dirname(path)
    return path


def mount_point_of(path: str, points: list[str]) -> str:
    """The mount point `path` is on: the deepest of `points` that is it or above it."""
    best = "/"
    for point in points:
        if _under(path, point) and len(point) > len(best):
            best = point
    return best


def submounts(lower: str, points: list[str], skip: str) -> list[str]:
    """The mount points strictly below `lower` that an overlay on it would hide and that must
    be bound back: the topmost ones only (a bind with MS_REC brings what is below them), in
    their order, without `skip` (the container's own tmpfs) and what is below it. A point below
    another one is either mounted on it (brought along) or hidden by it (invisible anyway)."""
    below = [p for p in dict.fromkeys(points) if p != lower and _under(p, lower) and not _under(p, skip)]
    return [p for p in below if not any(q != p and _under(p, q) for q in below)]


def steps(mount: Mount, exists: Callable[[str], bool], overlaid: Callable[[str], bool]) -> list[Step]:
    """What performing `mount` takes. `exists(path)`: whether it exists now (a symlink counts,
    dangling or not: it is never created through); `overlaid(path)`: whether the existing
    `path` is on an overlay made for this container, so it can be written to."""
    out: list[Step] = []
    if not exists(mount.target):
        ancestor = nearest_existing(mount.target, exists)
        if not overlaid(ancestor):
            out.append(Overlay(ancestor))
        out.append(Create(mount.target, mount.file))
    if mount.type == "tmpfs":
        out.append(Tmpfs(mount.target, mount.size, mount.read_only))
        return out
    out.append(Bind(mount.source, mount.target))
    if mount.read_only:
        out.append(ReadOnly(mount.target))
    return out


def relative(path: str, lower: str) -> str:
    """`path` below `lower`, as a relative path ("" for `lower` itself)."""
    return posixpath.relpath(path, lower) if path != lower else ""


def _under(path: str, top: str) -> bool:
    return top == "/" or path == top or path.startswith(top + "/")
