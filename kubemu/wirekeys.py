"""CURVE key files of the wire beyond loopback, in ZeroMQ's certificate format (ZPL, as czmq's
zcert and pyzmq's `zmq.auth` write and read them):

    <state>/pki/wire-curve/             (0700)
      server.key                        the wire server's public key: what a client must know
                                        beforehand (a joining node gets it with the join)
      server.key_secret                 the server's key pair (0600)
      clients/<identity>.key            a client's public key: servers know that key as <identity>
      clients/<identity>.key_secret     that client's key pair, on the machine it runs on (0600)

Every file is made once (mode 0600, written whole, then linked into place, so processes that
race agree on one key pair) and kept afterwards. `KnownKeys` is `CurveAuth`'s default
identify hook: the public keys of ``clients/``, re-read when that directory changes.
"""
from __future__ import annotations

import errno
import logging
import os
import threading
import time
from pathlib import Path
from typing import NamedTuple

from ._wire_auth import CurveCredentials, check_curve_key, check_identity, create_private

log = logging.getLogger("kubemu.wire")

SERVER = "server"
PUBLIC_SUFFIX, SECRET_SUFFIX = ".key", ".key_secret"
# A directory's mtime moves in coarse ticks (the kernel's jiffy): a file added in the tick of a
# scan leaves the mtime as the scan saw it, so a scan is trusted only once its mtime is this old.
SETTLED_NS = 1_000_000_000

_BANNER = ("#   ZeroMQ CURVE {kind} Certificate, made by kubemu\n"
           "#   {advice}\n\n")
_PUBLIC_ADVICE = "Give it to whoever must know this key; check its contents after the exchange."
_SECRET_ADVICE = "DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions."


class KeyPair(NamedTuple):
    public: bytes  # Z85, 40 bytes
    secret: bytes


def curve_dir(state_root: str | os.PathLike) -> Path:
    """Where a cluster's CURVE keys live: ``<state>/pki/wire-curve``."""
    return Path(state_root) / "pki" / "wire-curve"


def clients_dir(directory: str | os.PathLike) -> Path:
    return Path(directory) / "clients"


def _certificate(public: bytes, secret: bytes | None = None) -> str:
    kind, advice = ("**Secret**", _SECRET_ADVICE) if secret else ("Public", _PUBLIC_ADVICE)
    text = _BANNER.format(kind=kind, advice=advice) + f'metadata\ncurve\n    public-key = "{public.decode()}"\n'
    return text + (f'    secret-key = "{secret.decode()}"\n' if secret else "")


