"""Smoke test of the footprint benchmark over a short window. Figures are never compared with anchors."""
from bench import footprint

from .outputs import check_outputs


def test_footprint_bench_counts_every_role(bench_dir, tmp_path):
    report = footprint.run(workdir=bench_dir, window=2.0)

    res = report["results"]
    roles = res["per_role"]
    assert {"init", "kubelet", "shim", "store", "apiserver", "scheduler", "controller-manager"} <= set(roles)
    assert roles["store"]["processes"] == 3 and roles["init"]["processes"] == 1
    for row in roles.values():
        assert 0 < row["pss_mb"] <= row["rss_mb"] and row["cpu_pct"] >= 0
    total = res["total"]
    assert total["processes"] == sum(r["processes"] for r in roles.values())
    assert total["pss_mb"] > 0 and res["window_s"] >= 2.0 and len(res["cpu_timeline"]) >= 2
    text = check_outputs(report, footprint, tmp_path, plots=2)
    assert "k3s" in text and "total" in text
