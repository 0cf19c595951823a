"""The user agent a wire client names in its handshake (ZMQ_METADATA X-User-Agent), as an
authenticated server's handlers see it (`wire.peer_user_agent`), per connection."""
from __future__ import annotations

import asyncio
import errno
import os
import shutil
import tempfile

import zmq

from kubemu import _wire_auth as wa
from kubemu import wire
from tests.conftest import DEADLINE


def test_each_connection_is_seen_with_the_user_agent_it_named():
    tmp = tempfile.mkdtemp(prefix="kua-")  # short: ipc paths are limited to 107 bytes
    secrets = os.path.join(tmp, "wire")
    creds = wa.load_credentials(wa.ensure_secret(secrets, "someone"))
    endpoint = wire.ipc_endpoint(tmp, "s.sock")

    def plain() -> list:
        return [wire.peer_identity.get(), wire.peer_user_agent.get()]

    async def coro() -> list:
        await asyncio.sleep(0)
        return [wire.peer_identity.get(), wire.peer_user_agent.get()]

    async def main():
        async with wire.Server(endpoint, {"plain": plain, "coro": coro}, auth=wire.ServerAuth(secrets)):
            named = wire.Client(endpoint, credentials=creds, user_agent="kube-scheduler/node-1_42")
            anonymous = wire.Client(endpoint, credentials=creds)
            try:
                return await asyncio.gather(named.call("plain"), named.call("coro"), anonymous.call("plain"),
                                            anonymous.call("coro"))
            finally:
                await named.close()
                await anonymous.close()

    try:
        got = asyncio.run(asyncio.wait_for(main(), DEADLINE))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    assert got == [["someone", "kube-scheduler/node-1_42"]] * 2 + [["someone", None]] * 2


class _Frame:
    """A received zmq.Frame's metadata: `get` raises as libzmq does for a property not sent."""

    def __init__(self, agent):
        self.agent, self.reads = agent, 0

    def get(self, name):
        assert name == "X-User-Agent"
        self.reads += 1
        if self.agent is None:
            raise zmq.ZMQError(errno.EINVAL)
        return self.agent


def test_the_user_agent_is_read_once_per_connection_the_socket_named_and_every_time_for_an_id_a_client_chose():
    server = wire.Server("ipc:///nonexistent/never-bound.sock", {})
    anonymous, named = _Frame(None), _Frame("kubelet/n1")
    assert [server._user_agent(b"\0\0\0\0\1", anonymous) for _ in range(3)] == [None] * 3
    assert [server._user_agent(b"\0\0\0\0\2", named) for _ in range(3)] == ["kubelet/n1"] * 3
    assert (anonymous.reads, named.reads) == (1, 1)
    # an id the client set may be reused by the next connection, which names itself otherwise
    assert server._user_agent(b"chosen", _Frame("first/1")) == "first/1"
    assert server._user_agent(b"chosen", _Frame(None)) is None
