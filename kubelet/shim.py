"""python -m kubelet.shim: the shim of one container start (containerd-shim / CRI-O conmon).

    python -m kubelet.shim --dir CONTAINER_DIR --restart-count N [--grace SECONDS]
                           [--memory-limit BYTES] [--spec FILE] [--lock-fd FD]
                           [--init-pid PID:START_TICKS] [--pid-fd FD] [-- ARGV...]

`--spec FILE` is a JSON object with any of argv, env, cwd, memory_limit, grace, stdin,
stdin_once, tty, sandbox, cgroups, oom_counter, mounts (kubelet/runtime.py); its keys win over the
flags. Without a spec `env` is the shim's own environment. `--lock-fd FD` is an open file
holding an exclusive flock(2) that the shim keeps for its whole life: the kubelet takes the
lock before launching us, so "lock free" means "no shim alive" with no window at all.
`--init-pid` names the process the shim must die with (the kubelet's parent, init): if it is
gone by the time the shim has armed its death signal, init died while the shim was being
launched (a power cut) and the shim exits instead of living on under PID 1. `--pid-fd FD`: the
launched process writes the real shim's PID there (decimal) before it exits, so the kubelet
can hold a pidfd on the shim from its very start (kubelet/shimwatch.py).

What the shim does, in order (the files are described in kubelet/runtime.py):
  1. detach: the launched process forks the real shim and exits at once; the shim calls
     setsid() (init kills the kubelet's process group when the kubelet dies, and we must
     survive that) and is re-parented to the nearest subreaper, init. Only then does it set
     PR_SET_PDEATHSIG=SIGKILL: the death signal fires when the *current* parent dies, so set
     earlier it would fire when the launcher exits. getppid() is re-checked after the prctl,
     and --init-pid checked for life.
  2. become a subreaper itself, like containerd-shim: every process of the container that
     is orphaned comes back to us, so our descendants are exactly the container's processes
     (our stand-in for its cgroup) and none of them outlives us.
  3. start the container: fork + exec (the shim is small, so fork is cheap, and it lets exec
     errors come back exactly over a close-on-exec pipe and closes the pdeathsig window);
     its own session, PR_SET_PDEATHSIG=SIGKILL, stdin /dev/null (with `stdin`: a pipe; with
     `tty`: a pseudo-terminal for all three, kubelet/console.py), stdout+stderr appended to
     <N>.log; then, in the child (`enter_container`), it writes itself into the container's
     cgroups, setns()es into the namespaces of the pod's sandbox holder (kubelet/holder.py)
     once it has checked the holder is the same process, makes a mount namespace of its own
     (in a sandbox, or with mounts) with the spec's mounts in it (ContainerMounts,
     kubelet/mounts.py), takes the spec's cwd, and execs argv directly (never a shell) with
     the spec's env. A missing executable, a cgroup that cannot be joined, a holder that is
     gone or a mount that fails writes <N>.exit.json with reason StartError and containerd's
     (runc's) message.
  4. write <N>.state.json, then wait in sigwaitinfo() for SIGCHLD/SIGTERM/SIGINT: nothing is
     polled, except the memory watch of the fallback without cgroups (a --memory-limit
     samples the RSS of all our descendants every MEMORY_INTERVAL seconds). With cgroups the
     kernel enforces the limit, and the container's memory cgroup counts its OOM kills
     (`oom_counter`): read at the start and after the exit, a count that went up with a
     death by SIGKILL is reason OOMKilled, exit code 137.
  5. SIGTERM/SIGINT = graceful stop: SIGTERM to the container's process group, SIGKILL to
     all of it after the grace period (<N>.stop.json {"grace": S}, if present when the
     signal arrives, overrides --grace; a second stop can only shorten the deadline).
  6. on the container's exit: SIGKILL the rest of its process group and everything in its
     cgroups (what `kubectl exec` left running in it: not our descendants), write
     <N>.exit.json, SIGKILL and reap every remaining descendant, wait for the cgroups to
     empty, exit.

Lean on purpose (one shim per running container): stdlib os/sys/signal/json/time and
kubemu.prctl/nsutil (ctypes) only; kubelet/console.py's sockets and threads only for a
container with stdin or a tty, kubemu/cgroups.py only for one with cgroups. main() never
raises: errors go to stderr (the kubelet points it at the container directory's shim.log)
and, once a container was asked for, to <N>.exit.json.
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import sys
import termios
import time

from kubemu.child import become_child, proc_stat, same_process
from kubemu.nsutil import (CLONE_NEWNS, MNT_DETACH, MS_BIND, MS_MOVE, MS_RDONLY, MS_REC, MS_REMOUNT, MS_SLAVE,
                           MS_PRIVATE, SANDBOX, mount, mount_flags, mount_points, nsfs_mounts, setns, umount2,
                           unshare)
from kubemu.prctl import set_child_subreaper, set_pdeathsig

from . import mounts as plan

MEMORY_INTERVAL = 0.1  # seconds between RSS samples of a container with a memory limit
DRAIN_TIMEOUT = 10.0  # how long to wait for the container's last processes to die
DEFAULT_GRACE = 30.0  # Kubernetes' terminationGracePeriodSeconds
START_ERROR_EXIT = 128  # what containerd reports for a StartError (kubelet/podworker.py)
OOM_EXIT = 137  # 128 + SIGKILL, as a runtime reports an OOM kill
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

# The signals the shim handles synchronously with sigwaitinfo(); blocked for its whole life.
WAITED = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT)

# --- the file names of one container start (shared with kubelet/runtime.py) -----------------

LOG, SPEC, STATE, EXIT, STOP = "log", "spec.json", "state.json", "exit.json", "stop.json"
ATTACH = "attach"  # the unix socket that hands out a container's stdin or terminal (kubelet/console.py)
SHIM_LOG = "shim.log"
ROOTFS = "rootfs"  # in the container's directory: where its writable layer's tmpfs is mounted (in its namespace)
CONSOLE_DRAIN = 1.0  # after the container's exit, how long its terminal's last output may take


def instance_file(container_dir: str, restart_count: int, kind: str) -> str:
    """<container dir>/<restartCount>.<kind>, e.g. 3.exit.json or 3.log."""
    return os.path.join(container_dir, f"{restart_count}.{kind}")


def write_json(path: str, record: dict) -> None:
    """Atomically: readers (and inotify watchers) only ever see a complete file. No fsync:
    a "power cut" here is a kill -9 of init, not a lost page cache."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.tmp")
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def read_json(path: str) -> dict | None:
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def log(config: "Config | None", message: str) -> None:
    prefix = f"[{config.restart_count}] " if config else ""
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} shim {os.getpid()}: {prefix}{message}",
          file=sys.stderr, flush=True)


