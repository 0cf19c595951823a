"""The kubelet's streaming server: where `kubectl exec` and `kubectl attach` run.

Kubernetes' apiserver hands pods/exec and pods/attach to the kubelet of the pod's node, which has
the container runtime run the command inside the container (CRI Exec, Attach). kubemu's kubelet
serves the same on its own wire endpoint (`--listen`, an ipc:// socket in the node's directory),
to the apiserver alone: the caller must present the identity kube-apiserver-kubelet-client
(kubeadm's apiserver-kubelet-client certificate), checked against `--wire-secrets`.

    exec   {namespace, pod, uid, container, command, stdin, tty, session}   a stream:
           {"started": true} once input is taken, {"fd": 1|2, "data": bytes} ..., then
           {"exit": code} (128 + N for a death by signal N)
    attach {namespace, pod, uid, container, stdin, session}   a stream: {"started": true}, then
           the running container's output from now on, {"fd": 1, "data": bytes} ..., ending with it
    stdin  {session, data, close}     input for a session (close: the input has ended); an
                                      attach's goes to the container's stdin or terminal
    resize {session, width, height}   the terminal's size, for a session with a tty
    ack    {session, size}            the caller has passed on `size` bytes of output (flow control)
    stats  {}                         the node's, its pods' and containers' CPU and memory
                                      (kubelet/stats.py); the cluster admin may ask too, as
                                      the kubelet lets cluster-admin read nodes/stats
    portforward {namespace, pod, uid, port, session}   a stream: {"started": true} once connected
           to localhost:<port> in the pod's network namespace (kubelet/portforward.py), then
           {"data": bytes} ... until the pod closes its side; what cannot be connected fails
           the call with the line kubelet writes on kubectl's error stream
    portforward_input {session, data, close}   bytes for a forward (close: the client sends no more)

The command runs in the container's context as its shim started it: the environment and working
directory of the running instance's N.spec.json, its PATH to find the program (runc's rules and
messages, kubelet/shim.py look_path), and, before it execs, the container's cgroups and its pod
sandbox's namespaces (kubelet/shim.py enter_container), as runc puts an exec'd process. With
`tty` it gets a new session whose controlling terminal is a pseudo-terminal (stdout and stderr
are both the terminal, as with runc); without, pipes.

An exec'd command lives as long as its stream and its container: a cancelled or lost stream, or
the container instance ending, hangs up its process group (SIGHUP, SIGKILL after HANGUP_GRACE;
at once when the kubelet stops), and PR_SET_PDEATHSIG kills it if the kubelet dies. One that
ended on its own leaves what it started running, as in a container, until the container ends:
its shim kills what is left in the container's cgroups (without cgroups it lives on until
`kubemu down`). Output is flow-controlled end to end: at most WINDOW bytes of a session are
unacknowledged, then the command blocks on its pipe or terminal, as it would behind a slow
`kubectl exec ... | consumer`.

What a container prints goes to its log file (the shim's), so attach follows that file; its
input, for an attach with stdin to a container with `stdin` or `tty`, is what the container's
shim hands out (kubelet/console.py): the pipe its stdin reads, or its terminal (which also takes
a resize). Closing the input closes that pipe (so a `stdinOnce` container reads EOF); a terminal
is left open, as containerd leaves a tty's stdin.
"""
from __future__ import annotations

import asyncio
import errno
import fcntl
import logging
import os
import pty
import signal
import struct
import subprocess
import termios
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from kubemu import wire
from kubemu._wire_auth import ADMIN, KUBELET_CLIENT, ServerAuth
from kubemu.child import default_signals, proc_stat
from kubemu.prctl import set_pdeathsig

from . import console, portforward
from .runtime import Runtime
from .shim import (ATTACH, LOG, SPEC, StartError, enter_container, instance_file, look_path, own_mount_namespace,
                   read_json)

log = logging.getLogger("kubelet.streaming")

MAX_SESSIONS = 64          # exec and attach sessions at once; more are TooManyRequests
MAX_FORWARDS = 256         # port-forwarded connections at once (a browser opens several per page)
CHUNK = 32 * 1024          # bytes of output per stream item
QUEUED_CHUNKS = 8          # output read ahead of the wire per session (then the process blocks)
WINDOW = 1024 * 1024       # output bytes a session may have unacknowledged
HANGUP_GRACE = 2.0         # SIGHUP -> SIGKILL for a session whose stream or container went away
FOLLOW_POLL = 0.1          # seconds between looks at an attached container's log

