"""A pod's sandbox holder: the pause container's role. It owns the pod's network, mount, UTS
and IPC namespaces, and every container of the pod joins them (kubelet/shim.py
enter_container), so the containers of one pod share `localhost`, IPC and the hostname. Each
container then makes a mount namespace of its own from the pod's, for its volumes.

    python -m kubelet.holder --hostname NAME --pending FILE [--cgroup PROCS]... [--init-pid PID:START_TICKS]

The kubelet calls `start()`, which launches that command the way it launches a shim
(kubelet/runtime.py): the launched process forks the real holder and exits; the holder calls
setsid(), is re-parented to init and dies with it (PR_SET_PDEATHSIG), so it outlives a
kubelet restart like a shim does (kubelet/shim.py detach). The launcher reports the holder's
PID on fd 4. The holder then
  1. writes itself into the given cgroup.procs files (the pod's sandbox cgroup, below the
     node's: it stays one of the node's processes);
  2. unshare()s new net, mnt, uts and ipc namespaces;
  3. makes `/` recursively a slave mount (runc's default rootfsPropagation): nothing
     mounted in the pod propagates to the host, what the host mounts and unmounts under a
     shared mount still reaches the pod;
  4. lazily unmounts every namespace file bind mount it inherited (`ip netns add` makes
     them; the other clusters' fabrics, other tools' namespaces): a copy in the pod's mount
     namespace would keep those namespaces alive after their owners delete them;
  5. sets the pod's hostname, and writes {"pid", "start"} to FILE (`<pod dir>/sandbox.pending`):
     a holder whose kubelet died before it wrote the sandbox down is found there and killed
     (`reap_pending`), never left holding an unrecorded sandbox;
  6. says "ready START_TICKS" on fd 3 only now, after unsharing (before, /proc/<pid>/ns/net
     is the host's: a CNI plugin given it would configure the host; the kubelet hands the
     plugins the namespace as a descriptor checked to be this holder's, kubemu.nsutil.open_ns),
     or "error MESSAGE";
     if nobody reads the pipe any more (the kubelet gave up waiting), it exits instead;
  7. execs `sleep infinity` with argv[0] `kubemu-pause` (1.7 MB resident rather than a
     Python's 14 MB; the namespaces survive exec), or a Python pause loop without `sleep`.
There is no PID namespace, so the holder reaps nothing: the containers' shims do.

A holder is named by its PID and start time in clock ticks (/proc/<pid>/stat), never by its
PID alone: `alive` and `kill` never touch a later process that was given the same PID.
"""
from __future__ import annotations

import os
import select
import signal
import sys
import time
from dataclasses import dataclass

from kubemu.child import RESET_SIGNALS, default_signals, high_fd, proc_stat, same_process
from kubemu.nsutil import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUTS, MNT_DETACH, MS_REC, MS_SLAVE,
                           mount, ns_inode, nsfs_mounts, sethostname, umount2, unshare)

from .shim import detach, read_json, write_json

READY_FD = 3  # where the holder says "ready START_TICKS" or "error MESSAGE"
PID_FD = 4  # where the launcher reports the holder's PID
START_TIMEOUT = 30.0  # seconds for a holder to say it is ready
HOSTNAME_MAX = 63  # the kubelet's cap for a pod's hostname (the kernel takes 64 bytes)
LOG = "holder.log"  # in the pod directory: what the holder could not say on its pipe
PENDING = "sandbox.pending"  # in the pod directory: the holder's {"pid", "start"} until the kubelet records it
PAUSE_ARGV0 = "kubemu-pause"
PAUSE_LOOP = "import signal\nwhile True: signal.pause()"  # without `sleep`: the same, in Python


class SandboxError(Exception):
    """A sandbox holder could not be started; the message is one line."""


@dataclass(frozen=True)
class HolderInfo:
    pid: int
    start_ticks: int  # its start time in clock ticks since boot: with the PID, its identity
    netns_inode: int  # differs from the kubelet's own network namespace (checked)


