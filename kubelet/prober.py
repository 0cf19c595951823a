"""Running one probe (the I/O half; kubelet/probes.py decides when): exec, httpGet, tcpSocket,
with Kubernetes' success rules - exec exits 0, HTTP status 200-399, TCP connects.

As the kubelet: httpGet and tcpSocket go from the node to the pod's IP unless the probe names a
host (a hostNetwork pod's IP is the node's); an exec probe runs in the container exactly as
`kubectl exec` runs a command (CRI ExecSync and Exec are one thing to the runtime): its
environment and working directory, its cgroups, its pod's sandbox and its own mount namespace,
with its volumes and /etc files (kubelet/streaming.py start_session)."""
from __future__ import annotations

import asyncio
import http.client
from collections.abc import Callable
from typing import TYPE_CHECKING

from kubemu._wire_errors import WireError

from .shim import StartError

if TYPE_CHECKING:
    from .streaming import Target

OUTPUT_TAIL = 200  # bytes of an exec probe's output kept for its message


def resolve_port(port, container: dict) -> int:
    """A probe's port is a number or the name of one of the container's ports."""
    if isinstance(port, int):
        return port
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    if isinstance(port, str) and port.isdigit():
        return int(port)
    raise ValueError(f"port {port!r} is not one of the container's named ports")


async def run_probe(probe: dict, container: dict, timeout: float, *, host: str = "127.0.0.1",
                    exec_target: Callable[[], Target] | None = None) -> tuple[bool, str]:
    """(success, message). Never raises: every failure is a failed probe with its reason.
    `host`: the pod's IP; `exec_target`: the running container an exec probe runs in
    (kubelet/streaming.py find_target; WireError when it is not running)."""
    try:
        if "exec" in probe:
            if exec_target is None:
                return False, "exec probe: no container to run it in"
            return await asyncio.wait_for(_exec(probe["exec"]["command"], exec_target()), timeout)
        if "httpGet" in probe:
            get = probe["httpGet"]
            port = resolve_port(get.get("port"), container)
            return await asyncio.to_thread(_http_get, get.get("host") or host, port,
                                           get.get("path") or "/", get.get("scheme", "HTTP"), timeout)
        if "tcpSocket" in probe:
            port = resolve_port(probe["tcpSocket"].get("port"), container)
            host = probe["tcpSocket"].get("host") or host
            _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
            writer.close()
            return True, ""
        return False, "probe has no handler"
    except asyncio.TimeoutError:
        return False, f"probe timed out after {timeout:g}s"
    except (OSError, ValueError, http.client.HTTPException, StartError, WireError) as exc:
        return False, str(exc) or type(exc).__name__


async def _exec(command: list[str], target: Target) -> tuple[bool, str]:
    """The command in the container, as `kubectl exec` runs it; a probe that times out (this
    is cancelled) kills what it started."""
    from .streaming import exit_code, start_session  # the wire's imports, once an exec probe runs

    session = await start_session(target, command, stdin=False, tty=False)
    out = bytearray()
    ended = False
    try:
        async for _fd, data in session.output():
            out += data
            del out[:-OUTPUT_TAIL]
        code = exit_code(await session.proc.wait())
        ended = True
    finally:
        if not ended:
            session.hang_up(0)
            await session.proc.wait()
        session.close()
    text = out.decode(errors="replace").strip()
    if code == 0:
        return True, text
    return False, f"command {command!r} exited with {code}: {text}"


def _http_get(host: str, port: int, path: str, scheme: str, timeout: float) -> tuple[bool, str]:
    cls = http.client.HTTPSConnection if scheme.upper() == "HTTPS" else http.client.HTTPConnection
    conn = cls(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"User-Agent": "kube-probe/kubemu"})
        status = conn.getresponse().status
    finally:
        conn.close()
    if 200 <= status < 400:
        return True, f"HTTP {status}"
    return False, f"HTTP probe failed with statuscode: {status}"
