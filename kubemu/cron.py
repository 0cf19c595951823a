"""Cron schedules as a CronJob reads them: robfig/cron v3's ``ParseStandard`` grammar (what
kube-apiserver validates ``spec.schedule`` with and the CronJob controller schedules by), its
error messages, and ``spec.timeZone`` as ``validateTimeZone`` checks it.

Grammar (exactly five whitespace-separated fields: minute hour day-of-month month day-of-week):

* a field is a comma list of ranges ``*`` | ``?`` | ``N`` | ``N-M``, each optionally ``/step``
  (``N/step`` means ``N-max/step``); months take ``jan``..``dec``, weekdays ``sun``..``sat``
  (any case); weekdays are 0-6 (7 is out of range, as robfig has it);
* the descriptors ``@yearly`` ``@annually`` ``@monthly`` ``@weekly`` ``@daily`` ``@midnight``
  ``@hourly`` and ``@every <Go duration>`` (robfig's standard parser accepts them, so
  Kubernetes does);
* a ``TZ=<zone> `` or ``CRON_TZ=<zone> `` prefix. ParseStandard accepts it; kube-apiserver
  rejects it on create (that rule is validation's, over the whole spec, not this module's).

The days rule is robfig's: when day-of-month or day-of-week is a star (``*``/``?``, not ``*/2``),
both must match; otherwise either does. A schedule without a zone runs in UTC (the
controller-manager's local time zone in a kind cluster). Over a daylight-saving change a
wall-clock time that does not exist that day is skipped and one that happens twice runs twice,
as robfig's ``Next`` does.

Next times come from croniter (fed the parsed fields as plain lists) and are re-checked against
the fields in the schedule's zone, which is what makes the DST behaviour robfig's.
"""
from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter, CroniterBadDateError

from kubemu.api.fielderrors import go_quote

FIELD_COUNT = 5
_MONTHS = {name: i + 1 for i, name in enumerate(
    "jan feb mar apr may jun jul aug sep oct nov dec".split())}
_WEEKDAYS = {name: i for i, name in enumerate("sun mon tue wed thu fri sat".split())}
# (name in croniter order, min, max, names)
_BOUNDS = (("minute", 0, 59, None), ("hour", 0, 23, None), ("dom", 1, 31, None),
           ("month", 1, 12, _MONTHS), ("dow", 0, 6, _WEEKDAYS))
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_EVERY = "@every "
_INT64_MAX = 2 ** 63 - 1
_MAX_DURATION = _INT64_MAX / 1e9   # seconds: time.Duration's range
# Every candidate croniter gives is re-checked; a DST change rejects at most a few in a row.
_MAX_REJECTED = 1000


class CronError(ValueError):
    """A schedule or time zone Kubernetes rejects; ``message`` is its validation wording (the
    detail after ``spec.schedule: Invalid value: "...": ``) and ``field`` the spec field it
    belongs to (``schedule`` or ``timeZone``)."""

    def __init__(self, message: str, field: str = "schedule"):
        super().__init__(message)
        self.message = message
        self.field = field


# --- time zones --------------------------------------------------------------------------------

# validateTimeZone's IANA naming rule for each /-separated part (digits and + tolerated for
# legacy names such as Etc/GMT+5).
_TZ_PART = re.compile(r"^[A-Za-z.\-_0-9+]{1,14}$")


def load_zone(name: str) -> datetime.tzinfo:
    """Go's time.LoadLocation: "" and "UTC" are UTC, "Local" the process's zone (UTC here);
    CronError(field="timeZone") with Go's message otherwise."""
    if name in ("", "UTC", "Local"):
        return datetime.timezone.utc
    if ".." in name or name.startswith(("/", "\\")):
        raise CronError("time: invalid location name", "timeZone")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CronError(f"unknown time zone {name}", "timeZone") from None


def check_time_zone(time_zone: str | None) -> None:
    """``spec.timeZone`` as validateTimeZone has it; raises CronError(field="timeZone")."""
    if time_zone is None:
        return
    if time_zone == "":
        raise CronError("timeZone must be nil or non-empty string", "timeZone")
    for part in time_zone.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TZ_PART.match(part):
            raise CronError(f"unknown time zone {time_zone}", "timeZone")
    if time_zone.lower() == "local":
        raise CronError("timeZone must be an explicit time zone as defined in "
                        "https://www.iana.org/time-zones", "timeZone")
    load_zone(time_zone)


