"""Pod cgroups as the kubelet's cgroupfs driver lays them out, with Kubernetes' limits.

Below the node's cgroup (`--cgroup-root`, `kubemu.ownership.cgroup_name`), in every hierarchy
kubemu makes cgroups in (`kubemu.cgroups.everywhere`: the v2 one, and each v1 hierarchy that
carries memory, cpu, cpuacct or pids on hybrid machines):

    kubepods/                       node allocatable (memory limit, cpu shares)
      pod<uid>/                     Guaranteed pods
      burstable/pod<uid>/           Burstable pods
      besteffort/pod<uid>/          BestEffort pods (cpu shares 2, as the kubelet gives them)
        sandbox.scope/              the sandbox holder
        <container name>/           a container's processes, with its limits

The sandbox's leaf is not called `sandbox`: that is a valid container name, and a container
named so would share the holder's cgroup (a name with a dot cannot be a container's).

Processes sit only in leaves: cgroup v2 gives a cgroup controllers only through its parent's
`cgroup.subtree_control`, which a cgroup holding processes may not set.

The pure part (QoS class, limits, the files' values) follows pkg/apis/core/v1/helper/qos,
pkg/kubelet/cm/helpers_linux.go and runc's cgroup v2 conversion; the shell is `PodCgroups`.
"""
from __future__ import annotations

import contextlib
import errno
import time
from dataclasses import dataclass
from pathlib import Path

from kubemu.api.quantity import cpu_millis, memory_bytes
from kubemu.cgroups import Cgroup, everywhere

GUARANTEED, BURSTABLE, BESTEFFORT = "Guaranteed", "Burstable", "BestEffort"
KUBEPODS = "kubepods"
QOS_DIRS = {GUARANTEED: "", BURSTABLE: "burstable", BESTEFFORT: "besteffort"}  # below kubepods
SANDBOX_LEAF = "sandbox.scope"

MIN_SHARES, MAX_SHARES, SHARES_PER_CPU = 2, 262144, 1024
QUOTA_PERIOD, MIN_QUOTA = 100000, 1000  # µs
QOS_RESOURCES = ("cpu", "memory")  # the only ones a QoS class looks at
REMOVE_TIMEOUT = 10.0


# --- pure: QoS class, limits, files ---------------------------------------------------------

def _all_containers(pod: dict) -> list[dict]:
    spec = pod.get("spec") or {}
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def _resources(container: dict) -> tuple[dict, dict]:
    """(requests, limits) of cpu and memory as exact numbers, zero ones left out; a request
    not given defaults to its limit, as the apiserver's defaulting does."""
    res = container.get("resources") or {}
    parse = {"cpu": cpu_millis, "memory": memory_bytes}
    limits = {k: parse[k](v) for k, v in (res.get("limits") or {}).items() if k in QOS_RESOURCES}
    requests = {k: parse[k](v) for k, v in (res.get("requests") or {}).items() if k in QOS_RESOURCES}
    requests = {**{k: v for k, v in limits.items() if k not in requests}, **requests}
    return ({k: v for k, v in requests.items() if v}, {k: v for k, v in limits.items() if v})


