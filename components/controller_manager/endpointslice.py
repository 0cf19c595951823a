"""The EndpointSlice controller's shell (k8s pkg/controller/endpointslice's Controller).

Keys are Services ("<namespace>/<name>"). A Service's own changes queue it at once; a pod's
change queues the Services of its namespace whose selector picks it (before and after a label
change) after --endpointslice-updates-batch-period, so a burst of pod changes costs one write;
a change to one of this controller's slices made by someone else queues its Service after at
least a second (k8s endpointSliceChangeMinSyncDelay), its own writes queue nothing.

A sync hands the core (components/controllers/endpointslice.py) the Service, the pods it
selects, their Nodes and its managed slices, and executes the result. Before that it checks the
slice cache against the record of this controller's own writes (``SliceTracker``): a cache that
has not caught up is retried, never synced, or a slice just created would be created again.
A failed sync records a FailedToUpdateEndpointSlices Warning on the Service, as k8s does.
"""
from __future__ import annotations

from collections.abc import Callable

from components.controllers import CreateObject, DeleteObject, UpdateObject
from components.controllers.endpointslice import (DEFAULT_MAX_PER_SLICE, LABEL_SERVICE_NAME,
                                                  SliceTracker, TriggerTimes, has_selector,
                                                  is_managed, managed_slices, reconcile,
                                                  selects, service_key, services_for,
                                                  services_to_update)
from components.controllers.podutil import labels_of, meta, object_key
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SERVICE_INDEX, SharedInformers
from components.controller_manager.workers import RetryLater, Workers
from kubemu.apiclient import ApiClient
from kubemu.cache import NAMESPACE_INDEX, DeletedFinalStateUnknown
from kubemu.events import EventRecorder
from kubemu.informer import Informer

COMPONENT = "endpoint-slice-controller"
SLICE_CHANGE_MIN_DELAY = 1.0   # k8s endpointSliceChangeMinSyncDelay


def final_state(obj):
    return obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj


def watch_pods_for_services(pods: Informer, services: Informer,
                            enqueue: Callable[[str], None]) -> None:
    """Queue the Services a pod change concerns (k8s addPod/updatePod/deletePod of the
    endpoint and EndpointSlice controllers)."""
    def in_namespace(pod: dict) -> list[dict]:
        return services.indexer.by_index(NAMESPACE_INDEX, meta(pod).get("namespace") or "default")

    def added_or_deleted(pod) -> None:
        pod = final_state(pod)
        for key in services_for(in_namespace(pod), labels_of(pod)):
            enqueue(key)

    def updated(old: dict, new: dict) -> None:
        for key in services_to_update(in_namespace(new), old, new):
            enqueue(key)

    pods.add_event_handler(added_or_deleted, updated, added_or_deleted)


def selected_pods(pods: Informer, service: dict) -> list[dict]:
    return [p for p in pods.indexer.by_index(NAMESPACE_INDEX,
                                             meta(service).get("namespace") or "default")
            if selects(service, labels_of(p))]


class EndpointSliceController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 5,
                 max_per_slice: int = DEFAULT_MAX_PER_SLICE, batch_period: float = 0.0):
        self.max_per_slice = max_per_slice
        self.batch_period = batch_period
        self.services = informers.informer("services")
        self.pods = informers.informer("pods")
        self.nodes = informers.informer("nodes")
        self.slices = informers.informer("endpointslices")
        self.tracker = SliceTracker()
        self.trigger_times = TriggerTimes()
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder, on_written=self._written)
        self.workers = Workers("endpointslice", self.sync, workers)
        self.services.add_event_handler(self._service, lambda _old, new: self._service(new),
                                        self._service)
        watch_pods_for_services(self.pods, self.services,
                                lambda key: self.workers.add_after(key, self.batch_period))
        self.slices.add_event_handler(self._slice_added, self._slice_updated, self._slice_deleted)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    # -- the sync --

    async def sync(self, key: str) -> None:
        service = self.services.get(key)
        if service is None:
            self.trigger_times.forget(key)
            self.tracker.forget(key)
            return
        if not has_selector(service):
            return
        pods = selected_pods(self.pods, service)
        slices = managed_slices(service, self.slices.indexer.by_index(SERVICE_INDEX, key))
        if self.tracker.stale(service, slices):
            raise RetryLater("EndpointSlice informer cache is out of date")
        trigger_time = self.trigger_times.compute(service, pods)
        nodes = {name: node for name in {(p.get("spec") or {}).get("nodeName") for p in pods}
                 if name and (node := self.nodes.get(name)) is not None}
        result = reconcile(service, pods, nodes, slices, trigger_time, self.max_per_slice)
        try:
            await self.executor.execute(result.actions)
            if result.skipped:
                raise RetryLater(f"skipping Pod(s) {', '.join(result.skipped)}")
        except Exception as err:
            m = meta(service)
            self.recorder.event(service, "Warning", "FailedToUpdateEndpointSlices",
                                f"Error updating Endpoint Slices for Service "
                                f"{m.get('namespace')}/{m.get('name')}: {err}")
            raise

    def _written(self, action, obj: dict | None) -> None:
        if isinstance(action, (CreateObject, UpdateObject)) and obj is not None:
            self.tracker.written(obj)
        elif isinstance(action, DeleteObject):
            cached = self.slices.get(f"{action.namespace}/{action.name}")
            if cached is not None:
                self.tracker.expect_deletion(cached)

    # -- events --

    def _service(self, service) -> None:
        service = final_state(service)
        self.workers.add(object_key(service))

    def _queue_for_slice(self, slice_: dict) -> None:
        name = labels_of(slice_).get(LABEL_SERVICE_NAME)
        if name:
            self.workers.add_after(service_key(meta(slice_).get("namespace"), name),
                                   max(SLICE_CHANGE_MIN_DELAY, self.batch_period))

    def _slice_added(self, slice_: dict) -> None:
        if is_managed(slice_) and self.tracker.should_sync(slice_):
            self._queue_for_slice(slice_)

    def _slice_updated(self, old: dict, new: dict) -> None:
        if labels_of(old).get(LABEL_SERVICE_NAME) != labels_of(new).get(LABEL_SERVICE_NAME):
            self._queue_for_slice(old)
            self._queue_for_slice(new)
        elif is_managed(old) != is_managed(new) or \
                (is_managed(new) and self.tracker.should_sync(new)):
            self._queue_for_slice(new)

    def _slice_deleted(self, slice_) -> None:
        slice_ = final_state(slice_)
        # k8s looks again only at deletions it tracked; any unexpected one is looked at here
        # (a restarted controller tracks nothing, and a deleted slice must come back)
        if is_managed(slice_) and not self.tracker.deleted(slice_):
            self._queue_for_slice(slice_)

