"""`kubemu bench all` and the runner: every suite in turn, one JSON, plots; a missing or
failing suite is recorded and the others still run."""
import json
import tempfile

from click.testing import CliRunner

from bench import runner
from kubemu.cli import main

from .outputs import PNG_MAGIC


def test_all_runs_every_suite_and_records_the_ones_that_cannot(bench_dir, monkeypatch, tmp_path):
    # wire stands for every suite (the others have smoke tests of their own); the wire servers
    # are marked with the suite's temp dir, under bench_dir here
    monkeypatch.setattr(tempfile, "tempdir", str(bench_dir))
    monkeypatch.setattr(runner, "SUITES", {"wire": "bench.wirebench", "missing": "bench.no_such_suite",
                                           "broken": "tests.bench.broken_suite"})
    out = tmp_path / "all.json"
    result = CliRunner().invoke(main, ["bench", "all", "--quick", "-o", str(out), "--plot", str(tmp_path / "p")])

    assert result.exit_code == 1 and "suite(s) failed: broken" in result.output
    report = json.loads(out.read_text())
    assert report["suite"] == "all" and report["quick"] is True and report["machine"]["cpus"] >= 1
    wire = report["reports"]["wire"]
    assert wire["suite"] == "wire" and wire["quick"] is True and len(wire["machine"]["loadavg_start"]) == 3
    assert "bench.no_such_suite" in report["reports"]["missing"]["unavailable"]
    assert "always fails" in report["reports"]["broken"]["failed"]
    assert "round trip" in result.output and "skipped" in result.output and "FAILED" in result.output
    plots = sorted((tmp_path / "p").iterdir())
    assert [p.name for p in plots] == ["wire-flood-over-time.png", "wire-one-way.png", "wire-round-trip-cdf.png"]
    assert all(p.read_bytes()[:8] == PNG_MAGIC for p in plots)


def test_a_missing_suite_fails_with_one_line(monkeypatch):
    monkeypatch.setitem(runner.SUITES, "reconcile", "bench.no_such_suite")
    result = CliRunner().invoke(main, ["bench", "reconcile", "--quick"])
    assert result.exit_code == 1 and "bench.no_such_suite is not installed" in result.output


def test_bench_help_lists_every_suite():
    result = CliRunner().invoke(main, ["bench", "--help"])
    assert result.exit_code == 0
    for suite in (*runner.SUITES, "all"):
        assert suite in result.output
    for option in ("--plot", "--trials", "--pods", "--deployments", "--hollow-nodes"):
        assert option in result.output
