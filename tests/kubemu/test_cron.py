"""kubemu.cron: robfig/cron v3's standard grammar and messages, time zones and DST."""
import datetime
import math
from zoneinfo import ZoneInfo

import pytest

from kubemu import cron

NY = ZoneInfo("America/New_York")


def ts(*args, tz=datetime.timezone.utc) -> float:
    return datetime.datetime(*args, tzinfo=tz).timestamp()


def wall(t: float, tz=datetime.timezone.utc) -> str:
    return datetime.datetime.fromtimestamp(t, tz).strftime("%Y-%m-%d %H:%M %Z")


@pytest.mark.parametrize("schedule, message", [
    ("", "empty spec string"),
    ("error", "expected exactly 5 fields, found 1: [error]"),
    ("* * * *", "expected exactly 5 fields, found 4: [* * * *]"),
    ("0 * * * * *", "expected exactly 5 fields, found 6: [0 * * * * *]"),
    ("60 * * * *", "end of range (60) above maximum (59): 60"),
    ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
    ("* * * * 7", "end of range (7) above maximum (6): 7"),
    ("5-1 * * * *", "beginning of range (5) beyond end of range (1): 5-1"),
    ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
    ("1/2/3 * * * *", "too many slashes: 1/2/3"),
    ("*/0 * * * *", "step of range should be a positive number: */0"),
    ("x * * * *", 'failed to parse int from x: strconv.Atoi: parsing "x": invalid syntax'),
    ("* * * foo *", 'failed to parse int from foo: strconv.Atoi: parsing "foo": invalid syntax'),
    ("@fortnightly", "unrecognized descriptor: @fortnightly"),
    ("@every 1d", 'failed to parse duration @every 1d: time: unknown unit "d" in duration "1d"'),
    ("@every 5", 'failed to parse duration @every 5: time: missing unit in duration "5"'),
    ("TZ=Mars/Olympus 0 * * * *",
     "provided bad location Mars/Olympus: unknown time zone Mars/Olympus"),
])
def test_invalid_schedules_carry_robfigs_messages(schedule, message):
    with pytest.raises(cron.CronError) as info:
        cron.parse(schedule)
    assert info.value.message == message
    assert info.value.field == "schedule"


@pytest.mark.parametrize("schedule", [
    "* * * * *", "*/1 * * * *", "0 0 * * *", "? ? ? ? ?", "0 9-17/2 * JAN-Mar mon-FRI",
    "0,15,30,45 * 1,15 * *", "@yearly", "@annually", "@monthly", "@weekly", "@daily",
    "@midnight", "@hourly", "@every 1h30m", "TZ=UTC 0 * * * *", "CRON_TZ=Europe/Paris 0 8 * * *",
])
def test_valid_schedules_parse(schedule):
    assert math.isfinite(cron.parse(schedule).next_after(ts(2024, 1, 1)))


@pytest.mark.parametrize("time_zone, message", [
    ("", "timeZone must be nil or non-empty string"),
    ("Local", "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"),
    ("Mars/Olympus", "unknown time zone Mars/Olympus"),
    ("../etc/passwd", "unknown time zone ../etc/passwd"),
    ("America/ThisNameIsTooLong", "unknown time zone America/ThisNameIsTooLong"),
])
def test_check_time_zone_has_validations_messages(time_zone, message):
    with pytest.raises(cron.CronError) as info:
        cron.check_time_zone(time_zone)
    assert (info.value.field, info.value.message) == ("timeZone", message)


def test_parse_loads_the_zone_as_the_controller_does():
    with pytest.raises(cron.CronError) as info:
        cron.parse("0 * * * *", "Mars/Olympus")
    assert (info.value.field, info.value.message) == ("timeZone", "unknown time zone Mars/Olympus")
    # LoadLocation("") is UTC: only validation refuses an empty zone
    assert cron.parse("0 8 * * *", "").next_after(ts(2024, 1, 1)) == ts(2024, 1, 1, 8)


def test_check_time_zone_accepts_none_and_iana_names():
    for name in (None, "UTC", "Etc/GMT+5", "America/New_York"):
        cron.check_time_zone(name)


def test_next_after_is_strictly_after():
    every_minute = cron.parse("*/1 * * * *")
    assert every_minute.next_after(ts(2024, 1, 1, 10, 0)) == ts(2024, 1, 1, 10, 1)
    assert every_minute.next_after(ts(2024, 1, 1, 10, 0) + 0.5) == ts(2024, 1, 1, 10, 1)
    assert every_minute.next_after(ts(2024, 1, 1, 9, 59, 59)) == ts(2024, 1, 1, 10, 0)


def test_descriptors():
    start = ts(2024, 5, 15, 10, 30)
    assert cron.parse("@hourly").next_after(start) == ts(2024, 5, 15, 11)
    assert cron.parse("@daily").next_after(start) == ts(2024, 5, 16)
    assert cron.parse("@weekly").next_after(start) == ts(2024, 5, 19)  # a Sunday
    assert cron.parse("@monthly").next_after(start) == ts(2024, 6, 1)
    assert cron.parse("@yearly").next_after(start) == ts(2025, 1, 1)
    assert cron.parse("@every 90s").next_after(start + 0.7) == start + 90


