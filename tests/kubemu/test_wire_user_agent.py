"""The user agent a wire client names in its handshake (ZMQ_METADATA X-User-Agent), as an
authenticated server's handlers see it (`wire.peer_user_agent`), per connection."""
from __future__ import annotations

import asyncio
import os
import shutil
import tempfile

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
