"""Replica-to-replica transport: `PeerSender` sends a Ready's messages to the peers, and
`SnapshotChunks` reassembles an InstallSnapshot that arrives in `raft_snapshot` chunks.

All messages for one peer from one `send` (a Ready's early messages, or its others) go in one
`raft` notification (split only to stay under the frame size): one way, as Raft's own replies
are messages of their own, so a reply per batch would only cost CPU on both sides. An append
without entries (it only tells a follower the new commit index, or probes it) waits up to
`HOLD_S` and leaves with the next batch for its peer: with one client, the append carrying the
next write is on its way within a fraction of that, and one message, one Ready and one answer
then do what two did. Sent at once, it cost each follower a Ready cycle and the leader two
more answers to read just when the leader applies and replies; Raft is indifferent to the
delay. A batch that cannot be queued at once (the peer is not connected, or its queue is full)
is dropped; Raft resends. InstallSnapshot goes as the msgpack'd SNAP message in 1 MiB chunks
through `raft_snapshot`, one transfer per peer at a time. Validating and stepping what peers
send is the replica's (`Replica.rpc_raft`, `Replica.rpc_raft_snapshot`).

With wire secrets (`--wire-secrets`), each replica presents the identity
``system:store:<name>`` to its peers, and a replica takes the peer methods only from an
identity that is a member's (`refuse_peer`), and a message only as from the member that
authenticated (`impostor`): a client, or one member posing as another, cannot step Raft. The
other methods are for the apiserver (``kube-apiserver-etcd-client``), the admin (`kubemu
store`) and the members only, as kubeadm's etcd trusts only the apiserver's client certificate
and its peers: any other identity (a node's) would otherwise bypass RBAC on the store. The
`fault` method (injected faults, `store.faults`) is the admin's alone: not even a member or the
apiserver may cut a replica off; so is `defragment` (etcd's Maintenance API needs root).

Injected network faults (`PeerSender.faults`, a `store.faults.PeerFaults` or None): each batch
for a peer is sent, held for a while (delay with jitter: batches held apart overtake each
other), or dropped, as `PeerFaults.hold` decides; a snapshot transfer on a cut link does not
start. What arrives on a cut link is dropped by the replica (`PeerFaults.accepts`). With no
fault set, the only cost is checking that `faults` is None once per batch."""
from __future__ import annotations

import asyncio
import logging
import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import msgpack

from kubemu import wire
from kubemu._wire_auth import ADMIN, APISERVER, STORE_PREFIX, load_credentials, secret_path, store_identity

from .faults import PeerFaults
from .raft import Message, MessageType

if TYPE_CHECKING:
    from .server import _Metrics

log = logging.getLogger("store.server")

FRAME = wire.DEFAULT_MAX_FRAME  # 2 MiB: a bit above the 1.5 MiB request limit
PEER_BATCH_BYTES = 1536 * 1024  # split one peer's messages of a Ready into calls of at most this
HOLD_S = 0.002  # how long an append without entries waits for company (see above)
SNAP_CHUNK = 1 << 20
SNAP_MAX_BYTES = 4 << 30
PEER_METHODS = frozenset({"raft", "raft_snapshot"})
CLIENTS = frozenset({APISERVER, ADMIN})  # the identities besides the members that may use the rest
ADMIN_METHODS = frozenset({"fault", "defragment"})  # the admin's alone (etcd: Maintenance needs root)


def peer_credentials(name: str, secrets_dir: str | None) -> wire.Credentials | None:
    """What replica `name` presents to its peers: None without wire secrets; ValueError if
    its secret is missing."""
    if not secrets_dir:
        return None
    return load_credentials(secret_path(secrets_dir, store_identity(name)))


def refuse_peer(identity: str | None, method: str, is_member: Callable[[str], bool]) -> str | None:
    """Why `identity` may not call `method`, None if it may: the peer methods are for members,
    `ADMIN_METHODS` for the admin, the others for members and `CLIENTS`."""
    if method in ADMIN_METHODS:
        return None if identity == ADMIN else f"{method!r} is for the admin ({ADMIN}) only, not {identity!r}"
    member = identity is not None and identity.startswith(STORE_PREFIX) and is_member(identity[len(STORE_PREFIX):])
    if member:
        return None
    if method in PEER_METHODS:
        return f"{method!r} is for the store's members; {identity!r} is not one"
    if identity in CLIENTS:
        return None
    return f"the store serves only the apiserver, the admin and its members; {identity!r} is none of them"


