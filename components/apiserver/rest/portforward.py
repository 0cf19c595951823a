"""pods/portforward: kubectl's port-forward protocol (SPDY/3.1 tunneled over a WebSocket), relayed to the kubelet.

kubectl 1.31 and later (KUBECTL_PORT_FORWARD_WEBSOCKETS on by default) opens
`pods/<name>/portforward` as a WebSocket with the subprotocol `SPDY/3.1+portforward.k8s.io`, and
speaks SPDY/3.1 (spdy.py) inside its binary messages as over a TCP connection. For every local
connection it opens two SPDY streams with the headers `streamType: error|data`, `port`, and
`requestID`; the server answers each SYN_STREAM with a SYN_REPLY and, once a request's pair is
complete, relays the data stream to the pod's port; it closes both streams (FIN) when the pod's
side has ended. What goes wrong is written on the error stream, in the kubelet's words
("error forwarding port 8000 to pod ..."), which kubectl prints before it drops the whole
connection. kubectl also sends a PING every 10 s, answered with the same id. SPDY without the
WebSocket (kubectl's fallback when the upgrade fails) is not served.

The older WebSocket protocol, `v4.channel.k8s.io` with `?ports=8000,8001`, is what the official
Python client speaks (kubernetes.stream.portforward): one connection per port, each on a channel
pair, data 2i and error 2i+1 (the first byte of every message); the server's first message on
each channel is the port, 2 bytes little-endian; the WebSocket closes when every port's
connection has ended.

As for exec, each forwarded connection goes over the wire to the kubelet of the pod's node
(kubelet/streaming.py `portforward`, `portforward_input`, `ack`), which connects to
localhost:<port> inside the pod's network namespace (kubelet/portforward.py).
"""
from __future__ import annotations

import asyncio
import logging
import uuid

from aiohttp import WSMsgType, web

from kubemu import spdy, wire

from .. import caller, podlogs
from .remotecommand import ACK_EVERY, INPUT_TIMEOUT, MAX_MESSAGE, OPEN_TIMEOUT, RemoteCommand

log = logging.getLogger("kubemu.apiserver.rest")

PROTOCOL = "portforward.k8s.io"
TUNNELED = "SPDY/3.1+" + PROTOCOL  # client-go's WebsocketsSPDYTunnelingPrefix + the protocol
V4 = "v4.channel.k8s.io"
STREAM_CREATION_TIMEOUT = 30.0       # kubelet's: a request whose other stream never comes is dropped
QUEUED_INPUT = 16                    # data frames a forward may have waiting for its pod


def stream_headers_error(frame: spdy.Frame) -> str | None:
    """Why a new stream is refused (None: accepted), as kubelet's httpStreamReceived checks it."""
    port = frame.header("port")
    if not port:
        return '"port" header is required'
    if not port.isdigit() or int(port) > 65535:
        return f'unable to parse "{port}" as a port'
    if int(port) < 1:
        return f'port "{port}" must be > 0'
    kind = frame.header("streamType")
    if not kind:
        return '"streamType" header is required'
    if kind not in ("error", "data"):
        return f'invalid stream type "{kind}"'
    return None


class Pair:
    """The error and data streams of one forwarded connection."""

    def __init__(self, request_id: str, port: int):
        self.request_id = request_id
        self.port = port
        self.error: int | None = None
        self.data: int | None = None
        self.input: asyncio.Queue = asyncio.Queue(QUEUED_INPUT)  # bytes, or None for the client's FIN
        self.task: asyncio.Task | None = None
        self.timer: asyncio.TimerHandle | None = None

    @property
    def complete(self) -> bool:
        return self.error is not None and self.data is not None


class PortForward:
    """Serves pods/portforward, over the kubelet connections RemoteCommand holds."""

    def __init__(self, remote: RemoteCommand):
        self.remote = remote

    async def serve(self, request: web.Request, pod: dict) -> web.StreamResponse:
        meta = pod["metadata"]
        uid = podlogs.pod_uid(pod)
        if not podlogs.is_segment(uid):
            raise wire.BadRequest(f'pod "{meta["name"]}" has no uid')
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            raise wire.BadRequest(f'pod {meta["name"]} does not have a host assigned')
        client = self.remote.kubelet(node)
        ws = web.WebSocketResponse(protocols=(TUNNELED, V4), autoping=True, max_msg_size=MAX_MESSAGE)
        ready = ws.can_prepare(request)
        if not ready.ok or ready.protocol not in (TUNNELED, V4):
            raise wire.BadRequest(f"pods/portforward is served over WebSocket ({TUNNELED}, {V4}); "
                                  "SPDY without a WebSocket and plain requests are not supported by kubemu")
        ports = v4_ports(request.query) if ready.protocol == V4 else []
        await ws.prepare(request)
        if self.remote.audit is not None:
            self.remote.audit(verb="create", resource="pods/portforward", namespace=meta["namespace"],
                              name=meta["name"], code=101, user=caller.caller_name())
        params = {"namespace": meta["namespace"], "pod": meta["name"], "uid": uid}
        tunnel = Tunnel(ws, client, params) if ready.protocol == TUNNELED else Channels(ws, client, params, ports)
        try:
            await tunnel.run()
        except ConnectionError:
            pass  # the client went away
        except spdy.ProtocolError as exc:
            log.info("port-forward to pod %s/%s: %s", meta["namespace"], meta["name"], exc)
        except Exception as exc:  # the upgraded connection has no room for a 500: one line, then close
            log.error("port-forward to pod %s/%s failed: %s: %s", meta["namespace"], meta["name"],
                      type(exc).__name__, exc)
        finally:
            await tunnel.close()
            if not ws.closed:
                await ws.close()
        return ws


