"""Leader election with real processes: a single-control-plane `--fast` cluster, plus a second
controller-manager the test starts beside node-0's with the same flags. Only the Lease's holder
acts; SIGSTOP the leader past its lease and the other takes over; the stopped one, resumed, sends
no write after the takeover, says "leaderelection lost" and exits. Every write in the audit log
names its sender (userAgent `kube-controller-manager/<node>_<pid>`), so the test checks, over
the whole run, that no controller-manager wrote outside its own term. And a leader killed -9 and
restarted by its kubelet takes the Lease back at once, without waiting out its own lease."""
from __future__ import annotations

import json
import os
import signal

import psutil

from kubemu.api.times import parse_micro_time
from tests.conftest import alive, spawn_marked, terminate, wait_for
from tests.test_e2e import LONG, cluster  # noqa: F401 (cluster: the fixture)

CM = "kube-controller-manager"


def deployment(replicas: int) -> dict:
    # node-0 is the only node, a tainted control-plane one: the pods stay Pending, but it is the
    # controller-manager that creates them, which is what is watched here
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "command": ["sleep", "3600"]}]}}}}


def cm_writes(cluster) -> list[tuple[float, str, bool]]:
    """(time received, sender identity, is a successful write of the Lease) of every
    controller-manager write, in the order received."""
    out = []
    with open(cluster.dir / "nodes" / "node-0" / "logs" / "audit.log") as f:
        for line in f:
            entry = json.loads(line)
            agent = entry.get("userAgent") or ""
            if agent.startswith(CM + "/"):
                # a Lease write counts once it succeeded; any other write once it was sent
                lease = entry["resource"] == "leases" and entry["name"] == CM and entry["code"] < 300
                out.append((parse_micro_time(entry["time"]), agent.split("/")[1], lease))
    return sorted(out)


def outside_their_term(writes) -> list:
    """Writes of a controller-manager while the last one to write the Lease was another."""
    term, bad = None, []
    for when, ident, lease in writes:
        if lease:
            term = ident
        elif ident != term:
            bad.append((when, ident, term))
    return bad


def took_over(writes, old: str, new: str) -> float:
    """When `new` first wrote the Lease after `old` last did."""
    last_old = max(when for when, ident, lease in writes if lease and ident == old)
    return min(when for when, ident, lease in writes if lease and ident == new and when > last_old)


def holder(cluster, name: str = CM) -> str | None:
    lease = cluster.call("get", "leases", name, namespace="kube-system")
    return lease and lease["spec"].get("holderIdentity")


def web_pods(cluster) -> int:
    listed = cluster.call("list", "pods", namespace="default", label_selector="app=web")
    return len(listed["items"]) if listed else 0


