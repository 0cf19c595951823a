"""The kubelet's container runtime (the CRI side): one shim per container start, files between.

The kubelet never parents its containers. `Runtime.start` launches `python -m kubelet.shim`
(kubelet/shim.py), which detaches, starts the container and writes what happens to files;
everything else here reads those files, signals the shim or the container, and watches the
files appear with inotify. A kubelet restart (or kill -9) therefore neither kills nor
restarts a running container: a new Runtime finds it in the files (`list_pod_dirs`,
`list_containers`) with the same PID.

File protocol. A container lives in <node dir>/pods/<namespace>_<name>_<uid>/<container>/;
each start of it (restartCount N) has its own shim and its own files there:

    N.spec.json   written by the kubelet before launching the shim: {argv, env, cwd,
                  memory_limit, grace, stdin, stdin_once, tty, sandbox, cgroups,
                  oom_counter, mounts}; env is the Runtime's env_base updated with the
                  spec's (env_base is also the shims' own environment); sandbox {pid,
                  start} names the pod's sandbox holder whose namespaces the container
                  joins (kubelet/holder.py), cgroups the container's cgroup.procs files,
                  oom_counter {path} the file where the kernel counts its OOM kills, and
                  mounts the volumes mounted in the container's own mount namespace
                  (kubelet/mounts.py).
                  The kubelet takes an exclusive flock(2) on it and passes that open
                  file to the shim (fd 3), which holds it until it dies: "the lock can
                  be taken" means "no shim is alive for this start", with no window
                  and no PID reuse problem.
    N.log         the container's stdout and stderr, appended (what `kubemu logs` reads).
    N.state.json  written by the shim once the container runs: {shim_pid, pid, pgid (= pid,
                  the container has its own session), pid_start (its start time in clock
                  ticks, against PID reuse), started_at (wall clock), restart_count, argv}.
    N.exit.json   written by the shim when the container has ended, or could not start:
                  {restart_count, shim_pid, pid, exit_code (int|None), signal (int|None),
                  oom_killed, started_at, finished_at, reason, message}. A signal death has exit_code
                  None; an OOM kill has exit_code 137, signal 9, oom_killed, reason
                  OOMKilled; a start failure has exit_code 128, reason StartError and
                  containerd's message (no state.json then) - the kubelet reports it as
                  CreateContainerError.
    N.stop.json   written by the kubelet to stop gracefully: {grace, message}; the message,
                  if any, is what the instance's terminated state says (a probe kill), so a
                  restarted kubelet shows it too. See `stop`.
    N.attach      with stdin or tty: the shim's unix socket that hands out the container's
                  stdin pipe or terminal to an attacher (kubelet/console.py).
    shim.log      the shims' own messages, every start of the container.
    rootfs/       made empty by a start whose mounts need an overlay (kubelet/mounts.py): its
                  writable layer's tmpfs is mounted there in the container's namespace only.

Memory limits are the kernel's when the container has cgroups: its memory cgroup's limit,
and an OOM kill is what the cgroup's oom_kill counter says (`oom_counter`). Without them
(`memory_limit`, the fallback) the limit is a watch: the shim samples the RSS of all the
container's processes every 0.1 s (kubelet/shim.py MEMORY_INTERVAL) and SIGKILLs them all
above the limit, so a fast allocator can overshoot by one interval's worth.

Every JSON file is written to a temporary name and renamed, so a reader or a watcher only
ever sees complete files, and each appears exactly once. `watch` reports N.state.json as
"started" and N.exit.json as "exited" (inotify through kubemu.dirwatch, on the pods dir down to
the container directories: an exit is seen on the loop's next turn, and log writes wake nobody).

What a start looks like from the files (`state`): spec only, lock held = starting; state.json
= running; exit.json = exited. No exit.json and the lock free = the shim died without saying
(kill -9 of it): while its container still runs (it dies with its shim, PR_SET_PDEATHSIG,
unless it got away) the start counts as running; once the container is gone it is exited
with containerd's report for a task whose shim died: exit status 137 (128 + SIGKILL, the
signal its death sends the container), or a StartError (128) if no container was started
yet. `record_lost` writes that report down as N.exit.json (the kubelet calls it as soon as
its pidfd on the shim says the shim is gone: kubelet/shimwatch.py), so every later reader,
a restarted kubelet too, sees the same end.

Stop protocol: `stop` writes N.stop.json {grace} and then sends SIGTERM to the shim named in
N.state.json. The shim, on SIGTERM, reads the grace period from N.stop.json, sends SIGTERM
to the container's process group and SIGKILLs the whole container when the grace is over.
The shim writes N.state.json before it checks for N.stop.json, and `stop` writes
N.stop.json before it reads N.state.json, so a stop that races with the start is seen by
one side or the other. `kill` signals the container's process group directly; the shim
reports whatever death follows.

The launcher runs in a process group of its own, so init killing the kubelet's group does not
abort a start under way. The kubelet must not be a child subreaper itself: the shims are
re-parented to init, the nearest subreaper above the kubelet, and die with init
(PR_SET_PDEATHSIG), not with the kubelet.
"""
from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kubemu.child import RESET_SIGNALS, high_fd, proc_stat, same_process

