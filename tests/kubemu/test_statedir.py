"""kubemu/statedir.py: a node's init is the one kubemu recorded, or one a pidfile names that
was running when the pidfile was written; never a process found by its command line."""
from __future__ import annotations

import os
import subprocess
import time

from kubemu.child import proc_stat
from kubemu.ownership import Owned
from kubemu.statedir import StateDir


def test_init_pid(tmp_path):
    state = StateDir(tmp_path)
    node_dir = state.node_dir("node-0")
    node_dir.mkdir(parents=True)
    assert state.init_pid("node-0") is None and state.running_nodes() == []
    proc = subprocess.Popen(["sleep", "1000"])
    try:
        pidfile = node_dir / "init.pid"
        pidfile.write_text(f"{proc.pid}\n")  # by hand, `python -m init` writes it itself
        assert state.init_pid("node-0") == proc.pid and state.running_nodes() == ["node-0"]
        hour_ago = time.time() - 3600
        os.utime(pidfile, (hour_ago, hour_ago))  # the process was born after: a reused PID
        assert state.init_pid("node-0") is None
        pidfile.write_text("nonsense\n")
        assert state.init_pid("node-0") is None

        Owned(proc.pid, proc_stat(proc.pid)[1], None).save(node_dir)  # kubemu's record wins
        assert state.init_pid("node-0") == proc.pid
        Owned(proc.pid, proc_stat(proc.pid)[1] - 1, None).save(node_dir)
        pidfile.write_text(f"{proc.pid}\n")
        assert state.init_pid("node-0") is None
    finally:
        proc.kill()
        proc.wait()
