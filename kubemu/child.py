"""What a supervisor does in a freshly forked child before exec, shared by init (its units)
and the kubelet's shim (its container), how a parent reaps its children, and how a process
is told from a later one with its PID (`proc_stat`, `same_process`). Only plain system calls:
`become_child` runs between fork() and exec(), so this imports nothing heavier than
kubemu.prctl."""
from __future__ import annotations

import fcntl
import os
import signal
from collections.abc import Iterator

from .prctl import set_pdeathsig

# Dispositions a child must not inherit: Python ignores SIGPIPE and SIGXFSZ at start-up, a
# supervisor catches others or was itself started with some ignored (nohup), and SIG_IGN
# survives exec. The child gets them back at their defaults.
RESET_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT,
                 signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD, signal.SIGTSTP,
                 signal.SIGTTIN, signal.SIGTTOU)


def become_child(parent: int, stdout_fd: int, stderr_fd: int, stdin_fd: int | None = None) -> None:
    """Own session and process group; killed with SIGKILL when `parent` dies (and exit now
    if it already has: the race between fork() and prctl()); default signals and an empty
    mask; stdin from `stdin_fd` (default /dev/null), stdout and stderr to the given fds."""
    os.setsid()
    set_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)
    default_signals()
    os.dup2(os.open(os.devnull, os.O_RDONLY) if stdin_fd is None else stdin_fd, 0)
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)


def default_signals() -> None:
    """In a forked child before exec: every signal at its default, none blocked."""
    signal.set_wakeup_fd(-1)
    for sig in RESET_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def reap_exited() -> Iterator[tuple[int, int]]:
    """Reap every child that has exited, without blocking: (pid, wait status) of each."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state letter, start time in clock ticks, process group ID) of a process from
    /proc/<pid>/stat, or None. The start time tells a process from a later one that got the
    same PID."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()  # the command name may contain spaces and ")"
    return fields[0].decode(), int(fields[19]), int(fields[2])


def same_process(pid: int | None, start_ticks: int | None) -> bool:
    """Whether `pid` runs and is the process that started at `start_ticks` (clock ticks since
    boot, from `proc_stat`): not a zombie, and not a later process given the same PID. A
    start of None accepts any process with that PID."""
    if not pid:
        return False
    stat = proc_stat(pid)
    return stat is not None and stat[0] not in "ZX" and (start_ticks is None or stat[1] == start_ticks)


def high_fd(fd: int) -> int:
    """`fd` moved above 10 (the original is closed, also on failure): posix_spawn's dup2 onto
    the same number would keep its close-on-exec flag and the child would not receive it."""
    if fd >= 10:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    finally:
        os.close(fd)