# --- configuration ----------------------------------------------------------------------------

class UsageError(Exception):
    pass


class Config:
    """What one shim runs: the flags, overridden by the spec file's keys."""

    FLAGS = {"--dir": ("dir", str), "--restart-count": ("restart_count", int),
             "--grace": ("grace", float), "--memory-limit": ("memory_limit", int),
             "--spec": ("spec", str), "--lock-fd": ("lock_fd", int), "--init-pid": ("init", str),
             "--pid-fd": ("pid_fd", int)}

    def __init__(self) -> None:
        self.dir = ""
        self.restart_count = -1
        self.grace = DEFAULT_GRACE
        self.memory_limit: int | None = None
        self.spec: str | None = None
        self.lock_fd: int | None = None
        self.pid_fd: int | None = None  # where the launched process reports the shim's PID
        self.init: str | None = None  # PID:START_TICKS of the process to die with
        self.argv: list[str] = []
        self.env: dict[str, str] = dict(os.environ)
        self.cwd: str | None = None
        self.stdin = False       # Kubernetes' stdin, stdinOnce, tty of the container
        self.stdin_once = False
        self.tty = False
        self.sandbox: dict | None = None  # {"pid", "start"[, "id"]}: the pod's sandbox holder to join
        self.cgroups: list[str] = []  # the container's cgroup.procs files, one per hierarchy
        self.oom_counter: dict | None = None  # {"path"}: its memory.oom_control or memory.events
        self.mounts: list = []  # kubelet/mounts.py: made in the container's own mount namespace

    @classmethod
    def parse(cls, args: list[str]) -> "Config":
        config = cls()
        config._parse_flags(args)
        if config.spec:
            config._apply_spec(config.spec)
        config._validate()
        return config

    def _parse_flags(self, args: list[str]) -> None:
        i = 0
        while i < len(args):
            if args[i] == "--":
                self.argv = args[i + 1:]
                return
            if args[i] not in self.FLAGS or i + 1 >= len(args):
                raise UsageError(f"unknown option or missing value: {args[i]}")
            attr, kind = self.FLAGS[args[i]]
            try:
                setattr(self, attr, kind(args[i + 1]))
            except ValueError:
                raise UsageError(f"bad value for {args[i]}: {args[i + 1]!r}") from None
            i += 2

    def _apply_spec(self, path: str) -> None:
        spec = read_json(path)
        if spec is None:
            raise UsageError(f"cannot read the spec file {path}")
        for key in ("argv", "env", "cwd", "memory_limit", "grace", "stdin", "stdin_once", "tty", "sandbox",
                    "cgroups", "oom_counter", "mounts"):
            if spec.get(key) is not None:
                setattr(self, key, spec[key])

    def _validate(self) -> None:
        if not self.dir or self.restart_count < 0:
            raise UsageError("--dir and --restart-count are required")
        if not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise UsageError("no command: pass -- ARGV... or argv in the spec")
        sandbox = self.sandbox
        if sandbox is not None and not (isinstance(sandbox, dict) and _whole(sandbox.get("pid"), 1)
                                        and _whole(sandbox.get("start"), 0)):
            raise UsageError(f'sandbox: expected {{"pid": int, "start": int}}, got {sandbox!r}')
        if not isinstance(self.cgroups, list) or not all(isinstance(p, str) and p for p in self.cgroups):
            raise UsageError(f"cgroups: expected a list of cgroup.procs paths, got {self.cgroups!r}")
        counter = self.oom_counter
        if counter is not None and not (isinstance(counter, dict) and isinstance(counter.get("path"), str)):
            raise UsageError(f'oom_counter: expected {{"path": str}}, got {counter!r}')
        if not isinstance(self.mounts, list):
            raise UsageError(f"mounts: expected a list, got {self.mounts!r}")
        self.dir = os.path.abspath(self.dir)  # before anything could change our cwd

    def file(self, kind: str) -> str:
        return instance_file(self.dir, self.restart_count, kind)


