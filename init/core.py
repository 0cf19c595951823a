"""systemd's service semantics as a pure state machine: events and the time in, actions out.

Nothing here forks, signals, sleeps or reads a clock. The shell (init/supervisor.py) feeds
events (`on_spawned`, `on_exit`, `on_notify`, user requests) with `now` from a monotonic
clock, calls `tick(now)` when `next_deadline()` is reached, and carries out the returned
actions (`Spawn`, `Kill`, `Log`). Tests drive the same code with a fake clock.

States are systemd's (active state + sub-state):

    inactive/dead --start--> activating/start --(simple|exec: spawned; notify: READY=1)--> active/running
    running --exit--> (restart policy) activating/auto-restart --RestartSec--> activating/start
                                    or failed/failed, or inactive/dead after a clean exit
    running --stop--> deactivating/stop-sigterm --TimeoutStopSec--> deactivating/stop-sigkill
    running --missed WATCHDOG=1--> deactivating/stop-watchdog (WatchdogSignal) --TimeoutStopSec--> SIGKILL
    any start beyond StartLimitBurst within StartLimitIntervalSec --> failed/failed, result start-limit-hit
"""
from __future__ import annotations

import enum
import math
import signal
from dataclasses import dataclass, field

from .unitconfig import KillMode, RestartPolicy, ServiceType, UnitConfig

# Exit status systemd reports when the exec() of ExecStart itself fails (EXIT_EXEC).
EXIT_EXEC = 203

# Signals whose termination systemd counts as a clean exit (systemd.service(5), SuccessExitStatus=).
CLEAN_SIGNALS = frozenset({signal.SIGHUP, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE})


# --- actions the shell carries out ------------------------------------------------------

@dataclass(frozen=True)
class Spawn:
    unit: str


@dataclass(frozen=True)
class Kill:
    unit: str
    pid: int
    signal: int
    group: bool  # True: the whole process group of `pid` (the unit's "control group")


@dataclass(frozen=True)
class Log:
    unit: str
    message: str


Action = Spawn | Kill | Log


class Result(str, enum.Enum):
    SUCCESS = "success"
    EXIT_CODE = "exit-code"
    SIGNAL = "signal"
    TIMEOUT = "timeout"
    WATCHDOG = "watchdog"
    START_LIMIT_HIT = "start-limit-hit"
    RESOURCES = "resources"


class Sub(str, enum.Enum):
    DEAD = "dead"
    START = "start"
    RUNNING = "running"
    STOP_SIGTERM = "stop-sigterm"
    STOP_SIGKILL = "stop-sigkill"
    STOP_WATCHDOG = "stop-watchdog"
    AUTO_RESTART = "auto-restart"
    FAILED = "failed"


ACTIVE_STATE = {
    Sub.DEAD: "inactive",
    Sub.START: "activating",
    Sub.RUNNING: "active",
    Sub.STOP_SIGTERM: "deactivating",
    Sub.STOP_SIGKILL: "deactivating",
    Sub.STOP_WATCHDOG: "deactivating",
    Sub.AUTO_RESTART: "activating",
    Sub.FAILED: "failed",
}

STOPPING = frozenset({Sub.STOP_SIGTERM, Sub.STOP_SIGKILL, Sub.STOP_WATCHDOG})
HAS_PROCESS = frozenset({Sub.START, Sub.RUNNING}) | STOPPING


# --- pure policy functions ---------------------------------------------------------------

def should_restart(policy: RestartPolicy, result: Result) -> bool:
    """The table in systemd.service(5) under Restart=, rows = how the process ended."""
    if policy is RestartPolicy.NO:
        return False
    if policy is RestartPolicy.ALWAYS:
        return True
    if policy is RestartPolicy.ON_SUCCESS:
        return result is Result.SUCCESS
    if policy is RestartPolicy.ON_FAILURE:
        return result is not Result.SUCCESS
    if policy is RestartPolicy.ON_ABNORMAL:
        return result in (Result.SIGNAL, Result.TIMEOUT, Result.WATCHDOG)
    if policy is RestartPolicy.ON_ABORT:
        return result is Result.SIGNAL
    if policy is RestartPolicy.ON_WATCHDOG:
        return result is Result.WATCHDOG
    raise AssertionError(policy)


