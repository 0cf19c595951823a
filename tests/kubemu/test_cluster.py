"""kubemu/cluster.py: which processes are a node's (what kubemu started and recorded, never an
argv or environment match), `node kill` and `down` with real processes, with a cgroup per node
and without one; what the foreground `kubemu up` says when an init exits."""
from __future__ import annotations

import logging
import os
import signal

import pytest

from kubemu import cgroups, cluster, ownership
from kubemu.statedir import StateDir
from tests.conftest import alive, spawn_marked, terminate, wait_for

# A unit that leaves a process behind the way a daemon does: a subshell starts it in a session
# of its own and exits, so its parent is gone and init's stop (the unit's process group) misses it.
ESCAPING_UNIT = """\
[Service]
ExecStart=/bin/sh {script} {node_dir} --api {api}
"""
ESCAPE_SH = """\
(setsid sleep 1000 & echo $! > "$1/escapee.tmp"; mv "$1/escapee.tmp" "$1/escapee.pid")
exec sleep 1000
"""


@pytest.fixture(params=["cgroup", "fallback"])
def mode(request, monkeypatch, state_dir):
    if request.param == "fallback":
        monkeypatch.setenv(cgroups.DISABLE_ENV, "0")
    else:
        need_cgroups(state_dir)
    return request.param


def need_cgroups(state_dir) -> None:
    probe = cgroups.create(ownership.cluster_cgroup_name(state_dir) + "-probe")
    if probe is None:
        pytest.skip("no writable cgroup hierarchy on this machine")
    probe.remove()


def start_nodes(state: StateDir, names: list[str]) -> dict[str, object]:
    """Nodes whose one unit names its own node directory and node-0's (as a worker kubelet's
    --api does) and leaves an escaped process behind; node-10's directory has node-1's as prefix."""
    script = state.root / "escape.sh"
    script.write_text(ESCAPE_SH)
    inits = {}
    for name in names:
        node_dir = state.node_dir(name)
        for sub in ("units", "logs"):
            (node_dir / sub).mkdir(parents=True, exist_ok=True)
        (node_dir / "units" / "escaping.service").write_text(ESCAPING_UNIT.format(
            script=script, node_dir=node_dir, api=state.node_dir("node-0") / "apiserver.sock"))
        inits[name] = cluster.start_init(state, name)
    return inits


def node_pids(state: StateDir, name: str) -> set[int]:
    """The node's processes once its unit runs and has left its escapee: exactly init, the
    unit's sh (then sleep) and the escapee, once the subshell that started it has exited."""
    escapee = wait_for(lambda: _read_pid(state.node_dir(name) / "escapee.pid"), message=f"{name}'s escapee")
    pids = wait_for(lambda: (p := {proc.pid for proc in state.owned(name).processes()}) >= {escapee} and len(p) == 3
                    and p, message=f"{name}'s processes")
    assert state.owned(name).pid in pids
    return pids


def _read_pid(path) -> int | None:
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def test_kill_node_and_down_stop_only_what_kubemu_started(state_dir, mode):
    state = StateDir(state_dir)
    names = ["node-0", "node-1", "node-10"]
    # A user's process that says it is the cluster's in every way but being started by kubemu.
    user = spawn_marked(["/bin/sh", "-c", "exec sleep 1000", str(state.node_dir("node-1"))], state_dir)
    inits = start_nodes(state, names)
    try:
        pids = {name: node_pids(state, name) for name in names}

        assert cluster.kill_node(state, "node-1") == inits["node-1"].pid
        assert not any(alive(p) for p in pids["node-1"]), "a process of node-1 (its escapee too) survived"
        assert all(alive(p) for p in pids["node-0"] | pids["node-10"]), "node kill node-1 touched another node"
        assert state.running_nodes() == ["node-0", "node-10"]
        assert inits["node-1"].wait(timeout=10) == -signal.SIGKILL

        cluster.kill_node(state, "node-0")
        assert not any(alive(p) for p in pids["node-0"])
        assert all(alive(p) for p in pids["node-10"]), "node kill node-0 touched node-10"
        with pytest.raises(RuntimeError, match="node node-0 is not running"):
            cluster.kill_node(state, "node-0")
        with pytest.raises(RuntimeError, match="there is no node node-2"):
            cluster.kill_node(state, "node-2")

        assert cluster.stoppable(state) == ["node-10"]
        stragglers = cluster.down(state, timeout=30)
        assert _read_pid(state.node_dir("node-10") / "escapee.pid") in stragglers  # outlived init's stop
        assert not any(alive(p) for p in pids["node-10"])
        assert alive(user.pid), "kubemu down killed a process it did not start"
        assert cluster.stoppable(state) == [] and cluster.processes(state) == []
        assert not any(cg.path.exists() for cg in cgroups.candidates(ownership.cluster_cgroup_name(state.root))), \
            "a cgroup was left behind"
    finally:
        terminate(user)
        for proc in inits.values():
            proc.kill()
            proc.wait()


