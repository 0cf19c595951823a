"""The HTTPS listener's bounds, in-process with fake handlers: slow clients are closed, the
connection cap refuses the excess, TLS 1.2+, client certificates optional."""
from __future__ import annotations

import asyncio
import ssl

import pytest

from components.apiserver.rest.app import RestAPI
from components.apiserver.rest.server import HTTPSServer, ssl_context
from kubemu import eventloop, pki
from kubemu.api.authz import Decision
from kubemu.api.identity import authenticated
from tests.conftest import DEADLINE


def sync(fn):
    """Run the async test `fn(tls)` to its end (within DEADLINE) on a loop of its own: asyncio's,
    and uvloop's (the apiserver's, kubemu.eventloop)."""
    @pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
    def test(tls, loop):
        with asyncio.Runner(loop_factory=eventloop.loop_factory(loop)) as runner:
            return runner.run(asyncio.wait_for(fn(tls), DEADLINE))
    test.__name__ = fn.__name__
    return test


class FakeAuthn:
    def __init__(self):
        self.seen = []

    async def authenticate(self, der, authorization):
        self.seen.append(der)
        return authenticated("someone") if der or authorization else None


class AllowAll:
    def authorize(self, attrs):
        return Decision(True)


@pytest.fixture
def tls(tmp_path):
    ca, _ = pki.ensure_ca(tmp_path)
    for spec in (pki.APISERVER, pki.ADMIN):
        pki.ensure_cert(tmp_path, spec, ca)
    return tmp_path


class IdleWatch:
    """A watch handler that yields nothing, and says when its generator was closed."""

    def __init__(self):
        self.started = asyncio.Event()
        self.closed = asyncio.Event()

    async def __call__(self, **params):
        self.started.set()
        try:
            await asyncio.Event().wait()
            yield {}
        finally:
            self.closed.set()


async def _serve(tls, watch=None, body_timeout: float = 60.0, handlers: dict | None = None, port: int = 0, **kw):
    async def get(resource, name, namespace=None):
        return {"kind": "Namespace", "metadata": {"name": name}}

    async def create(resource, object, namespace=None):
        return object
    authn = FakeAuthn()
    rest = RestAPI({"get": get, "create": create, "watch": watch or IdleWatch(), **(handlers or {})}, authn,
                   AllowAll(), body_timeout=body_timeout)
    server = HTTPSServer(rest.serve, "127.0.0.1", port,
                         ssl_context(str(tls / "apiserver.crt"), str(tls / "apiserver.key"), str(tls / "ca.crt")), **kw)
    await server.start()
    return server, authn


def _client(tls, cert: bool = True) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(tls / "ca.crt"))
    if cert:
        ctx.load_cert_chain(str(tls / "admin.crt"), str(tls / "admin.key"))
    return ctx


async def _get(port: int, ctx: ssl.SSLContext, path: str = "/healthz") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    data = await asyncio.wait_for(reader.read(), DEADLINE)
    writer.close()
    return data


@sync
async def test_client_certificate_is_optional_and_passed_on(tls):
    server, authn = await _serve(tls)
    try:
        assert (await _get(server.port, _client(tls))).endswith(b"ok")
        assert authn.seen[-1] and authn.seen[-1].startswith(b"0")  # DER
        assert (await _get(server.port, _client(tls, cert=False))).endswith(b"ok")
        assert authn.seen[-1] is None
        # no certificate: the request is anonymous, and the authorizer (here AllowAll) decides
        assert b'"name":"x"' in (await _get(server.port, _client(tls, cert=False), "/api/v1/namespaces/x"))
        assert authn.seen[-1] is None
        assert b'"name":"x"' in (await _get(server.port, _client(tls), "/api/v1/namespaces/x"))
    finally:
        await server.close()


@sync
async def test_a_client_going_away_closes_its_idle_watch(tls):
    watch = IdleWatch()
    server, _ = await _serve(tls, watch)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=_client(tls),
                                                      server_hostname="127.0.0.1")
        writer.write(b"GET /api/v1/namespaces?watch=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        assert not watch.closed.is_set()
        writer.close()
        await watch.closed.wait()  # the handler's generator is closed, not left waiting forever
    finally:
        await server.close()


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
@sync
async def test_tls_below_1_2_is_refused(tls):
    server, _ = await _serve(tls)
    try:
        old = _client(tls)
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        old.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        with pytest.raises((ssl.SSLError, ConnectionError)):
            await _get(server.port, old)
    finally:
        await server.close()


@sync
async def test_a_slow_client_is_closed_and_others_are_served(tls):
    server, _ = await _serve(tls, idle_timeout=0.5)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=_client(tls),
                                                      server_hostname="127.0.0.1")
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # never ends its head
        assert await asyncio.wait_for(reader.read(), DEADLINE) == b""  # closed by the server
        writer.close()
        assert (await _get(server.port, _client(tls))).endswith(b"ok")
    finally:
        await server.close()


