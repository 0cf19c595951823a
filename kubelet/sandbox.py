"""One pod's sandbox as a pure state machine: what the pause container is to the real kubelet.

A sandbox is the holder process owning the pod's network, mount, UTS and IPC namespaces, with
the pod's network set up in it by CNI (kubelet/sandboxes.py carries the actions out). Nothing
here forks, calls a plugin or reads a clock: the pod worker (kubelet/podworker.py) owns one
Sandbox per pod that needs one (not hostNetwork, node in CNI mode), tells it what the pod's
containers need (`step`), and feeds it what the shell reports (`created`, `create_failed`,
`died`, `removed`, `remove_failed`). The worker decides the containers' side and the Events.

States, the kubelet's computePodActions (pkg/kubelet/kuberuntime/kuberuntime_manager.go) seen
from one sandbox:

    NONE --wanted, network ready, retry time reached--> CREATING --created--> READY
    CREATING --create_failed--> NONE (retried after `retry_delay`: the pod worker's backOffPeriod)
    READY --died (holder gone)--> DEAD
    READY|DEAD --no container alive and (DEAD or no longer wanted)--> REMOVING --removed--> NONE
    REMOVING --remove_failed--> DEAD (retried after `retry_delay`)

Attempts number the sandboxes of a pod (Kubernetes' PodSandboxMetadata.Attempt): the first is
0; a sandbox that existed and was removed makes the next one `attempt + 1`; a failed creation
is retried with the same number (nothing of it is left: the shell undid it). The CNI container
ID of an attempt is `<pod uid>-<attempt>`.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


def sandbox_id(uid: str, attempt: int) -> str:
    """The sandbox's ID, used as CNI_CONTAINERID (host-local keys its leases by it)."""
    return f"{uid}-{attempt}"


def needs_sandbox(pod: dict, pod_networks: bool) -> bool:
    """Whether the pod gets namespaces of its own: only when the node gives pods networks
    (CNI mode), and never for hostNetwork pods, which share the node's."""
    return pod_networks and (pod.get("spec") or {}).get("hostNetwork") is not True


# --- actions the shell carries out ------------------------------------------------------------

@dataclass(frozen=True)
class CreateSandbox:
    """Make the pod cgroup, start the holder, run CNI ADD, write sandbox.json; answer with
    `created(attempt, ips)` or `create_failed(attempt, ...)` (having undone what it did)."""
    attempt: int
    id: str  # CNI_CONTAINERID
    hostname: str


@dataclass(frozen=True)
class RemoveSandbox:
    """CNI DEL with the saved ADD result (CNI_NETNS empty when the holder is gone), kill the
    holder, drop sandbox.json; answer with `removed(attempt)` or `remove_failed(attempt, ...)`."""
    attempt: int
    id: str


SandboxAction = CreateSandbox | RemoveSandbox


class SState(enum.Enum):
    NONE = "none"
    CREATING = "creating"
    READY = "ready"
    DEAD = "dead"  # its holder is gone: torn down once no container of it is left
    REMOVING = "removing"


class Sandbox:
    def __init__(self, uid: str, hostname: str, retry_delay: float):
        self.uid = uid
        self.hostname = hostname
        self.retry_delay = retry_delay
        self.state = SState.NONE
        self.attempt = 0  # the current sandbox's, or the next one's when there is none
        self.ips: tuple[str, ...] = ()  # while READY
        self.retry_at: float | None = None  # a failed create or remove is not retried before

    @property
    def id(self) -> str:
        return sandbox_id(self.uid, self.attempt)

    @property
    def ready(self) -> bool:
        return self.state is SState.READY

    @property
    def gone(self) -> bool:
        """Nothing of a sandbox exists or is being made or removed."""
        return self.state is SState.NONE

    # -- the level-based step ------------------------------------------------------------

    def step(self, now: float, *, wanted: bool, containers_live: bool, network_ready: bool) -> list[SandboxAction]:
        """What to do now. `wanted`: a container of the pod is to run (now or after a
        backoff); `containers_live`: a container process of the pod exists or is starting."""
        if self.retry_at is not None and now < self.retry_at:
            return []
        if self.state in (SState.READY, SState.DEAD) and not containers_live \
                and (self.state is SState.DEAD or not wanted):
            self.state, self.retry_at = SState.REMOVING, None
            return [RemoveSandbox(self.attempt, self.id)]
        if self.state is SState.NONE and wanted and network_ready:
            self.state, self.retry_at = SState.CREATING, None
            return [CreateSandbox(self.attempt, self.id, self.hostname)]
        return []

    def next_deadline(self, *, wanted: bool, network_ready: bool) -> float | None:
        """When `step` may next have something to do that no event brings."""
        if self.retry_at is None:
            return None
        if self.state is SState.DEAD or (self.state is SState.NONE and wanted and network_ready):
            return self.retry_at
        return None

    # -- what the shell reports (each returns whether it was about the current attempt) --------

    def created(self, attempt: int, ips: tuple[str, ...] | list[str]) -> bool:
        if self.state is not SState.CREATING or attempt != self.attempt:
            return False
        self.state, self.ips = SState.READY, tuple(ips)
        return True

    def create_failed(self, attempt: int, now: float) -> bool:
        if self.state is not SState.CREATING or attempt != self.attempt:
            return False
        self.state, self.retry_at = SState.NONE, now + self.retry_delay
        return True

    def died(self, attempt: int) -> bool:
        if self.state is not SState.READY or attempt != self.attempt:
            return False
        self.state, self.ips = SState.DEAD, ()
        return True

    def removed(self, attempt: int) -> bool:
        if self.state is not SState.REMOVING or attempt != self.attempt:
            return False
        self.state, self.ips, self.retry_at = SState.NONE, (), None
        self.attempt += 1
        return True

    def remove_failed(self, attempt: int, now: float) -> bool:
        if self.state is not SState.REMOVING or attempt != self.attempt:
            return False
        self.state, self.retry_at = SState.DEAD, now + self.retry_delay
        return True

    def adopt(self, attempt: int, ips: tuple[str, ...] | list[str]) -> None:
        """A sandbox a previous kubelet made (its sandbox.json): taken over as READY; the
        shell reports `died` at once if its holder is gone or it was never finished."""
        self.state, self.attempt, self.ips, self.retry_at = SState.READY, attempt, tuple(ips), None
