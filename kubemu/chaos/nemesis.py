"""The nemesis's schedule (Jepsen's word for the fault injector): which fault when, on which
class of target, for how long. Pure: a seeded plan and a state machine driven by the caller's
clock, so a seed names one run's schedule exactly and tests step it with a fake clock.

Faults (`kubemu chaos --faults`):

    kill          SIGKILL one process: a workload container or its shim, the scheduler, the
                  controller-manager or a kubelet (its init restarts it); a node's init is
                  the `node` fault (init's death is the machine's)
    pause         SIGSTOP one of those for the fault's hold, then SIGCONT
    node          SIGKILL a whole node (`kubemu node kill`), boot it again on heal; never the
                  last control-plane node
    store-leader  SIGKILL the store replica that leads (its kubelet restarts it)
    apiserver     SIGKILL an apiserver
    partition     cut the store's leader from the other replicas (both ways), heal on heal
    asymmetric    cut one way only: the leader's messages to the others, or theirs to it
    delay         hold the Raft messages between every pair of replicas for a random time
                  (netem's delay with as much jitter: messages overtake each other)
    disk          one replica's disk is full (etcd's NOSPACE) or its next fsync fails (it
                  stops, and its kubelet restarts it); a healthy disk on heal
    power-loss    one replica loses power: what it had not synced is lost, it stops at once
    leader-transfer  the store's leader hands leadership to a follower (move-leader)
    membership    a follower is removed from the store, its data wiped (etcd's rule: a member
                  comes back empty), and added back on heal, to catch up from the leader

The store faults go through the store's own `fault` requests and member changes (the same ones
`kubemu store fault|member|move-leader` send), all under the workload's load. After the heal of
a store fault the runner waits for every replica to have caught up before the next one.

One fault at a time: injected at `at`, healed `hold` seconds later, then a quiet `settle`
before the next one, in which the runner measures recovery. A fault the cluster cannot take
(`applicable`) is never planned: it is reported as skipped instead.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

FAULTS = ("kill", "pause", "node", "store-leader", "apiserver", "partition", "asymmetric", "delay", "disk",
          "power-loss", "leader-transfer", "membership")
# the faults that act on the store's replicas (the runner waits for the store to be whole after them)
STORE_FAULTS = ("store-leader", "partition", "asymmetric", "delay", "disk", "power-loss", "leader-transfer",
                "membership")
# how many replicas a fault needs: a minority cut off or removed must leave a quorum, a
# transfer or a delay needs someone to hand to or talk with
MIN_REPLICAS = {"partition": 3, "asymmetric": 3, "membership": 3, "delay": 2, "leader-transfer": 2}
# the target classes a kill or pause picks from (the runner picks the process within it)
PROCESS_TARGETS = ("workload", "shim", "scheduler", "controller-manager", "kubelet")
PAUSE_TARGETS = ("workload", "scheduler", "controller-manager")

WARMUP = 3.0            # seconds of workload before the first fault
HOLD = (1.0, 4.0)       # a fault lasts this long (uniform)
SETTLE = (4.0, 8.0)     # quiet after a heal before the next fault (uniform)


@dataclass(frozen=True)
class Shape:
    """What the runner found the cluster to be: what decides which faults apply."""
    nodes: int
    control_plane_nodes: int
    store_replicas: int


@dataclass(frozen=True)
class Fault:
    index: int
    kind: str
    target: str   # the class of target (PROCESS_TARGETS, "worker"/"control-plane" for node, else the kind)
    at: float     # seconds from the start of the run
    hold: float

    @property
    def heal_at(self) -> float:
        return self.at + self.hold

    def to_dict(self) -> dict:
        return {"index": self.index, "kind": self.kind, "target": self.target, "at": round(self.at, 3),
                "hold": round(self.hold, 3)}


def parse_faults(text: str) -> tuple[str, ...]:
    """The --faults list: comma-separated names of FAULTS; ValueError names a bad one."""
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    bad = [k for k in kinds if k not in FAULTS]
    if bad or not kinds:
        raise ValueError(f"unknown fault(s) {', '.join(bad) or '(none given)'}: choose from {', '.join(FAULTS)}")
    return kinds


def applicable(kind: str, shape: Shape) -> str | None:
    """None if the cluster can take the fault, else why not."""
    if kind == "node" and shape.nodes - shape.control_plane_nodes < 1 and shape.control_plane_nodes < 3:
        return "no node can be lost: one node holds the only control plane (use --nodes 2 or --control-plane-nodes 3)"
    need = MIN_REPLICAS.get(kind, 1)
    if shape.store_replicas < need:
        return f"the store has {shape.store_replicas} replica(s): {kind} needs {need} or more"
    return None


def _target(kind: str, shape: Shape, rng: random.Random) -> str:
    if kind == "kill":
        return rng.choice(PROCESS_TARGETS)
    if kind == "pause":
        return rng.choice(PAUSE_TARGETS)
    if kind == "node":
        workers = shape.nodes - shape.control_plane_nodes
        classes = (["worker"] if workers else []) + (["control-plane"] if shape.control_plane_nodes >= 3 else [])
        return rng.choice(classes)
    return kind


def plan(duration: float, kinds: tuple[str, ...], seed: int, shape: Shape, *, warmup: float = WARMUP,
         hold: tuple[float, float] = HOLD, settle: tuple[float, float] = SETTLE) -> list[Fault]:
    """The faults of a run of `duration` seconds: one after another from `warmup` on, each
    healed and followed by its settle time within the duration. The same arguments give the
    same plan."""
    rng = random.Random(seed)
    usable = [k for k in kinds if applicable(k, shape) is None]
    faults: list[Fault] = []
    at = warmup
    while usable:
        kind = rng.choice(usable)
        length = rng.uniform(*hold)
        quiet = rng.uniform(*settle)
        if at + length + quiet > duration:
            break
        faults.append(Fault(len(faults), kind, _target(kind, shape, rng), at, length))
        at += length + quiet
    return faults


@dataclass(frozen=True)
class Inject:
    fault: Fault


@dataclass(frozen=True)
class Heal:
    fault: Fault


class Nemesis:
    """Steps a plan: `due(now)` gives what to do at `now` (seconds from the start): a Heal of
    the active fault once its hold is over, an Inject of the next once its time has come (never
    while another is active: a heal that ran late pushes the rest back by as much)."""

    def __init__(self, faults: list[Fault]):
        self._pending = list(faults)
        self.active: Fault | None = None
        self._lag = 0.0  # how late the caller ran: later faults keep their hold and settle time

    def due(self, now: float) -> list[Inject | Heal]:
        actions: list[Inject | Heal] = []
        if self.active is not None:
            if now < self.active.heal_at + self._lag:
                return actions
            self._lag = now - self.active.heal_at
            actions.append(Heal(self.active))
            self.active = None
        if self._pending and now >= self._pending[0].at + self._lag:
            self.active = self._pending.pop(0)
            self._lag = max(self._lag, now - self.active.at)  # a late start keeps its whole hold
            actions.append(Inject(self.active))
        return actions

    def next_time(self) -> float | None:
        """When `due` next has something to do (None: the plan is done)."""
        if self.active is not None:
            return self.active.heal_at + self._lag
        return self._pending[0].at + self._lag if self._pending else None

    @property
    def done(self) -> bool:
        return self.active is None and not self._pending
