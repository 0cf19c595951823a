"""The `kubemu` command end to end: up, ps, kill -9 a kubelet, systemctl, journalctl, down."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil

from tests.conftest import DEADLINE, alive, marked_processes, wait_for


def kubemu(state_dir, *args, check=True, timeout=DEADLINE * 3) -> subprocess.CompletedProcess:
    env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir), COLUMNS="200")
    done = subprocess.run([sys.executable, "-m", "kubemu.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check:
        assert done.returncode == 0, f"kubemu {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def ps_json(state_dir) -> dict:
    return {n["name"]: n["init"] for n in json.loads(kubemu(state_dir, "ps", "-o", "json").stdout)["nodes"]}


def ps_json_pods(state_dir, node: str) -> list[dict]:
    return next(n["pods"] for n in json.loads(kubemu(state_dir, "ps", "-o", "json").stdout)["nodes"] if n["name"] == node)


def kubelet_row(init: dict) -> dict:
    return next(u for u in init["units"] if u["name"] == "kubelet.service")


def test_no_cluster_is_one_line_and_non_zero(state_dir):
    for args in (["ps"], ["down"], ["systemctl", "status"], ["journalctl", "-u", "kubelet"]):
        done = kubemu(state_dir, *args, check=False)
        assert done.returncode != 0
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_up_kill_kubelet_down(state_dir):
    out = kubemu(state_dir, "up", "--nodes", "2", "--detach").stdout
    assert "node-0" in out and "node-1" in out and "kubelet.service" in out
    nodes = ps_json(state_dir)
    assert sorted(nodes) == ["node-0", "node-1"]
    for init in nodes.values():
        assert kubelet_row(init)["active_state"] == "active"
        assert kubelet_row(init)["status_text"].startswith("running ")  # node-0 has the example pod
    # The control plane runs as static pods on node-0; the store is found through the state directory.
    assert kubemu(state_dir, "store", "put", "greeting", "hello").stdout.strip() == "OK"
    assert kubemu(state_dir, "store", "get", "greeting").stdout.split() == ["greeting", "hello"]
    system_pods = [p for p in ps_json_pods(state_dir, "node-0") if p["metadata"]["namespace"] == "kube-system"]
    assert sorted(p["metadata"]["name"] for p in system_pods) == [
        "apiserver-node-0", "controller-manager-node-0", "scheduler-node-0",
        "store-0-node-0", "store-1-node-0", "store-2-node-0"]
    unit = (state_dir / "nodes" / "node-1" / "units" / "kubelet.service").read_text()
    assert "Restart=always" in unit and "RestartSec=10" in unit and "StartLimitIntervalSec=0" in unit

    victim = kubelet_row(nodes["node-1"])["main_pid"]
    os.kill(victim, signal.SIGKILL)
    # kubeadm's RestartSec=10: init brings it back ten seconds later.
    row = wait_for(lambda: (lambda r: r if r["active_state"] == "active" and r["main_pid"] != victim else None)(
        kubelet_row(ps_json(state_dir)["node-1"])), message="kubelet on node-1 to come back")
    assert row["n_restarts"] == 1
    assert kubelet_row(ps_json(state_dir)["node-0"])["n_restarts"] == 0  # the other node is untouched
    table = kubemu(state_dir, "ps").stdout
    assert str(row["main_pid"]) in table

    status = kubemu(state_dir, "systemctl", "--node", "node-1", "status", "kubelet").stdout
    assert "Active: active (running)" in status and f"Main PID: {row['main_pid']}" in status
    journal = kubemu(state_dir, "journalctl", "--node", "node-1", "-u", "kubelet", "-n", "50").stdout
    assert "Scheduled restart job, restart counter is at 1." in journal

    kubemu(state_dir, "systemctl", "--node", "node-0", "stop", "kubelet")
    assert kubelet_row(ps_json(state_dir)["node-0"])["active_state"] == "inactive"
    kubemu(state_dir, "systemctl", "--node", "node-0", "start", "kubelet")
    assert kubelet_row(ps_json(state_dir)["node-0"])["active_state"] == "active"

    (state_dir / "nodes" / "node-1" / "manifests" / "echo.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: echo}\nspec:\n  containers:\n  - name: echo\n"
        f"    command: [{sys.executable!r}, -c, \"print('hello from echo', flush=True); import time; time.sleep(3600)\"]\n")
    pod = wait_for(lambda: next((p for p in ps_json_pods(state_dir, "node-1") if p["metadata"]["name"] == "echo-node-1"
                                 and p["status"]["phase"] == "Running"), None), message="the static pod")
    assert "echo-node-1" in kubemu(state_dir, "ps").stdout
    wait_for(lambda: "hello from echo" in kubemu(state_dir, "logs", "echo-node-1").stdout, message="its log")
    assert kubemu(state_dir, "logs", "nope", check=False).stderr.strip() == 'Error from server (NotFound): pods "nope" not found'

    pids = [p.pid for p in marked_processes(str(state_dir))]
    assert len(pids) >= 12  # two inits, two kubelets, four shims and their containers
    assert int(pod["status"]["containerStatuses"][0]["containerID"].removeprefix("process://")) in pids
    kubemu(state_dir, "down")
    assert marked_processes(str(state_dir)) == []
    assert not any(alive(p) for p in pids)
    assert kubemu(state_dir, "ps", check=False).returncode != 0


def test_foreground_up_stops_everything_on_ctrl_c(state_dir):
    env = dict(os.environ, KUBEMU_STATE_DIR=str(state_dir))
    log = state_dir / "up.out"
    with open(log, "w") as out_file:
        fg = subprocess.Popen([sys.executable, "-m", "kubemu.cli", "up", "--nodes", "1", "--fast"], env=env,
                              stdout=out_file, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: "running in the foreground" in log.read_text(), message="the cluster to be up")
        row = kubelet_row(ps_json(state_dir)["node-0"])
        fg.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
        fg.wait(timeout=DEADLINE * 2)
    finally:
        if fg.poll() is None:
            fg.kill()
    out = log.read_text()
    assert fg.returncode == 0, out
    assert "cluster stopped" in out
    assert not alive(row["main_pid"])
    assert marked_processes(str(state_dir)) == []