from .shim import (EXIT, LOG, SHIM_LOG, SPEC, START_ERROR_EXIT, STATE, STOP, instance_file, read_json,
                   write_json)

log = logging.getLogger("kubelet")

if TYPE_CHECKING:
    from kubemu.dirwatch import DirWatch

# What init gives the kubelet for itself (sd_notify, the watchdog, socket activation): a
# container or a shim that inherited it could speak to init in the kubelet's name.
SUPERVISOR_VARS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID",
                   "LISTEN_FDNAMES")


def supervised_env() -> dict[str, str]:
    """Our environment without what init gave us for ourselves: what the processes the kubelet
    launches (shims, sandbox holders) start from."""
    return {k: v for k, v in os.environ.items() if k not in SUPERVISOR_VARS}


LOCK_FD = 3  # where the shim finds the spec's locked file
PID_FD = 4  # where the launcher reports the shim's PID
_SEEN_LIMIT = 10_000
_INSTANCE_FILE = re.compile(r"(\d+)\.(spec|state|exit|stop)\.json|(\d+)\.(?:log|attach)")
_EVENT_FILE = re.compile(r"(\d+)\.(state|exit)\.json")

Event = tuple[str, str, int, str]  # (pod dir, container name, restart count, "started"|"exited")


@dataclass
class ContainerSpec:
    pod_dir: str
    name: str
    restart_count: int
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # over the Runtime's env_base
    cwd: str | None = None
    memory_limit: int | None = None  # bytes
    grace: float = 30.0  # seconds between SIGTERM and SIGKILL unless stop() says otherwise
    stdin: bool = False  # Kubernetes' stdin, stdinOnce, tty: what `kubectl attach` reaches (console.py)
    stdin_once: bool = False
    tty: bool = False
    sandbox: dict | None = None  # {"pid", "start"[, "id"]}: the pod's sandbox holder, joined before exec
    cgroups: list[str] = field(default_factory=list)  # the container's cgroup.procs files, joined before exec
    oom_counter: dict | None = None  # {"path"}: where the kernel counts the container's OOM kills
    # The container's own mounts, in order: {target, source, type "bind"|"tmpfs", read_only,
    # size, file} (kubelet/mounts.py); performed in a mount namespace of its own before exec.
    mounts: list[dict] = field(default_factory=list)


