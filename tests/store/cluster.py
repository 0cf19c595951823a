"""StoreCluster: start, kill, restart and wipe N store replicas (real processes) in a temp dir.

    with StoreCluster(state_dir, n=3, tick_ms=20) as c:     # state_dir: the conftest fixture
        c.start()
        leader = c.leader()
        c.call(leader, "put", {"key": b"k", "value": b"v"})
        c.write("put", {"key": b"k", "value": b"v"})       # follows NotLeader to the leader
        c.kill(leader)                                      # SIGKILL by default, waits for the exit
        c.restart(leader)

Every replica gets KUBEMU_STATE_DIR=<marker> (by default the directory itself, which is what the
`state_dir` fixture looks for), sockets right in the directory (ipc paths are short), a data dir
<dir>/<name> and a log <dir>/<name>.log. `stop()` (also on leaving the `with` block, and at
interpreter exit) SIGTERMs then SIGKILLs every replica it started and closes its clients.
Keyword flags become command-line flags: tick_ms=20 -> --tick-ms 20; True -> a bare flag.
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from kubemu import wire

import store.errors  # noqa: F401  (registers the NotLeader error code)

DEADLINE = float(os.environ.get("KUBEMU_TEST_DEADLINE", "60"))
REPO = Path(__file__).resolve().parents[2]


class StoreCluster:
    def __init__(self, tmp_dir, n: int = 3, marker=None, credentials: tuple[str, str] | None = None, **flags):
        self.dir = Path(tmp_dir)
        self.credentials = credentials  # what the test's clients present (replicas with --wire-secrets)
        self.marker = str(marker if marker is not None else self.dir)
        self.names = [f"store-{i}" for i in range(n)]
        self.endpoints = {name: f"ipc://{self.dir}/s{i}.sock" for i, name in enumerate(self.names)}
        self.flags = dict(flags)
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs: dict[str, object] = {}
        self._clients: dict[str, wire.SyncClient] = {}
        self.exit_codes: dict[str, int] = {}
        atexit.register(self.stop)

    # --- processes -----------------------------------------------------------------------

    def __enter__(self) -> StoreCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def data_dir(self, name: str) -> Path:
        return self.dir / name

    def log_path(self, name: str) -> Path:
        return self.dir / f"{name}.log"

    def log_text(self, name: str) -> str:
        try:
            return self.log_path(name).read_text(errors="replace")
        except OSError:
            return ""

    def peers_flag(self) -> str:
        return ",".join(f"{n}={ep}" for n, ep in self.endpoints.items())

    def argv(self, name: str, join: bool = False, **extra) -> list[str]:
        argv = [sys.executable, "-m", "store", "--name", name, "--data-dir", str(self.data_dir(name)),
                "--listen", self.endpoints[name], "--peers", self.peers_flag()]
        for key, value in {**self.flags, **extra}.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                argv.append(flag)
            elif value is not False and value is not None:
                argv += [flag, str(value)]
        if join:
            argv.append("--join")
        return argv

    def spawn(self, name: str, join: bool = False, env: dict | None = None, **extra) -> subprocess.Popen:
        if name in self.procs and self.procs[name].poll() is None:
            raise RuntimeError(f"{name} is already running")
        base = dict(os.environ, KUBEMU_STATE_DIR=self.marker, PYTHONPATH=str(REPO))
        for var in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
            base.pop(var, None)
        env = {**base, **(env or {})}
        logf = open(self.log_path(name), "ab")
        self._logs[name] = logf
        proc = subprocess.Popen(self.argv(name, join, **extra), env=env, cwd=str(REPO), stdout=logf,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs[name] = proc
        self.exit_codes.pop(name, None)
        return proc

    def start(self, wait: bool = True) -> StoreCluster:
        for name in self.names:
            self.spawn(name)
        if wait:
            self.leader()
        return self

    def add_member_process(self, name: str, endpoint: str | None = None) -> None:
        """Make room for a new member (its endpoint goes into --peers of later starts)."""
        self.names.append(name)
        self.endpoints[name] = endpoint or f"ipc://{self.dir}/s{len(self.names) - 1}.sock"

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def running(self) -> list[str]:
        return [n for n in self.names if self.alive(n)]

    def kill(self, name: str, sig: int = signal.SIGKILL, wait: bool = True) -> int | None:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(sig)
        self._drop_client(name)
        if not wait:
            return None
        code = proc.wait(DEADLINE)
        self.exit_codes[name] = code
        return code

    def restart(self, name: str, join: bool = False, env: dict | None = None, **extra) -> subprocess.Popen:
        if self.alive(name):
            self.kill(name)
        return self.spawn(name, join, env, **extra)

    def wipe(self, name: str) -> None:
        if self.alive(name):
            raise RuntimeError(f"stop {name} before wiping its data")
        shutil.rmtree(self.data_dir(name), ignore_errors=True)

    def stop(self) -> None:
        for name in list(self._clients):
            self._drop_client(name)
        procs = [(n, p) for n, p in self.procs.items() if p.poll() is None]
        for _, proc in procs:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        for name, proc in procs:
            try:
                self.exit_codes[name] = proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                self.exit_codes[name] = proc.wait()
        for f in self._logs.values():
            try:
                f.close()
            except Exception:
                pass
        self._logs.clear()

    # --- clients ---------------------------------------------------------------------------

    def client(self, name: str, timeout: float = 10.0) -> wire.SyncClient:
        c = self._clients.get(name)
        if c is None:
            c = self._clients[name] = wire.SyncClient(self.endpoints[name], timeout=timeout,
                                                      credentials=self.credentials)
        return c

    def _drop_client(self, name: str) -> None:
        c = self._clients.pop(name, None)
        if c is not None:
            c.close()

    def call(self, name: str, method: str, params: dict | None = None, timeout: float = 10.0, **kw):
        return self.client(name).call(method, params or {}, timeout=timeout, **kw)

    def status(self, name: str, timeout: float = 2.0) -> dict | None:
        """The replica's status, or None if it does not answer (down, starting)."""
        if not self.alive(name):
            return None
        try:
            return self.call(name, "status", timeout=timeout)
        except wire.WireError:
            self._drop_client(name)  # a fresh socket next time (the replica may have restarted)
            return None

    def statuses(self) -> dict[str, dict]:
        return {n: s for n in self.running() if (s := self.status(n)) is not None}

    def leader(self, timeout: float = DEADLINE, exclude: tuple[str, ...] = ()) -> str:
        """The name of the leader that every running replica that answers agrees on."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            sts = {n: s for n, s in self.statuses().items() if n not in exclude}
            last = sts
            leaders = [n for n, s in sts.items() if s["role"] == "leader"]
            if len(leaders) == 1:
                top = max(s["term"] for s in sts.values())
                lead = leaders[0]
                if sts[lead]["term"] == top and all(s["leader"] == lead for s in sts.values()):
                    return lead
            time.sleep(0.05)
        raise TimeoutError(f"no agreed leader within {timeout:g}s: {self._summary(last)}")

    @staticmethod
    def _summary(sts) -> str:
        if not sts:
            return "no replica answered"
        return "; ".join(f"{n}: {s['role']} term {s['term']} leader {s['leader']}" for n, s in sts.items())

    def write(self, method: str, params: dict, timeout: float = DEADLINE):
        """A write through whoever leads: follows NotLeader and retries while no leader
        answers. OutcomeUnknown is raised (a non-idempotent write must not be blindly retried)."""
        deadline = time.monotonic() + timeout
        target = None
        while True:
            name = target or self._any_leader_guess()
            try:
                return self.call(name, method, params)
            except store.errors.NotLeader as err:
                target = next((n for n, ep in self.endpoints.items() if ep == err.endpoint), None)
                if target is not None and not self.alive(target):
                    target = None
            except wire.OutcomeUnknown:
                raise
            except wire.Unavailable:
                target = None
                self._drop_client(name)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{method} did not succeed within {timeout:g}s")
            time.sleep(0.02)

    def _any_leader_guess(self) -> str:
        for n, s in self.statuses().items():
            if s["role"] == "leader":
                return n
        running = self.running()
        if not running:
            raise RuntimeError("no replica is running")
        return running[0]
