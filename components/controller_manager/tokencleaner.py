"""The token cleaner's shell (k8s pkg/controller/bootstrap/tokencleaner.go): each bootstrap token
Secret is queued when it is added or changed, and again when its expiration comes; a sync runs
the pure core (components/controllers/tokencleaner.py) on the cached Secret.
"""
from __future__ import annotations

import time

from components.controllers.podutil import meta
from components.controllers.tokencleaner import clean_token
from components.controller_manager.executor import ActionExecutor
from components.controller_manager.informers import SharedInformers
from components.controller_manager.workers import Workers
from kubemu import bootstraptoken
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder

COMPONENT = "token-cleaner"


class TokenCleaner:
    def __init__(self, api: ApiClient, informers: SharedInformers, clock=time.time):
        self.clock = clock
        self.secrets = informers.informer("secrets")
        self.recorder = EventRecorder(api, component=COMPONENT)
        self.executor = ActionExecutor(api, informers, self.recorder)
        self.workers = Workers("token-cleaner", self.sync)
        self.secrets.add_event_handler(self._queue, lambda _old, new: self._queue(new), None)

    def _queue(self, secret: dict) -> None:
        self.workers.add(meta(secret).get("name", ""))

    async def run(self, stop) -> None:
        await self.workers.run(stop)

    async def close(self) -> None:
        await self.recorder.close()

    async def sync(self, name: str) -> float | None:
        actions, recheck = clean_token(self.secrets.get(f"{bootstraptoken.NAMESPACE}/{name}"),
                                       self.clock())
        await self.executor.execute(actions)
        return recheck
