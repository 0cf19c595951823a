"""`kubemu chaos`'s shell: runs the workload against a running cluster, injects and heals the
nemesis's faults, records everything, and hands the recordings to `verdict.assemble`.

The workload:
* registers: independent store keys under a fresh prefix, two clients each, doing read / write
  / cas (a txn comparing mod_revision) through the admin's store client, recorded as a history;
* one store watch over the prefix, its sessions recorded for `watchcheck`;
* a ConfigMap updated with resourceVersion preconditions, the update also sent once more with
  the now-stale resourceVersion, which must answer 409;
* a Deployment and a StatefulSet scaled between 2 and 3 replicas after each fault, and a new
  Job of 2 completions, each timed until it is back at its desired state (a workload the
  cluster does not serve is skipped, with one line).

The store faults go through the store's own admin requests: `fault` (partitions, delays, disk,
power loss: `storefaults` says which request goes to which member), member remove / add and
move-leader. After healing one, the runner waits for every replica to have caught up.

Faults touch only processes kubemu started: a target's PID (a pod's container from the
kubelet's pod status, a unit's main PID from init) must be one of its node's recorded
processes (`ownership.Owned.processes`: the node's cgroup, or its init's descendants).

At the end, once its workloads are deleted, every process of every node must be one the node
is supposed to run now (`leftovers`: init, its units, the pods the kubelet reports), waited
on for up to SETTLE_BOUND; what is left is named as leaked.
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import time
from pathlib import Path

import psutil

from kubelet import sandboxes
from kubemu import cluster, wire
from kubemu._wire_auth import state_credentials
from kubemu.api.times import parse_micro_time
from kubemu.apiclient import ApiClient
from kubemu.statedir import StateDir
from store.client import Compacted, StoreClient

from . import leftovers, nemesis, plot, storefaults, storeops, verdict
from .history import CAS, PUT, READ, WRITE, Change, History, HistoryError, Versions
from .watchcheck import WatchSession

NAMESPACE = "default"
DEPLOYMENT = "chaos-web"
STATEFULSET = "chaos-db"
JOB = "chaos-job"  # a Job per fault: chaos-job-<fault index + 1>
JOB_COMPLETIONS = 2
CONFIGMAP = "chaos-register"
KEYS, CLIENTS_PER_KEY = 4, 2
CONVERGE_BOUND = 90.0  # seconds after a heal for the Deployment to be back at its desired state
SETTLE_BOUND = 90.0    # seconds at the end for every process to be a unit's or a reported pod's
STORE_BOUND = 90.0     # seconds after a store fault's heal for every replica to have caught up
COMPONENTS = ("kube-scheduler", "kube-controller-manager")
# Test-only: a store client that acknowledges one write without sending it, to prove the
# checkers catch a lost acknowledged write (tests/test_e2e_chaos.py).
DOUBLE_ENV = "KUBEMU_CHAOS_TEST_DOUBLE"


class Runner:
    def __init__(self, state: StateDir, duration: float, kinds: tuple[str, ...], seed: int, say=print,
                 plot_dir: Path | None = None):
        self.state, self.duration, self.kinds, self.seed, self.say = state, duration, kinds, seed, say
        self.plot_dir = plot_dir
        self.t0 = time.monotonic()
        self.timeline: list[dict] = []
        self.errors: list[str] = []
        self.history = History(self.now)
        self.versions = Versions()
        self.sessions: list[WatchSession] = []
        self.preconditions: list[tuple[int, str, str]] = []
        self.convergence: list[verdict.Convergence] = []
        self.fault_index = -1
        self.paused: list[psutil.Process] = []
        self.killed_nodes: list[str] = []
        self.removed: tuple[str, str] | None = None  # a store member taken out: (name, endpoint)
        self.windows: list[dict] = []  # each fault's window, for the report and the plots
        self.workloads: dict[str, str] = {}  # kind -> name, of those the cluster serves
        self.skipped_workloads: dict[str, str] = {}
        self.skipped_faults: dict[str, str] = {}  # planned, but nothing to inject it into
        self.job = None
        self.stop = asyncio.Event()
        self.prefix = f"/chaos/{seed}-{os.getpid()}-{int(time.time())}/"
        self.keys = [f"{self.prefix}r{i}" for i in range(KEYS)]
        self.sentinel = f"{self.prefix}~end"
        self.rng = random.Random(seed)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def mark(self, what: str) -> None:
        self.timeline.append({"t": round(self.now(), 3), "what": what})
        self.say(f"{self.now():8.2f}s  {what}")

    # --- the cluster -----------------------------------------------------------------------

    def shape(self) -> nemesis.Shape:
        apiservers = (self.state.api_endpoint() or "").split(",")
        return nemesis.Shape(len(self.state.running_nodes()), len([a for a in apiservers if a]),
                             len(self.store_endpoints))

    def node_pids(self, node: str) -> dict[int, psutil.Process]:
        owned = self.state.owned(node)
        return {p.pid: p for p in owned.processes()} if owned else {}

    def owned_pid(self, node: str, pid: int | None) -> psutil.Process | None:
        return self.node_pids(node).get(pid) if pid else None

    def pod_targets(self, want) -> list[tuple[str, str, int]]:
        """(node, pod name, container PID) of the pods `want(pod)` picks, on running nodes."""
        found = []
        for node in self.state.running_nodes():
            for _dir, pod in self.state.pods(node):
                if not want(pod):
                    continue
                for c in (pod.get("status") or {}).get("containerStatuses") or []:
                    cid = c.get("containerID", "")
                    if "running" in (c.get("state") or {}) and cid.startswith("process://"):
                        found.append((node, pod["metadata"]["name"], int(cid.removeprefix("process://"))))
        return sorted(found)

    async def process_targets(self, target: str) -> list[tuple[str, str, int]]:
        if target == "kubelet":
            out = []
            for node in self.state.running_nodes():
                st = await asyncio.to_thread(cluster.node_status, self.state, node) or {}
                for unit in st.get("units") or []:
                    if unit["name"] == "kubelet.service" and unit.get("main_pid"):
                        out.append((node, "kubelet", unit["main_pid"]))
            return out
        if target == "workload":
            return self.pod_targets(lambda p: (p["metadata"].get("labels") or {}).get("app") == DEPLOYMENT)
        if target == "shim":  # a workload container's shim (kubelet/shim.py): the container's parent
            return [shim for shim in map(self.shim_of, await self.process_targets("workload")) if shim]
        # a static pod is named <component>-<node>; the store's <member>-<node>
        return self.pod_targets(lambda p: p["metadata"].get("namespace") == "kube-system"
                                and p["metadata"]["name"] == f"{target}-{p['spec'].get('nodeName')}")

    def shim_of(self, target: tuple[str, str, int]) -> tuple[str, str, int] | None:
        node, name, pid = target
        try:
            shim = self.node_pids(node).get(psutil.Process(pid).ppid())
            return (node, f"{name}'s shim", shim.pid) if shim and "kubelet.shim" in shim.cmdline() else None
        except psutil.Error:
            return None

    async def signal_one(self, fault: nemesis.Fault, candidates, sig) -> psutil.Process | None:
        for node, name, pid in ([self.rng.choice(candidates)] if candidates else []):
            proc = self.owned_pid(node, pid)
            if proc is None:
                break
            proc.send_signal(sig)
            self.mark(f"fault {fault.index}: {signal.Signals(sig).name} {name} (pid {pid}) on {node}")
            return proc
        self.not_injected(fault, f"no {fault.target} process of this cluster to {fault.kind}")
        return None

    # --- faults ----------------------------------------------------------------------------

    def not_injected(self, fault: nemesis.Fault, why: str) -> None:
        """A planned fault the cluster gave no target for: one line, and the report's skipped."""
        self.skipped_faults[f"{fault.kind} (fault {fault.index})"] = why
        self.mark(f"fault {fault.index}: {fault.kind} not injected: {why}")

    async def inject(self, fault: nemesis.Fault) -> None:
        self.fault_index = fault.index
        self.windows.append({"index": fault.index, "kind": fault.kind, "target": fault.target,
                             "start": round(self.now(), 3), "end": None})
        kind = fault.kind
        if kind == "kill":
            await self.signal_one(fault, await self.process_targets(fault.target), signal.SIGKILL)
        elif kind == "pause":
            proc = await self.signal_one(fault, await self.process_targets(fault.target), signal.SIGSTOP)
            if proc is not None:
                self.paused.append(proc)
        elif kind == "apiserver":
            await self.signal_one(fault, await self.process_targets("apiserver"), signal.SIGKILL)
        elif kind == "store-leader":
            member = await self.store_leader()
            targets = await self.process_targets(member) if member else []
            await self.signal_one(fault, targets, signal.SIGKILL)
        elif kind == "node":
            cps = len([a for a in (self.state.api_endpoint() or "").split(",") if a])
            nodes = self.state.running_nodes()
            pool = nodes[cps:] if fault.target == "worker" else nodes[:cps]
            node = self.rng.choice(pool)
            await asyncio.to_thread(cluster.kill_node, self.state, node)
            self.killed_nodes.append(node)
            self.mark(f"fault {fault.index}: node {node} killed")
        elif kind in storefaults.REQUEST_FAULTS:
            leader = await self.store_leader()
            members = await self.members()
            if leader is None or leader not in members:
                self.not_injected(fault, "no store leader")
                return
            req = storefaults.request(kind, leader, list(members), self.rng)
            await self.send_fault({m: members[m] for m in req.members}, req.params)
            self.mark(f"fault {fault.index}: {req.says}")
        elif kind == "leader-transfer":
            leader = await self.store_leader()
            to = storefaults.pick_follower(leader, list(await self.members()), self.rng) if leader else None
            if to is None:
                self.not_injected(fault, "no store leader and follower to transfer between")
                return
            await self.store.move_leader(to, timeout=30)
            self.mark(f"fault {fault.index}: store leadership moved {leader} -> {to}")
        elif kind == "membership":
            await self.remove_member(fault)

    async def remove_member(self, fault: nemesis.Fault) -> None:
        """Remove a follower from the store, then wipe its data while it is stopped and kill
        it: its kubelet starts it again empty, and it waits, not a member, until the heal adds
        it back (etcd's rule: a removed member never comes back with its old data)."""
        leader = await self.store_leader()
        members = await self.members()
        victim = storefaults.pick_follower(leader, list(members), self.rng) if leader else None
        targets = await self.process_targets(victim) if victim else []
        proc = self.owned_pid(targets[0][0], targets[0][2]) if targets else None
        if proc is None:
            self.not_injected(fault, "no store follower process of this cluster to remove")
            return
        node = targets[0][0]
        await self.store.member_remove(victim, timeout=30)
        proc.send_signal(signal.SIGSTOP)
        data = cluster.store_data_dir(self.state, victim, node)
        for child in list(data.iterdir()) if data.is_dir() else []:
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        proc.send_signal(signal.SIGKILL)
        self.removed = (victim, members[victim])  # only a wiped member may be added back
        self.mark(f"fault {fault.index}: store member {victim} removed, its data wiped and its replica killed "
                  f"(pid {proc.pid} on {node})")

    async def heal(self, fault: nemesis.Fault) -> None:
        for w in self.windows:
            if w["index"] == fault.index:
                w["end"] = round(self.now(), 3)
        for proc in self.paused:
            try:
                proc.send_signal(signal.SIGCONT)
                self.mark(f"heal {fault.index}: SIGCONT pid {proc.pid}")
            except psutil.Error:
                pass
        self.paused.clear()
        for node in self.killed_nodes:
            await asyncio.to_thread(cluster.start_node, self.state, node)
            self.mark(f"heal {fault.index}: node {node} started")
        self.killed_nodes.clear()
        if fault.kind in storefaults.REQUEST_FAULTS:
            members = await self.members()
            req = storefaults.heal(list(members))
            await self.send_fault(members, req.params)
            self.mark(f"heal {fault.index}: {req.says}")
        elif fault.kind == "membership":
            await self.add_member_back(fault)
        elif fault.kind == "leader-transfer":
            self.mark(f"heal {fault.index}: nothing to undo (the new leader stays)")
        elif fault.kind not in ("pause", "node"):
            self.mark(f"heal {fault.index}: nothing to undo (its supervisor restarts what was killed)")
        if fault.kind in nemesis.STORE_FAULTS:
            await self.wait_store_whole(fault.index)

    async def add_member_back(self, fault: nemesis.Fault) -> None:
        if self.removed is None:
            self.mark(f"heal {fault.index}: no store member to add back")
            return
        name, endpoint = self.removed
        deadline = time.monotonic() + STORE_BOUND
        while True:
            try:
                await self.store.member_add(name, endpoint, timeout=10)
                break
            except wire.Conflict:  # an earlier try that timed out had added it
                break
            except wire.WireError as err:
                if time.monotonic() > deadline:
                    raise wire.Unavailable(f"store member {name} could not be added back: {err}") from None
                await asyncio.sleep(0.5)
        self.removed = None
        self.mark(f"heal {fault.index}: store member {name} added back")

    async def wait_store_whole(self, fault: int) -> None:
        """Wait for every replica to answer, agree on a leader and have applied what the leader
        had committed when the wait began."""
        names = list(self.store_names)
        start = time.monotonic()
        target, why = None, ["no status yet"]
        while time.monotonic() - start < STORE_BOUND:
            try:
                statuses = await self.store.status_all(timeout=2)
            except wire.WireError:
                statuses = []
            if target is None:
                target = storefaults.commit_index(statuses)
            if target is not None:
                why = storefaults.lagging(statuses, names, target)
                if not why:
                    self.mark(f"store whole {fault}: every replica caught up after {time.monotonic() - start:.1f}s")
                    return
            await asyncio.sleep(0.3)
        self.errors.append(f"fault {fault}: the store was not whole within {STORE_BOUND:g}s: {'; '.join(why)}")
        self.mark(self.errors[-1])

    async def members(self) -> dict[str, str]:
        for _ in range(50):
            try:
                return {m["name"]: m["endpoint"] for m in await self.store.member_list() if m.get("endpoint")}
            except wire.WireError:
                await asyncio.sleep(0.2)
        return {}

    async def store_leader(self) -> str | None:
        """The member that leads in the highest term any member reports."""
        try:
            statuses = await self.store.status_all()
        except wire.WireError:
            return None
        leaders = [st for st in statuses if st.get("role") == "leader"]
        return max(leaders, key=lambda st: st.get("term", 0))["name"] if leaders else None

    async def send_fault(self, members: dict[str, str], params: dict) -> None:
        for name, endpoint in members.items():
            client = wire.Client(endpoint, timeout=3, credentials=self.credentials)
            try:
                await client.call("fault", params, timeout=3)
            except wire.WireError as err:
                if params["action"] == "heal":  # a member that does not answer has restarted: no faults
                    continue
                self.errors.append(f"store fault {params['action']} did not reach {name}: {err}")
            finally:
                await client.close()

    # --- the workload ----------------------------------------------------------------------

    async def register_client(self, process: str, key: str) -> None:
        rev = 0  # the key's mod_revision as this client last saw it
        n = 0
        rng = random.Random(f"{self.seed}-{process}")
        while not self.stop.is_set():
            n += 1
            f = rng.choice((READ, WRITE, CAS, CAS))
            value = f"{process}-{n}"
            try:
                if f == READ:
                    inp = None
                elif f == WRITE:
                    inp = value
                else:
                    inp = (self.versions.value_at(key, rev), value)
            except HistoryError:
                f, inp = READ, None
            self.history.invoke(process, f, key, inp)
            try:
                if f == READ:
                    resp = await self.store.range(key)
                elif f == WRITE:
                    resp = await self.store.put(key, value)
                else:
                    req = storeops.cas_request(key.encode(), rev, value.encode())
                    resp = await self.store.txn(req["compare"], req["success"], req["failure"])
            except wire.WireError as err:
                if f == READ:
                    self.history.fail(process, error=str(err))
                else:
                    self.history.info(process, error=str(err))  # it may have happened
                await asyncio.sleep(0.1)
                continue
            output, revision = storeops.outcome(f, resp, bytes.decode)
            if f == READ:
                rev = revision
                self.versions.learn(key, revision, output)
            elif revision is not None:
                rev = revision
                self.versions.learn(key, revision, value)
            elif f == CAS and resp.get("responses") and resp["responses"][0].get("kvs"):
                kv = resp["responses"][0]["kvs"][0]
                rev = kv["mod_revision"]
                self.versions.learn(key, rev, kv["value"].decode())
            self.history.ok(process, output, revision=revision)
            await asyncio.sleep(0.02)

    async def watcher(self, store, sessions: list[WatchSession], truth: bool = False) -> None:
        """Watch the prefix from the run's first revision to the sentinel, a session per
        stream. The truth's watch (its own client and connections) is the store's history the
        others are judged by: it starts now so that auto-compaction cannot take it away."""
        start, relisted = self.since, False
        while True:
            session = WatchSession(start, relisted=relisted)
            sessions.append(session)
            try:
                async for ev in store.watch(self.prefix, prefix=True, start_revision=start):
                    change = _change(ev)
                    session.events.append(change)
                    start = change.revision + 1
                    if change.key == self.sentinel:
                        return
            except Compacted as err:
                if truth:
                    self.errors.append(f"the store's history was compacted before it was read: {err}")
                    return
                start, relisted = (err.compact_revision or start) + 1, True
            except wire.WireError as err:
                self.mark(f"watch session ended ({type(err).__name__}); resuming from revision {start}")
                await asyncio.sleep(0.2)

    async def api_client(self) -> None:
        """Updates of one ConfigMap with resourceVersion preconditions; each successful one is
        sent once more with the resourceVersion it replaced, which must be refused."""
        n = 0
        while not self.stop.is_set():
            n += 1
            await asyncio.sleep(0.3)
            try:
                cm = await self.api.get("configmaps", CONFIGMAP, NAMESPACE)
                old_rv = cm["metadata"]["resourceVersion"]
                cm["data"] = {"v": f"api-{n}"}
                await self.api.update("configmaps", cm, NAMESPACE)
            except wire.WireError:
                continue
            stale = dict(cm, data={"v": f"api-{n}-stale"})
            stale["metadata"] = dict(cm["metadata"], resourceVersion=old_rv)
            try:
                await self.api.update("configmaps", stale, NAMESPACE)
                answer = verdict.ACCEPTED
            except wire.Conflict:
                answer = verdict.CONFLICT
            except wire.WireError:
                answer = verdict.UNKNOWN
            self.preconditions.append((self.fault_index, f"configmap/{CONFIGMAP}", answer))

    async def scale(self, resource: str, name: str, replicas: int) -> None:
        deadline = time.monotonic() + CONVERGE_BOUND
        while time.monotonic() < deadline:
            try:
                obj = await self.api.get(resource, name, NAMESPACE)
                obj["spec"]["replicas"] = replicas
                await self.api.update(resource, obj, NAMESPACE)
                return
            except wire.WireError:
                await asyncio.sleep(0.2)
        self.errors.append(f"could not scale {name} to {replicas} within {CONVERGE_BOUND:g}s")

    async def replicas_ready(self, resource: str, name: str, replicas: int) -> bool:
        """The controller saw the latest spec, and exactly `replicas` live pods, all Ready."""
        try:
            obj = await self.api.get(resource, name, NAMESPACE)
            pods = await self.api.list("pods", NAMESPACE, label_selector=f"app={name}")
        except wire.WireError:
            return False
        st = obj.get("status") or {}
        live = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
        ready = [p for p in live if any(c["type"] == "Ready" and c["status"] == "True"
                                        for c in (p.get("status") or {}).get("conditions") or [])]
        return (st.get("observedGeneration", 0) >= obj["metadata"].get("generation", 0)
                and st.get("readyReplicas", 0) == replicas and len(live) == len(ready) == replicas)

    async def job_complete(self, name: str) -> bool:
        try:
            job = await self.api.get("jobs", name, NAMESPACE)
        except wire.WireError:
            return False
        st = job.get("status") or {}
        return st.get("succeeded", 0) >= JOB_COMPLETIONS and any(
            c.get("type") == "Complete" and c.get("status") == "True" for c in st.get("conditions") or [])

    async def wait_until(self, fault: int, workload: str, goal: str, done) -> None:
        start = time.monotonic()
        while time.monotonic() - start < CONVERGE_BOUND:
            if await done():
                took = time.monotonic() - start
                self.convergence.append(verdict.Convergence(fault, took, CONVERGE_BOUND, workload))
                self.mark(f"recovered {fault}: {workload} {goal} after {took:.1f}s")
                return
            await asyncio.sleep(0.2)
        self.convergence.append(verdict.Convergence(fault, None, CONVERGE_BOUND, workload))
        self.mark(f"NOT recovered {fault}: {workload} not {goal} within {CONVERGE_BOUND:g}s")

    async def set_desired(self, fault: int, replicas: int) -> list:
        """Give every workload a new desired state after fault `fault` (-1: the start); the
        waits for each to reach it."""
        waits = []
        for kind, resource in (("deployment", "deployments"), ("statefulset", "statefulsets")):
            name = self.workloads.get(kind)
            if name is None:
                continue
            if fault >= 0:
                await self.scale(resource, name, replicas)
            waits.append(self.wait_until(fault, f"{kind}/{name}", f"at {replicas} ready replicas",
                                         lambda r=resource, n=name: self.replicas_ready(r, n, replicas)))
        if "job" in self.workloads:
            job = f"{JOB}-{fault + 1}"
            if self.job is not None:
                await self.delete("jobs", self.job)
            try:
                await _retry(lambda: self.api.create("jobs", _job(job), NAMESPACE), CONVERGE_BOUND)
                self.job = job
                waits.append(self.wait_until(fault, f"job/{job}", f"at {JOB_COMPLETIONS} completions",
                                             lambda: self.job_complete(job)))
            except wire.WireError as err:
                self.errors.append(f"could not create job {job}: {err}")
        return waits

    async def converge(self, fault: int, replicas: int) -> None:
        await asyncio.gather(*await self.set_desired(fault, replicas))

    # --- the run ---------------------------------------------------------------------------

    async def setup(self) -> None:
        self.credentials = state_credentials(self.state.root)
        self.store_endpoints = [line.strip() for line in (self.state.root / "store-endpoints").read_text().splitlines()
                                if line.strip() and not line.startswith("#")]
        store = StoreClient(self.store_endpoints, timeout=3, credentials=self.credentials)
        self.store = _DroppingStore(store) if os.environ.get(DOUBLE_ENV) == "drop-acked-write" else store
        self.api = ApiClient(self.state.api_endpoint(), timeout=5, credentials=self.credentials)
        self.since = (await self.store.range(self.prefix, prefix=True))["header"]["revision"] + 1
        await self.api.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"name": CONFIGMAP, "namespace": NAMESPACE},
                                             "data": {"v": "api-0"}}, NAMESPACE)
        await self.api.create("deployments", _deployment(2), NAMESPACE)
        self.workloads["deployment"] = DEPLOYMENT
        try:
            await self.api.create("statefulsets", _statefulset(2), NAMESPACE)
            self.workloads["statefulset"] = STATEFULSET
        except (wire.NotFound, wire.BadRequest) as err:
            self.skipped_workloads["statefulset"] = f"the cluster does not serve StatefulSets ({err})"
        try:  # the Jobs are made one per fault: only ask whether they are served
            await self.api.list("jobs", NAMESPACE)
            self.workloads["job"] = JOB
        except (wire.NotFound, wire.BadRequest) as err:
            self.skipped_workloads["job"] = f"the cluster does not serve Jobs ({err})"
        for kind, why in self.skipped_workloads.items():
            self.mark(f"workload {kind} skipped: {why}")
        self.store_names = list(await self.members())

    async def teardown(self) -> None:
        owned = [(self.workloads.get("deployment"), "deployments"), (self.workloads.get("statefulset"), "statefulsets"),
                 (self.job, "jobs"), (CONFIGMAP, "configmaps")]
        for name, resource in owned:
            if name is not None:
                await self.delete(resource, name)

    async def delete(self, resource: str, name: str) -> None:
        """Delete what the run made, its pods with it (a Job's API default would orphan them)."""
        for _ in range(100):
            try:
                await self.api.delete(resource, name, NAMESPACE, propagation_policy="Background")
                return
            except wire.NotFound:
                return
            except wire.WireError:
                await asyncio.sleep(0.3)

    async def run(self) -> verdict.Report:
        nodes = self.state.running_nodes()
        await self.setup()
        shape = self.shape()
        skipped = {k: why for k in self.kinds if (why := nemesis.applicable(k, shape))}
        plan = nemesis.plan(self.duration, self.kinds, self.seed, shape)
        self.mark(f"start: {len(plan)} fault(s) planned over {self.duration:g}s, seed {self.seed}, "
                  f"cluster {shape.nodes} node(s), {shape.control_plane_nodes} control plane, "
                  f"{shape.store_replicas} store replica(s)")
        await self.converge(-1, 2)
        self.t0 = time.monotonic()  # the plan's times count from when the workload starts
        workers = [asyncio.create_task(self.register_client(f"c{k}.{i}", key))
                   for k, key in enumerate(self.keys) for i in range(CLIENTS_PER_KEY)]
        workers.append(asyncio.create_task(self.api_client()))
        truth_store = StoreClient(self.store_endpoints, credentials=self.credentials)
        truth_sessions: list[WatchSession] = []
        watches = [asyncio.create_task(self.watcher(self.store, self.sessions)),
                   asyncio.create_task(self.watcher(truth_store, truth_sessions, truth=True))]
        nem = nemesis.Nemesis(plan)
        replicas = 2
        try:
            while self.now() < self.duration:
                for action in nem.due(self.now()):
                    try:
                        if isinstance(action, nemesis.Inject):
                            await self.inject(action.fault)
                            continue
                        await self.heal(action.fault)
                    except (OSError, RuntimeError, psutil.Error, wire.WireError) as exc:
                        self.errors.append(f"fault {action.fault.index} ({action.fault.kind}): "
                                           f"{type(action).__name__.lower()} failed: {exc}")
                        self.mark(self.errors[-1])
                        continue
                    replicas = 5 - replicas
                    await self.converge(action.fault.index, replicas)
                nxt = nem.next_time()
                await asyncio.sleep(max(0.05, min(0.5, (nxt if nxt is not None else self.duration) - self.now())))
        finally:
            if nem.active is not None:
                await self.heal(nem.active)
            self.stop.set()
            await asyncio.gather(*workers, return_exceptions=True)
        final, until = await self.final_state()
        try:
            await asyncio.wait_for(asyncio.gather(*watches), 60)
        except asyncio.TimeoutError:
            self.errors.append("the watches did not deliver the run's last write within 60s")
        await truth_store.close()
        truth = [c for session in truth_sessions for c in session.events]
        await self.teardown()
        leaked, stopped = await self.leftovers(nodes)
        self.mark("end")
        await self.store.close()
        await self.api.close()
        prefix = self.prefix
        ops = self.history.operations()
        if self.plot_dir is not None:
            for line in plot.write(self.plot_dir, ops, self.windows, f"kubemu chaos, seed {self.seed}: register "
                                   "operations' latency (faults shaded)"):
                self.say(line)
        return verdict.assemble(
            ops=ops, final=final, store=truth, since=self.since,
            watches={"registers": self.sessions}, watched=lambda k: k.startswith(prefix), until=until,
            preconditions=self.preconditions, convergence=self.convergence,
            component_writes=self.component_writes(), leaked=leaked, stopped=stopped,
            timeline=self.timeline, skipped={**skipped, **self.skipped_faults,
                                             **{f"workload {k}": why for k, why in self.skipped_workloads.items()}},
            errors=self.errors, faults=self.windows)

    async def final_state(self) -> tuple[dict, int]:
        """Every key's value once the faults are healed, then the sentinel write that ends the
        watches (its revision: how far they must have caught up)."""
        final = {}
        for key in self.keys:
            resp = await _retry(lambda key=key: self.store.range(key))
            kvs = resp.get("kvs") or []
            if kvs:
                final[key] = kvs[0]["value"].decode()
        resp = await _retry(lambda: self.store.put(self.sentinel, "end"))
        return final, resp["header"]["revision"]

    async def leftovers(self, nodes: list[str]) -> tuple[list[str], list[str]]:
        """Processes of the nodes nothing accounts for (`leftovers`: not a unit's, nor of a pod
        the kubelet reports; the run's own pods, deleted, account for nothing), waited on until
        there are none, and processes left stopped."""
        deadline = time.monotonic() + SETTLE_BOUND
        while True:
            lost = {n: await self.unaccounted(n) for n in nodes}
            if not any(lost.values()) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        leaked = [f"{n}: {len(procs)} process(es) nothing accounts for: "
                  + ", ".join(_describe_lost(p) for p in procs)
                  for n, procs in lost.items() if procs]
        stopped = []
        for n in nodes:
            for pid, proc in self.node_pids(n).items():
                try:
                    if proc.status() == psutil.STATUS_STOPPED:
                        stopped.append(f"{n}: pid {pid}")
                except psutil.Error:
                    pass
        return leaked, stopped

    async def unaccounted(self, node: str) -> list[psutil.Process]:
        """The node's processes that are not its init's, a unit's, or a pod's the kubelet reports
        now (kubemu/chaos/leftovers.py)."""
        procs = self.node_pids(node)
        parents = {}
        for pid, proc in procs.items():
            try:
                parents[pid] = proc.ppid()
            except psutil.Error:
                continue  # gone since it was listed
        owned = self.state.owned(node)
        init = owned.init() if owned else None
        status = await asyncio.to_thread(cluster.node_status, self.state, node) or {}
        units = {u["name"]: u.get("main_pid") for u in status.get("units") or []}
        pods = [leftovers.Pod(pod, (rec.pid if (rec := sandboxes.read_record(str(d))) else None))
                for d, pod in self.state.pods(node)]
        accounted = leftovers.owners(parents, init.pid if init else None, units, pods, ignore=self.runs_pod)
        return [procs[pid] for pid in leftovers.unaccounted(parents, init.pid if init else None, accounted)]

    def runs_pod(self, pod: dict) -> bool:
        """A pod of the run's workloads (all deleted at its end)."""
        meta = pod.get("metadata") or {}
        app = (meta.get("labels") or {}).get("app") or ""
        return meta.get("namespace") == NAMESPACE and (app in (DEPLOYMENT, STATEFULSET) or app.startswith(f"{JOB}-"))

    def component_writes(self) -> list[verdict.ComponentWrite]:
        writes = []
        for log in sorted(self.state.nodes_dir.glob("*/logs/audit.log")):
            with open(log) as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    agent = entry.get("userAgent") or ""
                    component, _, rest = agent.partition("/")
                    if component not in COMPONENTS or not rest:
                        continue
                    lease = entry.get("resource") == "leases" and entry.get("name") == component
                    if lease and entry.get("code", 500) >= 300:
                        continue  # a candidate's refused try at the Lease: it did not act
                    writes.append(verdict.ComponentWrite(parse_micro_time(entry["time"]), component,
                                                         rest.split("/")[0], lease))
        return writes


