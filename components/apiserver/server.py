"""Wiring: the store client, the watch cache, the audit log and the wire server."""
from __future__ import annotations

import asyncio
import logging
import signal

from kubemu import sdnotify
from kubemu.wire import Server, WireError
from store.client import StoreClient

from .audit import AuditLog
from .handlers import API, BOOKMARK_INTERVAL
from .storage import Storage
from .watchcache import WatchCache

log = logging.getLogger("kubemu.apiserver")


class APIServer:
    def __init__(self, listen: str, store_endpoints, *, audit_log: str | None = None,
                 bookmark_interval: float = BOOKMARK_INTERVAL, state_dir: str | None = None):
        self.state_dir = state_dir
        self.listen = listen
        self.store_endpoints = store_endpoints
        self.audit_path = audit_log
        self.bookmark_interval = bookmark_interval

    async def run(self) -> int:
        client = StoreClient(self.store_endpoints)
        cache = WatchCache(client)
        audit = AuditLog(self.audit_path)
        api = API(Storage(client), cache, audit, bookmark_interval=self.bookmark_interval,
                  state_dir=self.state_dir)
        server = Server(self.listen, api.handlers(), name="apiserver")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await server.start()
        log.info("serving on %s (store %s)", server.endpoint, ",".join(client.endpoints))
        init = asyncio.create_task(self._bootstrap(api), name="system namespaces")
        sdnotify.notify("READY=1\nSTATUS=serving")
        try:
            await stop.wait()
        finally:
            log.info("shutting down")
            init.cancel()
            await server.close()
            await api.namespaces.close()
            await cache.close()
            await client.close()
            audit.close()
        return 0

    @staticmethod
    async def _bootstrap(api: API) -> None:
        """Create the default and kube-system namespaces (idempotent), retrying until the store answers."""
        delay = 0.1
        while True:
            try:
                await api.ensure_system_namespaces()
                return
            except WireError as err:
                log.info("creating the system namespaces: %s (retrying)", err)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
