"""The kubelet's shell: static pods from the manifest directory, run through the runtime.

One asyncio loop, woken only by what happens: the manifest directory changing (inotify,
plus the kubelet's periodic relist every --file-check-frequency), a container start or exit
(the runtime's inotify watch on the shims' files), a probe finishing, or the earliest
deadline of any pod worker (one loop timer). Each pod's decisions are its PodWorker's
(kubelet/podworker.py, pure); this file carries them out and writes what they say:
`<pod dir>/status.json` (the Pod with its status, for `kubemu ps`) and `<node dir>/events.jsonl`.
What may take long runs in threads, never on the loop: sandboxes, writing volumes' files,
removing a pod's cgroups (a pod goes only once they are gone), the stats' readings.

With --api (kubelet/apiagent.py) it also registers its Node, renews its Lease, mirrors its
static pods into the API, runs the pods bound to it and reports their status; static pods never
wait for the API (the apiserver is one of them), and API pods it adopted keep running until the
API has been heard from.

Pod networks (--network-mode cni): a pod that is not hostNetwork runs in a sandbox of its own
(kubelet/sandbox.py decides, kubelet/sandboxes.py makes it: holder, CNI, cgroups, off the loop
in a thread), once the node's network config is written: the kubelet writes it
(cni.kubemu_conflist) when it learns its Node's spec.podCIDR (or --pod-cidr). Until then the
node is NotReady with the runtime's message, as a real one without a CNI config. With
--network-mode host every pod shares the node's network, as before, and the node says why.
Pod cgroups (--cgroup-root) apply in both modes; the node's `kubepods` cgroup is limited to its
allocatable, and the Node reports what the kernel enforces.

Volumes, ConfigMaps and Secrets: before a pod's first container starts (after its sandbox is
ready) the kubelet sets up its volumes under the pod directory (kubelet/volumedirs.py; an API
pod first waits for the ConfigMaps and Secrets it reads to be known), a FailedMount Event for
each that fails; it sets them up again when one of those objects changes and at every relist,
so an edit reaches the volume's files. A container's environment is made as it starts
(kubelet/envvars.py, through the pod worker). On a node with pod sandboxes, containers get their
volume mounts and the kubelet's /etc/hosts and /etc/resolv.conf (--cluster-dns; and for a
sandboxed pod /etc/hostname, kubelet/etcfiles.py) mounted in a mount namespace of their own (the
runtime's `mounts`); on a node without, pods share the node's file system, and are told where
their volumes are in KUBEMU_MOUNT_<path> variables instead (volumedirs.mount_env).

A restarted kubelet adopts what it finds: containers keep running under their shims, sandboxes
under their holders (sandbox.json), and
each pod directory keeps the Pod it was started for (pod.json), so pods whose manifest has
gone are still stopped gracefully. A pod's status comes from what the runtime recorded
(start and end times, exit records, the start before the latest), never from what only this
kubelet saw, so a restarted kubelet reports the same status. A shim that dies is heard at
once (kubelet/shimwatch.py).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass, replace

from kubemu._wire_auth import CurveCredentials
from kubemu.api.pod import claim_names
from kubemu.api.quantity import cpu_millis, format_memory, memory_bytes
from kubemu import netplan
from kubemu.api.times import format_micro_time, format_time, parse_micro_time
from kubemu.sdnotify import notify, watchdog_interval

from . import cni, envvars, etcfiles, images, manifests, volumedirs, volumes
from .cnishell import CONF_FILE, CNI
from .configsource import Unavailable, references
from .holder import pod_hostname
from .nodestatus import NETWORK_NOT_READY, NODE_IP, NodeConfig, NodeNetwork
from .podcgroups import CgroupError, PodCgroups
from .podworker import (SANDBOX_CHANGED, KillContainer, PodWorker, RecordEvent, RunProbe, Settings,
                        SetUpVolumes, StartContainer)
from .prober import run_probe
from .runtime import ContainerSpec, Runtime
from .sandbox import CreateSandbox, RemoveSandbox, needs_sandbox
from .sandboxes import HolderWatch, Record, SandboxFailed, Sandboxes, read_record
from .shim import read_json, write_json
from .shimwatch import ShimWatch
from .stats import Stats

log = logging.getLogger("kubelet")

SOURCE_API = "api"  # kubernetes.io/config.source of the pods the API binds to us
POD_FILE = "pod.json"
SANDBOX_THREADS = 4  # sandboxes made or removed at once (each a holder start and CNI plugin runs)
LOOP_CALL_TIMEOUT = 10.0  # seconds the volume thread waits for the loop to look an object up
STATUS_FILE = "status.json"
# How long a pod waits for the ConfigMaps and Secrets it reads before its volumes are set up
# anyway (and fail): the kubelet's WaitForAttachAndMount timeout, time-scaled.
OBJECTS_WAIT = 120.0
NODE_RESOLV_CONF, NODE_HOSTS = "/etc/resolv.conf", "/etc/hosts"
# The kubelet's files a sandboxed pod's containers see: container path -> the file in the pod dir.
ETC_FILES = {"/etc/hosts": etcfiles.HOSTS, "/etc/hostname": etcfiles.HOSTNAME,
             "/etc/resolv.conf": etcfiles.RESOLV_CONF}


class SandboxNotReady(Exception):
    """A container of a sandboxed pod was to start with no running sandbox of that attempt."""


class NodeFileError(Exception):
    """A node file a pod's /etc files are made from cannot be read; one line."""


def pod_dir_name(pod: dict) -> str:
    meta = pod["metadata"]
    return f"{meta['namespace']}_{meta['name']}_{meta['uid']}"


def full_name(pod: dict) -> tuple[str, str]:
    return pod["metadata"]["namespace"], pod["metadata"]["name"]


