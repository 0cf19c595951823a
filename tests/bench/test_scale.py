"""The scale benchmark: its pure parts (SLO bounds, Lease lag, call summaries, the workload's
shape), and a smoke test at a small size (a real cluster: 3 store replicas, control plane, 5
hollow nodes, 60 pods, a 4 s steady window): it runs, its figures exist and are sane, its
cluster is gone afterwards. Speed is never asserted."""
import asyncio
import math

import pytest

from bench import scale
from bench.reconcile_workload import replicas_per_deployment
from bench.scale_load import CallLog, lag_summary, lease_lag, paced, slo_seconds
from kubemu.api.times import format_micro_time
from kubemu.apiclient import WireError

from .conftest import processes_under
from .outputs import check_outputs


def test_slo_bounds_follow_kubernetes_api_call_latency_slo():
    assert slo_seconds("PUT", "resource") == slo_seconds("DELETE", "resource") == 1.0
    assert slo_seconds("GET", "resource") == 1.0
    assert slo_seconds("LIST", "namespace") == slo_seconds("LIST", "cluster") == 30.0


def test_deployments_hold_at_most_300_replicas():
    for pods in (1, 300, 301, 2000, 30000):
        replicas = replicas_per_deployment(pods, scale.deployments_for(pods))
        assert sum(replicas) == pods and max(replicas) <= scale.MAX_REPLICAS
    assert scale.deployments_for(30000) == 100


def test_pods_that_do_not_fit_the_nodes_are_refused_before_a_cluster_starts():
    with pytest.raises(ValueError, match="do not fit"):
        scale.run(pods=1000, hollow_nodes=5)


def lease(name: str, renewed: float, duration: int = 40) -> dict:
    return {"metadata": {"name": name}, "spec": {"renewTime": format_micro_time(renewed),
                                                 "leaseDurationSeconds": duration}}


def test_lease_lag_is_the_oldest_hollow_node_renewal():
    now = 1_000_000.0
    leases = [lease("hollow-node-0", now - 3), lease("hollow-node-1", now - 12.5), lease("node-0", now - 100),
              {"metadata": {"name": "hollow-node-2"}, "spec": {}}]  # never renewed yet: no lag to tell
    lag = lease_lag(leases, now)
    assert lag["node"] == "hollow-node-1" and lag["max_lag_s"] == pytest.approx(12.5, abs=1e-3)
    assert lag["leases"] == 2 and lag["duration_s"] == 40  # node-0 is a real kubelet's: not counted
    assert math.isnan(lease_lag([], now)["max_lag_s"])


def test_lag_summary_judges_the_worst_sample_against_the_lease_duration():
    samples = [{"leases": 5, "max_lag_s": 9.0, "node": "a", "duration_s": 40},
               {"leases": 5, "max_lag_s": 14.0, "node": "b", "duration_s": 40}]
    s = lag_summary(samples, 10.0)
    assert s["max_lag_s"] == 14.0 and s["late_by_s"] == pytest.approx(4.0) and s["within_duration"]
    assert not lag_summary(samples + [{"leases": 5, "max_lag_s": 41.0, "node": "c", "duration_s": 40}],
                           10.0)["within_duration"]
    assert not lag_summary([], 10.0)["within_duration"]  # no sample: nothing shown, nothing met


def test_call_log_counts_failures_apart_and_never_meets_an_slo_with_them():
    log = CallLog()

    async def ok():
        return {}

    async def failing():
        raise WireError("Unavailable", "no leader")

    async def calls():
        for _ in range(3):
            await log.timed("GET", "pods", "resource", ok())
        await log.timed("PUT", "configmaps", "resource", ok())
        assert await log.timed("PUT", "configmaps", "resource", failing()) is None
        await log.timed("LIST", "pods", "cluster", failing())
    asyncio.run(calls())
    rows = log.summary()
    assert rows["GET pods (resource)"]["n"] == 3 and rows["GET pods (resource)"]["slo_met"]
    assert rows["GET pods (resource)"]["slo_p99_ms"] == 1000.0
    assert rows["PUT configmaps (resource)"]["n"] == 1 and not rows["PUT configmaps (resource)"]["slo_met"]
    assert rows["PUT configmaps (resource)"]["errors"] == {"WireError": 1}
    only_failed = rows["LIST pods (cluster)"]
    assert only_failed["n"] == 0 and math.isnan(only_failed["p99_ms"]) and not only_failed["slo_met"]