def pod_hostname(pod: dict) -> str:
    """The hostname of a pod's sandbox, as the kubelet sets it: `spec.hostname` if set (the
    apiserver checked it is a DNS label), else the pod's name; cut to 63 characters without a
    trailing '-' or '.'. `spec.subdomain` changes the pod's domain (its /etc/hosts), never its
    hostname."""
    name = (pod.get("metadata") or {}).get("name") or ""
    hostname = (pod.get("spec") or {}).get("hostname") or name
    if len(hostname) <= HOSTNAME_MAX:
        return hostname
    return hostname[:HOSTNAME_MAX].rstrip("-.")  # a name starts with a letter or digit: never empty


# --- the kubelet's side ---------------------------------------------------------------------

def start(pod_dir: str, hostname: str, cgroup_procs: list[str], *, env: dict[str, str] | None = None,
          timeout: float = START_TIMEOUT) -> HolderInfo:
    """Launch a pod's sandbox holder and wait until it holds its namespaces (blocking: call it
    off the event loop). SandboxError, with the holder's reason, if it cannot; no holder is
    left running then. `env`: the launcher's environment (default: ours, without what init
    gave us for ourselves)."""
    from .runtime import supervised_env  # the kubelet's, loaded already

    if env is None:
        env = supervised_env()
    argv = [sys.executable, "-m", "kubelet.holder", "--hostname", hostname,
            "--pending", os.path.join(os.path.abspath(pod_dir), PENDING)]
    for procs in cgroup_procs:
        argv += ["--cgroup", procs]
    init = os.getppid()  # the kubelet's parent: the holder dies with it, as shims do
    stat = proc_stat(init)
    if stat is not None:
        argv += ["--init-pid", f"{init}:{stat[1]}"]
    readers: list[int] = []
    writers: list[int] = []
    try:
        for _ in range(2):  # the ready pipe, then the PID pipe
            r, w = os.pipe2(os.O_CLOEXEC)
            readers.append(r)
            writers.append(high_fd(w))
        writers.append(high_fd(os.open(os.path.join(pod_dir, LOG),
                                       os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)))
        ready_w, pid_w, log_fd = writers
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0), (os.POSIX_SPAWN_DUP2, log_fd, 1),
                   (os.POSIX_SPAWN_DUP2, log_fd, 2), (os.POSIX_SPAWN_DUP2, ready_w, READY_FD),
                   (os.POSIX_SPAWN_DUP2, pid_w, PID_FD)]
        launcher = os.posix_spawn(sys.executable, argv, env, file_actions=actions, setpgroup=0,
                                  setsigdef=RESET_SIGNALS, setsigmask=())
    except OSError as exc:
        _close(readers)
        raise SandboxError(f"cannot start the sandbox holder: {exc}") from None
    finally:
        _close(writers)
    ready_r, pid_r = readers
    try:
        return _wait_ready(launcher, pid_r, ready_r, os.path.join(pod_dir, LOG), timeout)
    except SandboxError:
        forget_pending(pod_dir)  # no holder is left to name
        raise
    finally:
        _close(readers)


def reap_pending(pod_dir: str, recorded: tuple[int, int] | None) -> None:
    """Kill the holder `<pod dir>/sandbox.pending` names unless it is the one the kubelet
    recorded (`recorded`: its PID and start ticks), and forget the file. Such a holder was
    started for a kubelet that died before it wrote the sandbox down: no ADD ran for it (the
    kubelet records a holder before ADD), so there is no network to DELete."""
    data = read_json(os.path.join(pod_dir, PENDING))
    if data is not None:
        try:
            pending = (int(data["pid"]), int(data["start"]))
        except (KeyError, TypeError, ValueError):
            pending = None
        if pending is not None and pending != recorded:
            kill(*pending)
    forget_pending(pod_dir)


def forget_pending(pod_dir: str) -> None:
    try:
        os.unlink(os.path.join(pod_dir, PENDING))
    except FileNotFoundError:
        pass


