"""Smoke test of the restart benchmark: it runs and its figures are sane. Speed is never asserted."""
import math

from bench import restart


def test_restart_bench_produces_sane_figures(tmp_path, monkeypatch):
    peers = {k: v for k, v in restart.SUPERVISORS.items() if k != "supervisord"}  # no pip install in tests
    monkeypatch.setattr(restart, "SUPERVISORS", peers)
    report = restart.run(kills=3)
    assert set(report["results"]) == set(peers)
    for row in report["results"].values():
        assert row["n"] == 3 and row["unit"] == "ms"
        assert 0 < row["min"] <= row["p50"] <= row["p99"] <= row["max"] and math.isfinite(row["max"])
    assert report["results"]["floor (bare waitpid loop)"]["ratio_p50_to_floor"] == 1.0
    assert report["machine"]["cpus"] >= 1