class Tunnel:
    """One SPDY connection inside one WebSocket: its streams, paired into forwards."""

    def __init__(self, ws: web.WebSocketResponse, client: wire.Client, params: dict):
        self.ws = ws
        self.client = client
        self.params = params
        self.framer = spdy.Framer()
        self.encoder = spdy.Encoder()
        self.pairs: dict[str, Pair] = {}      # by request id, until both streams came
        self.streams: dict[int, Pair] = {}    # by stream id, until the forward has ended
        self.send_lock = asyncio.Lock()       # frames go out whole, header blocks in order

    async def send(self, build) -> None:
        """`build()` makes the frame under the lock: header compression is one ordered context."""
        async with self.send_lock:
            await self.ws.send_bytes(build())

    async def run(self) -> None:
        async for msg in self.ws:
            if msg.type != WSMsgType.BINARY:
                continue  # the tunnel is binary; client-go sends nothing else
            for frame in self.framer.feed(msg.data):
                if await self.handle(frame):
                    return

    async def handle(self, frame: spdy.Frame) -> bool:
        """One frame from the client; True when the connection is over (GOAWAY)."""
        if frame.type == spdy.SYN_STREAM:
            await self.new_stream(frame)
        elif frame.type == 0:
            pair = self.streams.get(frame.stream)
            if pair is not None and frame.stream == pair.data and pair.task is not None:
                if frame.data:
                    await pair.input.put(frame.data)
                if frame.fin:
                    await pair.input.put(None)
        elif frame.type == spdy.RST_STREAM:
            pair = self.streams.get(frame.stream)
            if pair is not None and frame.stream == pair.data and pair.task is not None:
                pair.task.cancel()  # kubectl resets the data stream once it has what the pod sent
        elif frame.type == spdy.PING:
            await self.send(lambda: spdy.ping(frame.ping))
        elif frame.type == spdy.GOAWAY:
            return True
        return False

    async def new_stream(self, frame: spdy.Frame) -> None:
        refused = stream_headers_error(frame)
        if refused is not None:
            log.info("port-forward stream %d refused: %s", frame.stream, refused)
            await self.send(lambda: spdy.rst_stream(frame.stream, spdy.PROTOCOL_ERROR))
            return
        await self.send(lambda: self.encoder.syn_reply(frame.stream))
        # kubelet's fallback for clients without request ids: consecutive stream ids per pair
        request_id = frame.header("requestID") or str(frame.stream - (2 if frame.header("streamType") == "data" else 0))
        pair = self.pairs.get(request_id)
        if pair is None:
            pair = self.pairs[request_id] = Pair(request_id, int(frame.header("port")))
            pair.timer = asyncio.get_running_loop().call_later(STREAM_CREATION_TIMEOUT, self._timed_out, pair)
        kind = frame.header("streamType")
        if getattr(pair, kind) is not None:
            if pair.error is not None:
                message = f"error processing stream for request {request_id}: {kind} stream already assigned"
                await self.send(lambda: spdy.data(pair.error, message.encode()))
            await self.send(lambda: spdy.rst_stream(frame.stream, spdy.PROTOCOL_ERROR))
            return
        setattr(pair, kind, frame.stream)
        self.streams[frame.stream] = pair
        if pair.complete:
            del self.pairs[request_id]
            pair.timer.cancel()
            pair.task = asyncio.ensure_future(self.forward(pair))

    def _timed_out(self, pair: Pair) -> None:
        if self.pairs.get(pair.request_id) is not pair:
            return
        del self.pairs[pair.request_id]
        for stream in (pair.error, pair.data):
            self.streams.pop(stream, None)
        if pair.error is not None:
            message = f"timed out waiting for streams (request={pair.request_id})"
            asyncio.ensure_future(self._finish(pair, message))

    async def forward(self, pair: Pair) -> None:
        """Relay one pair to the kubelet and back; both streams FIN at the end, as the kubelet's."""
        message = ""
        try:
            message = await relay(self.client, {**self.params, "port": pair.port}, pair.input,
                                  lambda data: self.send(lambda: spdy.data(pair.data, data)))
        finally:
            for s in (pair.error, pair.data):
                self.streams.pop(s, None)  # no more input is queued for this pair
            while not pair.input.empty():  # frees a reader that waits to queue more
                pair.input.get_nowait()
            if not self.ws.closed:
                await asyncio.shield(self._finish(pair, message))

    async def _finish(self, pair: Pair, message: str) -> None:
        try:
            if message and pair.error is not None:
                await self.send(lambda: spdy.data(pair.error, message.encode()))
            for s in (pair.data, pair.error):
                if s is not None:
                    await self.send(lambda: spdy.data(s, b"", fin=True))
        except ConnectionError:
            pass

    async def close(self) -> None:
        for pair in self.pairs.values():
            if pair.timer is not None:
                pair.timer.cancel()
        tasks = [p.task for p in set(self.streams.values()) if p.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def relay(client: wire.Client, params: dict, inputs: asyncio.Queue, send) -> str:
    """One forwarded connection through the kubelet: what `inputs` holds goes to the pod (None:
    the client's half close), what the pod sends goes to `send`, acknowledged as passed on.
    Returns the kubelet's error line ("" when the pod's side simply ended)."""
    session = uuid.uuid4().hex
    stream = client.stream("portforward", {**params, "session": session}, timeout=OPEN_TIMEOUT)
    uploads = None
    try:
        try:
            await stream.__anext__()  # {"started": True}: connected to the pod's port
        except StopAsyncIteration:
            return ""
        uploads = asyncio.ensure_future(_upload(client, session, inputs))
        unacked = 0
        async for item in stream:
            await send(item["data"])
            unacked += len(item["data"])
            if unacked >= ACK_EVERY:
                try:
                    await client.call("ack", {"session": session, "size": unacked}, timeout=INPUT_TIMEOUT)
                except wire.NotFound:
                    pass  # the pod's side has ended meanwhile
                unacked = 0
    except wire.WireError as err:
        return err.message
    finally:
        if uploads is not None:
            uploads.cancel()
            await asyncio.gather(uploads, return_exceptions=True)
        await stream.aclose()
    return ""


async def _upload(client: wire.Client, session: str, inputs: asyncio.Queue) -> None:
    while True:
        data = await inputs.get()
        try:
            if data is None:
                await client.call("portforward_input", {"session": session, "close": True})
                return
            await client.call("portforward_input", {"session": session, "data": data}, timeout=INPUT_TIMEOUT)
        except wire.NotFound:
            return  # the forward has ended meanwhile


def v4_ports(query) -> list[int]:
    """The ports of a v4 request: `ports`, repeated or comma-separated (the apiserver's
    conversion to PodPortForwardOptions), checked as the kubelet checks them."""
    values = [v for raw in query.getall("ports", []) for v in raw.split(",")]
    if not values:
        raise wire.BadRequest('query parameter "port" is required')
    for v in values:
        if not v.isdigit() or int(v) > 65535:
            raise wire.BadRequest(f'unable to parse "{v}" as a port')
        if int(v) < 1:
            raise wire.BadRequest(f'port "{v}" must be > 0')
    return [int(v) for v in values]


class Channels:
    """The v4 protocol: a connection per port at once, each on its data and error channels."""

    def __init__(self, ws: web.WebSocketResponse, client: wire.Client, params: dict, ports: list[int]):
        self.ws = ws
        self.client = client
        self.params = params
        self.ports = ports
        self.inputs = [asyncio.Queue(QUEUED_INPUT) for _ in ports]
        self.tasks: list[asyncio.Task] = []

    async def run(self) -> None:
        for i, port in enumerate(self.ports):
            for channel in (2 * i, 2 * i + 1):
                await self.ws.send_bytes(bytes((channel,)) + port.to_bytes(2, "little"))
        self.tasks = [asyncio.ensure_future(self.forward(i, port)) for i, port in enumerate(self.ports)]
        reader = asyncio.ensure_future(self._read())
        try:
            await asyncio.wait({reader, asyncio.gather(*self.tasks)}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def forward(self, i: int, port: int) -> None:
        try:
            message = await relay(self.client, {**self.params, "port": port}, self.inputs[i],
                                  lambda data: self.ws.send_bytes(bytes((2 * i,)) + data))
        finally:
            while not self.inputs[i].empty():  # frees a reader that waits to queue more
                self.inputs[i].get_nowait()
        if message and not self.ws.closed:
            await self.ws.send_bytes(bytes((2 * i + 1,)) + message.encode())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != WSMsgType.BINARY or len(msg.data) < 2:
                continue
            channel = msg.data[0]
            if channel % 2 == 0 and channel // 2 < len(self.tasks) and not self.tasks[channel // 2].done():
                await self.inputs[channel // 2].put(msg.data[1:])

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
