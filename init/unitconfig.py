"""The typed form of one unit file: what init/unitfile.py produces and init/core.py consumes.

Durations are float seconds; `math.inf` means "infinity" (no timeout / no limit).
Defaults are systemd's.
"""
from __future__ import annotations

import enum
import math
import signal
from dataclasses import dataclass, field


class ServiceType(str, enum.Enum):
    SIMPLE = "simple"
    EXEC = "exec"
    NOTIFY = "notify"


class RestartPolicy(str, enum.Enum):
    NO = "no"
    ON_SUCCESS = "on-success"
    ON_FAILURE = "on-failure"
    ON_ABNORMAL = "on-abnormal"
    ON_WATCHDOG = "on-watchdog"
    ON_ABORT = "on-abort"
    ALWAYS = "always"


class KillMode(str, enum.Enum):
    CONTROL_GROUP = "control-group"
    MIXED = "mixed"
    PROCESS = "process"


@dataclass(frozen=True)
class OutputTarget:
    """StandardOutput=/StandardError=: `inherit` (the unit's default log file), `file:PATH`
    (written from the start, not truncated, as systemd does) or `append:PATH`, or `null`."""

    kind: str = "inherit"  # inherit | file | append | null
    path: str | None = None


@dataclass(frozen=True)
class UnitConfig:
    name: str  # full unit name, e.g. "kubelet.service"
    path: str  # the file it was loaded from
    exec_start: tuple[str, ...]  # argv, already split per systemd quoting rules
    # [Unit]
    description: str = ""
    after: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    wants: tuple[str, ...] = ()
    start_limit_interval: float = 10.0  # StartLimitIntervalSec; 0 disables the limit
    start_limit_burst: int = 5
    # [Service]
    type: ServiceType = ServiceType.SIMPLE
    exec_ignore_failure: bool = False  # ExecStart=-... : a failing exit status counts as success
    restart: RestartPolicy = RestartPolicy.NO
    restart_sec: float = 0.1
    restart_steps: int = 0
    restart_max_delay: float = math.inf  # RestartMaxDelaySec
    success_exit_status: frozenset[int] = frozenset()  # extra clean exit codes
    success_signals: frozenset[int] = frozenset()  # extra clean signals
    restart_prevent_exit_status: frozenset[int] = frozenset()
    restart_prevent_signals: frozenset[int] = frozenset()
    timeout_start: float = 90.0
    timeout_stop: float = 90.0
    watchdog_sec: float = 0.0  # 0 = no watchdog
    watchdog_signal: int = signal.SIGABRT
    kill_mode: KillMode = KillMode.CONTROL_GROUP
    kill_signal: int = signal.SIGTERM
    send_sigkill: bool = True
    environment: tuple[tuple[str, str], ...] = ()  # ordered; later assignments win
    working_directory: str | None = None
    standard_output: OutputTarget = field(default_factory=OutputTarget)
    standard_error: OutputTarget = field(default_factory=OutputTarget)
