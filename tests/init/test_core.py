"""The service state machine, driven by a fake clock: no processes, no sleeping."""
import math
import signal

import pytest

from init.core import EXIT_EXEC, Kill, Log, Result, Service, Spawn, Sub, restart_delay, should_restart
from init.unitconfig import KillMode, RestartPolicy, ServiceType, UnitConfig


def cfg(**kw) -> UnitConfig:
    kw.setdefault("restart_sec", 0.1)
    return UnitConfig(name="u.service", path="/u.service", exec_start=("/bin/true",), **kw)


class Clock:
    def __init__(self):
        self.now = 1000.0


def spawn(svc: Service, clock: Clock, pid: int) -> list:
    acts = svc.start(clock.now)
    assert acts == [Spawn("u.service")]
    return svc.on_spawned(clock.now, pid)


def advance_to_deadline(svc: Service, clock: Clock) -> list:
    clock.now = svc.next_deadline()
    return svc.tick(clock.now)


def kills(actions):
    return [(a.signal, a.group) for a in actions if isinstance(a, Kill)]


# How a main process can end, and how systemd's table (systemd.service(5), Restart=) classifies it.
EXIT_KINDS = {
    "clean-code": dict(code=0, sig=None),
    "clean-signal": dict(code=None, sig=signal.SIGTERM),
    "unclean-code": dict(code=1, sig=None),
    "unclean-signal": dict(code=None, sig=signal.SIGKILL),
    "timeout": "timeout",
    "watchdog": "watchdog",
}
# The table, row by row: which Restart= values restart after each kind of end.
RESTARTS = {
    "clean-code": {"always", "on-success"},
    "clean-signal": {"always", "on-success"},
    "unclean-code": {"always", "on-failure"},
    "unclean-signal": {"always", "on-failure", "on-abnormal", "on-abort"},
    "timeout": {"always", "on-failure", "on-abnormal"},
    "watchdog": {"always", "on-failure", "on-abnormal", "on-watchdog"},
}


def end_process(kind: str, policy: RestartPolicy) -> Service:
    """Run one unit to the end of its first process in the given way; return it."""
    clock = Clock()
    if kind == "timeout":
        svc = Service(cfg(restart=policy, type=ServiceType.NOTIFY, timeout_start=5, timeout_stop=5))
        spawn(svc, clock, 42)
        acts = advance_to_deadline(svc, clock)  # no READY=1 within TimeoutStartSec
        assert kills(acts) == [(signal.SIGTERM, True)]
        svc.on_exit(clock.now, 42, None, signal.SIGTERM)
    elif kind == "watchdog":
        svc = Service(cfg(restart=policy, watchdog_sec=3))
        spawn(svc, clock, 42)
        acts = advance_to_deadline(svc, clock)
        assert kills(acts) == [(signal.SIGABRT, True)]
        svc.on_exit(clock.now, 42, None, signal.SIGABRT)
    else:
        svc = Service(cfg(restart=policy))
        spawn(svc, clock, 42)
        svc.on_exit(clock.now, 42, **EXIT_KINDS[kind])
    return svc


@pytest.mark.parametrize("kind", list(EXIT_KINDS))
@pytest.mark.parametrize("policy", list(RestartPolicy))
def test_restart_table(kind, policy):
    svc = end_process(kind, policy)
    expect_restart = policy.value in RESTARTS[kind]
    assert (svc.sub is Sub.AUTO_RESTART) == expect_restart
    assert should_restart(policy, svc.result) == expect_restart
    if not expect_restart:
        clean = kind.startswith("clean")
        assert svc.sub is (Sub.DEAD if clean else Sub.FAILED)
        assert svc.next_deadline() is None


@pytest.mark.parametrize("kind,result", [("unclean-code", Result.EXIT_CODE), ("unclean-signal", Result.SIGNAL),
                                         ("timeout", Result.TIMEOUT), ("watchdog", Result.WATCHDOG),
                                         ("clean-signal", Result.SUCCESS)])
