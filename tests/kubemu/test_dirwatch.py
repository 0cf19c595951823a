"""kubemu/dirwatch.py on real directories. Absence is checked with a barrier: one inotify
descriptor delivers its events in the order they happened, so once a later "barrier" file is
reported, anything before it that was going to be reported has been."""
from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from kubemu.dirwatch import ADDED, DELETED, MODIFIED, RESCAN, DirWatch
from tests.conftest import DEADLINE


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


async def collect_until(watch: DirWatch, done) -> list[tuple[str, str]]:
    """Batches, flattened, until `done(changes so far)`; the caller's wait_for bounds it."""
    changes: list[tuple[str, str]] = []
    while not done(changes):
        changes.extend(await anext(watch))
    return changes


async def barrier(watch: DirWatch, directory, name: str = "barrier.json") -> list[tuple[str, str]]:
    """Create `name` in `directory`; return every change reported before it."""
    path = os.path.join(directory, name)
    with open(path, "w"):
        pass
    changes = await collect_until(watch, lambda c: (ADDED, path) in c)
    return changes[:changes.index((ADDED, path))]


def inotify_fds() -> int:
    fds = os.listdir("/proc/self/fd")
    count = 0
    for fd in fds:
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass
    return count


def write_atomically(path: str, text: str = "{}") -> None:
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def test_added_modified_renamed_deleted(tmp_path):
    a, b = str(tmp_path / "a.txt"), str(tmp_path / "b.txt")

    async def main():
        async with DirWatch(str(tmp_path)) as watch:
            with open(a, "w") as f:
                f.write("x")
            assert await collect_until(watch, lambda c: (MODIFIED, a) in c) == [(ADDED, a), (MODIFIED, a)]
            os.rename(a, b)
            assert await collect_until(watch, lambda c: (ADDED, b) in c) == [(DELETED, a), (ADDED, b)]
            os.unlink(b)
            assert await collect_until(watch, lambda c: (DELETED, b) in c) == [(DELETED, b)]

    run(main())


def test_atomic_writes_with_a_suffix_filter_are_one_added_each(tmp_path):
    """The temporary file (.x.json.tmp) and the log never reach the consumer."""
    path = str(tmp_path / "0.state.json")

    async def main():
        async with DirWatch(str(tmp_path), suffixes=(".json",)) as watch:
            write_atomically(path)
            with open(tmp_path / "0.log", "w") as f:
                f.write("hello\n")
            assert await barrier(watch, tmp_path) == [(ADDED, path)]

    run(main())


def test_new_subdirectories_are_watched_and_scanned(tmp_path):
    """A directory made (or moved in) with files already in it: they had no event of their
    own, the scan after its watch was added reports them; later files get events."""
    outside = tmp_path / "outside"
    root = tmp_path / "root"
    root.mkdir()
    made = root / "made"
    moved = root / "moved"

    async def main():
        async with DirWatch(str(root), recursive=True) as watch:
            # The loop does not run between these calls: every one of them happens before
            # the watcher even reads the event for `made`, let alone adds its watch.
            (made / "deep").mkdir(parents=True)
            (made / "early.json").write_text("{}")
            (made / "deep" / "deeper.json").write_text("{}")
            (outside / "sub").mkdir(parents=True)
            (outside / "sub" / "x.json").write_text("{}")
            os.rename(outside, moved)
            expected = {(ADDED, str(p)) for p in (made, made / "deep", made / "early.json",
                                                   made / "deep" / "deeper.json", moved, moved / "sub",
                                                   moved / "sub" / "x.json")}
            changes = await collect_until(watch, lambda c: expected <= set(c))
            assert {c for c in changes if c[0] == ADDED} == expected
            for d in (root, made, made / "deep", moved, moved / "sub"):
                assert str(d) in watch.watched()
            # and they are watched from now on
            later = made / "deep" / "later.json"
            write_atomically(str(later))
            assert (ADDED, str(later)) in await collect_until(watch, lambda c: (ADDED, str(later)) in c)

    run(main())


def test_depth_limit(tmp_path):
    """max_depth=1: the root and its subdirectories; a directory two levels down is reported
    (it appears in a watched one) but not watched."""
    sub = tmp_path / "sub"

    async def main():
        async with DirWatch(str(tmp_path), recursive=True, max_depth=1) as watch:
            (sub / "too_deep").mkdir(parents=True)
            (sub / "ok.json").write_text("{}")
            (sub / "too_deep" / "hidden.json").write_text("{}")
            before = await barrier(watch, sub)
            assert {c for c in before if c[0] == ADDED} == {(ADDED, str(sub)), (ADDED, str(sub / "too_deep")),
                                                            (ADDED, str(sub / "ok.json"))}
            (sub / "too_deep" / "later.json").write_text("{}")
            assert await barrier(watch, sub, "barrier2.json") == []
            assert watch.watched() == [str(tmp_path), str(sub)]

    run(main())


def test_non_recursive_ignores_subdirectory_contents(tmp_path):
    async def main():
        async with DirWatch(str(tmp_path)) as watch:
            (tmp_path / "d").mkdir()
            (tmp_path / "d" / "f.json").write_text("{}")
            assert await barrier(watch, tmp_path) == [(ADDED, str(tmp_path / "d"))]
            assert watch.watched() == [str(tmp_path)]

    run(main())


