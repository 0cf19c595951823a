"""Smoke test of the footprint benchmark over a short window. Figures are never compared with anchors."""
import io

import pytest
from rich.console import Console

from bench import footprint, footprint_sandbox
from bench.skip import Skip
from kubemu import netplan, network

from .outputs import check_outputs


def test_footprint_bench_counts_every_role(bench_dir, tmp_path):
    report = footprint.run(workdir=bench_dir, window=2.0, sandbox_pods=2, kills=2)

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
    assert "k3s" in text and "total" in text and "a pod's sandbox" in text

    sandbox = report["sandbox"]
    if network.probe(None).kind != netplan.CNI:
        assert sandbox["skipped"].startswith("no pod sandboxes here: ")
        return
    assert sandbox["pods"] == 2
    host, pod, holder = sandbox["host_network_pod"], sandbox["pod_with_sandbox"], sandbox["holder"]
    assert host["processes"] == 2 and pod["processes"] == 3  # shim + container, + the holder
    for row in (host, pod, holder):
        assert 0 < row["pss_mb"] <= row["rss_mb"]
    kernel = sandbox["kernel_objects"]
    assert kernel["namespaces"] == ["net", "mnt", "uts", "ipc"] and kernel["fabric_veths_per_pod"] == 1
    assert kernel["sandbox_cgroups"] >= 1
    assert set(sandbox["steps_ms"]) == {"holder start", "CNI ADD", "CNI DEL", "holder kill -> gone"}
    for step in sandbox["steps_ms"].values():
        assert step["n"] == 2 and 0 < step["min"] <= step["p50"] <= step["max"]
    assert "holder (kubemu-pause)" in text and "CNI ADD" in text


def test_sandbox_cost_is_skipped_with_the_reason(bench_dir, monkeypatch):
    monkeypatch.setattr(network, "probe", lambda requested: netplan.Mode(netplan.HOST, "no CNI plugin bridge in /x"))
    with pytest.raises(Skip) as skipped:
        footprint_sandbox.measure(bench_dir, 1, 1)
    reason = str(skipped.value)
    assert reason == "no pod sandboxes here: no CNI plugin bridge in /x"
    out = io.StringIO()
    Console(file=out, width=300).print(footprint.sandbox_table({"skipped": reason}))
    assert "skipped: no pod sandboxes here: no CNI plugin bridge in /x" in out.getvalue()
    assert list(bench_dir.iterdir()) == []