def _wait_ready(launcher: int, pid_r: int, ready_r: int, log_path: str, timeout: float) -> HolderInfo:
    deadline = time.monotonic() + timeout
    try:
        reported = _read_to_eof(pid_r, deadline)  # EOF: the launcher has exited
    except TimeoutError:  # it hung before it forked: it is our unreaped child, its PID still its own
        os.kill(launcher, signal.SIGKILL)
        _reap(launcher)
        raise SandboxError(f"the sandbox holder's launcher did not start it within {timeout:g}s") from None
    status = _reap(launcher)
    pid = int(reported) if reported.strip().isdigit() else None
    if pid is None:  # it refused its arguments, or could not fork: no holder, and no writer left
        words = _read_to_eof(ready_r, deadline).split(maxsplit=1)
        if words[:1] == ["error"] and len(words) == 2:
            raise SandboxError(words[1].strip())
        raise SandboxError(f"the sandbox holder's launcher failed ({_said(status)}); see {log_path}")
    pidfd = _pidfd(pid)  # from here on, a kill reaches this holder and no later process
    try:
        info = _check_ready(pid, ready_r, deadline, log_path, timeout)
    except SandboxError:
        _end(pidfd, deadline)  # no holder is left behind a failed start
        raise
    finally:
        if pidfd is not None:
            os.close(pidfd)
    return info


def _check_ready(pid: int, ready_r: int, deadline: float, log_path: str, timeout: float) -> HolderInfo:
    """The holder's word, checked: it is still the process that said it, and it is not in our
    own network namespace."""
    try:
        words = _read_to_eof(ready_r, deadline).split(maxsplit=1)
    except TimeoutError:
        raise SandboxError(f"the sandbox holder (pid {pid}) did not get ready within {timeout:g}s") from None
    if words[:1] == ["error"] and len(words) == 2:
        raise SandboxError(words[1].strip())
    if words[:1] != ["ready"] or len(words) != 2 or not words[1].strip().isdigit():
        raise SandboxError(f"the sandbox holder (pid {pid}) exited before it was ready; see {log_path}")
    start_ticks = int(words[1])
    try:
        holder_net, own_net = ns_inode(pid, "net"), ns_inode(os.getpid(), "net")
    except OSError:
        holder_net = own_net = None
    if holder_net is None or not same_process(pid, start_ticks):
        raise SandboxError(f"the sandbox holder (pid {pid}) exited right after it was ready")
    if holder_net == own_net:  # CNI would configure our own network: never
        raise SandboxError(f"the sandbox holder (pid {pid}) is in the kubelet's own network namespace: refusing it")
    return HolderInfo(pid, start_ticks, holder_net)


def _read_to_eof(fd: int, deadline: float) -> str:
    """Everything written to a pipe until its writers have closed it; TimeoutError at the
    deadline."""
    data = b""
    while True:
        if not _wait_readable(fd, deadline - time.monotonic()):
            raise TimeoutError
        chunk = os.read(fd, 4096)
        if not chunk:
            return data.decode(errors="replace")
        data += chunk


def _wait_readable(fd: int, seconds: float) -> bool:
    """poll(2), not select(2): a kubelet with many pods holds descriptors above FD_SETSIZE."""
    if seconds <= 0:
        return False
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(seconds * 1000))


def _reap(pid: int) -> int | None:
    """The launcher's wait status (it exits as soon as it has forked the holder)."""
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None  # someone reaped every child (a waitpid(-1) elsewhere in the kubelet)


def _said(status: int | None) -> str:
    if status is None:
        return "its exit status is unknown"
    code = os.waitstatus_to_exitcode(status)
    return f"exit status {code}" if code >= 0 else f"killed by signal {-code}"


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None  # already gone (and reaped by init): nothing to kill


def _kill(pidfd: int | None) -> None:
    if pidfd is None:
        return
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except OSError:
        pass


def _end(pidfd: int | None, deadline: float) -> None:
    """SIGKILL the process and wait for its end (a pidfd turns readable when it has exited)."""
    if pidfd is None:
        return
    _kill(pidfd)
    _wait_readable(pidfd, max(1.0, deadline - time.monotonic()))


