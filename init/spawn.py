"""Start a unit's ExecStart with what systemd sets up for a service process.

The child gets its own session (it and its descendants form the unit's process group, our
stand-in for a cgroup), PR_SET_PDEATHSIG=SIGKILL (killing init -9 takes its units down like
a power cut), default signal dispositions and an empty signal mask, stdin from /dev/null,
stdout/stderr to the unit's log, its environment and working directory.

Two ways to get there, because fork() of init (~30 MB with zmq loaded) costs ~2 ms of page
table copying while posix_spawn() (vfork) costs ~0.1 ms (bench/README.md):
- fast: posix_spawn of util-linux's `setpriv --pdeathsig KILL -- ARGV`, a small C program
  that sets the death signal and execs the command (same PID);
- fork: for units whose child must learn its own PID before exec (WATCHDOG_PID, exported
  with WatchdogSec=) or when setpriv is missing. Exec errors travel back over a
  close-on-exec pipe.
The fast path has a sub-millisecond window, between spawn and setpriv's prctl(), in which
init dying would not take the child along; the fork path checks getppid() to close it.
"""
from __future__ import annotations

import os
import shutil

from kubemu.child import RESET_SIGNALS, become_child

from .unitconfig import OutputTarget, UnitConfig

SETPRIV = shutil.which("setpriv")


def open_output(target: OutputTarget, default_path: str) -> int:
    if target.kind == "null":
        return os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
    if target.kind == "file":
        return os.open(target.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    path = target.path if target.kind == "append" else default_path
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)


def unit_environment(config: UnitConfig, base: dict[str, str], notify_socket: str) -> dict[str, str]:
    env = dict(base)
    env.update(config.environment)
    env["NOTIFY_SOCKET"] = notify_socket
    if config.watchdog_sec > 0:
        env["WATCHDOG_USEC"] = str(int(config.watchdog_sec * 1_000_000))
    return env


def resolve_executable(command: str, env: dict[str, str]) -> str:
    """The executable's path, searched in the unit's PATH for a bare name; OSError if none."""
    path = shutil.which(command, path=env.get("PATH", os.defpath))
    if path is None:
        exists = os.path.exists(command) if "/" in command else False
        raise OSError(13 if exists else 2, "Permission denied" if exists else "No such file or directory")
    return path


def spawn(config: UnitConfig, env: dict[str, str], log_path: str) -> int:
    """Start the unit's process and return its PID; OSError if it could not be executed."""
    executable = resolve_executable(config.exec_start[0], env)
    out_fd = open_output(config.standard_output, log_path)
    err_fd = out_fd if config.standard_error == config.standard_output else open_output(config.standard_error, log_path)
    try:
        if SETPRIV and "WATCHDOG_USEC" not in env:
            return _posix_spawn(config, executable, env, out_fd, err_fd)
        return _fork_exec(config, executable, env, out_fd, err_fd)
    finally:
        for fd in {out_fd, err_fd}:
            os.close(fd)


def _posix_spawn(config: UnitConfig, executable: str, env: dict[str, str], out_fd: int, err_fd: int) -> int:
    argv = [SETPRIV, "--pdeathsig", "KILL", "--", executable, *config.exec_start[1:]]
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_DUP2, out_fd, 1), (os.POSIX_SPAWN_DUP2, err_fd, 2)]
    cwd = os.path.expanduser(config.working_directory) if config.working_directory else None
    previous = os.getcwd() if cwd else None
    if cwd:
        os.chdir(cwd)  # posix_spawn has no chdir action before 3.13; init is single-threaded here
    try:
        return os.posix_spawn(SETPRIV, argv, env, file_actions=actions, setsid=True,
                              setsigdef=RESET_SIGNALS, setsigmask=())
    finally:
        if previous:
            os.chdir(previous)


def _fork_exec(config: UnitConfig, executable: str, env: dict[str, str], out_fd: int, err_fd: int) -> int:
    rd, wr = os.pipe2(os.O_CLOEXEC)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # child: only plain system calls until exec
        try:
            _become_service(config, executable, env, out_fd, err_fd, parent)
        except BaseException as exc:  # noqa: BLE001 - any failure must reach the parent, never unwind
            os.write(wr, f"{getattr(exc, 'errno', None) or 0}:{exc}".encode(errors="replace")[:1000])
        finally:
            os._exit(203)
    os.close(wr)
    with os.fdopen(rd, "rb") as pipe:
        failure = pipe.read()
    if failure:
        os.waitpid(pid, 0)
        errno, _, message = failure.decode(errors="replace").partition(":")
        raise OSError(int(errno) if errno.isdigit() else 0, message)
    return pid


def _become_service(config: UnitConfig, executable: str, env: dict[str, str], out_fd: int, err_fd: int,
                    parent: int) -> None:
    become_child(parent, out_fd, err_fd)
    if config.working_directory:
        os.chdir(os.path.expanduser(config.working_directory))
    if "WATCHDOG_USEC" in env:
        env = dict(env, WATCHDOG_PID=str(os.getpid()))
    os.execve(executable, list(config.exec_start), env)