@dataclass
class Options:
    node: str
    node_dir: str
    manifests_dir: str
    file_check_frequency: float = 20.0
    settings: Settings = Settings()
    api: str | None = None                 # the apiserver's endpoint; None: static pods only
    api_credentials: tuple[str, str] | CurveCredentials | None = None  # --wire-credentials, --wire-curve-dir
    node_config: NodeConfig | None = None  # what the Node reports (with --api)
    lease_duration: int = 40
    renew_interval: float = 10.0
    status_interval: float = 300.0
    image_catalog: str | None = None       # the catalog file (kubelet/images.py); None: defaults only
    listen: str | None = None              # the streaming server's endpoint (exec, attach); None: none
    wire_secrets: str | None = None        # who may use it: the apiserver's secret is checked here
    network: NetworkOptions | None = None  # pod networks (CNI); None: pods share the node's network
    host_network_reason: str | None = None  # why pods share the node's network (shown on the Node)
    cgroup_root: str | None = None         # the node cgroup, relative to each hierarchy; None: no pod cgroups
    pod_pids_limit: int | None = None      # each pod cgroup's pids.max (--pod-max-pids); None: unlimited
    cluster_dns: tuple[str, ...] = ()      # the pods' nameservers under ClusterFirst (--cluster-dns)
    cluster_domain: str = etcfiles.CLUSTER_DOMAIN  # their search path's base ("": the node's only)


@dataclass(frozen=True)
class NetworkOptions:
    """--network-mode cni: where the CNI config and plugins are, the fabric the plugins run in."""
    conf_dir: str
    bin_dirs: tuple[str, ...]
    fabric_netns: str | None
    cluster_cidr: str
    pod_cidr: str | None = None  # --pod-cidr (standalone); else the Node's spec.podCIDR
    service_cidr: str | None = None  # routed through the bridge's gateway, where kube-proxy's rules are


