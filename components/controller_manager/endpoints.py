"""The Endpoints controller's shell (k8s pkg/controller/endpoint's Controller).

Keys are Services ("<namespace>/<name>"), which is also the name of their Endpoints. A Service's
change queues it at once, a pod's change queues the Services selecting it after
--endpoint-updates-batch-period, an Endpoints object appearing (every one of them when the
caches first fill: k8s' checkLeftoverEndpoints) or being deleted queues its name, so a leftover
of a deleted Service is found and one deleted by hand comes back.

A sync hands the core (components/controllers/endpoints.py) the Service (None when gone), the
pods it selects and the cached Endpoints, and executes the one write. After an update it
remembers the resourceVersion it replaced: a cache still showing that version has not seen the
write, and the sync is retried rather than run on it (k8s staleEndpointsTracker). A failed write
records FailedToCreateEndpoint / FailedToUpdateEndpoint on the Endpoints, as k8s does.
"""
from __future__ import annotations

from components.controllers import CreateObject, UpdateObject
from components.controllers.endpoints import reconcile
from components.controllers.endpointslice import TriggerTimes, has_selector
from components.controllers.podutil import meta, object_key
from components.controller_manager.endpointslice import (final_state, selected_pods,
                                                         watch_pods_for_services)
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import RetryLater, Workers
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder

COMPONENT = "endpoint-controller"


class EndpointsController:
    def __init__(self, api: ApiClient, informers: SharedInformers, workers: int = 5,
                 batch_period: float = 0.0):
        self.batch_period = batch_period
        self.services = informers.informer("services")
        self.pods = informers.informer("pods")
        self.endpoints = informers.informer("endpoints")
        self.trigger_times = TriggerTimes()
        self.replaced: dict[str, str] = {}   # key -> the resourceVersion our last update replaced
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder, on_written=self._written)
        self.workers = Workers("endpoint", self.sync, workers)
        self.services.add_event_handler(self._queue, lambda _old, new: self._queue(new),
                                        self._queue)
        watch_pods_for_services(self.pods, self.services,
                                lambda key: self.workers.add_after(key, self.batch_period))
        self.endpoints.add_event_handler(self._queue, None, self._queue)

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    def _queue(self, obj) -> None:
        self.workers.add(object_key(final_state(obj)))

    async def sync(self, key: str) -> None:
        service = self.services.get(key)
        current = self.endpoints.get(key)
        if service is None:
            self.trigger_times.forget(key)
            self.replaced.pop(key, None)
            await self.executor.execute(reconcile(None, key, [], current))
            return
        if not has_selector(service):
            return
        if current is not None and meta(current).get("resourceVersion") == self.replaced.get(key):
            raise RetryLater(f"endpoints informer cache is out of date, resource version "
                             f"{self.replaced[key]} already processed for endpoints {key}")
        pods = selected_pods(self.pods, service)
        trigger_time = self.trigger_times.compute(service, pods)
        actions = reconcile(service, key, pods, current, trigger_time)
        try:
            await self.executor.execute(actions)
        except Exception as err:
            namespace, _, name = key.partition("/")
            obj = {"apiVersion": "v1", "kind": "Endpoints",
                   "metadata": {"name": name, "namespace": namespace}}
            if current is None:
                self.recorder.event(obj, "Warning", "FailedToCreateEndpoint",
                                    f"Failed to create endpoint for service {key}: {err}")
            else:
                self.recorder.event(obj, "Warning", "FailedToUpdateEndpoint",
                                    f"Failed to update endpoint {key}: {err}")
            raise

    def _written(self, action, obj: dict | None) -> None:
        if isinstance(action, UpdateObject) and obj is not None:
            old = meta(action.object).get("resourceVersion")
            if meta(obj).get("resourceVersion") != old:
                self.replaced[object_key(obj)] = old
        elif isinstance(action, CreateObject):
            self.replaced.pop(object_key(action.object), None)
