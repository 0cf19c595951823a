"""Helpers for the scheduler's process tests: the scheduler as a real process beside a real
store and apiserver (tests.components.apiserver.APIServerEnv), and object builders."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.components.apiserver import REPO, APIServerEnv
from tests.conftest import DEADLINE, terminate, wait_for


class SchedulerProc:
    """`python -m components.scheduler` against `env`'s apiserver, marked with its state dir.
    `start` returns once the process said READY=1 (its informers have synced)."""

    def __init__(self, env: APIServerEnv, *args: str):
        self.env = env
        self.args = list(args)
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def log_path(self) -> Path:
        return self.env.dir / f"scheduler-{self.starts}.log"

    def start(self) -> None:
        self.starts += 1
        notify_path = self.env.dir / f"notify-{self.starts}.sock"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify, open(self.log_path, "ab") as log:
            notify.bind(str(notify_path))
            notify.settimeout(0.2)
            env = dict(os.environ, KUBEMU_STATE_DIR=str(self.env.dir), PYTHONPATH=str(REPO),
                       NOTIFY_SOCKET=str(notify_path))
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "components.scheduler", "--api", self.env.endpoint, *self.args],
                env=env, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)

            def ready() -> bool:
                assert self.proc.poll() is None, f"the scheduler exited:\n{self.log_text()}"
                try:
                    return b"READY=1" in notify.recv(256)
                except socket.timeout:
                    return False
            wait_for(ready, message="the scheduler to report READY=1")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(DEADLINE)

    def stop(self) -> int | None:
        """SIGTERM and wait: the exit code (None if it had to be killed)."""
        return terminate(self.proc) if self.proc else None

    def log_text(self) -> str:
        return "".join(p.read_text(errors="replace")
                       for p in sorted(self.env.dir.glob("scheduler-*.log")))


def node(name: str, cpu: str = "4", memory: str = "8Gi", labels: dict | None = None,
         taints: list | None = None) -> dict:
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": {"taints": taints} if taints else {},
            "status": {"capacity": dict(resources), "allocatable": dict(resources),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def pod(name: str, cpu: str | None = None, memory: str | None = None, **spec) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    container = {"name": "c", "image": "busybox", "command": ["sleep", "1000"]}
    if requests:
        container["resources"] = {"requests": requests}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [container], **spec}}


def scheduled_condition(p: dict) -> dict | None:
    for cond in (p.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled":
            return cond
    return None
