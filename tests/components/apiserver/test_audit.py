import datetime
import re

from components.apiserver import audit


def _at(monkeypatch, moment: datetime.datetime) -> None:
    ns = int(moment.timestamp()) * 10**9 + moment.microsecond * 1000
    monkeypatch.setattr(audit.time, "time_ns", lambda: ns)


def test_now_is_utc_with_six_fraction_digits_and_follows_each_second(monkeypatch):
    whole = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    _at(monkeypatch, whole)
    assert audit.now_rfc3339() == "2026-01-02T01:04:05.000000Z"
    _at(monkeypatch, whole.replace(microsecond=999_999))
    assert audit.now_rfc3339() == "2026-01-02T01:04:05.999999Z"
    _at(monkeypatch, whole + datetime.timedelta(microseconds=1_000_007))  # the next second: formatted anew
    assert audit.now_rfc3339() == "2026-01-02T01:04:06.000007Z"
    _at(monkeypatch, whole + datetime.timedelta(days=366))
    assert audit.now_rfc3339() == "2027-01-03T01:04:05.000000Z"


def test_now_has_the_audit_line_shape():
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", audit.now_rfc3339())
