"""A CPU-time sampling profiler that runs inside the cluster's processes (profile mode only).

Why not py-spy: on a machine with more runnable threads than cores, py-spy's "active" samples
include the time a thread waits for a CPU, and a thread is often preempted right after it
wakes another (a ZeroMQ send wakes the I/O thread), so `Socket.send` looked like half of the
apiserver's time while it costs ~3 us of CPU. Here SIGPROF fires each time the process has
used another 5 ms of CPU (ITIMER_PROF), and each sample weighs the process CPU time used since
the previous one (signals may coalesce), so samples are CPU time by construction; each records
the main thread's Python stack (CPU burnt by other threads - the store's fsync thread,
ZeroMQ's I/O thread - lands on whatever the main thread runs at that moment). Python runs the
handler at the next bytecode boundary, which slightly favours small functions' entries; read
the inclusive shares rather than single lines.

How it gets in: profile mode boots the cluster with PYTHONPATH holding a generated
`sitecustomize.py` that calls `install()`, and KUBEMU_BENCH_CPU_PROFILE naming the output
directory. A profiled role installs SIGUSR1 (start) and SIGUSR2 (stop and write
`<role>.speedscope.json`) and then writes `<pid>.ready`: only processes that did so are ever
signalled (SIGUSR1's default action would kill the others). Standard library only: it is
imported by every Python process of the cluster.
"""
from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

ENV = "KUBEMU_BENCH_CPU_PROFILE"
INTERVAL = 0.005  # seconds of CPU between samples (the kernel fires at most once per tick)
START, STOP = signal.SIGUSR1, signal.SIGUSR2
PROFILED = ("apiserver", "scheduler", "controller-manager", "hollow kubelet", "store-0", "store-1", "store-2")
MODULE_ROLES = {"init": "init", "components.apiserver": "apiserver", "components.scheduler": "scheduler",
                "components.controller_manager": "controller-manager", "kubelet.shim": "shims"}


def role_of(argv: list[str]) -> str:
    """What a cluster process is, from its argv: store-<i>, apiserver, ..., hollow kubelet."""
    module = argv[argv.index("-m") + 1] if "-m" in argv[:-1] else os.path.basename(argv[0]) if argv else "?"
    if module == "store":
        return argv[argv.index("--name") + 1] if "--name" in argv[:-1] else "store"
    if module == "kubelet":
        return "hollow kubelet" if "--hollow" in argv else "kubelet"
    return MODULE_ROLES.get(module, module)


def install() -> None:
    out = os.environ.get(ENV)
    if not out:
        return
    with open("/proc/self/cmdline", "rb") as f:
        role = role_of([a.decode(errors="replace") for a in f.read().split(b"\0") if a])
    if role not in PROFILED:
        return
    stacks: Counter = Counter()  # stack -> CPU seconds
    last = [0.0]  # process CPU time at the previous sample

    def sample(_signum, frame) -> None:
        now = time.process_time()
        stack = []
        while frame is not None:
            code = frame.f_code
            stack.append((code.co_name, code.co_filename, code.co_firstlineno))
            frame = frame.f_back
        stacks[tuple(reversed(stack))] += now - last[0]
        last[0] = now

    def start(*_) -> None:
        stacks.clear()
        last[0] = time.process_time()
        signal.signal(signal.SIGPROF, sample)
        signal.setitimer(signal.ITIMER_PROF, INTERVAL, INTERVAL)

    def stop(*_) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0)
        path = profile_file(Path(out), role)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(speedscope(role, stacks)))
        os.replace(tmp, path)

    signal.signal(START, start)
    signal.signal(STOP, stop)
    (Path(out) / f"{os.getpid()}.ready").write_text(role)


def profile_file(out: Path, role: str) -> Path:
    return out / f"{role.replace(' ', '-')}.speedscope.json"


def speedscope(name: str, stacks: Counter) -> dict:
    """The samples in speedscope's file format (https://www.speedscope.app), one entry per
    distinct stack weighted by its CPU seconds."""
    frames: dict[tuple, int] = {}
    samples, weights = [], []
    for stack, seconds in stacks.items():
        samples.append([frames.setdefault(f, len(frames)) for f in stack])
        weights.append(seconds)
    return {"$schema": "https://www.speedscope.app/file-format-schema.json",
            "shared": {"frames": [{"name": n, "file": f, "line": line} for n, f, line in frames]},
            "profiles": [{"type": "sampled", "name": name, "unit": "seconds", "startValue": 0,
                          "endValue": sum(weights), "samples": samples, "weights": weights}]}
