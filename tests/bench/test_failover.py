"""Smoke test of the failover benchmark, 2 kills per layer: every clock stops, with sane
figures. Speed is never asserted."""
from bench import failover

from .outputs import check_outputs, sane_latency


def test_failover_bench_produces_sane_figures(bench_dir, tmp_path):
    report = failover.run(kills=2, workdir=bench_dir)

    assert report["suite"] == "failover" and report["trials"] == 2
    res = report["results"]
    assert len(res) == 6
    assert sum(name.startswith("store leader kill") for name in res) == 3
    assert sum(name.startswith("apiserver kill") for name in res) == 3
    for row in res.values():
        assert row["n"] == 2 and row["missing"] == 0 and row["unit"] == "ms"
        sane_latency(row)
    # the kubelet reports the new apiserver before it can answer anyone
    assert res["apiserver kill -> kubelet reports a new apiserver PID"]["min"] > 0
    text = check_outputs(report, failover, tmp_path, plots=2)
    assert "long-lived ApiClient" in text
