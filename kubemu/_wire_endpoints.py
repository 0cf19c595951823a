"""Wire endpoints: building ipc:// and tcp:// addresses, splitting a list of them, checking what a
server binds and a client connects to, and clearing the socket file a dead server left behind."""
from __future__ import annotations

import errno
import ipaddress
import logging
import os
import socket
import stat
from collections.abc import Iterable
from typing import NamedTuple

log = logging.getLogger("kubemu.wire")

SUN_PATH_MAX = 107  # sizeof(sockaddr_un.sun_path) - 1 for the NUL on Linux


def _check_ipc_path(path: str) -> None:
    size = len(os.fsencode(path))
    if size > SUN_PATH_MAX:
        raise ValueError(f"ipc socket path {path!r} is {size} bytes long; Linux allows at most "
                         f"{SUN_PATH_MAX} (sun_path): use a shorter state directory")


def ipc_endpoint(directory: str | os.PathLike, name: str) -> str:
    """``ipc://<abs directory>/<name>``, creating the directory with mode 0700 (and tightening
    it to 0700 if it exists and belongs to us)."""
    if not name or "/" in name or "\0" in name:
        raise ValueError(f"bad ipc socket name {name!r}")
    directory = os.path.abspath(os.fspath(directory))
    path = os.path.join(directory, name)
    _check_ipc_path(path)
    if not _private_dir(directory):
        raise ValueError(f"{directory} is a shared directory; put ipc sockets in a private subdirectory")
    return "ipc://" + path


def _private_dir(directory: str) -> bool:
    """Make `directory` (mode 0700), or tighten it to 0700 if it is ours; False for a shared
    sticky directory like /tmp, which chmod would break for everyone else."""
    os.makedirs(directory, mode=0o700, exist_ok=True)
    st = os.stat(directory)
    if st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & 0o077:
        if st.st_mode & stat.S_ISVTX:
            return False
        os.chmod(directory, 0o700)
    return True


def split_endpoints(endpoints: str | Iterable[str], what: str = "wire") -> list[str]:
    """A comma-separated string or an iterable of endpoints as a list, in the order given,
    blanks and repeats dropped; ValueError when none is left."""
    if isinstance(endpoints, str):
        endpoints = endpoints.split(",")
    found: list[str] = []
    for ep in endpoints:
        ep = ep.strip()
        if ep and ep not in found:
            found.append(ep)
    if not found:
        raise ValueError(f"no {what} endpoints given")
    return found


def tcp_endpoint(port: int = 0, host: str = "127.0.0.1") -> str:
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"bad tcp port {port!r}")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"tcp://{host}:{port}"


class _BindSpec(NamedTuple):
    endpoint: str  # what to hand to zmq bind
    ipc_path: str | None  # a filesystem socket to manage
    ipv6: bool


def _parse_bind_endpoint(endpoint: str, encrypted: bool) -> _BindSpec:
    """What to bind for `endpoint`; ValueError for a bad one, and for a tcp address beyond
    loopback unless the server is `encrypted` (CURVE): a PLAIN secret must not cross a network."""
    if endpoint.startswith("ipc://"):
        path = endpoint[len("ipc://"):]
        if not path:
            raise ValueError(f"empty ipc path in {endpoint!r}")
        _check_ipc_path(path)
        return _BindSpec(endpoint, None if path.startswith("@") else path, False)
    if endpoint.startswith("inproc://"):
        return _BindSpec(endpoint, None, False)
    if not endpoint.startswith("tcp://"):
        raise ValueError(f"unsupported endpoint {endpoint!r}: use ipc://, tcp:// or inproc://")
    host, sep, port = endpoint[len("tcp://"):].rpartition(":")
    if not sep or not host or not (port == "*" or port.isdigit()):
        raise ValueError(f"bad tcp endpoint {endpoint!r}: expected tcp://HOST:PORT")
    if port == "0":
        port = "*"  # libzmq's spelling of "any free port"
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if bare == "localhost":
        bare, host = "127.0.0.1", "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(bare).is_loopback
    except ValueError:
        loopback = False  # "*", an interface name or a host name: could be anything
    if not loopback and not encrypted:
        raise ValueError(f"refusing to listen on {endpoint!r} without CURVE: not a loopback address "
                         f"(beyond loopback a wire server requires auth=CurveAuth(...))")
    return _BindSpec(f"tcp://{host}:{port}", None, ":" in bare)


def _check_connect_endpoint(endpoint: str) -> bool:
    """Validate a client endpoint; returns whether it needs ZMQ_IPV6."""
    if endpoint.startswith("ipc://"):
        _check_ipc_path(endpoint[len("ipc://"):])
        return False
    if endpoint.startswith("inproc://"):
        return False
    if endpoint.startswith("tcp://"):
        return endpoint.startswith("tcp://[")
    raise ValueError(f"unsupported endpoint {endpoint!r}: use ipc://, tcp:// or inproc://")


def _clear_stale_ipc(path: str) -> None:
    """Remove the socket file a dead server left behind; refuse to steal a live one's."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise ValueError(f"{path} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        os.unlink(path)
        log.info("removed stale ipc socket %s", path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass  # e.g. a full backlog: someone is there
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, f"{path} is in use by a live server")
