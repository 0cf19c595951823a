"""kubemu/top.py: kubectl top's tables of PodMetrics and NodeMetrics (pure), and `kubemu top`
asking a real kubelet streaming server for its stats, as the cluster admin. A whole cluster's
`kubemu top` beside `kubectl top` is in tests/test_kubectl.py."""
from __future__ import annotations

import asyncio
import contextlib
import threading

import pytest
from click.testing import CliRunner

from kubelet.podcgroups import PodCgroups
from kubelet.runtime import Runtime
from kubelet.stats import Stats
from kubelet.streaming import StreamingServer
from kubemu import _wire_auth, cli, top
from kubemu.statedir import StateDir
from tests.conftest import DEADLINE

MI = 1 << 20


def usage(cpu: str, memory: str) -> dict:
    return {"cpu": cpu, "memory": memory}


def pod_metrics(namespace: str, name: str, **containers: dict) -> dict:
    return {"kind": "PodMetrics", "metadata": {"name": name, "namespace": namespace}, "window": "10s",
            "containers": [{"name": n, "usage": u} for n, u in containers.items()]}


def node_metrics(name: str, cpu: str, memory: str) -> dict:
    return {"kind": "NodeMetrics", "metadata": {"name": name}, "window": "10s", "usage": usage(cpu, memory)}


def test_pod_table_is_kubectl_top_pods():
    items = [pod_metrics("default", "web-2", app=usage("2500001n", f"{12 * MI + 4096}"), side=usage("1m", "0")),
             pod_metrics("default", "api", app=usage("1250m", "300Mi")),
             pod_metrics("kube-system", "etcd", etcd=usage("20m", "40Mi"))]
    # CPU summed over the containers, then rounded up to millicores (Quantity.MilliValue)
    assert top.pod_table(items[:2], False) == (
        "NAME    CPU(cores)   MEMORY(bytes)\n"
        "web-2   4m           12Mi\n"
        "api     1250m        300Mi\n")
    assert top.pod_table(items, True) == (
        "NAMESPACE     NAME    CPU(cores)   MEMORY(bytes)\n"
        "default       web-2   4m           12Mi\n"
        "default       api     1250m        300Mi\n"
        "kube-system   etcd    20m          40Mi\n")
    assert top.pod_table(items[:1], False, containers=True) == (
        "POD     NAME   CPU(cores)   MEMORY(bytes)\n"
        "web-2   app    3m           12Mi\n"
        "web-2   side   1m           0Mi\n")


def test_node_table_is_kubectl_top_nodes():
    items = [node_metrics("node-0", "500m", "1Gi"), node_metrics("node-1", "7m", "3Mi")]
    nodes = [{"metadata": {"name": "node-0"}, "status": {"allocatable": {"cpu": "2", "memory": "4Gi"}}},
             {"metadata": {"name": "node-1"}, "status": {"allocatable": {"cpu": "bogus", "memory": "0"}}},
             {"metadata": {"name": "node-2"}}]
    assert top.node_table(items, nodes) == (
        "NAME     CPU(cores)   CPU(%)      MEMORY(bytes)   MEMORY(%)\n"
        "node-0   500m         25%         1024Mi          25%\n"
        "node-1   7m           <unknown>   3Mi             <unknown>\n"
        "node-2   <unknown>    <unknown>   <unknown>       <unknown>\n")


class FakeApi:
    def __init__(self, nodes=("node-1",), pods=("web",)):
        self.nodes, self.pods = nodes, pods

    def list(self, resource, namespace=None, label_selector=""):
        if resource == "nodes":
            return {"items": [{"metadata": {"name": n}, "status": {"allocatable": {"cpu": "2", "memory": "1Gi"}}}
                              for n in self.nodes]}
        return {"items": [{"metadata": {"name": p, "namespace": "default", "uid": "u"},
                           "spec": {"nodeName": self.nodes[0]}} for p in self.pods]}


@contextlib.contextmanager
def kubelet_of(state: StateDir, node: str, summary):
    """node's kubelet streaming server, serving `summary` as its stats, on its own loop in a thread."""
    started, stop = threading.Event(), None

    async def main():
        nonlocal stop
        stop = asyncio.Event()
        server = StreamingServer(Runtime(str(state.node_dir(node))), state.kubelet_endpoint(node),
                                 str(_wire_auth.secrets_dir(state.root)), stats=summary)
        await server.start()
        started.set()
        await stop.wait()
        await server.close()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(main(),))
    thread.start()
    assert started.wait(DEADLINE)
    try:
        yield
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(DEADLINE)
        loop.close()


@pytest.fixture
def state(tmp_path_factory, monkeypatch) -> StateDir:
    """A state directory with node-1 and the admin's wire secret; an apiserver that lists pod web
    on node-1 (kubemu top asks the apiserver what to show, and the kubelets for the figures)."""
    state = StateDir(tmp_path_factory.mktemp("top"))
    (state.node_dir("node-1") / "pods").mkdir(parents=True)
    _wire_auth.ensure_secret(_wire_auth.secrets_dir(state.root), _wire_auth.ADMIN)
    monkeypatch.setattr("kubemu.kubectl.session.connect", lambda obj: contextlib.nullcontext(FakeApi()))
    return state


def kubemu_top(state: StateDir, *args: str):
    return CliRunner().invoke(cli.main, ["--state-dir", str(state.root), "top", *args])


def test_a_kubelet_without_pod_cgroups_makes_one_line(state):
    stats = Stats("node-1", Runtime(str(state.node_dir("node-1"))), PodCgroups(None))
    with kubelet_of(state, "node-1", stats.summary):
        for args in (["pods"], ["nodes"]):
            result = kubemu_top(state, *args)
            assert (result.exit_code, result.output) == (
                1, "error: Metrics not available: no stats on node node-1: "
                   "no node cgroup (--cgroup-root not given): memory limits are watched by RSS\n")


def test_a_kubelet_not_running_makes_one_line(state):
    result = kubemu_top(state, "nodes")
    assert (result.exit_code, result.output) == (
        1, "error: Metrics not available: the kubelet of node node-1 is not running (or is a hollow node's)\n")


def test_no_figures_yet_is_kubectls_line(state):
    # a kubelet with pod cgroups that has not read them twice yet
    with kubelet_of(state, "node-1", lambda: {"pods": []}):
        result = kubemu_top(state, "pods")
    assert (result.exit_code, result.output) == (1, "error: metrics not available yet\n")


def test_no_pods_is_no_resources(state, monkeypatch):
    monkeypatch.setattr("kubemu.kubectl.session.connect", lambda obj: contextlib.nullcontext(FakeApi(pods=())))
    result = kubemu_top(state, "pods", "-n", "other")
    assert (result.exit_code, result.output) == (0, "No resources found in other namespace.\n")