@sync
async def test_a_body_sent_too_slowly_is_refused(tls):
    server, _ = await _serve(tls, body_timeout=0.5)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=_client(tls),
                                                      server_hostname="127.0.0.1")
        writer.write(b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{")  # and never the rest
        head = await asyncio.wait_for(reader.readline(), DEADLINE)
        assert head.startswith(b"HTTP/1.1 408")
        writer.close()
        assert (await _get(server.port, _client(tls))).endswith(b"ok")
    finally:
        await server.close()


@sync
async def test_connections_over_the_cap_are_closed(tls):
    server, _ = await _serve(tls, max_connections=2)
    held = []
    try:
        for _ in range(2):
            held.append(await asyncio.open_connection("127.0.0.1", server.port, ssl=_client(tls),
                                                      server_hostname="127.0.0.1"))
        while len(server._runner.server.connections) < 2:  # the client's handshake ends before the server's
            await asyncio.sleep(0.01)
        with pytest.raises((ConnectionError, ssl.SSLError, asyncio.IncompleteReadError)):
            data = await _get(server.port, _client(tls))
            if not data:
                raise ConnectionError("closed")
        for _, writer in held:
            writer.close()
        held.clear()
        for _ in range(int(DEADLINE / 0.05)):
            try:
                if (await _get(server.port, _client(tls))).endswith(b"ok"):
                    break
            except (ConnectionError, ssl.SSLError):
                await asyncio.sleep(0.05)
        else:
            raise AssertionError("never served again")
    finally:
        for _, writer in held:
            writer.close()
        await server.close()


def test_ssl_context_asks_for_client_certificates(tls):
    ctx = ssl_context(str(tls / "apiserver.crt"), str(tls / "apiserver.key"), str(tls / "ca.crt"))
    assert ctx.verify_mode == ssl.CERT_OPTIONAL and ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ssl_context(str(tls / "apiserver.crt"), str(tls / "apiserver.key"), None).verify_mode == ssl.CERT_NONE


async def _open(server, tls):
    return await asyncio.open_connection("127.0.0.1", server.port, ssl=_client(tls), server_hostname="127.0.0.1")


@sync
async def test_expect_100_continue_is_answered_before_the_body(tls):
    async def create(resource, object, **params):
        return object
    server, _ = await _serve(tls, handlers={"create": create})
    try:
        reader, writer = await _open(server, tls)
        body = b'{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"x"}}'
        writer.write(b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        assert (await reader.readline()).startswith(b"HTTP/1.1 100 Continue")
        assert await reader.readline() == b"\r\n"
        writer.write(body)
        assert (await reader.readline()).startswith(b"HTTP/1.1 201")
        writer.close()
        reader, writer = await _open(server, tls)
        writer.write(b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nExpect: a-pony\r\nContent-Length: 2\r\n"
                     b"Connection: close\r\n\r\n")
        assert (await reader.readline()).startswith(b"HTTP/1.1 417")
        writer.close()
    finally:
        await server.close()


@sync
async def test_a_client_going_away_cancels_its_read_but_not_its_write(tls):
    read_started, read_cancelled = asyncio.Event(), asyncio.Event()
    write_started, release, write_done = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def get(resource, name, namespace=None):
        read_started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            read_cancelled.set()
            raise

    async def create(resource, object, **params):
        write_started.set()
        await release.wait()
        write_done.set()
        return object
    server, _ = await _serve(tls, handlers={"get": get, "create": create})
    try:
        reader, writer = await _open(server, tls)
        writer.write(b"GET /api/v1/namespaces/x HTTP/1.1\r\nHost: x\r\n\r\n")
        await read_started.wait()
        writer.close()
        await read_cancelled.wait()  # a read left alone would wait forever: it is cancelled

        reader, writer = await _open(server, tls)
        body = b'{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"x"}}'
        writer.write(b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await write_started.wait()
        writer.close()
        while server._runner.server.connections:  # the server has seen it go: its handler is cancelled
            await asyncio.sleep(0.01)
        release.set()
        await write_done.wait()  # and the write went on to its end
    finally:
        await server.close()


def _named_get(who: str) -> dict:
    async def get(resource, name, namespace=None):
        return {"kind": "Namespace", "metadata": {"name": who}}
    return {"get": get}


@sync
async def test_apiservers_permitted_to_share_the_port_share_it(tls):
    """--permit-port-sharing (SO_REUSEPORT): a second apiserver binds the first one's port, and
    once the first is gone every connection reaches the second; without the flag the port is
    taken."""
    first, _ = await _serve(tls, handlers=_named_get("first"), reuse_port=True)
    second = None
    try:
        with pytest.raises(OSError):
            await _serve(tls, handlers=_named_get("second"), port=first.port)
        second, _ = await _serve(tls, handlers=_named_get("second"), reuse_port=True, port=first.port)
        assert second.port == first.port
        await first.close()
        for _ in range(8):
            assert b'"name":"second"' in await _get(second.port, _client(tls), "/api/v1/namespaces/x")
    finally:
        await first.close()
        if second is not None:
            await second.close()