Instance = tuple[str, str, int]  # (pod dir, container, restart count)


@dataclass(frozen=True)
class Target:
    """A running container instance, and what an exec in it starts from."""
    pod_dir: str
    container: str
    restart_count: int
    env: dict[str, str]
    cwd: str | None
    sandbox: dict | None = None  # the pod's sandbox holder, whose namespaces the command joins
    cgroups: tuple[str, ...] = ()  # the container's cgroup.procs files: the command joins them too
    mount_ns_of: dict | None = None  # {pid, start} of the container whose own mount namespace it joins

    @property
    def instance(self) -> Instance:
        return self.pod_dir, self.container, self.restart_count


def find_target(runtime: Runtime, namespace: str, pod: str, uid: str, container: str) -> Target:
    """The running container a request names; NotFound / BadRequest with the runtime's words."""
    for part in (namespace, pod, uid, container):
        if not part or "/" in part or part in (".", "..") or "\0" in part:
            raise wire.BadRequest(f"invalid pod or container name {part!r}")
    pod_dir = runtime.pod_dir(f"{namespace}_{pod}_{uid}")
    state = runtime.state(pod_dir, container)
    if state is None:
        raise wire.NotFound(f'container not found ("{container}")')
    if not runtime.is_running(state):
        raise wire.BadRequest(f'container "{container}" is not running')
    spec = read_json(instance_file(runtime.container_dir(pod_dir, container), state.restart_count, SPEC)) or {}
    own = own_mount_namespace(spec.get("sandbox"), spec.get("mounts") or [])
    return Target(pod_dir, container, state.restart_count, dict(spec.get("env") or {}), spec.get("cwd"),
                  spec.get("sandbox"), tuple(spec.get("cgroups") or ()),
                  {"pid": state.pid, "start": state.pid_start} if own else None)


def exit_code(returncode: int) -> int:
    """A process's exit status as the runtime reports it: 128 + N for a death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class Credit:
    """A session's output window: `take` waits while WINDOW bytes are unacknowledged."""

    def __init__(self, window: int = WINDOW):
        self.available = window
        self._more = asyncio.Event()

    async def take(self, n: int) -> None:
        while self.available <= 0:
            self._more.clear()
            await self._more.wait()
        self.available -= n

    def give(self, n: int) -> None:
        self.available += n
        self._more.set()


class Group:
    """An exec'd command's process group, told from a later group that reuses its number: the
    leader's start time is remembered, and while any member lives the number stays taken."""

    def __init__(self, pid: int):
        self.pgid = pid
        stat = proc_stat(pid)
        self.start = stat[1] if stat else None

    def signal(self, sig: int) -> None:
        stat = proc_stat(self.pgid)
        if stat is not None and stat[1] != self.start:
            return  # a new process holds the number: the group is long gone
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class Session:
    """One exec'd command and its terminal or pipes; for an attach, no command, and the input
    the container's shim handed out (its stdin pipe or terminal), if asked for."""

    def __init__(self, instance: Instance, proc: asyncio.subprocess.Process | None = None,
                 master: int | None = None, stdin: asyncio.StreamWriter | None = None,
                 outputs: tuple[tuple[int, asyncio.StreamReader], ...] = (),
                 transports: tuple[asyncio.BaseTransport, ...] = ()):
        self.instance = instance
        self.proc = proc
        self.group = Group(proc.pid) if proc is not None else None
        self.master = master
        self.stdin = stdin
        self.outputs = outputs
        self.transports = transports  # closed with the session (a terminal's reader)
        self.credit = Credit()
        self.input_closed = False

    async def write(self, data: bytes) -> None:
        if self.stdin is None or self.input_closed or self.stdin.is_closing():
            return
        self.stdin.write(data)
        try:
            await self.stdin.drain()
        except (ConnectionError, OSError):  # the process closed its input: what it was sent is lost
            pass

    def close_input(self) -> None:
        """The client's input has ended: a pipe is closed (EOF); a terminal stays open."""
        self.input_closed = True
        if self.stdin is not None and self.master is None:
            self.stdin.close()

    def resize(self, width: int, height: int) -> None:
        if self.master is not None:
            fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    async def output(self) -> AsyncIterator[tuple[int, bytes]]:
        """(fd, data) until every output has ended. As in Kubernetes, what the command leaves
        running in the background with its stdout, stderr or terminal open keeps them open
        (kubernetes/kubernetes#44371): redirect it (`cmd >/dev/null 2>&1 &`) to end at once."""
        queue: asyncio.Queue = asyncio.Queue(QUEUED_CHUNKS)
        readers = [asyncio.ensure_future(_read_into(queue, fd, r)) for fd, r in self.outputs]
        try:
            open_ = len(readers)
            while open_:
                item = await queue.get()
                if item is None:
                    open_ -= 1
                else:
                    yield item
        finally:
            for task in readers:
                task.cancel()

    def hang_up(self, grace: float = HANGUP_GRACE) -> None:
        """Hang up the command's process group (what it started too, even once the command
        itself is gone), as a closed terminal does; SIGKILL after `grace` (0: at once)."""
        if self.group is None:
            return
        if grace <= 0:
            self.group.signal(signal.SIGKILL)
            return
        self.group.signal(signal.SIGHUP)
        asyncio.get_running_loop().call_later(grace, self.group.signal, signal.SIGKILL)

    def close(self) -> None:
        if self.stdin is not None:
            self.stdin.close()
        for transport in self.transports:
            transport.close()
        if self.master is not None:
            os.close(self.master)
            self.master = None


