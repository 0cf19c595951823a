"""Smoke test of the startup benchmark, one `kubemu up` per timing set. Speed is never asserted."""
from bench import startup

from .outputs import check_outputs


def test_startup_bench_produces_sane_figures(bench_dir, tmp_path):
    report = startup.run(trials=1, workdir=bench_dir)

    assert set(report["results"]) == {"kubemu up --detach", "kubemu up --detach --fast"}
    for row in report["results"].values():
        assert row["n"] == 1 and row["unit"] == "s" and 0 < row["p50"] < startup.UP_TIMEOUT
        assert set(row["ratio_p50_to_anchors"]) == set(startup.ANCHORS_S)
    text = check_outputs(report, startup, tmp_path, plots=1)
    assert "kind" in text and "minikube" in text