def _read(path: Path) -> tuple[bytes, bytes | None]:
    """(public, secret or None) from a certificate; ValueError (one clear message) if unusable."""
    from zmq.auth import load_certificate

    try:
        public, secret = load_certificate(path)
    except OSError as exc:
        if exc.errno in (None, errno.ENOENT):  # pyzmq's own OSError, without errno: it is missing
            raise ValueError(f"no CURVE key file {path}") from None
        raise ValueError(f"cannot read CURVE key file {path}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"CURVE key file {path}: no public-key line") from None
    public = check_curve_key(public, f"CURVE key file {path}: public-key")
    if secret is not None:
        secret = check_curve_key(secret, f"CURVE key file {path}: secret-key")
    return public, secret


def load_public(path: str | os.PathLike) -> bytes:
    """The public key a ``.key`` (or ``.key_secret``) file holds."""
    return _read(Path(path))[0]


def load_keypair(path: str | os.PathLike) -> KeyPair:
    """The key pair a ``.key_secret`` file holds, its halves checked to belong together."""
    import zmq

    path = Path(path)
    public, secret = _read(path)
    if secret is None:
        raise ValueError(f"CURVE key file {path}: no secret-key line (a public key only)")
    if zmq.curve_public(secret) != public:
        raise ValueError(f"CURVE key file {path}: its public-key is not the secret-key's")
    return KeyPair(public, secret)


def ensure_keypair(directory: str | os.PathLike, name: str) -> KeyPair:
    """`name`'s key pair in `directory` (``name.key_secret``, and ``name.key`` with its public
    half), made if it is not there yet; an existing one is kept."""
    import zmq

    directory = Path(directory)
    secret_file = directory / (name + SECRET_SUFFIX)
    create_private(secret_file, lambda: _certificate(*zmq.curve_keypair()))
    pair = load_keypair(secret_file)
    create_private(directory / (name + PUBLIC_SUFFIX), lambda: _certificate(pair.public))
    return pair


def ensure_server_keys(state_root: str | os.PathLike) -> KeyPair:
    return ensure_keypair(curve_dir(state_root), SERVER)


def ensure_client_keys(state_root: str | os.PathLike, identity: str) -> KeyPair:
    """A client's key pair, its public key known to the servers as `identity` from then on."""
    return ensure_keypair(clients_dir(curve_dir(state_root)), check_identity(identity))


def client_credentials(state_root: str | os.PathLike, identity: str) -> CurveCredentials:
    """What `identity` presents to a CURVE server of this state directory (both files must be
    there: made by `ensure_server_keys` and `ensure_client_keys`)."""
    return directory_credentials(curve_dir(state_root), identity)


def directory_credentials(directory: str | os.PathLike, identity: str) -> CurveCredentials:
    """`client_credentials` of a CURVE key directory (a kubelet's --wire-curve-dir)."""
    directory = Path(directory)
    pair = load_keypair(clients_dir(directory) / (check_identity(identity) + SECRET_SUFFIX))
    return CurveCredentials(load_public(directory / (SERVER + PUBLIC_SUFFIX)), pair.public, pair.secret)


def write_server_public(state_root: str | os.PathLike, public: bytes | str) -> None:
    """Record the server's public key in a state directory that has not its key pair (a node
    joined from another machine: the key came with the join). An existing file is replaced."""
    from .statedir import write_atomic

    public = check_curve_key(public, "the server's CURVE public key")
    directory = curve_dir(state_root)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(directory / (SERVER + PUBLIC_SUFFIX), _certificate(public).encode())


class KnownKeys:
    """`CurveAuth`'s identify hook over a directory of ``<identity>.key`` files: the identity of
    a public key (Z85), None for a key none of them holds (or that two identities share).

    Called on the ZAP thread at each handshake: the directory is read again only when it
    changed since the last read (a client added later is known without a restart)."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None  # (inode, mtime_ns) of a read that settled
        self._read_at: tuple[int, int] | None = None  # of the last read: its problems are logged once
        self._by_key: dict[str, str] = {}

    def __call__(self, key: str) -> str | None:
        with self._lock:
            try:
                st = os.stat(self.directory)
            except FileNotFoundError:
                return None
            stamp = (st.st_ino, st.st_mtime_ns)
            if stamp != self._seen:
                self._by_key = self._read(quiet=stamp == self._read_at)
                self._read_at = stamp
                settled = time.time_ns() - st.st_mtime_ns > SETTLED_NS
                self._seen = stamp if settled else None
            return self._by_key.get(key)

    def _read(self, quiet: bool) -> dict[str, str]:
        warn = log.debug if quiet else log.warning
        by_key: dict[str, str] = {}
        shared: set[str] = set()
        for path in sorted(self.directory.glob("*" + PUBLIC_SUFFIX)):
            try:
                identity = check_identity(path.name[:-len(PUBLIC_SUFFIX)])
                key = load_public(path).decode()
            except ValueError as err:
                warn("ignored CURVE key file %s: %s", path, err)
                continue
            if key in by_key:
                shared.add(key)
            by_key[key] = identity
        for key in shared:
            warn("CURVE key %s is in more than one file of %s: refused for every one of them", key, self.directory)
            del by_key[key]
        return by_key
