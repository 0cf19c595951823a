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

from kubemu import cgroups, network, ownership
from kubemu.statedir import ENV

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
    """Live processes whose environment carries KUBEMU_STATE_DIR=marker: what a test started
    (spawn_marked, or kubemu with that variable set), and everything those started. A test's
    leak detector only: kubemu itself never picks processes by their environment."""
    mine = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.environ().get(ENV) == marker \
                    and proc.status() != psutil.STATUS_ZOMBIE:
                mine.append(proc)
        except psutil.Error:
            continue
    return mine


def kill_marked(marker: str) -> list[int]:
    """SIGKILL every marked process; their PIDs, once they are gone."""
    return ownership.kill_all(marked_processes(marker), 10)


@pytest.fixture(autouse=True, scope="session")
def _private_kubeconfig_and_port(tmp_path_factory):
    """No test touches the user's kubeconfig (`kubemu up` merges a context into $KUBECONFIG),
    and no cluster a test starts needs port 6443 free: `kubemu up` picks any free port."""
    env = pytest.MonkeyPatch()
    env.setenv("KUBECONFIG", str(tmp_path_factory.mktemp("kubeconfig") / "config"))
    env.setenv("KUBEMU_API_PORT", "0")
    yield
    env.undo()


@pytest.fixture
def state_dir(tmp_path_factory) -> Path:
    """A private state directory; every process started with it as KUBEMU_STATE_DIR is killed
    at teardown even when the test failed, and a leak fails the test that caused it."""
    # Short paths: ipc:// socket paths are limited to 107 bytes.
    path = tmp_path_factory.mktemp("k")
    yield path
    leaked = kill_marked(str(path))
    cgroups_left = remove_cluster_cgroups(path)
    network_left = remove_cluster_network(path)
    assert not leaked, f"test leaked processes {leaked}"
    assert not cgroups_left, f"test left cgroups behind: {cgroups_left}"
    assert not network_left, f"test left its pod network behind: {network_left}"


def remove_cluster_network(state_dir: Path) -> list[str]:
    """Remove what is left of the pod network `kubemu up` made for a state directory (its
    fabric namespace, host link and routes); what there was."""
    rec = network.load(state_dir)
    left = network.leftovers(rec) if rec is not None else []
    if left:
        network.down(state_dir)
    return left


def remove_cluster_cgroups(state_dir: Path) -> list[str]:
    """Kill and remove the cgroups kubemu made for a state directory, in every hierarchy (pod
    cgroups are in the controller ones too); those there were."""
    left = []
    name = ownership.cluster_cgroup_name(state_dir.absolute())
    for cg in cgroups.candidates(name) + [cg for cg, _ in cgroups.everywhere(name)]:
        if cg.path.is_dir():
            left.append(str(cg.path))
            wait_for(lambda: cg.kill() or not cg.populated(), message=f"{cg.path} to empty")
            cg.remove()
    return left


def python() -> str:
    return sys.executable


def spawn_marked(argv: list[str], marker: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, KUBEMU_STATE_DIR=str(marker))
    env.update(kw.pop("env", {}))
    return subprocess.Popen(argv, env=env, start_new_session=True, stdin=subprocess.DEVNULL, **kw)


def terminate(proc: subprocess.Popen, timeout: float = DEADLINE) -> int | None:
    """SIGTERM and wait: the exit code (None if it had to be killed)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None
    return proc.returncode
