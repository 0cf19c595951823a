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
