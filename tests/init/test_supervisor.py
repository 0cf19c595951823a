"""init with real processes: restarts, start limits, notify ordering, stop escalation, reaping,
power-cut semantics, and bad unit files."""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import psutil
import pytest

from kubemu import wire
from tests.conftest import alive, spawn_marked, terminate, wait_for

PROG = Path(__file__).with_name("unitprog.py")


class Node:
    """One init under test, with its node directory inside the test's state directory."""

    def __init__(self, state_dir: Path):
        self.dir = state_dir / "node-0"
        self.units = self.dir / "units"
        self.units.mkdir(parents=True)
        self.state_dir = state_dir
        self.proc = None

    def unit(self, name: str, service: str, unit: str = "") -> None:
        (self.units / f"{name}.service").write_text(f"[Unit]\n{unit}\n[Service]\n{service}\n")

    def prog(self, mode: str, arg: str | os.PathLike = "") -> str:
        return f'ExecStart={sys.executable} {PROG} {mode} {arg}'

    def start(self) -> None:
        self.proc = spawn_marked([sys.executable, "-m", "init", "--node-dir", str(self.dir)], self.state_dir)
        wait_for(lambda: self._answers(), message="init's control socket")

    def _answers(self) -> bool:
        try:
            self.status()
            return True
        except wire.WireError:
            return False

    def call(self, method: str, **params):
        with wire.SyncClient(f"ipc://{self.dir}/init.sock", timeout=30) as client:
            return client.call(method, params)

    def status(self) -> dict:
        return self.call("status")

    def u(self, name: str) -> dict:
        return next(r for r in self.status()["units"] if r["name"] == f"{name}.service")

    def wait_unit(self, name: str, pred, message: str = "") -> dict:
        return wait_for(lambda: (lambda r: r if pred(r) else None)(self.u(name)), message=message or name)

    def log(self, name: str = "init") -> str:
        path = self.dir / "logs" / f"{name}.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None:
            terminate(self.proc)


@pytest.fixture
def node(state_dir):
    n = Node(state_dir)
    yield n
    n.stop()


def running(r):
    return r["active_state"] == "active" and r["main_pid"]


def test_kill_9_restarts_after_restart_sec(node):
    node.unit("svc", f"{node.prog('sleep')}\nRestart=always\nRestartSec=1")
    node.start()
    first = node.wait_unit("svc", running)["main_pid"]
    killed_at = time.monotonic()
    os.kill(first, signal.SIGKILL)
    row = node.wait_unit("svc", lambda r: running(r) and r["main_pid"] != first)
    assert row["n_restarts"] == 1
    # RestartSec is honoured: the replacement could not be seen sooner than 1 s after the kill.
    assert time.monotonic() - killed_at >= 1.0
    assert "Scheduled restart job, restart counter is at 1." in node.log("svc")
    assert "code=killed, status=9/SIGKILL" in node.log("svc")


def test_start_limit_hit_then_reset_failed(node):
    node.unit("crashy", f"{node.prog('crash')}\nRestart=always\nRestartSec=0",
              "StartLimitIntervalSec=600\nStartLimitBurst=3")
    node.start()
    row = node.wait_unit("crashy", lambda r: r["active_state"] == "failed")
    assert row["result"] == "start-limit-hit"
    # 3 starts allowed; as in systemd the 3rd restart job is scheduled (counter at 3), then refused.
    assert row["n_restarts"] == 3
    log = node.log("crashy")
    assert log.count("Started crashy.service") == 3
    assert log.index("restart counter is at 3.") < log.index("Start request repeated too quickly.")
    node.call("reset-failed", unit="crashy")
    assert node.u("crashy")["active_state"] == "inactive"
    node.call("start", unit="crashy")
    assert node.wait_unit("crashy", lambda r: r["exit_code"] == 1)


def test_notify_unit_gates_after_unit(node, tmp_path):
    gate = tmp_path / "gate"
    node.unit("db", f"Type=notify\n{node.prog('notify-when', gate)}")
    node.unit("app", node.prog("sleep"), "After=db.service\nRequires=db.service")
    node.start()
    wait_for(lambda: Path(f"{gate}.waiting").exists(), message="db to be waiting for its gate")
    assert node.u("db")["active_state"] == "activating"
    assert node.u("app")["active_state"] == "inactive" and node.u("app")["main_pid"] is None
    gate.touch()
    db = node.wait_unit("db", running)
    app = node.wait_unit("app", running)
    assert db["status_text"] == "ready"
    assert psutil.Process(app["main_pid"]).create_time() >= psutil.Process(db["main_pid"]).create_time()


def test_unit_ignoring_sigterm_is_sigkilled_after_timeout_stop_sec(node, tmp_path):
    armed = tmp_path / "armed"
    node.unit("stubborn", f"{node.prog('ignore-term', armed)}\nTimeoutStopSec=1\nRestart=always")
    node.start()
    pid = node.wait_unit("stubborn", running)["main_pid"]
    wait_for(armed.exists, message="the SIGTERM handler to be installed")
    started = time.monotonic()
    row = node.call("stop", unit="stubborn")
    assert time.monotonic() - started >= 0.9  # it survived SIGTERM until TimeoutStopSec
    assert row["active_state"] == "failed" and row["result"] == "timeout"
    assert row["exit_signal"] == signal.SIGKILL
    assert not alive(pid)
    log = node.log("stubborn")
    assert "State 'stop-sigterm' timed out. Killing." in log
    assert node.u("stubborn")["n_restarts"] == 0  # a user stop never restarts


