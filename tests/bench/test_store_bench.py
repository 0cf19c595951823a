"""Smoke test of the store benchmark, kubemu only (peers are never installed in tests), at tiny
scale: it runs and its figures are sane. Speed is never asserted."""
import io
import json
import math

from click.testing import CliRunner
from rich.console import Console

from bench import runner, store
from kubemu.cli import main


def sane_latency(row: dict) -> None:
    assert row["n"] > 0
    assert 0 < row["min_ms"] <= row["p50_ms"] <= row["p99_ms"] <= row["max_ms"] and math.isfinite(row["max_ms"])


def test_store_bench_kubemu_only_produces_sane_figures(state_dir, tmp_path):
    report = store.run(clients=[1, 4], read_clients=[4], seconds=1.0, warmup=0.3, peers=[], install=False,
                       kills=2, storeclient_row=True, fsync_clients=4, retries=0, workdir=state_dir,
                       marker=str(state_dir))

    assert report["suite"] == "store" and report["machine"]["cpus"] >= 1
    assert set(report["systems"]) == {"kubemu"} and report["skipped"] == {}
    assert report["machine"]["fdatasync_4k"]["p50_ms"] > 0
    res = report["results"]

    writes = {(r["label"], r["clients"]): r for r in res["writes"]}
    assert set(writes) == {("kubemu", 1), ("kubemu", 4), ("kubemu (StoreClient)", 4)}
    for row in writes.values():
        assert row["writes_per_s"] > 0 and row["errors"] == 0 and row["seconds"] > 0
        assert row["servers_cpu_per_op_us"] > 0 and row["loadgen_cpu"] > 0 and math.isfinite(row["other_cpu"])
        assert row["attempts"] == 1  # retries=0
        sane_latency(row)
        assert math.isnan(row["ratio_vs_etcd"])  # no etcd in this run: no ratio, rather than a made-up one

    reads = {(r["op"], r["clients"]): r for r in res["reads"]}
    assert set(reads) == {("get_linearizable", 4), ("get_serializable", 4)}
    for row in reads.values():
        assert row["reads_per_s"] > 0 and row["errors"] == 0
        sane_latency(row)

    fs = res["fsyncs"]["kubemu"]
    assert fs["leader_fsyncs"] > 0 and fs["leader_entries"] > 0 and fs["writes_acknowledged"] > 0
    assert 0 < fs["fsyncs_per_entry"] and len(fs["followers"]) == 2

    fo = res["failover"]
    assert len(fo["trials"]) == 2
    for key in ("storeclient_first_write", "probe_first_write", "elected"):
        assert fo[key]["n"] == 2
        assert 0 < fo[key]["min_ms"] <= fo[key]["p50_ms"] <= fo[key]["p99_ms"] <= fo[key]["max_ms"]
    assert "--tick-ms 10" in fo["flags"]

    assert report["targets"] == []  # every target compares with a peer
    json.loads(json.dumps(report))  # the -o FILE form
    out = io.StringIO()
    Console(file=out, width=200).print(store.table(report))
    assert "kubemu" in out.getvalue() and "failover" in out.getvalue()

    # as `kubemu bench all` shows and plots it
    report["quick"] = True
    combined = {"suite": "all", "quick": True, "machine": report["machine"], "reports": {"store": report}}
    Console(file=out, width=200).print(runner.combined_table(combined))
    assert "store writes, 4 clients" in out.getvalue()
    plots = runner.write_plots(combined, tmp_path)
    assert [p.name for p in plots] == ["store-writes.png", "store-failover-cdf.png"]


def test_bench_command_offers_the_store_suite():
    result = CliRunner().invoke(main, ["bench", "--help"])
    assert result.exit_code == 0
    assert "store" in result.output and "--clients" in result.output and "--peers" in result.output
    bad = CliRunner().invoke(main, ["bench", "store", "--peers", "zookeeper"])
    assert bad.exit_code != 0 and "zookeeper" in bad.output


def test_no_fsync_rows_are_compared_with_pysyncobj_level_by_level(tmp_path):
    def row(system, label, clients, rate):
        return {"system": system, "label": label, "clients": clients, "writes_per_s": rate}

    writes = [row("kubemu", "kubemu", 1, 600.0), row("kubemu", store.KUBEMU_NO_FSYNC, 1, 900.0),
              row("kubemu", store.KUBEMU_NO_FSYNC, 16, 4000.0), row("pysyncobj", store.PYSYNCOBJ_FAST, 1, 1000.0),
              row("pysyncobj", store.PYSYNCOBJ_DEFAULT, 1, 10.0), row("pysyncobj", store.PYSYNCOBJ_FAST, 16, 3200.0)]
    assert store._no_fsync_ratios(writes) == [{"clients": 1, "ratio": 0.9}, {"clients": 16, "ratio": 1.25}]
    assert store._no_fsync_ratios(writes[:3]) == []  # no PySyncObj in the run: nothing to compare
    argv = store.KubemuCluster(tmp_path, str(tmp_path), unsafe_no_fsync=True, tick_ms=10).argv("store-0")
    assert argv[-3:] == ["--unsafe-no-fsync", "--tick-ms", "10"]
