"""Smoke test of the wire benchmark at tiny scale: sane figures and ratios. Speed is never asserted."""
import math

from bench import wirebench

from .outputs import check_outputs, sane_latency


def test_wire_bench_produces_sane_figures(bench_dir, tmp_path):
    report = wirebench.run(workdir=bench_dir, seconds=0.3, flood_n=2000, floods=2)

    assert set(report["results"]) == {"zmq", "kubemu", "kubemu-auth"}
    for row in report["results"].values():
        sane_latency(row["round_trip"])
        assert len(row["round_trip"]["cdf_ms"]) == 100
        one_way = row["one_way"]
        assert one_way["n"] == 2 and one_way["unit"] == "msgs/s" and one_way["min"] > 0
        assert sum(one_way["last_flood_timeline"]["counts"]) == 2000
    assert all(math.isfinite(v) and v > 0 for v in report["ratios"].values())
    text = check_outputs(report, wirebench, tmp_path, plots=3)
    assert "kubemu / floor" in text
