"""kubemu/top.py: kubectl top's tables (pure), and `kubemu top pods` reading a real pod cgroup."""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid

import pytest
from click.testing import CliRunner

from kubelet.podcgroups import PodCgroups, Usage
from kubemu import cgroups, cli, ownership, top
from kubemu.top import Metrics, PodRef
from tests.conftest import remove_cluster_cgroups, wait_for

MI = 1 << 20


def test_parse_pod_dir():
    assert top.parse_pod_dir("kube-system_etcd-node-0_1b2c-3d", "node-0") == \
        PodRef("kube-system", "etcd-node-0", "1b2c-3d", "node-0")
    for junk in ("web", "a_b", "_b_c", "a__c", "a_b_"):
        assert top.parse_pod_dir(junk, "node-0") is None


def test_rate():
    assert top.rate(Usage(1.0, 5), Usage(1.5, 7 * MI), 2.0) == Metrics(250, 7 * MI)
    assert top.rate(Usage(1.0, 5), Usage(1.0, 0), 1.0) == Metrics(0, 0)
    assert top.rate(Usage(2.0, 5), Usage(1.0, 5), 1.0) == Metrics(0, 5)  # a recreated cgroup
    for before, after in ((None, Usage(1, 1)), (Usage(1, 1), None), (Usage(None, 1), Usage(None, 1)),
                          (Usage(1, 1), Usage(2, None))):
        assert top.rate(before, after, 1.0) is None
    assert top.rate(Usage(1, 1), Usage(2, 1), 0.0) is None


def test_sample_reads_twice_a_window_apart():
    now = [100.0]
    readings = iter([{"a": Usage(10.0, MI), "b": None}, {"a": Usage(10.003, 2 * MI), "b": Usage(1, 1)}])
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds
    got = top.sample(lambda: next(readings), 1.0, clock=lambda: now[0], sleep=sleep)
    assert slept == [1.0] and got == {"a": Metrics(3, 2 * MI), "b": None}


def test_pod_table_is_kubectl_top_pods():
    metrics = {PodRef("default", "web-2", "u2", "node-1"): Metrics(3, 12 * MI + 5),
               PodRef("default", "api", "u1", "node-2"): Metrics(1250, 300 * MI),
               PodRef("kube-system", "etcd", "u3", "node-0"): Metrics(20, 40 * MI),
               PodRef("default", "gone", "u4", "node-1"): None}
    assert top.pod_table({k: v for k, v in metrics.items() if k.namespace == "default"}, False) == (
        "NAME    CPU(cores)   MEMORY(bytes)\n"
        "api     1250m        300Mi\n"
        "web-2   3m           12Mi\n")
    assert top.pod_table(metrics, True) == (
        "NAMESPACE     NAME    CPU(cores)   MEMORY(bytes)\n"
        "default       api     1250m        300Mi\n"
        "default       web-2   3m           12Mi\n"
        "kube-system   etcd    20m          40Mi\n")


def test_node_table_is_kubectl_top_nodes():
    metrics = {"node-0": Metrics(500, 1024 * MI), "node-1": Metrics(7, 3 * MI), "node-2": None}
    allocatable = {"node-0": {"cpu": "2", "memory": "4Gi"}, "node-1": {"cpu": "bogus", "memory": "0"}}
    assert top.node_table(metrics, allocatable) == (
        "NAME     CPU(cores)   CPU%        MEMORY(bytes)   MEMORY%\n"
        "node-0   500m         25%         1024Mi          25%\n"
        "node-1   7m           <unknown>   3Mi             <unknown>\n"
        "node-2   <unknown>    <unknown>   <unknown>       <unknown>\n")


needs_cgroups = pytest.mark.skipif(
    os.geteuid() != 0 or not any("memory" in c for _, c in cgroups.everywhere("x")),
    reason="needs root and a memory controller: no pod cgroups otherwise")


