"""The AtomicWriter on a real directory: the `..data` layout, writes only on change, the swap
a reader never sees half of, and Kubernetes' path checks."""
import os
import stat
import threading

import pytest

from kubelet.atomicwriter import AtomicWriteError, write
from kubelet.volumes import File


def tree(target):
    """name -> what a container sees through the user-visible path."""
    out = {}
    for root, _dirs, files in os.walk(target, followlinks=True):
        rel_root = os.path.relpath(root, target)
        if rel_root.split("/")[0].startswith(".."):
            continue
        for name in files:
            rel = os.path.normpath(os.path.join(rel_root, name))
            with open(os.path.join(root, name), "rb") as f:
                out[rel] = (f.read(), stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode))
    return out


def test_the_first_write_lays_out_a_timestamped_dir_behind_data(tmp_path):
    assert write(str(tmp_path), {"app.conf": File(b"a=1", 0o644), "conf/db": File(b"db", 0o600)})
    ts = os.readlink(tmp_path / "..data")
    assert ts.startswith("..") and (tmp_path / ts).is_dir() and not os.path.islink(tmp_path / ts)
    assert os.readlink(tmp_path / "app.conf") == "..data/app.conf"
    assert os.readlink(tmp_path / "conf") == "..data/conf"
    assert tree(tmp_path) == {"app.conf": (b"a=1", 0o644), "conf/db": (b"db", 0o600)}
    assert sorted(os.listdir(tmp_path)) == sorted(["..data", ts, "app.conf", "conf"])


def test_an_unchanged_payload_is_not_written_again(tmp_path):
    files = {"a": File(b"1", 0o644)}
    assert write(str(tmp_path), files)
    before = os.readlink(tmp_path / "..data")
    assert not write(str(tmp_path), dict(files))
    assert os.readlink(tmp_path / "..data") == before


def test_an_update_swaps_data_adds_and_removes_paths_and_drops_the_old_dir(tmp_path):
    write(str(tmp_path), {"a": File(b"1", 0o644), "gone": File(b"x", 0o644),
                          "d/keep": File(b"k", 0o644), "d/drop": File(b"k", 0o644)})
    old = os.readlink(tmp_path / "..data")
    assert write(str(tmp_path), {"a": File(b"2", 0o644), "d/keep": File(b"k", 0o644),
                                 "new": File(b"n", 0o400)})
    new = os.readlink(tmp_path / "..data")
    assert new != old and not (tmp_path / old).exists()
    assert tree(tmp_path) == {"a": (b"2", 0o644), "d/keep": (b"k", 0o644), "new": (b"n", 0o400)}
    assert sorted(os.listdir(tmp_path)) == sorted(["..data", new, "a", "d", "new"])


def test_a_mode_change_alone_is_written(tmp_path):
    write(str(tmp_path), {"a": File(b"1", 0o644)})
    assert write(str(tmp_path), {"a": File(b"1", 0o600)})
    assert tree(tmp_path) == {"a": (b"1", 0o600)}


def test_modes_are_exact_whatever_the_umask(tmp_path):
    old = os.umask(0o077)
    try:
        write(str(tmp_path), {"a": File(b"1", 0o644), "x/b": File(b"2", 0o755)})
    finally:
        os.umask(old)
    assert tree(tmp_path) == {"a": (b"1", 0o644), "x/b": (b"2", 0o755)}
    assert stat.S_IMODE(os.stat(tmp_path / "x").st_mode) == 0o755


def test_an_empty_payload_is_an_empty_volume(tmp_path):
    assert write(str(tmp_path), {})
    assert os.listdir(tmp_path / "..data") == []


def test_readers_see_one_whole_version_while_the_file_is_updated(tmp_path):
    """The swap is one rename: what a reader reads is one whole version, never a mix or a
    partly written file. (A reader that resolved `..data` just before the swap can find the old
    directory gone, ENOENT, as with Kubernetes' AtomicWriter, which removes it at once too.)"""
    write(str(tmp_path), {"conf": File(b"v0" * 1000, 0o644)})
    seen, problems, done = set(), [], threading.Event()

    def reader():
        while not done.is_set():
            try:
                with open(tmp_path / "conf", "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                continue
            except OSError as err:
                problems.append(err)
                continue
            if data[:2] * 1000 != data:
                problems.append(data[:10])
            seen.add(data[:2])
    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(1, 200):
            write(str(tmp_path), {"conf": File(f"v{i % 10}".encode() * 1000, 0o644)})
    finally:
        done.set()
        t.join()
    assert problems == []
    assert len(seen) > 1


@pytest.mark.parametrize("path, message", [
    ("", 'invalid path: must not be empty: ""'),
    ("/etc/passwd", "invalid path: must be relative path: /etc/passwd"),
    ("a/../../x", "invalid path: must not contain '..': a/../../x"),
    ("..data", "invalid path: must not start with '..': ..data"),
    ("x" * 256, "invalid path: filenames must be less than or equal to 255 characters"),
])
def test_bad_paths_are_refused_before_anything_is_written(tmp_path, path, message):
    with pytest.raises(AtomicWriteError) as err:
        write(str(tmp_path), {"ok": File(b"1", 0o644), path: File(b"2", 0o644)})
    assert str(err.value) == message
    assert os.listdir(tmp_path) == []


def test_a_write_into_a_missing_directory_is_one_clear_error(tmp_path):
    with pytest.raises(AtomicWriteError) as err:
        write(str(tmp_path / "nope"), {"a": File(b"1", 0o644)})
    assert "No such file or directory" in str(err.value)
