"""A container's stdin and terminal: what its shim holds so that `kubectl attach` can reach them.

A container whose spec says `stdin: true` reads a pipe whose write end its shim keeps; one with
`tty: true` gets a pseudo-terminal as stdin, stdout, stderr and controlling terminal, whose
master end the shim keeps and copies to the container's log (so `kubectl logs` shows what the
terminal showed). Neither: stdin is /dev/null.

The shim serves those ends on a unix socket, <restartCount>.attach in the container directory:
each connection gets one byte and, with SCM_RIGHTS, the file descriptor to write the
container's input to ("t": the terminal's master, which also takes a resize; "s": the stdin
pipe), then the connection is closed. `stdinOnce` (Kubernetes': stdin is closed after the first
attach) is the shim closing its own copy of the pipe once it has handed it out: when that
attacher closes its copy, the container reads EOF; later attachers get "-" and no descriptor.

A socket path is limited to 107 bytes and pod directories are deep, so both ends name the
socket through /proc/self/fd/<directory fd>/.
"""
from __future__ import annotations

import os
import select
import socket
import threading

TTY, STDIN, CLOSED = b"t", b"s", b"-"
RELAY_CHUNK = 64 * 1024


def _short_path(path: str) -> tuple[int, str]:
    """(an O_PATH fd on the directory, a short name of `path` through it); close the fd after."""
    dfd = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    return dfd, f"/proc/self/fd/{dfd}/{os.path.basename(path)}"


class Console:
    """The shim's side. `container_fds()` before the fork; `started()` once the container runs
    (closes the container's ends here, starts the threads); `finish()` once it has exited."""

    def __init__(self, socket_path: str, log_fd: int, *, tty: bool, stdin: bool, stdin_once: bool):
        self.socket_path = socket_path
        self.tty = tty
        self.stdin_once = stdin_once
        self.log_fd = os.dup(log_fd)  # ours: the shim closes its own after the start
        os.set_inheritable(self.log_fd, False)
        self.mine: int | None = None       # the master, or the pipe's write end
        self.theirs: int | None = None     # the slave, or the pipe's read end
        if tty:
            self.mine, self.theirs = os.openpty()
        elif stdin:
            self.theirs, self.mine = os.pipe()
        self.handed = False
        self.lock = threading.Lock()
        self.listener: socket.socket | None = None
        self.relay: threading.Thread | None = None  # the terminal -> log copier

    def container_fds(self) -> tuple[int | None, int | None]:
        """(stdin, stdout+stderr) for the container: None means /dev/null and the log."""
        if self.tty:
            return self.theirs, self.theirs
        return self.theirs, None

    def started(self) -> None:
        """OSError if the socket cannot be served; the terminal is copied to the log regardless."""
        if self.theirs is not None:
            os.close(self.theirs)
            self.theirs = None
        if self.tty:
            self.relay = self._thread(self._relay)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        dfd, name = _short_path(self.socket_path)
        try:
            _unlink(self.socket_path)
            self.listener.bind(name)
        finally:
            os.close(dfd)
        self.listener.listen(8)
        self._thread(self._serve)

    def finish(self, timeout: float) -> None:
        """The container has exited: let the terminal's last output reach the log (within
        `timeout`), stop serving, remove the socket."""
        if self.relay is not None:
            self.relay.join(timeout)
        if self.listener is not None:
            try:
                self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept()
            except OSError:
                pass
            self.listener.close()
        _unlink(self.socket_path)

    @staticmethod
    def _thread(target) -> threading.Thread:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        return thread

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                try:
                    self._hand_out(conn)
                except OSError:
                    pass  # the attacher went away: nothing was handed out to it

    def _hand_out(self, conn: socket.socket) -> None:
        with self.lock:
            fd = self.mine
            if fd is None:
                conn.sendall(CLOSED)
                return
            socket.send_fds(conn, [TTY if self.tty else STDIN], [fd])
            if self.stdin_once and not self.tty:
                os.close(fd)
                self.mine = None

    def _relay(self) -> None:
        poller = select.poll()
        poller.register(self.mine, select.POLLIN)
        while True:
            try:
                data = os.read(self.mine, RELAY_CHUNK)
            except BlockingIOError:  # an attacher's event loop made the shared master non-blocking
                poller.poll()
                continue
            except OSError:  # EIO: every process holding the terminal has closed it
                return
            if not data:
                return
            os.write(self.log_fd, data)


def attach(socket_path: str) -> tuple[bytes, int | None]:
    """The attacher's side: (TTY | STDIN | CLOSED, the fd to write input to, or None). OSError
    when no shim serves there (a container without stdin or tty, or one that has ended)."""
    dfd, name = _short_path(socket_path)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as conn:
            conn.settimeout(5.0)  # a shim that stopped answering must not hold the kubelet's thread
            conn.connect(name)
            kind, fds, _flags, _addr = socket.recv_fds(conn, 1, 1)
    finally:
        os.close(dfd)
    fd = fds[0] if fds else None
    if kind not in (TTY, STDIN) or fd is None:
        if fd is not None:
            os.close(fd)
        return CLOSED, None
    os.set_inheritable(fd, False)
    return kind, fd


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass

