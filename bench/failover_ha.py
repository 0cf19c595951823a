"""`kubemu bench failover`'s rows for an HA control plane: a control-plane node loses power.

The cluster is `kubemu up --nodes 4 --control-plane-nodes 3` (no addons), once with `--fast`
and once with Kubernetes' default timings (leader election 15/10/2 s), each its own rows: node-0..2
each run a store replica, an apiserver, a scheduler and a controller-manager; node-3 is a
worker, so the pods the rows wait for run on a node that never dies and the rows measure the
control plane's recovery, not the loss of the pods on the dead node.

Each kill takes the node holding the kube-controller-manager Lease (`kubemu node kill`: every
process of the node SIGKILLed at once): the worst case, since the Deployment row then waits for
a new controller-manager leader, which Kubernetes bounds by the lease duration plus one retry
period (the old lease must expire first). Whether the scheduler's leader and the store's leader
were on that node too is recorded per kill. Three clocks run from the kill (the moment before
`kill_node`), and their probes start when it returns, every process of the node gone (so no
answer comes from the dying node; the kill itself, ~0.1 s, `kill_ms` in each kill's record,
is every clock's floor):

- first successful API write: a long-lived client of every apiserver, the victim's first in
  its preference (a client whose apiserver died: the case failover is for), creating a
  ConfigMap in a loop (0.5 s timeout, 5 ms apart);
- first pod scheduled: a Pod created right after the kill (retried until the create is
  acknowledged) has spec.nodeName (polled every 20 ms);
- Deployment converged: a Deployment of 1 replica scaled to 2 right after the kill has
  2 updated, ready and available replicas for its new generation.

Then the node is started again, and the next kill waits for a steady cluster: every node
Ready, every apiserver answering on its own endpoint, every store replica caught up with the
commit index, both Leases held by live processes, the Deployment back at 1 replica.

The pure part (`trial_rows`, `target`) turns the kills into the report's rows and their
verdicts against the issue's targets, which it sets for the first write only (p99 <= 2 s with
--fast; with the default timings, the lease duration plus one retry period); the rest is the shell."""
from __future__ import annotations

import asyncio
import math
import sys
import time
from pathlib import Path

import psutil

from kubemu import apipreference, cluster
from kubemu._wire_auth import state_credentials
from kubemu.apiclient import ApiClient, WireError, is_already_exists, is_not_found
from kubemu.statedir import StateDir
from store.client import StoreClient

from .stats import summary

NODES = 4
CONTROL_PLANE_COUNT = 3
# The two runs, each on its own cluster: name -> whether `kubemu up --fast`.
MODES = {"--fast": True, "default timings": False}
CM_LEASE = "kube-controller-manager"
LEASES = ("kube-scheduler", CM_LEASE)
DEPLOYMENT = "ha-web"
WRITE_TIMEOUT = 0.5
FIRST_USE_TIMEOUT = 30.0
PAUSE = 0.005
POLL = 0.02
TRIAL_TIMEOUT = 120.0
STEADY_TIMEOUT = 300.0  # a whole node's processes start again on a loaded 2-core machine
BOOT_TIMEOUT = 300.0

# A kill's clocks, in the order of the table, and what each row says.
CLOCKS = {"first_write_ms": "control-plane node kill -> first API write (client of every apiserver)",
          "pod_scheduled_ms": "control-plane node kill -> first pod scheduled",
          "deployment_converged_ms": "control-plane node kill -> Deployment scaled after it converged"}
# The target for the first write with --fast timings.
FIRST_WRITE_TARGET_MS = 2000.0


def timings(mode: str) -> cluster.Timings:
    return cluster.FAST_TIMINGS if MODES[mode] else cluster.DEFAULT_TIMINGS


def row_name(clock: str, mode: str) -> str:
    return f"{CLOCKS[clock]}, {mode}"


def lease_bound_ms(leader_elect: tuple[float, float, float]) -> float:
    """Kubernetes' own floor for a new leader: the lease duration plus one retry period."""
    lease_duration, _renew_deadline, retry_period = leader_elect
    return (lease_duration + retry_period) * 1000


