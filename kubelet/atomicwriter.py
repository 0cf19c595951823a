"""The kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go): a volume directory whose
files change all at once, so a reader never sees half of an update.

    write(target_dir, payload) -> bool   True when it wrote (the payload differed), else False
                                         raises AtomicWriteError (a bad path, an OS error)

The layout, as the kubelet makes it for configMap, secret, downwardAPI and projected volumes:

    target_dir/..2026_11_26_02_10_00.123456789/   the payload's files (a timestamped dir)
    target_dir/..data -> ..2026_11_26_02_10_00.123456789
    target_dir/<name> -> ..data/<name>            one symlink per top-level path

An update writes a new timestamped dir, points `..data_tmp` at it and renames that over
`..data` (rename(2) is atomic), adds the symlinks of new top-level paths, removes those of
paths gone, then the old dir. Nothing is written when every file already holds its bytes and
mode, so an unchanged ConfigMap does not touch the volume.
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time

from .volumes import File

DATA_DIR = "..data"
NEW_DATA_DIR = "..data_tmp"
MAX_PATH = 4096
MAX_NAME = 255


class AtomicWriteError(Exception):
    pass


def validate_path(target: str) -> None:
    """validatePath, with its messages."""
    if not target:
        raise AtomicWriteError(f'invalid path: must not be empty: "{target}"')
    if target.startswith("/"):
        raise AtomicWriteError(f"invalid path: must be relative path: {target}")
    if len(target) > MAX_PATH:
        raise AtomicWriteError(f"invalid path: must be less than or equal to {MAX_PATH} characters")
    items = target.split("/")
    for item in items:
        if item == "..":
            raise AtomicWriteError(f"invalid path: must not contain '..': {target}")
        if len(item) > MAX_NAME:
            raise AtomicWriteError(f"invalid path: filenames must be less than or equal to "
                                   f"{MAX_NAME} characters")
    if items[0].startswith("..") and len(items[0]) > 2:
        raise AtomicWriteError(f"invalid path: must not start with '..': {target}")


def clean_payload(payload: dict[str, File]) -> dict[str, File]:
    out = {}
    for path, f in payload.items():
        validate_path(path)
        out[os.path.normpath(path)] = f
    return out


def write(target_dir: str, payload: dict[str, File]) -> bool:
    try:
        return _write(target_dir, clean_payload(payload))
    except OSError as err:
        raise AtomicWriteError(f"{err.strerror}: {err.filename}" if err.filename
                               else str(err)) from None


def _write(target_dir: str, payload: dict[str, File]) -> bool:
    data_link = os.path.join(target_dir, DATA_DIR)
    try:
        old_ts = os.readlink(data_link)
    except FileNotFoundError:
        old_ts = None
    old_ts_path = os.path.join(target_dir, old_ts) if old_ts else None
    to_remove = _paths_to_remove(old_ts_path, payload) if old_ts_path else set()
    if old_ts_path and not to_remove and not _differs(old_ts_path, payload):
        _link_visible(target_dir, payload)  # a crash between the swap and the links
        return False
    ts_dir = tempfile.mkdtemp(prefix=time.strftime("..%Y_%m_%d_%H_%M_%S.", time.gmtime()),
                              dir=target_dir)
    os.chmod(ts_dir, 0o755)
    try:
        _write_files(ts_dir, payload)
        new_link = os.path.join(target_dir, NEW_DATA_DIR)
        if os.path.lexists(new_link):
            os.unlink(new_link)
        os.symlink(os.path.basename(ts_dir), new_link)
        os.rename(new_link, data_link)
    except BaseException:
        shutil.rmtree(ts_dir, ignore_errors=True)
        raise
    _link_visible(target_dir, payload)
    for path in to_remove:
        if "/" not in path:  # only the volume root's symlinks; the rest went with the old dir
            try:
                os.unlink(os.path.join(target_dir, path))
            except FileNotFoundError:
                pass
    if old_ts_path and os.path.basename(old_ts_path) != os.path.basename(ts_dir):
        shutil.rmtree(old_ts_path, ignore_errors=True)
    return True


def _paths_to_remove(old_ts_path: str, payload: dict[str, File]) -> set[str]:
    """Every path of the old dir (files and dirs) that the new payload does not have."""
    old = set()
    for root, dirs, files in os.walk(old_ts_path):
        for name in dirs + files:
            old.add(os.path.relpath(os.path.join(root, name), old_ts_path))
    new = set()
    for path in payload:
        while path:
            new.add(path)
            path = os.path.dirname(path)
    return old - new


def _differs(old_ts_path: str, payload: dict[str, File]) -> bool:
    for path, f in payload.items():
        full = os.path.join(old_ts_path, path)
        try:
            st = os.lstat(full)
            if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != f.mode:
                return True
            with open(full, "rb") as fh:
                if fh.read() != f.data:
                    return True
        except FileNotFoundError:
            return True
    return False


def _write_files(ts_dir: str, payload: dict[str, File]) -> None:
    for path, f in payload.items():
        full = os.path.join(ts_dir, path)
        _make_dirs(ts_dir, os.path.dirname(path))
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, f.mode)
        try:
            os.fchmod(fd, f.mode)  # the umask had its say in open
            view = memoryview(f.data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)


def _make_dirs(ts_dir: str, rel: str) -> None:
    """mkdir -p with mode 0755 whatever the umask."""
    if not rel or os.path.isdir(os.path.join(ts_dir, rel)):
        return
    _make_dirs(ts_dir, os.path.dirname(rel))
    os.mkdir(os.path.join(ts_dir, rel))
    os.chmod(os.path.join(ts_dir, rel), 0o755)


def _link_visible(target_dir: str, payload: dict[str, File]) -> None:
    """createUserVisibleFiles: `name -> ..data/name` for each top-level path."""
    for top in {path.split("/", 1)[0] for path in payload}:
        link = os.path.join(target_dir, top)
        if not os.path.islink(link):
            os.symlink(os.path.join(DATA_DIR, top), link)
