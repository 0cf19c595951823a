"""The client side of sd_notify(3), as every kubemu program uses it. No dependencies, so
importing it costs nothing at start-up. Abstract socket names ('@...') are supported."""
from __future__ import annotations

import os
import socket


def notify(state: str) -> bool:
    """Send `state` (e.g. "READY=1\\nSTATUS=serving") to $NOTIFY_SOCKET. False if not supervised."""
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return False
    if path.startswith("@"):
        path = "\0" + path[1:]
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
        try:
            sock.sendto(state.encode(), path)
        except OSError:
            return False
    return True


def watchdog_interval() -> float | None:
    """How often to send WATCHDOG=1 (half of WatchdogSec, as sd_watchdog_enabled(3) advises),
    or None when no watchdog is armed for this process."""
    usec = os.environ.get("WATCHDOG_USEC")
    pid = os.environ.get("WATCHDOG_PID")
    if not usec or not usec.isdigit() or int(usec) == 0:
        return None
    if pid and pid.isdigit() and int(pid) != os.getpid():
        return None
    return int(usec) / 2e6
