"""Helpers for the cluster DNS's process tests: `python -m components.dns` as a real process,
its bound ports read from its log."""
from __future__ import annotations

import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from tests.components.apiserver import REPO
from tests.conftest import spawn_marked, terminate, wait_for

SERVING = re.compile(r"serving \S+ on (\S+):(\d+) \(udp, tcp\); /health on \S+:(\d+), /ready on \S+:(\d+)")


class DNSProc:
    """The DNS component against `api` (an endpoint), marked with `state_dir`, on free ports;
    `main`: how Python runs it (a `-c` script may wrap its main)."""

    def __init__(self, state_dir: Path, api: str, *args: str, wrapper: tuple[str, ...] = (),
                 main: tuple[str, ...] = ("-m", "components.dns")):
        self.log_path = state_dir / "dns.log"
        self._log = open(self.log_path, "ab")
        argv = [*wrapper, sys.executable, *main, "--api", api, "--port", "0",
                "--health-port", "0", "--ready-port", "0", *args]
        self.proc = spawn_marked(argv, state_dir, cwd=str(REPO), stdout=self._log, stderr=subprocess.STDOUT,
                                 env={"PYTHONPATH": str(REPO)})
        found = wait_for(self._serving, message="the DNS component to say where it serves")
        self.host = found.group(1)
        self.port, self.health_port, self.ready_port = (int(found.group(i)) for i in (2, 3, 4))

    def _serving(self):
        assert self.proc.poll() is None, f"the DNS component exited:\n{self.log_text()}"
        return SERVING.search(self.log_text())

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def probe(self, path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port_of(path)}{path}", timeout=10) as r:
                return r.status
        except urllib.error.HTTPError as err:
            return err.code

    def port_of(self, path: str) -> int:
        return self.ready_port if path.startswith("/ready") else self.health_port

    def stop(self) -> int | None:
        """SIGTERM and wait: the exit code (None if it had to be killed)."""
        try:
            return terminate(self.proc)
        finally:
            self._log.close()
