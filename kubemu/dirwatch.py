"""An async directory watcher: inotify, driven by the asyncio loop, nothing running while idle.

    async with DirWatch(path, recursive=True, max_depth=2, suffixes=(".json",)) as changes:
        async for batch in changes:          # [(kind, path), ...]
            ...

The inotify descriptor is a reader of the running loop (`loop.add_reader`): the kernel's
events are read on the loop iteration after they arrive, and a quiet directory costs no
wakeup at all (no polling step, no debounce). A batch is everything read since the consumer
last asked, in the kernel's order, exact duplicates dropped.

Kinds:
  "added"     a name appeared: created (IN_CREATE, possibly still empty) or renamed into
              the tree (IN_MOVED_TO, the way files are written atomically)
  "modified"  a file opened for writing was closed (IN_CLOSE_WRITE): a write is complete
  "deleted"   a name went away: unlinked (IN_DELETE) or renamed out (IN_MOVED_FROM), or the
              root itself was deleted (then the iteration ends after that batch)
  "rescan"    (path = the root) the kernel's event queue overflowed, or ours did: events
              were lost, the caller should relist everything (level-based). The watches
              themselves are repaired before the batch is handed out.

IN_MODIFY is deliberately not watched: a file appended to by a running process (a log)
wakes nobody until it is closed.

Recursion: with recursive=True, every directory down to `max_depth` levels below the root
(the root is level 0; None = no limit) is watched, and a directory that appears later is
watched as soon as its event is read. Anything made inside it before its watch existed has
no event of its own, so the new directory is scanned right after its watch is added and what
is found is reported as "added" in the same batch (the classic inotify race). A file created
in that window may therefore be reported twice; callers that care deduplicate. Directories
that are deleted or renamed away drop their watch descriptors.

`suffixes` filters what is yielded (a path must end with one of them; "rescan" always
passes), cheaply, before anything reaches the consumer; directories are subject to it like
files. The watches are in place when the constructor returns, so "watch, then list" misses
nothing. A root that does not exist raises FileNotFoundError, unless create=True (then it is
made, parents included); a root that is renamed goes on being watched, reported under its old
path. Linux only.
"""
from __future__ import annotations

import asyncio
import ctypes
import errno
import os
from collections.abc import Iterable

import inotify_simple
from inotify_simple import INotify, flags, parse_events

# inotify_simple finds libc with ctypes.util.find_library, which runs `ldconfig -p` as a child
# process (milliseconds of every kubelet start, and an orphan if the kubelet dies meanwhile):
# the C library is already loaded into this process, so hand it that one.
if inotify_simple._libc is None:
    inotify_simple._libc = ctypes.CDLL(None, use_errno=True)

ADDED, MODIFIED, DELETED, RESCAN = "added", "modified", "deleted", "rescan"
Change = tuple[str, str]  # (kind, path)

MASK = (flags.CREATE | flags.MOVED_TO | flags.CLOSE_WRITE | flags.DELETE | flags.MOVED_FROM
        | flags.DELETE_SELF | flags.ONLYDIR | flags.EXCL_UNLINK)  # no IN_MODIFY: see above
SUBDIR_MASK = MASK | flags.DONT_FOLLOW  # the root may be a symlink; what is under it is not followed
READ_SIZE = 64 * 1024  # many events per read(2): 16 bytes + the name's, each
MAX_PENDING = 16_384  # unconsumed changes held; beyond that they are dropped for a "rescan"


