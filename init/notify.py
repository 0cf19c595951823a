"""The receiving end of sd_notify(3): an AF_UNIX datagram socket that learns each sender's PID
from SCM_CREDENTIALS, exactly as systemd's NOTIFY_SOCKET does, so unmodified sd_notify
clients (libsystemd, python-systemd, sdnotify, `systemd-notify`) work against it."""
from __future__ import annotations

import logging
import os
import socket
import struct

log = logging.getLogger("init.notify")

_UCRED = struct.Struct("iII")  # struct ucred {pid_t pid; uid_t uid; gid_t gid;}
MAX_DATAGRAM = 4096  # systemd's NOTIFY_BUFFER_MAX is PIPE_BUF


def parse_notify(data: bytes) -> dict[str, str]:
    """Newline-separated KEY=VALUE assignments; lines without '=' are ignored, as systemd does."""
    fields: dict[str, str] = {}
    for line in data.decode("utf-8", "replace").split("\n"):
        key, sep, value = line.partition("=")
        if sep and key:
            fields[key] = value
    return fields


class NotifySocket:
    def __init__(self, path: str):
        self.path = path
        if os.path.exists(path):
            os.unlink(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK)
        self.sock.bind(path)
        os.chmod(path, 0o600)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)

    def fileno(self) -> int:
        return self.sock.fileno()

    def receive(self) -> list[tuple[int, dict[str, str]]]:
        """Drain every queued datagram: [(sender pid, fields)]. Datagrams without credentials
        are dropped with a log line (systemd refuses them too)."""
        out = []
        while True:
            try:
                data, ancillary, _flags, _addr = self.sock.recvmsg(
                    MAX_DATAGRAM, socket.CMSG_SPACE(_UCRED.size) + socket.CMSG_SPACE(16 * 4))
            except (BlockingIOError, InterruptedError):
                return out
            pid = None
            for level, kind, cdata in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(cdata) >= _UCRED.size:
                    pid = _UCRED.unpack_from(cdata)[0]
                elif level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    # FDSTORE=1 and friends pass fds: we keep none, so close them.
                    for fd in struct.unpack(f"{len(cdata) // 4}i", cdata[: len(cdata) // 4 * 4]):
                        os.close(fd)
            if pid is None:
                log.warning("notification datagram without sender credentials, ignored")
                continue
            out.append((pid, parse_notify(data)))

    def close(self) -> None:
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
