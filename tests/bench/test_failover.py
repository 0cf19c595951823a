"""Smoke test of the failover benchmark, 2 kills per layer (the control-plane node too, with
--fast and with the default timings): every clock stops, with sane figures. Speed is never
asserted."""
import pytest

from bench import failover, failover_ha

from .outputs import check_outputs, sane_latency


@pytest.mark.timeout(2400)  # two HA clusters boot, and each of their killed nodes boots again
def test_failover_bench_produces_sane_figures(bench_dir, tmp_path):
    report = failover.run(kills=2, workdir=bench_dir)

    assert report["suite"] == "failover" and report["trials"] == report["node_kills"] == 2
    res = report["results"]
    assert len(res) == 12
    assert sum(name.startswith("store leader kill") for name in res) == 3
    assert sum(name.startswith("apiserver kill") for name in res) == 3
    node_rows = {failover_ha.row_name(clock, mode) for clock in failover_ha.CLOCKS for mode in failover_ha.MODES}
    assert node_rows <= set(res)
    # each timing mode's first write carries its own target
    targets = {mode: res[failover_ha.row_name("first_write_ms", mode)]["target_ms"] for mode in failover_ha.MODES}
    assert targets == {"--fast": 2000.0, "default timings": 17000.0}
    # every kill took the node of the controller-manager's leader
    assert list(report["node_kill_trials"]) == list(failover_ha.MODES)
    for kills in report["node_kill_trials"].values():
        assert len(kills) == 2
        for kill in kills:
            assert kill["victim"] in ("node-0", "node-1", "node-2") and "kube-controller-manager" in kill["took"]
    for row in res.values():
        assert row["n"] == 2 and row["missing"] == 0 and row["unit"] == "ms"
        sane_latency(row)
    # the kubelet reports the new apiserver before it can answer anyone
    assert res["apiserver kill -> kubelet reports a new apiserver PID"]["min"] > 0
    text = check_outputs(report, failover, tmp_path, plots=2)
    assert "long-lived ApiClient" in text and "first API write" in text
