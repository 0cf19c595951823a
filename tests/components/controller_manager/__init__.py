"""Helpers for the controller-manager tests: a real 3-replica store and apiserver (one per test
module), controller-manager processes that report READY=1 over a notify socket, object
builders, and a watch-fed pod census that sees every pod that ever existed at once."""
from __future__ import annotations

import asyncio
import datetime
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kubemu.apiclient import AlreadyExists, ApiClient, Conflict, SyncApiClient
from tests.components.apiserver import APIServerEnv
from tests.conftest import DEADLINE, kill_marked, wait_for

REPO = Path(__file__).resolve().parents[3]


class ControllerManager:
    """One `python -m components.controller_manager` process, marked with KUBEMU_STATE_DIR."""

    def __init__(self, directory: Path, endpoint: str, flags: list[str], name: str):
        self.dir = directory
        self.endpoint = endpoint
        self.flags = flags
        self.log_path = directory / f"{name}.log"
        self.notify_path = directory / f"{name}.notify"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Start it and wait for READY=1 (its caches are synced and its controllers run)."""
        self.notify_path.unlink(missing_ok=True)
        notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        notify.bind(str(self.notify_path))
        notify.settimeout(0.1)
        env = dict(os.environ, KUBEMU_STATE_DIR=str(self.dir), PYTHONPATH=str(REPO),
                   NOTIFY_SOCKET=str(self.notify_path))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "components.controller_manager", "--api", self.endpoint,
                 *self.flags], env=env, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_for(lambda: self._ready(notify), message="the controller-manager's READY=1")
        finally:
            notify.close()

    def _ready(self, notify: socket.socket) -> bool:
        assert self.proc.poll() is None, f"controller-manager exited:\n{self.log_text()}"
        try:
            return b"READY=1" in notify.recv(4096)
        except TimeoutError:
            return False

    def kill(self) -> None:
        """kill -9, and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(DEADLINE)

    def terminate(self) -> int:
        """SIGTERM; the exit code."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(DEADLINE)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


class Cluster:
    """A store + apiserver, a client, and the controller-managers a test module starts."""

    def __init__(self, env: APIServerEnv):
        self.env = env
        self.endpoint = env.endpoint
        self.api = SyncApiClient(env.endpoint, timeout=15.0)
        self.managers: list[ControllerManager] = []

    def controller_manager(self, *flags: str,
                           name: str = "controller-manager") -> ControllerManager:
        cm = ControllerManager(self.env.dir, self.endpoint, list(flags), name)
        self.managers.append(cm)
        cm.start()
        return cm

    def namespace(self, name: str) -> str:
        try:
            self.api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name}})
        except AlreadyExists:
            pass
        return name

    def pods(self, namespace: str, active_only: bool = True) -> list[dict]:
        items = self.api.list("pods", namespace=namespace)["items"]
        if active_only:
            items = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return items

    def events(self, namespace: str, reason: str, name: str) -> list[dict]:
        return self.api.list("events", namespace=namespace,
                             field_selector=f"reason={reason},involvedObject.name={name}")["items"]

    def mark_ready(self, pod: dict) -> None:
        """Play the kubelet: the pod is Running and Ready (a lost race is simply redone)."""
        pod = dict(pod, status={"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now_rfc3339()}]})
        try:
            self.api.update_status("pods", pod, namespace=pod["metadata"]["namespace"])
        except Conflict:
            pass

    def close(self) -> None:
        for cm in self.managers:
            cm.kill()
        self.api.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    path = tmp_path_factory.mktemp("cm")
    env = APIServerEnv(path)
    c = None
    try:
        env.start()
        c = Cluster(env)
        yield c
    finally:
        if c is not None:
            c.close()
        env.stop()
        leaked = kill_marked(str(path))
        assert not leaked, f"leaked processes {leaked}"


class PodCensus:
    """The pods of a namespace, kept from a watch (every change, not samples), and the most
    that ever existed at once."""

    def __init__(self, endpoint: str, namespace: str):
        self.endpoint, self.namespace = endpoint, namespace
        self.live: set[str] = set()
        self.most = 0
        self.error: BaseException | None = None
        self._started = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._task: asyncio.Task | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        assert self._started.wait(DEADLINE), "the pod census did not start"

    def _run(self) -> None:
        self._task = self._loop.create_task(self._watch())
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        except BaseException as err:  # surfaced by stop()
            self.error = err
            self._started.set()
        finally:
            self._loop.close()

    async def _watch(self) -> None:
        async with ApiClient(self.endpoint, timeout=15.0) as api:
            listed = await api.list("pods", namespace=self.namespace)
            self._count({p["metadata"]["uid"] for p in listed["items"]})
            rv = listed["metadata"]["resourceVersion"]
            self._started.set()
            while True:  # a watch the server ends is resumed where it stopped
                async with api.watch("pods", namespace=self.namespace, resource_version=rv,
                                     allow_bookmarks=True) as w:
                    async for type_, obj in w:
                        rv = obj["metadata"].get("resourceVersion") or rv
                        if type_ == "ADDED":
                            self._count(self.live | {obj["metadata"]["uid"]})
                        elif type_ == "DELETED":
                            self._count(self.live - {obj["metadata"]["uid"]})

    def _count(self, live: set[str]) -> None:
        self.live = live
        self.most = max(self.most, len(live))

    def stop(self) -> None:
        if self._task is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join(DEADLINE)
        if self.error is not None:
            raise self.error


def now_rfc3339(offset: float = 0.0) -> str:
    t = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset)
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _template(labels: dict, image: str) -> dict:
    return {"metadata": {"labels": dict(labels)},
            "spec": {"containers": [{"name": "c", "image": image, "command": ["sleep", "1000"]}]}}


def replicaset(name: str, replicas: int, labels: dict | None = None) -> dict:
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)},
                     "template": _template(labels, "busybox")}}


def deployment(name: str, replicas: int, labels: dict | None = None,
               image: str = "nginx:1") -> dict:
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)},
                     "template": _template(labels, image)}}


def controlled_by(obj: dict, owner: dict) -> bool:
    return any(ref.get("uid") == owner["metadata"]["uid"] and ref.get("controller")
               for ref in obj["metadata"].get("ownerReferences") or [])