def test_paced_keeps_its_interval_after_a_slow_call_and_stops_at_the_deadline():
    calls = []

    async def main():
        loop = asyncio.get_running_loop()

        async def step():
            calls.append(loop.time())
            if len(calls) == 1:
                await asyncio.sleep(0.2)  # a slow call: the calls it held up are not made in a burst after it
        await paced(0.05, loop.time() + 0.42, step)
    asyncio.run(main())
    assert 4 <= len(calls) <= 7
    assert all(b - a >= 0.04 for a, b in zip(calls, calls[1:]))


def test_scale_small_produces_sane_figures(bench_dir, tmp_path):
    report = scale.run(pods=60, hollow_nodes=5, steady_seconds=4, workdir=bench_dir)
    assert not processes_under(bench_dir), "the benchmark left processes of its cluster behind"
    assert not list(bench_dir.iterdir())  # nor its cluster's directory

    config, res = report["config"], report["results"]
    assert report["suite"] == "scale" and config["pods"] == 60 and config["deployments"] == 1
    up = res["startup"]
    assert up["pods"] == 60 and up["seconds"] > 0 and up["latency"]["from_first_seen"]["n"] == 60

    steady = res["steady"]
    assert steady["seconds"] >= 4 and steady["pods_running"] == 60
    assert steady["nodes"]["total"] >= 5 and steady["nodes"]["ready"] == steady["nodes"]["total"]
    calls = steady["calls"]
    for name in ("GET pods (resource)", "GET nodes (resource)", "POST configmaps (resource)",
                 "PUT configmaps (resource)", "DELETE configmaps (resource)", "LIST pods (namespace)",
                 "LIST pods (cluster)", "LIST leases (namespace)"):
        row = calls[name]
        assert row["n"] > 0 and not row["errors"], (name, row)
        assert 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"] and math.isfinite(row["max_ms"])
    listed = steady["listed_items"]
    assert listed["namespace"][0]["items"] == 60 and listed["cluster"][0]["items"] > 60
    assert all(whole["seconds"] > 0 for whole in listed["namespace"] + listed["cluster"])
    assert steady["api_requests"]["by_verb_resource"].get("create configmaps", 0) >= 1

    lease = steady["lease_renewal"]
    assert lease["leases"] == 5 and lease["samples"] >= 1 and lease["lease_duration_s"] == 40
    assert 0 <= lease["max_lag_s"] < 40 and lease["within_duration"]

    mem = steady["memory"]
    assert {"apiserver", "scheduler", "controller-manager", "hollow kubelet", "store-0"} <= set(mem["by_role"])
    assert 0 < mem["total"]["pss_mb"] <= mem["total"]["rss_mb"] and mem["benchmark_client_rss_mb"] > 0
    assert steady["processes"]["roles"]["apiserver"]["cpu_s"] > 0

    store = res["store"]
    assert store["applied_everywhere_after_s"] is not None and store["compacted_at_revision"] > 0
    assert set(store["replicas"]) == {"store-0", "store-1", "store-2"}
    for r in store["replicas"].values():
        assert r["db_size_before"] > 0 and r["db_size_after_compaction"] > 0 and r["rss_mb_before"] > 0
        assert r["db_size_after"] > 0 and r["defragment_s"] > 0 and "defragment_error" not in r

    text = check_outputs(report, scale, tmp_path / "plots", 0)
    assert "LIST pods (cluster)" in text and "anchor: kwok" in text
    assert [h[0] for h in scale.headlines(report)][1] == "API call latency SLOs (steady window)"
    assert "defragment" in text
    replica = report["results"]["store"]["replicas"]["store-1"]
    del replica["defragment_s"]
    replica["defragment_error"] = "Unavailable: timed out"
    assert "defragment failed: Unavailable: timed out" in check_outputs(report, scale, tmp_path / "plots", 0)
    report["results"]["store"] = {"skipped": "compaction at revision 7 on store-0 failed: NotLeader"}
    assert "NotLeader" in check_outputs(report, scale, tmp_path / "plots", 0)
