"""kubelet/podcgroups.py: Kubernetes' QoS classes and cgroup values (pure), and pod cgroups on
this machine's real hierarchies: limits in every controller hierarchy, the kernel's OOM kill
counted, removal leaving nothing."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kubelet import podcgroups
from kubelet.podcgroups import BESTEFFORT, BURSTABLE, GUARANTEED, Limits
from kubemu import cgroups, ownership
from tests.conftest import alive, remove_cluster_cgroups, wait_for

MI = 1 << 20


def pod(*containers: dict, init: list[dict] = (), uid: str = "u-1") -> dict:
    return {"metadata": {"uid": uid, "name": "p", "namespace": "default"},
            "spec": {"containers": list(containers), "initContainers": list(init)}}


def ctr(name: str = "c", requests: dict | None = None, limits: dict | None = None) -> dict:
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v is not None}
    return {"name": name, "resources": resources}


@pytest.mark.parametrize("the_pod, expected", [
    (pod(ctr()), BESTEFFORT),
    (pod(ctr(requests={"cpu": "0", "memory": "0"})), BESTEFFORT),  # zero is no request
    (pod(ctr(requests={"ephemeral-storage": "1Gi"})), BESTEFFORT),  # only cpu and memory count
    (pod(ctr(limits={"cpu": "1", "memory": "1Gi"})), GUARANTEED),  # requests default to limits
    (pod(ctr(requests={"cpu": "1000m", "memory": "1024Mi"}, limits={"cpu": "1", "memory": "1Gi"})), GUARANTEED),
    (pod(ctr(requests={"cpu": "500m"}, limits={"cpu": "1", "memory": "1Gi"})), BURSTABLE),
    (pod(ctr(limits={"cpu": "1"})), BURSTABLE),  # no memory limit
    (pod(ctr(limits={"cpu": "1", "memory": "1Gi"}), ctr("b")), BURSTABLE),  # one container without
    (pod(ctr(requests={"memory": "10Mi"})), BURSTABLE),
    (pod(ctr(limits={"cpu": "1", "memory": "1Gi"}), init=[ctr("i")]), BURSTABLE),  # init containers count
])
def test_qos_class(the_pod, expected):
    assert podcgroups.qos_class(the_pod) == expected


def test_container_and_pod_limits():
    a = ctr("a", requests={"cpu": "100m"}, limits={"cpu": "250m", "memory": "64Mi"})
    b = ctr("b", limits={"cpu": "1", "memory": "32Mi"})
    assert podcgroups.container_limits(a) == Limits(100, 250, 64 * MI)
    assert podcgroups.container_limits(b) == Limits(1000, 1000, 32 * MI)
    assert podcgroups.container_limits(ctr()) == Limits(0, None, None)
    assert podcgroups.pod_limits(pod(a, b), pids_limit=50) == Limits(1100, 1250, 96 * MI, 50)
    # a container without a limit: the pod has none, but its requests still add up
    assert podcgroups.pod_limits(pod(a, ctr("c", requests={"cpu": "2"}))) == Limits(2100, None, None)
    # an init container larger than the sum of the app containers decides (it runs alone)
    big_init = ctr("i", limits={"cpu": "3", "memory": "1Gi"})
    assert podcgroups.pod_limits(pod(a, b, init=[big_init])) == Limits(3000, 3000, 1024 * MI)
    assert podcgroups.pod_limits(pod()) == Limits(0, None, None)


@pytest.mark.parametrize("milli, shares, quota, weight", [
    (0, 2, 1000, 1),  # MinShares; MinQuotaPeriod
    (1, 2, 1000, 1),
    (5, 5, 1000, 1),
    (100, 102, 10000, 4),
    (250, 256, 25000, 10),
    (1000, 1024, 100000, 39),
    (2500, 2560, 250000, 98),
    (300000, 262144, 30000000, 10000),  # MaxShares
])
def test_kubernetes_cpu_numbers(milli, shares, quota, weight):
    """pkg/kubelet/cm/helpers_linux.go's MilliCPUToShares/MilliCPUToQuota and runc's
    shares -> cpu.weight."""
    assert podcgroups.cpu_shares(milli) == shares
    assert podcgroups.cpu_quota(milli) == quota
    assert podcgroups.cpu_weight(shares) == weight


def test_files_for():
    limited = Limits(250, 500, 64 * MI, 100)
    assert podcgroups.files_for(limited, 1) == {
        "cpu.shares": "256", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "50000",
        "memory.limit_in_bytes": str(64 * MI), "pids.max": "100"}
    assert podcgroups.files_for(limited, 2) == {
        "cpu.weight": "10", "cpu.max": "50000 100000", "memory.max": str(64 * MI), "pids.max": "100"}
    assert list(podcgroups.files_for(limited, 1))[1:3] == ["cpu.cfs_period_us", "cpu.cfs_quota_us"]
    unlimited = Limits()
    assert podcgroups.files_for(unlimited, 1) == {
        "cpu.shares": "2", "cpu.cfs_period_us": "100000", "cpu.cfs_quota_us": "-1",
        "memory.limit_in_bytes": "-1", "pids.max": "max"}
    assert podcgroups.files_for(unlimited, 2) == {
        "cpu.weight": "1", "cpu.max": "max 100000", "memory.max": "max", "pids.max": "max"}


def test_layout():
    assert f"{podcgroups.KUBEPODS}/{podcgroups.pod_relative(GUARANTEED, 'u')}" == "kubepods/podu"
    assert f"{podcgroups.KUBEPODS}/{podcgroups.pod_relative(BURSTABLE, 'u')}" == "kubepods/burstable/podu"
    assert f"{podcgroups.KUBEPODS}/{podcgroups.pod_relative(BESTEFFORT, 'u')}" == "kubepods/besteffort/podu"


def test_without_a_cgroup_root_it_says_why():
    pc = podcgroups.PodCgroups(None)
    assert not pc.available and not pc.holds_pods and "--cgroup-root" in pc.why_not and "\n" not in pc.why_not
    assert pc.usage("u") is None
    pc.remove_pod("u")  # nothing to do


def test_without_a_memory_controller_it_says_why(monkeypatch, tmp_path):
    monkeypatch.setattr(podcgroups, "everywhere", lambda rel: [
        (cgroups.Cgroup(tmp_path / rel, 1), frozenset({"pids"}))])
    pc = podcgroups.PodCgroups("kubemu/h/node-1")
    assert not pc.available and pc.why_not.startswith("no memory controller")
    assert pc.holds_pods  # pods still go in their cgroups, in the pids hierarchy
    monkeypatch.setattr(podcgroups, "everywhere", lambda rel: [
        (cgroups.Cgroup(Path("/proc/1/nosuch") / rel, 1), frozenset({"memory"}))])
    pc = podcgroups.PodCgroups("kubemu/h/node-1")
    assert not pc.available and pc.why_not.startswith("cannot make pod cgroups (/proc/1/nosuch/")
    assert not pc.holds_pods


def test_bad_input_is_one_clear_error(monkeypatch, tmp_path):
    """A quantity the apiserver should have refused, or a cgroup the kernel refuses, is one
    CgroupError line for the kubelet's event, never a traceback."""
    monkeypatch.setattr(podcgroups, "everywhere", lambda rel: [
        (cgroups.Cgroup(tmp_path / "memory" / rel, 1), frozenset({"memory"}))])
    pc = podcgroups.PodCgroups("kubemu/h/node-1")
    assert pc.available  # a plain directory stands for the hierarchy here
    with pytest.raises(podcgroups.CgroupError, match="^pod cgroup of u-1: .*quantities must match"):
        pc.ensure_pod(pod(ctr(limits={"memory": "lots"})))
    with pytest.raises(podcgroups.CgroupError, match="^cgroup c of pod u-1: .*quantities must match"):
        pc.container(pod(ctr(limits={"cpu": "1x1"})), "c")
    good = pod(ctr(limits={"memory": "64Mi"}))
    leaf = pc.container(good, "c")
    assert leaf.procs == [str(tmp_path / "memory/kubemu/h/node-1/kubepods/burstable/podu-1/c/cgroup.procs")]
    assert leaf.oom_counter == {"path": leaf.procs[0].replace("cgroup.procs", "memory.oom_control")}
    (tmp_path / "memory/kubemu/h/node-1/kubepods/burstable/podu-1/c/memory.limit_in_bytes").unlink()
    (tmp_path / "memory/kubemu/h/node-1/kubepods/burstable/podu-1/c/memory.limit_in_bytes").mkdir()
    with pytest.raises(podcgroups.CgroupError, match="^cgroup c of pod u-1: .*/c/memory.limit_in_bytes: Is a directory$"):
        pc.container(good, "c")