def test_result_names_the_cause(kind, result):
    assert end_process(kind, RestartPolicy.NO).result is result


def test_auto_restart_spawns_after_restart_sec_and_counts():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ALWAYS, restart_sec=10))
    spawn(svc, clock, 1)
    svc.on_exit(clock.now, 1, 1, None)
    assert svc.active_state == "activating" and svc.sub is Sub.AUTO_RESTART
    assert svc.next_deadline() == clock.now + 10
    assert svc.tick(clock.now + 9.99) == []
    acts = advance_to_deadline(svc, clock)
    assert Spawn("u.service") in acts
    assert svc.n_restarts == 1
    assert any(isinstance(a, Log) and "restart counter is at 1" in a.message for a in acts)


def test_success_exit_status_and_prevent_exit_status():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ON_FAILURE, success_exit_status=frozenset({3})))
    spawn(svc, clock, 1)
    svc.on_exit(clock.now, 1, 3, None)
    assert svc.sub is Sub.DEAD and svc.result is Result.SUCCESS

    svc = Service(cfg(restart=RestartPolicy.ALWAYS, restart_prevent_exit_status=frozenset({7})))
    spawn(svc, clock, 1)
    svc.on_exit(clock.now, 1, 7, None)
    assert svc.sub is Sub.FAILED


def test_exec_dash_prefix_makes_failure_count_as_success():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ON_FAILURE, exec_ignore_failure=True))
    spawn(svc, clock, 1)
    svc.on_exit(clock.now, 1, 9, None)
    assert svc.sub is Sub.DEAD


def test_exec_failure_is_exit_203():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.NO))
    svc.start(clock.now)
    acts = svc.on_spawn_failed(clock.now, "No such file or directory")
    assert svc.exit_code == EXIT_EXEC and svc.sub is Sub.FAILED and svc.result is Result.EXIT_CODE
    assert any(isinstance(a, Log) and "Failed to execute" in a.message for a in acts)


def test_start_limit_hit_then_reset_failed():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ALWAYS, restart_sec=0.1,
                      start_limit_interval=10, start_limit_burst=5))
    pid = 100
    spawn(svc, clock, pid)
    spawns = 1
    while True:
        svc.on_exit(clock.now, pid, 1, None)
        if svc.sub is not Sub.AUTO_RESTART:
            break
        acts = advance_to_deadline(svc, clock)
        if Spawn("u.service") not in acts:
            break
        spawns += 1
        pid += 1
        svc.on_spawned(clock.now, pid)
    assert spawns == 5  # the 6th start within 10 s is refused
    assert svc.sub is Sub.FAILED and svc.result is Result.START_LIMIT_HIT
    assert svc.next_deadline() is None  # no more automatic restarts
    assert Spawn("u.service") not in svc.start(clock.now)  # still within the window: refused again
    assert svc.result is Result.START_LIMIT_HIT
    svc.reset_failed(clock.now)
    assert svc.active_state == "inactive"
    assert svc.start(clock.now) == [Spawn("u.service")]


def test_start_limit_window_slides():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ALWAYS, restart_sec=3,
                      start_limit_interval=10, start_limit_burst=5))
    pid = 1
    spawn(svc, clock, pid)
    for _ in range(20):  # 3 s apart: never 6 starts within 10 s
        svc.on_exit(clock.now, pid, 1, None)
        assert Spawn("u.service") in advance_to_deadline(svc, clock)
        pid += 1
        svc.on_spawned(clock.now, pid)
    assert svc.sub is Sub.RUNNING


def test_start_limit_disabled_with_interval_zero():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ALWAYS, restart_sec=0, start_limit_interval=0))
    spawn(svc, clock, 1)
    for pid in range(2, 100):
        svc.on_exit(clock.now, pid - 1, 1, None)
        assert Spawn("u.service") in advance_to_deadline(svc, clock)
        svc.on_spawned(clock.now, pid)
    assert svc.n_restarts == 98


