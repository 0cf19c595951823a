"""The userspace proxy with real sockets on random 127/8 addresses and ports: TCP round-robin,
affinity, a dead endpoint skipped, no endpoint → reset, endpoint changes, UDP, and two proxies
sharing one ClusterIP:port with SO_REUSEPORT."""
from __future__ import annotations

import asyncio
import logging
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import textwrap

import pytest

from components.kube_proxy.endpoints import Endpoint, ServicePort
from components.kube_proxy.userspace import UserspaceProxier
from components.kube_proxy.userspace_plan import Listener
from tests.conftest import DEADLINE


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


def free_address() -> tuple[str, int]:
    """A random loopback address (outside kubemu's 127.96.0.0/12) and a port free on it."""
    address = f"127.{random.randint(130, 250)}.{random.randint(0, 255)}.{random.randint(1, 254)}"
    with socket.socket() as s:
        s.bind((address, 0))
        return address, s.getsockname()[1]


def service(address: str, port: int, endpoints=(), node_port: int | None = None, protocol: str = "TCP",
            affinity: int | None = None) -> ServicePort:
    eps = tuple(Endpoint(ip=ip, port=p, node="node-0", ready=True, serving=True, terminating=False)
                for ip, p in endpoints)
    return ServicePort(namespace="default", name="web", port_name="", protocol=protocol, cluster_ip=address,
                       port=port, node_port=node_port, external_ips=(), affinity_timeout=affinity,
                       internal_local=False, external_local=False, endpoints=eps, external_endpoints=eps,
                       all_endpoints=eps)


class Backends:
    """TCP servers on 127.0.0.1 that read a request up to its EOF (the client's half-close) and
    answer `<name>:<request>`; UDP ones that answer each datagram the same way."""

    def __init__(self):
        self.servers: list = []

    async def tcp(self, name: str) -> tuple[str, int]:
        async def answer(reader, writer):
            data = await reader.read()
            writer.write(name.encode() + b":" + data)
            await writer.drain()
            writer.close()
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        self.servers.append(server)
        return server.sockets[0].getsockname()[:2]

    async def udp(self, name: str) -> tuple[str, int]:
        class Echo(asyncio.DatagramProtocol):
            def connection_made(self, transport):
                self.transport = transport

            def datagram_received(self, data, addr):
                self.transport.sendto(name.encode() + b":" + data, addr)
        transport, _ = await asyncio.get_running_loop().create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
        self.servers.append(transport)
        return transport.get_extra_info("sockname")[:2]

    def close(self):
        for server in self.servers:
            server.close()


def dead_endpoint() -> tuple[str, int]:
    with socket.socket() as s:          # bound, never listening: connections are refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[:2]


async def fetch(address: str, port: int, request: bytes = b"hi") -> bytes:
    reader, writer = await asyncio.open_connection(address, port)
    try:
        writer.write(request)
        writer.write_eof()
        return await reader.read()
    finally:
        writer.close()


async def with_proxy(body, **kwargs):
    backends = Backends()
    proxier = UserspaceProxier(privileged_below=1024, **{"nodeport_addresses": ["127.0.0.1/32"], **kwargs})
    try:
        await body(proxier, backends)
    finally:
        await proxier.close()
        backends.close()
    assert proxier.listening == set()