@dataclass
class ContainerState:
    name: str
    restart_count: int
    shim_pid: int | None = None
    pid: int | None = None
    pgid: int | None = None
    started_at: float | None = None  # wall clock
    exited: bool = False
    exit_code: int | None = None
    signal: int | None = None
    oom_killed: bool = False
    finished_at: float | None = None
    reason: str | None = None  # StartError | OOMKilled | ContainerStatusUnknown | None
    message: str | None = None
    pid_start: int | None = None  # the container's start time in clock ticks (PID reuse)
    shim_alive: bool = False  # no exit record yet, and its shim holds the lock

    @property
    def starting(self) -> bool:
        """The shim is alive but has not started the container yet."""
        return not self.exited and self.pid is None

    @property
    def start_failed(self) -> bool:
        return self.exited and self.reason == "StartError"

    def as_found(self) -> dict:
        """The record PodWorker.adopt takes for a container found after a kubelet restart.
        A container still starting counts as running (without a PID yet): its live shim will
        start it or report the start error, and the watch says which."""
        record = {k: getattr(self, k) for k in ("restart_count", "pid", "started_at", "exit_code",
                                                "signal", "oom_killed", "finished_at", "reason", "message")}
        record["state"] = "exited" if self.exited else "running"
        return record


class Runtime:
    def __init__(self, node_dir: str, env_base: dict[str, str] | None = None):
        self.node_dir = os.path.abspath(node_dir)
        self.pods_dir = os.path.join(self.node_dir, "pods")
        os.makedirs(self.pods_dir, exist_ok=True)
        if env_base is None:
            env_base = supervised_env()
        self.env_base = dict(env_base)  # the shims' environment, and each container's base

    # -- paths ---------------------------------------------------------------------------

    def pod_dir(self, pod_name: str) -> str:
        """<node dir>/pods/<pod_name>, e.g. pod_name "default_web_1234"."""
        return os.path.join(self.pods_dir, pod_name)

    @staticmethod
    def container_dir(pod_dir: str, name: str) -> str:
        return os.path.join(os.path.abspath(pod_dir), name)

    def log_path(self, pod_dir: str, name: str, restart_count: int) -> str:
        return instance_file(self.container_dir(pod_dir, name), restart_count, LOG)

    # -- starting ------------------------------------------------------------------------

    def start(self, spec: ContainerSpec, on_shim: Callable[[int | None], None] | None = None) -> None:
        """Launch the shim of this container start and return without waiting for it;
        FileExistsError if this restart count was started already. `on_shim` is called (from
        another thread) with the shim's PID once the launcher has exited, or None if the
        launcher died without starting a shim."""
        cdir = self.container_dir(spec.pod_dir, spec.name)
        os.makedirs(cdir, exist_ok=True)
        report_r, report_w = os.pipe2(os.O_CLOEXEC)  # first: a failure here leaves nothing locked
        try:
            report_w = high_fd(report_w)  # closes its argument if it fails
        except OSError:
            os.close(report_r)
            raise
        try:
            lock_fd = self._write_locked_spec(cdir, spec)
        except BaseException:
            os.close(report_r)
            os.close(report_w)
            raise
        try:
            pid = self._launch(cdir, spec.restart_count, lock_fd, report_w)
        except OSError:
            os.close(report_r)
            _unlink(instance_file(cdir, spec.restart_count, SPEC))  # not started: may be retried
            raise
        finally:
            os.close(lock_fd)  # the launcher holds the lock from here on
            os.close(report_w)
        threading.Thread(target=_reap_launcher, args=(pid, report_r, on_shim), name=f"shim-launcher-{pid}",
                         daemon=True).start()

    def _write_locked_spec(self, cdir: str, spec: ContainerSpec) -> int:
        """Write N.spec.json, locked before its name exists (a reader seeing the name
        unlocked would take the shim for dead); the open, locked file."""
        path = instance_file(cdir, spec.restart_count, SPEC)
        tmp = os.path.join(cdir, f".{spec.restart_count}.{SPEC}.{os.getpid()}.tmp")
        fd = high_fd(os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, _spec_json(spec, self.env_base).encode())
            os.link(tmp, path)  # unlike rename, never replaces: one shim per restart count
        except BaseException:
            os.close(fd)
            raise
        finally:
            os.unlink(tmp)
        return fd

    def _launch(self, cdir: str, restart_count: int, lock_fd: int, report_fd: int) -> int:
        """posix_spawn the shim's launcher: no fork() of the big kubelet (init/spawn.py).
        It gets a process group of its own: init kills the kubelet's group when the kubelet
        dies, and a start already under way must not die with it."""
        argv = [sys.executable, "-m", "kubelet.shim", "--dir", cdir, "--restart-count", str(restart_count),
                "--spec", instance_file(cdir, restart_count, SPEC), "--lock-fd", str(LOCK_FD),
                "--pid-fd", str(PID_FD)]
        init = os.getppid()
        stat = proc_stat(init)
        if stat is not None:
            argv += ["--init-pid", f"{init}:{stat[1]}"]  # a power cut mid-launch: see kubelet/shim.py
        out = high_fd(os.open(os.path.join(cdir, SHIM_LOG),
                               os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644))
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, out, 1),
                   (os.POSIX_SPAWN_DUP2, out, 2), (os.POSIX_SPAWN_DUP2, lock_fd, LOCK_FD),
                   (os.POSIX_SPAWN_DUP2, report_fd, PID_FD)]
        try:
            return os.posix_spawn(sys.executable, argv, self.env_base, file_actions=actions, setpgroup=0,
                                  setsigdef=RESET_SIGNALS, setsigmask=())
        finally:
            os.close(out)

    # -- reading the files -------------------------------------------------------------

    def restart_counts(self, pod_dir: str, name: str) -> list[int]:
        """The restart counts this container was started with, ascending."""
        try:
            names = os.listdir(self.container_dir(pod_dir, name))
        except OSError:
            return []
        return sorted(int(m[1]) for n in names if (m := _INSTANCE_FILE.fullmatch(n)) and m[2] == "spec")

    def state(self, pod_dir: str, name: str, restart_count: int | None = None) -> ContainerState | None:
        """The container start's state from its files (the latest start if no count given);
        None if it was never started."""
        if restart_count is None:
            counts = self.restart_counts(pod_dir, name)
            if not counts:
                return None
            restart_count = counts[-1]
        cdir = self.container_dir(pod_dir, name)
        if not os.path.exists(instance_file(cdir, restart_count, SPEC)):
            return None
        return _read_state(cdir, name, restart_count)

    def list_pod_dirs(self) -> list[str]:
        return [os.path.join(self.pods_dir, name) for name in _subdirs(self.pods_dir)]

    def list_containers(self, pod_dir: str) -> dict[str, ContainerState]:
        """Every container of the pod that was ever started, in its latest start's state."""
        states = {name: self.state(pod_dir, name) for name in _subdirs(pod_dir)}
        return {name: state for name, state in states.items() if state is not None}

    def found(self, pod_dir: str) -> dict[str, dict]:
        """What PodWorker.adopt takes for the pod: every container's latest start as_found,
        with the start before it (which `prune` keeps) under "previous"."""
        found = {}
        for name, state in self.list_containers(pod_dir).items():
            found[name] = record = state.as_found()
            earlier = [n for n in self.restart_counts(pod_dir, name) if n < state.restart_count]
            previous = self.state(pod_dir, name, earlier[-1]) if earlier else None
            if previous is not None and previous.exited:
                record["previous"] = previous.as_found()
        return found

    def is_running(self, state: ContainerState) -> bool:
        """Whether the container's process is alive: not a zombie, and not a newer process
        that was given the same PID."""
        return not state.exited and same_process(state.pid, state.pid_start)

    # -- stopping ------------------------------------------------------------------------

    def stop(self, pod_dir: str, name: str, grace: float, message: str | None = None) -> None:
        """Stop the container's latest start gracefully through its shim (protocol in the
        module docstring); a later call with a shorter grace shortens it. `message`: what
        its terminated state is to say (kept from an earlier call if not given)."""
        cdir = self.container_dir(pod_dir, name)
        counts = self.restart_counts(pod_dir, name)
        if not counts or os.path.exists(instance_file(cdir, counts[-1], EXIT)):
            return
        n = counts[-1]
        stop = {"grace": grace}
        message = message or (read_json(instance_file(cdir, n, STOP)) or {}).get("message")
        if message:
            stop["message"] = message
        write_json(instance_file(cdir, n, STOP), stop)
        started = read_json(instance_file(cdir, n, STATE))
        if started is None:
            return  # the shim will find stop.json right after writing state.json
        if _shim_alive(cdir, n):
            _signal(started.get("shim_pid"), signal.SIGTERM)
        else:  # no shim (cannot happen short of a kill -9 of it): nobody can keep the grace
            self.kill(pod_dir, name, signal.SIGKILL)

    def record_lost(self, pod_dir: str, name: str, restart_count: int) -> str | None:
        """Write N.exit.json for a start whose shim died without writing it, once its
        container's process is gone too (module docstring); the message it wrote, or None if
        it wrote nothing. What is
        left of its process group (children orphaned when it died with its shim) is
        SIGKILLed first: the shim would have, and a new start must not find them there."""
        cdir = self.container_dir(pod_dir, name)
        if os.path.exists(instance_file(cdir, restart_count, EXIT)):
            return None
        state = self.state(pod_dir, name, restart_count)
        if state is None or not state.exited or state.shim_alive:
            return None  # never started, its shim lives, or its container still runs
        if state.pgid:
            _kill_group(state.pgid, state.pid_start)
        record = _lost_record(read_json(instance_file(cdir, restart_count, STATE)) or {}, restart_count,
                              time.time())
        path = instance_file(cdir, restart_count, EXIT)
        tmp = os.path.join(cdir, f".{restart_count}.{EXIT}.{os.getpid()}.lost")
        try:
            with open(tmp, "w") as f:
                json.dump(record, f)
            os.link(tmp, path)  # unlike rename, never replaces: the shim may have written its own
            return record["message"]
        except FileExistsError:
            return None
        except OSError as exc:  # disk full, pod directory gone: the next look decides again
            log.warning("cannot record the end of %s#%d: %s", cdir, restart_count, exc)
            return None
        finally:
            _unlink(tmp)

    def kill(self, pod_dir: str, name: str, sig: int, restart_count: int | None = None) -> None:
        """Send `sig` to the process group of the container's start (its latest if no count
        given), if it runs."""
        state = self.state(pod_dir, name, restart_count)
        if state is not None and state.pgid and self.is_running(state):
            _signal(state.pgid, sig, group=True)

    # -- removing ------------------------------------------------------------------------

    def remove_pod(self, pod_dir: str) -> None:
        """Delete the pod's directory, logs included (the kubelet's garbage collection).
        Stop its containers first: RuntimeError while any of their shims is alive."""
        pod_dir = os.path.abspath(pod_dir)
        if os.path.dirname(pod_dir) != self.pods_dir:
            raise ValueError(f"{pod_dir} is not a pod directory of {self.pods_dir}")
        alive = [f"{name}#{n}" for name in _subdirs(pod_dir) for n in self.restart_counts(pod_dir, name)
                 if _shim_alive(self.container_dir(pod_dir, name), n)]
        if alive:
            raise RuntimeError(f"{pod_dir}: containers still have a shim: {', '.join(alive)}")
        shutil.rmtree(pod_dir, ignore_errors=True)

    def prune(self, pod_dir: str, name: str, keep: int = 2) -> None:
        """Delete the files of all but the `keep` latest starts of a container (Kubernetes
        keeps the previous one, for `logs --previous`); starts with a live shim stay."""
        cdir = self.container_dir(pod_dir, name)
        counts = self.restart_counts(pod_dir, name)
        old = {n for n in counts[:max(0, len(counts) - keep)] if not _shim_alive(cdir, n)}
        for entry in os.listdir(cdir):
            m = _INSTANCE_FILE.fullmatch(entry)
            if m and int(m[1] or m[3]) in old:
                _unlink(os.path.join(cdir, entry))

    # -- watching ------------------------------------------------------------------------

    async def watch(self, stop_event: asyncio.Event | None = None) -> AsyncIterator[Event]:
        """(pod dir, container, restart count, "started"|"exited") for every N.state.json and
        N.exit.json: first those already there, then each new one as inotify reports it
        (kubemu.dirwatch, on the next turn of the loop), in order for one container start,
        each once. Starting a watch and then listing therefore misses nothing. Ends when
        `stop_event` is set."""
        from kubemu.dirwatch import DirWatch  # inotify (ctypes) loads only for a watch

        seen: dict[Event, None] = {}
        # pods/<pod>/<container>/N.*.json: the pods dir, its pods and their containers are
        # watched, and only names ending in .json wake the consumer (not the logs, nor the
        # shims' temporary files). The watches are in place before the scan below.
        changes = DirWatch(self.pods_dir, recursive=True, max_depth=2, suffixes=(".json",), create=True)
        stopper = asyncio.ensure_future(_close_when_set(stop_event, changes)) if stop_event else None
        try:
            for event in _unseen(seen, self._scan(self.pods_dir)):
                yield event
            async for batch in changes:
                for event in _unseen(seen, self._events(batch)):
                    yield event
        finally:
            changes.close()
            if stopper is not None:
                stopper.cancel()
                await asyncio.gather(stopper, return_exceptions=True)

    def _events(self, batch: list[tuple[str, str]]) -> list[Event]:
        if any(kind == "rescan" for kind, _ in batch):
            return self._scan(self.pods_dir)  # events were lost: relist (seen drops repeats)
        # Files found in a new pod or container directory come as "added" too (the watcher
        # scans it once its watch is in place).
        return [e for kind, path in batch if kind != "deleted" and (e := self._event_of(path))]

    def _event_of(self, path: str) -> Event | None:
        parts = os.path.relpath(path, self.pods_dir).split(os.sep)
        if len(parts) != 3 or not (m := _EVENT_FILE.fullmatch(parts[2])):
            return None
        kind = "started" if m[2] == "state" else "exited"
        return os.path.join(self.pods_dir, parts[0]), parts[1], int(m[1]), kind

    def _scan(self, top: str) -> list[Event]:
        """The events for the files already under `top` (the pods dir, a pod or a container)."""
        events = []
        for root, dirs, files in os.walk(top):
            if len(os.path.relpath(root, self.pods_dir).split(os.sep)) >= 2:
                dirs.clear()  # a container directory: nothing deeper is ours
            events.extend(e for f in files if (e := self._event_of(os.path.join(root, f))))
        return events


