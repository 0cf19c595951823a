"""`kubemu chaos`'s shell: runs the workload against a running cluster, injects and heals the
nemesis's faults, records everything, and hands the recordings to `verdict.assemble`.

The workload:
* registers: independent store keys under a fresh prefix, two clients each, doing read / write
  / cas (a txn comparing mod_revision) through the admin's store client, recorded as a history;
* one store watch over the prefix, its sessions recorded for `watchcheck`;
* a ConfigMap updated with resourceVersion preconditions, the update also sent once more with
  the now-stale resourceVersion, which must answer 409;
* a Deployment scaled between 2 and 3 replicas after each fault, timed until it converges.

Faults touch only processes kubemu started: a target's PID (a pod's container from the
kubelet's pod status, a unit's main PID from init) must be one of its node's recorded
processes (`ownership.Owned.processes`: the node's cgroup, or its init's descendants).
"""
from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import time
from pathlib import Path

import psutil

from kubemu import cluster, wire
from kubemu._wire_auth import state_credentials
from kubemu.api.times import parse_micro_time
from kubemu.apiclient import ApiClient
from kubemu.statedir import StateDir
from store.client import Compacted, StoreClient

from . import nemesis, storeops, verdict
from .history import CAS, PUT, READ, WRITE, Change, History, HistoryError, Versions
from .watchcheck import WatchSession

NAMESPACE = "default"
DEPLOYMENT = "chaos-web"
CONFIGMAP = "chaos-register"
KEYS, CLIENTS_PER_KEY = 4, 2
CONVERGE_BOUND = 90.0  # seconds after a heal for the Deployment to be back at its desired state
SETTLE_BOUND = 90.0    # seconds for the nodes to hold what they held at the start, at the end
COMPONENTS = ("kube-scheduler", "kube-controller-manager")
# Test-only: a store client that acknowledges one write without sending it, to prove the
# checkers catch a lost acknowledged write (tests/test_e2e_chaos.py).
DOUBLE_ENV = "KUBEMU_CHAOS_TEST_DOUBLE"


