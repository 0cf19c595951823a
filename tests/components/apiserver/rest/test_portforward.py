"""components/apiserver/rest/portforward.py: kubectl's SPDY streams, paired and relayed to a (fake) kubelet.

The real kubectl against a real cluster is in tests/test_e2e_portforward.py."""
from __future__ import annotations

import asyncio

from aiohttp import WSMessage, WSMsgType

from components.apiserver.rest import portforward
from kubemu import spdy, wire
from tests.conftest import DEADLINE

PARAMS = {"namespace": "default", "pod": "web", "uid": "u1"}


class FakeWS:
    def __init__(self):
        self.sent = bytearray()
        self.closed = False
        self.incoming: asyncio.Queue = asyncio.Queue()
        self.framer = spdy.Framer()
        self.frames: list[spdy.Frame] = []

    async def send_bytes(self, data: bytes) -> None:
        self.frames += self.framer.feed(data)

    def push(self, data: bytes | None) -> None:
        self.incoming.put_nowait(None if data is None else WSMessage(WSMsgType.BINARY, data, None))

    def __aiter__(self):
        return self

    async def __anext__(self):
        msg = await self.incoming.get()
        if msg is None:
            raise StopAsyncIteration
        return msg


class FakeKubelet:
    """A kubelet whose forwards send `reply` once started, or fail with `error`."""

    def __init__(self, reply: bytes = b"", error: wire.WireError | None = None):
        self.reply, self.error = reply, error
        self.calls: list[tuple[str, dict]] = []
        self.ended = asyncio.Event()
        self.hold = asyncio.Event()  # set: the pod's side ends

    def stream(self, method, params, timeout=None):
        self.calls.append((method, params))
        return self._forward()

    async def _forward(self):
        try:
            if self.error is not None:
                raise self.error
            yield {"started": True}
            yield {"data": self.reply}
            await self.hold.wait()
        finally:
            self.ended.set()

    async def call(self, method, params, timeout=None):
        self.calls.append((method, params))


async def until(predicate) -> None:
    deadline = asyncio.get_running_loop().time() + DEADLINE
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def open_pair(ws: FakeWS, enc: spdy.Encoder, port: str = "8000", request: str = "0", first: int = 1) -> None:
    headers = {"streamType": "error", "port": port, "requestID": request}
    ws.push(enc.syn_stream(first, headers))
    ws.push(spdy.data(first, b"", fin=True))  # kubectl closes its side of the error stream at once
    ws.push(enc.syn_stream(first + 2, {**headers, "streamType": "data"}))


def run(scenario):
    async def main():
        ws, enc = FakeWS(), spdy.Encoder()
        tunnel = portforward.Tunnel(ws, scenario.kubelet, PARAMS)
        task = asyncio.ensure_future(tunnel.run())
        try:
            await scenario(ws, enc)
        finally:
            ws.push(None)
            await task
            await tunnel.close()
    asyncio.run(main())


def kinds(ws: FakeWS, stream: int) -> list:
    return [(f.type, f.data, f.fin) for f in ws.frames if f.stream == stream and f.type in (0, spdy.SYN_REPLY)]


def test_a_pair_is_relayed_both_ways_and_both_streams_end_with_the_pods_side():
    kubelet = FakeKubelet(reply=b"pong")

    async def scenario(ws, enc):
        open_pair(ws, enc)
        await until(lambda: any(f.type == 0 and f.data == b"pong" for f in ws.frames))
        ws.push(spdy.data(3, b"ping"))
        ws.push(spdy.data(3, b"", fin=True))
        await until(lambda: ("portforward_input", {"session": kubelet.calls[0][1]["session"], "close": True})
                    in kubelet.calls)
        kubelet.hold.set()
        await until(lambda: (0, b"", True) in kinds(ws, 1) and (0, b"", True) in kinds(ws, 3))
    scenario.kubelet = kubelet
    run(scenario)
    method, params = kubelet.calls[0]
    assert method == "portforward" and params == {**PARAMS, "port": 8000, "session": params["session"]}
    assert ("portforward_input", {"session": params["session"], "data": b"ping"}) in kubelet.calls


def test_what_the_kubelet_refuses_is_written_on_the_error_stream_then_both_streams_end():
    message = "error forwarding port 9999 to pod x, uid : failed to connect"

    async def scenario(ws, enc):
        open_pair(ws, enc, port="9999")
        await until(lambda: (0, b"", True) in kinds(ws, 1))
        assert kinds(ws, 1) == [(spdy.SYN_REPLY, b"", False), (0, message.encode(), False), (0, b"", True)]
    scenario.kubelet = FakeKubelet(error=wire.Internal(message))
    run(scenario)