def test_days_combine_as_robfig_does():
    # a star in either day field: both must match (Mondays in the month)
    mondays = cron.parse("0 0 * * 1")
    assert [wall(t) for t in mondays.times_between(ts(2024, 7, 1), ts(2024, 7, 16), 10)] == [
        "2024-07-08 00:00 UTC", "2024-07-15 00:00 UTC"]
    # both restricted (*/2 is not a star): either matches
    either = cron.parse("0 0 */10 * 1")
    assert [wall(t)[:10] for t in either.times_between(ts(2024, 7, 1), ts(2024, 7, 16), 10)] == [
        "2024-07-08", "2024-07-11", "2024-07-15"]


def test_times_between_is_half_open_and_limited():
    hourly = cron.parse("@hourly")
    assert hourly.times_between(ts(2024, 1, 1, 0), ts(2024, 1, 1, 3), 10) == [
        ts(2024, 1, 1, 1), ts(2024, 1, 1, 2), ts(2024, 1, 1, 3)]
    assert len(hourly.times_between(ts(2024, 1, 1), ts(2025, 1, 1), 101)) == 101
    assert hourly.times_between(ts(2024, 1, 1, 0, 10), ts(2024, 1, 1, 0, 50), 10) == []


def test_schedule_that_never_fires():
    assert cron.parse("0 0 30 2 *").next_after(ts(2024, 1, 1)) == math.inf
    assert cron.parse("0 0 30 2 *").times_between(ts(2024, 1, 1), ts(2030, 1, 1), 5) == []


def test_time_zone_field_and_prefix():
    eight_in_paris = cron.parse("0 8 * * *", "Europe/Paris")
    assert eight_in_paris.next_after(ts(2024, 7, 1)) == ts(2024, 7, 1, 6)  # CEST = UTC+2
    prefixed = cron.parse("CRON_TZ=Europe/Paris 0 8 * * *")
    assert prefixed.next_after(ts(2024, 1, 1)) == ts(2024, 1, 1, 7)  # CET = UTC+1
    # a prefix wins over the field, as the controller's formatSchedule has it
    assert cron.parse("TZ=UTC 0 8 * * *", "Europe/Paris").next_after(ts(2024, 1, 1)) == ts(2024, 1, 1, 8)


def test_dst_spring_forward_skips_the_missing_time():
    at_0230 = cron.parse("30 2 * * *", "America/New_York")
    times = at_0230.times_between(ts(2024, 3, 9, 12, tz=NY), ts(2024, 3, 12, 12, tz=NY), 10)
    # 2024-03-10 02:30 does not exist in New York: that day has no run
    assert [wall(t, NY) for t in times] == ["2024-03-11 02:30 EDT", "2024-03-12 02:30 EDT"]
    every_half_hour = cron.parse("*/30 * * * *", "America/New_York")
    times = every_half_hour.times_between(ts(2024, 3, 10, 1, tz=NY), ts(2024, 3, 10, 3, 30, tz=NY), 10)
    assert [wall(t, NY) for t in times] == ["2024-03-10 01:30 EST", "2024-03-10 03:00 EDT",
                                            "2024-03-10 03:30 EDT"]


def test_dst_fall_back_runs_the_repeated_time_twice():
    at_0130 = cron.parse("30 1 * * *", "America/New_York")
    times = at_0130.times_between(ts(2024, 11, 2, 12, tz=NY), ts(2024, 11, 4, 12, tz=NY), 10)
    assert [wall(t, NY) for t in times] == ["2024-11-03 01:30 EDT", "2024-11-03 01:30 EST",
                                            "2024-11-04 01:30 EST"]
    assert times[1] - times[0] == 3600


@pytest.mark.parametrize("schedule", ["*/5 * * * *", "0 0 1 1 *", "@every 90s",
                                      "TZ=Europe/Paris 30 2 * * *", "0 0 30 2 *"])
@pytest.mark.parametrize("t", [1e18, -1e18, 2e11, -7e10, 1e15, math.inf, -math.inf, math.nan])
def test_a_time_beyond_datetimes_years_has_no_activation_and_no_exception(schedule, t):
    sched = cron.parse(schedule, "America/New_York")
    nxt = sched.next_after(t)
    assert nxt == math.inf or nxt > t
    assert all(t < x <= t + 86400 for x in sched.times_between(t, t + 86400))


def test_an_every_duration_beyond_gos_range_is_invalid():
    assert cron.parse("@every 2562047h") == cron.EverySchedule(2562047 * 3600)
    for text in ("2562048h", "9" * 400 + "h"):
        with pytest.raises(cron.CronError) as err:
            cron.parse(f"@every {text}")
        assert err.value.message == f'failed to parse duration @every {text}: time: invalid duration "{text}"'
