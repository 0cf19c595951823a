"""Running one probe (the I/O half; kubelet/probes.py decides when): exec, httpGet, tcpSocket,
with Kubernetes' success rules - exec exits 0, HTTP status 200-399, TCP connects.

As the kubelet: httpGet and tcpSocket go from the node to the pod's IP unless the probe names a
host (a hostNetwork pod's IP is the node's); an exec probe runs inside the pod's sandbox
(its network, UTS, IPC and mount namespaces, entered with nsenter) when it has one."""
from __future__ import annotations

import asyncio
import http.client
import os
import shutil


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


async def run_probe(probe: dict, container: dict, env: dict[str, str], timeout: float, *,
                    host: str = "127.0.0.1", sandbox_pid: int | None = None) -> tuple[bool, str]:
    """(success, message). Never raises: every failure is a failed probe with its reason.
    `host`: the pod's IP; `sandbox_pid`: its sandbox holder, whose namespaces exec probes enter."""
    try:
        if "exec" in probe:
            return await asyncio.wait_for(_exec(probe["exec"]["command"], container, env, sandbox_pid), timeout)
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
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return False, str(exc) or type(exc).__name__


def sandbox_argv(command: list[str], sandbox_pid: int | None, cwd: str) -> list[str]:
    """`command` run inside the sandbox of holder `sandbox_pid` (entering its mount namespace
    moves the working directory to its root: --wd puts it back)."""
    if sandbox_pid is None:
        return list(command)
    nsenter = shutil.which("nsenter") or "nsenter"
    return [nsenter, f"--target={sandbox_pid}", "--net", "--uts", "--ipc", "--mount", f"--wd={cwd}", "--",
            *command]


async def _exec(command: list[str], container: dict, env: dict[str, str],
                sandbox_pid: int | None = None) -> tuple[bool, str]:
    """An exec probe runs in the container's environment, working directory and sandbox."""
    cwd = container.get("workingDir") or None
    argv = sandbox_argv(command, sandbox_pid, cwd or os.getcwd())
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = await proc.communicate()
    except asyncio.CancelledError:  # the timeout: the probe's process must not outlive it
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        await proc.wait()
        raise
    text = out.decode(errors="replace").strip()[-200:]
    if proc.returncode == 0:
        return True, text
    return False, f"command {command!r} exited with {proc.returncode}: {text}"


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
