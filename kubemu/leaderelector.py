"""Leader election's shell: reads and writes the Lease, keeps the time, runs client-go's loops.

    api, elector = clients("kube-scheduler", endpoint, settings_from(parser, args), credentials=...)
    if await elector.acquire(stop):           # loops until leading (False: told to stop)
        lost = asyncio.create_task(elector.hold())   # renews; returns when leadership is lost
        ...                                          # the work, through `api`, whose writes are
                                                     # sent only while elector.is_leader()
    await elector.release()                   # on a graceful stop: the next one need not wait

A lost leadership ends the process (exit 1 after "leaderelection lost", as kube-scheduler and
kube-controller-manager do); its kubelet starts a new one, which campaigns again.

A holder that has exited is not waited out. client-go re-acquires at once when the Lease names
its own identity; kube-controller-manager's identity ends in a fresh UUID, so a process killed
(-9: no release) and restarted by its kubelet waits out the whole lease (15 s) with nobody
acting. Identities here end in the pid instead, and every write stamps the Lease with the
holder's pid namespace (`HOLDER_PID_NAMESPACE`), so an elector of the same node in the same pid
namespace can tell that the holder's pid is no live process: the holder is gone for good and
the Lease is taken as if it had been released (the write is conditional on what was read, as
any). A holder that might be alive - a live pid (even reused, or stopped), another node, another
pid namespace, a Lease without the stamp - is waited out as before.

The decisions are `kubemu.leaderelection.Elector`'s. The elector uses an API client of its own
(client-go's components give leader election its own client too): its Lease writes are not
subject to the write guard, and the work's traffic cannot delay a renewal.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from kubemu.apiclient import ApiClient, WireError, is_not_found
from kubemu.kubectl.durations import parse_duration
from kubemu.leaderelection import (JITTER_FACTOR, LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD, Create,
                                   HOLDER_PID_NAMESPACE, Elector, Timings, Update, Wait, holder_exited, lease_spec,
                                   record_from_lease)

log = logging.getLogger("kubemu.leaderelection")

NAMESPACE = "kube-system"


def identity() -> str:
    """`<node>_<pid>`: HOSTNAME is the node's name in a hostNetwork pod, as the kubelet sets it."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{os.getpid()}"