def impostor(identity: str | None, sender: str) -> str | None:
    """Why a peer message claiming to come from `sender` is not, None if it may be (an
    authenticated identity must be the sender's; without authentication nothing is known)."""
    if identity is None or identity == store_identity(sender):
        return None
    return f"raft message from {sender!r} sent by {identity!r}"


def _msg_size(m: Message) -> int:
    return 96 + len(m.context) + sum(len(e.data) + 24 for e in m.entries)


@dataclass(eq=False)
class _Peer:
    name: str
    endpoint: str
    client: wire.Client
    snap_task: asyncio.Task | None = None


class PeerSender:
    """One wire client per peer, made from the replica's member map (shared with the replica,
    which keeps it current; a changed endpoint gets a new client); snapshot transfers run as
    tasks `spawn` starts and the replica cancels when it closes."""

    def __init__(self, name: str, members: dict[str, str], metrics: _Metrics, timeout: float,
                 spawn: Callable[..., asyncio.Task], credentials: wire.Credentials | None = None):
        self.name = name
        self._credentials = credentials
        self._members = members
        self._metrics = metrics
        self._timeout = timeout
        self._spawn = spawn
        self._peers: dict[str, _Peer] = {}
        self._connected: dict[str, str] = {}  # the member map as of the last connect()
        self._held: dict[str, list[Message]] = {}  # appends without entries, per peer
        self._flush_held: asyncio.TimerHandle | None = None
        self.faults: PeerFaults | None = None  # injected network faults (see the module docstring)
        self._rng = random.Random()
        self._delayed: set[asyncio.TimerHandle] = set()  # batches held by an injected delay

    def _peer(self, name: str) -> _Peer | None:
        ep = self._members.get(name)
        if ep is None or name == self.name:
            return None
        peer = self._peers.get(name)
        if peer is None or peer.endpoint != ep:
            if peer is not None:
                self._spawn(peer.client.close())
            peer = self._peers[name] = _Peer(name, ep, wire.Client(
                ep, timeout=self._timeout, max_frame=FRAME, credentials=self._credentials,
                # named, so the server reads it from the handshake rather than failing to find one
                # on every message (a ZMQError per message costs more than the lookup)
                user_agent=f"store/{self.name}"))
            peer.client.connect()
        return peer

    def connect(self) -> None:
        """Connect to every member now, not at the first message to it (which would be
        dropped: notify sends nothing while there is no connection). Cheap when the member map
        has not changed since, so the replica calls it after every Ready."""
        if self._members == self._connected:
            return
        for name in list(self._members):
            self._peer(name)
        self._connected = dict(self._members)

    def send(self, msgs: list[Message]) -> None:
        groups: dict[str, list[Message]] = {}
        held = self._held
        for m in msgs:
            if m.type == MessageType.SNAP:
                self._send_snapshot(m)
            elif m.type == MessageType.APP and not m.entries:
                held.setdefault(m.to, []).append(m)
            else:
                groups.setdefault(m.to, []).append(m)
        for to, ms in groups.items():
            if to in held:
                groups[to] = held.pop(to) + ms  # in order: the held ones went first
        if not held and self._flush_held is not None:
            self._flush_held.cancel()  # all went: what is held next waits its full HOLD_S
            self._flush_held = None
        elif held and self._flush_held is None:
            self._flush_held = asyncio.get_running_loop().call_later(HOLD_S, self._send_held)
        self._send_groups(groups)

    def _send_held(self) -> None:
        self._flush_held = None
        groups, self._held = self._held, {}
        self._send_groups(groups)

    def _send_groups(self, groups: dict[str, list[Message]]) -> None:
        for to, ms in groups.items():
            peer = self._peer(to)
            if peer is None:
                self._metrics.msgs_dropped += len(ms)
                log.debug("no endpoint for %s: dropped %d message(s)", to, len(ms))
                continue
            batch: list[dict] = []
            size = 0
            for m in ms:
                s = _msg_size(m)
                if batch and size + s > PEER_BATCH_BYTES:
                    self._fire(peer, batch)
                    batch, size = [], 0
                batch.append(m.to_wire())
                size += s
            self._fire(peer, batch)

    def _fire(self, peer: _Peer, batch: list[dict]) -> None:
        if self.faults is not None:
            hold = self.faults.hold(peer.name, self._rng)
            if hold is None:
                self._metrics.msgs_dropped += len(batch)
                return
            if hold > 0:
                self._hold(hold, peer, batch)
                return
        self._send_now(peer, batch)

    def _hold(self, seconds: float, peer: _Peer, batch: list[dict]) -> None:
        def release() -> None:
            self._delayed.discard(handle)
            if self._peers.get(peer.name) is peer:  # not replaced by a new endpoint meanwhile
                self._send_now(peer, batch)

        handle = asyncio.get_running_loop().call_later(seconds, release)
        self._delayed.add(handle)

    def _send_now(self, peer: _Peer, batch: list[dict]) -> None:
        try:
            sent = peer.client.notify("raft", {"msgs": batch})
        except wire.WireError as exc:  # TooLarge: cannot happen below PEER_BATCH_BYTES
            log.warning("raft message to %s not sent: %s", peer.name, exc)
            sent = False
        if sent:
            self._metrics.msgs_sent += len(batch)
        else:
            self._metrics.msgs_dropped += len(batch)

    def _send_snapshot(self, m: Message) -> None:
        peer = self._peer(m.to)
        if (peer is None or (peer.snap_task is not None and not peer.snap_task.done())
                or (self.faults is not None and m.to in self.faults.drop_to)):
            self._metrics.msgs_dropped += 1
            return
        peer.snap_task = self._spawn(self._stream_snapshot(peer, m))

    async def _stream_snapshot(self, peer: _Peer, m: Message) -> None:
        blob = msgpack.packb(m.to_wire(), use_bin_type=True)
        sid = random.getrandbits(62)
        n = max(1, math.ceil(len(blob) / SNAP_CHUNK))
        log.info("sending snapshot at index %d (%d bytes, %d chunk(s)) to %s",
                 m.snapshot.meta.index, len(blob), n, peer.name)
        try:
            for seq in range(n):
                await peer.client.call("raft_snapshot", {
                    "sender": self.name, "id": sid, "seq": seq, "last": seq == n - 1,
                    "data": blob[seq * SNAP_CHUNK:(seq + 1) * SNAP_CHUNK]}, timeout=max(5.0, self._timeout))
            self._metrics.snapshots_sent += 1
        except wire.WireError as exc:
            log.info("sending a snapshot to %s failed: %s (Raft will retry)", peer.name, exc)

    def cancel_snapshots(self) -> None:
        for peer in self._peers.values():
            if peer.snap_task is not None:
                peer.snap_task.cancel()

    async def close(self) -> None:
        if self._flush_held is not None:
            self._flush_held.cancel()
            self._flush_held = None
        for handle in self._delayed:
            handle.cancel()
        self._delayed.clear()
        for peer in self._peers.values():
            await peer.client.close()


class SnapshotChunks:
    """The `raft_snapshot` transfers in progress, one per sender: chunks must come in order."""

    def __init__(self) -> None:
        self._rx: dict[str, list] = {}

    def add(self, sender: str, id: int, seq: int, last: bool, data: bytes) -> bytes | None:
        """The whole message once its last chunk is in, else None. ValueError (and the transfer
        is dropped) for a chunk out of order or one that makes it exceed SNAP_MAX_BYTES."""
        rx = self._rx.get(sender)
        if seq == 0:
            rx = self._rx[sender] = [id, 0, bytearray()]
        elif rx is None or rx[0] != id or rx[1] != seq:
            self._rx.pop(sender, None)
            raise ValueError(f"raft_snapshot from {sender}: chunk {seq} out of order")
        if len(rx[2]) + len(data) > SNAP_MAX_BYTES:
            self._rx.pop(sender, None)
            raise ValueError(f"raft_snapshot from {sender}: over {SNAP_MAX_BYTES} bytes")
        rx[2] += data
        rx[1] = seq + 1
        if not last:
            return None
        del self._rx[sender]
        return bytes(rx[2])
