"""Who is on the other end of a wire connection: per-identity secrets, ZeroMQ's PLAIN mechanism
and a ZAP responder that checks them.

Credentials: one file per identity, ``<dir>/<identity>.secret`` (mode 0600, the directory
0700; kubemu keeps them in ``<state>/pki/wire/``), holding a random secret. The identity IS
the user name the servers see (``kubernetes-admin``, ``system:kube-scheduler``,
``system:node:<node>``, ``system:store:<replica>``). A client presents (identity, secret) with
PLAIN; a server started with `ServerAuth` requires PLAIN, and its ZAP responder accepts a
connection only when the secret matches the file of that identity in its directory (read at
each handshake, so identities added later, a node joining, are known without a restart).
libzmq then stamps every message of that connection with the identity ("User-Id" metadata),
which the Server hands to handlers as `peer_identity`: nothing a client sends can change it.

Why PLAIN and not CURVE on loopback and ipc: the handshake authenticates and each message then
costs nothing more (the ipc sockets sit in 0700 directories and tcp binds only loopback, so the
secret crosses no network). CURVE encrypts every message: on this machine a 256 KiB round trip
went from 0.21 ms to 2.4 ms of CPU, while list replies, watch batches and Raft appends are that
size.

Beyond loopback, CURVE (`CurveAuth`, ZeroMQ's CurveZMQ: the server's key pair, and each client's
key pair whose public half the server knows): a wire server refuses to listen on any other
address without it, since there a secret would cross the network in the clear. The server's
ZAP responder hands the client's public key to an `identify(key) -> identity | None` hook
(`kubemu.wirekeys.KnownKeys` reads ``<state>/pki/wire-curve/clients/<identity>.key``; the
apiserver can map keys issued at join time through its own), and the identity it names is the
connection's User-Id, exactly as with PLAIN. A client presents `CurveCredentials`: the server's
public key, which it must know beforehand (a pinned key, as a joining node gets with its join),
and its own key pair.

One ZAP responder serves one ZeroMQ context (libzmq asks ``inproc://zeromq.zap.01`` of the
server socket's context): a thread, shared by every authenticating Server of that context
(each has its own ZAP domain), started with the first and stopped with the last. Its replies
are quick (one small file read), and a thread keeps it independent of which event loop runs
which Server. A refused handshake is one log line, at most one per identity every 10 s and 1/s
overall (`ratelimit.LogThrottle`): an unknown CURVE key is logged once, then at most every 10 s.
"""
from __future__ import annotations

import argparse
import hmac
import itertools
import logging
import os
import secrets as _secrets
import stat
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, NamedTuple

from .api.identity import ADMIN, CONTROLLER_MANAGER, NODE_PREFIX, SCHEDULER
from .ratelimit import LogThrottle

if TYPE_CHECKING:
    import zmq  # imported when a server needs it: a kubelet reads its credentials before READY=1

log = logging.getLogger("kubemu.wire")

SUFFIX = ".secret"
ZAP_ENDPOINT = "inproc://zeromq.zap.01"  # fixed by RFC 27
MAX_IDENTITY = 253  # PLAIN allows 255 bytes; a DNS subdomain is at most 253
CURVE_KEY_CHARS = 40  # a 32-byte CURVE key in Z85

# the identities kubemu's own clients present are Kubernetes user names: ADMIN, SCHEDULER,
# CONTROLLER_MANAGER, node_identity(node) (kubemu.api.identity); and these three
STORE_PREFIX = "system:store:"
APISERVER = "kube-apiserver-etcd-client"  # the apiserver as the store's client (kubeadm's name)
KUBELET_CLIENT = "kube-apiserver-kubelet-client"  # the apiserver as the kubelets' client (kubeadm's)


def node_identity(node: str) -> str:
    return NODE_PREFIX + node


def store_identity(replica: str) -> str:
    return STORE_PREFIX + replica


class Credentials(NamedTuple):
    user: str
    secret: str


