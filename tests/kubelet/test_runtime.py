"""kubelet/runtime.py with real shims and containers; the test process plays init."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from kubelet.runtime import ContainerSpec, ContainerState, Runtime
from tests.conftest import DEADLINE, alive, wait_for
from tests.kubelet.test_shim import HOG, SLEEP, STUBBORN, marker_env, py
from tests.kubelet.test_shim import node, subreaper  # noqa: F401 - fixtures

POD = "default_web_0123"


@pytest.fixture
def runtime(node):  # noqa: F811 - the fixture imported above
    rt = Runtime(str(node), env_base=marker_env(node))
    os.makedirs(rt.pod_dir(POD))
    return rt


def spec(rt: Runtime, argv: list[str], name: str = "c", n: int = 0, **kw) -> ContainerSpec:
    kw.setdefault("grace", 5.0)
    return ContainerSpec(pod_dir=rt.pod_dir(POD), name=name, restart_count=n, argv=argv, **kw)


def running(rt: Runtime, name: str = "c") -> ContainerState:
    return wait_for(lambda: (s := rt.state(rt.pod_dir(POD), name)) and s.pid and s, message=f"{name} running")


def exited(rt: Runtime, name: str = "c", n: int | None = None) -> ContainerState:
    return wait_for(lambda: (s := rt.state(rt.pod_dir(POD), name, n)) and s.exited and s,
                    message=f"{name} exited")


def output(rt: Runtime, name: str = "c", n: int = 0) -> str:
    path = Path(rt.log_path(rt.pod_dir(POD), name, n))
    return wait_for(lambda: path.exists() and path.read_text(), message="output")


def test_start_runs_the_container_and_reads_its_end(runtime):
    code = ("import os, sys; print(sys.argv[1:], os.getcwd(), os.environ['FOO'], os.environ['KUBEMU_STATE_DIR']); "
            "sys.exit(3)")
    runtime.start(spec(runtime, py(code, "a b", "$HOME"), env={"FOO": "bar"}, cwd="/tmp"))
    state = exited(runtime)
    assert state.exit_code == 3 and state.signal is None and not state.oom_killed and state.reason is None
    assert state.pid and state.pgid == state.pid and state.shim_pid and state.started_at <= state.finished_at
    assert not runtime.is_running(state)
    marker = runtime.env_base["KUBEMU_STATE_DIR"]
    assert output(runtime) == f"['a b', '$HOME'] /tmp bar {marker}\n"
    assert runtime.log_path(runtime.pod_dir(POD), "c", 0) == os.path.join(runtime.pod_dir(POD), "c", "0.log")
    assert state.as_found()["state"] == "exited" and state.as_found()["exit_code"] == 3


def test_a_start_error_is_reported(runtime):
    runtime.start(spec(runtime, ["kubemu-no-such-program"]))
    state = exited(runtime)
    assert state.start_failed and state.exit_code == 128 and state.pid is None
    assert state.message == 'exec: "kubemu-no-such-program": executable file not found in $PATH'


def test_the_same_start_cannot_be_launched_twice(runtime):
    runtime.start(spec(runtime, py("pass")))
    with pytest.raises(FileExistsError):
        runtime.start(spec(runtime, py("pass")))
    exited(runtime)


def test_states_per_restart_count_and_prune(runtime):
    pod = runtime.pod_dir(POD)
    for n in range(3):
        runtime.start(spec(runtime, py(f"import sys; sys.exit({n})"), n=n))
        exited(runtime, n=n)
    assert runtime.restart_counts(pod, "c") == [0, 1, 2]
    assert runtime.state(pod, "c").exit_code == 2 and runtime.state(pod, "c", 0).exit_code == 0
    assert runtime.state(pod, "c", 7) is None and runtime.state(pod, "nope") is None
    runtime.prune(pod, "c", keep=2)
    assert runtime.restart_counts(pod, "c") == [1, 2]
    assert not os.path.exists(runtime.log_path(pod, "c", 0))


@pytest.mark.parametrize("how", ["exits", "killed"])
def test_containers_survive_the_kubelet(runtime, how):
    """The kubelet exits (or init kills its process group, -9) right after starting a
    container: the container runs on, and a new Runtime adopts it with the same PID."""
    kubelet_code = (
        "import sys, time\n"
        "from kubelet.runtime import Runtime, ContainerSpec\n"
        "Runtime(sys.argv[1]).start(ContainerSpec(sys.argv[2], 'c', 0, sys.argv[3:], {}, None, None, 5.0))\n"
        "print('started', flush=True)\n"
        f"{'time.sleep(600)' if how == 'killed' else ''}\n")
    kubelet = subprocess.Popen(py(kubelet_code, runtime.node_dir, runtime.pod_dir(POD), *py(SLEEP)),
                               env=runtime.env_base, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               start_new_session=True, text=True)
    try:
        assert kubelet.stdout.readline() == "started\n"
        if how == "killed":
            os.killpg(kubelet.pid, signal.SIGKILL)
        kubelet.wait(DEADLINE)
    finally:
        kubelet.kill()
        kubelet.wait()
        kubelet.stdout.close()

    adopter = Runtime(runtime.node_dir, env_base=runtime.env_base)
    assert adopter.list_pod_dirs() == [runtime.pod_dir(POD)]
    state = running(adopter)
    assert adopter.is_running(state) and state.as_found()["state"] == "running"
    assert psutil.Process(state.pid).cmdline()[-1] == SLEEP
    assert psutil.Process(state.shim_pid).ppid() == os.getpid(), "the shim lives under init"
    found = adopter.list_containers(runtime.pod_dir(POD))
    assert list(found) == ["c"] and found["c"].pid == state.pid

    adopter.stop(runtime.pod_dir(POD), "c", grace=5)
    assert exited(adopter).signal == signal.SIGTERM


def test_stop_honours_the_grace_it_is_given(runtime):
    pod = runtime.pod_dir(POD)
    runtime.start(spec(runtime, py(STUBBORN), grace=600))
    state = running(runtime)
    assert output(runtime) == "ready\n"
    began = time.monotonic()
    runtime.stop(pod, "c", grace=0.5)
    state = exited(runtime)  # within the test deadline: the 600 s of the spec were overridden
    assert time.monotonic() - began >= 0.5
    assert state.signal == signal.SIGKILL and state.exit_code is None


def test_a_stop_right_after_start_is_not_lost(runtime):
    runtime.start(spec(runtime, py(SLEEP), grace=600))
    runtime.stop(runtime.pod_dir(POD), "c", grace=600)  # most likely before state.json exists
    assert exited(runtime).signal == signal.SIGTERM


def test_kill_signals_the_container_directly(runtime):
    runtime.start(spec(runtime, py(SLEEP)))
    state = running(runtime)
    assert runtime.is_running(state)
    runtime.kill(runtime.pod_dir(POD), "c", signal.SIGKILL)
    assert exited(runtime).signal == signal.SIGKILL
    wait_for(lambda: not alive(state.pid))
    assert not runtime.is_running(state)


def test_memory_limit_from_the_spec(runtime):
    runtime.start(spec(runtime, py(HOG), memory_limit=64 << 20))
    state = exited(runtime)
    assert (state.exit_code, state.signal, state.oom_killed, state.reason) == (137, 9, True, "OOMKilled")


# A container that clears the death signal its shim gave it: it outlives a killed shim.
ESCAPER = ("import ctypes, time; ctypes.CDLL(None).prctl(1, 0, 0, 0, 0); "  # PR_SET_PDEATHSIG, 0
           "print('ready', flush=True); time.sleep(600)")


def test_a_shim_gone_without_a_word_ends_as_containerd_reports_it(runtime):
    pod = runtime.pod_dir(POD)
    runtime.start(spec(runtime, py(SLEEP)))
    state = running(runtime)
    os.kill(state.shim_pid, signal.SIGKILL)
    wait_for(lambda: not alive(state.pid), message="the container to die with its shim")
    state = exited(runtime)
    # containerd's report for a task whose shim died: killed (137), no reason of its own
    assert (state.exit_code, state.signal, state.reason, state.finished_at) == (None, signal.SIGKILL, None, None)
    assert f"shim (pid {state.shim_pid}) died" in state.message and not runtime.is_running(state)
    assert runtime.record_lost(pod, "c", 0)  # written down once...
    recorded = runtime.state(pod, "c", 0)
    assert recorded.finished_at is not None and recorded.message == state.message
    assert not runtime.record_lost(pod, "c", 0)  # ...and never again
    assert runtime.state(pod, "c", 0).finished_at == recorded.finished_at


def test_a_container_that_outlives_its_shim_runs_until_killed(runtime):
    pod = runtime.pod_dir(POD)
    runtime.start(spec(runtime, py(ESCAPER)))
    state = running(runtime)
    log = Path(runtime.log_path(pod, "c", 0))
    wait_for(lambda: "ready" in log.read_text(), message="the container to clear its death signal")
    os.kill(state.shim_pid, signal.SIGKILL)
    wait_for(lambda: not alive(state.shim_pid), message="the shim to die")
    found = runtime.state(pod, "c", 0)
    assert not found.exited and not found.shim_alive and runtime.is_running(found)
    assert not runtime.record_lost(pod, "c", 0)  # its container still runs
    runtime.kill(pod, "c", signal.SIGKILL, 0)
    wait_for(lambda: not alive(state.pid), message="the container to die")
    assert runtime.record_lost(pod, "c", 0)
    assert runtime.state(pod, "c", 0).signal == signal.SIGKILL


def test_start_reports_the_shims_pid(runtime):
    reported = []
    runtime.start(spec(runtime, py(SLEEP)), on_shim=reported.append)
    state = running(runtime)
    assert wait_for(lambda: reported, message="the report") == [state.shim_pid]
    runtime.stop(runtime.pod_dir(POD), "c", grace=5)
    exited(runtime)


def test_a_launcher_that_dies_reports_no_shim(node):  # noqa: F811 - the fixture imported above
    """Its start is lost before any container ran: a start error, once written down."""
    rt = Runtime(str(node), env_base=dict(marker_env(node), PYTHONHOME="/nonexistent"))  # python cannot start
    os.makedirs(rt.pod_dir(POD))
    reported = []
    rt.start(spec(rt, py(SLEEP)), on_shim=reported.append)
    assert wait_for(lambda: reported, message="the report") == [None]
    assert rt.record_lost(rt.pod_dir(POD), "c", 0)
    state = exited(rt)
    assert (state.exit_code, state.reason, state.pid) == (128, "StartError", None) and state.start_failed


def test_stop_keeps_the_termination_message(runtime):
    pod = runtime.pod_dir(POD)
    runtime.start(spec(runtime, py(SLEEP)))
    running(runtime)
    runtime.stop(pod, "c", grace=5, message="Container c failed liveness probe, will be restarted")
    runtime.stop(pod, "c", grace=1)  # a shorter grace keeps the message
    assert exited(runtime).message == "Container c failed liveness probe, will be restarted"


def test_found_carries_the_start_before_the_latest(runtime):
    pod = runtime.pod_dir(POD)
    runtime.start(spec(runtime, py("raise SystemExit(3)")))
    exited(runtime, n=0)
    runtime.start(spec(runtime, py(SLEEP), n=1))
    running(runtime)
    found = runtime.found(pod)["c"]
    assert found["state"] == "running" and found["restart_count"] == 1
    previous = found["previous"]
    assert (previous["state"], previous["exit_code"], previous["restart_count"]) == ("exited", 3, 0)
    assert previous["started_at"] <= previous["finished_at"] <= found["started_at"]
    runtime.stop(pod, "c", grace=5)
    exited(runtime, n=1)


def test_remove_pod_only_once_stopped(runtime):
    pod = runtime.pod_dir(POD)
    runtime.start(spec(runtime, py(SLEEP)))
    running(runtime)
    with pytest.raises(RuntimeError, match="still have a shim"):
        runtime.remove_pod(pod)
    runtime.stop(pod, "c", grace=5)
    shim = exited(runtime).shim_pid
    wait_for(lambda: not alive(shim), message="the shim to exit")
    runtime.remove_pod(pod)
    assert not os.path.exists(pod) and runtime.list_pod_dirs() == []
    with pytest.raises(ValueError):
        runtime.remove_pod("/tmp")


def test_watch_reports_starts_and_exits(runtime):
    """One container ended before the watch began (found by its first scan), one starts and
    ends under the watch (found by inotify, in a pod directory created meanwhile)."""
    pod = runtime.pod_dir(POD)
    runtime.start(spec(runtime, py("pass"), name="before"))
    exited(runtime, "before")
    later_pod = runtime.pod_dir("default_later_4567")
    expected = [(pod, "before", 0, "started"), (pod, "before", 0, "exited"),
                (later_pod, "after", 0, "started"), (later_pod, "after", 0, "exited")]

    async def collect() -> list:
        seen = []
        async for event in runtime.watch():
            seen.append(event)
            if event[1] == "before" and event[3] == "exited":
                os.makedirs(later_pod)
                runtime.start(ContainerSpec(later_pod, "after", 0, py("import sys; sys.exit(1)"), grace=5))
            if len(seen) == len(expected):
                return seen

    events = asyncio.run(asyncio.wait_for(collect(), DEADLINE))
    assert events == expected


def test_watch_ends_with_its_stop_event(runtime):
    async def watch_until_stopped() -> list:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, stop.set)
        return [event async for event in runtime.watch(stop)]

    assert asyncio.run(asyncio.wait_for(watch_until_stopped(), DEADLINE)) == []


def test_the_sandbox_cgroups_and_oom_counter_reach_the_shims_spec(runtime):
    pod = runtime.pod_dir(POD)
    given = {"sandbox": {"pid": 5, "start": 7, "id": "0123-1"}, "cgroups": ["/kmtest/cgroup.procs"],
             "oom_counter": {"path": "/kmtest/memory.events"}}
    runtime.start(spec(runtime, ["kubemu-no-such-program"], **given))
    runtime.start(spec(runtime, ["kubemu-no-such-program"], name="plain"))
    exited(runtime)
    exited(runtime, "plain")
    written = json.loads(Path(pod, "c", "0.spec.json").read_text())
    assert {k: written[k] for k in given} == given
    plain = json.loads(Path(pod, "plain", "0.spec.json").read_text())
    assert (plain["sandbox"], plain["cgroups"], plain["oom_counter"]) == (None, [], None)
