"""`_Pump`: drives a plain zmq socket straight from the event loop's selector (the
edge-triggered ZMQ_FD), for the wire's Server and Client."""
from __future__ import annotations

import asyncio
import collections
import logging
from typing import Callable

import zmq
import zmq.backend

log = logging.getLogger("kubemu.wire")

_READ_BUDGET = 256  # messages handled per wake-up before other callbacks get a turn
# plain ints: the zmq enums cost an enum operation per use on the per-message path
_NOBLOCK = int(zmq.NOBLOCK)
_SNDMORE_NOBLOCK = int(zmq.SNDMORE | zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)
_POLLOUT = int(zmq.POLLOUT)
# pyzmq's own send, without zmq.Socket.send's Python wrapper (which only adds the draft
# routing_id/group arguments): the wrapper was a fifth of the CPU of sending a small message
_zmq_send = zmq.backend.Socket.send


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


class _Pump:
    """Runs `handle(frames)` for every message on a plain zmq socket straight from the event
    loop's selector callback: no future and no task hop per message (pyzmq's asyncio sockets
    cost two loop iterations per message). The zmq FD is edge-triggered, so every pass ends
    with a read of ZMQ_EVENTS that reports nothing to read, and a send made elsewhere must be
    followed by `kick()`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: zmq.Socket, handle: Callable[[list], None],
                 multipart: bool = True, metadata: bool = False):
        self._loop = loop
        self._sock = sock
        self._handle = handle
        # single-frame mode hands each frame over on its own (as a 1-item list), which saves a
        # ZMQ_RCVMORE read per message; the decoders still see any extra frame as garbage
        self._multipart = multipart
        # metadata (a ROUTER's messages): the second frame, the first the peer sent, is handed
        # over as a zmq.Frame, whose metadata (an authenticated peer's User-Id) a bytes copy loses
        self._metadata = metadata
        self._fd = sock.get(zmq.FD)
        self._writers: collections.deque[asyncio.Future] = collections.deque()
        self._scheduled = False
        self._running = False
        self._closed = False
        loop.add_reader(self._fd, self._run)
        self._schedule()

    def _schedule(self) -> None:
        if not self._scheduled and not self._closed:
            self._scheduled = True
            self._loop.call_soon(self._run)

    def kick(self) -> None:
        """Call after every send made outside `_run`: a send can consume the FD's notification.
        The check is deferred to one `_run` in the next loop iteration, so a burst of sends
        costs one ZMQ_EVENTS read, not one each."""
        if not (self._running or self._scheduled or self._closed):
            self._scheduled = True
            self._loop.call_soon(self._run)

    def writable(self) -> asyncio.Future:
        """A future resolved when the socket may accept a message (ZMQ_POLLOUT)."""
        fut = self._loop.create_future()
        self._writers.append(fut)
        self._schedule()
        return fut

    def _run(self) -> None:
        self._scheduled = False
        if self._closed:
            return
        sock, handle, multipart = self._sock, self._handle, self._multipart
        get, recv = sock.get, (sock.recv_multipart if multipart else sock.recv)
        if self._metadata:
            recv = self._recv_with_metadata
        self._running = True
        try:
            budget = _READ_BUDGET
            while True:
                # EVENTS before every read, rather than reading until EAGAIN: raising
                # zmq.Again costs more than the getsockopt
                events = get(_EVENTS)
                if events & _POLLOUT and self._writers:
                    writers, self._writers = self._writers, collections.deque()
                    for fut in writers:
                        _wake(fut)
                if not events & _POLLIN:
                    return
                if not budget:
                    self._schedule()  # more to read: continue after others had a turn
                    return
                budget -= 1
                try:
                    frames = recv(_NOBLOCK)
                except zmq.Again:
                    continue
                try:
                    handle(frames if multipart else [frames])
                except Exception:  # a bug in one message must not stop the socket
                    log.exception("error handling a message")
        except zmq.ZMQError as exc:
            if not self._closed:
                # the socket or its context is gone from under us: stop watching a dead FD
                log.error("socket %s failed, no longer reading it: %s", self._fd, exc)
                self.close()
        finally:
            self._running = False

    def _recv_with_metadata(self, flags: int) -> list:
        # frame by frame: cheaper than recv_multipart(copy=False), which makes a Frame of each
        sock = self._sock
        frames = [sock.recv(flags)]
        frame = sock.recv(flags, copy=False)
        frames.append(frame)
        more = frame.more
        while more:
            frames.append(sock.recv(flags))
            more = sock.get(zmq.RCVMORE)
        return frames

    def wake_writers(self) -> None:
        """Wake everyone waiting in `writable()`, to look again at why they wait."""
        writers, self._writers = self._writers, collections.deque()
        for fut in writers:
            _wake(fut)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._loop.remove_reader(self._fd)
        # wake, not cancel: a sender waiting for the connection should retry and fail with a
        # WireError, not see a CancelledError it did not ask for
        for fut in self._writers:
            _wake(fut)
        self._writers.clear()