def test_double_forked_orphan_is_reaped(node, tmp_path):
    release = tmp_path / "release"
    node.unit("forker", node.prog("double-fork", release))
    node.start()
    node.wait_unit("forker", running)
    orphan = int(wait_for(lambda: Path(f"{release}.pid").exists() and Path(f"{release}.pid").read_text(),
                          message="the orphan's pid"))
    # The middle process exited: init (the subreaper) is the orphan's parent now.
    wait_for(lambda: psutil.Process(orphan).ppid() == node.proc.pid, message="re-parenting to init")
    release.touch()
    wait_for(lambda: f"reaped orphan process {orphan}" in node.log(), message="init to reap the orphan")
    assert not alive(orphan)


def test_watchdog_timeout_aborts_and_restarts(node):
    node.unit("hung", f"Type=notify\n{node.prog('notify-no-watchdog')}\nWatchdogSec=1\n"
                      "Restart=on-watchdog\nRestartSec=0\nTimeoutStopSec=5")
    node.start()
    first = node.wait_unit("hung", running)["main_pid"]
    row = node.wait_unit("hung", lambda r: r["n_restarts"] >= 1 and running(r))
    assert row["main_pid"] != first
    log = node.log("hung")
    assert "Watchdog timeout (limit 1s)!" in log and "status=6/SIGABRT" in log


def test_kill_9_of_init_takes_its_units_down(node):
    node.unit("a", node.prog("sleep"))
    node.unit("b", f"{node.prog('sleep')}\nKillMode=process")
    node.start()
    pids = [node.wait_unit(n, running)["main_pid"] for n in ("a", "b")]
    os.kill(node.proc.pid, signal.SIGKILL)
    node.proc.wait()
    # PR_SET_PDEATHSIG: the kernel kills them as init dies, like a machine losing power.
    wait_for(lambda: not any(alive(p) for p in pids), timeout=5, message="units to die with init")


def test_sigterm_stops_units_in_reverse_order_and_exits(node):
    node.unit("first", node.prog("sleep"))
    node.unit("second", node.prog("sleep"), "After=first.service")
    node.start()
    pids = {n: node.wait_unit(n, running)["main_pid"] for n in ("first", "second")}
    node.proc.send_signal(signal.SIGTERM)
    assert node.proc.wait(60) == 0
    assert not any(alive(p) for p in pids.values())
    log = node.log()
    assert log.index(f"second.service: Sent SIGTERM") < log.index(f"first.service: Sent SIGTERM")


def test_bad_unit_files_fail_alone(node):
    node.unit("good", f"{node.prog('sleep')}\nFrobnicate=yes")
    (node.units / "broken.service").write_text("[Service]\nthis line is nonsense\nExecStart=/bin/true\n")
    (node.units / "empty.service").write_text("[Unit]\nDescription=no command\n")
    node.start()
    node.wait_unit("good", running)
    broken, empty = node.u("broken"), node.u("empty")
    assert broken["active_state"] == "failed" and "broken.service:2" in broken["load_error"]
    assert empty["active_state"] == "failed" and "ExecStart" in empty["load_error"]
    assert "good.service:5: Unknown key name 'Frobnicate' in section 'Service', ignoring." in node.log()
    with pytest.raises(wire.Invalid):
        node.call("start", unit="broken")
    with pytest.raises(wire.NotFound):
        node.call("start", unit="missing")


def test_daemon_reload_loads_new_and_stops_removed(node):
    node.unit("old", node.prog("sleep"))
    node.start()
    old_pid = node.wait_unit("old", running)["main_pid"]
    (node.units / "old.service").unlink()
    node.unit("new", node.prog("sleep"))
    node.call("daemon-reload")
    wait_for(lambda: [r["name"] for r in node.status()["units"]] == ["new.service"],
             message="the removed unit to stop and be forgotten")
    assert not alive(old_pid)
    assert node.u("new")["active_state"] == "inactive"  # loaded, not started
    node.call("start", unit="new")
    node.wait_unit("new", running)


def test_missing_executable_is_exit_203(node):
    node.unit("nope", "ExecStart=/nonexistent/program --flag")
    node.start()
    row = node.wait_unit("nope", lambda r: r["active_state"] == "failed")
    assert row["exit_code"] == 203 and row["result"] == "exit-code"
    assert "Failed to execute /nonexistent/program" in node.log("nope")


def test_wrong_typed_params_are_bad_requests_and_a_falsy_unit_is_not_all(node):
    for name in ("crashy1", "crashy2"):
        node.unit(name, f"{node.prog('crash')}\nRestart=always\nRestartSec=0",
                  "StartLimitIntervalSec=600\nStartLimitBurst=1")
    node.start()
    for name in ("crashy1", "crashy2"):
        node.wait_unit(name, lambda r: r["active_state"] == "failed")
    # only an absent unit means every unit
    for falsy in ({}, 0, [], False):
        with pytest.raises(wire.BadRequest, match="unit: expected a string"):
            node.call("reset-failed", unit=falsy)
    with pytest.raises(wire.NotFound):
        node.call("reset-failed", unit="")
    assert all(node.u(n)["active_state"] == "failed" for n in ("crashy1", "crashy2"))
    for method, params in [("stop", {"unit": 5}), ("start", {"unit": None}), ("restart", {"unit": ["x"]}),
                           ("start", {"unit": "crashy1", "wait": "soon"}), ("stop", {"unit": "x", "wait": True}),
                           ("status", {"unit": 1.5}), ("status", {"unit": {"a": 1}})]:
        with pytest.raises(wire.BadRequest):
            node.call(method, **params)
    assert all(node.u(n)["active_state"] == "failed" for n in ("crashy1", "crashy2"))
    node.call("reset-failed")
    assert all(node.u(n)["active_state"] == "inactive" for n in ("crashy1", "crashy2"))
    assert "Traceback" not in node.log()
