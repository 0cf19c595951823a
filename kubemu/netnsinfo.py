"""Whether this process has a network namespace of its own, and so where a server in it listens.

A program kubemu runs as a container (the image catalog's httpd, the cluster DNS) listens on
every address when it is in a pod's own network namespace, as the real images do: the namespace
holds only the pod's loopback and its eth0. In the machine's network (a hostNetwork pod, or
kubemu without pod networks) it must bind loopback only, never every interface of the machine.
"""
from __future__ import annotations

import os

EVERY_ADDRESS = "0.0.0.0"
LOOPBACK = "127.0.0.1"


def in_own_network_namespace() -> bool:
    """True if some ancestor (the container's shim, at the latest) is in another network
    namespace than ours: a wrapper such as `sh -c` shares ours, so the walk goes on up. False
    wherever that cannot be told."""
    try:
        ours = os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False
    pid = os.getppid()
    while pid > 1:
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino != ours:
                return True
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])  # its parent
        except (OSError, ValueError, IndexError):
            return False
    return False


def listen_address() -> str:
    """Every address in a network namespace of the process's own, loopback otherwise."""
    return EVERY_ADDRESS if in_own_network_namespace() else LOOPBACK
