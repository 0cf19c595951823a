"""`SyncClient` and `SyncStream`: the wire's `Client` for blocking code (command-line tools), and
the `BlockingLoop` and `BlockingIterator` that every blocking client twin (store, API) is built on."""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Iterable, Iterator

import zmq

from ._wire_client import Stream
from ._wire_failover import client_for
from ._wire_limits import CLIENT_LINGER_MS, DEFAULT_MAX_FRAME


class BlockingLoop:
    """A private event loop and ZeroMQ context, for the blocking twins of asyncio clients (the
    wire's SyncClient, the store's and the API's). Not for use inside a running event loop."""

    def __init__(self, what: str):
        self.what = what
        self.context = zmq.Context()
        self.loop = asyncio.new_event_loop()
        self.closed = False

    def run(self, coro):
        if self.closed:
            coro.close()
            raise RuntimeError(f"this {self.what} is closed")
        return self.loop.run_until_complete(coro)

    def close(self, aclose: Callable[[], Awaitable[None]]) -> None:
        """Run `aclose()` (the async client's close), cancel what is left, then free the loop
        and the context."""
        if self.closed:
            return
        loop = self.loop
        try:
            loop.run_until_complete(aclose())
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            if leftovers:
                loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            self.closed = True
            loop.close()
            # term waits (at most the client linger) for queued sends such as CANCELs to flush
            self.context.destroy(linger=CLIENT_LINGER_MS)


class BlockingIterator:
    """An async stream driven by a BlockingLoop: iterate it; ``with`` (or `open()`) opens it
    and closes it after."""

    def __init__(self, runner: BlockingLoop, stream, opener: Callable[[], Awaitable]):
        self._runner = runner
        self._stream = stream
        self._opener = opener

    def __iter__(self) -> Iterator:
        return self

    def __next__(self):
        try:
            return self._runner.run(self._stream.__anext__())
        except StopAsyncIteration:
            raise StopIteration from None

    def open(self):
        self._runner.run(self._opener())
        return self

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if not self._runner.closed:
            self._runner.run(self._stream.aclose())


class SyncStream(BlockingIterator):
    """A blocking iterator over a stream; use it as a context manager so it gets closed."""

    def __init__(self, runner: BlockingLoop, stream: Stream):
        super().__init__(runner, stream, stream._open)


async def _nothing() -> None:
    pass


class SyncClient:
    """`Client` for blocking code (command-line tools): owns a private event loop and ZeroMQ
    context. Not for use inside a running event loop; close it (or use ``with``)."""

    def __init__(self, endpoint: str | Iterable[str], *, timeout: float = 10.0, max_frame: int = DEFAULT_MAX_FRAME,
                 credentials: tuple[str, str] | None = None, **options):
        """`endpoint`: one, or several (a list or a comma-separated string: a FailoverClient)."""
        self._runner = BlockingLoop("wire SyncClient")
        try:
            self._client = client_for(endpoint, timeout=timeout, max_frame=max_frame,
                                      context=self._runner.context, credentials=credentials, **options)
        except BaseException:  # a bad endpoint: free the loop and the context made for it
            self._runner.close(_nothing)
            raise

    @property
    def endpoint(self) -> str:
        return self._client.endpoint

    def __enter__(self) -> SyncClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _run(self, coro):
        return self._runner.run(coro)

    def call(self, method: str, params: dict | None = None, *, timeout: float | None = None,
             idempotent: bool = False):
        return self._run(self._client.call(method, params, timeout=timeout, idempotent=idempotent))

    def stream(self, method: str, params: dict | None = None, *, timeout: float | None = None) -> SyncStream:
        return SyncStream(self._runner, self._client.stream(method, params, timeout=timeout))

    def close(self) -> None:
        self._runner.close(self._client.close)