def test_a_stopped_leader_is_replaced_and_once_resumed_writes_nothing_and_exits(cluster, tmp_path):
    cluster.cli("up", "--nodes", "1", "--fast", "--detach")
    kubelets = wait_for(lambda: cluster.system_pid("controller-manager"), timeout=LONG,
                        message="the controller-manager")
    wait_for(lambda: holder(cluster) == f"node-0_{kubelets}", timeout=LONG, message="it to hold the lease")
    # the scheduler elects its leader the same way: <node>_<pid>, the node from the kubelet's HOSTNAME
    wait_for(lambda: (h := holder(cluster, "kube-scheduler")) and h == f"node-0_{cluster.system_pid('scheduler')}",
             timeout=LONG, message="the scheduler to hold its lease")

    # a second controller-manager on node-0, as a second control-plane node would run it
    a = psutil.Process(kubelets)
    env = {k: v for k, v in a.environ().items() if k != "NOTIFY_SOCKET"}  # the kubelet's, for its own
    log_path = tmp_path / "second.log"
    with open(log_path, "wb") as log:
        second = spawn_marked(a.cmdline(), cluster.dir, env=env, cwd=a.cwd(), stdout=log, stderr=log)
    stopped = None
    try:
        wait_for(lambda: b"attempting to acquire leader lease" in log_path.read_bytes(), timeout=LONG,
                 message="the second controller-manager to campaign")
        table = cluster.cli("get", "leases", "-n", "kube-system").stdout
        assert table.splitlines()[0].split() == ["NAME", "HOLDER", "AGE"], table
        for name in (CM, "kube-scheduler"):
            assert any(line.split()[0] == name and line.split()[1].startswith("node-0_")
                       for line in table.splitlines()[1:]), table

        # only the leader acts
        cluster.api.create("deployments", deployment(2), namespace="default")
        wait_for(lambda: web_pods(cluster) == 2, timeout=LONG, message="2 pods")

        # SIGSTOP the leader (whichever it is now) past its lease: the other takes over
        leader = wait_for(lambda: holder(cluster), timeout=LONG, message="a leader")
        stopped = int(leader.rsplit("_", 1)[1])
        # the second one, or the kubelet's (which a loaded machine may have restarted by now)
        assert "components.controller_manager" in psutil.Process(stopped).cmdline()
        os.kill(stopped, signal.SIGSTOP)
        try:
            new = wait_for(lambda: (h := holder(cluster)) not in (None, "", leader) and h, timeout=LONG,
                           message="another controller-manager to take the lease")
            assert not alive(stopped) or psutil.Process(stopped).status() == psutil.STATUS_STOPPED
            taken = took_over(cm_writes(cluster), leader, new)
            cluster.api.patch("deployments", "web", {"spec": {"replicas": 4}}, namespace="default")
            wait_for(lambda: web_pods(cluster) == 4, timeout=LONG, message="the new leader to create 2 more pods")
        finally:
            os.kill(stopped, signal.SIGCONT)

        # resumed, the old leader exits ("leaderelection lost") without a write after the takeover
        wait_for(lambda: not alive(stopped) or (stopped == second.pid and second.poll() is not None),
                 timeout=LONG, message="the resumed controller-manager to exit")
        late = [w for w in cm_writes(cluster) if w[1] == leader and w[0] >= taken]
        assert late == [], late
        if stopped == second.pid:
            assert second.wait() == 1 and b"leaderelection lost" in log_path.read_bytes()
        else:
            # the kubelet keeps the exited container's log as the previous one once it restarts it
            wait_for(lambda: "leaderelection lost" in (cluster.call("log", "controller-manager-node-0",
                                                                    namespace="kube-system", previous=True) or ""),
                     timeout=LONG, message="the exited controller-manager's log")
    finally:
        if stopped is not None and alive(stopped):
            os.kill(stopped, signal.SIGCONT)  # whatever failed above, nothing is left stopped
        terminate(second)
    # over the whole run, no controller-manager wrote while another held the Lease
    assert outside_their_term(cm_writes(cluster)) == []


def test_a_killed_leader_restarted_by_its_kubelet_takes_the_lease_back_without_waiting_it_out(cluster):
    # Kubernetes' timings (a 15 s lease): the restarted controller-manager, a new pid on the same
    # node, sees that the Lease's holder is a process of its node that has exited
    cluster.cli("up", "--nodes", "1", "--detach")
    old = wait_for(lambda: cluster.system_pid("controller-manager"), timeout=LONG, message="the controller-manager")
    wait_for(lambda: holder(cluster) == f"node-0_{old}", timeout=LONG, message="it to hold the lease")
    os.kill(old, signal.SIGKILL)  # no release
    new = wait_for(lambda: (pid := cluster.system_pid("controller-manager")) not in (None, old) and pid,
                   timeout=LONG, message="the kubelet to restart it")
    wait_for(lambda: holder(cluster) == f"node-0_{new}", timeout=LONG, message="the new one to hold the lease")
    log = cluster.call("log", "controller-manager-node-0", namespace="kube-system") or ""
    assert f"its holder node-0_{old} has exited" in log, log
    assert outside_their_term(cm_writes(cluster)) == []
