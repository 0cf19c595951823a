"""kubemu.eventloop: uvloop's loop when installed, asyncio's when asked or when it is missing; the
wire (a zmq FD driven from the loop's selector) works on either."""
from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile

import pytest

from kubemu import eventloop, wire

DEADLINE = 20.0

uvloop = pytest.importorskip("uvloop")


def test_uvloop_by_default(monkeypatch):
    monkeypatch.delenv(eventloop.ENV, raising=False)
    assert eventloop.loop_factory() is uvloop.new_event_loop


@pytest.mark.parametrize("value", ["asyncio", " AsyncIO "])
def test_asyncio_when_asked(monkeypatch, value):
    monkeypatch.setenv(eventloop.ENV, value)
    assert eventloop.loop_factory() is asyncio.new_event_loop


def test_asyncio_when_uvloop_is_missing(monkeypatch):
    monkeypatch.delenv(eventloop.ENV, raising=False)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert eventloop.loop_factory() is asyncio.new_event_loop


@pytest.mark.parametrize("choice", ["uvloop", "asyncio"])
def test_run_runs_on_the_chosen_loop(monkeypatch, choice):
    monkeypatch.setenv(eventloop.ENV, choice)

    async def loop_type():
        return type(asyncio.get_running_loop())

    expected = uvloop.Loop if choice == "uvloop" else asyncio.new_event_loop().__class__
    assert eventloop.run(loop_type()) is expected


def test_the_wire_on_uvloop(monkeypatch):
    """Calls in flight and streams both ways over the edge-triggered zmq FD, as the apiserver's wire."""
    monkeypatch.delenv(eventloop.ENV, raising=False)
    sockdir = tempfile.mkdtemp(prefix="kel-")
    endpoint = wire.ipc_endpoint(sockdir, "t.sock")

    async def echo(i):
        await asyncio.sleep((i % 7) * 0.001)
        return i

    async def count(n):
        for i in range(n):
            yield i

    async def main():
        assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
        async with wire.Server(endpoint, {"echo": echo, "count": count}), \
                wire.Client(endpoint, timeout=DEADLINE) as client:
            assert await asyncio.gather(*(client.call("echo", {"i": i}) for i in range(1000))) == list(range(1000))

            async def consume():
                return [item async for item in client.stream("count", {"n": 300})]
            assert await asyncio.gather(*(consume() for _ in range(20))) == [list(range(300))] * 20

    try:
        eventloop.run(asyncio.wait_for(main(), 60))
    finally:
        shutil.rmtree(sockdir, ignore_errors=True)
