"""kubemu/api/times.py: metav1.Time and MicroTime text."""
from __future__ import annotations

import datetime

from kubemu.api.times import format_micro_time, format_time, parse_micro_time


def _strftime(ts: float) -> str:
    return datetime.datetime.fromtimestamp(int(ts // 1), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_format_time_is_the_whole_second_in_utc_however_the_calls_go_back_and_forth():
    # each second's text is remembered: a later call, an earlier one, or one past the few kept
    # seconds must still give that second's own text
    base = 1_764_200_000.0
    for ts in (base, base + 0.999, base + 1, base - 1, base + 0.5, *(base + n for n in range(10)), base,
               -0.5, 0.0):
        assert format_time(ts) == _strftime(ts)
    assert format_time(base + 0.999) == format_time(base) != format_time(base + 1)


def test_micro_time_round_trips():
    ts = 1_764_200_000.123456
    assert abs(parse_micro_time(format_micro_time(ts)) - ts) < 1e-6