class DirWatch:
    """Watch a directory (optionally a tree, depth-limited) for files appearing or changing.
    An async iterator of batches of (kind, path), and an async context manager; see the
    module's docstring for the kinds and guarantees."""

    def __init__(self, root: str, *, recursive: bool = False, max_depth: int | None = None,
                 suffixes: tuple[str, ...] | None = None, create: bool = False):
        if max_depth is not None and (not recursive or max_depth < 0):
            raise ValueError("max_depth needs recursive=True and a depth >= 0")
        self.root = os.path.abspath(root)
        self.max_depth = (max_depth if max_depth is not None else -1) if recursive else 0
        self.suffixes = tuple(suffixes) if suffixes is not None else None
        if create:
            os.makedirs(self.root, exist_ok=True)
        elif not os.path.exists(self.root):
            raise FileNotFoundError(errno.ENOENT, "no such directory to watch", self.root)
        if not os.path.isdir(self.root):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory, cannot watch it", self.root)
        self._inotify = INotify(nonblocking=True)
        self._dirs: dict[int, tuple[str, int]] = {}  # watch descriptor -> (path, depth)
        self._wd_of: dict[str, int] = {}  # path -> watch descriptor
        self._pending: dict[Change, None] = {}  # ordered, deduplicated
        self._waiter: asyncio.Future | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ending = False  # the root is gone: hand out what is pending, then stop
        self._closed = False
        self.wakeups = 0  # reader callbacks so far (a quiet watch has none)
        try:
            self._watch_tree(self.root, 0, report=False)
        except BaseException:
            self._inotify.close()
            raise

    # -- the consumer's side -------------------------------------------------------------------

    async def __aenter__(self) -> DirWatch:
        self._attach()
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def __aiter__(self) -> DirWatch:
        return self

    async def __anext__(self) -> list[Change]:
        while True:
            if self._closed:
                raise StopAsyncIteration
            self._attach()
            if self._pending:
                batch = list(self._pending)
                self._pending.clear()
                return batch
            if self._ending:
                self.close()
                raise StopAsyncIteration
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def close(self) -> None:
        """Remove the reader, close the inotify descriptor (all watches go with it) and end
        the iteration, also for a consumer waiting right now. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(self._inotify.fileno())
        self._inotify.close()
        self._dirs.clear()
        self._wd_of.clear()
        self._pending.clear()
        self._wake()

    @property
    def closed(self) -> bool:
        return self._closed

    def fileno(self) -> int:
        return self._inotify.fileno()

    def watched(self) -> list[str]:
        """The directories watched right now."""
        return sorted(self._wd_of)

    # -- the loop's side ------------------------------------------------------------------------

    def _attach(self) -> None:
        if self._loop is None and not self._closed:
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(self._inotify.fileno(), self._on_readable)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _on_readable(self) -> None:
        self.wakeups += 1
        try:
            data = os.read(self._inotify.fileno(), READ_SIZE)
        except BlockingIOError:
            return
        for wd, mask, _cookie, name in parse_events(data):
            self._handle(wd, mask, name)
        if self._pending or self._ending:
            self._wake()

    def _handle(self, wd: int, mask: int, name: str) -> None:
        if mask & flags.Q_OVERFLOW:
            self._rescan()
            return
        if mask & flags.IGNORED:  # the watch is gone (its directory deleted, or rm_watch)
            self._forget(wd)
            return
        where = self._dirs.get(wd)
        if where is None:
            return  # queued before its watch was removed
        directory, depth = where
        if mask & flags.DELETE_SELF:
            if directory == self.root:
                self._report(DELETED, directory)
                self._ending = True
            return  # a subdirectory: its parent reports the IN_DELETE
        path = os.path.join(directory, name)
        is_dir = bool(mask & flags.ISDIR)
        if mask & (flags.CREATE | flags.MOVED_TO):
            self._report(ADDED, path)
            if is_dir and self._within(depth + 1):
                self._watch_tree(path, depth + 1, report=True)
        elif mask & flags.CLOSE_WRITE:
            self._report(MODIFIED, path)
        elif mask & (flags.DELETE | flags.MOVED_FROM):
            self._report(DELETED, path)
            if is_dir and mask & flags.MOVED_FROM:
                self._unwatch_tree(path)  # its watches would follow it out of the tree

    def _report(self, kind: str, path: str) -> None:
        if kind != RESCAN and self.suffixes is not None and not path.endswith(self.suffixes):
            return
        if len(self._pending) >= MAX_PENDING:
            self._pending.clear()
            self._pending[(RESCAN, self.root)] = None
            return
        self._pending[(kind, path)] = None

    def _rescan(self) -> None:
        """Events were lost: repair the watches (a directory made meanwhile has none) and
        tell the consumer to relist."""
        self._pending.clear()
        self._report(RESCAN, self.root)
        for path in [p for p in self._wd_of if p != self.root and not os.path.isdir(p)]:
            self._unwatch_tree(path)  # its IN_IGNORED may have been lost too
        if self.max_depth != 0:
            self._watch_tree(self.root, 0, report=False)

    # -- watches -------------------------------------------------------------------------------

    def _within(self, depth: int) -> bool:
        return self.max_depth < 0 or depth <= self.max_depth

    def _watch_tree(self, path: str, depth: int, report: bool) -> None:
        """Watch `path` and, within the depth limit, the directories under it; with report,
        every entry found is "added" (it may predate the watch)."""
        try:
            wd = self._inotify.add_watch(path, MASK if path == self.root else SUBDIR_MASK)
        except OSError as e:
            if path == self.root or e.errno not in (errno.ENOENT, errno.ENOTDIR):
                raise
            return  # gone again already: its deletion is (or will be) reported
        old = self._wd_of.get(path)
        if old is not None and old != wd:
            self._dirs.pop(old, None)
        self._dirs[wd] = (path, depth)
        self._wd_of[path] = wd
        if not self._within(depth + 1) and not report:
            return
        try:
            entries = list(os.scandir(path))
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            if report:
                self._report(ADDED, entry.path)
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir and self._within(depth + 1):
                self._watch_tree(entry.path, depth + 1, report)

    def _unwatch_tree(self, path: str) -> None:
        prefix = path + os.sep
        for p in [p for p in self._wd_of if p == path or p.startswith(prefix)]:
            wd = self._wd_of.pop(p)
            self._dirs.pop(wd, None)
            try:
                self._inotify.rm_watch(wd)
            except OSError:
                pass  # already removed by the kernel

    def _forget(self, wd: int) -> None:
        where = self._dirs.pop(wd, None)
        if where is not None and self._wd_of.get(where[0]) == wd:
            del self._wd_of[where[0]]


def kinds(batch: Iterable[Change]) -> set[str]:
    """The kinds present in a batch (e.g. `RESCAN in kinds(batch)`)."""
    return {kind for kind, _ in batch}
