"""The local-path provisioner's shell (rancher.io/local-path, run inside the controller-manager
with --local-path-dir-template). Decisions are `components.controllers.localpath`'s; the shell
owns the one disk write: removing a deleted volume's directory.

Keys: ("claim", "ns/name") for provisioning, ("volume", name) for reclaiming. A claim's change
queues the claim; a volume's change queues the volume; a StorageClass's change queues every claim
waiting for this provisioner.

The directory is removed only when the core names it (exactly the one this provisioner made for
that volume, on a valid node name) and, resolved (symlinks followed), it is still that path with
nothing but the template's part before `{node}` resolved: no symlink from the node's directory
down. kubemu removes only what it created. A directory already gone is fine; a failed removal is a
VolumeFailedDelete event on the volume and a retry, the volume kept until its data is gone.
"""
from __future__ import annotations

import asyncio
import os
import shutil

from components.controllers.localpath import (NODE_PLACEHOLDER, PROVISIONER, node_root, sync_claim,
                                             sync_volume, template_parts, volume_node)
from components.controllers.persistentvolume import ANN_STORAGE_PROVISIONER, claim_key
from components.controllers.podutil import meta
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import RetryLater, Workers
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder


def remove_directory(path: str, dir_template: str, node: str) -> None:
    """Remove `path` if, symlinks resolved, it is `<template prefix><node><rest>/<its name>`
    with only the prefix's directory (before `{node}`: wherever the state directory lives)
    resolved: a symlink anywhere from the node's directory down leads elsewhere, and is refused
    with a ValueError."""
    prefix, rest = template_parts(dir_template)
    if NODE_PLACEHOLDER in dir_template:
        head, lead = os.path.split(prefix)   # lead: a name the node's own is part of ("data-{node}")
        unresolved = lead + node + node_root(rest, node)
    else:
        head, unresolved = prefix, ""
    want = os.path.normpath(f"{os.path.realpath(head)}/{unresolved}/{os.path.basename(path)}")
    if os.path.realpath(path) != want:
        raise ValueError(f"{path} is not a volume directory under {node_root(dir_template, node)}")
    if os.path.lexists(want):
        shutil.rmtree(want)


class LocalPathProvisioner:
    def __init__(self, api: ApiClient, informers: SharedInformers, dir_template: str, workers: int = 2):
        self.dir_template = dir_template
        self.claims = informers.informer("persistentvolumeclaims")
        self.volumes = informers.informer("persistentvolumes")
        self.classes = informers.informer("storageclasses")
        self.recorder = EventRecorder(api, component=PROVISIONER)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("local-path-provisioner", self.sync, workers)
        self.claims.add_event_handler(self._claim, lambda _old, new: self._claim(new), None)
        self.volumes.add_event_handler(self._volume, lambda _old, new: self._volume(new), None)
        self.classes.add_event_handler(self._waiting, lambda _old, _new: self._waiting(None), None)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    def _claim(self, claim: dict) -> None:
        self.workers.add(("claim", claim_key(claim)))

    def _volume(self, volume: dict) -> None:
        self.workers.add(("volume", meta(volume).get("name")))

    def _waiting(self, _obj) -> None:
        for claim in self.claims.list():
            if (meta(claim).get("annotations") or {}).get(ANN_STORAGE_PROVISIONER) == PROVISIONER:
                self._claim(claim)

    async def sync(self, key: tuple[str, str]) -> None:
        kind, name = key
        if kind == "claim":
            claim = self.claims.get(name)
            if claim is not None:
                volumes = {meta(v).get("name"): v for v in self.volumes.list()}
                classes = {meta(c).get("name"): c for c in self.classes.list()}
                await self.executor.execute(sync_claim(claim, classes, volumes, self.dir_template))
            return
        volume = self.volumes.get(name)
        deletion = sync_volume(volume, self.dir_template) if volume is not None else None
        if deletion is None:
            return
        if deletion.directory is not None:
            try:
                await asyncio.to_thread(remove_directory, deletion.directory, self.dir_template,
                                        volume_node(volume))
            except (OSError, ValueError) as err:
                self.recorder.event(volume, "Warning", "VolumeFailedDelete",
                                    f"failed to delete volume {name}: {err}")
                raise RetryLater(f"volume {name}: {err}") from err
        await self.executor.execute(deletion.actions)