# --- helpers ------------------------------------------------------------------------------

def _spec_json(spec: ContainerSpec, env_base: dict[str, str]) -> str:
    return json.dumps({"argv": list(spec.argv), "env": {**env_base, **spec.env}, "cwd": spec.cwd,
                       "memory_limit": spec.memory_limit, "grace": spec.grace,
                       "stdin": spec.stdin, "stdin_once": spec.stdin_once, "tty": spec.tty,
                       "sandbox": spec.sandbox, "cgroups": list(spec.cgroups), "oom_counter": spec.oom_counter,
                       "mounts": list(spec.mounts)})


def _read_state(cdir: str, name: str, n: int) -> ContainerState:
    started = read_json(instance_file(cdir, n, STATE)) or {}
    ended = read_json(instance_file(cdir, n, EXIT))
    shim_alive = ended is None and _shim_alive(cdir, n)
    if ended is None and not shim_alive:
        ended = read_json(instance_file(cdir, n, EXIT))  # written just before it exited?
        if ended is None and not same_process(started.get("pid"), started.get("pid_start")):
            ended = _lost_record(started, n, None)  # until record_lost writes it down
    stop = read_json(instance_file(cdir, n, STOP)) or {}
    return _container_state(name, n, started, ended, stop.get("message"), shim_alive)