def _describe(proc: psutil.Process) -> str:
    """A process as a leak report names it: its PID and the start of its command line."""
    try:
        return f"{proc.pid} ({' '.join(proc.cmdline())[:80]})"
    except psutil.Error:
        return f"{proc.pid} (gone)"


def _describe_lost(proc: psutil.Process) -> str:
    """A process nothing accounts for, with its parent (who it was left to)."""
    try:
        parent = proc.parent()
    except psutil.Error:
        parent = None
    return _describe(proc) + (f" child of {_describe(parent)}" if parent is not None else "")


def _change(ev) -> Change:
    kv = ev.kv
    return Change(kv["mod_revision"], kv["key"].decode(), ev.type,
                  kv["value"].decode() if ev.type == PUT else None)


async def _retry(call, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except wire.WireError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.3)


TOLERATE_CONTROL_PLANE = [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                           "effect": "NoSchedule"}]


def _template(app: str, container: str, command: list[str], **spec) -> dict:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"terminationGracePeriodSeconds": 1, "tolerations": TOLERATE_CONTROL_PLANE,
                     "containers": [{"name": container, "command": command}], **spec}}


def _deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": DEPLOYMENT}},
                     "template": _template(DEPLOYMENT, "web", ["sleep", "3600"])}}


def _statefulset(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": STATEFULSET, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "serviceName": STATEFULSET,
                     "selector": {"matchLabels": {"app": STATEFULSET}},
                     "template": _template(STATEFULSET, "db", ["sleep", "3600"])}}