def target(clock: str, mode: str) -> tuple[float, str] | None:
    """(bound in ms, what it is) for the row of `clock` in `mode`, or None. The issue sets one
    for the first write only: p99 <= 2 s with --fast; with the default lease timings, the lease
    duration plus one retry period. The other clocks are printed as measured."""
    if clock != "first_write_ms":
        return None
    if MODES[mode]:
        return FIRST_WRITE_TARGET_MS, "p99 <= 2 s (--fast)"
    bound = lease_bound_ms(timings(mode).leader_elect)
    return bound, f"p99 <= lease duration + retry period ({bound / 1000:g} s)"


def verdict(p99: float, bound: float) -> bool | None:
    return None if math.isnan(p99) else p99 <= bound


def trial_rows(trials: list[dict], mode: str) -> dict[str, dict]:
    """The report's rows from the kills of `mode` (each a dict of clocks in ms, None where a
    clock did not stop in time): p50/p99/min/max of the stopped ones, how many did not stop,
    and the target with its verdict on the p99 (None when nothing stopped)."""
    rows = {}
    for clock in CLOCKS:
        values = [t[clock] for t in trials if t.get(clock) is not None]
        row = dict(summary(values), unit="ms", samples_ms=values, missing=len(trials) - len(values))
        bound = target(clock, mode)
        if bound is not None:
            row["target_ms"], row["target"] = bound
            row["target_met"] = verdict(row["p99"], bound[0])
        rows[row_name(clock, mode)] = row
    return rows


def target_note(row: dict) -> str:
    """The table's words for a row's target: '<target>: met|NOT met', or ''."""
    if "target" not in row:
        return ""
    met = row.get("target_met")
    return f"{row['target']}: " + ("no figure" if met is None else "met" if met else "NOT met")


# --- the shell ---------------------------------------------------------------------------------

def _deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": DEPLOYMENT},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": DEPLOYMENT}},
                     "template": {"metadata": {"labels": {"app": DEPLOYMENT}},
                                  "spec": _pod_spec()}}}


def _pod_spec() -> dict:
    return {"terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "command": [sys.executable, "-S", "-c",
                                                        "import time; time.sleep(100000)"]}]}


def _probe_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": _pod_spec()}


def _converged(d: dict | None, replicas: int) -> bool:
    if d is None:
        return False
    status = d.get("status") or {}
    return (status.get("observedGeneration", 0) >= d["metadata"]["generation"]
            and status.get("replicas") == status.get("readyReplicas") == status.get("availableReplicas")
            == status.get("updatedReplicas") == replicas)


async def _all_connected(client: ApiClient, count: int) -> bool:
    return len(client.wire.connected) == count


class HABench:
    def __init__(self, state: StateDir):
        self.state = state
        self.credentials = state_credentials(state.root)
        self.nodes = cluster.node_names(NODES)
        self.control_plane = cluster.control_plane_nodes(CONTROL_PLANE_COUNT)
        self.apiservers = [cluster.apiserver_endpoint(state, n) for n in self.control_plane]
        self.stores = list(cluster.store_endpoints(state, control_plane_count=CONTROL_PLANE_COUNT).values())
        self.api = ApiClient(self.apiservers, timeout=5, credentials=self.credentials)

    async def close(self) -> None:
        await self.api.close()

    async def _get(self, resource: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            return await self.api.get(resource, name, namespace)
        except WireError:
            return None

    async def _wait(self, check, what: str, timeout: float = STEADY_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = await check()
            if found:
                return found
            await asyncio.sleep(0.2)
        raise TimeoutError(f"{what} not within {timeout:g}s")

    async def holders(self) -> dict[str, str] | None:
        """Lease -> holder identity (`<node>_<pid>`) once both are held by live processes."""
        found = {}
        for name in LEASES:
            lease = await self._get("leases.coordination.k8s.io", name, "kube-system")
            holder = ((lease or {}).get("spec") or {}).get("holderIdentity") or ""
            node, _, pid = holder.rpartition("_")
            if node not in self.control_plane or not pid.isdigit() or not psutil.pid_exists(int(pid)):
                return None
            found[name] = holder
        return found

    async def _nodes_ready(self) -> bool:
        try:
            items = (await self.api.list("nodes"))["items"]
        except WireError:
            return False
        ready = {n["metadata"]["name"] for n in items
                 if any(c.get("type") == "Ready" and c.get("status") == "True"
                        for c in (n.get("status") or {}).get("conditions") or [])}
        return set(self.nodes) <= ready

    async def _apiservers_answer(self) -> bool:
        for endpoint in self.apiservers:
            async with ApiClient(endpoint, timeout=2, credentials=self.credentials) as one:
                try:
                    await one.get("nodes", cluster.CONTROL_PLANE_NODE)
                except WireError:
                    return False
        return True

    async def store_leader(self) -> str | None:
        """The control-plane node whose store replica leads, if one says so."""
        async with StoreClient(self.stores, timeout=2, credentials=self.credentials) as store:
            for endpoint, status in zip(self.stores, await store.status_all(timeout=2)):
                if status.get("role") == "leader":
                    return self.control_plane[self.stores.index(endpoint)]
        return None

    async def _stores_caught_up(self) -> bool:
        async with StoreClient(self.stores, timeout=2, credentials=self.credentials) as store:
            statuses = await store.status_all(timeout=2)
        if any("error" in s for s in statuses):
            return False
        committed = max(s.get("commit_index", 0) for s in statuses)
        return all(s.get("applied_index", 0) >= committed for s in statuses)

    async def steady(self) -> dict[str, str]:
        """Wait for the steady cluster the next kill needs; the Leases' holders."""
        await self._wait(self._nodes_ready, "every node Ready")
        await self._wait(self._apiservers_answer, "every apiserver answering")
        await self._wait(self._stores_caught_up, "every store replica caught up")
        await self._wait(lambda: self._deployment_at(1), f"deployment {DEPLOYMENT} at 1 replica")
        return await self._wait(self.holders, "both Leases held by live processes")

    async def _deployment_at(self, replicas: int) -> bool:
        return _converged(await self._get("deployments.apps", DEPLOYMENT, "default"), replicas)

    async def setup(self) -> None:
        await self.api.create("deployments.apps", _deployment(1), "default")

    async def reset(self, trial: int) -> None:
        """Undo a kill's writes: the Deployment back at 1 replica, the probe pod gone."""
        await self.api.update_scale("deployments.apps", DEPLOYMENT, 1, "default")
        try:
            await self.api.delete("pods", f"ha-probe-{trial}", "default", grace_period_seconds=0)
        except WireError as err:
            if not is_not_found(err):
                raise

    async def trial(self, trial: int) -> dict:
        """One kill of the controller-manager leader's node; ms from the kill to each clock."""
        holders = await self.steady()
        victim = holders[CM_LEASE].rpartition("_")[0]
        took = [name for name, holder in holders.items() if holder.startswith(f"{victim}_")]
        if await self.store_leader() == victim:
            took.append("store leader")
        order = apipreference.for_node(self.apiservers, victim)
        async with ApiClient(order, timeout=WRITE_TIMEOUT, credentials=self.credentials) as prober:
            # its connections are made from the first use on (given time: the machine may be busy)
            await prober.get("nodes", victim, timeout=FIRST_USE_TIMEOUT)
            await self._wait(lambda: _all_connected(prober, len(order)), "the prober connected to every apiserver")
            kill_at = time.perf_counter()
            await asyncio.to_thread(cluster.kill_node, self.state, victim)
            gone_ms = (time.perf_counter() - kill_at) * 1000
            clocks = await self._clocks(trial, prober, kill_at)
        await asyncio.to_thread(cluster.start_node, self.state, victim)
        await self._wait(self._write_ok(lambda: self.reset(trial)), "the kill's writes undone")
        return dict(clocks, trial=trial, victim=victim, took=took, kill_ms=gone_ms)

    def _write_ok(self, write):
        async def attempt() -> bool:
            try:
                await write()
                return True
            except WireError:
                return False
        return attempt

    async def _clocks(self, trial: int, prober: ApiClient, kill_at: float) -> dict:
        def since() -> float:
            return (time.perf_counter() - kill_at) * 1000

        async def first_write() -> float:
            n = 0
            while True:
                n += 1
                cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"ha-write-{trial}-{n}"}}
                try:
                    await prober.create("configmaps", cm, "default")
                    return since()
                except WireError:
                    await asyncio.sleep(PAUSE)

        async def retried(write) -> None:
            """A write repeated until acknowledged (each is idempotent: the same object again)."""
            while True:
                try:
                    await write()
                    return
                except WireError as err:
                    if is_already_exists(err):  # an earlier attempt's answer was lost
                        return
                    await asyncio.sleep(PAUSE)

        async def pod_scheduled() -> float:
            name = f"ha-probe-{trial}"
            await retried(lambda: prober.create("pods", _probe_pod(name), "default"))
            while not ((await self._get("pods", name, "default")) or {}).get("spec", {}).get("nodeName"):
                await asyncio.sleep(POLL)
            return since()

        async def deployment_converged() -> float:
            await retried(lambda: prober.update_scale("deployments.apps", DEPLOYMENT, 2, "default"))
            while not await self._deployment_at(2):
                await asyncio.sleep(POLL)
            return since()

        clocks = {"first_write_ms": first_write(), "pod_scheduled_ms": pod_scheduled(),
                  "deployment_converged_ms": deployment_converged()}
        tasks = {k: asyncio.ensure_future(asyncio.wait_for(c, TRIAL_TIMEOUT)) for k, c in clocks.items()}
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        for t in tasks.values():
            if not isinstance(t.exception(), (type(None), TimeoutError)):
                raise t.exception()
        return {k: (None if t.exception() else t.result()) for k, t in tasks.items()}  # None: did not stop in time


async def _trials(state: StateDir, kills: int, tick) -> list[dict]:
    bench = HABench(state)
    try:
        await bench._wait(bench._write_ok(bench.setup), f"deployment {DEPLOYMENT} created", BOOT_TIMEOUT)
        out = []
        for i in range(kills):
            out.append(await bench.trial(i))
            if tick:
                tick()
        await bench.steady()  # the last node back too: nothing is torn down mid-recovery
        return out
    finally:
        await bench.close()


def ha_failover(kills: int, workdir: Path, tick=None, mode: str = "--fast") -> tuple[dict[str, dict], list[dict]]:
    """Boot the HA cluster of `mode` (MODES) in `workdir`, kill `kills` times; (the rows,
    every kill's record). The cluster is always taken down."""
    state = StateDir(workdir)
    try:
        nodes, _ = cluster.up(state, NODES, fast=MODES[mode], api_port=0, control_plane_count=CONTROL_PLANE_COUNT)
        cluster.wait_started(state, nodes, BOOT_TIMEOUT)
        cluster.wait_ready(state, nodes, BOOT_TIMEOUT)
        trials = asyncio.run(_trials(state, kills, tick))
    finally:
        cluster.down(state)
    return trial_rows(trials, mode), trials


def settings(mode: str) -> str:
    lease = "/".join(f"{t:g}" for t in timings(mode).leader_elect)
    fast = " --fast" if MODES[mode] else ""
    return (f"kubemu up --nodes {NODES} --control-plane-nodes {CONTROL_PLANE_COUNT}{fast} (no addons; "
            f"leader election {lease} s lease/renew/retry); "
            "each kill: the kube-controller-manager Lease holder's node (kubemu node kill), started again "
            "and steady (Ready, store caught up, Leases held) before the next; writes with a 0.5 s timeout "
            "5 ms apart from a client of every apiserver, the victim's first")
