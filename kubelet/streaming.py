"""The kubelet's streaming server: where `kubectl exec` and `kubectl attach` run.

Kubernetes' apiserver hands pods/exec and pods/attach to the kubelet of the pod's node, which has
the container runtime run the command inside the container (CRI Exec, Attach). kubemu's kubelet
serves the same on its own wire endpoint (`--listen`, an ipc:// socket in the node's directory),
to the apiserver alone: the caller must present the identity kube-apiserver-kubelet-client
(kubeadm's apiserver-kubelet-client certificate), checked against `--wire-secrets`.

    exec   {namespace, pod, uid, container, command, stdin, tty, session}   a stream:
           {"started": true} once input is taken, {"fd": 1|2, "data": bytes} ..., then
           {"exit": code} (128 + N for a death by signal N)
    attach {namespace, pod, uid, container, session}   a stream: {"started": true}, then the
           running container's output from now on, {"fd": 1, "data": bytes} ..., ending with it
    stdin  {session, data, close}     input for a session (close: the input has ended); an
                                      attach's goes to the container's stdin or terminal
    resize {session, width, height}   the terminal's size, for a session with a tty

The command runs in the container's context as its shim started it: the environment and working
directory of the running instance's N.spec.json, its PATH to find the program (runc's rules and
messages, kubelet/shim.py look_path). With `tty` it gets a new session whose controlling terminal
is a pseudo-terminal (stdout and stderr are both the terminal, as with runc); without, pipes.
An exec'd process dies with its stream: a cancelled or lost stream hangs it up (SIGHUP to its
process group, SIGKILL after HANGUP_GRACE), and PR_SET_PDEATHSIG kills it if the kubelet dies.
What a container prints goes to its log file (the shim's), so attach follows that file; its
input is what the container's shim hands out for a container with `stdin` or `tty`
(kubelet/console.py): the pipe its stdin reads, or its terminal (which also takes a resize).
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
import termios
from collections.abc import AsyncIterator
from dataclasses import dataclass

from kubemu import wire
from kubemu._wire_auth import KUBELET_CLIENT, ServerAuth
from kubemu.prctl import set_pdeathsig

from . import console
from .runtime import Runtime
from .shim import ATTACH, LOG, SPEC, StartError, instance_file, look_path, read_json

log = logging.getLogger("kubelet.streaming")

MAX_SESSIONS = 64          # exec and attach sessions at once; more are TooManyRequests
CHUNK = 32 * 1024          # bytes of output per stream item
QUEUED_CHUNKS = 8          # output read ahead of the wire per session (then the process blocks)
HANGUP_GRACE = 2.0         # SIGHUP -> SIGKILL for a session whose stream went away
FOLLOW_POLL = 0.1          # seconds between looks at an attached container's log


@dataclass(frozen=True)
class Target:
    """A running container, and what an exec in it starts from."""
    pod_dir: str
    container: str
    restart_count: int
    env: dict[str, str]
    cwd: str | None


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
    return Target(pod_dir, container, state.restart_count, dict(spec.get("env") or {}), spec.get("cwd"))


def exit_code(returncode: int) -> int:
    """A process's exit status as the runtime reports it: 128 + N for a death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


class Session:
    """One exec'd process and its terminal or pipes; for an attach, no process, and the input
    the container's shim handed out (its stdin pipe or terminal)."""

    def __init__(self, proc: asyncio.subprocess.Process | None, master: int | None,
                 stdin: asyncio.StreamWriter | None, outputs: list[tuple[int, asyncio.StreamReader]],
                 transports: tuple[asyncio.BaseTransport, ...] = ()):
        self.proc = proc
        self.master = master
        self.stdin = stdin
        self.outputs = outputs
        self.transports = transports  # closed with the session (a terminal's reader)

    async def write(self, data: bytes) -> None:
        if self.stdin is None or self.stdin.is_closing():
            return
        self.stdin.write(data)
        try:
            await self.stdin.drain()
        except (ConnectionError, OSError):  # the process closed its input: what it was sent is lost
            pass

    def close_input(self) -> None:
        if self.stdin is None or self.stdin.is_closing():
            return
        if self.master is not None:
            self.stdin.write(b"\x04")  # a terminal's end of input is ^D, its device stays open
        else:
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

    def hang_up(self) -> None:
        """The stream went away before the command ended: hang up its process group (what it
        started too, even when the command itself is gone), as a closed terminal does. The
        group's ID stays reserved while any of its members lives, so this reaches no one else."""
        if self.proc is None:
            return
        _killpg(self.proc.pid, signal.SIGHUP)
        asyncio.get_running_loop().call_later(HANGUP_GRACE, _killpg, self.proc.pid, signal.SIGKILL)

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


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _child_setup(tty: bool):
    """What the exec'd process does between fork and exec: two system calls, no imports and no
    lock another thread of the kubelet could hold (the reason preexec_fn is unsafe in general)."""
    def setup() -> None:
        set_pdeathsig(signal.SIGKILL)
        if tty:  # the session leader (start_new_session) takes its terminal as controlling tty
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    return setup


