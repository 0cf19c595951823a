"""The API's two time formats: metav1.Time (RFC 3339, whole seconds, UTC) and metav1.MicroTime
(microseconds, what Lease and Event times carry). Times in are seconds since the epoch."""
from __future__ import annotations

import datetime
import functools


def format_time(ts: float) -> str:
    return _second_text(int(ts // 1))


# Controllers, the scheduler and a hollow kubelet stamp hundreds of objects a second, and
# metav1.Time has whole seconds: each second's text is made once (strftime is ~3 us).
@functools.lru_cache(maxsize=4)
def _second_text(second: int) -> str:
    return datetime.datetime.fromtimestamp(second, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_micro_time(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(stamp: str) -> float:
    """format_micro_time's text back to seconds since the epoch; ValueError if it is not one."""
    moment = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    return moment.replace(tzinfo=datetime.timezone.utc).timestamp()