# --- parsing -----------------------------------------------------------------------------------


def _go_list(fields: list[str]) -> str:
    return "[" + " ".join(fields) + "]"


def _parse_uint(expr: str) -> int:
    """robfig's mustParseInt: strconv.Atoi, then no negatives."""
    if not re.fullmatch(r"[+-]?[0-9]+", expr):
        raise CronError(f"failed to parse int from {expr}: strconv.Atoi: parsing "
                        f"{go_quote(expr)}: invalid syntax")
    num = int(expr)
    if not -_INT64_MAX - 1 <= num <= _INT64_MAX:
        raise CronError(f"failed to parse int from {expr}: strconv.Atoi: parsing "
                        f"{go_quote(expr)}: value out of range")
    if num < 0:
        raise CronError(f"negative number ({num}) not allowed: {expr}")
    return num


def _parse_value(expr: str, names: dict[str, int] | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _parse_uint(expr)


def _parse_range(expr: str, low: int, high: int,
                 names: dict[str, int] | None) -> tuple[set[int], bool]:
    """One range of a field -> (values, star); star is robfig's starBit (``*``/``?`` with a step
    of at most 1), which decides how the two day fields combine."""
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    star = low_and_high[0] in ("*", "?")
    if star:
        start, end = low, high
    else:
        start = _parse_value(low_and_high[0], names)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _parse_value(low_and_high[1], names)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _parse_uint(range_and_step[1])
        if len(low_and_high) == 1:
            end = high
        if step > 1:
            star = False
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < low:
        raise CronError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise CronError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step)), star


def _parse_field(field: str, low: int, high: int,
                 names: dict[str, int] | None) -> tuple[frozenset[int], bool]:
    values: set[int] = set()
    star = False
    for expr in (part for part in field.split(",") if part):
        more, more_star = _parse_range(expr, low, high, names)
        values |= more
        star = star or more_star
    return frozenset(values), star


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0,
                   "m": 60.0, "h": 3600.0}
# a number, then its unit: everything up to the next digit or dot
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)([^0-9.]*)")


def _parse_go_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds; ValueError carries Go's message."""
    quoted = go_quote(text)
    rest = text
    sign = 1.0
    if rest[:1] in ("-", "+"):
        sign = -1.0 if rest[0] == "-" else 1.0
        rest = rest[1:]
    if rest == "0":
        return 0.0
    if not rest:
        raise ValueError(f"time: invalid duration {quoted}")
    total = 0.0
    while rest:
        match = _DURATION_PART.match(rest)
        number, unit = match.group(1), match.group(2)
        if number in ("", "."):
            raise ValueError(f"time: invalid duration {quoted}")
        if not unit:
            raise ValueError(f"time: missing unit in duration {quoted}")
        if unit not in _DURATION_UNITS:
            raise ValueError(f"time: unknown unit {go_quote(unit)} in duration {quoted}")
        total += float(number) * _DURATION_UNITS[unit]
        rest = rest[match.end():]
    if total > _MAX_DURATION:
        raise ValueError(f"time: invalid duration {quoted}")   # Go's int64 nanoseconds overflow
    return sign * total


def _split_zone(spec: str) -> tuple[datetime.tzinfo | None, str]:
    """robfig's TZ=/CRON_TZ= prefix: (zone or None, the rest)."""
    if not spec.startswith(("TZ=", "CRON_TZ=")):
        return None, spec
    space = spec.find(" ")
    if space < 0:
        # robfig slices past the end here and panics; the schedule part is simply missing
        raise CronError(f"expected exactly {FIELD_COUNT} fields, found 0: []")
    name = spec[spec.index("=") + 1:space]
    try:
        zone = load_zone(name)
    except CronError as err:
        raise CronError(f"provided bad location {name}: {err.message}") from None
    return zone, spec[space:].strip()


