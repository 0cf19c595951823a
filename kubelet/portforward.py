"""Port forwarding into a pod: a TCP connection to localhost:<port> inside the pod's network namespace.

As containerd's PortForward does: the connection is made from within the sandbox's network
namespace (its holder's /proc/<pid>/ns/net), so a server bound to 127.0.0.1 in the pod is
reached; a pod without a sandbox of its own (host network, or a node without pod networks)
is reached on the node's 127.0.0.1. A socket keeps the namespace it was created in, so only
socket() runs inside: in a thread made for it, which setns()es into the pod's namespace, makes
the sockets and ends. That thread never runs anything else, so no other work of the kubelet
ever finds itself in a pod's network; the connect itself happens on the kubelet's event loop.

The errors are containerd's, which the kubelet puts after "error forwarding port <port> to pod
<sandbox id>, uid : " on the error stream kubectl prints.
"""
from __future__ import annotations

import asyncio
import os
import socket
import threading
from dataclasses import dataclass

from kubemu import nsutil

from . import holder
from .sandboxes import read_record

CHUNK = 32 * 1024  # bytes read from the pod's socket per stream item


class ForwardError(Exception):
    """The connection cannot be made; the text is containerd's."""


@dataclass(frozen=True)
class Netns:
    """A sandbox's network namespace: its holder's, named by PID and start ticks and checked
    on entry (kubemu.nsutil.open_ns), so a holder whose PID was reused is never entered."""
    pid: int
    start: int
    inode: int

    @property
    def path(self) -> str:
        return f"/proc/{self.pid}/ns/net"


def sandbox_netns(pod_dir: str) -> tuple[str, Netns | None]:
    """(sandbox id, its network namespace) for a pod; None when the pod has no network
    namespace of its own. ForwardError when its sandbox has gone."""
    record = read_record(pod_dir)
    if record is None:
        return os.path.basename(pod_dir), None
    if not holder.alive(record.pid, record.start):
        raise ForwardError(f'failed to find network namespace for sandbox "{record.id}": the sandbox is not running')
    if record.netns_inode == nsutil.ns_inode(os.getpid(), "net"):
        return record.id, None  # hostNetwork: the node's own namespace
    return record.id, Netns(record.pid, record.start, record.netns_inode)


def sockets_in(netns: Netns | None) -> tuple[socket.socket, socket.socket | None]:
    """An IPv4 and (where the namespace has it) an IPv6 TCP socket created inside `netns` (the
    caller's when None), from a thread of their own."""
    if netns is None:
        return _pair()
    result: list = []

    def run() -> None:
        try:
            fd = nsutil.open_ns(netns.pid, "net", netns.start, netns.inode)
        except nsutil.NamespaceGone as exc:
            result.append(ForwardError(f'network namespace "{netns.path}" is not the sandbox\'s any more: {exc}'))
            return
        try:
            nsutil.setns(fd, nsutil.CLONE_NEWNET)  # this thread only; it ends after socket()
            result.append(_pair())
        except OSError as exc:
            result.append(ForwardError(f'failed to enter network namespace "{netns.path}": {exc.strerror}'))
        except BaseException as exc:  # noqa: BLE001 - said to the caller, never lost with the thread
            result.append(ForwardError(f'failed to enter network namespace "{netns.path}": {exc!r}'))
        finally:
            os.close(fd)

    thread = threading.Thread(target=run, name="portforward-netns", daemon=True)
    thread.start()
    thread.join()
    if isinstance(result[0], Exception):
        raise result[0]
    return result[0]


def _pair() -> tuple[socket.socket, socket.socket | None]:
    four = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        six = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:  # no IPv6 in this namespace
        six = None
    return four, six


async def connect(netns: Netns | None, sandbox: str, port: int) -> socket.socket:
    """A connected, non-blocking socket to localhost:`port` in the namespace: 127.0.0.1, then ::1,
    as containerd tries them; ForwardError with both failures otherwise."""
    made = asyncio.ensure_future(asyncio.to_thread(sockets_in, netns))
    try:
        four, six = await asyncio.shield(made)
    except asyncio.CancelledError:  # the thread still finishes: its sockets are closed then
        made.add_done_callback(_close_made)
        raise
    loop = asyncio.get_running_loop()
    errors = []
    for sock, family, address in ((four, "tcp4", ("127.0.0.1", port)), (six, "tcp6", ("::1", port))):
        if sock is None:
            errors.append(f"dial {family}: address family not supported by the namespace")
            continue
        sock.setblocking(False)
        try:
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            shown = f"[{address[0]}]" if family == "tcp6" else address[0]
            reason = os.strerror(exc.errno) if exc.errno else str(exc)  # asyncio's text names the address
            errors.append(f"dial {family} {shown}:{port}: connect: {reason.lower()}")
            continue
        except BaseException:
            sock.close()
            if six is not None and sock is four:
                six.close()
            raise
        if sock is four and six is not None:
            six.close()
        return sock
    where = netns.path if netns is not None else "host"
    raise ForwardError(f'failed to execute portforward in network namespace "{where}": failed to connect to '
                       f'localhost:{port} inside namespace "{sandbox}", IPv4: {errors[0]} IPv6 {errors[1]} ')


def _close_made(made: asyncio.Future) -> None:
    if made.cancelled() or made.exception() is not None:
        return
    for sock in made.result():
        if sock is not None:
            sock.close()


def forward_error(port: int, sandbox: str, err: Exception) -> str:
    """The line the kubelet writes on a forward's error stream."""
    return f"error forwarding port {port} to pod {sandbox}, uid : {err}"


class Forward:
    """One forwarded connection: its socket, and the window of what the caller has not yet
    acknowledged (kubelet/streaming.py Credit), so a slow client blocks the pod's sender."""

    def __init__(self, sock: socket.socket, credit):
        self.sock = sock
        self.credit = credit
        self.write_closed = False

    async def output(self):
        """What the pod sends, until it closes its side (or the connection is reset)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await loop.sock_recv(self.sock, CHUNK)
            except (ConnectionError, OSError):
                return
            if not data:
                return
            await self.credit.take(len(data))
            yield data

    async def write(self, data: bytes) -> None:
        if self.write_closed:
            return
        try:
            await asyncio.get_running_loop().sock_sendall(self.sock, data)
        except (ConnectionError, OSError):  # the pod closed its side: what it was sent is lost
            pass

    def close_input(self) -> None:
        """The client sends no more: the pod reads EOF (a half close, as the data stream's FIN)."""
        if not self.write_closed:
            self.write_closed = True
            try:
                self.sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()
