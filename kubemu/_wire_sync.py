"""`SyncClient` and `SyncStream`: the wire's `Client` for blocking code (command-line tools)."""
from __future__ import annotations

import asyncio
from typing import Iterator

import zmq

from ._wire_client import Client, Stream
from ._wire_limits import CLIENT_LINGER_MS, DEFAULT_MAX_FRAME


class SyncStream:
    """A blocking iterator over a stream; use it as a context manager so it gets closed."""

    def __init__(self, owner: SyncClient, stream: Stream):
        self._owner = owner
        self._stream = stream

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        try:
            return self._owner._run(self._stream.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def __enter__(self) -> SyncStream:
        self._owner._run(self._stream._open())
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self._owner._closed:
            self._owner._run(self._stream.aclose())


class SyncClient:
    """`Client` for blocking code (command-line tools): owns a private event loop and ZeroMQ
    context. Not for use inside a running event loop; close it (or use ``with``)."""

    def __init__(self, endpoint: str, *, timeout: float = 10.0, max_frame: int = DEFAULT_MAX_FRAME):
        self._context = zmq.Context()
        self._loop = asyncio.new_event_loop()
        self._client = Client(endpoint, timeout=timeout, max_frame=max_frame, context=self._context)
        self._closed = False

    @property
    def endpoint(self) -> str:
        return self._client.endpoint

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _run(self, coro):
        if self._closed:
            coro.close()
            raise RuntimeError("this wire SyncClient is closed")
        return self._loop.run_until_complete(coro)

    def call(self, method: str, params: dict | None = None, *, timeout: float | None = None,
             idempotent: bool = False):
        return self._run(self._client.call(method, params, timeout=timeout, idempotent=idempotent))

    def stream(self, method: str, params: dict | None = None, *, timeout: float | None = None) -> SyncStream:
        return SyncStream(self, self._client.stream(method, params, timeout=timeout))

    def close(self) -> None:
        if self._closed:
            return
        loop = self._loop
        try:
            loop.run_until_complete(self._client.close())
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            if leftovers:
                loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            self._closed = True
            loop.close()
            # term waits (at most the client linger) for queued sends such as CANCELs to flush
            self._context.destroy(linger=CLIENT_LINGER_MS)