def own_pid_namespace() -> str | None:
    """This process's pid namespace on this boot (`<boot id>/pid:[<inode>]`): pids name the same
    processes only within it. None where /proc does not say (then no holder is judged gone)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def pid_alive(pid: int) -> bool:
    """Whether `pid` names a process (a zombie counts: not yet reaped, it is not known gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # someone else's; no pid at all: not known gone either
        return True
    return True


class LeaderElector:
    def __init__(self, api: ApiClient, namespace: str, name: str, ident: str, timings: Timings = Timings(), *,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 rng: Callable[[], float] = random.random, pid_namespace: str | None = None,
                 alive: Callable[[int], bool] = pid_alive):
        """`pid_namespace`: this process's (`own_pid_namespace()`), stamped on the Lease and compared
        with the holder's; None: no stamp, and no holder is ever judged to have exited."""
        self.api = api
        self.namespace = namespace
        self.name = name
        self.core = Elector(ident, timings)
        self.timings = timings
        self._clock = clock
        self._wall = wall
        self._rng = rng
        self._pid_namespace = pid_namespace
        self._alive = alive
        self._reported = ""   # the leader last logged
        self._written: dict | None = None  # the Lease as our last successful write left it

    @property
    def identity(self) -> str:
        return self.core.identity

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def is_leader(self) -> bool:
        """The write guard: this process holds the Lease and its renew deadline has not passed."""
        return self.core.is_leader(self._clock())

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Campaign until this process leads (True) or `stop` is set (False)."""
        log.info("attempting to acquire leader lease %s...", self.describe())
        while not stop.is_set():
            if await self._try(self.timings.renew_deadline):
                log.info("successfully acquired lease %s", self.describe())
                return True
            period = self.timings.retry_period
            try:  # client-go's JitterUntil: a period plus up to JITTER_FACTOR more
                await asyncio.wait_for(stop.wait(), period * (1 + JITTER_FACTOR * self._rng()))
            except asyncio.TimeoutError:
                pass
        return False

    async def hold(self) -> None:
        """Renew every retry period while leading; return once leadership is lost: a renewal did
        not succeed within the renew deadline of the last one, or someone else holds the Lease."""
        if self.core.renewed_at is None:
            raise RuntimeError("hold() is for a leader: acquire() first")
        while True:
            # a retry period after the last renewal was sent, not after its reply came: a slow
            # reply must not eat into the time left for the next one
            await self._sleep_until(self.core.renewed_at + self.timings.retry_period)
            while True:
                now = self._clock()
                if self.core.lost(now):
                    leader = self.core.leader()
                    why = ("the renew deadline passed" if leader == self.identity
                           else f"the lease is held by {leader or '(nobody)'}")
                    log.error("failed to renew lease %s: %s", self.describe(), why)
                    return
                deadline = self.core.renew_deadline()
                if await self._try(deadline - now):
                    break
                await self._sleep_until(min(self._clock() + self.timings.retry_period, deadline))

    async def release(self) -> None:
        """Give the Lease up if it is held (client-go's ReleaseOnCancel), best effort."""
        if not self.is_leader():
            return
        try:
            lease = await self.api.get("leases", self.name, self.namespace, timeout=self.timings.retry_period)
        except WireError as err:
            log.warning("failed to release lease %s: %s", self.describe(), err)
            return
        decision = self.core.release(self._clock(), self._wall())
        if decision is None:
            return
        try:
            await self.api.update("leases", self._lease(decision.record, lease), self.namespace,
                                  timeout=self.timings.retry_period)
            log.info("released lease %s", self.describe())
        except WireError as err:
            log.warning("failed to release lease %s: %s", self.describe(), err)

    async def close(self) -> None:
        await self.api.close()

    # -- one tryAcquireOrRenew

    async def _try(self, timeout: float) -> bool:
        deadline = self._clock() + timeout
        # client-go's fast path: a leader renews over the Lease it last wrote, without reading it
        # first (one round trip, not two); on any failure it reads and decides again
        if self._written is not None and self.is_leader():
            decision = self.core.attempt(self.core.observed, self._clock(), self._wall())
            if isinstance(decision, Update) and await self._write(decision, self._written, deadline):
                return True
        try:
            lease = await self.api.get("leases", self.name, self.namespace, timeout=max(0.0, deadline - self._clock()))
        except WireError as err:
            if not is_not_found(err):
                log.warning("error retrieving resource lock %s: %s", self.describe(), err)
                return False
            lease = None
        current = None if lease is None else record_from_lease(lease)
        if lease is not None and holder_exited(lease, self.identity, self._pid_namespace, self._alive):
            log.info("lease %s: its holder %s has exited (a process of this node): taking it without waiting "
                     "out its lease", self.describe(), current.holder_identity)
            current = replace(current, holder_identity="")  # as if it had released the Lease
        decision = self.core.attempt(current, self._clock(), self._wall())
        self._report()
        if isinstance(decision, Wait):
            log.debug("lock is held by %s and has not yet expired", decision.holder)
            return False
        return await self._write(decision, lease, deadline)

    async def _write(self, decision: Create | Update, current: dict | None, deadline: float) -> bool:
        sent_at = self._clock()
        if sent_at >= deadline:
            return False
        try:
            if isinstance(decision, Create):
                written = await self.api.create("leases", self._lease(decision.record), self.namespace,
                                                timeout=deadline - sent_at)
            else:
                written = await self.api.update("leases", self._lease(decision.record, current), self.namespace,
                                                timeout=deadline - sent_at)
        except WireError as err:
            self._written = None
            what = "initially creating leader election record" if isinstance(decision, Create) else "updating lock"
            log.warning("error %s %s: %s", what, self.describe(), err)
            return False
        self._written = written
        self.core.written(decision.record, sent_at)
        self._report()
        return True

    def _lease(self, record, current: dict | None = None) -> dict:
        meta = {"name": self.name, "namespace": self.namespace}
        if self._pid_namespace is not None:
            meta["annotations"] = {HOLDER_PID_NAMESPACE: self._pid_namespace}
        if current is not None:  # the update is conditional on what was read
            meta["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion", "")
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": lease_spec(record)}

    def _report(self) -> None:
        leader = self.core.leader()
        if leader and leader != self._reported:
            self._reported = leader
            if leader != self.identity:
                log.info("new leader elected: %s", leader)

    async def _sleep_until(self, when: float) -> None:
        await asyncio.sleep(max(0.0, when - self._clock()))


# -- kube's flags -------------------------------------------------------------------------------

def _flag_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "t", "yes"):
        return True
    if value in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {text!r}")


def _flag_duration(text: str) -> float:
    try:
        value = parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def add_flags(parser: argparse.ArgumentParser, resource_name: str) -> None:
    """kube-scheduler's and kube-controller-manager's --leader-elect* flags."""
    g = parser.add_argument_group("leader election")
    g.add_argument("--leader-elect", type=_flag_bool, nargs="?", const=True, default=True, metavar="BOOL",
                   help="start a leader election client and gain leadership before doing any work; "
                        "for several copies of this component (default true)")
    g.add_argument("--leader-elect-lease-duration", type=_flag_duration, default=LEASE_DURATION,
                   metavar="DURATION", help="how long a non-leader waits after observing a leadership "
                                            f"renewal before taking the lease (default {LEASE_DURATION:g}s)")
    g.add_argument("--leader-elect-renew-deadline", type=_flag_duration, default=RENEW_DEADLINE,
                   metavar="DURATION", help="how long the leader keeps trying to renew before it stops "
                                            f"leading; less than the lease duration (default {RENEW_DEADLINE:g}s)")
    g.add_argument("--leader-elect-retry-period", type=_flag_duration, default=RETRY_PERIOD,
                   metavar="DURATION", help=f"time between attempts to acquire and renew (default "
                                            f"{RETRY_PERIOD:g}s)")
    g.add_argument("--leader-elect-resource-namespace", default=NAMESPACE, metavar="NAMESPACE",
                   help=f"the namespace of the Lease (default {NAMESPACE})")
    g.add_argument("--leader-elect-resource-name", default=resource_name, metavar="NAME",
                   help=f"the name of the Lease (default {resource_name})")


@dataclass(frozen=True)
class Settings:
    """What the --leader-elect* flags say."""
    enabled: bool = True
    timings: Timings = Timings()
    namespace: str = NAMESPACE
    name: str = ""


def settings_from(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Settings:
    """The flags' settings; a parser error (exit 2) if the timings cannot work together."""
    timings = Timings(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                      args.leader_elect_retry_period)
    problems = timings.problems()
    if args.leader_elect and problems:
        parser.error("; ".join(problems))
    if args.leader_elect and not (args.leader_elect_resource_namespace and args.leader_elect_resource_name):
        parser.error("--leader-elect-resource-namespace and --leader-elect-resource-name must not be empty")
    return Settings(args.leader_elect, timings, args.leader_elect_resource_namespace, args.leader_elect_resource_name)


def clients(component: str, endpoint, settings: Settings | None, **kw) -> tuple[ApiClient, LeaderElector | None]:
    """The component's API client, and its elector (None without leader election). The client
    names the component and this process (`<component>/<identity>`, the audit log's userAgent)
    and, with an elector, sends a write only while the elector says this process leads."""
    ident = identity()
    agent = f"{component}/{ident}"
    if settings is None or not settings.enabled:
        return ApiClient(endpoint, user_agent=agent, **kw), None
    elector = LeaderElector(ApiClient(endpoint, user_agent=f"{agent}/leader-election", **kw),
                            settings.namespace, settings.name, ident, settings.timings,
                            pid_namespace=own_pid_namespace())
    return ApiClient(endpoint, user_agent=agent, write_guard=elector.is_leader, **kw), elector