def test_node_start_clears_what_outlived_the_node(state_dir, mode):
    """A plain kill -9 of init leaves its escapee running (PDEATHSIG only reaches init's
    children). With a cgroup kubemu still knows it is the node's: `down` would stop it, and
    booting the node again stops it first (nothing survives a machine's reboot). Without
    one it is lost to PID 1: the fallback's documented limit."""
    state = StateDir(state_dir)
    inits = start_nodes(state, ["node-0"])
    escapee = None
    try:
        old = node_pids(state, "node-0")
        escapee = _read_pid(state.node_dir("node-0") / "escapee.pid")
        (state.node_dir("node-0") / "escapee.pid").unlink()
        inits["node-0"].kill()
        inits["node-0"].wait()
        wait_for(lambda: state.running_nodes() == [], message="node-0 to be down")
        assert alive(escapee)
        assert cluster.stoppable(state) == (["node-0"] if mode == "cgroup" else [])
        cluster.start_node(state, "node-0")
        assert alive(escapee) == (mode == "fallback")
        assert not old & node_pids(state, "node-0")
    finally:
        cluster.down(state, timeout=30)
        for proc in inits.values():
            proc.wait()
        if escapee and alive(escapee):
            os.kill(escapee, signal.SIGKILL)


def test_the_fallback_is_said_once(state_dir, monkeypatch, caplog):
    monkeypatch.setenv(cgroups.DISABLE_ENV, "0")
    cluster._say_fallback.cache_clear()
    state = StateDir(state_dir)
    with caplog.at_level(logging.WARNING, logger="kubemu.cluster"):
        inits = start_nodes(state, ["node-0", "node-1"])
    try:
        assert [r.getMessage() for r in caplog.records] == [f"kubemu: {ownership.FALLBACK_NOTE}"]
        assert all(state.owned(n).cgroup is None for n in inits)
        for name in inits:
            node_pids(state, name)
    finally:
        cluster.down(state, timeout=30)
        for proc in inits.values():
            proc.wait()


def test_a_refused_move_into_the_cgroup_falls_back(state_dir, monkeypatch, caplog):
    """A hierarchy where kubemu may mkdir but not move a process (a partial delegation): the
    node starts without a cgroup, and the one made for it is removed."""
    need_cgroups(state_dir)

    def refuse(_fd):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(cgroups, "join", refuse)
    cluster._say_fallback.cache_clear()
    state = StateDir(state_dir)
    with caplog.at_level(logging.WARNING, logger="kubemu.cluster"):
        inits = start_nodes(state, ["node-0"])
    try:
        assert state.owned("node-0").cgroup is None
        assert [r.getMessage() for r in caplog.records] == [f"kubemu: {ownership.FALLBACK_NOTE}"]
        assert not any(cg.path.exists() for cg in cgroups.candidates(ownership.cluster_cgroup_name(state.root)))
        node_pids(state, "node-0")
    finally:
        cluster.down(state, timeout=30)
        for proc in inits.values():
            proc.wait()


@pytest.mark.parametrize("node, code, said, stops", [
    ("node-1", -signal.SIGKILL, "node-1: init was killed (SIGKILL)", False),
    ("node-2", -signal.SIGTERM, "node-2: init was killed (SIGTERM)", False),
    ("node-1", 0, "node-1: init shut down", False),
    ("node-1", 3, "node-1: init exited with status 3", False),
    ("node-1", -99, "node-1: init was killed (signal 99)", False),
    ("node-0", -signal.SIGKILL,
     "node-0: init was killed (SIGKILL); the control plane ran there: stopping the cluster", True),
    ("node-0", 0, "node-0: init shut down; the control plane ran there: stopping the cluster", True),
])
def test_init_exit_report(node, code, said, stops):
    assert cluster.init_exit_report(node, code) == (said, stops)

