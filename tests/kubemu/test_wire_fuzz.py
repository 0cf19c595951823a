"""Garbage in, service as usual: random multipart messages from a raw DEALER, and after every
one of them the server still answers a proper client correctly.

The server runs on its own event loop in a background thread so hypothesis's synchronous test
function can drive it."""
from __future__ import annotations

import asyncio
import itertools
import logging
import shutil
import tempfile
import time

import msgpack
import pytest
import zmq
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kubemu import wire

from .test_wire import DEADLINE, ThreadedServer

MAX_FRAME = 4096  # small, so oversize frames are cheap to make
BEYOND_MAXMSGSIZE = wire.MAXMSGSIZE_FACTOR * MAX_FRAME + 1  # libzmq drops the connection instead


def echo(**params):
    return params


async def async_echo(**params):
    await asyncio.sleep(0)
    return params


async def count(n=3):
    for i in range(min(n, 10)):
        yield i


def pk(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1) | st.floats()
           | st.text(max_size=12) | st.binary(max_size=12)
           | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=8)))
junk = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=6) | st.integers(-5, 5), inner, max_size=4), max_leaves=8)
plausible = st.tuples(
    st.sampled_from([1, 2, 3, 0, 4, 9, True, -1, 2**64 - 1]),
    st.integers(min_value=-(2**63), max_value=2**64 - 1) | junk,
    st.sampled_from(["echo", "async_echo", "count", "nope", ""]) | junk,
    st.dictionaries(st.sampled_from(["n", "x", "params", ""]) | st.text(max_size=4), junk, max_size=3) | junk,
).flatmap(lambda t: st.integers(0, 5).map(lambda n: list(t)[:n] + [None] * max(0, n - 4)))
crafted = st.sampled_from([
    b"",
    b"\xc1",  # never used in msgpack
    b"\x93\x01\xcf\xff\xff\xff\xff\xff\xff\xff\xff\x00",  # uint64 max id, then junk
    b"\x94\x01\xd3\x80\x00\x00\x00\x00\x00\x00\x00\xa4echo\x80",  # int64 min id, valid otherwise
    b"\x91" * 3000 + b"\xc0",  # deep nesting
    b"\xdd\xff\xff\xff\xff",  # an array claiming 4 billion elements
    b"\xdb\xff\xff\xff\xff",  # a string claiming 4 GB
    b"\x94\x01\x07\xa4echo\x81\x91\x01\x01",  # a list as a map key
    b"\x94\x01\x07\xa4echo\x81\xa1x\xd7\xff\x00\x00\x00\x00",  # a timestamp ext
    b"\x94\x01\x07\xa4echo\x81\xa1x\xd6\xff\x01",  # a truncated timestamp ext
    b"\x94\x01\x07\xa4echo\x81\xa1x\xa2\xff\xfe",  # invalid utf-8
])
frame = st.one_of(
    st.binary(max_size=48),
    junk.map(pk),
    plausible.map(pk),
    plausible.map(pk).flatmap(lambda b: st.integers(0, max(0, len(b) - 1)).map(lambda n: b[:n])),  # truncated
    crafted,
    st.one_of(  # oversize
        st.integers(MAX_FRAME + 1, 2 * MAX_FRAME).map(lambda n: b"\x94\x01\x05\xa4echo" + b"\x00" * n),
        st.integers(MAX_FRAME + 1, 2 * MAX_FRAME).map(lambda n: pk([1, 6, "echo", {"x": b"y" * n}])),
    ),
)  # frames beyond MAXMSGSIZE cost a reconnect each: test_beyond_maxmsgsize sends a few
messages = st.lists(frame, min_size=1, max_size=4)


class Counter(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.count = 0

    def emit(self, record):
        self.count += 1


@pytest.fixture(scope="module")
def rig():
    directory = tempfile.mkdtemp(prefix="kwf-")
    counter = Counter()
    logger = logging.getLogger("kubemu.wire")
    old_level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(counter)
    raw_context = zmq.Context()
    try:
        handlers = {"echo": echo, "async_echo": async_echo, "count": count}
        with ThreadedServer(wire.ipc_endpoint(directory, "f.sock"), handlers, max_frame=MAX_FRAME) as server:
            raw = raw_context.socket(zmq.DEALER)
            raw.linger = 0
            raw.reconnect_ivl = 10
            raw.connect(server.endpoint)
            with wire.SyncClient(server.endpoint, timeout=DEADLINE) as client:
                yield {"raw": raw, "client": client, "log": counter, "sent": [0], "ids": itertools.count(2**62)}
    finally:
        raw_context.destroy(linger=0)
        logger.removeHandler(counter)
        logger.setLevel(old_level)
        shutil.rmtree(directory, ignore_errors=True)


def sync_with_server(rig) -> None:
    """Send a valid request behind the garbage on the same connection and wait for its answer:
    then the garbage has been dealt with. Everything else that comes back is drained on the
    way, so nothing piles up. A frame over MAXMSGSIZE makes libzmq drop the raw socket's
    connection, which can take later messages with it, so the request is re-sent (with a new
    id) until the reconnected socket gets an answer."""
    raw = rig["raw"]
    deadline = time.monotonic() + DEADLINE
    while True:
        assert time.monotonic() < deadline, "the sentinel request was never answered"
        sentinel = next(rig["ids"])
        raw.send_multipart([wire.encode_call(sentinel, "echo", {"sentinel": sentinel})])
        resend = time.monotonic() + 0.2
        while raw.poll(max(0, int((resend - time.monotonic()) * 1000))):
            reply = wire.decode_reply(raw.recv_multipart())
            if reply.id == sentinel:
                assert reply == (wire.REPLY, sentinel, {"sentinel": sentinel})
                return


@pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")  # reprs of oversize frames
@settings(max_examples=2000, deadline=None, database=None,
          phases=[Phase.explicit, Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(frames=messages)
def test_garbage_never_stops_the_server(rig, frames):
    raw, client = rig["raw"], rig["client"]
    raw.send_multipart(frames)
    rig["sent"][0] += 1
    sync_with_server(rig)
    assert client.call("echo", {"x": len(frames)}) == {"x": len(frames)}
    # at most one log line per bad message (a count handler given junk logs its Internal error once)
    assert rig["log"].count <= rig["sent"][0]


def test_beyond_maxmsgsize_costs_only_a_reconnect(rig):
    for frames in ([b"\xc4" + b"\x00" * BEYOND_MAXMSGSIZE], [b"\x00", b"\x01" * BEYOND_MAXMSGSIZE, b"\x02"]):
        rig["raw"].send_multipart(frames)
        sync_with_server(rig)  # the raw socket was dropped by libzmq and has reconnected
        assert rig["client"].call("echo", {"after": "drop"}) == {"after": "drop"}


def test_fuzz_rig_is_still_serving(rig):
    """Runs after the fuzz tests in file order: a stream and a call still work."""
    client = rig["client"]
    assert list(client.stream("count", {"n": 4})) == [0, 1, 2, 3]
    assert client.call("async_echo", {"done": True}) == {"done": True}