def _whole(value, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


# --- 1. detaching from the kubelet --------------------------------------------------------

def detach(pid_fd: int | None, init: str | None) -> bool:
    """Fork the real process and let the launched one exit; return in the real one once it
    has been re-parented and armed with PR_SET_PDEATHSIG (see the module docstring): True,
    or False if init (`init`, PID:START_TICKS) died meanwhile and it must exit at once. Also
    how kubelet/holder.py detaches a pod's sandbox holder."""
    launcher = os.getpid()
    rd, wr = os.pipe()
    child = os.fork()
    if child != 0:  # the launcher: its exit closes `wr` and re-parents the child
        if pid_fd is not None:
            _report_pid(pid_fd, child)
        os._exit(0)
    if pid_fd is not None:
        os.close(pid_fd)  # the reader's EOF: the launcher has exited
    os.close(wr)
    os.setsid()
    os.read(rd, 1)  # EOF: the launcher is exiting (no polling while it finishes)
    os.close(rd)
    while os.getppid() == launcher:  # the kernel re-parents just after closing its files
        time.sleep(0.001)
    parent = os.getppid()
    set_pdeathsig(signal.SIGKILL)
    if os.getppid() != parent:  # that parent (init) died before the prctl: a power cut
        return False
    return not init or _names_live_process(init)


def _report_pid(fd: int, pid: int) -> None:
    try:
        os.write(fd, f"{pid}\n".encode())
    except OSError:
        pass  # nobody reads it any more: the kubelet finds the shim in N.state.json


def _names_live_process(pid_start: str) -> bool:
    """Whether PID[:START_TICKS] names a live process (not a later one with its PID)."""
    pid, _, start = pid_start.partition(":")
    if not pid.isdigit() or not (start.isdigit() or not start):
        return False
    return same_process(int(pid), int(start) if start else None)


# --- 3. starting the container ------------------------------------------------------------

class StartError(Exception):
    """The container's process could not be started; the message is containerd's."""


def look_path(name: str, env: dict[str, str], cwd: str | None) -> str:
    """The executable to exec for argv[0], with Go's exec.LookPath rules (as runc)."""
    base = cwd or os.getcwd()
    if "/" in name:
        path = os.path.join(base, name)
        if not os.path.exists(path):
            raise StartError(f'exec: "{name}": stat {name}: no such file or directory')
        if not _executable(path):
            raise StartError(f'exec: "{name}": permission denied')
        return path
    for directory in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(base, directory or ".", name)
        if _executable(path):
            return path
    raise StartError(f'exec: "{name}": executable file not found in $PATH')


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def spawn_container(config: Config, log_fd: int, console=None) -> int:
    """Fork and exec the container; its PID, or StartError with the reason exec failed. With a
    `console` (kubelet/console.py) its stdin, or all of its stdio, are the console's."""
    try:
        mounts = plan.parse(config.mounts)
    except plan.MountError as exc:
        raise StartError(str(exc)) from None
    rd, wr = os.pipe2(os.O_CLOEXEC)
    shim = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: plain system calls until exec, and never unwind into the shim
        os.close(rd)
        try:
            _become_container(config, log_fd, shim, console, mounts)
        except BaseException as exc:  # noqa: BLE001 - the error goes to the shim, always
            os.write(wr, str(exc).encode(errors="replace")[:2000])
        finally:
            os._exit(127)
    os.close(wr)
    with os.fdopen(rd, "rb") as pipe:
        failure = pipe.read()  # EOF at a successful exec (close-on-exec) or the error text
    if failure:
        os.waitpid(pid, 0)
        raise StartError(failure.decode(errors="replace"))
    return pid


def _console(config: Config, log_fd: int):
    from .console import Console  # threads and sockets only for the containers that need them
    try:
        return Console(config.file(ATTACH), log_fd, tty=config.tty, stdin=config.stdin, stdin_once=config.stdin_once)
    except OSError as exc:
        raise StartError(f"cannot allocate the container's {'terminal' if config.tty else 'stdin'}: "
                         f"{exc.strerror or exc}") from None


def _become_container(config: Config, log_fd: int, shim: int, console, mounts: list[plan.Mount]) -> None:
    stdin, output = console.container_fds() if console is not None else (None, None)
    output = log_fd if output is None else output
    become_child(shim, output, output, stdin)  # if the shim dies, nobody would stop us: die with it
    if config.tty:  # the new session's controlling terminal, as runc gives a tty container
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    own = own_mount_namespace(config.sandbox, mounts)
    enter_container(config.sandbox, config.cgroups, config.cwd,
                    mounts=ContainerMounts(mounts, os.path.join(config.dir, ROOTFS)) if own else None)
    executable = look_path(config.argv[0], config.env, config.cwd)  # in the container's view: its volumes too
    try:
        os.execve(executable, config.argv, config.env)
    except OSError as exc:
        raise StartError(f'exec: "{config.argv[0]}": {exc.strerror.lower()}') from None


def own_mount_namespace(sandbox: dict | None, mounts: list) -> bool:
    """Whether a container gets a mount namespace of its own: always in a pod's sandbox (runc
    gives every container one), and whenever it has mounts."""
    return sandbox is not None or bool(mounts)


def enter_container(sandbox: dict | None, cgroups: list[str], cwd: str | None, *,
                    mounts: "ContainerMounts | None" = None, mount_ns_of: dict | None = None) -> None:
    """What a process of a container does between fork() and exec() (the container itself, or
    a command `kubectl exec` runs in it: kubelet/streaming.py): join the container's cgroups,
    so that nothing it ever starts is outside them; join the namespaces of the pod's sandbox
    holder (kubelet/holder.py), checked to be the same process by its start time; then the
    container's own mount namespace: a new one with its `mounts` made in it (the container),
    or the one of the running container `mount_ns_of` {pid, start} (an exec'd command); then its
    working directory (entering a mount namespace moves the working directory to its root).
    StartError with the runtime's words if any step fails. System calls only."""
    for path in cgroups:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
        except OSError as exc:
            raise StartError(f"unable to apply cgroup configuration: failed to write 0 to {path}: "
                             f"{(exc.strerror or str(exc)).lower()}") from None
    if sandbox is not None:
        _enter_sandbox(sandbox)
    if mount_ns_of is not None:
        _join_mount_namespace(mount_ns_of)
    elif mounts is not None:
        mounts.make()
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as exc:
            raise StartError(f'chdir to cwd ("{cwd}") set in config.json failed: '
                             f"{exc.strerror.lower()}") from None


def _join_mount_namespace(container: dict) -> None:
    """setns() into the mount namespace of the running container {pid, start}, opened before
    its identity is checked (as _enter_sandbox does)."""
    pid, start = container.get("pid"), container.get("start")
    try:
        fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        raise StartError(f"container process {pid} is not running") from None
    try:
        if not same_process(pid, start):
            raise StartError(f"container process {pid} is not running")
        setns(fd, CLONE_NEWNS)
    except OSError as exc:
        raise StartError(f"failed to setns into the container's mnt namespace: "
                         f"{os.strerror(exc.errno).lower()}") from None
    finally:
        os.close(fd)


class ContainerMounts:
    """Performs a container's `mounts` in a new mount namespace of its own (the steps are
    kubelet/mounts.py's, which says why a missing target is made in an overlay). `scratch`:
    a directory of the container's (in the kubelet's, made if missing), where a tmpfs holding
    the overlays' upper layers is mounted, in the new namespace only, the first time one is
    needed. `make` runs in the container's process between fork and exec."""

    def __init__(self, mounts: list[plan.Mount], scratch: str):
        self.mounts = mounts
        self.scratch = scratch
        self.scratch_fd: int | None = None  # the tmpfs, reachable whatever is mounted over it
        self.overlays: set[str] = set()  # the directories covered by an overlay of ours
        self.layers = 0

    def make(self) -> None:
        mounts = self.mounts
        sources: list[int] = []
        try:
            try:
                unshare(CLONE_NEWNS)
                mount(None, "/", None, MS_REC | MS_SLAVE)  # nothing mounted here reaches the pod or host
            except OSError as exc:
                raise StartError(f"cannot create the container's mount namespace: "
                                 f"{exc.strerror.lower()}") from None
            # Opened in this namespace (a bind takes its source from the caller's own), before
            # any overlay: one on `/` would show them copy-on-write; and before the namespace
            # files go, so that one a volume names is still bound (a namespace file may be bound
            # from a mount no longer attached).
            for m in mounts:
                sources.append(_open_source(m) if m.type == "bind" else -1)
            for point in nsfs_mounts(_mountinfo()):  # copies would keep other namespaces alive
                _detach(point)
            for m, source in zip(mounts, sources):
                self._perform(m, source)
        except plan.MountError as exc:
            raise StartError(str(exc)) from None
        finally:
            for fd in sources + ([self.scratch_fd] if self.scratch_fd is not None else []):
                if fd >= 0:
                    os.close(fd)

    def _perform(self, m: plan.Mount, source: int) -> None:
        # Symlinks in the target's existing part are resolved here, in the container's view: an
        # overlay then covers the real directory, never a path that leads elsewhere.
        ancestor = plan.nearest_existing(m.target, os.path.lexists)
        target = os.path.join(os.path.realpath(ancestor), plan.relative(m.target, ancestor)).rstrip("/") or "/"
        resolved = plan.Mount(target, f"/proc/self/fd/{source}" if source >= 0 else None, m.type, m.read_only,
                              m.size, m.file)
        try:
            for step in plan.steps(resolved, os.path.lexists, self._overlaid):
                self._do(step)
        except OSError as exc:
            raise m.error((exc.strerror or str(exc)).lower()) from None

    def _overlaid(self, path: str) -> bool:
        return plan.mount_point_of(path, mount_points(_mountinfo())) in self.overlays

    def _do(self, step: plan.Step) -> None:
        if isinstance(step, plan.Overlay):
            self._overlay(step.lower)
        elif isinstance(step, plan.Create):
            os.makedirs(os.path.dirname(step.path), mode=0o755, exist_ok=True)
            if step.file:
                os.close(os.open(step.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
            else:
                os.mkdir(step.path, 0o755)
        elif isinstance(step, plan.Bind):
            mount(step.source, step.target, None, MS_BIND | MS_REC)
        elif isinstance(step, plan.ReadOnly):
            mount(None, step.target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | mount_flags(step.target))
        else:
            mount("tmpfs", step.target, "tmpfs", MS_RDONLY if step.read_only else 0,
                  f"size={step.size}" if step.size else None)

    def _scratch(self) -> str:
        if self.scratch_fd is None:
            os.makedirs(self.scratch, mode=0o700, exist_ok=True)
            mount("tmpfs", self.scratch, "tmpfs", 0, "mode=700")
            mount(None, self.scratch, None, MS_PRIVATE)  # the root overlay moves off it (switch_root)
            self.scratch_fd = os.open(self.scratch, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return f"/proc/self/fd/{self.scratch_fd}"

    def _overlay(self, lower: str) -> None:
        """Cover `lower` with an overlay and bind back the mounts below it (or, for `/`, build
        the overlay elsewhere and make it the root, as switch_root does)."""
        points = mount_points(_mountinfo())
        scratch = self._scratch()
        n, self.layers = self.layers, self.layers + 1
        layer = {name: f"{scratch}/{name}{n}" for name in ("upper", "work", "orig") + ("root",) * (lower == "/")}
        for path in layer.values():
            os.mkdir(path, 0o755)
        below = plan.submounts(lower, points, os.path.realpath(self.scratch))
        mount(lower, layer["orig"], None, MS_BIND | MS_REC)  # what the overlay will hide, still reachable
        on = layer["root"] if lower == "/" else lower
        lower_fd = os.open(lower, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:  # the lower layer by descriptor: no path characters to escape in the options
            mount("overlay", on, "overlay", 0,
                  f"lowerdir=/proc/self/fd/{lower_fd},upperdir={layer['upper']},workdir={layer['work']}")
        finally:
            os.close(lower_fd)
        for point in below:
            rel = plan.relative(point, lower)
            mount(f"{layer['orig']}/{rel}", f"{on}/{rel}", None, MS_BIND | MS_REC)
        umount2(layer["orig"], MNT_DETACH)
        if lower == "/":
            os.chdir(on)
            mount(".", "/", None, MS_MOVE)
            os.chroot(".")
            os.chdir("/")
        self.overlays.add(lower)


def _open_source(m: plan.Mount) -> int:
    """The bind mount's source, opened (O_PATH) and checked to be a file or a directory as
    the mount says; MountError with runc's words if it is missing or the other kind."""
    try:
        fd = os.open(m.source, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        raise m.error(f"stat {m.source}: {(exc.strerror or str(exc)).lower()}") from None
    is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    if is_dir == m.file:
        os.close(fd)
        raise m.error(f"{m.source} is {'a directory' if is_dir else 'not a directory'}, "
                      f"the mount is of a {'file' if m.file else 'directory'}")
    return fd


def _mountinfo() -> str:
    with open("/proc/self/mountinfo") as f:
        return f.read()


def _detach(point: str) -> None:
    try:
        umount2(point, MNT_DETACH)
    except OSError:
        pass  # gone with an earlier one: what matters is that none is left


def _enter_sandbox(sandbox: dict) -> None:
    """setns() into the holder's namespaces (kubemu/nsutil.py SANDBOX, the mount namespace
    last). Every namespace is opened before the holder's identity is checked: once open they
    are the ones of the process the check saw, even if it dies right after."""
    pid, start = sandbox["pid"], sandbox["start"]
    gone = StartError(f'sandbox container "{sandbox.get("id", pid)}" is not running')
    fds: list[tuple[str, int, int]] = []
    try:
        for kind, flag in SANDBOX:
            try:
                fds.append((kind, os.open(f"/proc/{pid}/ns/{kind}", os.O_RDONLY | os.O_CLOEXEC), flag))
            except OSError:
                raise gone from None
        if not same_process(pid, start):
            raise gone
        for kind, fd, flag in fds:
            try:
                setns(fd, flag)
            except OSError as exc:
                raise StartError(f"failed to setns into {kind} namespace: "
                                 f"{os.strerror(exc.errno).lower()}") from None
    finally:
        for _, fd, _ in fds:
            os.close(fd)


# --- the container's processes ------------------------------------------------------------

def _cgroup(procs: str):
    """The cgroup whose cgroup.procs file is `procs` (kubemu/cgroups.py, loaded only for a
    container that has cgroups)."""
    from pathlib import Path

    from kubemu.cgroups import Cgroup
    directory = Path(procs).parent
    return Cgroup(directory, 2 if (directory / "cgroup.controllers").exists() else 1)


def oom_kills(path: str) -> int | None:
    """The OOM kill count in a memory cgroup's memory.oom_control (v1) or memory.events (v2)
    file (the kernel counts a kill in the victim's cgroup); None if it cannot be read."""
    from kubemu.cgroups import oom_kills as parse  # loaded already: a container with a counter has cgroups

    try:
        with open(path) as f:
            return parse(f.read())
    except OSError:
        return None


def oom_killed(before: int | None, after: int | None, sig: int | None) -> bool:
    """Whether the kernel's OOM killer ended the container: killed by SIGKILL, and its cgroup's
    oom_kill count went up while it ran."""
    return sig == signal.SIGKILL and before is not None and after is not None and after > before


def descendants(pid: int) -> list[int]:
    """Every descendant of `pid`, from /proc/<pid>/task/<tid>/children (threads have their
    own children lists)."""
    found: list[int] = []
    stack = [pid]
    while stack:
        parent = stack.pop()
        for child in _children(parent):
            found.append(child)
            stack.append(child)
    return found


def _children(pid: int) -> list[int]:
    children: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return children
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                children.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return children


def rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0  # gone meanwhile


def _signal(pid: int, sig: int, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# --- 4-6. supervising the container -------------------------------------------------------

class Shim:
    def __init__(self, config: Config):
        self.config = config
        self.pid: int | None = None  # the container's PID; also its process group's ID
        self.started_at: float | None = None
        self.kill_at: float | None = None  # monotonic deadline of the graceful stop
        self.next_sample = 0.0
        self.oom_message: str | None = None  # the RSS watch's verdict (no cgroup to ask)
        self.oom_kills_before: int | None = None  # the container cgroup's oom_kill count at start
        self.cgroups = [_cgroup(path) for path in config.cgroups]
        self.exit_written = False
        self.console = None  # kubelet/console.py's Console, for a container with stdin or a tty

    def run(self) -> int:
        set_child_subreaper()
        signal.pthread_sigmask(signal.SIG_BLOCK, WAITED)  # before the fork: no SIGCHLD is lost
        if self.config.lock_fd is not None:
            os.set_inheritable(self.config.lock_fd, False)  # the container must not hold it
        if not self._start():
            return 0
        self._write_state()
        if os.path.exists(self.config.file(STOP)):  # stop() came before our state file did
            self._begin_stop()
        status = self._supervise()
        if self.console is not None:
            self.console.finish(CONSOLE_DRAIN)
        self._write_exit(self._exit_record(status))
        self._drain()
        return 0

    def _start(self) -> bool:
        log_fd = os.open(self.config.file(LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        try:
            self._check_cgroups()
            if self.config.oom_counter:
                self.oom_kills_before = oom_kills(self.config.oom_counter["path"])
            if self.config.stdin or self.config.tty:
                self.console = _console(self.config, log_fd)
            self.pid = spawn_container(self.config, log_fd, self.console)
        except StartError as exc:
            log(self.config, f"start failed: {exc}")
            self._write_exit(self._failure_record(START_ERROR_EXIT, "StartError", str(exc)))
            return False
        finally:
            os.close(log_fd)
        if self.console is not None:
            try:
                self.console.started()
            except OSError as exc:  # the container runs on; only attaching to it is not possible
                log(self.config, f"cannot serve attach on {self.config.file(ATTACH)}: {exc}")
        self.started_at = time.time()
        return True

    def _write_state(self) -> None:
        stat = proc_stat(self.pid)
        write_json(self.config.file(STATE), {
            "shim_pid": os.getpid(), "pid": self.pid, "pgid": self.pid,
            "pid_start": stat[1] if stat else None, "started_at": self.started_at,
            "restart_count": self.config.restart_count, "argv": self.config.argv})
        log(self.config, f"started container pid {self.pid}: {self.config.argv}")

    def _supervise(self) -> int:
        """Wait for signals until the container is reaped; its wait status."""
        while True:
            timeout = self._timeout()
            if timeout is None:
                info = signal.sigwaitinfo(WAITED)
            else:
                info = signal.sigtimedwait(WAITED, max(0.0, timeout))
            if info is not None and info.si_signo == signal.SIGCHLD:
                status = self._reap()
                if status is not None:
                    return status
            elif info is not None:
                self._begin_stop()
            self._on_timer()  # after any wake-up: a stream of SIGCHLDs must not starve it

    def _timeout(self) -> float | None:
        deadlines = [d for d in (self.kill_at, self.next_sample if self.config.memory_limit else None)
                     if d is not None]
        return min(deadlines) - time.monotonic() if deadlines else None

    def _on_timer(self) -> None:
        """Whatever deadline has come: the end of the grace period, the next RSS sample."""
        now = time.monotonic()
        if self.kill_at is not None and now >= self.kill_at:
            log(self.config, "grace period over: SIGKILL")
            self.kill_at = None
            self._kill_all()
        if self.config.memory_limit and now >= self.next_sample:
            self.next_sample = now + MEMORY_INTERVAL
            self._check_memory()

    def _check_memory(self) -> None:
        rss = sum(rss_bytes(pid) for pid in descendants(os.getpid()))
        if rss > self.config.memory_limit and self.oom_message is None:
            self.oom_message = (f"memory limit of {self.config.memory_limit} bytes exceeded "
                                f"(resident {rss} bytes): killed")
            log(self.config, self.oom_message)
            self._kill_all()

    def _begin_stop(self) -> None:
        stop = read_json(self.config.file(STOP)) or {}
        grace = stop.get("grace", self.config.grace)
        grace = float(grace) if isinstance(grace, (int, float)) else self.config.grace
        deadline = time.monotonic() + max(0.0, grace)
        self.kill_at = deadline if self.kill_at is None else min(self.kill_at, deadline)
        log(self.config, f"stopping: SIGTERM, SIGKILL after {grace:g}s")
        _signal(self.pid, signal.SIGTERM, group=True)

    def _check_cgroups(self) -> None:
        """Everything in the container's cgroups dies with it: the shim must not be there."""
        for cg in self.cgroups:
            if os.getpid() in cg.pids():
                raise StartError(f"cgroup {cg.path} holds the container's shim: not a cgroup of the container's own")

    def _kill_all(self) -> None:
        """SIGKILL the container's process group, every descendant that left it, and whatever
        else is in its cgroups (what `kubectl exec` started in it)."""
        _signal(self.pid, signal.SIGKILL, group=True)
        for pid in descendants(os.getpid()):
            _signal(pid, signal.SIGKILL)
        for cg in self.cgroups:
            cg.kill()

    def _reap(self) -> int | None:
        """Reap every exited child; the container's wait status once it is among them."""
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return None
            if info is None or info.si_pid == 0:
                return None
            if info.si_pid == self.pid:
                # Its zombie still holds the group ID, so this cannot hit a recycled group.
                _signal(self.pid, signal.SIGKILL, group=True)
                for cg in self.cgroups:  # what an exec left in it dies with the container
                    cg.kill()
            _, status = os.waitpid(info.si_pid, 0)
            if info.si_pid == self.pid:
                return status

    def _exit_record(self, status: int) -> dict:
        code = os.waitstatus_to_exitcode(status)
        exit_code, sig = (None, -code) if code < 0 else (code, None)
        record = self._failure_record(exit_code, None, None)
        record.update(signal=sig, pid=self.pid)
        counter = self.config.oom_counter
        if self.oom_message and sig == signal.SIGKILL:
            record.update(exit_code=OOM_EXIT, oom_killed=True, reason="OOMKilled", message=self.oom_message)
        elif counter and oom_killed(self.oom_kills_before, oom_kills(counter["path"]), sig):
            record.update(exit_code=OOM_EXIT, oom_killed=True, reason="OOMKilled")
        log(self.config, f"container exited: exit_code={record['exit_code']} signal={sig}")
        return record

    def _failure_record(self, exit_code: int | None, reason: str | None, message: str | None) -> dict:
        return {"restart_count": self.config.restart_count, "shim_pid": os.getpid(), "pid": self.pid,
                "exit_code": exit_code,
                "signal": None, "oom_killed": False, "started_at": self.started_at,
                "finished_at": time.time(), "reason": reason, "message": message}

    def _write_exit(self, record: dict) -> None:
        write_json(self.config.file(EXIT), record)
        self.exit_written = True

    def _drain(self) -> None:
        """Kill and reap every process the container left behind (ours: we are their
        subreaper), and kill what is left in its cgroups (an exec'd command's, which others
        reap), so that nothing of it outlives the shim."""
        deadline = time.monotonic() + DRAIN_TIMEOUT
        while True:
            self._kill_all()
            children = self._reap_rest()
            in_cgroups = [pid for cg in self.cgroups for pid in cg.pids()]
            if not children and not in_cgroups:
                return
            if time.monotonic() > deadline:
                log(self.config, f"processes left after {DRAIN_TIMEOUT:g}s: "
                                 f"{sorted(set(descendants(os.getpid()) + in_cgroups))}")
                return
            signal.sigtimedwait([signal.SIGCHLD], 0.1)  # the others' ends wake nobody: a short poll

    @staticmethod
    def _reap_rest() -> bool:
        """Reap what has exited; whether children remain."""
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True

    def fail(self, exc: BaseException) -> None:
        """An internal error: take the container down and say so in the exit file."""
        if self.pid is not None:
            self._kill_all()
        if not self.exit_written:
            reason = "ContainerStatusUnknown" if self.pid is not None else "StartError"
            code = None if self.pid is not None else START_ERROR_EXIT
            self._write_exit(self._failure_record(code, reason, f"shim error: {exc!r}"))


# --- entry point --------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    try:
        config = Config.parse(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        print(f"usage: python -m kubelet.shim --dir DIR --restart-count N [--grace S] "
              f"[--memory-limit BYTES] [--spec FILE] [--lock-fd FD] [--init-pid PID:START] "
              f"[--pid-fd FD] [-- ARGV...]\nerror: {exc}",
              file=sys.stderr)
        return 2
    try:
        if not detach(config.pid_fd, config.init):
            log(config, f"init {config.init or '(the parent)'} died while the shim was launched: not starting")
            return 1
    except OSError as exc:  # fork() failed (EAGAIN, ENOMEM): nothing was started
        log(config, f"cannot detach: {exc}")
        return 1
    return _run(config)


def _run(config: Config) -> int:
    shim = Shim(config)
    try:
        return shim.run()
    except BaseException as exc:  # noqa: BLE001 - a shim never dies of a traceback
        _report(config, shim, exc)
        return 1


def _report(config: Config, shim: Shim, exc: BaseException) -> None:
    import traceback  # only on this path: keeps the shim's start-up lean

    log(config, "internal error:\n" + "".join(traceback.format_exception(exc)))
    try:
        shim.fail(exc)
    except BaseException as again:  # noqa: BLE001 - the directory may be gone
        log(config, f"cannot report the error: {again!r}")


if __name__ == "__main__":
    sys.exit(main())