def test_restart_steps_series():
    c = cfg(restart_sec=1, restart_max_delay=16, restart_steps=4)
    assert [round(restart_delay(c, n), 6) for n in range(1, 8)] == [1, 2, 4, 8, 16, 16, 16]
    assert restart_delay(cfg(restart_sec=1), 5) == 1  # no steps: constant
    assert restart_delay(cfg(restart_sec=5, restart_max_delay=2, restart_steps=3), 3) == 5


def test_restart_steps_drive_the_auto_restart_deadlines():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ALWAYS, restart_sec=1, restart_max_delay=8,
                      restart_steps=3, start_limit_interval=0))
    spawn(svc, clock, 1)
    delays = []
    for pid in range(2, 7):
        svc.on_exit(clock.now, pid - 1, 1, None)
        delays.append(round(svc.next_deadline() - clock.now, 6))
        advance_to_deadline(svc, clock)
        svc.on_spawned(clock.now, pid)
    assert delays == [1, 2, 4, 8, 8]


def test_user_stop_escalates_to_sigkill_and_never_restarts():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ALWAYS, timeout_stop=90))
    spawn(svc, clock, 7)
    assert kills(svc.stop(clock.now)) == [(signal.SIGTERM, True)]
    assert svc.active_state == "deactivating" and svc.sub is Sub.STOP_SIGTERM
    assert svc.next_deadline() == clock.now + 90
    acts = advance_to_deadline(svc, clock)
    assert kills(acts) == [(signal.SIGKILL, True)] and svc.sub is Sub.STOP_SIGKILL
    svc.on_exit(clock.now, 7, None, signal.SIGKILL)
    assert svc.sub is Sub.FAILED and svc.result is Result.TIMEOUT
    assert svc.next_deadline() is None


def test_user_stop_with_clean_exit_is_inactive():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ALWAYS))
    spawn(svc, clock, 7)
    svc.stop(clock.now)
    acts = svc.on_exit(clock.now, 7, None, signal.SIGTERM)
    assert svc.sub is Sub.DEAD and svc.result is Result.SUCCESS
    assert Spawn("u.service") not in acts


def test_stop_during_auto_restart_cancels_it():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.ALWAYS))
    spawn(svc, clock, 7)
    svc.on_exit(clock.now, 7, 1, None)
    svc.stop(clock.now)
    # As systemd's service_enter_dead(): the earlier failure result is kept, so the unit shows failed.
    assert svc.next_deadline() is None and svc.active_state == "failed" and svc.result is Result.EXIT_CODE


def test_restart_of_running_unit_stops_then_starts():
    clock = Clock()
    svc = Service(cfg())
    spawn(svc, clock, 7)
    assert kills(svc.restart(clock.now)) == [(signal.SIGTERM, True)]
    acts = svc.on_exit(clock.now, 7, None, signal.SIGTERM)
    assert Spawn("u.service") in acts and svc.sub is Sub.START


@pytest.mark.parametrize("mode,term_group,kill_group", [
    (KillMode.CONTROL_GROUP, True, True), (KillMode.MIXED, False, True), (KillMode.PROCESS, False, False)])
def test_kill_mode_scopes(mode, term_group, kill_group):
    clock = Clock()
    svc = Service(cfg(kill_mode=mode, kill_signal=signal.SIGINT, timeout_stop=5))
    spawn(svc, clock, 7)
    assert kills(svc.stop(clock.now)) == [(signal.SIGINT, term_group)]
    assert kills(advance_to_deadline(svc, clock)) == [(signal.SIGKILL, kill_group)]
    final = kills(svc.on_exit(clock.now, 7, None, signal.SIGKILL))
    # After the main process is gone, the rest of its group goes too (not in KillMode=process).
    assert final == ([(signal.SIGKILL, True)] if mode is not KillMode.PROCESS else [])


def test_send_sigkill_no_keeps_waiting():
    clock = Clock()
    svc = Service(cfg(send_sigkill=False, timeout_stop=5))
    spawn(svc, clock, 7)
    svc.stop(clock.now)
    acts = advance_to_deadline(svc, clock)
    assert kills(acts) == [] and svc.sub is Sub.STOP_SIGTERM


