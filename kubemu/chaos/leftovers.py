"""Which of a node's processes nothing accounts for once a chaos run has settled (pure).

A node is supposed to run exactly this: its init; each unit init supervises (the kubelet),
with what that unit forks; and for every pod the kubelet reports, the pod's sandbox holder
and each running container with its shim (the container's parent) and the container's own
children (an exec, a probe). Any other process of the node (its cgroup, or init's
descendants) is one kubemu started and lost track of: a shim or holder of a pod the kubelet
no longer reports, a container whose shim died, a launcher orphaned by a kubelet restart.

This is checked against the node as it is now, not against a count taken before the run:
pods come and go legitimately during a run (a Deployment still rolling out when the run
began, a DaemonSet pod restarted, a pod moved off a killed node), and a count takes one
process gone for one process leaked.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

STATUS_LISTS = ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses")
PROCESS_ID = "process://"  # a container's ID as the kubelet reports it: its PID


@dataclass(frozen=True)
class Pod:
    """A pod the kubelet reports (its status.json), with its sandbox holder's PID if any."""
    pod: dict
    holder: int | None = None

    @property
    def name(self) -> str:
        meta = self.pod.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"

    def containers(self) -> dict[int, str]:
        """PID -> container of every container the kubelet reports running."""
        found = {}
        status = self.pod.get("status") or {}
        for key in STATUS_LISTS:
            for c in status.get(key) or []:
                cid = c.get("containerID") or ""
                if "running" in (c.get("state") or {}) and cid.startswith(PROCESS_ID):
                    try:
                        found[int(cid.removeprefix(PROCESS_ID))] = c.get("name", "")
                    except ValueError:
                        continue
        return found


def owners(parents: Mapping[int, int], init: int | None, units: Mapping[str, int | None], pods: Iterable[Pod],
           ignore: Callable[[dict], bool] = lambda pod: False) -> dict[int, str]:
    """PID -> what it is, of each process that accounts for itself and its descendants: the
    units' main PIDs, each pod's holder, and each running container under a live shim, with
    that shim. A pod `ignore(pod)` picks accounts for nothing (the run's own pods, deleted at
    its end)."""
    found = {pid: f"unit {name}" for name, pid in units.items() if pid}
    for pod in pods:
        if ignore(pod.pod):
            continue
        if pod.holder:
            found[pod.holder] = f"pod {pod.name} sandbox"
        for pid, container in pod.containers().items():
            shim = parents.get(pid)
            if shim is None or shim == init or shim not in parents:
                continue  # not running, or its shim died (init's child now): nothing will stop it
            found[pid] = f"pod {pod.name} container {container}"
            found.setdefault(shim, f"pod {pod.name} container {container}'s shim")
    return found


def unaccounted(parents: Mapping[int, int], init: int | None, owned: Mapping[int, str]) -> list[int]:
    """The node's processes (PID -> parent PID) that are neither its init nor an owner or an
    owner's descendant, ascending."""
    lost = []
    for pid in parents:
        seen: set[int] = set()
        at: int | None = pid
        while at is not None and at not in owned and at != init and at not in seen:
            seen.add(at)
            at = parents.get(at)
        if at is None or at in seen or (at == init and pid != init):
            lost.append(pid)
    return sorted(lost)