# --- real cgroups --------------------------------------------------------------------------------

def _memory_hierarchy_writable() -> str | None:
    """None if pod cgroups with a memory controller can be made here, else why not."""
    if os.geteuid() != 0:
        return "not root: no pod cgroups"
    if not any("memory" in c for _, c in cgroups.everywhere("x")):
        return "no memory controller mounted"
    return None


needs_cgroups = pytest.mark.skipif(_memory_hierarchy_writable() is not None,
                                   reason=str(_memory_hierarchy_writable()))


@pytest.fixture
def node_root(tmp_path):
    """A node cgroup name of a throw-away cluster (unique per test), released at the end."""
    root = ownership.cgroup_name(tmp_path, "node-1")
    yield root
    ownership.Owned(0, 0, None, root).release()
    assert not remove_cluster_cgroups(tmp_path)


def _left(relative: str) -> list[Path]:
    return [cg.path for cg, _ in cgroups.everywhere(relative) if cg.path.exists()]


def _in_cgroups(procs: list[str], argv: list[str]) -> subprocess.Popen:
    fds = [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in procs]
    try:
        return subprocess.Popen(argv, preexec_fn=lambda: [cgroups.join(fd) for fd in fds])
    finally:
        for fd in fds:
            os.close(fd)


@needs_cgroups
def test_a_pod_cgroup_has_kubernetes_values_in_every_hierarchy(node_root):
    pc = podcgroups.PodCgroups(node_root, pod_pids_limit=64)
    assert pc.available, pc.why_not
    uid = str(uuid.uuid4())
    the_pod = pod(ctr("a", limits={"cpu": "250m", "memory": "64Mi"}),
                  ctr("b", requests={"cpu": "100m"}, limits={"cpu": "500m", "memory": "32Mi"}), uid=uid)
    pc.ensure_pod(the_pod)
    b = pc.container(the_pod, "b")
    controllers_seen = set()
    for cg, controllers in cgroups.everywhere(f"{node_root}/kubepods/burstable/pod{uid}"):
        assert cg.exists(), cg.path
        controllers_seen |= controllers
        want = podcgroups.files_for(Limits(350, 750, 96 * MI, 64), cg.version)
        leaf = podcgroups.files_for(Limits(100, 500, 32 * MI), cg.version)
        for name in want:
            if podcgroups.controller_of(name) in controllers:
                assert cg.read(name).strip() == want[name], name
                assert cg.child("b").read(name).strip() == leaf[name], name
        assert str(cg.child("b").path / "cgroup.procs") in b.procs
    assert {"memory", "cpu", "pids"} <= controllers_seen
    assert b.oom_counter["path"].endswith(("/b/memory.oom_control", "/b/memory.events"))
    besteffort = [cg for cg, c in cgroups.everywhere(f"{node_root}/kubepods/besteffort") if "cpu" in c]
    assert all(cg.read("cpu.shares" if cg.version == 1 else "cpu.weight").strip() in ("2", "1") for cg in besteffort)
    assert len(pc.sandbox_procs(the_pod)) == len(b.procs)
    pc.remove_pod(uid)
    assert not _left(f"{node_root}/kubepods/burstable/pod{uid}")


