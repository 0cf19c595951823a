"""The API's two time formats: metav1.Time (RFC 3339, whole seconds, UTC) and metav1.MicroTime
(microseconds, what Lease and Event times carry). Times in are seconds since the epoch."""
from __future__ import annotations

import datetime


def format_time(ts: float) -> str:
    return datetime.datetime.fromtimestamp(int(ts // 1), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
