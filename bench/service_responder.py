"""The backends of `kubemu bench service`: the fastest HTTP answer Python gives without a
framework, so that the server costs little beside the path measured (http.server costs more
than the kernel's DNAT: its figures would hide it).

    python -m bench.service_responder --port PORT

Every request (read up to its blank line) gets one fixed `200` answer whose body is the address
the connection came in on (the pod's IP: which backend answered, with no lookup), then the
connection is closed, so each request is a new connection through the Service's rules. Listens
as kubelet/programs/httpd.py does: every address in a pod's own network, loopback otherwise."""
from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from kubemu.netnsinfo import listen_address

MAX_REQUEST = 16384


def response(body: str) -> bytes:
    data = body.encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(data), data))


class Responder(asyncio.Protocol):
    def connection_made(self, transport) -> None:
        self.transport = transport
        self.buffer = b""
        self.answer = response(transport.get_extra_info("sockname")[0])

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if b"\r\n\r\n" in self.buffer:
            self.transport.write(self.answer)
            self.transport.close()
        elif len(self.buffer) > MAX_REQUEST:
            self.transport.close()


async def serve(address: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    server = await loop.create_server(Responder, address, port, reuse_port=True, backlog=1024)
    print(f"service_responder: listening on {address}:{server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.service_responder", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    args = p.parse_args(argv)
    address = listen_address()
    try:
        asyncio.run(serve(address, args.port))
    except OSError as err:
        print(f"service_responder: cannot listen on {address}:{args.port}: {err.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
