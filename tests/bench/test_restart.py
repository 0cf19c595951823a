"""Smoke test of the restart benchmark: every row runs and its figures are sane. Speed is never asserted."""
import io

from rich.console import Console

from bench import restart, restart_sandbox
from kubemu import netplan, network

from .outputs import check_outputs, sane_latency

SANDBOX_ROWS = {restart.SANDBOX_HOLDER}
KILL_ROWS = {restart_sandbox.KILL_HOST, restart_sandbox.KILL_SANDBOX}
CLOCKED_ROWS = {restart_sandbox.CREATE_HOST, restart_sandbox.CREATE_SANDBOX, restart_sandbox.DELETE_HOST,
                restart_sandbox.DELETE_SANDBOX}
TRIAL_ROWS = KILL_ROWS | CLOCKED_ROWS


def test_restart_bench_produces_sane_figures(bench_dir, monkeypatch, tmp_path):
    rows = {k: v for k, v in restart.SUPERVISORS.items() if k != "supervisord"}  # no pip install in tests
    monkeypatch.setattr(restart, "SUPERVISORS", rows)
    report = restart.run(kills=2, workdir=bench_dir)

    results = report["results"]
    if network.probe(None).kind == netplan.CNI:  # root with the CNI plugins: the sandbox's rows are measured
        assert set(results) == set(rows) | {"kubemu init -> kubelet (READY=1)"} | TRIAL_ROWS
    else:  # each says why it was skipped
        trials = next(iter(restart.TRIALS))
        assert set(results) == set(rows) | {"kubemu init -> kubelet (READY=1)", trials}
        for name in SANDBOX_ROWS | {trials}:
            assert results.pop(name)["skipped"].startswith("no pod sandboxes here: ")
    for row in results.values():
        assert row["n"] == 2 and row["unit"] == "ms" and len(row["samples_ms"]) == 2
        sane_latency(row)
    assert results[restart.FLOOR]["ratio_p50_to_floor"] == 1.0
    kubelet, ready = results["kubemu init -> kubelet"], results["kubemu init -> kubelet (READY=1)"]
    assert ready["min"] >= kubelet["min"]  # alive before ready
    assert "clock" in kubelet and "ratio_p50_to_floor" not in kubelet  # not the floor's clock: no ratio
    text = check_outputs(report, restart, tmp_path, plots=2)
    assert "API pod container" in text and "p50 / floor" in text and "pod with a sandbox" in text
    if restart_sandbox.CREATE_SANDBOX in results:
        for name in SANDBOX_ROWS | KILL_ROWS:  # the reporting child's clock: a ratio to the floor
            assert results[name]["ratio_p50_to_floor"] > 0 and "clock" not in results[name]
        for name in CLOCKED_ROWS:  # clocks of their own: no ratio to the floor
            assert results[name]["clock"] and "ratio_p50_to_floor" not in results[name]
        for name, peer in ((restart.SANDBOX_HOLDER, restart_sandbox.KILL_SANDBOX),
                           (restart_sandbox.KILL_SANDBOX, restart_sandbox.KILL_HOST),
                           (restart_sandbox.CREATE_SANDBOX, restart_sandbox.CREATE_HOST),
                           (restart_sandbox.DELETE_SANDBOX, restart_sandbox.DELETE_HOST)):
            assert results[name]["beside"]["row"] == peer and results[name]["beside"]["ratio_p50"] > 0
        assert "create, with a sandbox / host network" in " ".join(text.split())


def test_sandbox_rows_say_why_they_are_skipped(bench_dir, monkeypatch, tmp_path):
    """Without the privileges or the plugins pod networks need, the rows are skipped with the
    reason `kubemu up` gives, the other rows still run, and the table prints the reason."""
    monkeypatch.setattr(network, "probe",
                        lambda requested: netplan.Mode(netplan.HOST, "not root: CAP_NET_ADMIN is needed"))
    rows = {k: v for k, v in restart.SUPERVISORS.items() if k == restart.FLOOR or k in SANDBOX_ROWS}
    monkeypatch.setattr(restart, "SUPERVISORS", rows)
    report = restart.run(kills=1, workdir=bench_dir)

    trials = next(iter(restart.TRIALS))
    assert set(report["results"]) == {restart.FLOOR, trials} | SANDBOX_ROWS
    for name in SANDBOX_ROWS | {trials}:
        assert report["results"][name] == {"skipped": "no pod sandboxes here: not root: CAP_NET_ADMIN is needed"}
    assert report["results"][restart.FLOOR]["n"] == 1
    out = io.StringIO()
    Console(file=out, width=300).print(restart.table(report))
    assert out.getvalue().count("skipped: no pod sandboxes here: not root: CAP_NET_ADMIN is needed") == 2
    assert list(bench_dir.iterdir()) == []  # no fabric, no state: nothing was made
