"""`kubemu bench api`: the apiserver's two doors side by side, in one run.

One store replica and one apiserver (real processes, kubeadm-style certificates and wire secrets
in a temp dir, started as `kubemu up` starts them); this process is the client of both doors in
turn, to the same apiserver, as the admin:

- wire: kubemu's `ApiClient` (ZeroMQ + msgpack on ipc://) with the admin's wire credentials, as
  the components use it (authentication and RBAC on every request);
- https: aiohttp over TLS with the admin's client certificate, JSON bodies, as kubectl and the
  official clients use it (authentication and RBAC on every request).

Per door, on ConfigMaps in a namespace of its own: sequential creates, gets and lists (latency),
watch-event latency (a merge patch sent -> its MODIFIED event read from an open watch), and
concurrent gets (CONCURRENCY in flight: throughput). The figure that matters is the apiserver's
CPU per request (user + system time of its process over each phase, divided by the requests):
the store does the same work behind either door, and the client's cost is not the server's.
The target is https <= 1.5x wire in CPU per request.

The floor: a bare aiohttp server on the same TLS certificate, answering every GET with the bytes
of one ConfigMap, and no other work (no authentication, authorization, store or JSON encoding),
driven by the same concurrent client: what HTTPS itself costs in this language and library.
It runs as `python -m bench.api floor PORT CERT KEY`.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from kubemu.cluster import any_free_port
from kubemu.wire import Conflict

from .machine import machine_with_load
from .stats import summary

CONCURRENCY = 16
STORE_NAME = "s0"
STARTUP = 60  # seconds for the servers to answer (the wire opens once the RBAC policy is in)
TARGET_CPU_RATIO = 1.5
PHASES = ("create", "get", "list", "watch_event", "get_concurrent")


class Servers:
    """A store replica and an apiserver in `directory`, stopped (with their sessions) on exit."""

    def __init__(self, directory: Path):
        from kubemu import _wire_auth as wireauth
        from kubemu import pki

        self.dir = directory
        pki_dir = directory / "pki"
        ca, _ = pki.ensure_ca(pki_dir)
        pki.ensure_cert(pki_dir, pki.APISERVER, ca)
        pki.ensure_cert(pki_dir, pki.ADMIN, ca)
        pki.ensure_service_account_keys(pki_dir)
        self.pki = pki_dir
        self.secrets = wireauth.secrets_dir(directory)
        self.admin = wireauth.load_credentials(wireauth.ensure_secret(self.secrets, wireauth.ADMIN))
        self.apiserver_secret = wireauth.ensure_secret(self.secrets, wireauth.APISERVER)
        wireauth.ensure_secret(self.secrets, wireauth.store_identity(STORE_NAME))
        self.store = f"ipc://{directory}/store.sock"
        self.wire = f"ipc://{directory}/api.sock"
        self.port = any_free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen] = []

    def __enter__(self) -> Servers:
        py = sys.executable
        try:
            self.spawn("store", [py, "-m", "store", "--name", STORE_NAME,
                                 "--data-dir", str(self.dir / STORE_NAME), "--listen", self.store,
                                 "--peers", f"{STORE_NAME}={self.store}",
                                 "--wire-secrets", str(self.secrets)])
            self.api_proc = self.spawn("apiserver", [
                py, "-m", "components.apiserver", "--listen", self.wire, "--store-endpoints", self.store,
                "--wire-secrets", str(self.secrets), "--store-credentials", str(self.apiserver_secret),
                "--secure-port", str(self.port), "--tls-cert-file", str(self.pki / "apiserver.crt"),
                "--tls-private-key-file", str(self.pki / "apiserver.key"),
                "--client-ca-file", str(self.pki / "ca.crt"),
                "--service-account-key-file", str(self.pki / "sa.pub"),
                "--service-account-signing-key-file", str(self.pki / "sa.key")])
        except BaseException:
            self.__exit__()  # what did start (the store) is not left behind
            raise
        return self

    def api_client(self):
        """An ApiClient of the wire door, as the admin."""
        from kubemu.apiclient import ApiClient
        return ApiClient(self.wire, timeout=30, credentials=self.admin)

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.dir / f"{name}.log", "wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(Path(__file__).parent.parent),
                                env=dict(os.environ, KUBEMU_STATE_DIR=str(self.dir)))
        log.close()
        self.procs.append(proc)
        return proc

    def __exit__(self, *exc) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()

    def cpu(self, pid: int | None = None) -> float:
        """The apiserver's (or process `pid`'s) CPU seconds so far (user + system)."""
        t = psutil.Process(pid or self.api_proc.pid).cpu_times()
        return t.user + t.system

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx


def serve_floor(port: int, cert: str, key: str) -> None:
    from aiohttp import web

    from kubemu import eventloop

    body = json.dumps(configmap("cm-0", 0)).encode()

    async def answer(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    web.run_app(app, host="127.0.0.1", port=port, ssl_context=ctx, access_log=None, print=None,
                handle_signals=True, loop=eventloop.loop_factory()())  # the apiserver's loop


async def _floor(servers: Servers, count: int) -> dict:
    """Concurrent GETs against the bare TLS server, its CPU per request."""
    port = any_free_port()
    proc = servers.spawn("floor", [sys.executable, "-m", "bench.api", "floor", str(port),
                                   str(servers.pki / "apiserver.crt"), str(servers.pki / "apiserver.key")])
    door = HttpsDoor(servers, url=f"https://127.0.0.1:{port}")
    try:
        await _until(door.ready, time.monotonic() + STARTUP)
        return await _concurrent(servers, count, lambda i: door.get("x", "cm-0"), pid=proc.pid)
    finally:
        await door.close()


def configmap(name: str, i: int) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"bench": "api"}},
            "data": {"index": str(i), "payload": "x" * 200}}


class WireDoor:
    name = "wire"

    def __init__(self, servers: Servers):
        self.api = servers.api_client()

    async def ready(self) -> None:
        await self.api.healthz()

    async def create(self, ns: str, obj: dict) -> None:
        await self.api.create("configmaps", obj, ns)

    async def get(self, ns: str, name: str) -> None:
        await self.api.get("configmaps", name, ns)

    async def list(self, ns: str) -> int:
        return len((await self.api.list("configmaps", ns))["items"])

    async def patch(self, ns: str, name: str, value: str) -> None:
        await self.api.patch("configmaps", name, {"data": {"index": value}}, ns)

    async def watch(self, ns: str, rv: str):
        async with self.api.watch("configmaps", ns, resource_version=rv) as events:
            async for _type, obj in events:
                yield obj

    async def rv(self, ns: str) -> str:
        return (await self.api.list("configmaps", ns, limit=1))["metadata"]["resourceVersion"]

    async def close(self) -> None:
        await self.api.close()


class HttpsDoor:
    name = "https"

    def __init__(self, servers: Servers, url: str | None = None):
        import aiohttp
        self.url = url or servers.url
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=servers.ssl_context(),
                                                                            limit=CONCURRENCY * 2))

    def _path(self, ns: str, name: str = "") -> str:
        return f"{self.url}/api/v1/namespaces/{ns}/configmaps" + (f"/{name}" if name else "")

    async def _json(self, method: str, url: str, **kw) -> dict:
        async with self.session.request(method, url, **kw) as resp:
            body = await resp.json(content_type=None)
            if resp.status >= 300:
                raise RuntimeError(f"{method} {url}: {resp.status} {body.get('message')}")
            return body

    async def ready(self) -> None:
        async with self.session.get(f"{self.url}/readyz") as resp:  # the floor answers any GET
            if resp.status != 200:
                raise RuntimeError(f"/readyz: {resp.status}")

    async def create(self, ns: str, obj: dict) -> None:
        await self._json("POST", self._path(ns), json=obj)

    async def get(self, ns: str, name: str) -> None:
        await self._json("GET", self._path(ns, name))

    async def list(self, ns: str) -> int:
        return len((await self._json("GET", self._path(ns)))["items"])

    async def patch(self, ns: str, name: str, value: str) -> None:
        await self._json("PATCH", self._path(ns, name), data=json.dumps({"data": {"index": value}}),
                         headers={"Content-Type": "application/merge-patch+json"})

    async def watch(self, ns: str, rv: str):
        async with self.session.get(self._path(ns), params={"watch": "1", "resourceVersion": rv}) as resp:
            async for line in resp.content:
                if line.strip():
                    yield json.loads(line)["object"]

    async def rv(self, ns: str) -> str:
        return (await self._json("GET", self._path(ns), params={"limit": "1"}))["metadata"]["resourceVersion"]

    async def close(self) -> None:
        await self.session.close()


async def _until(ready, deadline: float) -> None:
    """Wait until `ready()` answers (the servers are starting)."""
    while True:
        try:
            await ready()
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _phase(servers: Servers, count: int, step) -> dict:
    """Run `step(i)` for i in range(count) one after another: latencies and CPU per request."""
    latencies = []
    cpu0 = servers.cpu()
    t0 = time.perf_counter()
    for i in range(count):
        s = time.perf_counter()
        await step(i)
        latencies.append((time.perf_counter() - s) * 1000)
    wall = time.perf_counter() - t0
    return {"latency_ms": summary(latencies), "requests": count, "requests_per_s": count / wall,
            "cpu_ms_per_request": (servers.cpu() - cpu0) * 1000 / count}


async def _concurrent(servers: Servers, count: int, step, pid: int | None = None) -> dict:
    queue = iter(range(count))
    cpu0 = servers.cpu(pid)
    t0 = time.perf_counter()

    async def worker():
        for i in queue:
            await step(i)

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    wall = time.perf_counter() - t0
    return {"requests": count, "requests_per_s": count / wall, "concurrency": CONCURRENCY,
            "cpu_ms_per_request": (servers.cpu(pid) - cpu0) * 1000 / count}


async def _watch_latency(servers: Servers, door, ns: str, count: int) -> dict:
    name = "cm-0"
    events = door.watch(ns, await door.rv(ns))
    latencies = []
    cpu0 = servers.cpu()
    try:
        for i in range(count):
            value = f"w{i}"
            s = time.perf_counter()
            await door.patch(ns, name, value)
            async for obj in events:
                if obj["metadata"]["name"] == name and obj.get("data", {}).get("index") == value:
                    break
            latencies.append((time.perf_counter() - s) * 1000)
    finally:
        await events.aclose()
    return {"latency_ms": summary(latencies), "requests": count,
            "cpu_ms_per_request": (servers.cpu() - cpu0) * 1000 / count}


async def _create_namespace(admin, name: str) -> None:
    try:
        await admin.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": name}})
    except Conflict as err:
        if "already exists" not in str(err):
            raise


async def _measure(servers: Servers, count: int, tick) -> dict:
    async with servers.api_client() as admin:
        deadline = time.monotonic() + STARTUP
        await _until(admin.healthz, deadline)
        for door_name in ("wire", "https"):  # the apiserver makes its system namespaces first
            await _until(lambda: _create_namespace(admin, f"bench-{door_name}"), deadline)
    results = {}
    for door in (WireDoor(servers), HttpsDoor(servers)):
        try:
            await _until(door.ready, time.monotonic() + STARTUP)
            ns = f"bench-{door.name}"
            row = {}
            row["create"] = await _phase(servers, count, lambda i: door.create(ns, configmap(f"cm-{i}", i)))
            row["get"] = await _phase(servers, count, lambda i: door.get(ns, f"cm-{i % count}"))
            lists = max(10, count // 20)
            row["list"] = await _phase(servers, lists, lambda i: door.list(ns))
            row["list"]["items"] = count
            row["watch_event"] = await _watch_latency(servers, door, ns, max(20, count // 5))
            row["get_concurrent"] = await _concurrent(servers, count * 2, lambda i: door.get(ns, f"cm-{i % count}"))
            results[door.name] = row
        finally:
            await door.close()
        tick()
    results["floor"] = {"get_concurrent": await _floor(servers, count * 2)}
    tick()
    return results


def run(quick: bool = False, kills: int | None = None, progress_factory=None, workdir: Path | None = None,
        count: int | None = None) -> dict:
    """`count` objects per door (default 1,000; 200 with quick)."""
    del kills
    count = count or (200 if quick else 1000)
    tick = progress_factory("wire, https, the TLS floor", 3) if progress_factory else (lambda: None)
    with tempfile.TemporaryDirectory(prefix="kba", dir=workdir) as tmp, Servers(Path(tmp)) as servers:
        results = asyncio.run(_measure(servers, count, tick))
    ratios = {phase: _ratio(results["https"][phase]["cpu_ms_per_request"],
                            results["wire"][phase]["cpu_ms_per_request"]) for phase in PHASES}
    floor = results["floor"]["get_concurrent"]["cpu_ms_per_request"]
    return {"suite": "api", "machine": machine_with_load(), "results": results,
            "cpu_ratio_https_to_wire": ratios, "target_cpu_ratio": TARGET_CPU_RATIO,
            "https_get_above_floor_ms": results["https"]["get_concurrent"]["cpu_ms_per_request"] - floor,
            "wire_get_to_floor": _ratio(results["wire"]["get_concurrent"]["cpu_ms_per_request"], floor),
            "config": {"objects": count, "concurrency": CONCURRENCY, "store_replicas": 1,
                       "https_client": "aiohttp, TLS 1.3, the admin's client certificate, keep-alive",
                       "wire_client": "kubemu ApiClient over ipc://, the admin's wire credentials"}}


def _ratio(a: float, b: float) -> float:
    """a / b; NaN when b is 0 (a phase too short for the CPU clock's 10 ms ticks)."""
    return a / b if b > 0 else math.nan


def headlines(report: dict) -> dict:
    return {f"api: https/wire CPU per request, {phase}": round(ratio, 2)
            for phase, ratio in report["cpu_ratio_https_to_wire"].items()}


def table(report: dict):
    from rich.table import Table

    from .tables import machine_line, number

    res, ratios = report["results"], report["cpu_ratio_https_to_wire"]
    t = Table(title=f"api: the same apiserver through its two doors, {report['config']['objects']} ConfigMaps "
                    f"({machine_line(report['machine'])})")
    for col in ("", "door", "p50 ms", "p99 ms", "req/s", "apiserver CPU ms/req", "https/wire CPU"):
        t.add_column(col, justify="left" if col in ("", "door") else "right")
    for phase in PHASES:
        for door in ("wire", "https"):
            row = res[door][phase]
            lat = row.get("latency_ms")
            t.add_row(phase.replace("_", " ") if door == "wire" else "", door,
                      number(lat["p50"], "{:.2f}") if lat else "", number(lat["p99"], "{:.2f}") if lat else "",
                      number(row["requests_per_s"], "{:,.0f}") if "requests_per_s" in row else "",
                      number(row["cpu_ms_per_request"], "{:.3f}"),
                      number(ratios[phase], "{:.2f}x") if door == "https" else "")
    floor = res["floor"]["get_concurrent"]
    t.add_row("TLS floor", "aiohttp", "", "", number(floor["requests_per_s"], "{:,.0f}"),
              number(floor["cpu_ms_per_request"], "{:.3f}"), "")
    t.caption = (f"target: https <= {report['target_cpu_ratio']}x the wire's apiserver CPU per request; "
                 f"get concurrent: {report['config']['concurrency']} in flight; TLS floor: a bare aiohttp "
                 f"server answering one ConfigMap's bytes to the same concurrent GETs (no authn, RBAC, "
                 f"store or encoding): the wire's whole get costs {report['wire_get_to_floor']:.2f}x it")
    return t


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "floor":
        sys.exit("usage: python -m bench.api floor PORT CERT KEY")
    serve_floor(int(sys.argv[2]), sys.argv[3], sys.argv[4])
