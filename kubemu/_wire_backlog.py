"""`PeerBacklog`: how many bytes of stream messages to one peer libzmq still holds.

libzmq bounds a peer's queue by a message count (SNDHWM), not by bytes, and never says when a
message leaves the queue. So every `MARK_EVERY` bytes one message goes out tracked (pyzmq's
MessageTracker, done once libzmq has let go of it, i.e. written it to the connection); the
queue is FIFO, so everything sent before a done mark is gone too. The estimate is high by at
most `MARK_EVERY`, and costs one tracked send per `MARK_EVERY` bytes.
"""
from __future__ import annotations

import collections
from typing import Protocol

MARK_EVERY = 256 * 1024


class Tracker(Protocol):
    done: bool


class PeerBacklog:
    __slots__ = ("sent", "_released", "_marks", "_next_mark")

    def __init__(self) -> None:
        self.sent = 0  # bytes handed to libzmq for this peer, ever
        self._released = 0  # of those, the ones known to be gone
        self._marks: collections.deque[tuple[Tracker, int]] = collections.deque()
        self._next_mark = MARK_EVERY

    def wants_mark(self) -> bool:
        """Whether the next message should go out tracked."""
        return self.sent >= self._next_mark

    def on_sent(self, size: int, tracker: Tracker | None = None) -> None:
        self.sent += size
        if tracker is not None:
            self._marks.append((tracker, self.sent))
            self._next_mark = self.sent + MARK_EVERY

    def queued(self) -> int:
        """Bytes sent that libzmq may still hold (at most MARK_EVERY too many)."""
        marks = self._marks
        while marks and marks[0][0].done:
            self._released = marks.popleft()[1]
        return self.sent - self._released