def refused(address: str, port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex((address, port)) != 0


def test_two_backends_served_round_robin_with_half_close():
    address, port = free_address()

    async def body(proxier, backends):
        a, b = await backends.tcp("a"), await backends.tcp("b")
        await proxier.sync([service(address, port, [a, b])])
        answers = [await fetch(address, port, b"req%d" % i) for i in range(4)]
        assert answers == [b"a:req0", b"b:req1", b"a:req2", b"b:req3"]
    run(with_proxy(body))
    assert refused(address, port)


def test_client_ip_affinity_sticks():
    address, port = free_address()

    async def body(proxier, backends):
        a, b = await backends.tcp("a"), await backends.tcp("b")
        await proxier.sync([service(address, port, [a, b], affinity=60)])
        assert len({(await fetch(address, port)).split(b":")[0] for _ in range(5)}) == 1
    run(with_proxy(body))


def test_a_dead_endpoint_is_skipped():
    address, port = free_address()

    async def body(proxier, backends):
        a = await backends.tcp("a")
        await proxier.sync([service(address, port, [dead_endpoint(), a])])
        assert [await fetch(address, port) for _ in range(3)] == [b"a:hi"] * 3
    run(with_proxy(body))


def test_no_endpoints_resets_the_connection_at_once():
    address, port = free_address()

    async def body(proxier, backends):
        await proxier.sync([service(address, port, [])])
        with pytest.raises(ConnectionResetError):
            await fetch(address, port)
        await proxier.sync([service(address, port, [dead_endpoint()])])   # none answers: the same
        with pytest.raises(ConnectionResetError):
            await fetch(address, port)
    run(with_proxy(body))


def test_endpoint_changes_are_applied_and_a_gone_service_stops_listening():
    address, port = free_address()

    async def body(proxier, backends):
        a, b = await backends.tcp("a"), await backends.tcp("b")
        await proxier.sync([service(address, port, [a])])
        assert await fetch(address, port) == b"a:hi"
        await proxier.sync([service(address, port, [b])])
        assert await fetch(address, port) == b"b:hi"
        await proxier.sync([])
        assert proxier.listening == set() and refused(address, port)
    run(with_proxy(body))


def test_node_port_on_the_bind_address():
    address, port = free_address()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        node_port = s.getsockname()[1]

    async def body(proxier, backends):
        a = await backends.tcp("a")
        await proxier.sync([service(address, port, [a], node_port=node_port)])
        assert Listener("TCP", "127.0.0.1", node_port) in proxier.listening
        assert await fetch("127.0.0.1", node_port) == b"a:hi"
    run(with_proxy(body))
    assert refused("127.0.0.1", node_port)


def test_udp_through_the_proxy_and_idle_sockets_closed():
    address, port = free_address()

    async def body(proxier, backends):
        a = await backends.udp("a")
        await proxier.sync([service(address, port, [a], protocol="UDP")])
        loop = asyncio.get_running_loop()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.setblocking(False)
            await loop.sock_connect(client, (address, port))
            for i in range(3):
                await loop.sock_sendall(client, b"q%d" % i)
                assert await loop.sock_recv(client, 100) == b"a:q%d" % i
        assert proxier.udp_sessions() == 1
        while proxier.udp_sessions():           # the idle timeout closes the client's socket
            await asyncio.sleep(0.02)
    run(with_proxy(body, udp_idle_timeout=0.5))


def test_udp_socket_closed_when_its_endpoint_leaves():
    address, port = free_address()

    async def body(proxier, backends):
        a, b = await backends.udp("a"), await backends.udp("b")
        await proxier.sync([service(address, port, [a], protocol="UDP")])
        loop = asyncio.get_running_loop()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as client:
            client.setblocking(False)
            await loop.sock_connect(client, (address, port))
            await loop.sock_sendall(client, b"x")
            assert await loop.sock_recv(client, 100) == b"a:x"
            await proxier.sync([service(address, port, [b], protocol="UDP")])
            assert proxier.udp_sessions() == 0
            await loop.sock_sendall(client, b"y")
            assert await loop.sock_recv(client, 100) == b"b:y"
    run(with_proxy(body, udp_idle_timeout=DEADLINE))


def test_two_proxies_share_one_address_and_one_serves_on_when_the_other_closes():
    """Every node's proxy listens on the same ClusterIP:port (SO_REUSEPORT); the kernel spreads
    connections over them. Each proxy here has its own backend, to tell them apart."""
    address, port = free_address()

    async def body():
        backends = Backends()
        first = UserspaceProxier(privileged_below=1024)
        second = UserspaceProxier(privileged_below=1024)
        try:
            await first.sync([service(address, port, [await backends.tcp("first")])])
            await second.sync([service(address, port, [await backends.tcp("second")])])
            seen = set()
            while seen != {b"first", b"second"}:   # bounded by run's deadline
                seen.add((await fetch(address, port)).split(b":")[0])
            await first.close()
            assert {(await fetch(address, port)).split(b":")[0] for _ in range(20)} == {b"second"}
        finally:
            await first.close()
            await second.close()
            backends.close()
    run(body())
    assert refused(address, port)


def test_close_ends_spliced_connections():
    address, port = free_address()

    async def body():
        async def hold(reader, writer):
            await reader.read()
            writer.close()
        backend = await asyncio.start_server(hold, "127.0.0.1", 0)
        proxier = UserspaceProxier(privileged_below=1024)
        try:
            await proxier.sync([service(address, port, [backend.sockets[0].getsockname()[:2]])])
            reader, writer = await asyncio.open_connection(address, port)
            writer.write(b"open")
            await writer.drain()
            while not proxier.connections():
                await asyncio.sleep(0.01)
            await proxier.close()
            with pytest.raises(ConnectionResetError):   # the client learns the proxy is gone
                await reader.read()
            writer.close()
        finally:
            await proxier.close()
            backend.close()
    run(body())


CHILD = textwrap.dedent("""
    import asyncio, logging, sys
    from components.kube_proxy.endpoints import ServicePort
    from components.kube_proxy.userspace import UserspaceProxier
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    address, low, high = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    class Recorder:
        def event(self, obj, type_, reason, message):
            print("event", obj["metadata"]["name"], type_, reason)

    def svc(name, port):
        return ServicePort("default", name, "", "TCP", address, port, None, (), None, False, False, (), (), ())

    async def main():
        proxier = UserspaceProxier(recorder=Recorder())
        for _ in range(3):
            await proxier.sync([svc("low", low), svc("high", high)])
        print("listening", sorted(l.port for l in proxier.listening))
        await proxier.close()
    asyncio.run(main())
""")


NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]
NO_BIND_CAP = ["--inh-caps=-net_bind_service", "--bounding-set=-net_bind_service"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to drop privileges")
@pytest.mark.parametrize("drop", [NOBODY, NO_BIND_CAP], ids=["not-root", "root-without-cap"])
def test_without_cap_net_bind_service_a_low_port_is_said_once(drop):
    """As kubemu runs without privileges: the low port is not served, said once (a log line and
    an Event), the others are."""
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start") as f:
        start = int(f.read())
    if start < 2:
        pytest.skip(f"net.ipv4.ip_unprivileged_port_start is {start}: every port is unprivileged")
    runs = subprocess.run(["setpriv", *drop, sys.executable, "-c", "import components.kube_proxy.userspace"],
                          capture_output=True, text=True, timeout=DEADLINE)
    if runs.returncode != 0:   # e.g. an interpreter under a home the user may not enter
        pytest.skip(f"setpriv {' '.join(drop)}: this python cannot run: {runs.stderr.strip()[-200:]}")
    address, high = free_address()
    low = random.randint(1, start - 1)
    done = subprocess.run(["setpriv", *drop, sys.executable, "-c", CHILD, address, str(low), str(high)],
                          capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["event low Warning PrivilegedPort", f"listening [{high}]"]
    assert done.stderr.splitlines() == [f"default/low: cannot serve {address}:{low}/TCP: "
                                        f"ports below {start} need CAP_NET_BIND_SERVICE"]


class Recorder:
    def __init__(self):
        self.events = []

    def event(self, obj, type_, reason, message):
        self.events.append((obj["metadata"]["name"], type_, reason, message))


def test_a_port_taken_by_another_socket_is_said_once_and_retried():
    address, port = free_address()
    other = socket.socket()            # no SO_REUSEPORT: this address:port is not shareable
    other.bind((address, port))
    other.listen()

    async def body(proxier, backends):
        a = await backends.tcp("a")
        for _ in range(3):
            await proxier.sync([service(address, port, [a])])
        assert proxier.listening == set()
        assert recorder.events == [("web", "Warning", "ListenFailed",
                                    f"default/web: cannot listen on {address}:{port}/TCP: Address already in use")]
        other.close()
        await proxier.sync([service(address, port, [a])])
        assert await fetch(address, port) == b"a:hi"
    recorder = Recorder()
    try:
        run(with_proxy(body, recorder=recorder))
    finally:
        other.close()


def test_a_reset_by_the_endpoint_reaches_the_client_and_the_proxy_serves_on(caplog):
    address, port = free_address()

    async def body(proxier, backends):
        async def rude(reader, writer):
            await reader.read(1)
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                                       struct.pack("ii", 1, 0))
            writer.transport.abort()
        server = await asyncio.start_server(rude, "127.0.0.1", 0)
        backends.servers.append(server)
        await proxier.sync([service(address, port, [server.sockets[0].getsockname()[:2]])])
        reader, writer = await asyncio.open_connection(address, port)
        writer.write(b"x")
        with pytest.raises(ConnectionResetError):
            await reader.read()
        writer.close()
        while proxier.connections():
            await asyncio.sleep(0.01)
        a = await backends.tcp("a")
        await proxier.sync([service(address, port, [a])])
        assert await fetch(address, port) == b"a:hi"
    run(with_proxy(body))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]