async def _read_into(queue: asyncio.Queue, fd: int, reader: asyncio.StreamReader) -> None:
    try:
        while data := await reader.read(CHUNK):
            await queue.put((fd, data))
    except OSError as exc:
        if exc.errno != errno.EIO:  # EIO: every holder of the terminal has closed it, its EOF
            log.info("exec output %d: %s", fd, exc)
    await queue.put(None)


def _child_setup(tty: bool, target: Target, report_fd: int):
    """What the exec'd process does between fork and exec: system calls only, no imports and no
    lock another thread of the kubelet could hold (the reason preexec_fn is unsafe in general).
    Its signals start at their defaults, as runc starts a process (a kubelet run under nohup
    would otherwise hand on SIGHUP ignored, and a hang-up would not reach the command). Then it
    enters the container as the container's own process did (kubelet/shim.py enter_container:
    its cgroups, so it dies with the container, its pod's namespaces, the container's own mount
    namespace, its cwd); a failure's
    message goes to `report_fd` (subprocess only says that preexec_fn raised)."""
    def setup() -> None:
        set_pdeathsig(signal.SIGKILL)
        default_signals()
        if tty:  # the session leader (start_new_session) takes its terminal as controlling tty
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        try:
            enter_container(target.sandbox, list(target.cgroups), target.cwd, mount_ns_of=target.mount_ns_of)
        except StartError as exc:
            os.write(report_fd, str(exc).encode(errors="replace")[:2000])
            raise
    return setup


async def start_session(target: Target, command: list[str], stdin: bool, tty: bool) -> Session:
    """Start `command` in the target's context; StartError with runc's message if it cannot.
    Cancelled half-way, it leaves no process and no descriptor behind."""
    if not command or not all(isinstance(a, str) and a and "\0" not in a for a in command):
        raise StartError("exec: no command" if not command else "exec: invalid argument")
    executable = look_path(command[0], target.env, target.cwd)
    master = slave = None
    if tty:
        master, slave = pty.openpty()
        io = {"stdin": slave, "stdout": slave, "stderr": slave}
    else:
        pipe = asyncio.subprocess.PIPE
        io = {"stdin": pipe if stdin else asyncio.subprocess.DEVNULL, "stdout": pipe, "stderr": pipe}
    report_r, report_w = os.pipe2(os.O_CLOEXEC)
    try:
        proc = await asyncio.create_subprocess_exec(
            executable, *command[1:], executable=executable, env=target.env, start_new_session=True,
            preexec_fn=_child_setup(tty, target, report_w), close_fds=True, **io)
    except BaseException as exc:
        if master is not None:
            os.close(master)
        if isinstance(exc, subprocess.SubprocessError):  # entering the container failed: the child said why
            raise StartError(_child_report(report_r) or "exec: cannot enter the container") from None
        if isinstance(exc, OSError):
            raise StartError(f'exec: "{command[0]}": {(exc.strerror or str(exc)).lower()}') from None
        raise
    finally:
        os.close(report_w)
        os.close(report_r)
        if slave is not None:
            os.close(slave)
    if master is None:
        return Session(target.instance, proc, None, proc.stdin if stdin else None,
                       ((1, proc.stdout), (2, proc.stderr)))
    session = Session(target.instance, proc, master)
    try:
        reader = asyncio.StreamReader(limit=CHUNK)
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(master), "rb", 0))
        session.transports, session.outputs = (transport,), ((1, reader),)
        if stdin:
            session.stdin = await _writer(os.dup(master))
    except BaseException:
        session.hang_up(0)
        session.close()
        raise
    return session