def qos_class(pod: dict) -> str:
    """Kubernetes' GetPodQOS: BestEffort when no container requests or limits cpu or memory;
    Guaranteed when every container limits both and the pod's requests equal its limits;
    else Burstable."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for container in _all_containers(pod):
        req, lim = _resources(container)
        for k, v in req.items():
            requests[k] = requests.get(k, 0) + v
        for k, v in lim.items():
            limits[k] = limits.get(k, 0) + v
        if set(lim) != set(QOS_RESOURCES):
            guaranteed = False
    if not requests and not limits:
        return BESTEFFORT
    if guaranteed and all(limits.get(k) == v for k, v in requests.items()):
        return GUARANTEED
    return BURSTABLE


@dataclass(frozen=True)
class Limits:
    cpu_request: int = 0  # millicores: the cpu shares
    cpu_limit: int | None = None  # millicores: the CFS quota; None = unlimited
    memory_limit: int | None = None  # bytes
    pids_limit: int | None = None


def container_limits(spec: dict) -> Limits:
    requests, limits = _resources(spec)
    return Limits(requests.get("cpu", 0), limits.get("cpu"), limits.get("memory"))


def pod_limits(pod: dict, pids_limit: int | None = None) -> Limits:
    """The pod cgroup's (ResourceConfigForPod): the larger of the app containers' sum and the
    largest init container for each, a limit only when every container declares it."""
    spec = pod.get("spec") or {}
    apps = [container_limits(c) for c in spec.get("containers") or []]
    inits = [container_limits(c) for c in spec.get("initContainers") or []]

    def total(values: list[int | None]) -> int | None:
        return None if any(v is None for v in values) else sum(values)

    def effective(field: str) -> int | None:
        app = total([getattr(c, field) for c in apps])
        init = [getattr(c, field) for c in inits]
        if app is None or any(v is None for v in init):
            return None
        return max([app, *init])
    limited = apps + inits
    return Limits(effective("cpu_request") or 0,
                  effective("cpu_limit") if limited else None,
                  effective("memory_limit") if limited else None,
                  pids_limit)


def cpu_shares(milli: int) -> int:
    """MilliCPUToShares."""
    return min(MAX_SHARES, max(MIN_SHARES, milli * SHARES_PER_CPU // 1000))


def cpu_quota(milli: int) -> int:
    """MilliCPUToQuota, with QUOTA_PERIOD."""
    return max(MIN_QUOTA, milli * QUOTA_PERIOD // 1000)


def cpu_weight(shares: int) -> int:
    """runc's ConvertCPUSharesToCgroupV2Value."""
    return 1 + ((shares - 2) * 9999) // 262142


def files_for(limits: Limits, version: int) -> dict[str, str]:
    """Control file -> value for a cgroup of `limits`, in write order (v1 period before quota).
    A file whose controller a hierarchy lacks is skipped by the writer (`controller_of`)."""
    shares = cpu_shares(limits.cpu_request)
    quota = None if limits.cpu_limit is None else cpu_quota(limits.cpu_limit)
    if version == 1:
        return {"cpu.shares": str(shares), "cpu.cfs_period_us": str(QUOTA_PERIOD),
                "cpu.cfs_quota_us": str(-1 if quota is None else quota),
                "memory.limit_in_bytes": str(-1 if limits.memory_limit is None else limits.memory_limit),
                "pids.max": "max" if limits.pids_limit is None else str(limits.pids_limit)}
    return {"cpu.weight": str(cpu_weight(shares)),
            "cpu.max": f"{'max' if quota is None else quota} {QUOTA_PERIOD}",
            "memory.max": "max" if limits.memory_limit is None else str(limits.memory_limit),
            "pids.max": "max" if limits.pids_limit is None else str(limits.pids_limit)}


def controller_of(filename: str) -> str:
    return filename.split(".", 1)[0]


def pod_relative(qos: str, uid: str) -> str:
    """The pod's cgroup relative to `kubepods`."""
    return f"{QOS_DIRS[qos]}/pod{uid}".lstrip("/")


# --- reading usage (no cgroup is made) -------------------------------------------------------

@dataclass(frozen=True)
class Usage:
    cpu_seconds: float | None  # since the cgroup was made
    memory_bytes: int | None  # working set


def usage_of(cgroups: list[tuple[Cgroup, frozenset[str]]]) -> Usage | None:
    """A cgroup's usage from its copies in the hierarchies (cpu from cpuacct or v2 cpu.stat,
    memory from the memory controller's); None if it exists in none of them."""
    cpu = memory = None
    found = False
    for cg, controllers in cgroups:
        if not cg.exists():
            continue
        found = True
        if cpu is None and ("cpuacct" in controllers or cg.version == 2):
            cpu = cg.cpu_seconds()
        if memory is None and "memory" in controllers:
            memory = cg.memory_working_set()
    return Usage(cpu, memory) if found else None


def node_usage(cgroup_root: str) -> Usage | None:
    """A node's pods' usage (its `kubepods`): what the node's allocatable bounds."""
    return usage_of(everywhere(f"{cgroup_root}/{KUBEPODS}"))


