"""Wiring: the API client, the shared informers, the chosen controllers, signals and READY=1.

Start-up order matters: every controller asks for its informers and registers its handlers
first; then the informers list and watch; the workers start only once *every* cache has synced
(a ReplicaSet synced against a pod cache still empty would create all its pods again), and
that is when the process reports READY=1.
"""
from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from dataclasses import dataclass

from components.controllers.csrsigning import DEFAULT_DURATION as DEFAULT_SIGNING_DURATION
from components.controllers.nodeipam import NodeIPAMSettings
from components.controllers.nodelifecycle import NodeLifecycleSettings
from components.controllers.endpointslice import DEFAULT_MAX_PER_SLICE
from components.controller_manager.deployment import DeploymentController
from components.controller_manager.endpoints import EndpointsController
from components.controller_manager.endpointslice import EndpointSliceController
from components.controller_manager.garbagecollector import GarbageCollector
from components.controller_manager.informers import SharedInformers
from components.controller_manager.namespace import NamespaceController
from components.controller_manager.nodeipam import NodeIPAMController
from components.controller_manager.nodelifecycle import NodeLifecycleController
from components.controller_manager.replicaset import ReplicaSetController
from components.controller_manager.rootcacertpublisher import RootCACertPublisher
from components.controller_manager.serviceaccounts import ServiceAccountsController
from kubemu import leaderelector, sdnotify
from kubemu.apiclient import ApiClient
from kubemu.gcfreeze import keep_frozen

log = logging.getLogger("kubemu.controller_manager")

CONTROLLERS = ("replicaset", "deployment", "nodelifecycle", "nodeipam", "garbagecollector",
               "namespace", "serviceaccount", "root-ca-cert-publisher", "endpoint",
               "endpointslice", "daemonset", "statefulset", "disruption", "cronjob", "job",
               "ttl-after-finished", "persistentvolume-binder", "local-path-provisioner",
               "pvc-protection", "pv-protection", "tokencleaner", "bootstrapsigner", "csrapproving",
               "csrsigning", "csrcleaner")
GC_PERIOD = 30.0   # seconds between garbage collector passes when nothing triggers one


@dataclass(frozen=True)
class Config:
    api: str
    controllers: tuple[str, ...] = CONTROLLERS
    concurrent_replicaset_syncs: int = 5
    concurrent_deployment_syncs: int = 5
    node_monitor_period: float = 5.0
    node_lifecycle: NodeLifecycleSettings = NodeLifecycleSettings()
    resync_period: float = 0.0
    credentials: tuple[str, str] | None = None  # the wire identity presented to the apiserver
    root_ca: str | None = None   # the CA bundle (PEM) the root CA publisher publishes
    node_ipam: NodeIPAMSettings | None = None  # with --allocate-node-cidrs only
    concurrent_endpoint_syncs: int = 5
    concurrent_service_endpoint_syncs: int = 5   # the EndpointSlice controller's workers
    max_endpoints_per_slice: int = DEFAULT_MAX_PER_SLICE
    endpoint_updates_batch_period: float = 0.0
    endpointslice_updates_batch_period: float = 0.0
    time_scale: float = 1.0   # kubemu's --fast: the controllers' built-in delays (Job backoff)
    cronjob_clock_offset_file: str | None = None   # tests move the CronJob clock by this file
    local_path_dir_template: str | None = None     # "<state>/nodes/{node}/local-path"
    cluster_signing: object | None = None   # the CA (pki.Pair) csrsigning signs with
    cluster_signing_duration: float = DEFAULT_SIGNING_DURATION   # --cluster-signing-duration
    leader_election: leaderelector.Settings | None = None   # None: no election, always act


