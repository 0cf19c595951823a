"""kubemu._wire_failover: `Preference` (pure) and `FailoverClient` against real wire servers in
child processes that the tests kill (SIGKILL) and stop (SIGSTOP).

Async tests drive their coroutine with `run()` (no pytest-asyncio); waits are on conditions with
generous deadlines, never speed claims."""
from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kubemu import wire
from kubemu.apiclient import SyncApiClient
from tests.conftest import DEADLINE, wait_for

SERVER = r"""
import asyncio, sys
from kubemu import wire

name, endpoint, log = sys.argv[1:4]

def record(what):
    with open(log, "a") as f:
        f.write(what + "\n")

async def whoami():
    return name

async def write(key: str):
    record(key)
    return name

async def write_and_hang(key: str):
    record(key)
    await asyncio.Event().wait()

async def busy():
    if name == "a":
        raise wire.Unavailable("a cannot serve this now")
    return name

async def ticks():
    n = 0
    while True:
        yield {"server": name, "n": n}
        n += 1
        await asyncio.sleep(0.02)

async def main():
    server = wire.Server(endpoint, {"whoami": whoami, "write": write, "write_and_hang": write_and_hang,
                                    "busy": busy, "ticks": ticks})
    await server.start()
    print("ready", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def run(coro, timeout: float = 120.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


class Servers:
    """Wire servers in child processes this test started (and alone stops)."""

    def __init__(self, root: str):
        self.root = root
        self.procs: dict[str, subprocess.Popen] = {}

    def endpoint(self, name: str) -> str:
        return wire.ipc_endpoint(self.root, f"{name}.sock")

    def log(self, name: str) -> Path:
        return Path(self.root, f"{name}.log")

    def start(self, name: str) -> str:
        ep = self.endpoint(name)
        proc = subprocess.Popen([sys.executable, "-c", SERVER, name, ep, str(self.log(name))],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        self.procs[name] = proc
        return ep

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.kill()
        proc.wait()

    def signal(self, name: str, sig: int) -> None:
        pid = self.procs[name].pid
        os.kill(pid, sig)
        if sig == signal.SIGSTOP:  # stopped before anything more is sent to it
            wait_for(lambda: Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T",
                     message=f"{name} to stop")

    def writes(self, name: str) -> list[str]:
        path = self.log(name)
        return path.read_text().split() if path.exists() else []

    def stop_all(self) -> None:
        for proc in self.procs.values():
            try:
                os.kill(proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            proc.kill()
            proc.wait()
        self.procs.clear()


@pytest.fixture
def servers():
    root = tempfile.mkdtemp(prefix="kf-")  # short: ipc paths are limited to 107 bytes
    s = Servers(root)
    try:
        yield s
    finally:
        s.stop_all()
        shutil.rmtree(root, ignore_errors=True)


async def until(condition, what: str, timeout: float = DEADLINE) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.01)


# -- Preference (pure) ---------------------------------------------------------------------

def test_preference_nothing_up_chooses_nothing():
    p = wire.Preference(3)
    assert p.choose() is None


def test_preference_skips_endpoints_that_are_down_in_ring_order():
    p = wire.Preference(3)
    p.connected(2)
    assert p.choose() == 2
    p.connected(1)
    assert p.choose() == 1
    p.connected(0)
    assert p.choose() == 0
    p.disconnected(0)
    assert p.choose() == 1


def test_preference_avoid_prefers_others_but_falls_back():
    p = wire.Preference(3)
    for i in range(3):
        p.connected(i)
    assert p.choose(avoid={0}) == 1
    assert p.choose(avoid={0, 1}) == 2
    assert p.choose(avoid={0, 1, 2}) == 0


def test_preference_failure_moves_current_to_next_up_and_a_preferred_endpoint_takes_it_back():
    p = wire.Preference(3)
    for i in range(3):
        p.connected(i)
    p.failed(0)
    assert p.current == 1 and p.choose() == 1
    p.failed(0)  # not current: no change
    assert p.current == 1
    p.disconnected(2)
    p.failed(1)  # 2 is down: 0 is next
    assert p.current == 0
    p.connected(2)
    p.failed(0)
    p.failed(1)
    assert p.current == 2
    p.disconnected(0)
    p.connected(0)  # back: preferred over 2
    assert p.current == 0


def test_split_endpoints():
    assert wire.split_endpoints(" ipc:///a , ipc:///b,,ipc:///a") == ["ipc:///a", "ipc:///b"]
    assert wire.split_endpoints(["ipc:///a", "ipc:///b"]) == ["ipc:///a", "ipc:///b"]
    with pytest.raises(ValueError):
        wire.split_endpoints(" , ")


def test_client_for_one_endpoint_is_the_plain_client(servers):
    one = wire.client_for("ipc:///tmp/kf-one.sock")
    assert type(one) is wire.Client
    many = wire.client_for(["ipc:///tmp/kf-a.sock", "ipc:///tmp/kf-b.sock"])
    assert isinstance(many, wire.FailoverClient)
    with pytest.raises(ValueError):
        wire.client_for("ipc:///tmp/kf-a.sock,http://nope")


# -- FailoverClient against real servers -----------------------------------------------------

def test_calls_go_to_the_first_endpoint_then_to_a_live_one_after_a_kill(servers):
    a, b = servers.start("a"), servers.start("b")

    async def main():
        async with wire.FailoverClient([a, b], timeout=DEADLINE) as client:
            await until(lambda: client.connected == [a, b], "both connections")
            assert await client.call("whoami", idempotent=True) == "a"
            assert await client.call("write", {"key": "k1"}) == "a"
            servers.kill("a")
            # at once: the idempotent call that may race the kill is retried on b
            assert await client.call("whoami", idempotent=True) == "b"
            await until(lambda: a not in client.connected, "the client to see a's connection drop")
            # a write goes to the live server, within its timeout, rather than waiting for a
            assert await client.call("write", {"key": "k2"}) == "b"
    run(main())
    assert servers.writes("b") == ["k2"]


def test_a_write_is_sent_once_when_its_server_dies_with_it(servers):
    a, b = servers.start("a"), servers.start("b")

    async def main():
        async with wire.FailoverClient([a, b], timeout=DEADLINE) as client:
            await until(lambda: client.connected == [a, b], "both connections")
            call = asyncio.ensure_future(client.call("write_and_hang", {"key": "w"}))
            await until(lambda: servers.writes("a") == ["w"], "a to get the write")
            servers.kill("a")
            with pytest.raises(wire.OutcomeUnknown):
                await call
            assert await client.call("whoami") == "b"
    run(main())
    assert servers.writes("b") == []


def test_a_stopped_server_costs_an_idempotent_call_a_hedge_and_a_write_its_timeout(servers):
    a, b = servers.start("a"), servers.start("b")

    async def main():
        async with wire.FailoverClient([a, b], timeout=DEADLINE) as client:
            await until(lambda: client.connected == [a, b], "both connections")
            assert await client.call("whoami", idempotent=True) == "a"
            servers.signal("a", signal.SIGSTOP)  # its connection stays up
            assert await client.call("whoami", idempotent=True) == "b"
            assert client.current == b  # the hedge answered: b is current now
            assert await client.call("write", {"key": "x"}) == "b"
            servers.signal("a", signal.SIGCONT)
    run(main())
    assert servers.writes("a") == [] and servers.writes("b") == ["x"]


def test_a_write_that_timed_out_is_not_resent_and_the_next_call_moves_on(servers):
    a, b = servers.start("a"), servers.start("b")

    async def main():
        async with wire.FailoverClient([a, b], timeout=DEADLINE) as client:
            await until(lambda: client.connected == [a, b], "both connections")
            assert await client.call("whoami") == "a"
            servers.signal("a", signal.SIGSTOP)
            with pytest.raises(wire.OutcomeUnknown):
                await client.call("write", {"key": "lost"}, timeout=0.5)
            assert await client.call("write", {"key": "next"}) == "b"
            servers.signal("a", signal.SIGCONT)
            async with wire.Client(a, timeout=DEADLINE) as direct:
                assert await direct.call("whoami") == "a"  # a has read what was queued for it
    run(main())
    # the timed-out write reached a at most once (its CANCEL may have come first), never b
    assert servers.writes("a") in ([], ["lost"]) and servers.writes("b") == ["next"]


def test_an_unavailable_answer_to_an_idempotent_call_is_asked_of_another_server_if_there_is_one(servers):
    a, b = servers.start("a"), servers.start("b")

    async def main():
        async with wire.FailoverClient([a, b], timeout=DEADLINE) as client:
            await until(lambda: client.connected == [a, b], "both connections")
            assert await client.call("busy", idempotent=True) == "b"
            with pytest.raises(wire.Unavailable, match="cannot serve"):
                await client.call("busy")  # a write: a's answer
            servers.kill("b")
            await until(lambda: client.connected == [a], "b's connection to drop")
            with pytest.raises(wire.Unavailable, match="cannot serve"):
                await client.call("busy", idempotent=True)  # nobody else to ask: a's answer
    run(main())


def test_a_stream_ends_with_unavailable_when_its_server_dies_and_the_next_opens_elsewhere(servers):
    a, b = servers.start("a"), servers.start("b")

    async def main():
        async with wire.FailoverClient([a, b], timeout=DEADLINE) as client:
            await until(lambda: client.connected == [a, b], "both connections")
            stream = client.stream("ticks")
            async with stream:
                assert stream.endpoint == a
                assert (await stream.__anext__())["server"] == "a"
                servers.kill("a")
                with pytest.raises(wire.Unavailable):
                    async for _ in stream:
                        pass
            async with client.stream("ticks") as again:
                assert (await again.__anext__())["server"] == "b"
                assert again.endpoint == b
    run(main())


def test_nothing_up_is_unavailable_not_sent_then_the_first_server_to_come_up_serves(servers):
    a, b = servers.endpoint("a"), servers.endpoint("b")

    async def main():
        async with wire.FailoverClient([a, b], timeout=DEADLINE) as client:
            with pytest.raises(wire.Unavailable) as err:
                await client.call("write", {"key": "never"}, timeout=0.3)
            assert not isinstance(err.value, wire.OutcomeUnknown)
            with pytest.raises(wire.Unavailable):
                await client.call("whoami", timeout=0.3, idempotent=True)
            pending = asyncio.ensure_future(client.call("write", {"key": "first"}))
            await asyncio.sleep(0)  # the call is waiting for a connection
            servers.start("b")
            # the write is not sent to a, first in the list but not up, but to b
            assert await pending == "b"
            assert await client.call("whoami", idempotent=True) == "b"
            servers.start("a")
            # the preferred endpoint takes its clients back when it comes up
            await until(lambda: a in client.connected, "a connection to a")
            assert await client.call("whoami") == "a"
    run(main())
    assert servers.writes("a") == [] and servers.writes("b") == ["first"]


def test_sync_api_client_takes_a_comma_separated_list(servers):
    a, b = servers.start("a"), servers.start("b")
    with SyncApiClient(f"{a},{b}", timeout=DEADLINE) as api:
        assert api.endpoint == f"{a},{b}"
        client = api._sync._client
        assert isinstance(client, wire.FailoverClient)
        api._sync.call("whoami", idempotent=True)
        wait_for(lambda: api._sync.call("whoami", idempotent=True) == "a")
        servers.kill("a")
        wait_for(lambda: api._sync.call("whoami", idempotent=True) == "b")


@pytest.mark.parametrize("names", [["a"], ["a", "b"]], ids=["client", "failover"])
def test_a_fenced_write_waiting_for_a_connection_is_not_sent_once_its_fence_says_no(servers, names):
    """A leader's write that waits for a server is asked its fence again when it can go: the leader
    lost its lease meanwhile, so the server that comes up gets nothing."""
    endpoints = [servers.endpoint(name) for name in names]
    leading = True

    async def main():
        async with wire.client_for(endpoints, timeout=DEADLINE) as client:
            write = asyncio.ensure_future(client.call("write", {"key": "late"}, send_if=lambda: leading))
            await asyncio.sleep(0)  # the write is waiting for a connection
            assert not write.done()
            nonlocal leading
            leading = False
            servers.start(names[-1])
            with pytest.raises(wire.Unavailable, match="not the leader") as err:
                await write
            assert err.value.details["reason"] == "NotLeader" and not isinstance(err.value, wire.OutcomeUnknown)
            # the same connection carries a write while the fence says yes
            assert await client.call("write", {"key": "leading"}, send_if=lambda: True) == names[-1]
    run(main())
    assert servers.writes(names[-1]) == ["leading"]