def test_notify_ready_gates_active_and_start_timeout_infinite():
    clock = Clock()
    svc = Service(cfg(type=ServiceType.NOTIFY, timeout_start=math.inf))
    spawn(svc, clock, 5)
    assert svc.active_state == "activating" and svc.next_deadline() is None
    svc.on_notify(clock.now, 5, {"READY": "1", "STATUS": "serving"})
    assert svc.active_state == "active" and svc.status_text == "serving"


def test_notify_from_other_pid_is_refused():
    clock = Clock()
    svc = Service(cfg(type=ServiceType.NOTIFY))
    spawn(svc, clock, 5)
    acts = svc.on_notify(clock.now, 6, {"READY": "1"})
    assert svc.active_state == "activating"
    assert "only permitted for main PID 5" in acts[0].message


def test_watchdog_pings_keep_it_alive_then_abort_then_kill():
    clock = Clock()
    svc = Service(cfg(type=ServiceType.NOTIFY, watchdog_sec=10, timeout_stop=4, restart=RestartPolicy.ON_WATCHDOG))
    spawn(svc, clock, 5)
    svc.on_notify(clock.now, 5, {"READY": "1"})
    for _ in range(10):
        clock.now += 6
        assert svc.tick(clock.now) == []
        svc.on_notify(clock.now, 5, {"WATCHDOG": "1"})
    assert svc.sub is Sub.RUNNING
    acts = advance_to_deadline(svc, clock)
    assert kills(acts) == [(signal.SIGABRT, True)] and svc.sub is Sub.STOP_WATCHDOG
    acts = advance_to_deadline(svc, clock)  # it ignores SIGABRT: TimeoutStopSec later, SIGKILL
    assert kills(acts) == [(signal.SIGKILL, True)]
    svc.on_exit(clock.now, 5, None, signal.SIGKILL)
    assert svc.sub is Sub.AUTO_RESTART and svc.result is Result.WATCHDOG


def test_watchdog_trigger():
    clock = Clock()
    svc = Service(cfg(watchdog_sec=10))
    spawn(svc, clock, 5)
    assert kills(svc.on_notify(clock.now, 5, {"WATCHDOG": "trigger"})) == [(signal.SIGABRT, True)]


def test_stopping_notification_then_exit_follows_restart_policy():
    clock = Clock()
    svc = Service(cfg(type=ServiceType.NOTIFY, restart=RestartPolicy.ALWAYS))
    spawn(svc, clock, 5)
    svc.on_notify(clock.now, 5, {"READY": "1"})
    assert kills(svc.on_notify(clock.now, 5, {"STOPPING": "1"})) == []
    assert svc.active_state == "deactivating"
    svc.on_exit(clock.now, 5, 0, None)
    assert svc.sub is Sub.AUTO_RESTART


def test_mainpid_moves_the_main_process():
    clock = Clock()
    svc = Service(cfg())
    spawn(svc, clock, 5)
    svc.on_notify(clock.now, 5, {"MAINPID": "77"})
    assert svc.main_pid == 77
    assert svc.on_exit(clock.now, 5, 0, None) == []  # no longer the main process
    svc.on_exit(clock.now, 77, 1, None)
    assert svc.sub is Sub.FAILED


def test_exit_of_unknown_pid_is_ignored():
    clock = Clock()
    svc = Service(cfg())
    spawn(svc, clock, 5)
    assert svc.on_exit(clock.now, 99, 1, None) == [] and svc.sub is Sub.RUNNING


def test_pending_config_takes_effect_at_next_start():
    clock = Clock()
    svc = Service(cfg(restart=RestartPolicy.NO))
    spawn(svc, clock, 5)
    svc.pending_config = cfg(restart=RestartPolicy.ALWAYS, description="new")
    assert svc.config.description == ""
    svc.stop(clock.now)
    svc.on_exit(clock.now, 5, None, signal.SIGTERM)
    spawn(svc, clock, 6)
    assert svc.config.description == "new" and svc.config.restart is RestartPolicy.ALWAYS
