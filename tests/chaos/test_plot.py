"""`--plot`'s data and plots: latency rows and rates from a history (pure, fake clock), and the
shell writing them, with matplotlib and without it."""
from __future__ import annotations

import builtins
import csv
import json

from kubemu.chaos import plot
from kubemu.chaos.history import History


class Clock:
    def __init__(self, times):
        self.times = iter(times)

    def __call__(self):
        return next(self.times)


def history():
    h = History(Clock([0.5, 0.7, 1.2, 2.9, 3.0, 3.4]))
    h.invoke("a", "write", "k", "x")   # 0.5
    h.invoke("b", "read", "k")         # 0.7
    h.ok("a", revision=2)              # 1.2
    h.info("b", error="timed out")     # 2.9: outcome unknown
    h.invoke("a", "read", "k")         # 3.0
    h.fail("a", error="refused")       # 3.4
    return h.operations()


def test_rows_carry_each_operations_latency_and_unknown_outcomes_have_none():
    rows = plot.latency_rows(history())
    assert [(r["process"], r["f"], r["status"], r["invoked"]) for r in rows] == [
        ("a", "write", "ok", 0.5), ("b", "read", "info", 0.7), ("a", "read", "fail", 3.0)]
    assert rows[0]["latency"] == 0.7 and rows[1]["latency"] is None and rows[2]["latency"] == 0.4


def test_rates_count_completions_per_second_with_empty_seconds():
    assert plot.rates(history()) == [(0.0, 0), (1.0, 1), (2.0, 0), (3.0, 1)]
    assert plot.rates([]) == []


WINDOWS = [{"index": 0, "kind": "delay", "target": "delay", "start": 1.0, "end": 2.0},
           {"index": 1, "kind": "membership", "target": "membership", "start": 2.5, "end": None}]


def test_write_draws_the_plot_and_its_data(tmp_path):
    lines = plot.write(tmp_path / "p", history(), WINDOWS, "title")
    assert (tmp_path / "p" / "latency.png").stat().st_size > 0
    with open(tmp_path / "p" / "latency.csv") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["ok", "info", "fail"]
    assert json.loads((tmp_path / "p" / "faults.json").read_text()) == WINDOWS
    assert lines[-1].startswith("plot: ")


def test_without_matplotlib_the_data_is_written_and_one_line_says_plots_were_skipped(tmp_path, monkeypatch):
    real = builtins.__import__

    def no_matplotlib(name, *args, **kw):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    lines = plot.write(tmp_path, history(), WINDOWS, "title")
    assert (tmp_path / "latency.csv").exists() and (tmp_path / "faults.json").exists()
    assert not (tmp_path / "latency.png").exists()
    assert [line for line in lines if "skipped" in line] == [
        "plots skipped: matplotlib is not installed (the data above is what they would show)"]
