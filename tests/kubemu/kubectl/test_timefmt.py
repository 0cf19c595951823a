"""kubectl's durations (AGE) and describe's timestamps."""
from __future__ import annotations

import datetime

import pytest

from kubemu.kubectl.timefmt import human_duration, rfc1123z, since, until

H = 3600


@pytest.mark.parametrize("seconds, want", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (1, "1s"), (70, "70s"), (119, "119s"), (120, "2m"),
    (190, "3m10s"), (599, "9m59s"), (600, "10m"), (70 * 60, "70m"), (179 * 60, "179m"), (3 * H, "3h"),
    (5 * H + 3 * 60, "5h3m"), (8 * H, "8h"), (47 * H, "47h"), (49 * H, "2d1h"), (3 * 24 * H, "3d"),
    ((8 * 24 + 2) * H, "8d"), (367 * 24 * H, "367d"), ((365 * 2 * 24 + 25) * H, "2y1d"),
    ((365 * 8 * 24 + 2) * H, "8y"),
])
def test_human_duration_matches_apimachinery(seconds, want):
    assert human_duration(seconds) == want


def test_since_and_until_read_rfc3339():
    now = datetime.datetime(2024, 1, 1, 0, 5, tzinfo=datetime.timezone.utc).timestamp()
    assert since("2024-01-01T00:00:00Z", now) == "5m"
    assert until("2024-01-01T00:05:30Z", now) == "30s"
    assert since(None, now) == "<unknown>"


def test_rfc1123z_is_english_whatever_the_locale():
    assert rfc1123z("2024-03-05T07:08:09Z", datetime.timezone.utc) == "Tue, 05 Mar 2024 07:08:09 +0000"
    two = datetime.timezone(datetime.timedelta(hours=2))
    assert rfc1123z("2024-03-05T07:08:09Z", two) == "Tue, 05 Mar 2024 09:08:09 +0200"
    assert rfc1123z(None) == "Mon, 01 Jan 0001 00:00:00 +0000"


def test_short_human_duration_matches_apimachinery():
    from kubemu.kubectl.timefmt import short_human_duration
    cases = {-5: "<invalid>", -1: "0s", 59: "59s", 60: "1m", 3599: "59m", 3600: "1h", 47 * 3600: "47h",
             48 * 3600: "2d", 364 * 86400: "364d", 365 * 86400: "1y"}
    assert {s: short_human_duration(s) for s in cases} == cases
