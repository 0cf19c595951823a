"""CURVE on the wire (kubemu._wire_auth.CurveAuth, the Server and Client parts): a known key is
served as its identity; an unknown key and a PLAIN or NULL peer are refused at the handshake
(one rate-limited log line; the client's calls end at once with Unauthorized); a client holding
another server key is not let in (its calls end Unavailable, saying so); and no server listens
beyond loopback without CURVE.

Real sockets on 127.0.0.1 in one process (never a public address: the refusal comes before any
bind); waits have generous deadlines and nothing asserts speed."""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import tempfile
import time

import pytest
import zmq

from kubemu import _wire_auth as wa
from kubemu import wire, wirekeys

DEADLINE = 30.0
LOOPBACK = "tcp://127.0.0.1:0"


def run(coro, timeout: float = 90.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.fixture
def state():
    path = tempfile.mkdtemp(prefix="kwc-")
    try:
        wirekeys.ensure_server_keys(path)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _curve_auth(state: str, authorize=None) -> wire.CurveAuth:
    keys = wirekeys.ensure_server_keys(state)
    known = wirekeys.KnownKeys(wirekeys.clients_dir(wirekeys.curve_dir(state)))
    return wire.CurveAuth(keys.public, keys.secret, known, authorize)


def _client(state: str, identity: str) -> wire.CurveCredentials:
    wirekeys.ensure_client_keys(state, identity)
    return wirekeys.client_credentials(state, identity)


def _stranger(state: str) -> wire.CurveCredentials:
    """Credentials of a key pair the server has never seen (and the right server key)."""
    public, secret = zmq.curve_keypair()
    return wire.CurveCredentials(wirekeys.load_public(wirekeys.curve_dir(state) / "server.key"), public, secret)


def _handlers() -> dict:
    def who() -> str | None:
        return wire.peer_identity.get()

    async def swho(n: int):
        for _ in range(n):
            await asyncio.sleep(0)
            yield wire.peer_identity.get()

    def echo(data: bytes) -> bytes:
        return data

    return {"who": who, "swho": swho, "echo": echo}


def _lines(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kubemu.wire" and text in r.getMessage()]


def test_a_known_key_is_served_as_its_identity(state):
    alice = _client(state, "alice")

    async def main():
        async with wire.Server(LOOPBACK, _handlers(), auth=_curve_auth(state)) as srv:
            async with wire.Client(srv.endpoint, credentials=alice, timeout=DEADLINE) as c:
                assert await c.call("who") == "alice"
                assert [i async for i in c.stream("swho", {"n": 3})] == ["alice"] * 3
                big = os.urandom(256 * 1024)
                assert await c.call("echo", {"data": big}) == big

    run(main())


def test_an_unknown_key_is_refused_at_once_and_logged_once(state, caplog):
    caplog.set_level(logging.WARNING, logger="kubemu.wire")
    _client(state, "alice")  # the server knows some key, not the stranger's
    stranger = _stranger(state)

    async def main():
        async with wire.Server(LOOPBACK, _handlers(), auth=_curve_auth(state)) as srv:
            started = time.monotonic()
            for _ in range(5):
                # the timeout is far longer than the test may take: the refusal must end the call
                async with wire.Client(srv.endpoint, credentials=stranger, timeout=600) as c:
                    with pytest.raises(wire.Unauthorized, match="not a key it knows") as err:
                        await c.call("who")
                    assert stranger.public.decode() in str(err.value)
                    with pytest.raises(wire.Unauthorized):
                        await c.call("who", idempotent=True)
                    assert not c.notify("who")
            return time.monotonic() - started

    elapsed = run(main())
    lines = _lines(caplog, f"refused a connection with CURVE key {stranger.public.decode()}")
    # once, then at most once per 10 s for that key (libzmq retried the handshake meanwhile)
    assert 1 <= len(lines) <= 1 + int(elapsed // 10), lines
    assert "not a key this server knows" in lines[0]


@pytest.mark.parametrize("credentials, client_says", [
    (("alice", "s3cret"), "speaks another mechanism"),
    (None, "requires credentials and this client has none"),
], ids=["PLAIN", "NULL"])
def test_plain_and_null_peers_are_refused_and_logged_once(state, caplog, credentials, client_says):
    caplog.set_level(logging.WARNING, logger="kubemu.wire")
    wa.ensure_secret(os.path.join(state, "pki", "wire"), "alice")

    async def main():
        async with wire.Server(LOOPBACK, _handlers(), auth=_curve_auth(state)) as srv:
            for _ in range(3):
                async with wire.Client(srv.endpoint, credentials=credentials, timeout=600) as c:
                    with pytest.raises(wire.Unauthorized, match=client_says):
                        await c.call("who")
                    assert not c.notify("who")

    run(main())
    assert len(_lines(caplog, "refused a connection without CURVE credentials")) == 1


def test_a_key_added_later_is_known_without_a_restart(state):
    async def main():
        async with wire.Server(LOOPBACK, _handlers(), auth=_curve_auth(state)) as srv:
            carol = _stranger(state)
            async with wire.Client(srv.endpoint, credentials=carol, timeout=600) as c:
                with pytest.raises(wire.Unauthorized):
                    await c.call("who")
            # carol's node joins: its public key is written where the server looks
            clients = wirekeys.clients_dir(wirekeys.curve_dir(state))
            clients.mkdir(mode=0o700, exist_ok=True)
            (clients / "carol.key").write_text(f'curve\n    public-key = "{carol.public.decode()}"\n')
            async with wire.Client(srv.endpoint, credentials=carol, timeout=DEADLINE) as c:
                assert await c.call("who") == "carol"

    run(main())


def test_the_identify_hook_names_the_identity_and_its_failure_refuses(state, caplog):
    caplog.set_level(logging.WARNING, logger="kubemu.wire")
    alice, bob = _client(state, "alice"), _client(state, "bob")
    keys = wirekeys.ensure_server_keys(state)

    def identify(key: str) -> str | None:
        if key == alice.public.decode():
            return "system:node:joined-1"  # e.g. a key the apiserver issued at join time
        raise RuntimeError("the hook broke")

    async def main():
        auth = wire.CurveAuth(keys.public, keys.secret, identify)
        async with wire.Server(LOOPBACK, _handlers(), auth=auth) as srv:
            async with wire.Client(srv.endpoint, credentials=bob, timeout=600) as c:
                with pytest.raises(wire.Unauthorized):
                    await c.call("who")
            async with wire.Client(srv.endpoint, credentials=alice, timeout=DEADLINE) as c:
                assert await c.call("who") == "system:node:joined-1"

    run(main())
    assert [r for r in caplog.records if "identifying CURVE key" in r.getMessage()]


def test_authorize_runs_with_the_curve_identity(state):
    alice, mallory = _client(state, "alice"), _client(state, "mallory")

    def authorize(identity: str, method: str, params: dict) -> None:
        if identity != "alice":
            raise wire.Forbidden(f"{identity} may not {method}")

    async def main():
        async with wire.Server(LOOPBACK, _handlers(), auth=_curve_auth(state, authorize)) as srv:
            async with wire.Client(srv.endpoint, credentials=mallory, timeout=DEADLINE) as m, \
                    wire.Client(srv.endpoint, credentials=alice, timeout=DEADLINE) as a:
                with pytest.raises(wire.Forbidden, match="mallory may not who"):
                    await m.call("who")
                assert await a.call("who") == "alice"

    run(main())


def test_a_client_holding_another_server_key_is_not_let_in(state, caplog):
    caplog.set_level(logging.WARNING, logger="kubemu.wire")
    alice = _client(state, "alice")
    impostor_key, _ = zmq.curve_keypair()
    wrong = wire.CurveCredentials(impostor_key, alice.public, alice.secret)

    async def main():
        async with wire.Server(LOOPBACK, _handlers(), auth=_curve_auth(state)) as srv:
            async with wire.Client(srv.endpoint, credentials=wrong, timeout=5.0) as c:
                with pytest.raises(wire.Unavailable, match="ended the CURVE handshake") as err:
                    await c.call("who")
                assert impostor_key.decode() in str(err.value)
            async with wire.Client(srv.endpoint, credentials=alice, timeout=DEADLINE) as c:
                assert await c.call("who") == "alice"  # the server kept serving

    run(main())
    assert len(_lines(caplog, "does not decrypt")) == 1


def test_plain_and_curve_servers_share_one_context(state):
    """The apiserver's case: PLAIN on its ipc socket, CURVE on tcp, one ZAP responder."""
    secrets = os.path.join(state, "pki", "wire")
    plain = wa.load_credentials(wa.ensure_secret(secrets, "bob"))
    alice = _client(state, "alice")

    async def main():
        sock = wire.ipc_endpoint(os.path.join(state, "run"), "s.sock")
        async with wire.Server(sock, _handlers(), auth=wire.ServerAuth(secrets)) as s1, \
                wire.Server(LOOPBACK, _handlers(), auth=_curve_auth(state)) as s2:
            async with wire.Client(s1.endpoint, credentials=plain, timeout=DEADLINE) as p, \
                    wire.Client(s2.endpoint, credentials=alice, timeout=DEADLINE) as c:
                assert await asyncio.gather(p.call("who"), c.call("who")) == ["bob", "alice"]
            async with wire.Client(s2.endpoint, credentials=plain, timeout=600) as p:
                with pytest.raises(wire.Unauthorized):
                    await p.call("who")

    run(main())


# the refusal comes from the constructor, before any bind: no test here listens beyond loopback
@pytest.mark.parametrize("endpoint", ["tcp://192.0.2.1:5555", "tcp://[2001:db8::1]:5555", "tcp://*:0"])
def test_no_server_listens_beyond_loopback_without_curve(state, endpoint):
    for auth in (None, wire.ServerAuth(os.path.join(state, "pki", "wire"))):
        with pytest.raises(ValueError, match="without CURVE"):
            wire.Server(endpoint, _handlers(), auth=auth)
    wire.Server(endpoint, _handlers(), auth=_curve_auth(state))


def test_bad_curve_keys_are_one_clear_error(state):
    public, secret = zmq.curve_keypair()
    with pytest.raises(ValueError, match="the secret key: not a CURVE key"):
        wire.Client(LOOPBACK.replace(":0", ":1"), credentials=wire.CurveCredentials(public, public, b"short"))
    with pytest.raises(ValueError, match="the server's CURVE public key: not a CURVE key"):
        wire.CurveAuth(b"x" * 40 + b"\0", secret, lambda key: None)
    with pytest.raises(ValueError, match="the server's CURVE public key: not a CURVE key"):
        wire.CurveAuth("\u00e9" * 40, secret, lambda key: None)  # not "?" * 40, which is Z85
    creds = wire.CurveCredentials(public.decode(), public, secret)  # str keys are taken as bytes
    assert wire.Client(LOOPBACK.replace(":0", ":1"), credentials=creds).credentials.server_key == public