def _job(name: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"completions": JOB_COMPLETIONS, "parallelism": JOB_COMPLETIONS, "backoffLimit": 20,
                     "template": _template(name, "work", ["sleep", "1"], restartPolicy="OnFailure")}}


class _DroppingStore:
    """The test double behind KUBEMU_CHAOS_TEST_DOUBLE=drop-acked-write: a store client whose
    fifth put is acknowledged without being sent (a broken build that loses a write)."""

    def __init__(self, store: StoreClient):
        self._store = store
        self._puts = 0
        self._revision = 1

    def __getattr__(self, name):
        return getattr(self._store, name)

    async def put(self, key, value, **kw):
        self._puts += 1
        if self._puts == 5:
            return {"header": {"revision": self._revision}}
        resp = await self._store.put(key, value, **kw)
        self._revision = resp["header"]["revision"]
        return resp


def run(state_dir, duration: float, kinds: tuple[str, ...], seed: int, out: Path | None, say=print,
        plot_dir: Path | None = None) -> verdict.Report:
    state = StateDir(state_dir)
    state.require_running()
    report = asyncio.run(Runner(state, duration, kinds, seed, say, plot_dir).run())
    if out is not None:
        out.write_text(json.dumps(report.to_dict(), indent=2, default=str))
    return report