def _close(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def alive(pid: int, start_ticks: int) -> bool:
    """Whether the holder runs: not a zombie, and not a later process given its PID."""
    return same_process(pid, start_ticks)


def kill(pid: int, start_ticks: int) -> None:
    """SIGKILL the holder if it still runs (through a pidfd opened before its identity is
    checked, so a PID reused meanwhile is never hit). Its namespaces go with it once the
    containers that joined them are gone. Returns without waiting for its end."""
    pidfd = _pidfd(pid)
    try:
        if alive(pid, start_ticks):
            _kill(pidfd)
    finally:
        if pidfd is not None:
            os.close(pidfd)


# --- the holder ----------------------------------------------------------------------------

def become_holder(hostname: str, cgroup_procs: list[str]) -> None:
    """Steps 1-5 of the module docstring, in the detached holder. SandboxError if one fails."""
    for procs in cgroup_procs:
        try:
            with open(procs, "w") as f:
                f.write("0")
        except OSError as exc:
            raise SandboxError(f"cannot join the cgroup {procs}: {exc.strerror or exc}") from None
    os.chdir("/")  # pin no directory of the host's
    try:
        unshare(CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC)
    except OSError as exc:
        raise SandboxError(f"cannot create the pod's namespaces: {exc.strerror} (it takes CAP_SYS_ADMIN)") from None
    try:
        mount(None, "/", None, MS_REC | MS_SLAVE)
    except OSError as exc:
        raise SandboxError(f"cannot make / a slave mount in the pod's mount namespace: {exc.strerror}") from None
    with open("/proc/self/mountinfo") as f:
        foreign = nsfs_mounts(f.read())
    for point in foreign:
        try:
            umount2(point, MNT_DETACH)
        except OSError as exc:  # gone with an earlier one: what matters is that none is left
            print(f"holder {os.getpid()}: cannot unmount {point}: {exc.strerror}", file=sys.stderr, flush=True)
    try:
        sethostname(hostname)
    except OSError as exc:
        raise SandboxError(f"cannot set the pod's hostname {hostname!r}: {exc.strerror}") from None


def pause() -> None:
    """Become the pause process: `sleep infinity`, or a Python loop doing the same."""
    default_signals()  # sleep must die of a SIGTERM, like the pause container
    try:
        os.execvp("sleep", [PAUSE_ARGV0, "infinity"])
    except OSError:
        os.execv(sys.executable, [PAUSE_ARGV0, "-c", PAUSE_LOOP])


def _parse(args: list[str]) -> tuple[str, str, list[str], str | None]:
    hostname, pending, cgroup_procs, init = None, None, [], None
    i = 0
    while i < len(args):
        if i + 1 >= len(args) or args[i] not in ("--hostname", "--pending", "--cgroup", "--init-pid"):
            raise SandboxError(f"unknown option or missing value: {args[i]}")
        value = args[i + 1]
        if args[i] == "--hostname":
            hostname = value
        elif args[i] == "--pending":
            pending = value
        elif args[i] == "--cgroup":
            cgroup_procs.append(value)
        else:
            init = value
        i += 2
    if not hostname or len(hostname.encode()) > HOSTNAME_MAX + 1:
        raise SandboxError(f"--hostname: expected 1-{HOSTNAME_MAX + 1} bytes, got {hostname!r}")
    if not pending or not os.path.isabs(pending):
        raise SandboxError(f"--pending: expected an absolute path, got {pending!r}")
    return hostname, pending, cgroup_procs, init


def _say(message: str) -> bool:
    """One line on the ready pipe, then the holder's copy is closed; False if nobody reads it
    any more (EPIPE: the kubelet gave up waiting, and would never know this holder)."""
    try:
        os.write(READY_FD, (message.replace("\n", " ") + "\n").encode(errors="replace"))
        return True
    except OSError:  # EPIPE, or no fd 3 at all (started by hand)
        return False
    finally:
        _close([READY_FD])


def main(argv: list[str] | None = None) -> int:
    """Never raises: every failure is one line for the kubelet on the ready pipe."""
    try:
        hostname, pending, cgroup_procs, init = _parse(sys.argv[1:] if argv is None else argv)
        if not detach(PID_FD, init):
            _say(f"error init {init or '(the parent)'} died while the sandbox holder was launched")
            return 1
        become_holder(hostname, cgroup_procs)
        stat = proc_stat(os.getpid())
        start_ticks = stat[1] if stat else 0
        try:
            write_json(pending, {"pid": os.getpid(), "start": start_ticks})
        except OSError as exc:
            raise SandboxError(f"cannot write {pending}: {exc.strerror}") from None
    except SandboxError as exc:
        _say(f"error {exc}")
        return 1
    except BaseException as exc:  # noqa: BLE001 - no traceback: one line, for the kubelet
        _say(f"error the sandbox holder failed: {exc!r}")
        return 1
    if not _say(f"ready {start_ticks}"):
        return 1  # a holder nobody waits for would hold the pod's namespaces for nobody
    pause()
    return 1  # not reached: pause() execs


if __name__ == "__main__":
    sys.exit(main())
