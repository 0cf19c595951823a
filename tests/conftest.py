"""Shared test helpers: wait on conditions (never sleep and hope), and leave no process behind."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from hypothesis import settings

from kubemu.statedir import StateDir

# CI replays the same examples every run (a new random find must not fail an unrelated change);
# local runs keep exploring and hypothesis's database replays what they found.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

# A loaded 2-core CI machine can be slow: deadlines are generous, and only ever upper bounds.
DEADLINE = float(os.environ.get("KUBEMU_TEST_DEADLINE", "60"))


def wait_for(condition, timeout: float = DEADLINE, interval: float = 0.02, message: str = ""):
    """Poll `condition` until it returns something truthy; return that, or fail the test."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {message or condition}")
        time.sleep(interval)


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie (an orphan's zombie may wait for a PID 1 that
    never reaps, so existence alone says nothing)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def marked_processes(marker: str) -> list[psutil.Process]:
    """Live processes whose environment carries KUBEMU_STATE_DIR=marker."""
    return StateDir(marker).processes()


def kill_marked(marker: str) -> list[int]:
    return StateDir(marker).kill_processes()


@pytest.fixture
def state_dir(tmp_path_factory) -> Path:
    """A private state directory; every process started with it as KUBEMU_STATE_DIR is killed
    at teardown even when the test failed, and a leak fails the test that caused it."""
    # Short paths: ipc:// socket paths are limited to 107 bytes.
    path = tmp_path_factory.mktemp("k")
    yield path
    leaked = kill_marked(str(path))
    assert not leaked, f"test leaked processes {leaked}"


def python() -> str:
    return sys.executable


def spawn_marked(argv: list[str], marker: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, KUBEMU_STATE_DIR=str(marker))
    env.update(kw.pop("env", {}))
    return subprocess.Popen(argv, env=env, start_new_session=True, stdin=subprocess.DEVNULL, **kw)


def terminate(proc: subprocess.Popen, timeout: float = DEADLINE) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