@needs_cgroups
def test_the_kernel_oom_kills_past_the_container_limit_and_counts_it(node_root):
    pc = podcgroups.PodCgroups(node_root)
    uid = str(uuid.uuid4())
    the_pod = pod(ctr("hog", limits={"memory": "32Mi"}), uid=uid)
    hog = pc.container(the_pod, "hog")
    counter = Path(hog.oom_counter["path"])
    assert cgroups.oom_kills(counter.read_text()) == 0
    # allocates (and touches) 1 MiB at a time up to 256 MiB: only the kernel can stop it
    proc = _in_cgroups(hog.procs, [sys.executable, "-c",
                                   "b = []\nfor _ in range(256): b.append(bytearray(1 << 20))\nprint('survived')"])
    assert proc.wait(timeout=60) == -9
    assert cgroups.oom_kills(counter.read_text()) == 1
    pc.remove_pod(uid)
    assert not _left(f"{node_root}/kubepods/burstable/pod{uid}")


@needs_cgroups
def test_remove_pod_kills_what_is_left_and_leaves_nothing(node_root):
    pc = podcgroups.PodCgroups(node_root)
    uid = str(uuid.uuid4())
    the_pod = pod(ctr("a"), uid=uid)
    sandbox = _in_cgroups(pc.sandbox_procs(the_pod), ["sleep", "1000"])
    # a container that leaves an orphan behind: it double-forked out of its parent's reach
    a = _in_cgroups(pc.container(the_pod, "a").procs, ["/bin/sh", "-c", "setsid sleep 1000 & echo $!"])
    a.wait()
    usage = pc.usage(uid)
    assert usage is not None and usage.cpu_seconds is not None and usage.memory_bytes is not None
    pc.remove_pod(uid)
    assert sandbox.wait(timeout=60) == -9
    assert not _left(f"{node_root}/kubepods/besteffort/pod{uid}")
    assert pc.usage(uid) is None


