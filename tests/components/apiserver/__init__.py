"""Helpers for the apiserver tests: a real 3-replica store plus an apiserver process."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kubemu import wire
from tests.conftest import DEADLINE, kill_marked, wait_for
from tests.store.cluster import StoreCluster

REPO = Path(__file__).resolve().parents[3]


class APIServerEnv:
    def __init__(self, directory: Path, bookmark_interval: float = 0.5, extra_args: tuple[str, ...] = ()):
        self.dir = directory
        self.extra_args = extra_args  # more apiserver flags (the HTTPS tests' TLS files)
        self.store = StoreCluster(directory, n=3, tick_ms=20)
        self.endpoint = f"ipc://{directory}/api.sock"
        self.audit_path = directory / "audit.log"
        self.log_path = directory / "apiserver.log"
        self.bookmark_interval = bookmark_interval
        self.proc: subprocess.Popen | None = None
        self._log = None
        self.client: wire.SyncClient | None = None

    def start(self) -> None:
        self.store.start()
        self.start_apiserver()

    def start_apiserver(self) -> None:
        store_eps = ",".join(self.store.endpoints.values())
        env = dict(os.environ, KUBEMU_STATE_DIR=str(self.dir), PYTHONPATH=str(REPO))
        env.pop("NOTIFY_SOCKET", None)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "components.apiserver", "--listen", self.endpoint,
             "--store-endpoints", store_eps, "--audit-log", str(self.audit_path),
             "--bookmark-interval", str(self.bookmark_interval), *self.extra_args],
            env=env, cwd=str(REPO), stdout=self._log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        if self.client is None:
            self.client = wire.SyncClient(self.endpoint, timeout=10.0)
        wait_for(self._ready, message="the apiserver to serve and create the default namespace")

    def _ready(self) -> bool:
        assert self.proc.poll() is None, self.log_text()
        try:
            self.client.call("get", {"resource": "namespaces", "name": "kube-system"}, timeout=2.0)
            self.client.call("get", {"resource": "namespaces", "name": "default"}, timeout=2.0)
            return True
        except wire.WireError:
            return False

    def kill_apiserver(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(DEADLINE)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def call(self, method: str, **params):
        return self.client.call(method, params, timeout=15.0)

    def watch(self, **params) -> "WatchReader":
        return WatchReader(self.endpoint, params)

    def stop(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
        self.store.stop()


class WatchReader:
    """A watch stream on its own client, read with a deadline per item."""

    def __init__(self, endpoint: str, params: dict):
        self.client = wire.SyncClient(endpoint, timeout=15.0)
        self.stream = self.client._client.stream("watch", params, timeout=15.0)
        self.client._run(self.stream._open())

    def next(self, timeout: float = DEADLINE, skip_bookmarks: bool = True) -> dict:
        while True:
            item = self.client._run(asyncio.wait_for(self.stream.__anext__(), timeout))
            if skip_bookmarks and item["type"] == "BOOKMARK":
                continue
            return item

    def take(self, n: int, timeout: float = DEADLINE) -> list[dict]:
        return [self.next(timeout) for _ in range(n)]

    def nothing_more(self, within: float = 1.0) -> bool:
        """True if no (non-bookmark) item arrives within `within` seconds (a bounded check, not timing)."""
        try:
            item = self.next(within)
        except asyncio.TimeoutError:
            return True
        raise AssertionError(f"unexpected watch item {item}")

    def close(self) -> None:
        try:
            self.client._run(self.stream.aclose())
        except Exception:
            pass
        self.client.close()

    def __enter__(self) -> "WatchReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def running(env: APIServerEnv, path: Path):
    """A module fixture's body: `env` started, yielded, stopped, and nothing of it left running."""
    try:
        env.start()
        yield env
    finally:
        env.stop()
        leaked = kill_marked(str(path))
        assert not leaked, f"leaked processes {leaked}"


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    path = tmp_path_factory.mktemp("a")
    yield from running(APIServerEnv(path), path)


def pod(name: str | None = None, *, labels: dict | None = None, generate_name: str | None = None,
        namespace: str | None = None, **spec) -> dict:
    meta: dict = {}
    if name:
        meta["name"] = name
    if generate_name:
        meta["generateName"] = generate_name
    if labels:
        meta["labels"] = labels
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["sleep", "1000"]}], **spec}}


def deployment(name: str, replicas: int = 1, labels: dict | None = None) -> dict:
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx", "command": ["nginx"]}]}}}}