def test_a_reset_data_stream_ends_its_forward():
    kubelet = FakeKubelet(reply=b"pong")

    async def scenario(ws, enc):
        open_pair(ws, enc)
        await until(lambda: any(f.data == b"pong" for f in ws.frames))
        ws.push(spdy.rst_stream(3, spdy.CANCEL))
        await until(kubelet.ended.is_set)
        await until(lambda: (0, b"", True) in kinds(ws, 1))
    scenario.kubelet = kubelet
    run(scenario)


def test_pings_are_answered_and_bad_streams_reset():
    async def scenario(ws, enc):
        ws.push(spdy.ping(11))
        ws.push(enc.syn_stream(1, {"streamType": "data"}))
        ws.push(enc.syn_stream(3, {"streamType": "bogus", "port": "80"}))
        ws.push(enc.syn_stream(5, {"streamType": "data", "port": "0"}))
        await until(lambda: len([f for f in ws.frames if f.type == spdy.RST_STREAM]) == 3)
        assert any(f.type == spdy.PING and f.ping == 11 for f in ws.frames)
    scenario.kubelet = FakeKubelet()
    run(scenario)


def test_stream_headers_are_checked_as_the_kubelet_checks_them():
    def frame(**headers):
        return spdy.Frame(spdy.SYN_STREAM, 0, 1, {k.lower(): [v] for k, v in headers.items()})
    assert portforward.stream_headers_error(frame(streamType="data")) == '"port" header is required'
    assert portforward.stream_headers_error(frame(port="x", streamType="data")) == 'unable to parse "x" as a port'
    assert portforward.stream_headers_error(frame(port="70000", streamType="data")) == \
        'unable to parse "70000" as a port'
    assert portforward.stream_headers_error(frame(port="0", streamType="data")) == 'port "0" must be > 0'
    assert portforward.stream_headers_error(frame(port="80")) == '"streamType" header is required'
    assert portforward.stream_headers_error(frame(port="80", streamType="x")) == 'invalid stream type "x"'
    assert portforward.stream_headers_error(frame(port="80", streamType="error")) is None


class FakeQuery(dict):
    def getall(self, key, default):
        return self.get(key, default)


def test_v4_ports_are_read_as_the_apiserver_and_kubelet_read_them():
    assert portforward.v4_ports(FakeQuery(ports=["8000,8001", "9000"])) == [8000, 8001, 9000]
    for query, message in ((FakeQuery(), 'query parameter "port" is required'),
                           (FakeQuery(ports=["x"]), 'unable to parse "x" as a port'),
                           (FakeQuery(ports=["0"]), 'port "0" must be > 0')):
        try:
            portforward.v4_ports(query)
        except wire.BadRequest as err:
            assert err.message == message
        else:
            raise AssertionError(f"{query} was accepted")


def test_v4_channels_announce_their_ports_and_relay_data_and_errors():
    class Raw(FakeWS):
        async def send_bytes(self, data: bytes) -> None:
            self.frames.append(data)

    ok, failing = FakeKubelet(reply=b"pong"), FakeKubelet(error=wire.Internal("no such port"))

    class Either:  # port 8000 answers, port 9999 is refused
        def stream(self, method, params, timeout=None):
            return (ok if params["port"] == 8000 else failing).stream(method, params, timeout)

        async def call(self, method, params, timeout=None):
            await ok.call(method, params, timeout)

    async def main():
        ws = Raw()
        channels = portforward.Channels(ws, Either(), PARAMS, [8000, 9999])
        task = asyncio.ensure_future(channels.run())
        await until(lambda: b"\x00pong" in ws.frames and b"\x03no such port" in ws.frames)
        assert ws.frames[:4] == [b"\x00\x40\x1f", b"\x01\x40\x1f", b"\x02\x0f\x27", b"\x03\x0f\x27"]
        ws.push(b"\x00ping")
        await until(lambda: any(c[0] == "portforward_input" and c[1].get("data") == b"ping" for c in ok.calls))
        ok.hold.set()
        await asyncio.wait_for(task, DEADLINE)  # every port's connection has ended
        await channels.close()
    asyncio.run(main())
