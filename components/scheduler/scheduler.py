"""The scheduler process's shell: informers in, decisions one at a time, binds out concurrently.

    await Scheduler("ipc:///run/kubemu/api.sock").run()     # until SIGTERM / SIGINT

  * Two informers (pods in every namespace, nodes) feed the queue (`queue.SchedulingQueue`)
    and the cache (`cache.SchedulerCache`). Handlers only do bookkeeping. Three more (claims,
    volumes, storage classes) serve the VolumeBinding plugin; a change in any of them gives
    the unschedulable pods another try.
  * One loop pops a pod and decides with the framework's `schedule` over the cache (for a pod
    without node constraints, its equivalent in one pass, fastpath.py), looking at
    `percentage_of_nodes_to_score` of the nodes in large clusters as kube-scheduler does. A fit is
    assumed in the cache at once (the next decision counts it) and bound by a task of its own;
    no fit reports PodScheduled=False and a FailedScheduling Event, and the pod waits in the
    queue. Each attempt first takes one of `parallel_binds` write slots, so at most that many
    writes (binds, status patches) are in flight and a slow apiserver slows the loop down
    instead of piling up tasks.
  * A pod with claims still to bind on its node (WaitForFirstConsumer) gets them bound first
    (VolumeBinding's PreBind, components/scheduling/volumebinding.py): the claims to provision
    are annotated with the node, the matching volumes get their claim, and the pod is bound
    once every claim is bound -- waiting for the PV controller and the provisioner without a
    write slot, so the other pods are scheduled meanwhile. A failure or `volume_bind_timeout`
    sends the pod back to the queue after its backoff.
  * Stateless: a restarted scheduler lists everything again. A pod whose bind was cut short
    either shows spec.nodeName (it is in the cache) or is pending again; the apiserver refuses
    a second binding, so no pod is ever bound twice.
"""
from __future__ import annotations

import asyncio
import logging
import random
import signal
import time

from components.scheduling.backoff import Backoff
from components.scheduling import volumebinding
from components.scheduling.framework import num_feasible_nodes_to_find, rejected, schedule
from kubemu import leaderelector, sdnotify
from kubemu.api.pod import claim_names
from kubemu.apiclient import Conflict, NotFound
from kubemu.cache import meta_namespace_key, split_meta_namespace_key
from kubemu.events import EventRecorder, format_time
from kubemu.gcfreeze import keep_frozen
from kubemu.informer import Informer

from . import fastpath, plugins, triage
from .cache import SchedulerCache
from .queue import SchedulingQueue

log = logging.getLogger("kubemu.scheduler")

SHUTDOWN_GRACE = 2.0   # seconds in-flight writes get to finish on SIGTERM
VOLUME_POLL = 1.0      # seconds between PreBind's checks when no claim or volume changes (upstream's poll)


class _Volumes:
    """volumebinding.Cluster over the scheduler's informers."""

    def __init__(self, claims: Informer, volumes: Informer, classes: Informer):
        self._claims, self._volumes, self._classes = claims, volumes, classes

    def pvc(self, namespace: str, name: str):
        return self._claims.get(f"{namespace}/{name}")

    def pv(self, name: str):
        return self._volumes.get(name)

    def storage_class(self, name: str):
        return self._classes.get(name)

    def pvs(self):
        return self._volumes.list()


# Writes in flight at once. kube-scheduler binds each pod in a goroutine of its own, unbounded
# but for its client's rate limit; a bound here keeps a slow apiserver from piling up tasks. It
# must not be what paces scheduling: 16 left the loop waiting on bind round trips while a burst
# of pods queued, and the store got its writes in smaller batches (bench/README.md, round 4).
DEFAULT_PARALLEL_BINDS = 64


class Scheduler:
    def __init__(self, api_endpoint: str, *, backoff_initial: float = 1.0, backoff_max: float = 10.0,
                 parallel_binds: int = DEFAULT_PARALLEL_BINDS, credentials: tuple[str, str] | None = None,
                 volume_bind_timeout: float = volumebinding.BIND_TIMEOUT,
                 leader_election: leaderelector.Settings | None = None,
                 percentage_of_nodes_to_score: int = 0):
        self.endpoint = api_endpoint
        self.queue = SchedulingQueue(Backoff(backoff_initial, backoff_max))
        self.cache = SchedulerCache()
        self.rng = random.Random()   # ties among the best nodes are broken at random, as upstream
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score   # 0: adaptive
        self._next_start = 0   # where the next cycle starts examining nodes (nextStartNodeIndex)
        self.api, self.elector = leaderelector.clients("kube-scheduler", api_endpoint, leader_election,
                                                       credentials=credentials)
        self.recorder = EventRecorder(self.api, component=triage.SCHEDULER_NAME)
        self.pods = Informer(self.api, "pods")
        self.nodes = Informer(self.api, "nodes")
        self.pods.add_event_handler(self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        self.nodes.add_event_handler(self._on_node_add, self._on_node_update, self._on_node_delete)
        self.claims = Informer(self.api, "persistentvolumeclaims")
        self.volumes = Informer(self.api, "persistentvolumes")
        self.classes = Informer(self.api, "storageclasses")
        for informer in (self.claims, self.volumes, self.classes):
            informer.add_event_handler(self._on_storage_change, self._on_storage_update, lambda _obj: None)
        self.cluster = _Volumes(self.claims, self.volumes, self.classes)
        self.volume_bind_timeout = volume_bind_timeout
        self._storage_changed = asyncio.Event()   # set (and replaced) at each claim/volume/class change
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(parallel_binds)   # one per write in flight
        self._writes: set[asyncio.Task] = set()

    # -- the process --

    async def run(self) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        informers = [asyncio.create_task(informer.run(stop), name=f"{informer.resource} informer")
                     for informer in self._informers()]
        freezing = asyncio.create_task(keep_frozen(), name="gc freezer")
        scheduling = holding = None
        code = 0
        try:
            if await self._synced(stop):
                # ready as a standby too: a non-leader is healthy, it just does not schedule
                sdnotify.notify("READY=1\nSTATUS=caches synced")
                if self.elector is None or await self.elector.acquire(stop):
                    log.info("caches synced: %d nodes, %d pods to schedule; scheduling (api %s)",
                             len(self.cache.nodes()), len(self.queue), self.endpoint)
                    sdnotify.notify("STATUS=scheduling")
                    scheduling = asyncio.create_task(self._schedule_loop(), name="scheduling loop")
                    waits = [asyncio.create_task(stop.wait())]
                    if self.elector is not None:
                        holding = asyncio.create_task(self.elector.hold(), name="leader election")
                        waits.append(holding)
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    if holding is not None and holding.done():
                        log.error("leaderelection lost")
                        code = 1
                    for task in waits:
                        task.cancel()
        finally:
            log.info("shutting down; queue: %s", self.queue.counts())
            stop.set()
            freezing.cancel()
            if scheduling is not None:
                scheduling.cancel()
            await asyncio.gather(*informers, freezing, *([scheduling] if scheduling else []),
                                 return_exceptions=True)
            if self._writes:
                await asyncio.wait(set(self._writes), timeout=SHUTDOWN_GRACE)
            for task in self._writes:
                task.cancel()
            await self.recorder.close()
            if self.elector is not None:
                if holding is not None:
                    holding.cancel()
                    await asyncio.gather(holding, return_exceptions=True)
                await self.elector.release()
                await self.elector.close()
            await self.api.close()
        return code

    def _informers(self) -> list[Informer]:
        return [self.pods, self.nodes, self.claims, self.volumes, self.classes]

    async def _synced(self, stop: asyncio.Event) -> bool:
        """Wait for every informer's first list; False if told to stop first."""
        async def all_synced() -> None:
            for informer in self._informers():
                await informer.wait_for_sync()
        waits = [asyncio.create_task(all_synced()), asyncio.create_task(stop.wait())]
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
        return not stop.is_set()

    # -- deciding --

    async def _schedule_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            key = self.queue.pop(loop.time())
            if key is None:
                await self._sleep(loop)
                continue
            await self._slots.acquire()   # the write this attempt may end with needs a slot
            write = None
            try:
                write = self._attempt(key, loop.time())
            except Exception:  # a bad pod must not stop the loop: retry it after its backoff
                log.exception("scheduling %s failed", key)
                self.queue.requeue(key, loop.time())
            if write is None:
                self._slots.release()
            else:
                self._spawn(write)
            await asyncio.sleep(0)   # let the informers and the writes run between decisions

    async def _sleep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Until something may be ready: a handler's wake-up or the queue's next deadline."""
        self._wake.clear()
        at = self.queue.next_wakeup()
        try:
            await asyncio.wait_for(self._wake.wait(), None if at is None else max(0.0, at - loop.time()))
        except asyncio.TimeoutError:
            pass

    def _attempt(self, key: str, now: float):
        """One scheduling cycle; returns the API write it calls for (a coroutine), or None."""
        pod = self.pods.get(key)
        if pod is None or not triage.needs_scheduling(pod) or self.cache.is_assumed(key):
            self.queue.delete(key)   # gone, bound, or already on its way to a node
            return None
        filters = plugins.FILTERS
        claims = claim_names(pod)   # most pods have none: VolumeBinding skips them
        if claims:
            state = volumebinding.pre_filter(pod, self.cluster)
            if isinstance(state, str):
                result = rejected(pod, self.cache.nodes(), volumebinding.FILTER_NAME, state)
                return self._unschedulable(key, pod, result.message, now)
            filters = filters + [volumebinding.volume_filter(state, self.cluster)]
        infos = self.cache.node_infos()
        num_to_find = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, len(infos))
        node = None
        if not claims and fastpath.is_plain(pod):
            node, examined = fastpath.schedule_plain(pod, infos, self.rng, num_to_find, self._next_start)
        if node is None:   # not plain, or fits nowhere: the framework decides, or words why not
            result = schedule(pod, self.cache.nodes(), self.cache.infos, self.rng, filters=filters,
                              scores=plugins.SCORES, num_to_find=num_to_find, start=self._next_start)
            node, examined = result.node, result.processed
            if node is None:
                return self._unschedulable(key, pod, result.message, now)
        self._next_start = (self._next_start + examined) % len(infos)
        self.cache.assume(key, pod, node)
        if claims:
            _, plan = volumebinding.find_pod_volumes(state, self.cache.infos[node].node, self.cluster)
            if plan:
                return self._bind_volumes(key, pod, plan)
        return self._bind(key, pod, node)

    def _unschedulable(self, key: str, pod: dict, message: str, now: float):
        self.queue.unschedulable(key, now)
        log.info("%s is unschedulable: %s", key, message)
        self.recorder.event(pod, "Warning", "FailedScheduling", message)
        patch = triage.unschedulable_patch(pod, message, format_time(time.time()))
        return None if patch is None else self._mark_unschedulable(key, patch)

    # -- writing --

    def _spawn(self, write, holds_slot: bool = True) -> None:
        """Run a write in a task of its own, which gives its slot back (if it holds one) when
        it ends."""
        task = asyncio.get_running_loop().create_task(write)
        self._writes.add(task)
        task.add_done_callback(self._write_done if holds_slot else self._writes.discard)

    def _write_done(self, task: asyncio.Task) -> None:
        self._writes.discard(task)
        self._slots.release()

    async def _bind(self, key: str, pod: dict, node: str) -> None:
        namespace, name = split_meta_namespace_key(key)
        try:
            await self.api.bind(name, node, namespace)
        except Exception as err:  # noqa: BLE001  (every failure is handled the same way)
            self._bind_failed(key, node, err)
            return
        log.debug("bound %s to %s", key, node)
        self.queue.delete(key)
        self.recorder.event(pod, "Normal", "Scheduled", f"Successfully assigned {key} to {node}")

    def _bind_failed(self, key: str, node: str, err: Exception) -> None:
        """Take the assumption back; retry after the backoff unless the informer shows the pod
        gone, bound or deleting (what a Conflict or NotFound usually means)."""
        if self.cache.forget(key):
            self._move_all()   # the room it held is free again
        current = self.pods.get(key)
        if isinstance(err, NotFound) or current is None or not triage.needs_scheduling(current):
            log.info("binding %s to %s: %s; dropping it", key, node, err)
            self.queue.delete(key)
            return
        level = logging.INFO if isinstance(err, Conflict) else logging.WARNING
        log.log(level, "binding %s to %s failed: %s; retrying after backoff", key, node, err)
        self.queue.requeue(key, asyncio.get_running_loop().time())
        self._wake.set()

    async def _bind_volumes(self, key: str, pod: dict, plan: volumebinding.Plan) -> None:
        """VolumeBinding's PreBind, first part (in a write slot): bind the matching volumes to
        their claims and give the claims to provision the node; then wait, slot-free."""
        try:
            for pv, pvc in plan.bindings:
                name = pv["metadata"]["name"]
                written = await self.api.patch("persistentvolumes", name, volumebinding.bind_volume_patch(pv, pvc))
                plan.written[("pv", name)] = written["metadata"].get("resourceVersion")
            for pvc in plan.provisions:
                meta = pvc["metadata"]
                written = await self.api.patch("persistentvolumeclaims", meta["name"],
                                               volumebinding.select_node_patch(pvc, plan.node), meta.get("namespace"))
                plan.written[("pvc", volumebinding.claim_key(pvc))] = written["metadata"].get("resourceVersion")
        except Exception as err:  # noqa: BLE001  (every failure sends the pod back to the queue)
            self._prebind_failed(key, pod, plan.node, str(err))
            return
        self._spawn(self._wait_for_volumes(key, pod, plan), holds_slot=False)

    async def _wait_for_volumes(self, key: str, pod: dict, plan: volumebinding.Plan) -> None:
        """PreBind, second part: every claim bound on the node (volumebinding.check_bindings),
        then the pod is bound (in a write slot); an error or the timeout requeues it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.volume_bind_timeout
        uid = pod["metadata"].get("uid")
        while True:
            changed = self._storage_changed
            current = self.pods.get(key)
            if current is None or current["metadata"].get("uid") != uid or not triage.needs_scheduling(current):
                self._bind_failed(key, plan.node, NotFound(f"pod {key} does not exist any more"))
                return
            info = self.cache.infos.get(plan.node)
            done = (volumebinding.check_bindings(info.node, plan, self.cluster)
                    if info is not None and info.node is not None else f'failed to get node "{plan.node}"')
            if done is True:
                break
            left = deadline - loop.time()
            if isinstance(done, str) or left <= 0:
                self._prebind_failed(key, pod, plan.node, done if isinstance(done, str)
                                     else "timed out waiting for the condition")
                return
            try:
                await asyncio.wait_for(changed.wait(), min(left, VOLUME_POLL))
            except asyncio.TimeoutError:
                pass
        async with self._slots:
            await self._bind(key, pod, plan.node)

    def _prebind_failed(self, key: str, pod: dict, node: str, why: str) -> None:
        message = f'running PreBind plugin "{volumebinding.FILTER_NAME}": binding volumes: {why}'
        self.recorder.event(pod, "Warning", "FailedScheduling", message)
        self._bind_failed(key, node, RuntimeError(message))

    async def _mark_unschedulable(self, key: str, patch: dict) -> None:
        namespace, name = split_meta_namespace_key(key)
        try:
            await self.api.patch("pods", name, patch, namespace, patch_type="strategic", subresource="status")
        except (Conflict, NotFound) as err:   # changed or gone since we looked: nothing to report
            log.debug("not marking %s unschedulable: %s", key, err)
        except Exception as err:  # noqa: BLE001  (the next failed attempt writes it again)
            log.info("marking %s unschedulable failed: %s", key, err)

    # -- informer handlers: bookkeeping only --

    def _move_all(self) -> None:
        self.queue.move_all(asyncio.get_running_loop().time())
        self._wake.set()   # pods became active, or backing off: either way the loop's deadline moved

    def _on_pod_add(self, pod: dict) -> None:
        key = meta_namespace_key(pod)
        if triage.is_bound(pod):
            self._on_bound_pod(key, pod)
        elif triage.needs_scheduling(pod) and self.queue.add(key, triage.priority(pod)):
            self._wake.set()

    def _on_pod_update(self, old: dict, new: dict) -> None:
        key = meta_namespace_key(new)
        if triage.is_bound(new):
            self._on_bound_pod(key, new)
        elif not triage.needs_scheduling(new):
            self.queue.delete(key)
        elif self.queue.add(key, triage.priority(new)):
            self._wake.set()
        elif triage.pod_changed(old, new):
            self.queue.update(key, asyncio.get_running_loop().time())
            self._wake.set()

    def _on_bound_pod(self, key: str, pod: dict) -> None:
        self.queue.delete(key)
        if self.cache.add_pod(key, pod):
            self._move_all()

    def _on_pod_delete(self, obj) -> None:
        key = meta_namespace_key(obj)
        self.queue.delete(key)
        if self.cache.remove_pod(key):
            self._move_all()

    def _on_node_add(self, node: dict) -> None:
        self.cache.set_node(node)
        self._move_all()

    def _on_node_update(self, old: dict, new: dict) -> None:
        self.cache.set_node(new)
        if triage.node_changed(old, new):
            self._move_all()

    def _on_storage_change(self, _obj) -> None:
        """A claim, volume or class added or changed: the VolumeBinding plugin may decide
        otherwise now, and a PreBind may be done."""
        self._storage_changed.set()
        self._storage_changed = asyncio.Event()
        self._move_all()

    def _on_storage_update(self, old: dict, new: dict) -> None:
        if old is not new:   # not a resync
            self._on_storage_change(new)

    def _on_node_delete(self, obj) -> None:
        self.cache.remove_node(meta_namespace_key(obj))   # a name; a DeletedFinalStateUnknown's key too
