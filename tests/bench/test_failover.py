"""Smoke test of the failover benchmark, 2 kills per layer (the control-plane node too): every
clock stops, with sane figures. Speed is never asserted."""
import pytest

from bench import failover, failover_ha

from .outputs import check_outputs, sane_latency


@pytest.mark.timeout(1800)  # an HA cluster boots, and each of its killed nodes boots again
def test_failover_bench_produces_sane_figures(bench_dir, tmp_path):
    report = failover.run(kills=2, workdir=bench_dir)

    assert report["suite"] == "failover" and report["trials"] == report["node_kills"] == 2
    res = report["results"]
    assert len(res) == 9
    assert sum(name.startswith("store leader kill") for name in res) == 3
    assert sum(name.startswith("apiserver kill") for name in res) == 3
    assert set(failover_ha.ROWS) <= set(res)
    # every kill took the node of the controller-manager's leader
    for kill in report["node_kill_trials"]:
        assert kill["victim"] in ("node-0", "node-1", "node-2") and "kube-controller-manager" in kill["took"]
    for row in res.values():
        assert row["n"] == 2 and row["missing"] == 0 and row["unit"] == "ms"
        sane_latency(row)
    # the kubelet reports the new apiserver before it can answer anyone
    assert res["apiserver kill -> kubelet reports a new apiserver PID"]["min"] > 0
    text = check_outputs(report, failover, tmp_path, plots=2)
    assert "long-lived ApiClient" in text and "first API write" in text