def test_log_appends_produce_no_events_and_no_wakeups(tmp_path):
    """IN_MODIFY is not watched: a process appending to a log wakes nobody (until it closes)."""
    log = tmp_path / "0.log"
    log.write_text("")

    async def main():
        async with DirWatch(str(tmp_path)) as watch:
            with open(log, "a") as f:
                await asyncio.sleep(0)
                wakeups = watch.wakeups
                for i in range(200):
                    f.write(f"line {i}\n")
                    f.flush()
                await asyncio.sleep(0.2)  # an idle stretch for the loop: nothing may wake it
                assert watch.wakeups == wakeups
            # the close is one event, and nothing else came before the barrier
            assert await barrier(watch, tmp_path) == [(MODIFIED, str(log))]

    run(main())


def test_a_quiet_watch_costs_nothing(tmp_path):
    (tmp_path / "pod" / "c").mkdir(parents=True)

    async def main():
        async with DirWatch(str(tmp_path), recursive=True) as watch:
            await asyncio.sleep(0.3)
            assert watch.wakeups == 0
            # the watcher is alive, just idle
            assert await barrier(watch, tmp_path / "pod" / "c") == []
            assert watch.wakeups >= 1

    run(main())


def test_removed_directories_drop_their_watches(tmp_path):
    sub = tmp_path / "sub"

    async def main():
        async with DirWatch(str(tmp_path), recursive=True) as watch:
            (sub / "inner").mkdir(parents=True)
            await collect_until(watch, lambda c: (ADDED, str(sub / "inner")) in c)
            assert str(sub / "inner") in watch.watched()
            shutil.rmtree(sub)
            await collect_until(watch, lambda c: (DELETED, str(sub)) in c)
            n = 0
            while str(sub) in watch.watched() or str(sub / "inner") in watch.watched():
                n += 1
                await barrier(watch, tmp_path, f"b{n}.json")  # IN_IGNORED may come in a later read
            assert watch.watched() == [str(tmp_path)]
            assert len(watch._dirs) == 1
            # a directory moved out of the tree is dropped at once (its watch would follow it)
            (tmp_path / "away").mkdir()
            await collect_until(watch, lambda c: (ADDED, str(tmp_path / "away")) in c)
            os.rename(tmp_path / "away", tmp_path.parent / f"{tmp_path.name}-away")
            await collect_until(watch, lambda c: (DELETED, str(tmp_path / "away")) in c)
            assert watch.watched() == [str(tmp_path)]
            (tmp_path.parent / f"{tmp_path.name}-away" / "x.json").write_text("{}")
            assert await barrier(watch, tmp_path, "last.json") == []

    run(main())


def test_root_missing_and_root_deleted(tmp_path):
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError, match="no such directory to watch"):
        DirWatch(str(missing))
    assert not missing.exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError):
        DirWatch(str(tmp_path / "file"))

    async def main():
        async with DirWatch(str(missing / "nested"), create=True, recursive=True) as watch:
            assert (missing / "nested").is_dir()
            shutil.rmtree(missing)
            batches = [batch async for batch in watch]  # ends by itself
            assert batches[-1][-1] == (DELETED, str(missing / "nested"))
            assert watch.closed

    run(main())


def test_close_releases_the_descriptor_and_ends_a_waiting_consumer(tmp_path):
    before = inotify_fds()

    async def main():
        watch = DirWatch(str(tmp_path), recursive=True)
        assert inotify_fds() == before + 1
        consumer = asyncio.ensure_future(collect_until(watch, lambda c: False))
        await asyncio.sleep(0)  # the consumer is waiting
        assert not consumer.done()
        asyncio.get_running_loop().call_soon(watch.close)
        with pytest.raises(StopAsyncIteration):
            await consumer
        assert inotify_fds() == before
        watch.close()  # idempotent
        with pytest.raises(StopAsyncIteration):
            await anext(watch)

    run(main())
    assert inotify_fds() == before
    with pytest.raises(ValueError):
        DirWatch(str(tmp_path), max_depth=1)  # depth without recursion


def test_queue_overflow_reports_a_rescan_and_keeps_watching(tmp_path):
    """Flood the kernel's queue while the loop is not reading: one "rescan" instead of the
    lost events, and directories made meanwhile are watched all the same."""
    with open("/proc/sys/fs/inotify/max_queued_events") as f:
        limit = int(f.read())
    flood = tmp_path / "flood"
    flood.mkdir()

    async def main():
        async with DirWatch(str(tmp_path), recursive=True) as watch:
            for i in range(limit + 10):  # one IN_CREATE each (no close: mknod)
                os.mknod(flood / f"f{i}")
            (tmp_path / "new").mkdir()
            changes = await collect_until(watch, lambda c: (RESCAN, str(tmp_path)) in c)
            # some were handed out before the kernel dropped any; the rest came as the rescan
            assert len([c for c in changes if c[0] == ADDED]) < limit + 10
            assert str(tmp_path / "new") in watch.watched()
            later = str(tmp_path / "new" / "x.json")
            write_atomically(later)
            await collect_until(watch, lambda c: (ADDED, later) in c)

    run(main())