def build_controllers(config: Config, api: ApiClient, informers: SharedInformers) -> list:
    builders = {
        "replicaset": lambda: ReplicaSetController(api, informers,
                                                   config.concurrent_replicaset_syncs),
        "deployment": lambda: DeploymentController(api, informers,
                                                   config.concurrent_deployment_syncs),
        "nodelifecycle": lambda: NodeLifecycleController(api, informers, config.node_lifecycle,
                                                         config.node_monitor_period),
        "garbagecollector": lambda: GarbageCollector(api, informers, GC_PERIOD),
        "namespace": lambda: NamespaceController(api, informers),
        "serviceaccount": lambda: ServiceAccountsController(api, informers),
        "root-ca-cert-publisher": lambda: RootCACertPublisher(api, informers, config.root_ca),
        "nodeipam": lambda: NodeIPAMController(api, informers, config.node_ipam),
        "endpoint": lambda: EndpointsController(api, informers, config.concurrent_endpoint_syncs,
                                                config.endpoint_updates_batch_period),
        "endpointslice": lambda: EndpointSliceController(
            api, informers, config.concurrent_service_endpoint_syncs,
            config.max_endpoints_per_slice, config.endpointslice_updates_batch_period),
        # imported when chosen (each module pulls its own dependencies, e.g. croniter)
        "statefulset": lambda: _shell("statefulset").StatefulSetController(api, informers),
        "daemonset": lambda: _shell("daemonset").DaemonSetController(api, informers),
        "job": lambda: _shell("job").JobController(api, informers, config.time_scale),
        "ttl-after-finished": lambda: _shell("ttlafterfinished").TTLAfterFinishedController(
            api, informers),
        "cronjob": lambda: _shell("cronjob").CronJobController(
            api, informers, config.cronjob_clock_offset_file),
        "disruption": lambda: _shell("disruption").DisruptionController(api, informers),
        "persistentvolume-binder": lambda: _shell("persistentvolume").PersistentVolumeBinder(
            api, informers),
        "local-path-provisioner": lambda: _shell("localpath").LocalPathProvisioner(
            api, informers, config.local_path_dir_template),
        "pvc-protection": lambda: _shell("pvcprotection").PVCProtectionController(api, informers),
        "pv-protection": lambda: _shell("pvcprotection").PVProtectionController(api, informers),
        "tokencleaner": lambda: _shell("tokencleaner").TokenCleaner(api, informers),
        "bootstrapsigner": lambda: _shell("bootstrapsigner").BootstrapSigner(api, informers),
        "csrapproving": lambda: _shell("csrapproving").CSRApprover(api, informers),
        "csrcleaner": lambda: _shell("csrcleaner").CSRCleaner(api, informers),
        "csrsigning": lambda: _shell("csrsigning").CSRSigner(
            api, informers, config.cluster_signing, config.cluster_signing_duration),
    }
    # controllers that run only when configured, and the flag that says why not
    missing = {"root-ca-cert-publisher": (config.root_ca is None, "no --root-ca-file"),
               "nodeipam": (config.node_ipam is None, "no --allocate-node-cidrs"),
               "local-path-provisioner": (config.local_path_dir_template is None,
                                          "no --local-path-dir-template"),
               "csrsigning": (config.cluster_signing is None, "no --cluster-signing-cert-file")}
    names = []
    for name in config.controllers:
        off, why = missing.get(name, (False, ""))
        if off:
            log.info("%s not started: %s", name, why)
        else:
            names.append(name)
    return [builders[name]() for name in names]


def _shell(module: str):
    return importlib.import_module(f"components.controller_manager.{module}")


async def run(config: Config) -> int:
    api, elector = leaderelector.clients("kube-controller-manager", config.api, config.leader_election,
                                         credentials=config.credentials)
    informers = SharedInformers(api, config.resync_period)
    controllers = build_controllers(config, api, informers)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    watching = asyncio.create_task(informers.run(stop), name="informers")
    freezing = asyncio.create_task(keep_frozen(), name="gc freezer")
    running: list[asyncio.Task] = []
    holding: asyncio.Task | None = None
    code = 0
    try:
        log.info("starting %s against %s", ",".join(config.controllers), config.api)
        await _until(watching, informers.wait_for_sync(), stop.wait())
        if not stop.is_set() and not watching.done():
            # ready as a standby too: its caches are warm for the moment it leads
            sdnotify.notify("READY=1\nSTATUS=caches synced")
            if elector is not None:
                await _until(watching, elector.acquire(stop))
        if not stop.is_set() and not watching.done():
            log.info("caches synced; controllers running")
            sdnotify.notify("STATUS=controllers running")
            running = [asyncio.create_task(c.run(stop), name=type(c).__name__)
                       for c in controllers]
            if elector is None:
                await _until(watching, stop.wait())
            else:
                holding = asyncio.create_task(elector.hold(), name="leader election")
                await _until(watching, stop.wait(), _finished(holding))
            if holding is not None and holding.done():
                log.error("leaderelection lost")
                code = 1
        if watching.done() and not stop.is_set():
            # the informers retry forever on their own; ending means a bug
            log.error("informers stopped unexpectedly: %r", watching.exception())
            code = 1
    finally:
        log.info("shutting down")
        stop.set()
        freezing.cancel()
        if holding is not None:
            holding.cancel()
        await asyncio.gather(watching, freezing, *running, *([holding] if holding else []),
                             return_exceptions=True)
        for controller in controllers:
            await controller.close()
        if elector is not None:
            await elector.release()
            await elector.close()
        await api.close()
    return code


async def _finished(task: asyncio.Task) -> None:
    """Wait for `task` without cancelling it when the waiting is cancelled."""
    await asyncio.wait([task])


async def _until(watching: asyncio.Task, *coros) -> None:
    """Until the first of `coros` finishes, or the informers stop (they never should)."""
    tasks = [asyncio.create_task(c) for c in coros]
    try:
        await asyncio.wait([watching, *tasks], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
