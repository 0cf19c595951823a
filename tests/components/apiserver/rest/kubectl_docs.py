"""A plain-HTTP server on loopback serving only the discovery and OpenAPI documents, and a way to
run the real kubectl against it (fresh HOME, its own kubeconfig): enough to check that kubectl
reads the documents, without the rest of the apiserver."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import threading
from pathlib import Path

from aiohttp import web

from components.apiserver.rest import discovery, openapi

KUBECTL = shutil.which("kubectl")
PROTOBUF = "application/com.github.proto-openapi.spec.v2"


def _not_found(path: str) -> web.Response:
    return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Failure", "message": f"{path} not found",
                              "reason": "NotFound", "code": 404}, status=404)


class DocsServer:
    """Serves on 127.0.0.1:<free port> from a thread; `seen` lists (method, path?query).
    `objects` (path -> object) answer GET and PATCH at those paths, each PATCH recorded in
    `patches` as (content type, query, body). `aggregated=False` answers discovery in the
    legacy format whatever the client accepts."""

    def __init__(self, objects: dict[str, dict] | None = None, aggregated: bool = True) -> None:
        self.seen: list[tuple[str, str]] = []
        self.patches: list[tuple[str, dict, dict]] = []
        self.objects = objects or {}
        self.aggregated = aggregated
        self.loop = asyncio.new_event_loop()
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self.runner = web.AppRunner(app, access_log=None)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.port = 0

    async def _handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path_qs))
        accept = request.headers.get("Accept", "") if self.aggregated else ""
        if request.path in self.objects:
            if request.method == "PATCH":
                self.patches.append((request.content_type, dict(request.query),
                                     json.loads(await request.read())))
            return web.json_response(self.objects[request.path])
        found = discovery.document(request.path, accept)
        if found is not None:
            content_type, doc = found
            return web.Response(body=json.dumps(doc).encode(),
                                headers={"Content-Type": content_type})
        doc = openapi.document(request.path)
        if doc is None:
            return _not_found(request.path)
        if accept.startswith(PROTOBUF) and "json" not in accept:
            return web.Response(status=406, text="only JSON")  # no v2 protobuf here
        return web.json_response(doc)

    def start(self) -> "DocsServer":
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = self.runner.addresses[0][1]
        self.thread.start()
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def kubeconfig(path: Path, port: int) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "docs", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "anyone", "user": {}}],
        "contexts": [{"name": "docs", "context": {"cluster": "docs", "user": "anyone",
                                                  "namespace": "default"}}],
        "current-context": "docs"}))
    return path


def run_kubectl(home: Path, config: Path, *args: str, env: dict | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess:
    environ = {"HOME": str(home), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               **(env or {})}
    return subprocess.run([KUBECTL, "--kubeconfig", str(config), "--request-timeout", "60s",
                           *args], env=environ, capture_output=True, text=True,
                          timeout=timeout)
