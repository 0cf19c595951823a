"""`kubemu chaos` against a real `up --fast` cluster: a healthy cluster passes a seeded 60 s
run with a report (a pod started during the run is no leaked process), and a run of the store
faults beyond kill and pause (asymmetric partitions, power loss, leadership transfers,
membership changes) with plots; a broken build (a store client that acknowledges a write it
never sent) makes it fail with the lost write named."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEADLINE, wait_for
from tests.test_e2e import cluster  # noqa: F401 (the fixture)

RUN_TIMEOUT = DEADLINE * 10  # 60 s of faults, then convergence waits and checks, on 2 loaded cores


def chaos(state_dir, *args, env=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir), COLUMNS="200", **(env or {}))
    return subprocess.run([sys.executable, "-m", "kubemu.cli", "chaos", *args], env=env, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)


def chaos_while(state_dir, out: Path, during, *args) -> tuple[int, str]:
    """A chaos run that calls `during()` once it has started (its first line is out); its exit
    status and output."""
    env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir), COLUMNS="200", PYTHONUNBUFFERED="1")
    with open(out, "w") as f:
        proc = subprocess.Popen([sys.executable, "-m", "kubemu.cli", "chaos", *args], env=env, stdout=f,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            wait_for(lambda: "start:" in out.read_text() or proc.poll() is not None, RUN_TIMEOUT,
                     message="the chaos run to start")
            during()
            return proc.wait(RUN_TIMEOUT), out.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.mark.timeout(2400)  # three runs, each waiting out convergence after its faults, on a loaded 2-core machine
def test_a_healthy_cluster_passes_and_a_build_that_loses_an_acked_write_fails(cluster, tmp_path):  # noqa: F811
    cluster.cli("up", "--fast", "--detach")
    report = tmp_path / "report.json"
    # a pod the cluster starts during the run (here a third coredns replica; in CI, the
    # replicas `up` had not started yet) is no leaked process
    code, out = chaos_while(cluster.dir, tmp_path / "out", lambda: cluster.cli(
        "scale", "deployment", "coredns", "-n", "kube-system", "--replicas", "3"),
        "--duration", "60s", "--seed", "1", "-o", str(report))
    assert code == 0, out
    assert "Traceback" not in out
    got = json.loads(report.read_text())
    assert got["ok"] is True
    assert {c["name"] for c in got["checks"]} >= {"linearizable", "acknowledged writes", "watches exact",
                                                  "409 on stale resourceVersion", "workload converges",
                                                  "one leader per term", "no leaked process"}
    faults = [e for e in got["timeline"] if e["what"].startswith("fault ")]
    assert faults and any(e["what"].startswith("recovered ") for e in got["timeline"])
    assert "skipped" in got and "node" in got["skipped"]  # one node: no node may be lost
    workloads = {c["workload"].split("/")[0] for c in got["convergence"] if c["seconds"] is not None}
    assert workloads == {"deployment", "statefulset", "job"}

    # the store faults seed 1 does not draw above, under load, with plots
    kinds = ("membership", "power-loss", "asymmetric", "leader-transfer")
    plots = tmp_path / "plots"
    done = chaos(cluster.dir, "--duration", "40s", "--seed", "2", "--faults", ",".join(kinds), "-o", str(report),
                 "--plot", str(plots))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Traceback" not in out
    got = json.loads(report.read_text())
    assert got["faults"] and {w["kind"] for w in got["faults"]} <= set(kinds)
    assert all(w["end"] is not None for w in got["faults"])
    assert any(e["what"].startswith("store whole ") for e in got["timeline"])
    assert (plots / "latency.csv").exists() and (plots / "faults.json").exists()
    assert (plots / "latency.png").exists() or "plots skipped" in out

    broken = chaos(cluster.dir, "--duration", "10s", "--seed", "1", "--faults", "kill",
                   env={"KUBEMU_CHAOS_TEST_DOUBLE": "drop-acked-write"})
    out = broken.stdout + broken.stderr
    assert broken.returncode == 1, out
    assert "FAIL acknowledged writes" in out and "lost:" in out
    assert "Traceback" not in out