class CurveCredentials(NamedTuple):
    """What a client presents with CURVE (Z85 keys, 40 bytes each): the server's public key,
    known beforehand, and the client's own key pair."""
    server_key: bytes
    public: bytes
    secret: bytes


# ------------------------------------------------------------------------------ secrets

def check_identity(identity: str) -> str:
    """The identity if it can name a secret file and travel in PLAIN; else ValueError."""
    if (not isinstance(identity, str) or not identity or len(identity.encode()) > MAX_IDENTITY
            or identity.startswith(".") or any(c in identity for c in "/\0") or not identity.isprintable()
            or any(c.isspace() for c in identity)):
        raise ValueError(f"bad wire identity {identity!r}: 1-{MAX_IDENTITY} printable characters, "
                         f"no '/', no spaces, not starting with '.'")
    return identity


def check_curve_key(key: bytes | str, what: str) -> bytes:
    """`key` as the 40 bytes of a Z85-encoded CURVE key; ValueError (one clear message) if it
    is not one."""
    from zmq.utils import z85

    try:
        raw = key.encode("ascii") if isinstance(key, str) else key
        if isinstance(raw, bytes) and len(raw) == CURVE_KEY_CHARS:
            z85.decode(raw)
            return raw
    except (ValueError, KeyError, IndexError):  # UnicodeEncodeError is a ValueError
        pass
    raise ValueError(f"{what}: not a CURVE key (expected {CURVE_KEY_CHARS} characters of Z85)")


def secret_path(directory: str | os.PathLike, identity: str) -> Path:
    return Path(directory) / (check_identity(identity) + SUFFIX)


def _private_dir(directory: Path) -> None:
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    if stat.S_IMODE(directory.stat().st_mode) != 0o700:
        os.chmod(directory, 0o700)


def create_private(path: Path, text: Callable[[], str]) -> None:
    """Write ``text()`` to `path` (mode 0600, its directory 0700) unless the file exists; an
    existing one is kept."""
    _private_dir(path.parent)
    if path.exists():
        return
    # written whole under a private name, then linked into place: a reader never sees it half
    # written, and of two writers racing the first link wins and the other's text is dropped
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{_secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text())
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink(missing_ok=True)


def ensure_secret(directory: str | os.PathLike, identity: str) -> Path:
    """The secret file of `identity` in `directory`, made (mode 0600, a fresh random secret)
    if it does not exist yet; an existing one is kept."""
    path = secret_path(directory, identity)
    create_private(path, lambda: _secrets.token_urlsafe(32) + "\n")
    return path