SIBLING = textwrap.dedent("""
    import asyncio, sys
    from components.kube_proxy.endpoints import Endpoint, ServicePort
    from components.kube_proxy.userspace import UserspaceProxier
    address, port = sys.argv[1], int(sys.argv[2])
    node_port = int(sys.argv[3]) if len(sys.argv) > 3 else None   # served on 127.0.0.1

    async def answer(reader, writer):
        writer.write(b"sibling:" + await reader.read())
        writer.close()

    async def main():
        backend = await asyncio.start_server(answer, "127.0.0.1", 0)
        ep = Endpoint(*backend.sockets[0].getsockname()[:2], "node-1", True, True, False)
        proxier = UserspaceProxier(privileged_below=1024, nodeport_addresses=["127.0.0.1/32"])
        await proxier.sync([ServicePort("default", "web", "", "TCP", address, port, node_port, (), None,
                                        False, False, (ep,), (ep,), (ep,))])
        assert len(proxier.listening) == 1 + (node_port is not None)
        print("ready", flush=True)
        await asyncio.Event().wait()
    asyncio.run(main())
""")


def test_another_nodes_proxy_killed_leaves_this_one_serving():
    """Node proxies are processes of their own: one killed -9, its share of the address is gone
    with it and the others take every new connection."""
    address, port = free_address()
    sibling = subprocess.Popen([sys.executable, "-c", SIBLING, address, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert sibling.stdout.readline() == "ready\n"

        async def body(proxier, backends):
            await proxier.sync([service(address, port, [await backends.tcp("here")])])
            seen = set()
            while seen != {b"here", b"sibling"}:   # bounded by run's deadline
                seen.add((await fetch(address, port)).split(b":")[0])
            sibling.kill()
            await asyncio.get_running_loop().run_in_executor(None, sibling.wait)
            assert {(await fetch(address, port)).split(b":")[0] for _ in range(20)} == {b"here"}
        run(with_proxy(body))
    finally:
        sibling.kill()
        sibling.wait()
        sibling.stdout.close()


def test_another_clusters_proxy_on_the_same_node_port_is_not_joined():
    """Two host-mode clusters on one machine may allocate the same NodePort, both on 127.0.0.1:
    a NodePort listener is bound without SO_REUSEPORT, so the second cluster's proxy gets
    EADDRINUSE (said once) instead of silently taking half of the first one's connections, and
    serves it once the first is gone."""
    other_ip, other_port = free_address()   # each cluster's ClusterIPs are in a block of its own
    address, port = free_address()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        node_port = s.getsockname()[1]
    other = subprocess.Popen([sys.executable, "-c", SIBLING, other_ip, str(other_port), str(node_port)],
                             stdout=subprocess.PIPE, text=True)
    recorder = Recorder()
    try:
        assert other.stdout.readline() == "ready\n"

        async def body(proxier, backends):
            here = service(address, port, [await backends.tcp("here")], node_port=node_port)
            for _ in range(3):
                await proxier.sync([here])
            assert proxier.listening == {Listener("TCP", address, port)}
            assert proxier.unopened == {Listener("TCP", "127.0.0.1", node_port)}
            assert recorder.events == [("web", "Warning", "ListenFailed", f"default/web: cannot listen on "
                                        f"127.0.0.1:{node_port}/TCP: Address already in use")]
            assert {await fetch("127.0.0.1", node_port) for _ in range(20)} == {b"sibling:hi"}
            other.kill()
            await asyncio.get_running_loop().run_in_executor(None, other.wait)
            await proxier.sync([here])
            assert proxier.unopened == set()
            assert await fetch("127.0.0.1", node_port) == b"here:hi"
        run(with_proxy(body, recorder=recorder))
    finally:
        other.kill()
        other.wait()
        other.stdout.close()