# --- the shell -------------------------------------------------------------------------------

class CgroupError(Exception):
    """A pod cgroup could not be made, limited or removed; one line."""


@contextlib.contextmanager
def _failing_as(what: str):
    """The kernel's refusal (or a quantity the apiserver should have refused) as one line."""
    try:
        yield
    except OSError as exc:
        raise CgroupError(f"{what}: {exc.filename}: {exc.strerror}" if exc.filename else f"{what}: {exc}") from None
    except ValueError as exc:
        raise CgroupError(f"{what}: {exc}") from None


@dataclass(frozen=True)
class ContainerCgroup:
    procs: list[str]  # cgroup.procs files the container's process writes "0" into before exec
    oom_counter: dict | None  # {"path": memory.oom_control | memory.events}, None: no memory controller


@dataclass(frozen=True)
class _Root:
    kubepods: Cgroup
    controllers: frozenset[str]  # usable below kubepods

    def at(self, relative: str) -> Cgroup:
        return Cgroup(self.kubepods.path / relative, self.kubepods.version)


class PodCgroups:
    """The node's pod cgroups. Made at construction: `kubepods` and its QoS children in each
    hierarchy kubemu may write to. `available` is True when memory limits are enforced by the
    kernel (a memory controller is among them); otherwise `why_not` says why in one line and
    the kubelet keeps its RSS watch."""

    def __init__(self, cgroup_root: str | None, pod_pids_limit: int | None = None):
        self.cgroup_root = cgroup_root
        self.pod_pids_limit = pod_pids_limit
        self.roots: list[_Root] = []
        self.why_not: str | None = None
        if cgroup_root is None:
            self.why_not = "no node cgroup (--cgroup-root not given): memory limits are watched by RSS"
            return
        errors = []
        for cg, controllers in everywhere(f"{cgroup_root}/{KUBEPODS}"):
            below = cg.path.parents[len(Path(cgroup_root).parts)]
            try:
                cg.path.mkdir(parents=True, exist_ok=True)
                if cg.version == 2:  # from where kubemu makes cgroups down to kubepods' children
                    controllers = cg.delegate(controllers, below)
                root = _Root(cg, frozenset(controllers))
                self._make(root, QOS_DIRS[BURSTABLE], None)
                self._make(root, QOS_DIRS[BESTEFFORT], Limits())  # cpu shares 2
            except OSError as exc:
                errors.append(f"{cg.path}: {exc.strerror or exc}")
                continue
            self.roots.append(root)
        if not any("memory" in r.controllers for r in self.roots):
            if errors:
                self.why_not = f"cannot make pod cgroups ({errors[0]}): memory limits are watched by RSS"
            else:
                self.why_not = ("no memory controller in a cgroup hierarchy kubemu may write to: "
                                "memory limits are watched by RSS")

    @property
    def holds_pods(self) -> bool:
        """Pods' processes go in pod cgroups: kubemu could make them in some hierarchy (limits
        and readings then need its controllers)."""
        return bool(self.roots)

    @property
    def available(self) -> bool:
        """The kernel enforces pods' memory limits, and their usage can be read: a memory
        controller is among the hierarchies (else `why_not`)."""
        return self.why_not is None

    def _make(self, root: _Root, relative: str, limits: Limits | None, leaf: bool = False) -> Cgroup:
        """mkdir `relative` below kubepods and write `limits`; on v2 a cgroup that is no leaf
        hands the controllers on to its children (a leaf must not: it holds processes)."""
        cg = root.at(relative)
        cg.path.mkdir(parents=True, exist_ok=True)
        if cg.version == 2 and not leaf:
            cg.delegate(root.controllers, root.kubepods.path)
        if limits is not None:
            for name, value in files_for(limits, cg.version).items():
                if controller_of(name) in root.controllers:
                    cg.write(name, value)
        return cg

    def _pod_relative(self, pod: dict) -> str:
        return pod_relative(qos_class(pod), pod["metadata"]["uid"])

    def ensure_pod(self, pod: dict) -> None:
        """Make the pod's cgroup with its limits in every hierarchy (idempotent)."""
        with _failing_as(f"pod cgroup of {pod['metadata']['uid']}"):
            limits = pod_limits(pod, self.pod_pids_limit)
            for root in self.roots:
                self._make(root, self._pod_relative(pod), limits)

    def _leaf(self, pod: dict, name: str, limits: Limits | None) -> list[tuple[Cgroup, frozenset[str]]]:
        self.ensure_pod(pod)
        with _failing_as(f"cgroup {name} of pod {pod['metadata']['uid']}"):
            return [(self._make(root, f"{self._pod_relative(pod)}/{name}", limits, leaf=True), root.controllers)
                    for root in self.roots]

    def sandbox_procs(self, pod: dict) -> list[str]:
        """The cgroup.procs files of the pod's sandbox leaf in every hierarchy."""
        return [str(cg.path / "cgroup.procs") for cg, _ in self._leaf(pod, SANDBOX_LEAF, None)]

    def container(self, pod: dict, name: str) -> ContainerCgroup:
        """The container's leaf in every hierarchy, with its limits (reused by its restarts: the
        OOM counter is read before and after each run)."""
        spec = next((c for c in _all_containers(pod) if c.get("name") == name), {})
        with _failing_as(f"cgroup {name} of pod {pod['metadata']['uid']}"):
            limits = container_limits(spec)
        leaves = self._leaf(pod, name, limits)
        counter = next(({"path": str(cg.path / ("memory.oom_control" if cg.version == 1 else "memory.events"))}
                        for cg, controllers in leaves if "memory" in controllers), None)
        return ContainerCgroup([str(cg.path / "cgroup.procs") for cg, _ in leaves], counter)

    def _pod_cgroups(self, uid: str) -> list[Cgroup]:
        return [cg for root in self.roots for qos in QOS_DIRS if (cg := root.at(pod_relative(qos, uid))).exists()]

    def remove_pod(self, uid: str, timeout: float = REMOVE_TIMEOUT) -> None:
        """SIGKILL whatever is left in the pod's cgroups, then rmdir them, leaves first."""
        cgs = self._pod_cgroups(uid)
        deadline = time.monotonic() + timeout
        while any(cg.populated() for cg in cgs):
            if time.monotonic() >= deadline:
                raise CgroupError(f"pod cgroup {uid}: processes still running after {timeout:g}s")
            for cg in cgs:
                cg.kill()
            time.sleep(0.02)
        for cg in cgs:
            with _failing_as(f"pod cgroup of {uid}"):
                while True:
                    try:
                        cg.remove()
                        break
                    except OSError as exc:  # EBUSY: a killed process not yet fully gone
                        if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                            raise
                    time.sleep(0.02)

    def usage(self, uid: str, container: str | None = None) -> Usage | None:
        """The pod's usage, or its container's (the container's leaf)."""
        for qos in QOS_DIRS:
            relative = pod_relative(qos, uid) + (f"/{container}" if container else "")
            found = usage_of([(r.at(relative), r.controllers) for r in self.roots])
            if found is not None:
                return found
        return None

    def enforce_allocatable(self, memory: int | None, cpu_millis: int | None = None) -> int | None:
        """Limit `kubepods` to the node's allocatable (memory bytes; cpu as shares, as the
        kubelet does) and return the memory limit the kernel enforces (it rounds to pages),
        the figure the Node's allocatable should show; None without a memory controller."""
        wanted = ({"memory.limit_in_bytes", "memory.max"} if memory is not None else set()) | \
            ({"cpu.shares", "cpu.weight"} if cpu_millis is not None else set())
        enforced = None
        for root in self.roots:
            files = files_for(Limits(cpu_millis or 0, None, memory), root.kubepods.version)
            for name, value in files.items():
                if name not in wanted or controller_of(name) not in root.controllers:
                    continue
                with _failing_as("node allocatable"):
                    root.kubepods.write(name, value)
            if "memory" in root.controllers:
                text = root.kubepods.read("memory.limit_in_bytes" if root.kubepods.version == 1 else "memory.max")
                enforced = int(text) if text and text.strip().isdigit() else None
        return enforced