def read_secret(path: str | os.PathLike) -> str:
    """The secret a file holds; ValueError (one clear message) if it is unusable."""
    try:
        text = Path(path).read_text().strip()
    except OSError as exc:
        raise ValueError(f"cannot read wire credentials {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"wire credentials {path}: not text") from None
    if not text or len(text.encode()) > 255 or any(c.isspace() for c in text):
        raise ValueError(f"wire credentials {path}: expected one secret of 1-255 characters")
    return text


def load_credentials(path: str | os.PathLike) -> Credentials:
    """(identity, secret) from ``<identity>.secret`` (the `--wire-credentials FILE` flag)."""
    name = Path(path).name
    if not name.endswith(SUFFIX):
        raise ValueError(f"wire credentials {path}: expected a file named <identity>{SUFFIX}")
    return Credentials(check_identity(name[:-len(SUFFIX)]), read_secret(path))


def credentials_flag(text: str) -> Credentials:
    """argparse `type=` of ``--wire-credentials FILE``: a bad file is a usage error."""
    try:
        return load_credentials(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


CREDENTIALS_HELP = ("present the identity <identity>.secret names, with its secret, to the apiserver "
                    "(required when it requires wire credentials)")


def secrets_dir(state_root: str | os.PathLike) -> Path:
    """Where a cluster's wire secrets live: ``<state>/pki/wire``."""
    return Path(state_root) / "pki" / "wire"


def state_credentials(state_root: str | os.PathLike, identity: str = ADMIN) -> Credentials | None:
    """`identity`'s credentials from a state directory; None when it has none (a cluster made
    before wire authentication, or a bare server), ValueError when the file is unusable."""
    path = secret_path(secrets_dir(state_root), identity)
    if not path.exists():
        return None
    return Credentials(identity, read_secret(path))


def lookup_secret(directory: str | os.PathLike, identity: str) -> str | None:
    """The secret of `identity` in `directory`, None if it has none (or an unusable one)."""
    try:
        return read_secret(secret_path(directory, identity))
    except ValueError:
        return None


# ------------------------------------------------------------------------------ the server side

class ServerAuth:
    """What a `wire.Server` needs to require PLAIN authentication: where the secrets are, and
    optionally `authorize(identity, method, params)`, called before every request and
    notification, which raises a WireError (Forbidden) to refuse it."""

    mechanism = "PLAIN"

    def __init__(self, secrets_dir: str | os.PathLike,
                 authorize: Callable[[str, str, dict], None] | None = None):
        self.secrets_dir = Path(secrets_dir)
        self.authorize = authorize

    def check(self, user: str, secret: str) -> bool:
        try:
            check_identity(user)
        except ValueError:
            return False
        expected = lookup_secret(self.secrets_dir, user)
        return expected is not None and hmac.compare_digest(expected.encode(), secret.encode())

    def identify(self, creds: list[bytes]) -> str | None:
        """The identity a ZAP request's PLAIN credentials prove, None if they prove none."""
        if len(creds) != 2:
            return None
        try:
            user, secret = creds[0].decode(), creds[1].decode()
        except UnicodeDecodeError:
            return None
        return user if self.check(user, secret) else None

    def refusal(self, creds: list[bytes]) -> tuple[str, str]:
        """(who, why) for the log line of refused credentials."""
        user = creds[0].decode(errors="replace") if len(creds) == 2 else ""
        shown = user if len(user) <= 100 else user[:100] + "..."
        return f"as {shown!r}", "unknown identity or wrong secret"


class CurveAuth:
    """What a `wire.Server` needs to require CURVE: its key pair (Z85), `identify(public_key)`
    naming the identity of a client's public key (Z85 str) or None for a key it does not know,
    and `authorize` as for `ServerAuth`. `identify` runs on the ZAP thread at each handshake:
    it must be quick and thread-safe."""

    mechanism = "CURVE"

    def __init__(self, public: bytes | str, secret: bytes | str, identify: Callable[[str], str | None],
                 authorize: Callable[[str, str, dict], None] | None = None):
        self.public = check_curve_key(public, "the server's CURVE public key")
        self.secret = check_curve_key(secret, "the server's CURVE secret key")
        self._identify = identify
        self.authorize = authorize

    def identify(self, creds: list[bytes]) -> str | None:
        if len(creds) != 1 or len(creds[0]) != 32:
            return None
        key = _z85(creds[0])
        try:
            identity = self._identify(key)
            return None if identity is None else check_identity(identity)
        except Exception:  # a bug in the hook must not open the door, nor kill the ZAP thread
            log.exception("identifying CURVE key %s failed", key)
            return None

    def refusal(self, creds: list[bytes]) -> tuple[str, str]:
        key = _z85(creds[0]) if len(creds) == 1 and len(creds[0]) == 32 else "?"
        return f"with CURVE key {key}", "not a key this server knows"


def _z85(raw: bytes) -> str:
    from zmq.utils import z85

    return z85.encode(raw).decode()


class _Domain(NamedTuple):
    auth: ServerAuth | CurveAuth
    server: str  # its name, for the log


class _Responder:
    """The ZAP handler of one context (see the module docstring)."""

    def __init__(self, ctx: zmq.Context):
        import zmq

        self._ctx = ctx
        self.domains: dict[str, _Domain] = {}
        self._throttle = LogThrottle()
        self._sock = zmq.Socket(ctx, zmq.ROUTER)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(ZAP_ENDPOINT)  # EADDRINUSE: some other ZAP handler owns this context
        self._stop_addr = f"inproc://kubemu-zap-stop-{id(self)}"
        self._stop_rx = zmq.Socket(ctx, zmq.PAIR)
        self._stop_rx.bind(self._stop_addr)
        self._thread = threading.Thread(target=self._run, name="kubemu-wire-zap", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        import zmq

        tx = zmq.Socket(self._ctx, zmq.PAIR)
        try:
            tx.setsockopt(zmq.LINGER, 0)
            tx.connect(self._stop_addr)
            tx.send(b"")
        finally:
            self._thread.join(10)
            tx.close(0)

    def _run(self) -> None:
        import zmq

        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._stop_rx, zmq.POLLIN)
        try:
            while True:
                ready = dict(poller.poll())
                if self._stop_rx in ready:
                    return
                if self._sock in ready:
                    frames = self._sock.recv_multipart()
                    try:
                        self._sock.send_multipart(self._answer(frames))
                    except (ValueError, zmq.ZMQError) as exc:  # not a ZAP request we could answer
                        log.warning("ZAP: dropped a malformed request: %s", exc)
        finally:
            # unbind before close: close releases the endpoint later, in libzmq's reaper thread,
            # and the next responder of this context must be able to bind it at once
            try:
                self._sock.unbind(ZAP_ENDPOINT)
            except zmq.ZMQError:  # the context is terminating: close releases it
                pass
            self._sock.close(0)
            self._stop_rx.close(0)

    def _answer(self, frames: list[bytes]) -> list[bytes]:
        # [routing id, b"", b"1.0", request id, domain, address, routing id, mechanism, credentials...]
        if len(frames) < 8 or frames[1] or frames[2] != b"1.0":
            raise ValueError("not ZAP 1.0")
        envelope, rid = frames[:2], frames[3]
        domain_name = frames[4].decode(errors="replace")
        address = frames[5].decode(errors="replace")
        mechanism, creds = frames[7].decode(errors="replace"), frames[8:]
        domain = self.domains.get(domain_name)
        who = ""
        if domain is None:
            why = f"unknown ZAP domain {domain_name!r}"
        elif mechanism != domain.auth.mechanism:
            why = f"mechanism {mechanism} (this server requires {domain.auth.mechanism} credentials)"
        else:
            user = domain.auth.identify(creds)
            if user is not None:
                return [*envelope, b"1.0", rid, b"200", b"OK", user.encode(), b""]
            who, why = domain.auth.refusal(creds)
        self._refused(domain.server if domain else "wire", who, address, why)
        return [*envelope, b"1.0", rid, b"400", b"bad credentials", b"", b""]

    def _refused(self, server: str, who: str, address: str, why: str) -> None:
        quiet = self._throttle.allow((server, who), time.monotonic())
        if quiet is None:
            return
        more = f" (and {quiet} more, not logged)" if quiet else ""
        who = f" {who}" if who else ""
        log.warning("%s: refused a connection%s from %s: %s%s", server, who, address or "?", why, more)


_lock = threading.Lock()
_responders: dict[zmq.Context, _Responder] = {}
_domain_ids = itertools.count(1)


def register(ctx: zmq.Context, auth: ServerAuth | CurveAuth, server: str) -> str:
    """Start answering ZAP requests in `ctx` for a new domain of `auth`; returns the domain
    (set it as the server socket's ZAP_DOMAIN before binding). `unregister` when done."""
    with _lock:
        responder = _responders.get(ctx)
        if responder is None:
            responder = _responders[ctx] = _Responder(ctx)
        domain = f"kubemu-{os.getpid()}-{next(_domain_ids)}"
        responder.domains[domain] = _Domain(auth, server)
        return domain


def unregister(ctx: zmq.Context, domain: str) -> None:
    with _lock:
        responder = _responders.get(ctx)
        if responder is None:
            return
        responder.domains.pop(domain, None)
        if responder.domains:
            return
        del _responders[ctx]
        responder.stop()  # under the lock: a `register` must not bind before this one unbound
