"""kubemu._wire_auth and the wire's authentication: secret files, PLAIN + ZAP, the identity
handlers see, refusals (one rate-limited log line each), and the authorize hook.

Real sockets in one process; waits have generous deadlines and nothing asserts speed."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import stat
import tempfile
import time

import pytest

from kubemu import _wire_auth as wa
from kubemu import wire

DEADLINE = 30.0


def run(coro, timeout: float = 90.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.fixture
def sockdir():
    path = tempfile.mkdtemp(prefix="kwa-")  # short: ipc paths are limited to 107 bytes
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def secrets(sockdir):
    return os.path.join(sockdir, "pki", "wire")


def _creds(secrets: str, identity: str) -> wire.Credentials:
    return wa.load_credentials(wa.ensure_secret(secrets, identity))


def _who() -> str | None:
    return wire.peer_identity.get()


def _handlers() -> dict:
    def who(user: str | None = None) -> list:
        return [_who(), user]

    async def awho(user: str | None = None) -> list:
        await asyncio.sleep(0)
        return [_who(), user]

    async def swho(n: int):
        for _ in range(n):
            await asyncio.sleep(0)
            yield _who()

    return {"who": who, "awho": awho, "swho": swho}


def _refusals(caplog, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kubemu.wire" and text in r.getMessage()]


# -------------------------------------------------------------------------- secret files

def test_secret_files_are_private_and_kept(secrets):
    path = wa.ensure_secret(secrets, "system:node:node-0")
    assert path.name == "system:node:node-0.secret"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(secrets).st_mode) == 0o700
    first = path.read_text()
    assert wa.ensure_secret(secrets, "system:node:node-0") == path and path.read_text() == first
    creds = wa.load_credentials(path)
    assert creds == ("system:node:node-0", first.strip()) and len(creds.secret) >= 32
    assert wa.lookup_secret(secrets, "system:node:node-0") == creds.secret
    assert wa.lookup_secret(secrets, "nobody") is None


def test_racing_writers_agree_on_one_whole_secret(secrets):
    import concurrent.futures

    def make_and_read(_):
        return wa.read_secret(wa.ensure_secret(secrets, "racer"))  # never half written: ValueError

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        seen = set(pool.map(make_and_read, range(64)))
    assert len(seen) == 1
    assert os.listdir(secrets) == ["racer.secret"], "no temporary file is left"


def test_a_loose_secrets_directory_is_tightened(secrets):
    os.makedirs(secrets, mode=0o755)
    os.chmod(secrets, 0o755)
    wa.ensure_secret(secrets, "a")
    assert stat.S_IMODE(os.stat(secrets).st_mode) == 0o700


@pytest.mark.parametrize("bad", ["", ".hidden", "a/b", "a b", "x" * 254, "tab\tbed"])
def test_bad_identities_are_refused(secrets, bad):
    with pytest.raises(ValueError, match="bad wire identity"):
        wa.ensure_secret(secrets, bad)


def test_unusable_credential_files_are_one_clear_error(sockdir):
    empty = os.path.join(sockdir, "alice.secret")
    open(empty, "w").close()
    with pytest.raises(ValueError, match="expected one secret"):
        wa.load_credentials(empty)
    with pytest.raises(ValueError, match="cannot read wire credentials"):
        wa.load_credentials(os.path.join(sockdir, "missing.secret"))
    with pytest.raises(ValueError, match="named <identity>.secret"):
        wa.load_credentials(os.path.join(sockdir, "alice.txt"))
    with pytest.raises(argparse.ArgumentTypeError, match="expected one secret"):
        wa.credentials_flag(empty)


def test_state_credentials(sockdir):
    assert wa.state_credentials(sockdir) is None  # a cluster without wire secrets
    made = _creds(str(wa.secrets_dir(sockdir)), wa.ADMIN)
    assert wa.state_credentials(sockdir) == made


# -------------------------------------------------------------------------- authentication

def test_handlers_see_the_authenticated_identity_not_a_user_param(sockdir, secrets):
    alice, bob = _creds(secrets, "alice"), _creds(secrets, "system:node:n1")

    async def main():
        async with wire.Server(wire.ipc_endpoint(sockdir, "s.sock"), _handlers(), auth=wire.ServerAuth(secrets)) as srv:
            async with wire.Client(srv.endpoint, credentials=alice, timeout=DEADLINE) as a, \
                    wire.Client(srv.endpoint, credentials=bob, timeout=DEADLINE) as b:
                got = await asyncio.gather(a.call("who", {"user": "system:admin"}), b.call("awho", {"user": "x"}),
                                           a.call("awho"), b.call("who"))
                assert got == [["alice", "system:admin"], ["system:node:n1", "x"], ["alice", None],
                               ["system:node:n1", None]]
                assert [i async for i in a.stream("swho", {"n": 3})] == ["alice"] * 3
        assert _who() is None  # nothing leaks into the caller's context

    run(main())


def test_a_wrong_secret_is_refused_at_once_with_one_log_line(sockdir, secrets, caplog):
    caplog.set_level(logging.WARNING, logger="kubemu.wire")
    _creds(secrets, "alice")

    async def main():
        async with wire.Server(wire.ipc_endpoint(sockdir, "s.sock"), _handlers(), auth=wire.ServerAuth(secrets)) as srv:
            started = time.monotonic()
            for _ in range(5):
                # the timeout is far longer than the test may take: the refusal must end the call
                async with wire.Client(srv.endpoint, credentials=("alice", "wrong"), timeout=600) as c:
                    with pytest.raises(wire.Unauthorized, match="refused the credentials of 'alice'"):
                        await c.call("who")
                    with pytest.raises(wire.Unauthorized):
                        await c.call("who", idempotent=True)
            return time.monotonic() - started

    elapsed = run(main())
    lines = _refusals(caplog, "refused a connection as 'alice'")
    # one line per identity per 10 s (the throttle); libzmq retried each handshake meanwhile
    assert 1 <= len(lines) <= 1 + int(elapsed // 10)
    assert "wrong secret" in lines[0]


def test_a_client_without_credentials_is_refused(sockdir, secrets, caplog):
    caplog.set_level(logging.WARNING, logger="kubemu.wire")

    async def main():
        async with wire.Server(wire.ipc_endpoint(sockdir, "s.sock"), _handlers(), auth=wire.ServerAuth(secrets)) as srv:
            for _ in range(3):
                async with wire.Client(srv.endpoint, timeout=600) as c:
                    with pytest.raises(wire.Unauthorized, match="requires credentials and this client has none"):
                        await c.call("who")
                    assert not c.notify("who")  # nothing gets through, not even one way

    run(main())
    assert len(_refusals(caplog, "refused a connection without PLAIN credentials")) == 1


def test_unknown_identity_then_known_without_a_restart(sockdir, secrets):
    wa.ensure_secret(secrets, "someone")  # the directory exists, carol is not in it yet

    async def main():
        async with wire.Server(wire.ipc_endpoint(sockdir, "s.sock"), _handlers(), auth=wire.ServerAuth(secrets)) as srv:
            async with wire.Client(srv.endpoint, credentials=("carol", "s3cret"), timeout=600) as c:
                with pytest.raises(wire.Unauthorized):
                    await c.call("who")
            carol = _creds(secrets, "carol")  # a node joins: its secret is written
            async with wire.Client(srv.endpoint, credentials=carol, timeout=DEADLINE) as c:
                assert await c.call("who") == ["carol", None]

    run(main())


def test_credentials_to_a_server_that_takes_none_are_refused_clearly(sockdir, secrets):
    async def main():
        async with wire.Server(wire.ipc_endpoint(sockdir, "s.sock"), _handlers()) as srv:
            async with wire.Client(srv.endpoint, credentials=_creds(secrets, "alice"), timeout=600) as c:
                with pytest.raises(wire.Unauthorized, match="the server takes none"):
                    await c.call("who")
            async with wire.Client(srv.endpoint, timeout=DEADLINE) as c:  # as before: no identity
                assert await c.call("who") == [None, None]

    run(main())


def test_two_servers_in_one_context_each_check_their_own_secrets(sockdir):
    one, two = os.path.join(sockdir, "one"), os.path.join(sockdir, "two")
    alice = _creds(one, "alice")
    _creds(two, "bob")

    async def main():
        async with wire.Server(wire.ipc_endpoint(sockdir, "1.sock"), _handlers(), auth=wire.ServerAuth(one)) as s1, \
                wire.Server(wire.ipc_endpoint(sockdir, "2.sock"), _handlers(), auth=wire.ServerAuth(two)) as s2:
            async with wire.Client(s1.endpoint, credentials=alice, timeout=DEADLINE) as c:
                assert await c.call("who") == ["alice", None]
            async with wire.Client(s2.endpoint, credentials=alice, timeout=600) as c:
                with pytest.raises(wire.Unauthorized):
                    await c.call("who")
        # both closed: the context's ZAP responder is gone, a new server starts one again
        async with wire.Server(wire.ipc_endpoint(sockdir, "1.sock"), _handlers(), auth=wire.ServerAuth(one)) as s1:
            async with wire.Client(s1.endpoint, credentials=alice, timeout=DEADLINE) as c:
                assert await c.call("who") == ["alice", None]

    run(main())


# -------------------------------------------------------------------------- authorization

def test_authorize_refuses_requests_and_drops_notifications(sockdir, secrets, caplog):
    caplog.set_level(logging.WARNING, logger="kubemu.wire")
    alice, mallory = _creds(secrets, "alice"), _creds(secrets, "mallory")
    ran: list[str | None] = []

    def authorize(identity: str, method: str, params: dict) -> None:
        if method == "poke" and identity != "alice":
            raise wire.Forbidden(f"{identity} may not poke")

    def poke() -> None:
        ran.append(_who())

    async def main():
        handlers = {**_handlers(), "poke": poke}
        async with wire.Server(wire.ipc_endpoint(sockdir, "s.sock"), handlers,
                               auth=wire.ServerAuth(secrets, authorize)) as srv:
            async with wire.Client(srv.endpoint, credentials=mallory, timeout=DEADLINE) as m, \
                    wire.Client(srv.endpoint, credentials=alice, timeout=DEADLINE) as a:
                with pytest.raises(wire.Forbidden, match="mallory may not poke"):
                    await m.call("poke")
                assert m.notify("poke")  # sent; the server drops it
                assert await m.call("who") == ["mallory", None]  # after the notification: it was handled
                await a.call("poke")
                assert m.notify("poke")
                assert await m.call("who") == ["mallory", None]

    run(main())
    assert ran == ["alice"]
    assert len(_refusals(caplog, "mallory may not poke")) == 1  # then rate-limited per peer


def test_garbage_from_an_authenticated_peer_is_rejected_and_the_server_keeps_serving(sockdir, secrets):
    import zmq

    alice = _creds(secrets, "alice")

    async def main():
        async with wire.Server(wire.ipc_endpoint(sockdir, "s.sock"), _handlers(), auth=wire.ServerAuth(secrets)) as srv:
            ctx = zmq.Context()
            raw = ctx.socket(zmq.DEALER)
            try:
                raw.plain_username, raw.plain_password = alice.user.encode(), alice.secret.encode()
                raw.connect(srv.endpoint)
                for frames in ([b"\xc1"], [b"one", b"two", b"three"], [b""]):
                    raw.send_multipart(frames)
                    assert await asyncio.wait_for(asyncio.to_thread(raw.recv), DEADLINE)  # an ERROR reply
            finally:
                raw.close(0)
                ctx.term()
            async with wire.Client(srv.endpoint, credentials=alice, timeout=DEADLINE) as c:
                assert await c.call("who") == ["alice", None]

    run(main())


def test_a_remembered_refusal_is_raised_afresh_each_time(sockdir, secrets):
    """The client raised the one Unauthorized it remembered again and again: its traceback grew
    by two frames a raise."""
    import traceback

    _creds(secrets, "alice")

    async def main():
        async with wire.Server(wire.ipc_endpoint(sockdir, "s.sock"), _handlers(), auth=wire.ServerAuth(secrets)) as srv:
            async with wire.Client(srv.endpoint, credentials=("alice", "wrong"), timeout=600) as c:
                depths = []
                for _ in range(50):
                    try:
                        await c.call("who")
                    except wire.Unauthorized as exc:
                        depths.append(len(traceback.extract_tb(exc.__traceback__)))
                return depths

    depths = run(main())
    assert len(depths) == 50 and max(depths) <= depths[0] + 2, depths
