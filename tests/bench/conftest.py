"""The benchmark suites start clusters and servers in directories of their own under the one
they are given: every process they start carries KUBEMU_STATE_DIR=<a directory under it>."""
from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from kubemu.ownership import kill_all
from kubemu.statedir import ENV


def processes_under(root: Path) -> list[psutil.Process]:
    prefix = str(root)
    found = []
    for proc in psutil.process_iter():
        try:
            marker = proc.environ().get(ENV, "")
            if proc.pid != os.getpid() and (marker == prefix or marker.startswith(prefix + os.sep)) \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def bench_dir(tmp_path_factory) -> Path:
    """A short directory for a suite's `workdir`; any process left under it at teardown is
    killed and fails the test that leaked it."""
    path = tmp_path_factory.mktemp("b")  # short: ipc:// socket paths are limited to 107 bytes
    yield path
    leaked = kill_all(processes_under(path), 10)
    assert not leaked, f"the suite leaked processes {leaked}"
