"""The client side of port-forward, as client-go's PortForwarder: listeners, and the SPDY tunnel.

`parse_ports` reads kubectl's port arguments (pure). `Forwarder` holds one WebSocket to the
apiserver's pods/<name>/portforward (subprotocol SPDY/3.1+portforward.k8s.io, as kubectl 1.31+),
listens on the local addresses, and gives every accepted connection a pair of SPDY streams
(`streamType` error and data, `port`, `requestID`; client streams have odd ids): what the local
connection sends goes on the data stream, FIN at its end; what comes back goes to it. The error
stream carries the kubelet's line when the pod's port cannot be reached; unlike kubectl 1.32,
which then drops every forward ("lost connection to pod"), kubemu prints it and keeps serving.
"""
from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from kubemu import spdy

TUNNELED = "SPDY/3.1+portforward.k8s.io"
CHUNK = 32 * 1024


class PortError(ValueError):
    """A port argument kubectl would refuse; the text is kubectl's."""


def _port(text: str, which: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        why = "value out of range" if text.isdigit() else "invalid syntax"
        raise PortError(f"error parsing {which} port '{text}': strconv.ParseUint: parsing \"{text}\": {why}")
    return int(text)


def parse_ports(specs: list[str]) -> list[tuple[int, int]]:
    """[(local, remote)] from `8000`, `18080:8000`, `:8000` (local 0: any free port)."""
    ports = []
    for spec in specs:
        local, sep, remote = spec.partition(":")
        if not sep:
            local = remote = spec
        remote_port = _port(remote, "remote")
        if remote_port == 0:
            raise PortError("remote port must be > 0")
        ports.append((_port(local, "local") if local else 0, remote_port))
    return ports


class Forwarder:
    """Local listeners relayed through one SPDY-over-WebSocket tunnel."""

    def __init__(self, ws, say: Callable[[str], None], warn: Callable[[str], None]):
        self.ws = ws  # an aiohttp ClientWebSocketResponse, open with TUNNELED
        self.say, self.warn = say, warn
        self.encoder = spdy.Encoder()
        self.framer = spdy.Framer()
        self.next_stream = 1
        self.next_request = 0
        self.lock = asyncio.Lock()  # frames go out whole, header blocks in order
        self.inbound: dict[int, asyncio.Queue] = {}  # stream id -> bytes, then None at FIN/RST

    async def send(self, build: Callable[[], bytes]) -> None:
        async with self.lock:
            await self.ws.send_bytes(build())

    async def open_stream(self, headers: dict[str, str]) -> int:
        async with self.lock:
            stream, self.next_stream = self.next_stream, self.next_stream + 2
            self.inbound[stream] = asyncio.Queue()
            await self.ws.send_bytes(self.encoder.syn_stream(stream, headers))
        return stream

    async def listen(self, addresses: list[str], ports: list[tuple[int, int]]) -> list[asyncio.Server]:
        servers = []
        for local, remote in ports:
            chosen = {"port": local}  # `:8000` gets one free port, the same on every address
            for address in addresses:
                server = await asyncio.start_server(
                    lambda r, w, remote=remote, chosen=chosen: self.handle(r, w, chosen["port"], remote),
                    address, chosen["port"])
                servers.append(server)
                chosen["port"] = server.sockets[0].getsockname()[1]
                shown = f"[{address}]" if ":" in address else address
                self.say(f"Forwarding from {shown}:{chosen['port']} -> {remote}")
        return servers

    async def run(self) -> None:
        """Read the tunnel until it closes; the frames go to their streams."""
        from aiohttp import WSMsgType  # the CLI imports aiohttp only for this command

        try:
            await self._read(WSMsgType.BINARY)
        finally:
            for queue in self.inbound.values():  # the tunnel is gone: every connection ends
                queue.put_nowait(None)

    async def _read(self, binary) -> None:
        async for msg in self.ws:
            if msg.type != binary:
                continue
            for frame in self.framer.feed(msg.data):
                queue = self.inbound.get(frame.stream)
                if frame.type == spdy.PING:
                    await self.send(lambda: spdy.ping(frame.ping))
                elif frame.type == spdy.GOAWAY:
                    return
                elif queue is None:
                    continue
                elif frame.type == 0:
                    if frame.data:
                        queue.put_nowait(frame.data)
                    if frame.fin:
                        queue.put_nowait(None)
                elif frame.type == spdy.RST_STREAM:
                    queue.put_nowait(None)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, local: int,
                     remote: int) -> None:
        self.say(f"Handling connection for {local}")
        request, self.next_request = self.next_request, self.next_request + 1
        headers = {"streamtype": "error", "port": str(remote), "requestid": str(request)}
        error = data = None
        try:
            error = await self.open_stream(headers)
            await self.send(lambda: spdy.data(error, b"", fin=True))  # nothing is sent on it
            data = await self.open_stream({**headers, "streamtype": "data"})
            upload = asyncio.ensure_future(self._upload(reader, data))
            try:
                while (chunk := await self.inbound[data].get()) is not None:
                    writer.write(chunk)
                    await writer.drain()
            finally:
                upload.cancel()
                await asyncio.gather(upload, return_exceptions=True)
            await self.send(lambda: spdy.rst_stream(data, spdy.CANCEL))
            message = b""
            while (chunk := await self.inbound[error].get()) is not None:
                message += chunk
            if message:
                self.warn(f"an error occurred forwarding {local} -> {remote}: "
                          f"{message.decode(errors='replace')}")
        except (ConnectionError, OSError):
            pass  # the local connection, or the tunnel, went away
        finally:
            for stream in (error, data):
                self.inbound.pop(stream, None)
            writer.close()

    async def _upload(self, reader: asyncio.StreamReader, stream: int) -> None:
        try:
            while chunk := await reader.read(CHUNK):
                await self.send(lambda: spdy.data(stream, chunk))
        except (ConnectionError, OSError):
            pass
        await self.send(lambda: spdy.data(stream, b"", fin=True))


def tls_context(ca_file: str, cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca_file)
    context.load_cert_chain(cert_file, key_file)
    return context