def exit_result(config: UnitConfig, code: int | None, sig: int | None) -> Result:
    """Classify a process end: clean exit codes/signals are success (SuccessExitStatus= adds to them)."""
    if sig is not None:
        clean = sig in CLEAN_SIGNALS or sig in config.success_signals
        return Result.SUCCESS if clean else Result.SIGNAL
    if code == 0 or code in config.success_exit_status:
        return Result.SUCCESS
    # ExecStart=-... : "a failure exit code is recorded but has no further effect" (systemd.service(5))
    return Result.SUCCESS if config.exec_ignore_failure else Result.EXIT_CODE


def restart_prevented(config: UnitConfig, code: int | None, sig: int | None) -> bool:
    if sig is not None:
        return sig in config.restart_prevent_signals
    return code is not None and code in config.restart_prevent_exit_status


def restart_delay(config: UnitConfig, n_restarts_next: int) -> float:
    """RestartSec= for the n-th automatic restart, stretched exponentially towards
    RestartMaxDelaySec= over RestartSteps= restarts (systemd >= 254)."""
    base, top, steps = config.restart_sec, config.restart_max_delay, config.restart_steps
    if n_restarts_next <= 1 or steps == 0 or base == 0 or math.isinf(top) or base >= top:
        return base
    if n_restarts_next > steps:
        return top
    return base * (top / base) ** ((n_restarts_next - 1) / steps)


@dataclass
class StartLimit:
    """systemd's ratelimit: at most `burst` starts in a window of `interval` seconds."""

    interval: float
    burst: int
    begin: float | None = None
    count: int = 0

    def allow(self, now: float) -> bool:
        if self.interval <= 0 or self.burst <= 0:
            return True
        if self.begin is None or now >= self.begin + self.interval:
            self.begin, self.count = now, 0
        self.count += 1
        return self.count <= self.burst

    def reset(self) -> None:
        self.begin, self.count = None, 0


def kill_scope(mode: KillMode, final: bool) -> bool:
    """Whether a kill signal goes to the whole group (systemd.kill(5) KillMode=):
    control-group always; mixed only for the final SIGKILL; process never."""
    if mode is KillMode.CONTROL_GROUP:
        return True
    if mode is KillMode.MIXED:
        return final
    return False


# --- one service -------------------------------------------------------------------------

