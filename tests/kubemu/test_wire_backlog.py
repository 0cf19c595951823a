"""kubemu._wire_backlog: the bytes a peer's queue may still hold, from tracked marks."""
from __future__ import annotations

from kubemu._wire_backlog import MARK_EVERY, PeerBacklog


class FakeTracker:
    def __init__(self) -> None:
        self.done = False


def test_queued_counts_until_a_mark_is_released_in_order():
    b = PeerBacklog()
    marks = []  # (tracker, bytes sent up to and including its message)
    for _ in range(64):
        tracker = FakeTracker() if b.wants_mark() else None
        b.on_sent(64 * 1024, tracker)
        if tracker is not None:
            marks.append((tracker, b.sent))
    assert b.sent == 4 * 1024 * 1024 and b.queued() == b.sent
    assert 4 * 1024 * 1024 // (MARK_EVERY + 64 * 1024) <= len(marks) <= 4 * 1024 * 1024 // MARK_EVERY
    marks[0][0].done = True
    assert b.queued() == b.sent - marks[0][1]
    marks[2][0].done = True  # marks are read in order: [1] still holds the estimate
    assert b.queued() == b.sent - marks[0][1]
    marks[1][0].done = True
    assert b.queued() == b.sent - marks[2][1]
    for tracker, _ in marks:
        tracker.done = True
    assert b.queued() <= MARK_EVERY + 64 * 1024  # high by at most one mark's worth


def test_small_messages_are_marked_rarely():
    b = PeerBacklog()
    marks = 0
    for _ in range(100_000):
        tracker = FakeTracker() if b.wants_mark() else None
        b.on_sent(64, tracker)
        marks += tracker is not None
    assert marks == 100_000 * 64 // (MARK_EVERY + 64)
