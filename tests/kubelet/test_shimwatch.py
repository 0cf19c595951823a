"""kubelet/shimwatch.py with real shims: the test process plays init, an asyncio loop the kubelet."""
from __future__ import annotations

import asyncio
import os
import signal

from kubelet.runtime import Runtime
from kubelet.shimwatch import ShimWatch
from tests.conftest import DEADLINE, alive
from tests.kubelet.test_runtime import ESCAPER, POD, runtime, spec  # noqa: F401 - fixtures
from tests.kubelet.test_shim import SLEEP, marker_env, node, py, subreaper  # noqa: F401 - fixtures


async def until(condition, interval: float = 0.02):
    while not (value := condition()):
        await asyncio.sleep(interval)
    return value


def run(rt: Runtime, scenario) -> None:
    async def main():
        shims = ShimWatch(rt, asyncio.get_running_loop())
        try:
            await asyncio.wait_for(scenario(shims), DEADLINE)
        finally:
            shims.close()
    asyncio.run(main())


def test_a_killed_shim_is_recorded_at_once(runtime):  # noqa: F811
    pod = runtime.pod_dir(POD)

    async def scenario(shims: ShimWatch):
        reported = []
        runtime.start(spec(runtime, py(SLEEP)), on_shim=reported.append)
        state = await until(lambda: (s := runtime.state(pod, "c")) and s.pid and s)
        shims.launched(pod, "c", 0, (await until(lambda: reported))[0])
        os.kill(state.shim_pid, signal.SIGKILL)
        await until(lambda: os.path.exists(os.path.join(pod, "c", "0.exit.json")))
        end = runtime.state(pod, "c", 0)
        assert (end.signal, end.finished_at is not None) == (signal.SIGKILL, True)
        assert f"shim (pid {state.shim_pid}) died" in end.message
    run(runtime, scenario)


# A container with a child in its process group: the child is orphaned when its parent dies
# with the shim (it has no death signal of its own).
PARENT = ("import subprocess, sys, time; "
          "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
          "print(c.pid, flush=True); time.sleep(600)")


def test_what_is_left_of_the_container_dies_before_its_end_is_recorded(runtime):  # noqa: F811
    pod = runtime.pod_dir(POD)
    log = runtime.log_path(pod, "c", 0)

    async def scenario(shims: ShimWatch):
        runtime.start(spec(runtime, py(PARENT)))
        state = await until(lambda: (s := runtime.state(pod, "c")) and s.pid and s)
        child = int(await until(lambda: open(log).read().strip()))
        os.kill(state.shim_pid, signal.SIGKILL)
        await until(lambda: not alive(state.pid))  # died with its shim, before the kubelet looked
        shims.watch(pod, "c", state)
        await until(lambda: os.path.exists(os.path.join(pod, "c", "0.exit.json")))
        await until(lambda: not alive(child))
    run(runtime, scenario)


def test_a_container_that_outlives_its_shim_is_killed_then_recorded(runtime):  # noqa: F811
    pod = runtime.pod_dir(POD)
    log = runtime.log_path(pod, "c", 0)

    async def scenario(shims: ShimWatch):
        runtime.start(spec(runtime, py(ESCAPER)))
        state = await until(lambda: (s := runtime.state(pod, "c")) and s.pid and s)
        await until(lambda: "ready" in open(log).read())
        shims.watch(pod, "c", state)
        os.kill(state.shim_pid, signal.SIGKILL)
        await until(lambda: os.path.exists(os.path.join(pod, "c", "0.exit.json")))
        assert not alive(state.pid)  # killed before its end was written down
        assert runtime.state(pod, "c", 0).signal == signal.SIGKILL
    run(runtime, scenario)


def test_a_shim_that_exits_normally_keeps_its_own_record(runtime):  # noqa: F811
    pod = runtime.pod_dir(POD)

    async def scenario(shims: ShimWatch):
        reported = []
        runtime.start(spec(runtime, py("import time; time.sleep(0.3); raise SystemExit(3)")), on_shim=reported.append)
        shims.launched(pod, "c", 0, (await until(lambda: reported))[0])
        state = await until(lambda: (s := runtime.state(pod, "c")) and s.exited and s)
        await until(lambda: not shims._fds)  # the pidfd fired and its callback ran
        assert runtime.state(pod, "c", 0).exit_code == 3 and runtime.state(pod, "c", 0).message is None
    run(runtime, scenario)


def test_a_launcher_that_dies_leaves_a_start_error(node):  # noqa: F811
    rt = Runtime(str(node), env_base=dict(marker_env(node), PYTHONHOME="/nonexistent"))  # python cannot start
    os.makedirs(rt.pod_dir(POD))
    pod = rt.pod_dir(POD)

    async def scenario(shims: ShimWatch):
        reported = []
        rt.start(spec(rt, py(SLEEP)), on_shim=reported.append)
        shims.launched(pod, "c", 0, (await until(lambda: reported))[0])
        await until(lambda: os.path.exists(os.path.join(pod, "c", "0.exit.json")))
        assert rt.state(pod, "c", 0).start_failed
    run(rt, scenario)


class _LostStart:
    """A start whose shim is dead while its container still runs."""
    def __init__(self, pid: int):
        self.exited, self.shim_alive, self.pid, self.restart_count = False, False, pid, 0


class _Runtime:
    def __init__(self, proc):
        self.proc, self.recorded = proc, 0

    def state(self, *_):
        return _LostStart(self.proc.pid) if self.proc.poll() is None else None

    def is_running(self, _state) -> bool:
        return self.proc.poll() is None

    def kill(self, *_):
        pass  # the container takes a moment to die

    def record_lost(self, *_):
        self.recorded += 1
        return None


def test_a_start_found_dead_twice_is_held_once_and_let_go(caplog):
    """launched() and watch() may both find the same shim gone: one pidfd on its container, and
    once that exits, none (a second one, overwritten, fired forever on a closed descriptor)."""
    import subprocess
    proc = subprocess.Popen(["sleep", "0.3"])

    async def main():
        rt = _Runtime(proc)
        shims = ShimWatch(rt, asyncio.get_running_loop())
        key = ("/pod", "c", 0)
        shims._shim_gone(key)
        shims._shim_gone(key)
        assert len(shims._fds) == 1
        await until(lambda: proc.poll() is not None and not shims._fds)
        await asyncio.sleep(0.1)
        assert rt.recorded == 1
        shims.close()
    try:
        asyncio.run(asyncio.wait_for(main(), DEADLINE))
    finally:
        proc.wait()
    assert "Traceback" not in caplog.text and "Exception in callback" not in caplog.text
