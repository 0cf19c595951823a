"""Times as kubectl shows them: AGE-style durations and describe's RFC 1123 timestamps."""
from __future__ import annotations

import datetime
from typing import Any

from components.controllers.podutil import parse_time

__all__ = ["parse_time", "human_duration", "short_human_duration", "since", "until", "rfc1123z"]

UNKNOWN = "<unknown>"
INVALID = "<invalid>"


def human_duration(seconds: float) -> str:
    """apimachinery's duration.HumanDuration: 45s, 3m12s, 15m, 5h3m, 2d4h, 3y12d."""
    secs = int(seconds)
    if secs < -1:  # a couple of seconds of clock skew still read as "now"
        return INVALID
    if secs < 0:
        return "0s"
    if secs < 120:
        return f"{secs}s"
    minutes = secs // 60
    if minutes < 10:
        return f"{minutes}m{secs % 60}s" if secs % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = secs // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def short_human_duration(seconds: float) -> str:
    """apimachinery's duration.ShortHumanDuration (kubeadm token list's TTL): 45s, 15m, 23h, 3d, 2y."""
    secs = int(seconds)
    if secs < -1:
        return INVALID
    if secs < 0:
        return "0s"
    if secs < 60:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m"
    if secs < 48 * 3600:
        return f"{secs // 3600}h"
    if secs < 365 * 24 * 3600:
        return f"{secs // (24 * 3600)}d"
    return f"{secs // (365 * 24 * 3600)}y"


def since(timestamp: Any, now: float) -> str:
    """translateTimestampSince: the age of an RFC 3339 time, `<unknown>` when unset."""
    ts = parse_time(timestamp)
    return UNKNOWN if ts is None else human_duration(now - ts)


def until(timestamp: Any, now: float) -> str:
    """translateTimestampUntil: how long until an RFC 3339 time."""
    ts = parse_time(timestamp)
    return UNKNOWN if ts is None else human_duration(ts - now)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def rfc1123z(timestamp: Any, tz: datetime.tzinfo | None = None) -> str:
    """Go's time.RFC1123Z in local time (or `tz`): `Mon, 02 Jan 2006 15:04:05 -0700`; an
    unset time reads as Go's zero time does."""
    ts = parse_time(timestamp)
    if ts is None:
        return "Mon, 01 Jan 0001 00:00:00 +0000"
    t = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).astimezone(tz)
    # names spelled out: strftime's %a/%b would follow the locale
    return (f"{_DAYS[t.weekday()]}, {t.day:02d} {_MONTHS[t.month - 1]} {t.year:04d} "
            f"{t:%H:%M:%S} {t:%z}")
