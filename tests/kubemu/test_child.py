"""kubemu/child.py: telling a process from a later one with its PID, and descriptors for
posix_spawn."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kubemu.child import high_fd, proc_stat, same_process


def test_same_process_is_a_live_process_with_its_start_time():
    me = proc_stat(os.getpid())[1]
    assert same_process(os.getpid(), me)
    assert same_process(os.getpid(), None), "no start time: any process with the PID"
    assert not same_process(os.getpid(), me + 1), "a later process given the PID is not it"
    assert not same_process(None, None) and not same_process(0, None)


def test_a_zombie_or_a_gone_process_is_not_the_same_process():
    child = subprocess.Popen([sys.executable, "-c", ""])
    start = proc_stat(child.pid)[1]
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    assert proc_stat(child.pid)[0] == "Z" and not same_process(child.pid, start)
    child.wait()
    assert not same_process(child.pid, start)


# In a fresh interpreter, where the first descriptors are free: a pipe gets two of them.
HIGH_FD = r"""
import fcntl, os
from kubemu.child import high_fd
r, w = os.pipe()
assert r < 10, r
moved = high_fd(r)
os.write(w, b"x")
try:
    os.fstat(r)
    closed = False
except OSError:
    closed = True
print(moved >= 10, bool(fcntl.fcntl(moved, fcntl.F_GETFD) & fcntl.FD_CLOEXEC), closed, os.read(moved, 1) == b"x")
"""


def test_high_fd_moves_a_low_descriptor_above_10_close_on_exec():
    done = subprocess.run([sys.executable, "-c", HIGH_FD], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert (done.stdout, done.stderr) == ("True True True True\n", "")
