"""Smoke test of the reconcile benchmark at --quick scale (a real cluster: 3 store replicas,
control plane, 10 hollow nodes, 2 x 50 pods, one controller-manager kill, CPU profiles; then a
3-control-plane cluster with the same hollow nodes and pods): it runs, its figures are sane and
its clusters are gone afterwards. Speed is never asserted."""
import json
import math
import os
from collections import Counter

from bench import reconcile
from bench.reconcile_cpuprofile import role_of, speedscope
from bench.reconcile_profile import summarize
from bench.reconcile_workload import PodTracker, replicas_for, replicas_per_deployment

from .conftest import processes_under
from .outputs import check_outputs

ROLES = {"store-0", "store-1", "store-2", "apiserver", "scheduler", "controller-manager", "hollow kubelet",
         "kubelet", "init"}


def ordered(row: dict) -> None:
    assert row["n"] > 0
    assert 0 <= row["min_ms"] <= row["p50_ms"] <= row["p90_ms"] <= row["p99_ms"] <= row["max_ms"]
    assert math.isfinite(row["max_ms"])


def test_replicas_are_spread_evenly():
    assert replicas_per_deployment(1000, 10) == [100] * 10
    assert replicas_per_deployment(7, 3) == [3, 2, 2]


def pod(uid: str, phase: str = "Pending", node: str = "", deleting: bool = False) -> dict:
    meta = {"uid": uid, "creationTimestamp": "2026-01-01T00:00:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:01Z"
    return {"metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_tracker_times_each_step_once():
    t = PodTracker()
    t.observe(pod("a"))
    t.observe(pod("a", node="n"))
    t.observe(pod("a", "Running", "n"))
    t.observe(pod("a", "Running", "n"))  # a later update does not move the Running time
    first = t.running_at["a"]
    t.observe(pod("a", "Running", "n"))
    assert t.running_at["a"] == first and t.first_seen["a"] <= t.bound_at["a"] <= first
    assert t.running == t.live == {"a"}
    t.observe(pod("a", "Running", "n", deleting=True))
    assert not t.live and not t.running
    t.delete(pod("a", "Running", "n", deleting=True))
    t.observe(pod("a", "Running", "n"))  # a stale copy after the DELETED is ignored
    assert not t.live and set(t.deleted_at) == {"a"}


def test_reconcile_quick_produces_sane_figures(bench_dir, tmp_path):
    pythonpath = os.environ.get("PYTHONPATH")
    report = reconcile.run(quick=True, workdir=bench_dir, profile_dir=tmp_path / "profile")
    assert not processes_under(bench_dir), "the benchmark left processes of its cluster behind"
    assert not list(bench_dir.iterdir())  # nor its cluster's directory
    assert os.environ.get("PYTHONPATH") == pythonpath  # the profiling environment is undone

    config, res = report["config"], report["results"]
    assert report["suite"] == "reconcile" and len(report["machine"]["loadavg_end"]) == 3
    assert config["pods"] == sum(config["replicas"]) == 100 and config["hollow_nodes"] == 10

    up = res["startup"]
    assert up["pods"] == 100 and up["seconds"] > 0 and up["pods_per_s"] > 0
    for kind in ("from_first_seen", "from_creation_timestamp", "scheduling", "kubelet"):
        ordered(up["latency"][kind])
        assert up["latency"][kind]["n"] == 100
    assert up["latency"]["from_first_seen"]["samples_ms"] == sorted(up["latency"]["from_first_seen"]["samples_ms"])
    assert len(up["running_over_time"]) == 100 and up["running_over_time"][-1] <= up["seconds"] + 1e-3
    pipe = up["pipeline"]
    assert 0 <= pipe["last_created_after_s"] <= pipe["last_running_after_s"] <= up["seconds"] + 1e-6
    writes = up["api_requests"]["by_verb_resource"]
    for request in ("create pods", "create pods/binding", "patch pods"):
        assert writes.get(request, 0) >= 100, (request, writes)
    assert up["api_requests"]["per_s"] > 0 and "create" in up["api_requests"]["by_verb_per_s"]
    store = up["store"]
    assert store["leader"] in store["fsyncs"] and len(store["fsyncs"]) == 3
    assert store["commits"] > 0 and store["commits_per_s"] > 0 and all(f > 0 for f in store["fsyncs"].values())
    assert store["leader_changes"] >= 0
    roles = up["processes"]["roles"]
    assert ROLES <= set(roles)
    assert all(row["cpu_s"] >= 0 and row["peak_rss_mb"] > 0 for row in roles.values())
    assert up["cpu_per_pod"]["cluster_ms"] > 0 and up["cpu_per_pod"]["ceiling_pods_per_s"] > 0

    down = res["deletion"]
    assert down["pods"] == 100 and down["deletions_per_s"] > 0 and len(down["deleted_over_time"]) == 100
    assert down["api_requests"]["by_verb_resource"].get("delete pods", 0) >= 100

    [recovery] = res["recovery"]
    assert recovery["pods"] == 100 and recovery["at_kill"]["seen"] >= 50
    assert recovery["kill_to_all_created_s"] <= recovery["kill_to_converged_s"]
    assert 0 < recovery["kill_to_converged_s"] <= recovery["total_s"]
    assert recovery["kill_after_s"] + recovery["kill_to_converged_s"] <= recovery["total_s"] + 1e-6

    profile = res["profile"]
    assert set(profile) == {"apiserver", "scheduler", "controller-manager", "hollow kubelet", "store-0", "store-1",
                            "store-2"}
    assert profile["apiserver"]["cpu_s_sampled"] > 0 and profile["apiserver"]["inclusive"]
    assert config["profiled"]

    # the 3-control-plane row: the same workload on node-0..2, each with a store replica and components
    assert config["control_plane_nodes"] == [1, 3]
    ha = res["ha"]
    assert ha["control_plane_nodes"] == 3
    assert ha["startup"]["pods"] == ha["deletion"]["pods"] == 100
    ordered(ha["startup"]["latency"]["from_first_seen"])
    assert ha["startup"]["api_requests"]["by_verb_resource"].get("create pods", 0) >= 100
    assert len(ha["startup"]["store"]["fsyncs"]) == 3 and ha["startup"]["store"]["leader"]
    ha_roles = ha["startup"]["processes"]["roles"]
    assert ROLES <= set(ha_roles) and len(ha_roles["apiserver"]["pids"]) == 3
    for figure in reconcile.HA_FIGURES:
        assert f"{figure} 3-CP / 1-CP" in report["ratios"]

    assert set(report["targets"]) == {"pods_per_s >= 500", "p99 startup <= 1.5 s", "cluster CPU per pod <= 3.5 ms"}
    assert all(r > 0 and math.isfinite(r) for r in report["ratios"].values())
    text = check_outputs(report, reconcile, tmp_path / "plots", plots=2)
    assert "pods/s" in text and "controller-manager" in text and "kube-scheduler_perf" in text
    assert "3 control-plane nodes: pods/s" in text and "x the 1-control-plane row" in text
    figures = [figure for figure, _value, _beside in reconcile.headlines(report)]
    assert figures[:2] == ["pods/s, create -> all Running", "pod startup p99"]
    assert "pods/s, 3 control-plane nodes" in figures



def test_the_ha_row_is_each_figure_over_the_1_control_plane_clusters():
    def rows(pods_per_s, p50, p99, cpu, deletions):
        return {"startup": {"pods_per_s": pods_per_s, "cpu_per_pod": {"cluster_ms": cpu},
                            "latency": {"from_first_seen": {"p50_ms": p50, "p99_ms": p99}}},
                "deletion": {"deletions_per_s": deletions}}
    results = rows(100.0, 400.0, 800.0, 20.0, 200.0)
    results["ha"] = dict(rows(50.0, 600.0, 2000.0, 30.0, 100.0), control_plane_nodes=3)
    assert reconcile.ha_ratios(results) == {"pods_per_s 3-CP / 1-CP": 0.5, "p50 startup 3-CP / 1-CP": 1.5,
                                            "p99 startup 3-CP / 1-CP": 2.5, "cluster CPU per pod 3-CP / 1-CP": 1.5,
                                            "deletions_per_s 3-CP / 1-CP": 0.5}


def test_replicas_of_other_workloads():
    assert replicas_for("statefulset", 100, 2, 10) == [50, 50]
    assert replicas_for("daemonset", 100, 2, 10) == [10] * 10   # one pod per hollow node each
    assert replicas_for("daemonset", 5, 2, 10) == [10]


def test_reconcile_other_workloads_beside_the_deployment(bench_dir, tmp_path):
    report = reconcile.run(quick=True, pods=20, deployments=2, hollow_nodes=5, kills=0, workdir=bench_dir,
                           workloads=("daemonset", "statefulset", "job", "deployment"), ha_control_plane_nodes=0)
    assert not processes_under(bench_dir), "the benchmark left processes of its cluster behind"
    assert report["config"]["workloads"] == ["deployment", "daemonset", "statefulset", "job"]
    assert report["config"]["control_plane_nodes"] == [1] and "ha" not in report["results"]
    rows = report["results"]["workloads"]
    assert list(rows) == ["daemonset", "statefulset", "job"]
    for kind, row in rows.items():
        assert row["pods"] == 20 and row["pods_per_s"] > 0 and "cleanup" not in row, (kind, row)
        ordered(row["latency"]["from_first_seen"])
        assert row["api_requests"]["by_verb_resource"].get("create pods", 0) >= 20
    text = check_outputs(report, reconcile, tmp_path / "plots", plots=2)
    assert "daemonset: pods/s (20 pods, 4 objects)" in text and "x the Deployment row" in text
    assert "pods/s through the job controller" in [figure for figure, _v, _b in reconcile.headlines(report)]


def test_cpu_profile_roles_and_summary(tmp_path):
    assert role_of(["python", "-m", "store", "--name", "store-2", "--data-dir", "d"]) == "store-2"
    assert role_of(["python", "-m", "kubelet", "--hollow", "--nodes", "3"]) == "hollow kubelet"
    assert role_of(["python", "-m", "components.controller_manager", "--api", "x"]) == "controller-manager"
    main, work, leaf = ("main", "m.py", 1), ("work", "w.py", 5), ("leaf", "l.py", 9)
    path = tmp_path / "apiserver.speedscope.json"
    path.write_text(json.dumps(speedscope("apiserver", Counter({(main, work, leaf): 0.3, (main, work): 0.1}))))
    summary = summarize(path)
    assert math.isclose(summary["cpu_s_sampled"], 0.4)
    assert math.isclose(dict(summary["inclusive"])["work (w.py:5)"], 1.0)
    assert math.isclose(dict(summary["self"])["leaf (l.py:9)"], 0.75)