def parse(schedule: str, time_zone: str | None = None) -> "Schedule":
    """``spec.schedule`` (+ ``spec.timeZone``) -> Schedule, as the CronJob controller reads them:
    a ``TZ=`` prefix in the schedule wins over ``time_zone`` (formatSchedule), which is loaded
    as Go's LoadLocation does. Raises CronError with robfig's message (field ``schedule``) or,
    for a zone that does not exist, ``unknown time zone <name>`` (field ``timeZone``).
    Validation checks ``spec.timeZone`` with `check_time_zone` (stricter: "" and "Local" are
    refused there)."""
    if not schedule:
        raise CronError("empty spec string")
    prefixed, spec = _split_zone(schedule)
    if prefixed is not None:
        zone = prefixed
    else:
        zone = load_zone(time_zone or "")
    if spec.startswith("@"):
        if spec in _DESCRIPTORS:
            spec = _DESCRIPTORS[spec]
        elif spec.startswith(_EVERY):
            try:
                delay = _parse_go_duration(spec[len(_EVERY):])
            except ValueError as err:
                raise CronError(f"failed to parse duration {spec}: {err}") from None
            # robfig's Every: whole seconds, at least one
            return EverySchedule(max(1, int(delay)))
        else:
            raise CronError(f"unrecognized descriptor: {spec}")
    fields = spec.split()
    if len(fields) != FIELD_COUNT:
        raise CronError(f"expected exactly {FIELD_COUNT} fields, found {len(fields)}: "
                        f"{_go_list(fields)}")
    parsed = [_parse_field(text, low, high, names)
              for text, (_, low, high, names) in zip(fields, _BOUNDS)]
    (minutes, _), (hours, _), (doms, dom_star), (months, _), (dows, dow_star) = parsed
    return SpecSchedule(minutes, hours, doms, months, dows, dom_star, dow_star, zone)


# --- schedules ---------------------------------------------------------------------------------


class Schedule:
    """Activation times of a parsed schedule; times are seconds since the epoch."""

    def next_after(self, t: float) -> float:
        """The first activation strictly after ``t`` (``math.inf`` if there is none, e.g.
        ``0 0 30 2 *``)."""
        raise NotImplementedError

    def times_between(self, a: float, b: float, limit: int | None = None) -> list[float]:
        """Activations in ``(a, b]``, oldest first (at most ``limit`` of them)."""
        times: list[float] = []
        t = self.next_after(a)
        while math.isfinite(t) and t <= b and (limit is None or len(times) < limit):
            times.append(t)
            t = self.next_after(t)
        return times


@dataclass(frozen=True)
class EverySchedule(Schedule):
    """``@every D``: D after the (whole-second) time it is asked about, as robfig's
    ConstantDelaySchedule."""
    seconds: int

    def next_after(self, t: float) -> float:
        return float(math.floor(t) + self.seconds) if math.isfinite(t) else math.inf


@dataclass(frozen=True)
class SpecSchedule(Schedule):
    minutes: frozenset[int]
    hours: frozenset[int]
    doms: frozenset[int]
    months: frozenset[int]
    dows: frozenset[int]           # 0 = Sunday
    dom_star: bool
    dow_star: bool
    zone: datetime.tzinfo

    def _matches(self, moment: datetime.datetime) -> bool:
        if (moment.minute not in self.minutes or moment.hour not in self.hours
                or moment.month not in self.months or moment.second):
            return False
        dom = moment.day in self.doms
        dow = (moment.isoweekday() % 7) in self.dows
        return (dom and dow) if (self.dom_star or self.dow_star) else (dom or dow)

    def _expression(self) -> str | None:
        def text(values: frozenset[int], star: bool = False) -> str:
            return "*" if star else ",".join(str(v) for v in sorted(values))
        if not (self.minutes and self.hours and self.doms and self.months and self.dows):
            return None  # a field like "," selects nothing: the schedule never fires
        return " ".join((text(self.minutes), text(self.hours), text(self.doms, self.dom_star),
                         text(self.months), text(self.dows, self.dow_star)))

    def next_after(self, t: float) -> float:
        expression = self._expression()
        if expression is None or not math.isfinite(t):
            return math.inf
        try:
            # a time outside datetime's years (a far clock, a garbage lastScheduleTime) has
            # no activation anyone will see
            base = datetime.datetime.fromtimestamp(math.floor(t), self.zone)
            it = croniter(expression, base, day_or=True)
            for _ in range(_MAX_REJECTED):
                candidate = it.get_next(datetime.datetime)
                if self._matches(candidate.astimezone(self.zone)):
                    return candidate.timestamp()
        except (CroniterBadDateError, OverflowError, ValueError, OSError):
            pass
        return math.inf