@needs_cgroups
def test_usage_counts_cpu_and_memory(node_root):
    pc = podcgroups.PodCgroups(node_root)
    uid = str(uuid.uuid4())
    the_pod = pod(ctr("a"), uid=uid)
    busy = _in_cgroups(pc.container(the_pod, "a").procs, [sys.executable, "-c",
                       "b = bytearray(48 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nwhile True: pass"])
    try:
        wait_for(lambda: (u := pc.usage(uid)) and u.cpu_seconds > 0.2 and u.memory_bytes > 40 * MI,
                 message="the pod's usage to show a busy 48 MiB process")
    finally:
        pc.remove_pod(uid)
    assert not alive(busy.pid) and busy.wait() == -9


@needs_cgroups
def test_node_allocatable_is_enforced_on_kubepods(node_root):
    pc = podcgroups.PodCgroups(node_root)
    assert pc.enforce_allocatable(2 * 1024 * MI + 1, 1500) == 2 * 1024 * MI  # whole pages
    for cg, controllers in cgroups.everywhere(f"{node_root}/kubepods"):
        if "memory" in controllers:
            assert cg.read("memory.limit_in_bytes" if cg.version == 1 else "memory.max").strip() == str(2 * 1024 * MI)
        if "cpu" in controllers:
            assert cg.read("cpu.shares" if cg.version == 1 else "cpu.weight").strip() in ("1536", "59")


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists(),
                    reason="needs root to drop to an unprivileged user (setpriv)")
def test_an_unprivileged_kubelet_gets_no_pod_cgroups_and_one_line_why(tmp_path):
    root = ownership.cgroup_name(tmp_path, "node-1")
    repo = Path(__file__).resolve().parents[2]
    probe = (f"import sys; sys.path.insert(0, {str(repo)!r})\n"
             "from kubelet.podcgroups import PodCgroups\n"
             f"p = PodCgroups({root!r})\nprint(p.available); print(p.why_not)")
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
                          "--bounding-set=-all", sys.executable, "-c", probe],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    available, why_not = out.stdout.splitlines()
    assert available == "False"
    assert why_not.startswith("cannot make pod cgroups (") and "Permission denied" in why_not
    assert why_not.endswith("memory limits are watched by RSS")
    assert not remove_cluster_cgroups(tmp_path)  # it made nothing
