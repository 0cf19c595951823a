"""The kubelet's CrashLoopBackOff series, pure: a fake clock (floats), no sleeping."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubelet.backoff import Backoff, go_duration

SERIES = [0, 10, 20, 40, 80, 160, 300, 300, 300]


def crash_loop(b: Backoff, uptimes, t=1000.0):
    """Start, stay up for each given time, crash; restart after the returned wait. Return the waits."""
    waits = []
    for up in uptimes:
        b.record_start("c", t)
        t += up
        wait = b.record_failure("c", t)
        waits.append(wait)
        t += wait
    return waits


def test_series_doubles_from_immediate_to_the_cap():
    assert crash_loop(Backoff(), [1] * len(SERIES)) == SERIES


def test_next_delay_is_a_pure_query():
    b = Backoff()
    crash_loop(b, [1, 1, 1])  # waits 0, 10, 20: the next exit waits 40
    b.record_start("c", 5000)
    assert b.next_delay("c", 5001) == 40
    assert b.next_delay("c", 5001) == 40  # asking changes nothing
    assert b.current("c") == 40
    assert b.record_failure("c", 5001) == 40
    assert b.current("c") == 80


def test_series_resets_after_ten_minutes_up():
    b = Backoff()
    assert crash_loop(b, [1, 1, 1, 1]) == [0, 10, 20, 40]
    # Up for exactly 2 x the cap (600 s) without exiting: considered stable, start over.
    assert crash_loop(b, [600, 1, 1]) == [0, 10, 20]


def test_no_reset_just_short_of_ten_minutes():
    b = Backoff()
    assert crash_loop(b, [1, 1, 1, 1]) == [0, 10, 20, 40]
    assert crash_loop(b, [599.9, 1]) == [80, 160]


def test_a_failed_start_never_resets_the_series():
    # Long ago started, then failing to start over and over: each start attempt restarts the
    # up-time clock, so zero up-time never counts as "stable".
    b = Backoff()
    b.record_start("c", 0)
    waits = []
    t = 10_000.0
    for _ in range(4):
        wait = b.record_failure("c", t)
        waits.append(wait)
        t += wait
        b.record_start("c", t)
    assert waits == [0, 10, 20, 40]


def test_keys_are_independent_and_reset_forgets():
    b = Backoff()
    crash_loop(b, [1, 1, 1])
    assert b.next_delay("other", 0) == 0
    b.reset("c")
    assert b.next_delay("c", 99999) == 0
    assert b.current("c") == 0


def test_settings_scale_every_duration():
    b = Backoff(initial=0.1, maximum=3.0)
    waits = crash_loop(b, [0.01] * 8)
    assert waits == pytest.approx([0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.0, 3.0])
    assert b.reset_after == 6.0


@pytest.mark.parametrize("seconds,text", [
    (0, "0s"), (10, "10s"), (40, "40s"), (80, "1m20s"), (160, "2m40s"), (300, "5m0s"),
    (3600, "1h0m0s"), (3661.5, "1h1m1.5s"), (1.5, "1.5s"), (0.1, "100ms"), (0.0015, "1.5ms"),
    (2e-6, "2µs"), (3e-9, "3ns"), (-10, "-10s"),
])
def test_go_duration_formatting(seconds, text):
    assert go_duration(seconds) == text


@settings(max_examples=200, deadline=None)
# Up-times in 1/1024 s, exact in binary: with decimals, 1000.1 + 600 - 1000.1 is 599.99..., and
# the rule under test is the kubelet's >= 600 s, not float rounding.
@given(st.lists(st.integers(min_value=0, max_value=1500 * 1024).map(lambda n: n / 1024), min_size=1, max_size=30))
def test_series_matches_the_rule(uptimes):
    """Any history: the wait is 0 after a stable run (>= 600 s up) or on the first exit,
    else 10 s doubled once per exit since, capped at 300 s."""
    waits = crash_loop(Backoff(), uptimes)
    streak = 0  # exits since the series last started
    for up, wait in zip(uptimes, waits):
        if up >= 600:
            streak = 0
        expected = 0 if streak == 0 else min(10 * 2 ** (streak - 1), 300)
        assert wait == expected
        streak += 1
