"""Per-pod backoff: 1 s doubling to 10 s, explicit time, reset."""
from __future__ import annotations

import pytest

from components.scheduling.backoff import Backoff, backoff_duration


def test_sequence_doubles_and_caps():
    b = Backoff()
    assert [b.record_failure("ns/p", now=0.0) for _ in range(6)] == [1, 2, 4, 8, 10, 10]
    assert b.attempts("ns/p") == 6


def test_reset_starts_over():
    b = Backoff()
    for _ in range(4):
        b.record_failure("ns/p", 0.0)
    b.reset("ns/p")
    assert "ns/p" not in b and b.attempts("ns/p") == 0 and b.ready_at("ns/p") is None
    assert b.record_failure("ns/p", 5.0) == 1
    b.reset("never-seen")  # no error


def test_ready_time_uses_the_given_clock():
    b = Backoff()
    assert not b.is_backing_off("p", 100.0)
    b.record_failure("p", 100.0)
    assert b.ready_at("p") == 101.0
    assert b.is_backing_off("p", 100.5)
    assert not b.is_backing_off("p", 101.0)
    b.record_failure("p", 101.0)
    assert b.ready_at("p") == 103.0


def test_pods_back_off_independently():
    b = Backoff()
    b.record_failure("a", 0.0)
    b.record_failure("a", 0.0)
    assert b.record_failure("b", 0.0) == 1
    assert b.next_ready(0.0) == 1.0
    assert b.next_ready(1.5) == 2.0
    assert b.next_ready(5.0) is None
    assert len(b) == 2


def test_custom_bounds_and_function():
    assert [backoff_duration(n) for n in range(1, 8)] == [1, 2, 4, 8, 10, 10, 10]
    assert [backoff_duration(n, 0.5, 3) for n in range(1, 5)] == [0.5, 1, 2, 3]
    assert backoff_duration(1000) == 10
    with pytest.raises(ValueError):
        Backoff(initial=5, maximum=1)