class Kubelet:
    def __init__(self, opts: Options):
        self.opts = opts
        self.runtime = Runtime(opts.node_dir)
        self.workers: dict[str, PodWorker] = {}  # pod dir -> worker
        self.launched: dict[tuple[str, str], int] = {}  # (pod dir, container) -> restart count we expect
        self.static: dict[str, dict] = {}  # pod dir -> Pod, from the manifests
        self.api_pods: dict[str, dict] = {}  # pod dir -> Pod, bound to this node in the API
        self.api = None  # the ApiAgent, with --api
        self.bad_manifests: dict[str, str] = {}  # path -> the error already reported
        self.dirty: set[str] = set()
        self.events_path = os.path.join(opts.node_dir, "events.jsonl")
        self._catalog: tuple[tuple | None, images.Catalog] | None = None  # (file's identity, catalog)
        self.wall_offset = time.time() - time.monotonic()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.shims: ShimWatch | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self._stop = asyncio.Event()
        self.streaming = None  # the StreamingServer, with --listen
        self.cgroups = None  # PodCgroups, with --cgroup-root
        self.sandboxes = None  # Sandboxes, with --network-mode cni
        self.holders = None  # HolderWatch, with --network-mode cni
        self.sandbox_records: dict[str, Record] = {}  # pod dir -> its ready sandbox's
        self.network_ready = opts.network is None
        self.mount_errors: dict[str, list[str]] = {}  # pod dir -> its volumes' failures, as last said
        # pod dir -> claim -> the volume it was mounted from: a mounted claim is not looked up
        # again at each remount (the volume manager's rule), so an apiserver away costs it nothing
        self.claimed: dict[str, dict[str, volumes.ClaimedVolume]] = {}
        self._removing: set[str] = set()  # pod dirs whose cgroups are being removed
        self._said_no_mounts = False
        self.node_config = opts.node_config
        self._pod_cidr: str | None = None  # the one the network config was written for
        self._pod_cidr_failed: str | None = None  # one it could not be written for
        if opts.cgroup_root:
            self.cgroups = PodCgroups(opts.cgroup_root, opts.pod_pids_limit)
            if not self.cgroups.available:
                log.warning("pod cgroups: %s", self.cgroups.why_not)
            elif opts.node_config is not None:
                self._enforce_allocatable(opts.node_config)
        self.stats = Stats(opts.node, self.runtime, self.cgroups)
        # one thread: a pod's volumes are never written by two at once, and a relist's rewrite
        # of every pod's files stays off the loop
        self._volume_pool = concurrent.futures.ThreadPoolExecutor(1, "volumes")
        if opts.network is not None:
            self.sandboxes = Sandboxes(CNI(opts.network.conf_dir, list(opts.network.bin_dirs),
                                           opts.network.fabric_netns), self.cgroups)
            # their own threads: a slow plugin must not hold up the probes' (the default pool)
            self._sandbox_pool = concurrent.futures.ThreadPoolExecutor(SANDBOX_THREADS, "sandbox")
            # written by this node's kubelet before: the runtime has its config (a restart)
            self.network_ready = os.path.exists(os.path.join(opts.network.conf_dir, CONF_FILE))

    def _enforce_allocatable(self, config: NodeConfig) -> None:
        """Limit the node's pods to its allocatable; the Node shows the memory the kernel
        enforces (it rounds to pages)."""
        try:
            enforced = self.cgroups.enforce_allocatable(memory_bytes(config.memory), cpu_millis(config.cpu))
        except CgroupError as exc:
            log.warning("node allocatable not enforced: %s", exc)
            return
        if enforced is not None:
            self.node_config = replace(config, allocatable={"memory": format_memory(enforced)})

    @property
    def allocatable(self) -> dict | None:
        """The node's allocatable, as the downward API reads it for a limit a container lacks."""
        config = self.node_config
        return None if config is None else {"cpu": config.cpu, "memory": config.memory, **config.allocatable}

    def now(self) -> float:
        return self.loop.time()

    @property
    def desired(self) -> dict[str, dict]:
        return {**self.api_pods, **self.static}

    # -- life cycle ---------------------------------------------------------------------

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._stop.set)
        self.shims = ShimWatch(self.runtime, self.loop, self._after_event)
        if self.sandboxes is not None:
            self.holders = HolderWatch(self.loop, self._holder_died)
            if self.opts.network.pod_cidr:
                self._configure_network(self.opts.network.pod_cidr)
        if self.opts.host_network_reason:
            log.warning("pods share the host's network: %s", self.opts.host_network_reason)
        self._adopt()
        self._spawn(self._watch_containers())
        self.sync_manifests()
        notify(f"READY=1\nSTATUS=running {len(self.static)} static pod(s)")
        log.info("kubelet for %s ready: %d static pod(s), %d adopted", self.opts.node, len(self.static),
                 len(self.workers))
        self._spawn(self._watch_manifests())
        self._spawn(self._relist_periodically())
        if self.stats.collecting:
            self._spawn(self.stats.run())
        if self.opts.api:
            self._start_api_agent()
        if self.opts.listen:
            await self._start_streaming()
        if (interval := watchdog_interval()) is not None:
            self._spawn(self._watchdog(interval))
        await self._stop.wait()
        # A kubelet that stops leaves its pods running, as the real one does: init's stop of
        # kubelet.service must not take the control plane down with it.
        notify("STOPPING=1")
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.streaming is not None:
            await self.streaming.close()
        self.shims.close()
        self._volume_pool.shutdown(wait=False, cancel_futures=True)
        if self.holders is not None:
            self.holders.close()
            self._sandbox_pool.shutdown(wait=False, cancel_futures=True)
        log.info("kubelet stopped; %d pod(s) left running under their shims", len(self.workers))

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("kubelet task failed", exc_info=task.exception())
            self._stop.set()  # let init restart us rather than limp on

    async def _watchdog(self, interval: float) -> None:
        while True:  # pings stop by themselves if the loop is stuck: that is the point
            notify("WATCHDOG=1")
            await asyncio.sleep(interval)

    def _start_api_agent(self) -> None:
        from .apiagent import ApiAgent  # after READY=1: the wire is not in the start-up path

        self.api = ApiAgent(self.opts.api, self.node_config or NodeConfig(self.opts.node, "1", "1Gi"),
                            self.set_api_pods, credentials=self.opts.api_credentials,
                            lease_duration=self.opts.lease_duration,
                            renew_interval=self.opts.renew_interval, status_interval=self.opts.status_interval,
                            network=self.node_network, on_objects=self._objects_changed)
        self.api.set_static_pods(list(self.static.values()))
        for pod_dir, worker in self.workers.items():
            self.dirty.add(pod_dir)
        self._spawn(self.api.run())
        self._after_event()

    async def _start_streaming(self) -> None:
        from .streaming import StreamingServer  # after READY=1, as the API agent

        import zmq

        try:
            streaming = StreamingServer(self.runtime, self.opts.listen, self.opts.wire_secrets,
                                        stats=self.stats.summary)
            await streaming.start()
        except (OSError, ValueError, zmq.ZMQError) as exc:  # the pods run on; exec and attach are not served
            log.error("cannot serve exec/attach on %s: %s", self.opts.listen, exc)
            return
        self.streaming = streaming

    def set_api_pods(self, pods: list[dict]) -> None:
        """The pods bound to this node, as the API has them now (level-based)."""
        api_pods = {}
        for pod in pods:
            pod_dir = os.path.join(self.runtime.pods_dir, pod_dir_name(pod))
            terminal = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            if pod_dir in self.workers or not (terminal or pod["metadata"].get("deletionTimestamp")):
                api_pods[pod_dir] = pod
            elif pod["metadata"].get("deletionTimestamp"):
                self.api.pod_terminated(pod)  # nothing of it runs here: let it go
        self.api_pods = api_pods
        self._reconcile()

    # -- the node's pod network -------------------------------------------------------------

    def node_network(self, node: dict | None) -> NodeNetwork:
        """What the Node says of the pod network (the heartbeat asks, with the Node as the API
        has it): its spec.podCIDR is what the network config is written for."""
        pod_cidr = ((node or {}).get("spec") or {}).get("podCIDR")
        if self.sandboxes is not None and pod_cidr and not self.opts.network.pod_cidr:
            self._configure_network(pod_cidr)
        return NodeNetwork(ready=self.network_ready, host_reason=self.opts.host_network_reason)

    def _configure_network(self, pod_cidr: str) -> None:
        """Write the node's network config for its podCIDR (kubenet's role, CNI's bridge and
        host-local with the state under the node directory); the network is ready then."""
        if pod_cidr in (self._pod_cidr, self._pod_cidr_failed):
            return
        net = self.opts.network
        try:
            conflist = cni.kubemu_conflist(pod_cidr, net.cluster_cidr,
                                           os.path.join(self.opts.node_dir, "cni", "networks"),
                                           netplan.bridge_name(pod_cidr, net.cluster_cidr),
                                           service_cidr=net.service_cidr)
            self.sandboxes.cni.write_conflist(conflist)
        except (ValueError, OSError) as exc:
            log.error("cannot write the network config for podCIDR %s: %s", pod_cidr,
                      getattr(exc, "strerror", None) or exc)
            self._pod_cidr_failed = pod_cidr  # said once; a disk error is retried at a restart
            return
        self._pod_cidr = pod_cidr
        log.info("pod network ready: podCIDR %s, config in %s", pod_cidr, net.conf_dir)
        if not self.network_ready:
            self.network_ready = True
            now = self.now()
            for pod_dir, worker in list(self.workers.items()):
                if worker.sandbox is not None:
                    self._execute(pod_dir, worker.set_network(True, "", now))
            self._after_event()

    # -- adoption -----------------------------------------------------------------------

    def _adopt(self) -> None:
        now = self.now()
        for pod_dir in self.runtime.list_pod_dirs():
            pod = read_json(os.path.join(pod_dir, POD_FILE))
            if pod is None:
                log.warning("%s: no %s, cannot adopt; leaving it alone", pod_dir, POD_FILE)
                continue
            for name in self.runtime.list_containers(pod_dir):
                for n in self.runtime.restart_counts(pod_dir, name):
                    if self.runtime.record_lost(pod_dir, name, n):
                        log.warning("%s: container %s#%d: its shim died while the kubelet was away",
                                    os.path.basename(pod_dir), name, n)
            found = {name: self._on_our_clock(record) for name, record in self.runtime.found(pod_dir).items()}
            sandboxed = self.sandboxes is not None and needs_sandbox(pod, True)
            record = None
            if sandboxed:
                record = read_record(pod_dir)
            worker = PodWorker.adopt(pod, self.opts.settings, now, found, start_time=self._ours(_seen(pod)),
                                     wall_offset=self.wall_offset,
                                     images=self.resolve_image, sandboxed=sandboxed,
                                     sandbox=None if record is None else (record.attempt, list(record.ips)),
                                     env=self._env, volumes=True)
            self.workers[pod_dir] = worker
            if sandboxed:
                self._adopt_sandbox(pod_dir, worker, record, now)
            if pod["metadata"].get("annotations", {}).get(manifests.CONFIG_SOURCE) == SOURCE_API:
                self.api_pods[pod_dir] = pod  # until the API says otherwise
            for name, record in found.items():
                self.launched[(pod_dir, name)] = record["restart_count"]
            self.dirty.add(pod_dir)

    def _adopt_sandbox(self, pod_dir: str, worker: PodWorker, record, now: float) -> None:
        """A finished sandbox whose holder lives is the pod's (same IP, no ADD); any other the
        pod had is a sandbox that changed."""
        alive = record is not None and record.complete and self.sandboxes.alive(record)
        if alive:
            self.sandbox_records[pod_dir] = record
            self.holders.watch(pod_dir, record)
            self._spawn(self._check_sandbox(pod_dir, worker, record))
        elif worker.sandbox.ready:
            log.warning("pod %s/%s: its sandbox is gone (holder %s): re-creating it", worker.namespace,
                        worker.name, None if record is None else record.pid)
        self._execute(pod_dir, worker.sandbox_found(alive, self.network_ready, NETWORK_NOT_READY, now))

    async def _check_sandbox(self, pod_dir: str, worker: PodWorker, record: Record) -> None:
        """CNI CHECK of an adopted sandbox, as the kubelet checks the pods it finds: one whose
        network its plugins find not as ADD left it is a sandbox that changed."""
        try:
            await self.loop.run_in_executor(self._sandbox_pool, self.sandboxes.check, pod_dir, record)
        except SandboxFailed as exc:
            if self.workers.get(pod_dir) is not worker or self.sandbox_records.get(pod_dir) is not record:
                return  # the pod or its sandbox was replaced meanwhile
            log.warning("pod %s/%s: %s: %s", worker.namespace, worker.name, exc, SANDBOX_CHANGED)
            self._execute(pod_dir, worker.sandbox_died(record.attempt, self.now()))
            self._after_event()

    def _on_our_clock(self, record: dict) -> dict:
        """The shims record wall-clock times; the pod workers run on the monotonic clock."""
        for key in ("started_at", "finished_at"):
            record[key] = self._ours(record.get(key))
        if record.get("previous") is not None:
            self._on_our_clock(record["previous"])
        return record

    def _ours(self, wall: float | None) -> float | None:
        return None if wall is None else wall - self.wall_offset

    # -- the manifest source ----------------------------------------------------------------

    async def _watch_manifests(self) -> None:
        """Any change in the manifest directory (not below it) relists it: sync_manifests is
        level-based, so what changed, and a lost event ("rescan"), do not matter. A watch
        ends when the directory is deleted: it is made again and watched anew."""
        from kubemu.dirwatch import DirWatch  # after READY=1: not in the kubelet's start-up path

        while True:
            async with DirWatch(self.opts.manifests_dir, create=True) as changes:
                self.sync_manifests()  # the watch is in place: catch what changed before it
                async for _batch in changes:
                    self.sync_manifests()

    async def _relist_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.opts.file_check_frequency)
            self.sync_manifests()
            await self._refresh_volumes(list(self.workers))

    def sync_manifests(self) -> None:
        """Level-based: the set of valid manifests is the set of static pods."""
        desired: dict[str, dict] = {}
        seen_errors: dict[str, str] = {}
        for path in manifests.list_manifest_files(self.opts.manifests_dir):
            m = manifests.load_manifest(self.opts.node, path)
            if not m.ok:
                seen_errors[path] = m.error
                if self.bad_manifests.get(path) != m.error:  # one message per bad file, not per relist
                    log.error("%s", m.error)
                    self._event(None, "FailedToLoadManifest", m.error, "Warning")
                continue
            desired[os.path.join(self.runtime.pods_dir, pod_dir_name(m.pod))] = m.pod
        self.bad_manifests = seen_errors
        if desired.keys() != self.static.keys() and self.api is not None:
            self.api.set_static_pods(list(desired.values()))
        self.static = desired
        self._reconcile()

    def _reconcile(self) -> None:
        now = self.now()
        desired = self.desired
        for pod_dir, worker in list(self.workers.items()):
            pod = desired.get(pod_dir)
            if pod is None and not worker.stopping:
                log.info("pod %s/%s is no longer desired: stopping it", worker.namespace, worker.name)
                self._execute(pod_dir, worker.stop(now))
            elif pod is not None and pod["metadata"].get("deletionTimestamp"):
                grace = pod["metadata"].get("deletionGracePeriodSeconds")
                if not worker.stopping:
                    log.info("pod %s/%s is being deleted: stopping it (grace %ss)", worker.namespace,
                             worker.name, grace)
                self._execute(pod_dir, worker.stop(now, grace))  # again: a shorter grace shortens it
        running_names = {full_name(w.pod): d for d, w in self.workers.items()}
        for pod_dir, pod in desired.items():
            if pod_dir in self.workers or pod["metadata"].get("deletionTimestamp"):
                continue
            # A changed manifest is a new pod (new uid) with the same name: like the kubelet,
            # start it only once its predecessor has terminated.
            if full_name(pod) in running_names:
                continue
            source = {} if pod_dir in self.static else {manifests.CONFIG_SOURCE: SOURCE_API}
            pod = dict(pod, metadata=dict(pod["metadata"], annotations={
                **(pod["metadata"].get("annotations") or {}), **source,
                manifests.CONFIG_SEEN: format_micro_time(now + self.wall_offset)}))  # its startTime too
            pod.pop("status", None)
            os.makedirs(pod_dir, exist_ok=True)
            write_json(os.path.join(pod_dir, POD_FILE), pod)
            worker = PodWorker(pod, self.opts.settings, now, wall_offset=self.wall_offset, images=self.resolve_image,
                               sandboxed=self.sandboxes is not None and needs_sandbox(pod, True),
                               env=self._env, volumes=True)
            self.workers[pod_dir] = worker
            log.info("pod %s/%s: started syncing (uid %s)", worker.namespace, worker.name, worker.uid)
            if worker.sandbox is not None and not self.network_ready:
                self._execute(pod_dir, worker.set_network(False, NETWORK_NOT_READY, now))
            else:
                self._execute(pod_dir, worker.sync(now))
        self._after_event()

    # -- carrying out the pod workers' decisions --------------------------------------------

    def _execute(self, pod_dir: str, actions: list) -> None:
        worker = self.workers[pod_dir]
        self.dirty.add(pod_dir)
        for action in actions:
            if isinstance(action, StartContainer):
                self._start_container(pod_dir, worker, action)
            elif isinstance(action, KillContainer):
                self.runtime.stop(pod_dir, action.container, action.grace, action.termination_message)
                log.info("pod %s/%s: %s", worker.namespace, worker.name, action.reason)
            elif isinstance(action, RunProbe):
                self._spawn(self._probe(pod_dir, worker, action))
            elif isinstance(action, RecordEvent):
                self._event(worker, action.reason, action.message, action.type, action.container)
            elif isinstance(action, CreateSandbox):
                self._spawn(self._create_sandbox(pod_dir, worker, action))
            elif isinstance(action, RemoveSandbox):
                self._spawn(self._remove_sandbox(pod_dir, worker, action))
            elif isinstance(action, SetUpVolumes):
                self._spawn(self._set_up_volumes(pod_dir, worker, action))

    # -- ConfigMaps, Secrets, volumes ---------------------------------------------------------

    def _lookup(self, resource: str, namespace: str, name: str) -> dict | None:
        """configsource.Lookup over the API agent's cache; a node without --api has no objects."""
        if self.api is not None:
            return self.api.lookup(resource, namespace, name)
        if self.opts.api:
            raise Unavailable("the kubelet has not reached the API yet")
        return None

    def _token(self, *args) -> str:
        if self.api is None:
            raise Unavailable("the kubelet has not reached the API yet")
        return self.api.token(*args)

    def _env(self, pod: dict, spec: dict, pod_ips: tuple[str, ...]) -> envvars.Env | envvars.EnvError:
        """The pod worker's env resolver."""
        services = envvars.service_env(pod, self._services(), manifests.is_static(pod))
        if isinstance(services, envvars.EnvError):
            return services
        return envvars.container_env(pod, spec, self._lookup, list(pod_ips), [NODE_IP], self.allocatable, services)

    def _services(self) -> list[dict] | None:
        """Every Service, from the API agent's informer; None until they are listed. A node
        without --api has none (the kubelet without a master sets no service variables)."""
        if self.api is not None:
            return self.api.service_list()
        return None if self.opts.api else []

    async def _volume_errors(self, pod_dir: str, worker: PodWorker) -> list[str]:
        """Set the pod's volumes up (again), off the loop: the FailedMount messages of those
        that failed. One pod's at a time (the volume thread), so no two writers meet."""
        claims = await self._claims(pod_dir, worker.pod)
        errors = await self.loop.run_in_executor(self._volume_pool, functools.partial(
            volumedirs.set_up, pod_dir, worker.pod, self._on_loop(self._lookup), list(worker.pod_ips()), [NODE_IP],
            self.allocatable, self._on_loop(self._token) if self.opts.api else None, claims))
        return [volumes.failed_mount(name, err) for name, err in errors.items()]

    async def _claims(self, pod_dir: str, pod: dict) -> dict:
        """Claim name -> volumes.ClaimedVolume or VolumeError, for each claim the pod mounts."""
        namespace = (pod.get("metadata") or {}).get("namespace") or "default"
        mounted = self.claimed.setdefault(pod_dir, {})
        out = {}
        for claim in claim_names(pod):
            if claim in mounted:
                out[claim] = mounted[claim]
            elif self.api is None:
                out[claim] = volumes.VolumeError("the kubelet has not reached the API yet" if self.opts.api
                                                 else "a node without an API has no PersistentVolumeClaims")
            elif claim not in out:
                out[claim] = await self.api.claimed_volume(namespace, claim)
                if isinstance(out[claim], volumes.ClaimedVolume):
                    mounted[claim] = out[claim]
        return out

    def _on_loop(self, fn):
        """`fn` for the volume thread: called on the loop, where the API's caches live (a token
        request starts a task there). Unavailable if the loop does not answer."""
        async def call(args):
            return fn(*args)

        def on_loop(*args):
            try:
                return asyncio.run_coroutine_threadsafe(call(args), self.loop).result(LOOP_CALL_TIMEOUT)
            except (RuntimeError, concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                raise Unavailable("the kubelet is busy or stopping") from None
        return on_loop

    async def _set_up_volumes(self, pod_dir: str, worker: PodWorker, action: SetUpVolumes) -> None:
        if self.api is not None and not self.api.objects_synced(worker.pod):
            await self.api.wait_for_objects(worker.pod, self.opts.settings.scaled(OBJECTS_WAIT))
        if self.workers.get(pod_dir) is not worker:
            return
        errors = await self._volume_errors(pod_dir, worker)
        if self.workers.get(pod_dir) is not worker:
            return
        self.mount_errors[pod_dir] = errors
        self._execute(pod_dir, worker.volumes_set_up(action.attempt, errors, self.now()))
        self._after_event()

    def _objects_changed(self, refs: set) -> None:
        """ConfigMaps or Secrets changed (none named: a token came): the volumes of the pods
        that read them are set up again. Running containers' environments never change."""
        pod_dirs = [d for d, w in self.workers.items() if not refs or references(w.pod) & refs]
        self._spawn(self._refresh_volumes(pod_dirs))

    async def _refresh_volumes(self, pod_dirs: list[str]) -> None:
        """The kubelet's remount at each pod sync: the atomic writer rewrites what changed; a
        volume that fails now is a FailedMount Event once, while its failure stays the same."""
        for pod_dir in pod_dirs:
            worker = self.workers.get(pod_dir)
            if worker is None or worker.stopping or not worker.volumes_ready:
                continue
            if worker.sandbox is not None and not worker.sandbox.ready:
                continue  # its IPs are being replaced: the downward API would read none
            errors = await self._volume_errors(pod_dir, worker)
            if self.workers.get(pod_dir) is not worker:
                continue
            for message in errors:
                if message not in self.mount_errors.get(pod_dir, []):
                    self._event(worker, volumes.FAILED_MOUNT, message, "Warning")
            self.mount_errors[pod_dir] = errors

    # -- sandboxes (kubelet/sandboxes.py, in a thread) ------------------------------------------

    async def _create_sandbox(self, pod_dir: str, worker: PodWorker, action: CreateSandbox) -> None:
        try:
            record = await self.loop.run_in_executor(self._sandbox_pool, self.sandboxes.create, pod_dir, worker.pod,
                                                     action)
        except SandboxFailed as exc:
            log.warning("pod %s/%s: %s", worker.namespace, worker.name, exc)
            self._execute(pod_dir, worker.sandbox_create_failed(action.attempt, str(exc), self.now()))
            self._after_event()
            return
        log.info("pod %s/%s: sandbox %s ready, holder %d, IPs %s", worker.namespace, worker.name, record.id,
                 record.pid, ",".join(record.ips) or "none")
        self.sandbox_records[pod_dir] = record
        self.holders.watch(pod_dir, record)
        self._execute(pod_dir, worker.sandbox_created(action.attempt, list(record.ips), self.now()))
        self._after_event()

    async def _remove_sandbox(self, pod_dir: str, worker: PodWorker, action: RemoveSandbox) -> None:
        self.holders.forget(pod_dir)  # its death from here on is ours
        try:
            await self.loop.run_in_executor(self._sandbox_pool, self.sandboxes.remove, pod_dir, worker.pod)
        except SandboxFailed as exc:
            log.warning("pod %s/%s: %s", worker.namespace, worker.name, exc)
            self._execute(pod_dir, worker.sandbox_remove_failed(action.attempt, str(exc), self.now()))
            self._after_event()
            return
        self.sandbox_records.pop(pod_dir, None)
        self._execute(pod_dir, worker.sandbox_removed(action.attempt, self.now()))
        self._after_event()

    def _holder_died(self, pod_dir: str, attempt: int) -> None:
        worker = self.workers.get(pod_dir)
        if worker is None or worker.sandbox is None:
            return
        log.warning("pod %s/%s: its sandbox holder died: %s", worker.namespace, worker.name, SANDBOX_CHANGED)
        self._execute(pod_dir, worker.sandbox_died(attempt, self.now()))
        self._after_event()

    def _start_container(self, pod_dir: str, worker: PodWorker, action: StartContainer) -> None:
        spec = _container_spec(worker.pod, action.container)
        self.launched[(pod_dir, action.container)] = action.restart_count
        env = {**_base_env(worker.pod, self.opts.node), **dict(action.env)}
        try:
            placement = self._placement(pod_dir, worker, action.container, _memory_limit(spec))
            mounts = self._mounts(pod_dir, worker, spec, env)
            self.runtime.start(ContainerSpec(
                pod_dir=pod_dir, name=action.container, restart_count=action.restart_count,
                argv=list(action.argv), env=env, cwd=spec.get("workingDir") or None,
                grace=self.opts.settings.scaled(worker.grace_seconds),
                stdin=spec.get("stdin") is True, stdin_once=spec.get("stdinOnce") is True, tty=spec.get("tty") is True,
                mounts=mounts, **placement),
                on_shim=functools.partial(self._shim_launched, pod_dir, action.container, action.restart_count))
        except OSError as exc:
            self._execute(pod_dir, worker.container_start_failed(
                action.container, "CreateContainerError", f"failed to start shim: {exc}", self.now()))
        except CgroupError as exc:
            self._execute(pod_dir, worker.container_start_failed(
                action.container, "CreateContainerError", f"failed to create container cgroup: {exc}", self.now()))
        except (SandboxNotReady, NodeFileError) as exc:
            self._execute(pod_dir, worker.container_start_failed(action.container, "CreateContainerError", str(exc),
                                                                 self.now()))

    def _mounts(self, pod_dir: str, worker: PodWorker, spec: dict, env: dict[str, str]) -> list[dict]:
        """What the runtime mounts in the container, in a mount namespace of the container's
        own: its volume mounts and the kubelet's /etc files, written now (a sandboxed pod's
        IPs are its sandbox's; a hostNetwork pod's /etc/hosts is the node's). On a node that
        cannot make mount namespaces (--network-mode host: no privileges, or asked so) pods
        share the node's file system: their volumes stay where they are, and `env` gets their
        paths (volumedirs.mount_env). Raises OSError, NodeFileError."""
        bound = volumedirs.mounts(pod_dir, worker.pod, spec)
        if self.sandboxes is None:
            if bound and not self._said_no_mounts:
                self._said_no_mounts = True
                log.warning("volumes are not mounted in containers: pods share the node's mount namespace "
                            "(no pod sandboxes on this node); each volume's path is in "
                            "KUBEMU_MOUNT_<mountPath> instead")
            env.update(volumedirs.mount_env(bound))
            return []
        pod = worker.pod
        resolv = etcfiles.resolv_conf(pod, _read(NODE_RESOLV_CONF), list(self.opts.cluster_dns),
                                      self.opts.cluster_domain)
        if etcfiles.write(pod_dir, etcfiles.RESOLV_CONF, resolv.text):
            for reason, message in resolv.warnings:  # once per pod, not at every container start
                self._event(worker, reason, message, "Warning")
        if worker.sandbox is None:  # hostNetwork: the node's hosts file, with the pod's aliases
            etcfiles.write(pod_dir, etcfiles.HOSTS, etcfiles.hosts(pod, [], _read(NODE_HOSTS)))
            return volumedirs.runtime_mounts(bound, {
                "/etc/hosts": os.path.join(pod_dir, etcfiles.HOSTS),
                "/etc/resolv.conf": os.path.join(pod_dir, etcfiles.RESOLV_CONF)})
        etcfiles.write(pod_dir, etcfiles.HOSTS, etcfiles.hosts(pod, list(worker.pod_ips()),
                                                               cluster_domain=self.opts.cluster_domain))
        etcfiles.write(pod_dir, etcfiles.HOSTNAME, etcfiles.hostname(pod))
        return volumedirs.runtime_mounts(bound, {target: os.path.join(pod_dir, name)
                                                 for target, name in ETC_FILES.items()})

    def _placement(self, pod_dir: str, worker: PodWorker, name: str, memory_limit: int | None) -> dict:
        """Where the container runs: its sandbox's namespaces and its own cgroup (the kernel
        then enforces the memory limit, and the shim's RSS watch is off); none of them when
        the node has none, and the memory limit is watched. Raises CgroupError, or
        SandboxNotReady when the pod's sandbox is not the one the kubelet has running."""
        placement: dict = {"memory_limit": memory_limit}
        if worker.sandbox is not None:
            record = self.sandbox_records.get(pod_dir)
            if record is None or record.attempt != worker.sandbox.attempt:  # never the host's network instead
                raise SandboxNotReady(f'pod sandbox "{worker.sandbox.id}" is not ready')
            placement["sandbox"] = {"pid": record.pid, "start": record.start}
        if self.cgroups is not None and self.cgroups.holds_pods:
            cgroup = self.cgroups.container(worker.pod, name)
            placement["cgroups"] = cgroup.procs
            if cgroup.oom_counter is not None:
                placement["oom_counter"], placement["memory_limit"] = cgroup.oom_counter, None
        return placement

    def _shim_launched(self, pod_dir: str, name: str, restart_count: int, shim_pid: int | None) -> None:
        """Runtime.start's report, from its launcher thread, handed to the loop."""
        try:
            self.loop.call_soon_threadsafe(self.shims.launched, pod_dir, name, restart_count, shim_pid)
        except RuntimeError:
            pass  # the loop is closed: we are exiting, and the next kubelet finds the shim in its files

    def resolve_image(self, container: dict) -> images.Run | images.PullError:
        """What a container runs, from the image catalog as its file reads now: an edit to
        the file counts from the next start (or pull retry), with no kubelet restart."""
        return images.resolve(container, self._image_catalog())

    def _image_catalog(self) -> images.Catalog:
        path = self.opts.image_catalog
        if path is None:
            return images.defaults_only(sys.executable)
        try:
            st = os.stat(path)
            identity = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            identity = None
        except OSError as exc:
            identity = ("error", exc.strerror)
        if self._catalog is None or self._catalog[0] != identity:
            try:
                with open(path, encoding="utf-8") as f:
                    catalog = images.load(f.read(), path, python=sys.executable)
            except FileNotFoundError:
                catalog = images.load(None, path, python=sys.executable)
            except (OSError, UnicodeDecodeError) as exc:
                catalog = images.unreadable(path, getattr(exc, "strerror", None) or str(exc), python=sys.executable)
            if catalog.error:
                log.error("image catalog: %s", catalog.error)
            self._catalog = (identity, catalog)
        return self._catalog[1]

    async def _probe(self, pod_dir: str, worker: PodWorker, action: RunProbe) -> None:
        spec = _container_spec(worker.pod, action.container)
        restart_count = self.launched.get((pod_dir, action.container))
        ips = worker.pod_ips()
        ok, message = await run_probe(action.probe, spec, action.timeout, host=ips[0] if ips else "127.0.0.1",
                                      exec_target=functools.partial(self._exec_target, worker, action.container))
        if self.workers.get(pod_dir) is not worker or self.launched.get((pod_dir, action.container)) != restart_count:
            return  # the result is about a container instance that is gone
        self._execute(pod_dir, worker.probe_result(action.container, action.kind, ok, message, self.now()))
        self._after_event()

    def _exec_target(self, worker: PodWorker, container: str):
        """The running container an exec probe runs in, found as `kubectl exec` finds it."""
        from .streaming import find_target  # the wire's imports: not in the kubelet's start-up path

        return find_target(self.runtime, worker.namespace, worker.name, worker.uid, container)

    # -- container starts and exits (the runtime's watch) ---------------------------------------

    async def _watch_containers(self) -> None:
        async for pod_dir, name, restart_count, what in self.runtime.watch():
            if what == "exited" and self.streaming is not None:
                self.streaming.container_ended(pod_dir, name, restart_count)
            worker = self.workers.get(pod_dir)
            if worker is None or self.launched.get((pod_dir, name)) != restart_count:
                continue  # an older instance, or a pod we no longer track
            state = self.runtime.state(pod_dir, name, restart_count)
            now = self.now()
            if what == "started":
                actions = worker.container_started(name, state.pid, now, self._ours(state.started_at))
                self.shims.watch(pod_dir, name, state)
            elif state.start_failed:
                actions = worker.container_start_failed(name, "CreateContainerError", state.message or "", now,
                                                        self._ours(state.finished_at))
            else:
                actions = worker.container_exited(name, state.exit_code, state.signal, state.oom_killed, now,
                                                  started_at=self._ours(state.started_at),
                                                  finished_at=self._ours(state.finished_at), message=state.message)
                self.runtime.prune(pod_dir, name)
            self._execute(pod_dir, actions)
            self._after_event()

    # -- time, status, cleanup ----------------------------------------------------------------

    def _on_timer(self) -> None:
        self._timer = None
        now = self.now()
        for pod_dir, worker in list(self.workers.items()):
            deadline = worker.next_deadline()
            if deadline is not None and deadline <= now:
                self._execute(pod_dir, worker.sync(now))
        self._after_event()

    def _after_event(self) -> None:
        """Collect terminated pods, write changed statuses, re-arm the one timer."""
        for pod_dir, worker in list(self.workers.items()):
            # _remove re-syncs, and that nested pass may already have removed this one
            if self.workers.get(pod_dir) is worker and worker.stopping and worker.is_terminated():
                self._remove(pod_dir, worker)
        now = self.now()
        for pod_dir in self.dirty:
            worker = self.workers.get(pod_dir)
            if worker is not None:
                status = worker.status(now)
                write_json(os.path.join(pod_dir, STATUS_FILE), dict(worker.pod, status=status))
                if self.api is not None:
                    self.api.pod_status(worker.pod, status)
        self.dirty.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadlines = [d for d in (w.next_deadline() for w in self.workers.values()) if d is not None]
        if deadlines:
            self._timer = self.loop.call_at(min(deadlines), self._on_timer)

    def _remove(self, pod_dir: str, worker: PodWorker) -> None:
        """A terminated pod goes: its cgroups first (off the loop: what is left in them is
        killed and waited for), then its directory, then the pod itself."""
        if pod_dir in self._removing:
            return
        if self.cgroups is None or not self.cgroups.holds_pods:
            self._remove_pod(pod_dir, worker)
            return
        self._removing.add(pod_dir)
        self._spawn(self._remove_cgroups(pod_dir, worker))

    async def _remove_cgroups(self, pod_dir: str, worker: PodWorker) -> None:
        try:
            await asyncio.to_thread(self.cgroups.remove_pod, worker.uid)
        except CgroupError as exc:
            log.warning("pod %s/%s: %s", worker.namespace, worker.name, exc)
        finally:
            self._removing.discard(pod_dir)
        if self.workers.get(pod_dir) is worker:
            self._remove_pod(pod_dir, worker)
            self._after_event()

    def _remove_pod(self, pod_dir: str, worker: PodWorker) -> None:
        try:
            self.runtime.remove_pod(pod_dir)
        except RuntimeError:
            return  # a shim is still finishing; its exit brings us back here
        del self.workers[pod_dir]
        for key in [k for k in self.launched if k[0] == pod_dir]:
            del self.launched[key]
        self.mount_errors.pop(pod_dir, None)
        self.claimed.pop(pod_dir, None)
        self.dirty.discard(pod_dir)
        log.info("pod %s/%s: terminated and removed", worker.namespace, worker.name)
        if self.api is not None:
            self.api.pod_terminated(worker.pod)
        self._reconcile()  # a successor with the same name may be waiting

    def _event(self, worker: PodWorker | None, reason: str, message: str, type_: str = "Normal",
               container: str | None = None) -> None:
        record = {"time": format_time(time.time()), "type": type_, "reason": reason, "message": message,
                  "node": self.opts.node}
        if worker is not None:
            record["involvedObject"] = {"kind": "Pod", "namespace": worker.namespace, "name": worker.name,
                                        "uid": worker.uid}
            if container:
                record["involvedObject"]["fieldPath"] = f"spec.containers{{{container}}}"
        with open(self.events_path, "a") as f:
            f.write(json.dumps(record) + "\n")
        if self.api is not None and worker is not None:
            self.api.event(worker.pod, type_, reason, message,
                           f"spec.containers{{{container}}}" if container else None)


def _seen(pod: dict) -> float | None:
    """When this kubelet (or its predecessor) first saw the pod: the worker's startTime."""
    try:
        return parse_micro_time(pod["metadata"]["annotations"][manifests.CONFIG_SEEN])
    except (KeyError, TypeError, ValueError):
        return None


def _container_spec(pod: dict, name: str) -> dict:
    spec = pod["spec"]
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if c.get("name") == name:
            return c
    raise KeyError(name)


def _read(path: str) -> str:
    """A node file the pods' files are made from ("" when there is none). NodeFileError."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise NodeFileError(f"cannot read the node's {path}: {exc.strerror or exc}") from None


def _base_env(pod: dict, node: str) -> dict[str, str]:
    """What every container gets under its own variables (kubelet/envvars.py)."""
    # HOSTNAME is what the container's hostname is, as a runtime sets it: a hostNetwork pod
    # shares the node's (its name: what kube-scheduler's and kube-controller-manager's leader
    # election identity starts with), any other spec.hostname, else the pod's name (an Indexed
    # Job's pod <job>-<index>, not its generated name)
    hostname = node if (pod.get("spec") or {}).get("hostNetwork") is True else pod_hostname(pod)
    return {"HOSTNAME": hostname, "KUBERNETES_POD_NAME": pod["metadata"]["name"],
            "KUBERNETES_NAMESPACE": pod["metadata"]["namespace"]}


def _memory_limit(spec: dict) -> int | None:
    limit = ((spec.get("resources") or {}).get("limits") or {}).get("memory")
    return None if limit is None else memory_bytes(limit)