async def start_session(target: Target, command: list[str], stdin: bool, tty: bool) -> Session:
    """Start `command` in the target's context; StartError with runc's message if it cannot."""
    if not command or not all(isinstance(a, str) and a and "\0" not in a for a in command):
        raise StartError("exec: no command" if not command else "exec: invalid argument")
    executable = look_path(command[0], target.env, target.cwd)
    loop = asyncio.get_running_loop()
    master = slave = None
    if tty:
        master, slave = pty.openpty()
        io = {"stdin": slave, "stdout": slave, "stderr": slave}
    else:
        pipe = asyncio.subprocess.PIPE
        io = {"stdin": pipe if stdin else asyncio.subprocess.DEVNULL, "stdout": pipe, "stderr": pipe}
    try:
        proc = await asyncio.create_subprocess_exec(
            executable, *command[1:], executable=executable, env=target.env, cwd=target.cwd or None,
            start_new_session=True, preexec_fn=_child_setup(tty), close_fds=True, **io)
    except OSError as exc:
        if master is not None:
            os.close(master)
        if exc.filename == target.cwd and target.cwd:
            raise StartError(f'chdir to cwd ("{target.cwd}") set in config.json failed: '
                             f"{(exc.strerror or '').lower()}") from None
        raise StartError(f'exec: "{command[0]}": {(exc.strerror or str(exc)).lower()}') from None
    finally:
        if slave is not None:
            os.close(slave)
    if master is None:
        outputs = [(1, proc.stdout), (2, proc.stderr)]
        return Session(proc, None, proc.stdin if stdin else None, outputs)
    reader = asyncio.StreamReader(limit=CHUNK)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                                os.fdopen(os.dup(master), "rb", 0))
    return Session(proc, master, await _writer(os.dup(master)) if stdin else None, [(1, reader)], (transport,))


async def _writer(fd: int) -> asyncio.StreamWriter:
    """A StreamWriter that owns `fd` (a pipe's write end or a terminal's master)."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(fd, "wb", 0))
    return asyncio.StreamWriter(transport, protocol, None, loop)


class StreamingServer:
    """The wire methods above, over a Runtime."""

    def __init__(self, runtime: Runtime, endpoint: str, secrets_dir: str | None):
        self.runtime = runtime
        self.sessions: dict[str, Session] = {}
        auth = ServerAuth(secrets_dir, _only_the_apiserver) if secrets_dir else None
        self.server = wire.Server(endpoint, {"exec": self.exec, "attach": self.attach, "stdin": self.stdin,
                                             "resize": self.resize}, name="kubelet", auth=auth)

    async def start(self) -> None:
        await self.server.start()

    async def close(self) -> None:
        await self.server.close()

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
        log.info("exec in %s/%s (%s): %s", namespace, pod, container, command[0])
        ended = False
        try:
            yield {"started": True}
            async for fd, data in s.output():
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

    async def attach(self, namespace: str, pod: str, uid: str, container: str,
                     session: str) -> AsyncIterator[dict]:
        self._admit(session)
        target = find_target(self.runtime, namespace, pod, uid, container)
        cdir = self.runtime.container_dir(target.pod_dir, container)
        kind, fd = await asyncio.to_thread(_attach_input, instance_file(cdir, target.restart_count, ATTACH))
        try:
            log_file = open(instance_file(cdir, target.restart_count, LOG), "rb")
        except FileNotFoundError:
            if fd is not None:
                os.close(fd)
            raise wire.NotFound(f'container not found ("{container}")') from None
        if kind == console.TTY:  # the terminal's master: input, and the size
            s = Session(None, fd, await _writer(os.dup(fd)), [])
        else:
            s = Session(None, None, await _writer(fd) if fd is not None else None, [])
        self.sessions[session] = s
        try:
            with log_file:
                log_file.seek(0, os.SEEK_END)
                yield {"started": True}
                while True:
                    data = log_file.read(CHUNK)
                    if data:
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

    def _session(self, session: str) -> Session:
        s = self.sessions.get(session)
        if s is None:
            raise wire.NotFound(f"no exec session {session!r}")
        return s


def _attach_input(path: str) -> tuple[bytes, int | None]:
    """What the container's shim hands out for input; none for a container without stdin or tty."""
    try:
        return console.attach(path)
    except OSError:
        return console.CLOSED, None


def _only_the_apiserver(identity: str, method: str, params: dict) -> None:
    if identity != KUBELET_CLIENT:
        raise wire.Forbidden(f'User "{identity}" cannot use the kubelet\'s {method!r}: only the apiserver '
                             f"({KUBELET_CLIENT}) may")