def _child_report(fd: int) -> str:
    """What a child that failed before exec wrote (it has exited: it is all there already)."""
    os.set_blocking(fd, False)
    try:
        return os.read(fd, 4096).decode(errors="replace")
    except BlockingIOError:
        return ""


async def _writer(fd: int) -> asyncio.StreamWriter:
    """A StreamWriter that owns `fd` (a pipe's write end or a terminal's master)."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                            os.fdopen(fd, "wb", 0))
    except BaseException:
        os.close(fd)
        raise
    return asyncio.StreamWriter(transport, protocol, None, loop)


async def _attach_input(path: str) -> tuple[bytes, int | None]:
    """What the container's shim hands out for input (none for a container without stdin or
    tty); the descriptor is closed if the caller is cancelled before it has it."""
    task = asyncio.ensure_future(asyncio.to_thread(_ask_shim, path))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(lambda t: t.cancelled() or t.result()[1] is None or os.close(t.result()[1]))
        raise


def _ask_shim(path: str) -> tuple[bytes, int | None]:
    try:
        return console.attach(path)
    except OSError:
        return console.CLOSED, None


class StreamingServer:
    """The wire methods above, over a Runtime."""

    def __init__(self, runtime: Runtime, endpoint: str, secrets_dir: str | None,
                 stats: Callable[[], dict] | None = None):
        self.runtime = runtime
        self.sessions: dict[str, Session] = {}
        self.forwards: dict[str, portforward.Forward] = {}
        if secrets_dir is None:
            log.warning("exec/attach on %s take anyone who can reach the socket: no --wire-secrets", endpoint)
        auth = ServerAuth(secrets_dir, _only_the_apiserver) if secrets_dir else None
        self.server = wire.Server(endpoint, {"exec": self.exec, "attach": self.attach, "stdin": self.stdin,
                                             "resize": self.resize, "ack": self.ack,
                                             "portforward": self.portforward,
                                             "portforward_input": self.portforward_input,
                                             **({"stats": stats} if stats is not None else {})},
                                  name="kubelet", auth=auth)

    async def start(self) -> None:
        await self.server.start()

    async def close(self) -> None:
        for s in self.sessions.values():
            s.hang_up(0)  # no timer outlives the kubelet's stop
        await self.server.close()

    def container_ended(self, pod_dir: str, container: str, restart_count: int) -> None:
        """A container instance has ended: the commands exec'd in it are hung up."""
        for s in self.sessions.values():
            if s.instance == (pod_dir, container, restart_count):
                s.hang_up()

    def _admit(self, session: str) -> None:
        if not session or len(session) > 128:
            raise wire.BadRequest("session: expected a non-empty id of at most 128 characters")
        if session in self.sessions:
            raise wire.Conflict(f"session {session!r} is already open")
        if len(self.sessions) >= MAX_SESSIONS:
            raise wire.Unavailable(f"this kubelet already serves {MAX_SESSIONS} exec/attach sessions",
                                   {"reason": "TooManyRequests"})

    async def exec(self, namespace: str, pod: str, uid: str, container: str, command: list[str],
                   session: str, stdin: bool = False, tty: bool = False) -> AsyncIterator[dict]:
        self._admit(session)
        target = find_target(self.runtime, namespace, pod, uid, container)
        try:
            s = await start_session(target, command, stdin, tty)
        except StartError as err:
            raise wire.Internal(f"OCI runtime exec failed: exec failed: unable to start container process: "
                                f"{err}: unknown", {"reason": "StartError"}) from None
        self.sessions[session] = s
        log.info("exec in %s/%s (%s): %r", namespace, pod, container, command[0])
        ended = False
        try:
            yield {"started": True}
            async for fd, data in s.output():
                await s.credit.take(len(data))
                yield {"fd": fd, "data": data}
            code = await s.proc.wait() if s.proc.returncode is None else s.proc.returncode
            ended = True  # what it left running stays, as in a container
            yield {"exit": exit_code(code)}
        finally:
            if self.sessions.get(session) is s:
                del self.sessions[session]
            if not ended:
                s.hang_up()
            s.close()

    async def attach(self, namespace: str, pod: str, uid: str, container: str, session: str,
                     stdin: bool = False) -> AsyncIterator[dict]:
        self._admit(session)
        target = find_target(self.runtime, namespace, pod, uid, container)
        cdir = self.runtime.container_dir(target.pod_dir, container)
        s = Session(target.instance)
        try:
            # only an attach with stdin takes the input: a stdinOnce container's is handed out once
            kind, fd = await _attach_input(instance_file(cdir, target.restart_count, ATTACH)) if stdin \
                else (console.CLOSED, None)
            if kind == console.TTY:  # the terminal's master: input, and the size
                s.master = fd
                s.stdin = await _writer(os.dup(fd))
            elif fd is not None:
                s.stdin = await _writer(fd)
            log_file = open(instance_file(cdir, target.restart_count, LOG), "rb")
        except FileNotFoundError:
            s.close()
            raise wire.NotFound(f'container not found ("{container}")') from None
        except BaseException:
            s.close()
            raise
        self.sessions[session] = s
        try:
            with log_file:
                log_file.seek(0, os.SEEK_END)
                yield {"started": True}
                while True:
                    data = log_file.read(CHUNK)
                    if data:
                        await s.credit.take(len(data))
                        yield {"fd": 1, "data": data}
                        continue
                    state = self.runtime.state(target.pod_dir, container, target.restart_count)
                    if state is None or not self.runtime.is_running(state):
                        if data := log_file.read():  # its last words, written before it ended
                            yield {"fd": 1, "data": data}
                        return
                    await asyncio.sleep(FOLLOW_POLL)
        finally:
            if self.sessions.get(session) is s:
                del self.sessions[session]
            s.close()

    async def stdin(self, session: str, data: bytes = b"", close: bool = False) -> None:
        s = self._session(session)
        if data:
            await s.write(data)
        if close:
            s.close_input()

    def resize(self, session: str, width: int, height: int) -> None:
        if not (0 < width < 65536 and 0 < height < 65536):
            raise wire.BadRequest("width and height: expected 1-65535")
        self._session(session).resize(width, height)

    def ack(self, session: str, size: int) -> None:
        if size <= 0:
            raise wire.BadRequest("size: expected a positive count of bytes")
        s = self.forwards.get(session) or self._session(session)
        s.credit.give(size)

    async def portforward(self, namespace: str, pod: str, uid: str, port: int, session: str) -> AsyncIterator[dict]:
        if not session or len(session) > 128:
            raise wire.BadRequest("session: expected a non-empty id of at most 128 characters")
        if session in self.forwards:
            raise wire.Conflict(f"session {session!r} is already open")
        if len(self.forwards) >= MAX_FORWARDS:
            raise wire.Unavailable(f"this kubelet already serves {MAX_FORWARDS} forwarded connections",
                                   {"reason": "TooManyRequests"})
        if not 0 < port < 65536:
            raise wire.BadRequest(f"port {port!r} must be > 0 and < 65536")
        for part in (namespace, pod, uid):
            if not part or "/" in part or part in (".", "..") or "\0" in part:
                raise wire.BadRequest(f"invalid pod name {part!r}")
        pod_dir = self.runtime.pod_dir(f"{namespace}_{pod}_{uid}")
        if not os.path.isdir(pod_dir):
            raise wire.NotFound(f'pod not found ("{pod}_{namespace}")')
        sandbox = os.path.basename(pod_dir)
        try:
            sandbox, netns = portforward.sandbox_netns(pod_dir)
            sock = await portforward.connect(netns, sandbox, port)
        except portforward.ForwardError as err:
            raise wire.Internal(portforward.forward_error(port, sandbox, err)) from None
        f = self.forwards[session] = portforward.Forward(sock, Credit())
        try:
            yield {"started": True}
            async for data in f.output():
                yield {"data": data}
        finally:
            if self.forwards.get(session) is f:
                del self.forwards[session]
            f.close()

    async def portforward_input(self, session: str, data: bytes = b"", close: bool = False) -> None:
        f = self.forwards.get(session)
        if f is None:
            raise wire.NotFound(f"no port-forward session {session!r}")
        if data:
            await f.write(data)
        if close:
            f.close_input()

    def _session(self, session: str) -> Session:
        s = self.sessions.get(session)
        if s is None:
            raise wire.NotFound(f"no exec session {session!r}")
        return s


def _only_the_apiserver(identity: str, method: str, params: dict) -> None:
    if identity != KUBELET_CLIENT and not (method == "stats" and identity == ADMIN):
        raise wire.Forbidden(f'User "{identity}" cannot use the kubelet\'s {method!r}: only the apiserver '
                             f"({KUBELET_CLIENT}) may")