class Runner:
    def __init__(self, state: StateDir, duration: float, kinds: tuple[str, ...], seed: int, say=print):
        self.state, self.duration, self.kinds, self.seed, self.say = state, duration, kinds, seed, say
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
        # a static pod is named <component>-<node>; the store's <member>-<node>
        return self.pod_targets(lambda p: p["metadata"].get("namespace") == "kube-system"
                                and p["metadata"]["name"] == f"{target}-{p['spec'].get('nodeName')}")

    async def signal_one(self, fault: nemesis.Fault, candidates, sig) -> psutil.Process | None:
        for node, name, pid in ([self.rng.choice(candidates)] if candidates else []):
            proc = self.owned_pid(node, pid)
            if proc is None:
                break
            proc.send_signal(sig)
            self.mark(f"fault {fault.index}: {signal.Signals(sig).name} {name} (pid {pid}) on {node}")
            return proc
        self.mark(f"fault {fault.index}: no {fault.target} process of this cluster to {fault.kind}")
        return None

    # --- faults ----------------------------------------------------------------------------

    async def inject(self, fault: nemesis.Fault) -> None:
        self.fault_index = fault.index
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
        elif kind == "partition":
            leader = await self.store_leader()
            members = await self.members()
            others = [m for m in members if m != leader]
            if leader is None or not others:
                self.mark(f"fault {fault.index}: no store leader to partition")
                return
            await self.send_fault(members, {"action": "partition", "from": [leader], "to": others,
                                            "symmetric": True})
            self.mark(f"fault {fault.index}: store partition {leader} | {','.join(others)}")

    async def heal(self, fault: nemesis.Fault) -> None:
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
        if fault.kind == "partition":
            await self.send_fault(await self.members(), {"action": "heal"})
            self.mark(f"heal {fault.index}: store partition healed")
        elif fault.kind not in ("pause", "node"):
            self.mark(f"heal {fault.index}: nothing to undo (its supervisor restarts what was killed)")

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

    async def scale(self, replicas: int) -> None:
        deadline = time.monotonic() + CONVERGE_BOUND
        while time.monotonic() < deadline:
            try:
                dep = await self.api.get("deployments", DEPLOYMENT, NAMESPACE)
                dep["spec"]["replicas"] = replicas
                await self.api.update("deployments", dep, NAMESPACE)
                return
            except wire.WireError:
                await asyncio.sleep(0.2)
        self.errors.append(f"could not scale {DEPLOYMENT} to {replicas} within {CONVERGE_BOUND:g}s")

    async def converged(self, replicas: int) -> bool:
        try:
            dep = await self.api.get("deployments", DEPLOYMENT, NAMESPACE)
            pods = await self.api.list("pods", NAMESPACE, label_selector=f"app={DEPLOYMENT}")
        except wire.WireError:
            return False
        st = dep.get("status") or {}
        live = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
        ready = [p for p in live if any(c["type"] == "Ready" and c["status"] == "True"
                                        for c in (p.get("status") or {}).get("conditions") or [])]
        return (st.get("observedGeneration", 0) >= dep["metadata"].get("generation", 0)
                and st.get("readyReplicas", 0) == replicas and len(live) == len(ready) == replicas)

    async def wait_converged(self, fault: int, replicas: int) -> None:
        start = time.monotonic()
        while time.monotonic() - start < CONVERGE_BOUND:
            if await self.converged(replicas):
                took = time.monotonic() - start
                self.convergence.append(verdict.Convergence(fault, took, CONVERGE_BOUND))
                self.mark(f"recovered {fault}: {DEPLOYMENT} at {replicas} replicas after {took:.1f}s")
                return
            await asyncio.sleep(0.2)
        self.convergence.append(verdict.Convergence(fault, None, CONVERGE_BOUND))
        self.mark(f"NOT recovered {fault}: {DEPLOYMENT} not at {replicas} replicas within {CONVERGE_BOUND:g}s")

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

    async def teardown(self) -> None:
        for name, resource in ((DEPLOYMENT, "deployments"), (CONFIGMAP, "configmaps")):
            for _ in range(100):
                try:
                    await self.api.delete(resource, name, NAMESPACE)
                    break
                except wire.NotFound:
                    break
                except wire.WireError:
                    await asyncio.sleep(0.3)

    async def run(self) -> verdict.Report:
        baseline = {n: len(self.node_pids(n)) for n in self.state.running_nodes()}
        await self.setup()
        shape = self.shape()
        skipped = {k: why for k in self.kinds if (why := nemesis.applicable(k, shape))}
        plan = nemesis.plan(self.duration, self.kinds, self.seed, shape)
        self.mark(f"start: {len(plan)} fault(s) planned over {self.duration:g}s, seed {self.seed}, "
                  f"cluster {shape.nodes} node(s), {shape.control_plane_nodes} control plane, "
                  f"{shape.store_replicas} store replica(s)")
        await self.wait_converged(-1, 2)
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
                    await self.scale(replicas)
                    await self.wait_converged(action.fault.index, replicas)
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
        leaked, stopped = await self.leftovers(baseline)
        self.mark("end")
        await self.store.close()
        await self.api.close()
        prefix = self.prefix
        return verdict.assemble(
            ops=self.history.operations(), final=final, store=truth, since=self.since,
            watches={"registers": self.sessions}, watched=lambda k: k.startswith(prefix), until=until,
            preconditions=self.preconditions, convergence=self.convergence,
            component_writes=self.component_writes(), leaked=leaked, stopped=stopped,
            timeline=self.timeline, skipped=skipped, errors=self.errors)

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

    async def leftovers(self, baseline: dict[str, int]) -> tuple[list[str], list[str]]:
        """Processes beyond what each node held before the run (once the workload is gone), and
        processes left stopped."""
        deadline = time.monotonic() + SETTLE_BOUND
        while True:
            counts = {n: len(self.node_pids(n)) for n in baseline}
            if all(counts[n] <= baseline[n] for n in baseline) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        leaked = [f"{n}: {counts[n]} processes, {baseline[n]} before the run" for n in baseline
                  if counts[n] > baseline[n]]
        stopped = []
        for n in baseline:
            for pid, proc in self.node_pids(n).items():
                try:
                    if proc.status() == psutil.STATUS_STOPPED:
                        stopped.append(f"{n}: pid {pid}")
                except psutil.Error:
                    pass
        return leaked, stopped

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


def _deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": DEPLOYMENT, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": DEPLOYMENT}},
                     "template": {"metadata": {"labels": {"app": DEPLOYMENT}},
                                  "spec": {"terminationGracePeriodSeconds": 1,
                                           "tolerations": [{"key": "node-role.kubernetes.io/control-plane",
                                                            "operator": "Exists", "effect": "NoSchedule"}],
                                           "containers": [{"name": "web", "command": ["sleep", "3600"]}]}}}}


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


def run(state_dir, duration: float, kinds: tuple[str, ...], seed: int, out: Path | None, say=print) -> verdict.Report:
    state = StateDir(state_dir)
    state.require_running()
    report = asyncio.run(Runner(state, duration, kinds, seed, say).run())
    if out is not None:
        out.write_text(json.dumps(report.to_dict(), indent=2, default=str))
    return report