@pytest.fixture
def busy_pod(tmp_path):
    """A pod dir on node-1 and a busy loop holding 64 MiB in its cgroup; its uid."""
    uid = str(uuid.uuid4())
    (tmp_path / "nodes" / "node-1" / "pods" / f"default_busy_{uid}").mkdir(parents=True)
    pods = PodCgroups(ownership.cgroup_name(tmp_path, "node-1"))
    the_pod = {"metadata": {"uid": uid}, "spec": {"containers": [{"name": "c"}]}}
    fds = [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in pods.container(the_pod, "c").procs]
    try:
        busy = subprocess.Popen([sys.executable, "-c", "b = bytearray(64 << 20)\n"
                                 "for i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"],
                                preexec_fn=lambda: [cgroups.join(fd) for fd in fds])
    finally:
        for fd in fds:
            os.close(fd)
    try:
        yield uid
    finally:
        pods.remove_pod(uid)
        busy.wait()
        ownership.Owned(0, 0, None, ownership.cgroup_name(tmp_path, "node-1")).release()
        remove_cluster_cgroups(tmp_path)


@needs_cgroups
def test_top_pods_reads_a_busy_pod_from_its_cgroup(tmp_path, busy_pod):
    (tmp_path / "nodes" / "node-1" / "pods" / f"other_idle_{uuid.uuid4()}").mkdir(parents=True)

    def top_pods():
        result = CliRunner().invoke(cli.main, ["--state-dir", str(tmp_path), "top", "pods"])
        assert result.exit_code == 0, result.output
        return result.output.splitlines()
    lines = wait_for(lambda: (out := top_pods())[1:] and int(out[1].split()[2].removesuffix("Mi")) >= 64 and out,
                     message="the busy pod's 64 MiB in `top pods`")
    name, cpu, memory = lines[1].split()
    assert lines[0].split() == ["NAME", "CPU(cores)", "MEMORY(bytes)"] and len(lines) == 2
    assert name == "busy" and int(cpu.removesuffix("m")) > 0 and memory.endswith("Mi")


@needs_cgroups
def test_top_nodes_reads_each_nodes_pods_against_its_allocatable(tmp_path, busy_pod, monkeypatch):
    (tmp_path / "nodes" / "node-0").mkdir()  # no pod cgroups there

    class FakeApi:
        def list(self, resource):
            assert resource == "nodes"
            return {"items": [{"metadata": {"name": n}, "status": {"allocatable": {"cpu": "2", "memory": "1Gi"}}}
                              for n in ("node-0", "node-1")]}
    monkeypatch.setattr("kubemu.kubectl.session.connect", lambda obj: contextlib.nullcontext(FakeApi()))

    def node_1():
        result = CliRunner().invoke(cli.main, ["--state-dir", str(tmp_path), "top", "nodes"])
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert lines[0].split() == ["NAME", "CPU(cores)", "CPU%", "MEMORY(bytes)", "MEMORY%"]
        assert lines[1].split() == ["node-0"] + ["<unknown>"] * 4
        return lines[2].split()
    name, cpu, cpu_pct, memory, memory_pct = wait_for(
        lambda: (row := node_1()) and int(row[3].removesuffix("Mi")) >= 64 and row, message="node-1's 64 MiB")
    assert name == "node-1" and int(cpu.removesuffix("m")) > 0
    assert int(cpu_pct.removesuffix("%")) == int(cpu.removesuffix("m")) * 100 // 2000
    assert int(memory_pct.removesuffix("%")) == int(memory.removesuffix("Mi")) * 100 // 1024


def test_top_pods_without_cgroups_says_so_in_one_line(tmp_path):
    (tmp_path / "nodes" / "node-1" / "pods" / f"default_web_{uuid.uuid4()}").mkdir(parents=True)
    result = CliRunner().invoke(cli.main, ["--state-dir", str(tmp_path), "top", "pods"])
    assert result.exit_code == 1 and result.output == f"error: {top.NO_METRICS}\n"
    result = CliRunner().invoke(cli.main, ["--state-dir", str(tmp_path), "top", "pods", "-n", "other"])
    assert result.exit_code == 0 and result.output == "No resources found in other namespace.\n"