def _lost_record(started: dict, n: int, finished_at: float | None) -> dict:
    """containerd's report for a task whose shim died: killed (137), the signal the shim's
    death sends the container; a start error (128) if it died before starting it."""
    shim, pid = started.get("shim_pid"), started.get("pid")
    record = {"restart_count": n, "shim_pid": shim, "pid": pid, "exit_code": None, "signal": int(signal.SIGKILL),
              "oom_killed": False, "started_at": started.get("started_at"), "finished_at": finished_at,
              "reason": None, "message": f"the container's shim (pid {shim}) died: the container was killed"}
    if pid is None:
        record.update(exit_code=START_ERROR_EXIT, signal=None, reason="StartError",
                      message="the container's shim died before it started the container")
    return record


def _container_state(name: str, n: int, started: dict, ended: dict | None, stop_message: str | None,
                     shim_alive: bool) -> ContainerState:
    end = ended or {}
    return ContainerState(
        name=name, restart_count=n, shim_pid=started.get("shim_pid", end.get("shim_pid")),
        pid=started.get("pid", end.get("pid")), pgid=started.get("pgid"),
        started_at=started.get("started_at", end.get("started_at")), exited=ended is not None,
        exit_code=end.get("exit_code"), signal=end.get("signal"), oom_killed=bool(end.get("oom_killed")),
        finished_at=end.get("finished_at"), reason=end.get("reason"),
        message=end.get("message") or (stop_message if ended is not None else None),
        pid_start=started.get("pid_start"), shim_alive=shim_alive)


