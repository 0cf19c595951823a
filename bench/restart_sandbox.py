"""The restart suite's rows for a pod with a sandbox (kubelet/sandboxes.py: a holder that owns
the pod's namespaces, CNI ADD in its network namespace, the pod's cgroups), each on a node of
its own with a throw-away fabric (bench/sandboxnode.py), beside the host-network rows:

- kubelet -> pod with a sandbox, holder killed: "Pod sandbox changed, it will be killed and
  re-created": the container is killed, CNI DEL, a new holder, CNI ADD, the container again;
- a host-network pod and a pod with a sandbox in turn on one node, each trial: create ->
  running (the manifest written -> the container reports in, its PID as in every row),
  container killed -> running again (the sandbox is kept: same IP, only the container
  restarts), delete -> gone (the manifest removed -> the pod's processes gone: the container;
  with a sandbox, its holder too, which the kubelet kills after CNI DEL).
"""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .restart_layers import alive
from .sandboxnode import SandboxNode, sandbox_node

POD = "child"
POLL = 0.002
TIMEOUT = 60.0
CREATE_HOST = "kubemu kubelet -> static pod, create -> running (host network)"
CREATE_SANDBOX = "kubemu kubelet -> static pod, create -> running (with a sandbox)"
KILL_HOST = "kubemu kubelet -> static pod, container killed (host network)"
KILL_SANDBOX = "kubemu kubelet -> static pod, container killed (with a sandbox)"
DELETE_HOST = "kubemu kubelet -> static pod, delete -> gone (host network)"
DELETE_SANDBOX = "kubemu kubelet -> static pod, delete -> gone (with a sandbox)"
CREATE_CLOCK = "the manifest written -> the container reports its PID"
DELETE_CLOCK = "the manifest removed -> the container has exited (with a sandbox: and the holder, after CNI DEL)"


def _holder(node: SandboxNode, name: str, child_pid: int) -> int:
    """The holder of the sandbox the child runs in (so a trial never passes for a restart in a
    sandbox that was not re-created)."""
    netns = os.stat(f"/proc/{child_pid}/ns/net").st_ino
    deadline = time.monotonic() + TIMEOUT
    while (record := node.sandbox(name)) is None or record["netns_inode"] != netns:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the container of pod {name} does not run in the pod's sandbox ({record})")
        time.sleep(POLL)
    return record["holder"]["pid"]


def clock_of(row: str) -> str | None:
    """The clock of a row of create_delete's; None: the restart suite's (kill -> the child reports)."""
    return {CREATE_HOST: CREATE_CLOCK, CREATE_SANDBOX: CREATE_CLOCK,
            DELETE_HOST: DELETE_CLOCK, DELETE_SANDBOX: DELETE_CLOCK}.get(row)


class HolderVictim:
    """Tells the suite to kill the pod's sandbox holder rather than the container it reported."""

    def __init__(self, node: SandboxNode):
        self.node = node

    def victim(self, child_pid: int) -> int:
        return _holder(self.node, POD, child_pid)


@contextmanager
def kubelet_sandbox_holder(child: list[str], workdir: Path) -> Iterator[HolderVictim]:
    """A static pod with a sandbox; the suite kills its holder."""
    with sandbox_node(workdir) as node:
        node.write_pod(POD, child)
        yield HolderVictim(node)


def _gone(pids: list[int], name: str) -> float:
    deadline = time.monotonic() + TIMEOUT
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the kubelet did not stop pod {name} within {TIMEOUT:g}s")
        time.sleep(POLL)
    return time.perf_counter()


def create_delete(child: list[str], next_report: Callable[[float], tuple[int, float]], workdir: Path, trials: int,
                  progress=None) -> dict[str, list[float]]:
    """Seconds per trial for each row, a host-network pod then a pod with a sandbox per trial,
    after one warm-up trial of each. `next_report(timeout)`: the next child's PID and when it
    reported in."""
    rows = ((True, CREATE_HOST, KILL_HOST, DELETE_HOST), (False, CREATE_SANDBOX, KILL_SANDBOX, DELETE_SANDBOX))
    samples: dict[str, list[float]] = {row: [] for row in (CREATE_HOST, CREATE_SANDBOX, KILL_HOST, KILL_SANDBOX,
                                                            DELETE_HOST, DELETE_SANDBOX)}  # the table's order
    with sandbox_node(workdir) as node:
        for i in range(trials + 1):
            for host, create, kill, delete in rows:
                name = f"{'h' if host else 's'}{i}"
                started = time.perf_counter()
                node.write_pod(name, child, host_network=host)
                pid, running = next_report(TIMEOUT)
                holder = None if host else _holder(node, name, pid)
                killed = time.perf_counter()
                os.kill(pid, signal.SIGKILL)
                pid, again = next_report(TIMEOUT)
                if not host and _holder(node, name, pid) != holder:
                    raise RuntimeError(f"pod {name}: a container's kill -9 re-created its sandbox")
                pids = [pid] if host else [pid, holder]
                removed = time.perf_counter()
                node.remove_pod(name)
                gone = _gone(pids, name) - removed
                if i:  # the first trial warms caches and is not counted
                    samples[create].append(running - started)
                    samples[kill].append(again - killed)
                    samples[delete].append(gone)
            if progress:
                progress()
    return samples
