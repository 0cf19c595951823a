"""Leader election on a Lease, the pure part: client-go's tools/leaderelection decisions.

Several copies of a component (one per control-plane node) campaign for one Lease
(`coordination.k8s.io/v1`, e.g. kube-system/kube-controller-manager); the holder acts, the
others wait. `Elector` decides, from the Lease it was shown, what to write; the shell
(`kubemu.leaderelector`) reads and writes the Lease and keeps the time. Times here are two:
`now`, a monotonic clock (it runs on while a process is stopped, so a SIGSTOP'd leader finds its
deadline passed when it resumes) for every decision, and `wall`, seconds since the epoch, only
to stamp acquireTime/renewTime for people to read.

The rules (client-go's tryAcquireOrRenew):
  * no Lease: create it, holding it.
  * a Lease held by someone else is taken only when it has not changed for the
    leaseDurationSeconds its holder wrote (client-go's isLeaseValid; our own lease duration when
    the record has none) *as this elector observed it* (from the time it first saw the current
    record, on its own clock: the holder's clock, and the renewTime it wrote, are never trusted).
    The holder's duration, not ours: electors started with different flags still never overlap.
  * the holder renews by rewriting the record (renewTime, same acquireTime and transitions);
    a new holder increments leaseTransitions.
  * every write is conditional on the resourceVersion read (the shell's job), so two electors
    that decide at once cannot both win.

The renew deadline rule, which keeps two leaders from acting at once: a leader acts only while
``now < renewed_at + renew_deadline``, where `renewed_at` is when it *sent* its last successful
acquire or renewal. Any other elector saw that write no earlier than it was sent, and takes the
Lease no earlier than the leaseDurationSeconds that write declares after seeing it: the leader's
lease_duration rounded up (never down: 1.5 s truncated to 1 would undercut a 1.2 s deadline).
renew_deadline < lease_duration leaves the difference for clock rates and a write in flight. Once
past its deadline an elector has lost for good (`lost`): kube-scheduler and kube-controller-manager
exit ("leaderelection lost") and campaign again as new processes.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from kubemu.api.times import format_micro_time

# Kubernetes' defaults (component-base's LeaderElectionConfiguration)
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
# client-go's JitterFactor: the acquire loop waits retry_period * (1 + up to 1.2)
JITTER_FACTOR = 1.2


@dataclass(frozen=True)
class Timings:
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def problems(self) -> list[str]:
        """What is wrong with these timings, in client-go's NewLeaderElector words."""
        out = []
        if self.lease_duration <= self.renew_deadline:
            out.append("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            out.append("renewDeadline must be greater than retryPeriod*JitterFactor")
        if self.lease_duration < 1:
            out.append("leaseDuration must be at least 1s (a Lease counts whole seconds)")
        if self.renew_deadline <= 0:
            out.append("renewDeadline must be greater than zero")
        if self.retry_period <= 0:
            out.append("retryPeriod must be greater than zero")
        return out


@dataclass(frozen=True)
class Record:
    """client-go's LeaderElectionRecord: what a Lease's spec says about its holder."""
    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""   # MicroTime text, "" when unset
    renew_time: str = ""
    leader_transitions: int = 0


def record_from_lease(lease: dict) -> Record:
    """A Lease's spec as a Record (LeaseSpecToLeaderElectionRecord); missing fields are zero."""
    spec = lease.get("spec") if isinstance(lease, dict) else None
    spec = spec if isinstance(spec, dict) else {}

    def text(key: str) -> str:
        value = spec.get(key)
        return value if isinstance(value, str) else ""

    def integer(key: str) -> int:
        value = spec.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    return Record(holder_identity=text("holderIdentity"),
                  lease_duration_seconds=integer("leaseDurationSeconds"),
                  acquire_time=text("acquireTime"), renew_time=text("renewTime"),
                  leader_transitions=integer("leaseTransitions"))


def lease_spec(record: Record) -> dict:
    """A Record as a Lease's spec (LeaderElectionRecordToLeaseSpec)."""
    spec: dict = {"holderIdentity": record.holder_identity,
                  "leaseDurationSeconds": record.lease_duration_seconds,
                  "leaseTransitions": record.leader_transitions}
    if record.acquire_time:
        spec["acquireTime"] = record.acquire_time
    if record.renew_time:
        spec["renewTime"] = record.renew_time
    return spec


# -- what to do after reading the Lease ---------------------------------------------------------

@dataclass(frozen=True)
class Create:
    """There is no Lease: create it with this record."""
    record: Record


@dataclass(frozen=True)
class Update:
    """Write this record over the Lease that was read (conditional on its resourceVersion)."""
    record: Record


@dataclass(frozen=True)
class Wait:
    """Someone else holds the Lease and it has not expired (as observed here)."""
    holder: str


Decision = Create | Update | Wait


class Elector:
    """One campaigner's state: the record it last observed, when, and when it last renewed."""

    def __init__(self, identity: str, timings: Timings = Timings()):
        if not identity:
            raise ValueError("Lock identity is empty")
        problems = timings.problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.identity = identity
        self.timings = timings
        self.observed: Record | None = None
        self.observed_time = 0.0      # monotonic: when `observed` was first seen (or written)
        self.renewed_at: float | None = None  # monotonic: when the last successful write was sent
        self._ended = False           # leadership was lost: never again in this process

    # -- queries

    def leader(self) -> str:
        """The holder last observed ("" if none)."""
        return self.observed.holder_identity if self.observed is not None else ""

    def is_leader(self, now: float) -> bool:
        """May this process act now: it holds the Lease and its renew deadline has not passed.
        The write guard of the component's API client."""
        return (not self._ended and self.renewed_at is not None and self.leader() == self.identity
                and now < self.renewed_at + self.timings.renew_deadline)

    def lost(self, now: float) -> bool:
        """Leadership was held and its renew deadline passed (or someone else took it): the
        component must stop. Once True, always True."""
        if not self._ended and self.renewed_at is not None and not self.is_leader(now):
            self._ended = True
        return self._ended

    def renew_deadline(self) -> float | None:
        """The monotonic time by which a renewal must be sent, or leadership is lost."""
        return None if self.renewed_at is None else self.renewed_at + self.timings.renew_deadline

    # -- steps

    def attempt(self, current: Record | None, now: float, wall: float) -> Decision:
        """What to do having read the Lease (`current`, None: it does not exist) at `now`."""
        stamp = format_micro_time(wall)
        desired = Record(holder_identity=self.identity,
                         lease_duration_seconds=math.ceil(self.timings.lease_duration),
                         acquire_time=stamp, renew_time=stamp)
        if self._ended:
            return Wait(self.leader())
        if current is None:
            return Create(desired)
        if current != self.observed:
            self.observed, self.observed_time = current, now
        holder = current.holder_identity
        declared = current.lease_duration_seconds
        if declared <= 0:  # none (or nonsense) declared: wait as long as we would hold it
            declared = self.timings.lease_duration
        if holder and holder != self.identity and now < self.observed_time + declared:
            return Wait(holder)
        if holder == self.identity and self.renewed_at is not None:
            return Update(replace(desired, acquire_time=current.acquire_time,
                                  leader_transitions=current.leader_transitions))
        # taking it: from someone whose lease expired, from nobody (released), or back from an
        # earlier process with our identity (a new term all the same)
        return Update(replace(desired, leader_transitions=current.leader_transitions + 1))

    def written(self, record: Record, sent_at: float) -> None:
        """The Create/Update of `record`, sent at `sent_at`, succeeded."""
        self.observed, self.observed_time = record, sent_at
        if record.holder_identity == self.identity and not self._ended:
            self.renewed_at = sent_at

    def release(self, now: float, wall: float) -> Update | None:
        """The record that gives the Lease up (client-go's ReleaseOnCancel), if it is held: no
        holder, which lets the next campaigner take it at once, and client-go's 1 s duration, so
        that a reader judging by renewTime + leaseDurationSeconds sees it expired too."""
        if not self.is_leader(now):
            return None
        stamp = format_micro_time(wall)
        self._ended = True
        return Update(Record(lease_duration_seconds=1, acquire_time=stamp, renew_time=stamp,
                             leader_transitions=self.observed.leader_transitions))


# The holder's boot and pid namespace, stamped on the Lease by every write: a pid means
# something only within them.
HOLDER_PID_NAMESPACE = "kubemu.io/holder-pid-namespace"


def holder_exited(lease: dict, identity: str, namespace: str | None, alive: Callable[[int], bool]) -> bool:
    """Whether the Lease's holder is a process that has exited: another identity of this
    elector's node (`<node>_<pid>`), stamped with this elector's pid namespace, whose pid `alive`
    says is no process. Anything less certain is False: the holder is waited out."""
    holder = record_from_lease(lease).holder_identity
    stamp = ((lease.get("metadata") or {}).get("annotations") or {}).get(HOLDER_PID_NAMESPACE)
    node, sep, pid = holder.rpartition("_")
    own_node = identity.rpartition("_")[0]
    return (namespace is not None and stamp == namespace and holder != identity and bool(sep) and bool(node)
            and node == own_node and pid.isascii() and pid.isdigit() and not alive(int(pid)))