def _shim_alive(cdir: str, n: int) -> bool:
    """Whether a shim holds this start's spec lock. A shared probe: probes never block
    each other, only the shim's exclusive lock blocks them."""
    try:
        fd = os.open(instance_file(cdir, n, SPEC), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _kill_group(pgid: int, since: int | None) -> None:
    """SIGKILL every process of the process group `pgid` (one that started no earlier than
    its leader, `since` in clock ticks), each through a pidfd after checking its group, so
    that a PID reused meanwhile is never hit. The group is the container's own session's: no
    other process can have its ID while one of its members lives."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if not _in_group(pid, pgid, since):
            continue
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue  # gone meanwhile
        try:
            if _in_group(pid, pgid, since):  # the process the pidfd names
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        except OSError:
            pass
        finally:
            os.close(fd)


def _in_group(pid: int, pgid: int, since: int | None) -> bool:
    stat = proc_stat(pid)
    return stat is not None and stat[2] == pgid and stat[0] not in "ZX" and (since is None or stat[1] >= since)


def _unseen(seen: dict[Event, None], events: list[Event]) -> list[Event]:
    """New events only, each container start's "started" before its "exited"."""
    fresh = []
    for event in sorted(set(events), key=lambda e: (e[0], e[1], e[2], e[3] != "started")):
        if event not in seen:
            seen[event] = None
            fresh.append(event)
    while len(seen) > _SEEN_LIMIT:  # bounded memory: files appear once, so old ones can go
        del seen[next(iter(seen))]
    return fresh


async def _close_when_set(stop_event: asyncio.Event, changes: DirWatch) -> None:
    await stop_event.wait()
    changes.close()  # ends the watch's iteration, even while it waits


def _reap_launcher(pid: int, report_fd: int, on_shim: Callable[[int | None], None] | None) -> None:
    """The launcher exits as soon as it has forked the shim: read the shim's PID it reports
    (up to EOF: the launcher is gone, and the shim closed its copy), collect the launcher so
    that it leaves no zombie (blocking calls in a thread, not a poll), and pass the PID on."""
    with os.fdopen(report_fd, "rb") as report:
        text = report.read().strip()
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # someone reaped every child (a waitpid(-1) elsewhere in the kubelet)
    if on_shim is not None:
        on_shim(int(text) if text.isdigit() else None)


def _signal(pid: int | None, sig: int, group: bool = False) -> None:
    if not pid:
        return
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _subdirs(path: str) -> list[str]:
    try:
        return sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
