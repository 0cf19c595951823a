"""Smoke test of the restart benchmark: every row runs and its figures are sane. Speed is never asserted."""
from bench import restart

from .outputs import check_outputs, sane_latency


def test_restart_bench_produces_sane_figures(bench_dir, monkeypatch, tmp_path):
    rows = {k: v for k, v in restart.SUPERVISORS.items() if k != "supervisord"}  # no pip install in tests
    monkeypatch.setattr(restart, "SUPERVISORS", rows)
    report = restart.run(kills=2, workdir=bench_dir)

    assert set(report["results"]) == set(rows) | {"kubemu init -> kubelet (READY=1)"}
    for row in report["results"].values():
        assert row["n"] == 2 and row["unit"] == "ms" and len(row["samples_ms"]) == 2
        sane_latency(row)
    assert report["results"][restart.FLOOR]["ratio_p50_to_floor"] == 1.0
    kubelet, ready = report["results"]["kubemu init -> kubelet"], report["results"]["kubemu init -> kubelet (READY=1)"]
    assert ready["min"] >= kubelet["min"]  # alive before ready
    assert "clock" in kubelet and "ratio_p50_to_floor" not in kubelet  # not the floor's clock: no ratio
    text = check_outputs(report, restart, tmp_path, plots=2)
    assert "API pod container" in text and "p50 / floor" in text