@dataclass
class Service:
    config: UnitConfig
    sub: Sub = Sub.DEAD
    result: Result = Result.SUCCESS
    main_pid: int | None = None
    n_restarts: int = 0
    since: float | None = None  # when the active state last changed (the shell's clock)
    exit_code: int | None = None
    exit_signal: int | None = None
    status_text: str = ""
    pending_config: UnitConfig | None = None  # daemon-reload: takes effect at the next start
    _deadline: float | None = None  # start timeout / stop timeout / auto-restart, per sub-state
    _watchdog_deadline: float | None = None
    _stop_requested: bool = False  # a user stop never triggers a restart
    _start_after_stop: bool = False  # `restart` of a running unit
    _limit: StartLimit = field(init=False)

    def __post_init__(self) -> None:
        self._limit = StartLimit(self.config.start_limit_interval, self.config.start_limit_burst)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def active_state(self) -> str:
        return ACTIVE_STATE[self.sub]

    def next_deadline(self) -> float | None:
        times = [t for t in (self._deadline, self._watchdog_deadline) if t is not None]
        return min(times) if times else None

    # -- requests ----------------------------------------------------------------------

    def start(self, now: float) -> list[Action]:
        if self.sub in (Sub.START, Sub.RUNNING):
            return []
        if self.sub in STOPPING:
            self._start_after_stop = True
            return []
        self.n_restarts = 0  # an explicit start flushes the restart counter, as systemd does
        return self._start(now)

    def stop(self, now: float) -> list[Action]:
        self._start_after_stop = False
        if self.sub is Sub.AUTO_RESTART:
            return self._enter_dead(now, Result.SUCCESS, keep_result=True)
        if self.sub in STOPPING:
            self._stop_requested = True
            return []
        if self.sub in (Sub.START, Sub.RUNNING):
            self._stop_requested = True
            return self._enter_stop_sigterm(now)
        return []

    def restart(self, now: float) -> list[Action]:
        if self.sub in (Sub.START, Sub.RUNNING) or self.sub in STOPPING:
            actions = self.stop(now)
            self._start_after_stop = True
            return actions
        return self.start(now)

    def reset_failed(self, now: float) -> list[Action]:
        self._limit.reset()
        self.n_restarts = 0
        if self.sub is Sub.FAILED:
            self.result = Result.SUCCESS
            self._set(now, Sub.DEAD)
        return []

    # -- what happened to the process -------------------------------------------------

    def on_spawned(self, now: float, pid: int) -> list[Action]:
        self.main_pid = pid
        if self.config.watchdog_sec > 0:
            self._watchdog_deadline = now + self.config.watchdog_sec
        if self.config.type is ServiceType.NOTIFY:
            self._deadline = None if math.isinf(self.config.timeout_start) else now + self.config.timeout_start
            return []
        self._deadline = None
        self._set(now, Sub.RUNNING)
        return []

    def on_spawn_failed(self, now: float, message: str) -> list[Action]:
        """exec() failed: systemd reports it as exit status 203/EXEC of the main process."""
        return [Log(self.name, f"Failed to execute {self.config.exec_start[0]}: {message}"),
                *self._main_exited(now, None, EXIT_EXEC, None)]

    def on_exit(self, now: float, pid: int, code: int | None, sig: int | None) -> list[Action]:
        if pid != self.main_pid:
            return []
        return self._main_exited(now, pid, code, sig)

    def on_notify(self, now: float, pid: int, fields: dict[str, str]) -> list[Action]:
        """sd_notify(3) from the main process (NotifyAccess=main); others are refused."""
        if pid != self.main_pid:
            return [Log(self.name, f"Got notification message from PID {pid}, but reception only "
                                   f"permitted for main PID {self.main_pid}")]
        actions: list[Action] = []
        if "STATUS" in fields:
            self.status_text = fields["STATUS"]
        if fields.get("MAINPID", "").isdigit():
            self.main_pid = int(fields["MAINPID"])
        if fields.get("WATCHDOG") == "1" and self.config.watchdog_sec > 0 and self.sub in (Sub.START, Sub.RUNNING):
            self._watchdog_deadline = now + self.config.watchdog_sec
        if fields.get("WATCHDOG") == "trigger" and self.sub in (Sub.START, Sub.RUNNING):
            actions += self._watchdog_expired(now)
        if fields.get("READY") == "1" and self.sub is Sub.START:
            self._deadline = None
            self._set(now, Sub.RUNNING)
        if fields.get("STOPPING") == "1" and self.sub is Sub.RUNNING:
            # The service is stopping on its own: wait for it, with the stop timeout, no signal.
            self._set(now, Sub.STOP_SIGTERM)
            self._deadline = self._after(now, self.config.timeout_stop)
        return actions

    def tick(self, now: float) -> list[Action]:
        if self._watchdog_deadline is not None and now >= self._watchdog_deadline and self.sub in (Sub.START, Sub.RUNNING):
            return self._watchdog_expired(now)
        if self._deadline is None or now < self._deadline:
            return []
        self._deadline = None
        if self.sub is Sub.START:
            self.result = Result.TIMEOUT
            return [Log(self.name, "Start operation timed out. Terminating."), *self._enter_stop_sigterm(now)]
        if self.sub in (Sub.STOP_SIGTERM, Sub.STOP_WATCHDOG):
            return self._stop_timed_out(now)
        if self.sub is Sub.AUTO_RESTART:
            self.n_restarts += 1
            return [Log(self.name, f"Scheduled restart job, restart counter is at {self.n_restarts}."),
                    *self._start(now)]
        return []

    # -- transitions -------------------------------------------------------------------

    def _start(self, now: float) -> list[Action]:
        if self.pending_config is not None:
            self.config, self.pending_config = self.pending_config, None
            self._limit.interval = self.config.start_limit_interval
            self._limit.burst = self.config.start_limit_burst
        if not self._limit.allow(now):
            self.result = Result.START_LIMIT_HIT
            return [Log(self.name, "Start request repeated too quickly."),
                    *self._enter_dead(now, Result.START_LIMIT_HIT)]
        self.result = Result.SUCCESS
        self._stop_requested = False
        self.exit_code = self.exit_signal = None
        self.status_text = ""
        self._set(now, Sub.START)
        return [Spawn(self.name)]

    def _enter_stop_sigterm(self, now: float) -> list[Action]:
        self._watchdog_deadline = None
        self._set(now, Sub.STOP_SIGTERM)
        self._deadline = self._after(now, self.config.timeout_stop)
        return self._signal(self.config.kill_signal, final=False)

    def _watchdog_expired(self, now: float) -> list[Action]:
        self._watchdog_deadline = None
        self.result = Result.WATCHDOG
        self._set(now, Sub.STOP_WATCHDOG)
        # TimeoutAbortSec= defaults to TimeoutStopSec=.
        self._deadline = self._after(now, self.config.timeout_stop)
        return [Log(self.name, f"Watchdog timeout (limit {self.config.watchdog_sec:g}s)!"),
                *self._signal(self.config.watchdog_signal, final=False)]

    def _stop_timed_out(self, now: float) -> list[Action]:
        state = self.sub.value
        if self.result is Result.SUCCESS:
            self.result = Result.TIMEOUT
        if not self.config.send_sigkill:
            return [Log(self.name, f"State '{state}' timed out. Skipping SIGKILL.")]
        self._set(now, Sub.STOP_SIGKILL)
        return [Log(self.name, f"State '{state}' timed out. Killing."),
                *self._signal(signal.SIGKILL, final=True)]

    def _main_exited(self, now: float, pid: int | None, code: int | None, sig: int | None) -> list[Action]:
        self.main_pid = None
        self._watchdog_deadline = None
        self._deadline = None
        self.exit_code, self.exit_signal = code, sig
        actions: list[Action] = []
        if pid is not None and kill_scope(self.config.kill_mode, final=True):
            # The rest of the unit's "control group" goes with its main process.
            actions.append(Kill(self.name, pid, signal.SIGKILL, group=True))
        outcome = exit_result(self.config, code, sig)
        if self.result is Result.SUCCESS:  # a timeout/watchdog verdict reached earlier wins
            self.result = outcome
        if self._stop_requested:
            actions += self._enter_dead(now, self.result)
            if self._start_after_stop:
                self._start_after_stop = False
                actions += self.start(now)
            return actions
        if should_restart(self.config.restart, self.result) and not restart_prevented(self.config, code, sig):
            delay = restart_delay(self.config, self.n_restarts + 1)
            self._set(now, Sub.AUTO_RESTART)
            self._deadline = now + delay
            if self.result is not Result.SUCCESS:
                actions.append(Log(self.name, f"Failed with result '{self.result.value}'."))
            return actions
        return actions + self._enter_dead(now, self.result)

    def _enter_dead(self, now: float, result: Result, keep_result: bool = False) -> list[Action]:
        self._deadline = None
        self._watchdog_deadline = None
        self._stop_requested = False
        if not keep_result:
            self.result = result
        if self.result is Result.SUCCESS:
            self._set(now, Sub.DEAD)
            return []
        self._set(now, Sub.FAILED)
        return [Log(self.name, f"Failed with result '{self.result.value}'.")]

    def _signal(self, sig: int, final: bool) -> list[Action]:
        if self.main_pid is None:
            return []
        return [Kill(self.name, self.main_pid, sig, kill_scope(self.config.kill_mode, final))]

    def _set(self, now: float, sub: Sub) -> None:
        if ACTIVE_STATE[sub] != ACTIVE_STATE[self.sub] or self.since is None:
            self.since = now
        self.sub = sub

    @staticmethod
    def _after(now: float, timeout: float) -> float | None:
        return None if math.isinf(timeout) else now + timeout
