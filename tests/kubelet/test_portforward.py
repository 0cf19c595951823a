"""kubelet/portforward.py: connections made inside a pod's network namespace, with containerd's errors."""
from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading

import pytest

from kubelet import portforward
from kubelet.sandboxes import SANDBOX_FILE, Record
from kubelet.shim import write_json
from kubemu.child import proc_stat
from kubemu.nsutil import ns_inode
from tests.conftest import DEADLINE, wait_for

NEEDS_NETNS = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                 reason="a network namespace of its own needs root and unshare(1)")

# a server on 127.0.0.1 of a new network namespace: it prints its port, then echoes in upper case
SERVER = r"""
import socket, subprocess, sys
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    c.sendall(c.recv(100).upper())
    c.close()
"""


@pytest.fixture
def pod_netns():
    proc = subprocess.Popen(["unshare", "--net", sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        yield portforward.Netns(proc.pid, proc_stat(proc.pid)[1], ns_inode(proc.pid, "net")), port
    finally:
        proc.kill()
        proc.wait()


def netns_of_every_thread() -> set[int]:
    return {os.stat(f"/proc/self/task/{tid}/ns/net").st_ino for tid in os.listdir("/proc/self/task")}


@NEEDS_NETNS
def test_a_server_on_the_pods_localhost_is_reached_and_no_kubelet_thread_moves(pod_netns):
    netns, port = pod_netns
    before = netns_of_every_thread()

    async def talk() -> bytes:
        sock = await portforward.connect(netns, "sb", port)
        try:
            loop = asyncio.get_running_loop()
            await loop.sock_sendall(sock, b"hello")
            return await asyncio.wait_for(loop.sock_recv(sock, 100), DEADLINE)
        finally:
            sock.close()
    assert asyncio.run(talk()) == b"HELLO"
    assert netns_of_every_thread() == before == {ns_inode(os.getpid(), "net")}
    # the same port on the node's own localhost is somebody else's (nobody's)
    with pytest.raises(portforward.ForwardError):
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
        probe.close()
        asyncio.run(portforward.connect(None, "sb", free))


@NEEDS_NETNS
def test_a_refused_port_is_containerds_message(pod_netns):
    netns, port = pod_netns
    path = netns.path
    with pytest.raises(portforward.ForwardError) as err:
        asyncio.run(portforward.connect(netns, "uid-1", port + 1 if port < 65535 else port - 1))
    other = port + 1 if port < 65535 else port - 1
    assert str(err.value).startswith(
        f'failed to execute portforward in network namespace "{path}": failed to connect to localhost:{other} '
        f'inside namespace "uid-1", IPv4: dial tcp4 127.0.0.1:{other}: connect: connection refused IPv6 ')
    assert portforward.forward_error(other, "uid-1", err.value).startswith(
        f"error forwarding port {other} to pod uid-1, uid : failed to execute portforward")


@NEEDS_NETNS
def test_a_namespace_that_is_not_the_sandboxs_any_more_is_not_entered(pod_netns):
    netns, port = pod_netns
    with pytest.raises(portforward.ForwardError, match="is not the sandbox's any more"):
        asyncio.run(portforward.connect(portforward.Netns(netns.pid, netns.start, 1), "sb", port))
    with pytest.raises(portforward.ForwardError, match="is not the sandbox's any more: process .* has exited"):
        asyncio.run(portforward.connect(portforward.Netns(netns.pid, netns.start + 1, netns.inode), "sb", port))
    with pytest.raises(portforward.ForwardError, match="is not the sandbox's any more: cannot open"):
        asyncio.run(portforward.connect(portforward.Netns(0, 0, netns.inode), "sb", port))


def test_the_namespace_a_pod_is_reached_in(tmp_path):
    pod_dir = tmp_path / "default_web_u1"
    pod_dir.mkdir()
    assert portforward.sandbox_netns(str(pod_dir)) == ("default_web_u1", None)  # no sandbox: the node's
    me = os.getpid()
    start = int(open(f"/proc/{me}/stat").read().rpartition(")")[2].split()[19])
    own = Record(1, "u1-1", me, start, ns_inode(me, "net"), {}, ())
    write_json(str(pod_dir / SANDBOX_FILE), own.as_json())
    assert portforward.sandbox_netns(str(pod_dir)) == ("u1-1", None)  # hostNetwork
    other = Record(1, "u1-1", me, start, 12345, {}, ())
    write_json(str(pod_dir / SANDBOX_FILE), other.as_json())
    assert portforward.sandbox_netns(str(pod_dir)) == ("u1-1", portforward.Netns(me, start, 12345))
    gone = Record(1, "u1-1", me, start + 1, 12345, {}, ())
    write_json(str(pod_dir / SANDBOX_FILE), gone.as_json())
    with pytest.raises(portforward.ForwardError, match='sandbox "u1-1": the sandbox is not running'):
        portforward.sandbox_netns(str(pod_dir))


def test_a_forward_relays_half_closes_and_is_flow_controlled():
    from kubelet.streaming import Credit

    async def main():
        got = bytearray()
        more = asyncio.Event()

        async def pod_side(reader, writer):
            got.extend(await reader.read())  # until the forward's half close
            writer.write(b"x" * 100)
            await writer.drain()
            await more.wait()
            writer.write(b"y" * 5)
            writer.close()
        server = await asyncio.start_server(pod_side, "127.0.0.1", 0)
        sock = await portforward.connect(None, "sb", server.sockets[0].getsockname()[1])
        f = portforward.Forward(sock, Credit(window=10))
        await f.write(b"abc")
        f.close_input()
        out = f.output()
        first = await asyncio.wait_for(out.__anext__(), DEADLINE)  # within the window: passed on
        more.set()
        waiting = asyncio.ensure_future(out.__anext__())
        deadline = asyncio.get_running_loop().time() + DEADLINE
        while not f.credit._more._waiters:  # the second chunk waits for the caller's ack
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
        blocked = not waiting.done()
        f.credit.give(1000)
        second = await asyncio.wait_for(waiting, DEADLINE)
        rest = [data async for data in out]
        f.close()
        server.close()
        return bytes(got), first, second + b"".join(rest), blocked
    got, first, second, blocked = asyncio.run(main())
    assert (got, first, second, blocked) == (b"abc", b"x" * 100, b"y" * 5, True)


def test_the_netns_thread_is_a_thread_of_its_own():
    # the namespace is entered only in a thread made for it, never in a pool's reused thread
    names = []
    original = threading.Thread.start

    def spy(self):
        names.append(self.name)
        return original(self)
    threading.Thread.start = spy
    try:
        with pytest.raises(portforward.ForwardError):
            portforward.sockets_in(portforward.Netns(0, 0, 1))
    finally:
        threading.Thread.start = original
    assert names == ["portforward-netns"]
    wait_for(lambda: "portforward-netns" not in {t.name for t in threading.enumerate()})


@NEEDS_NETNS
def test_a_failure_inside_the_netns_thread_is_a_forward_error(pod_netns, monkeypatch):
    netns, _ = pod_netns

    def broken() -> None:
        raise RuntimeError("no sockets today")
    monkeypatch.setattr(portforward, "_pair", broken)
    with pytest.raises(portforward.ForwardError, match="no sockets today"):
        portforward.sockets_in(netns)


@NEEDS_NETNS
def test_a_cancelled_connect_closes_the_sockets_its_thread_made(pod_netns, monkeypatch):
    netns, port = pod_netns
    made, release = [], threading.Event()
    pair = portforward._pair

    def slow_pair():
        release.wait(DEADLINE)
        made.extend(s for s in pair() if s is not None)
        return made[0], (made[1] if len(made) > 1 else None)
    monkeypatch.setattr(portforward, "_pair", slow_pair)

    async def cancel() -> None:
        task = asyncio.ensure_future(portforward.connect(netns, "sb", port))
        await asyncio.sleep(0)
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.get_running_loop().run_in_executor(None, wait_for, lambda: made and all(
            s.fileno() == -1 for s in made))
    asyncio.run(cancel())
