"""One replica of the store (the etcd analog): an OS process that drives the pure Raft core
(`store.raft`) and applies what it commits to the MVCC state machine (`store.mvcc`), both durable
in the replica's one LevelDB (`store.raftlog`), and serves clients and peers on one wire endpoint.

Shape
-----
One asyncio loop. One repeating loop timer ticks Raft every --tick-ms; everything else is driven
by events: a peer's `raft` call steps messages, a client's request proposes or asks for a read
index, and each of those sets `_kick`. One task (`_raft_loop`) waits for the kick and processes
Readys exactly as `store.raft` prescribes, one at a time:

  0. a leader sends its APPs and heartbeats (`Ready.early_messages`) first, so that its own fsync
     overlaps its followers' receive-fsync-answer instead of adding to it; its own copy counts
     toward a commit only once step 1 is done (store.raft);
  1. persist the snapshot, entries and hard state in ONE synced LevelDB batch. Whatever arrives
     meanwhile waits in ZeroMQ's queues and lands in the next Ready: that is the group commit
     (fsyncs << writes under load). The loop itself waits for the fsync, as etcd's raft
     goroutine waits for its WAL: on a worker thread the handoffs cost more than the overlap
     won (paired runs: 1 client +10-15 % writes/s inline, 16 clients ~+7 %, 64 and 256 clients
     no difference beyond the noise; the 2 cores are busy with the other replicas anyway). A
     Ready that only moves the commit index is written without an fsync (etcd's MustSync; see
     store.raftlog);
  2. then send the other messages (votes, acknowledgements: they vouch for what step 1 wrote).
     All messages for one peer from one list go in one one-way `raft` notification (split
     only to stay under the frame size; an append without entries waits a moment for the next
     one, see store._peers); InstallSnapshot goes in 1 MiB chunks through `raft_snapshot`,
     one transfer per peer at a time;
  3. then restore the KV store from an incoming snapshot, apply the committed entries with one
     `KVStore.apply_batch` (one backend write), resolve the waiting clients and feed watchers;
  4. serve the read states; advance().

Entries: msgpack [origin replica, request id, request dict]. The proposing replica resolves the
waiting client's future when the entry applies (request ids carry a per-process random prefix,
so an entry proposed by an earlier incarnation never resolves a new request). Conf-change
entries carry the same triple in ConfChange.context, with the new member's endpoint.

Who serves what
---------------
Writes (put, delete_range, txn, compact, lease_grant/revoke/keepalive, member changes,
move_leader) only on the leader; elsewhere `store.errors.NotLeader` with the leader's name and
endpoint (definitely not executed). A write is acknowledged only once its entry is committed
(a majority fsynced it) AND applied here. Linearizable reads (range by default, lease_leases, a
watch's creation revision) work on every replica with ReadIndex: concurrent reads share one
read-index request; the reply's index is waited for, then applied >= index, then the read is
local. serializable=True reads locally at once.

Durability and restart
----------------------
Everything lives in ONE LevelDB (<data-dir>/db): the KV state under kv/, the Raft log under
raft/. The KV store never fsyncs by itself: each synced Raft write also makes every earlier KV
write durable (one LevelDB WAL), and after kill -9 the replica reopens the KV store at its last
durable applied index and Raft hands the committed entries after it out again.

Log compaction and snapshots (as etcd): every --snapshot-count applied entries the replica
drops its Raft log up to min(5000, snapshot-count) entries behind the applied index, and deletes
those entries from disk. The KV state holds what they did, so the compaction writes no snapshot
data; the tail left lets a follower that lags a little catch up from entries (etcd's
SnapshotCatchUpEntries). Only when a follower needs entries that are gone (`Raft.snapshot_wanted`)
does the leader take a snapshot (a msgpack envelope {"kv": KVStore.snapshot(), "members":
{name: endpoint}}): pinned at the applied index on the loop, encoded on the I/O thread while the
Readys go on, then handed to `Raft.compact`, which sends it.

Bootstrap or join (decided once, when the data directory holds no Raft state)
------------------------------------------------------------------------------
* Data directory has Raft state: restart from it (flags --peers/--join only supply endpoints).
* Empty data directory and --join: start with an empty log and no configuration (`Raft(peers=[])`)
  and learn everything from the leader (entries or a snapshot). Use this for a member added with
  `member_add`, and for a member whose data directory was wiped (it is still in the
  configuration; it must never re-bootstrap a log of its own).
* Empty data directory, no --join: a fresh cluster, so bootstrap with every member of --peers
  (each bootstrap member writes the same committed configuration entries). As a safety net the
  replica first asks its peers for their status (briefly); if one of them is past the bootstrap
  entries (a longer log or a term above 1), the cluster is not fresh and the replica joins
  instead, with a warning. (A peer holding only the bootstrap entries holds exactly the log this
  replica would write, so bootstrapping next to it is safe.)

Wire methods (params; keys and values are bytes; answers are the KVStore's etcd-shaped dicts)
---------------------------------------------------------------------------------------------
    put {key, value=b"", lease=0, prev_kv=False}            leader only
    range {key, range_end=None, revision=0, limit=0, count_only=False, keys_only=False,
           serializable=False}                              any replica
    delete_range {key, range_end=None, prev_kv=False}       leader only
    txn {compare=[], success=[], failure=[]}                leader only (ops: store.mvcc builders)
    compact {revision, physical=False}                      leader only
    defragment {} -> {name, db_size_before, db_size_after}  this replica (etcd's Maintenance.Defragment);
        the admin only (with --wire-secrets)
    lease_grant {ttl, id=0} -> {id, ttl}                    leader only (id 0: the leader picks one)
    lease_revoke {id}, lease_keepalive {id} -> {id, ttl}    leader only
    lease_leases {} -> {leases: [{id, ttl}]}                any replica (linearizable)
    status {} -> {name, endpoint, role, term, leader, leader_endpoint, commit_index,
                  applied_index, raft_index, snapshot_index, revision, compact_revision, db_size,
                  fsyncs, unsynced_writes, proposals, applied_entries, readies, ..., members}
    member_list {} -> [{name, endpoint}]                    any replica (its current view)
    member_add {name, endpoint}, member_remove {name} -> {members}   leader only
    move_leader {to} -> {leader, endpoint}                  leader only; waits for the hand-off
    watch {key, range_end=None, start_revision=0, prev_kv=False}     stream, any replica
        first {"created": True, "header": {"revision": R}} (R: a linearizable revision), then
        {"header": {"revision": H}, "events": [Event.to_wire(), ...]} in revision order, gap-free:
        stored history from start_revision up to R (items never split a revision; H is the last
        event's revision), then live batches as they apply (H: the store revision after the
        batch). start_revision <= compact revision -> Gone {compact_revision}; a watcher more
        than 1024 batches behind, or on a replica that restores a snapshot, ends with Unavailable.
    raft {msgs: [Message.to_wire(), ...]}, raft_snapshot {sender, id, seq, last, data}   peers
        (with --wire-secrets: only from members' identities, each message from its own sender)
    fault {action, ...} -> {name, faults}                    the admin only (with --wire-secrets)
        injected faults for Jepsen-style tests, this replica's part of them (`store.faults`):
        partitions and delays of Raft traffic, a full disk (etcd's NOSPACE alarm, but this
        replica's own: while it leads, writes that grow the store are refused with NoSpace; as
        a follower it changes nothing; etcd replicates the alarm to every member), a failing
        fsync (the replica stops, as etcd does on a failed WAL write: exit 1, and what it had
        not synced is lost), power-loss (what was not synced is lost and the replica dies at
        once, SIGKILL; it dies even when the record of that loss cannot be written). They last
        the process's life.

Leases: the leader keeps a `LeaseClock` (reset with on_become_leader when it takes over),
answers keepalives, and proposes lease_revoke for expired leases from one loop timer armed at
the earliest expiry. Auto-compaction (leader only): --auto-compaction-retention 300s keeps five
minutes of history (the revision seen 300 s ago is compacted; samples every 30 s), a plain
number N keeps N revisions (checked every 5 s), 0 disables.

Stop: SIGTERM (or SIGINT) on the leader transfers leadership to the most up-to-date follower and
waits until the new leader is heard from (a bounded wait), then the replica closes; exit 0.
"""
from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import os
import random
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

import msgpack
import plyvel

from kubemu import wire
from kubemu.gcfreeze import GcFreezer
from kubemu.packer import packb
from kubemu.sdnotify import notify, watchdog_interval

from . import faults
from ._auto_compaction import AutoCompaction
from ._bootstrap import choose_mode, create_raft
from ._leases import LeaseExpiry
from ._mvcc_requests import Op, parse_key_range, parse_request
from ._pending_requests import PendingRequests
from ._peers import FRAME, PeerSender, SnapshotChunks, impostor, peer_credentials, refuse_peer
from ._snapshot_envelope import unwrap_snapshot, wrap_snapshot
from ._watch_hub import WatchHub, history
from .backend import Disk, FsyncFailed, LevelDBBackend, defragment, is_disk_failure
from .errors import NoSpace, NotLeader, to_wire_error
from .mvcc import (Compacted, Event, KVStore, StoreError, check_request_size, compact_op, lease_grant_op,
                   lease_revoke_op, put_op, txn_op)
from .options import Options, parse_peers, parse_retention
from .raft import (ConfChange, ConfChangeType, Entry, EntryKind, Message, MessageType, ProposalDropped, RaftError,
                   ReadState, Ready, Role, Snapshot, SoftState)
from .raft import NotLeader as RaftNotLeader
from .raftlog import RaftStorage

# Importable from here as before the split into modules:
from ._mvcc_requests import KeyRange  # noqa: F401
from ._watch_hub import WATCH_QUEUE_ITEMS, _Watcher  # noqa: F401

__all__ = ["Options", "Replica", "parse_peers", "parse_retention"]

log = logging.getLogger("store.server")

MT = MessageType

# --- tunables --------------------------------------------------------------------------------
SNAPSHOT_CATCHUP_ENTRIES = 5000  # etcd's SnapshotCatchUpEntries
MAX_MSGS_PER_CALL = 100_000
MAX_SANE_TERM = 1 << 62  # a term this large is garbage, not an election (it would exhaust the u64)
MAX_LEASE_ID = 2**63 - 1


# --- small helpers ---------------------------------------------------------------------------

# LevelDB's memtable (its default is 4 MiB). Every write lands twice (its Raft entry, its KV
# record), and each full memtable becomes a level-0 file to compact: at 4 MiB, LevelDB's
# compaction thread grew to 0.8 s of CPU per replica per 5 s at 256 clients. 64 MiB: ~+8 %
# writes/s in paired runs, and the memory is only used while writes flow.
MEMTABLE_BYTES = 64 << 20


@dataclass
class _Metrics:
    proposals: int = 0
    applied_entries: int = 0
    readies: int = 0
    read_index_requests: int = 0
    snapshots_taken: int = 0
    snapshots_installed: int = 0  # local compactions
    snapshots_restored: int = 0  # received from the leader
    snapshots_sent: int = 0
    msgs_sent: int = 0
    msgs_dropped: int = 0
    bad_peer_input: int = 0
    extra_fsyncs: int = 0  # KVStore.restore's own synced write
    leader_changes: int = 0


# --- the replica -------------------------------------------------------------------------------

class Replica:
    def __init__(self, opts: Options):
        self.opts = opts
        self.name = opts.name
        self.loop: asyncio.AbstractEventLoop | None = None
        self.members: dict[str, str] = dict(opts.peers)
        self.metrics = _Metrics()
        self.mode = "?"
        self.exit_code = 0
        self._kick: asyncio.Event | None = None
        self._done: asyncio.Event | None = None
        self._progress: asyncio.Event | None = None
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-io")  # compactions, snapshot encoding
        self._pending = PendingRequests(opts.request_timeout)
        self._rid_base = random.SystemRandom().getrandbits(30) << 32
        self._rid = itertools.count(1)
        self._reads: dict[bytes, tuple[asyncio.Future, float]] = {}
        self._read_batch: asyncio.Future | None = None
        self._applied_waiters: list[tuple[int, int, asyncio.Future]] = []
        self._waiter_seq = itertools.count()
        self._watches = WatchHub()
        self._peers = PeerSender(self.name, self.members, self.metrics, max(1.0, opts.election_s), self._spawn,
                                 peer_credentials(self.name, opts.wire_secrets))
        self._snap_rx = SnapshotChunks()
        self._bg: set[asyncio.Task] = set()
        self._peer_match: dict[str, int] = {}
        self._is_leader = False
        self._known_leader: str | None = None
        self._leases: LeaseExpiry  # made in run(), with the loop and the KV store
        self._compaction = AutoCompaction(opts.retention)
        self._held_snapshot: tuple[int, bytes] | None = None
        self._encoding: asyncio.Task | None = None  # a snapshot being encoded
        self._tick_handle: asyncio.TimerHandle | None = None
        self._next_tick = 0.0
        self._watchdog: float | None = watchdog_interval()
        self._next_watchdog = 0.0
        self._ready_since: float | None = None
        self._next_housekeeping = 0.0
        self._gc = GcFreezer()
        self._halt = False
        self._stopping = False
        self._loop_task: asyncio.Task | None = None
        self._server: wire.Server | None = None
        self.db: plyvel.DB | None = None
        self.disk: Disk | None = None
        self._faults = faults.FaultState()
        self._disk_full = False  # the injected NOSPACE alarm, checked per proposal

    # ============================================================================ life cycle

    async def run(self) -> int:
        self.loop = asyncio.get_running_loop()
        self._kick, self._done, self._progress = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self._open_storage()
        self._leases = LeaseExpiry(self.loop, self.kv, self._propose_internal, lambda: self._is_leader,
                                   lambda: self._halt)
        try:
            self.mode = await choose_mode(self.opts, self.storage)
            self.raft = create_raft(self.opts, self.mode, self.storage, self.kv.applied_index)
            auth = wire.ServerAuth(self.opts.wire_secrets, self._authorize) if self.opts.wire_secrets else None
            self._server = wire.Server(self.opts.listen, self._handlers(), name=self.name, max_frame=FRAME,
                                       auth=auth)
            await self._server.start()
            self._peers.connect()  # now: a message for a peer not yet connected is dropped
        except BaseException:
            await self._close_resources()
            raise
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self._on_signal, sig)
        self._loop_task = self.loop.create_task(self._raft_loop(), name="raft-loop")
        self._loop_task.add_done_callback(self._on_loop_done)
        self._next_tick = self.loop.time() + self.opts.tick_s
        self._tick_handle = self.loop.call_at(self._next_tick, self._on_tick)
        self._kick.set()
        log.info("%s serving on %s (%s; voters %s; term %d, last index %d, applied %d, revision %d)",
                 self.name, self.opts.listen, self.mode, ",".join(self.raft.voters) or "-", self.raft.term,
                 self.raft.last_index, self.kv.applied_index, self.kv.revision)
        notify(f"READY=1\nSTATUS=serving ({self.mode})")
        await self._done.wait()
        return self.exit_code

    def _open_storage(self) -> None:
        os.makedirs(self.opts.data_dir, mode=0o700, exist_ok=True)
        db_dir = os.path.join(self.opts.data_dir, "db")
        Disk.recover(db_dir)  # a power loss injected into the previous run takes effect now
        self.db = plyvel.DB(db_dir, create_if_missing=True, write_buffer_size=MEMTABLE_BYTES)
        self.disk = Disk(db_dir)
        self.storage = RaftStorage(self.db, prefix=b"raft/", fsync=not self.opts.unsafe_no_fsync, disk=self.disk)
        if self.opts.unsafe_no_fsync:
            log.warning("--unsafe-no-fsync: the Raft log is never fsynced; a crash of the machine "
                        "can lose acknowledged writes")
        self.kv = KVStore(LevelDBBackend(self.db, prefix=b"kv/", disk=self.disk))
        raw = self.storage.get_meta(b"members")
        if raw:
            try:
                self.members.update(msgpack.unpackb(raw, raw=False))
            except Exception:
                log.warning("ignoring undecodable persisted member list")
        self.members[self.name] = self.opts.listen
        snap = self.storage.load() if self.storage.snapshot_index > self.kv.applied_index else None
        if snap is not None and snap.snapshot_data is not None:
            # The snapshot reached the disk but the KV store restored from it did not (a crash
            # in between): restore it now, before Raft hands out the entries after it.
            log.info("restoring the state machine from the persisted snapshot at %d (applied %d)",
                     snap.snapshot_meta.index, self.kv.applied_index)
            self._restore_state(snap.snapshot_data)

    def _on_signal(self, sig: int) -> None:
        log.info("received %s: stopping", signal.Signals(sig).name)
        if not self._stopping:
            self._spawn(self.shutdown(graceful=True))

    def _on_loop_done(self, task: asyncio.Task) -> None:
        if task.cancelled() or self._halt:
            return
        exc = task.exception()
        if is_disk_failure(exc):
            self._disk_failed(exc)
        log.critical("the Raft loop failed; the replica stops", exc_info=exc)
        self.exit_code = 1
        self._spawn(self.shutdown(graceful=False))

    def _disk_failed(self, exc: BaseException) -> None:
        """etcd's answer to a failed WAL write or fsync: the member stops at once (its
        `lg.Fatal`), and nothing it had not synced can be trusted (an fsync that failed may have
        dropped the dirty pages: Linux marks them clean)."""
        log.critical("failed to save Raft hard state and entries: %s; this member stops", exc)
        try:
            if isinstance(exc, FsyncFailed):
                self._lose_unsynced()
        finally:
            os._exit(1)

    def _power_off(self) -> None:
        try:
            plan = self._lose_unsynced()
            if plan is not None:
                log.warning("power loss (injected): the unsynced tail of %s is lost; stopping at once",
                            ", ".join(sorted(plan)) or "no file")
        finally:
            # The Raft loop has already stopped (_halt): whatever failed above, a replica that
            # went on answering its wire without stepping Raft would be wedged, not powered off.
            os.kill(os.getpid(), signal.SIGKILL)

    def _lose_unsynced(self) -> dict[str, int] | None:
        """`Disk.lose_unsynced`, or None when its record could not be written (said in one
        line): the member stops all the same, and its next start keeps the unsynced tail."""
        try:
            return self.disk.lose_unsynced()
        except OSError as exc:
            log.error("could not record the unsynced tail for the next start to drop (%s); "
                      "stopping at once, the tail will be kept", exc)
            return None

    async def shutdown(self, graceful: bool = True) -> None:
        if self._stopping:
            return
        self._stopping = True
        if graceful:
            try:
                await self._hand_off_leadership()
            except Exception:
                log.exception("leadership hand-off failed")
        self._halt = True
        self._kick.set()
        if self._loop_task is not None:
            try:
                await self._loop_task
            except BaseException:
                pass
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        self._leases.cancel()
        self._pending.fail_all(wire.OutcomeUnknown("the replica is stopping"))
        self._watches.fail_all(wire.Unavailable("the replica is stopping"))
        await self._close_resources()
        log.info("%s stopped", self.name)
        self._done.set()

    async def _close_resources(self) -> None:
        if self._server is not None:
            await self._server.close()
        self._peers.cancel_snapshots()
        others = [t for t in self._bg if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        if others:
            await asyncio.wait(others, timeout=5)
        await self._peers.close()
        self._io.shutdown(wait=True)  # a persist in flight finishes before the database closes
        if self.db is not None and not self.db.closed:
            self.db.close()
        if self.disk is not None:
            self.disk.close()

    async def _hand_off_leadership(self) -> None:
        raft = self.raft
        others = [v for v in raft.voters if v != self.name]
        if raft.state != Role.LEADER or not others:
            return
        target = max(others, key=lambda v: (self._peer_match.get(v, 0), v))
        log.info("stepping down: transferring leadership to %s (match %d of %d)",
                 target, self._peer_match.get(target, 0), raft.last_index)
        try:
            raft.transfer_leadership(target)
        except (RaftError, ValueError) as exc:
            log.warning("cannot transfer leadership to %s: %s", target, exc)
            return
        self._kick.set()
        moved = await self._wait_until(lambda: raft.leader_id not in (None, self.name),
                                       max(1.0, 3 * self.opts.election_s))
        if moved:
            log.info("leadership moved to %s", raft.leader_id)
        else:
            log.warning("leadership did not move in time; stopping anyway")

    def _spawn(self, coro) -> asyncio.Task:
        task = self.loop.create_task(coro)
        self._bg.add(task)
        task.add_done_callback(self._bg.discard)
        return task

    # ============================================================================ the Raft loop

    def _on_tick(self) -> None:
        now = self.loop.time()
        self._next_tick = max(self._next_tick + self.opts.tick_s, now)
        self._tick_handle = self.loop.call_at(self._next_tick, self._on_tick)
        if self._halt:
            return
        self.raft.tick()
        self._pending.expire(now)
        self._kick.set()
        if self._watchdog is not None and now >= self._next_watchdog:
            # Only while Readys get through: a persist stuck for two intervals (a hung disk)
            # stops the pings, and the supervisor restarts us.
            if self._ready_since is None or now - self._ready_since < 2 * self._watchdog:
                notify("WATCHDOG=1")
            self._next_watchdog = now + self._watchdog
        if now >= self._next_housekeeping:
            self._next_housekeeping = now + min(1.0, max(self.opts.tick_s, 0.1))
            self._housekeeping(now)

    async def _raft_loop(self) -> None:
        raft = self.raft
        kick = self._kick
        while not self._halt:
            await kick.wait()
            kick.clear()
            self._flush_reads()
            while not self._halt and raft.has_ready():
                await self._handle_ready(raft.ready())
                self._flush_reads()

    async def _handle_ready(self, rd: Ready) -> None:
        self.metrics.readies += 1
        self._ready_since = self.loop.time()
        # 0. the leader's APPs and heartbeats go first: its fsync overlaps its followers'
        if rd.early_messages:
            self._peers.send(rd.early_messages)
        # 1. persist, here and not on a thread (see the module's docstring)
        self.storage.save(rd)
        if rd.entries:
            self._note_appended(rd.entries)
        # 2. send
        if rd.messages:
            self._peers.send(rd.messages)
        # 3. apply
        if rd.snapshot is not None:
            self._install_received_snapshot(rd.snapshot)
        if rd.committed_entries:
            self._apply(rd.committed_entries)
        # 4. reads
        for rs in rd.read_states:
            self._on_read_state(rs)
        self.raft.advance(rd)
        if rd.soft_state is not None:
            self._on_soft_state(rd.soft_state)
        self._pending.check(self.raft.state == Role.LEADER, self.raft.term)
        self._wake_applied()
        self._peers.connect()  # to a member this Ready added (or a changed endpoint) right away
        await self._maybe_snapshot()
        self._ready_since = None
        progress, self._progress = self._progress, asyncio.Event()
        progress.set()

    def _on_soft_state(self, ss: SoftState) -> None:
        was_leader = self._is_leader
        self._is_leader = ss.role == Role.LEADER
        if ss.leader_id != self._known_leader:
            self._known_leader = ss.leader_id
            self.metrics.leader_changes += 1
            if ss.leader_id is not None:
                log.info("%s leads term %d%s", ss.leader_id, self.raft.term,
                         " (this replica)" if ss.leader_id == self.name else "")
        if self._is_leader and not was_leader:
            now = self.loop.time()
            self._peer_match = {}
            self._compaction.restart(now)
            self._leases.on_become_leader(now)
        elif was_leader and not self._is_leader:
            log.info("no longer the leader (term %d, role %s)", self.raft.term, ss.role)
            self._leases.on_lose_leadership()

    async def _wait_until(self, cond: Callable[[], bool], timeout: float) -> bool:
        deadline = self.loop.time() + timeout
        while not cond():
            remaining = deadline - self.loop.time()
            if remaining <= 0:
                return False
            try:
                await asyncio.wait_for(self._progress.wait(), min(remaining, 0.05 + self.opts.tick_s))
            except asyncio.TimeoutError:
                pass
        return True

    # ============================================================================ transport

    def _known_sender(self, name: str) -> bool:
        return name in self.members or name in self.raft.voters

    def _authorize(self, identity: str, method: str, params: dict) -> None:
        """The wire's check before each request (with --wire-secrets): see `refuse_peer`."""
        why = refuse_peer(identity, method, self._known_sender)
        if why is not None:
            raise wire.Forbidden(why)

    def _bad_input(self, what: str) -> wire.BadRequest:
        self.metrics.bad_peer_input += 1
        log.warning("rejected peer input: %s", what)
        return wire.BadRequest(what)

    def rpc_raft(self, msgs) -> None:
        """Peer transport: step a batch of Raft messages (validated first: all or none)."""
        if type(msgs) is not list or len(msgs) > MAX_MSGS_PER_CALL:
            raise self._bad_input("raft: msgs must be a list of at most %d messages" % MAX_MSGS_PER_CALL)
        parsed = []
        for obj in msgs:
            try:
                m = Message.from_wire(obj)
            except ValueError as exc:
                raise self._bad_input(f"malformed raft message: {exc}") from None
            problem = self._check_peer_message(m)
            if problem:
                raise self._bad_input(problem)
            if m.type == MT.SNAP:
                raise self._bad_input(f"snapshot from {m.frm} outside raft_snapshot")
            parsed.append(m)
        injected = self._peers.faults
        if injected is not None:
            parsed = [m for m in parsed if injected.accepts(m.frm)]
        self._step_all(parsed)

    def _check_peer_message(self, m: Message) -> str | None:
        if m.to != self.name:
            return f"raft message for {m.to!r} delivered to {self.name}"
        if not self._known_sender(m.frm):
            return f"raft message from unknown sender {m.frm!r}"
        if (why := impostor(wire.peer_identity.get(), m.frm)) is not None:
            return why
        if m.term > MAX_SANE_TERM:
            return f"raft message from {m.frm} with absurd term {m.term}"
        return None

    def _step_all(self, msgs: list[Message]) -> None:
        if self._halt:
            return
        raft = self.raft
        for m in msgs:
            if m.type == MT.APP_RESP and not m.reject and raft.state == Role.LEADER:
                if m.index > self._peer_match.get(m.frm, 0):
                    self._peer_match[m.frm] = m.index
            raft.step(m)
        if msgs:
            self._kick.set()

    def rpc_raft_snapshot(self, sender, id, seq, last, data) -> None:
        """Peer transport for InstallSnapshot: the msgpack'd SNAP message in ordered chunks."""
        if not (isinstance(sender, str) and type(id) is int and type(seq) is int and seq >= 0
                and type(last) is bool and type(data) is bytes):
            raise self._bad_input("raft_snapshot: bad parameter types")
        if not self._known_sender(sender):
            raise self._bad_input(f"raft_snapshot from unknown sender {sender!r}")
        if (why := impostor(wire.peer_identity.get(), sender)) is not None:
            raise self._bad_input(why)
        if self._peers.faults is not None and not self._peers.faults.accepts(sender):
            return  # an injected partition cuts the link
        try:
            blob = self._snap_rx.add(sender, id, seq, last, data)
        except ValueError as exc:
            raise self._bad_input(str(exc)) from None
        if blob is None:
            return
        try:
            m = Message.from_wire(msgpack.unpackb(blob, raw=False))
        except Exception as exc:
            raise self._bad_input(f"raft_snapshot from {sender}: malformed message: {type(exc).__name__}: {exc}") from None
        problem = self._check_peer_message(m)
        if problem or m.type != MT.SNAP or m.frm != sender:
            raise self._bad_input(problem or f"raft_snapshot from {sender}: not a snapshot from it")
        try:
            unwrap_snapshot(m.snapshot.data)
        except ValueError as exc:
            raise self._bad_input(f"raft_snapshot from {sender}: {exc}") from None
        self._step_all([m])

    # ============================================================================ apply

    def _note_appended(self, entries: list[Entry]) -> None:
        """A configuration takes effect when appended: learn a new member's endpoint now."""
        for e in entries:
            if e.kind == EntryKind.CONF_CHANGE:
                cc, _, endpoint = self._decode_conf(e)
                if cc is not None and cc.type == ConfChangeType.ADD_NODE and endpoint:
                    self.members[cc.node_id] = endpoint

    @staticmethod
    def _decode_conf(e: Entry) -> tuple[ConfChange | None, tuple | None, str]:
        try:
            cc = ConfChange.decode(e.data)
        except ValueError:
            return None, None, ""
        if not cc.context:
            return cc, None, ""
        try:
            origin, rid, endpoint = msgpack.unpackb(cc.context, raw=False)
            return cc, (origin, rid), endpoint if isinstance(endpoint, str) else ""
        except Exception:
            return cc, None, ""

    def _apply(self, entries: list[Entry]) -> None:
        batch: list[tuple[int, dict | Op | None]] = []
        tags: list[tuple[Any, dict | None]] = []
        conf_done: list[tuple[Any, dict]] = []
        answered: set[int] = set()  # proposed here: only their clients read a response
        for e in entries:
            tag = req = op = None
            if e.kind == EntryKind.NORMAL:
                try:
                    origin, rid, req = msgpack.unpackb(e.data, raw=False)
                    tag = (origin, rid)
                except Exception:
                    log.error("entry %d is undecodable; applied as a no-op", e.index)
                    req = None
                if tag is not None and tag[0] == self.name and isinstance(tag[1], int):
                    op = self._pending.op(tag[1])
                    answered.add(e.index)
            elif e.kind == EntryKind.CONF_CHANGE:
                ctag = self._apply_conf(e)
                if ctag is not None:
                    conf_done.append((ctag, {"members": self.member_list()}))
            batch.append((e.index, req if op is None else op))
            tags.append((tag, req))
        results = self.kv.apply_batch(batch, answered)
        self.metrics.applied_entries += len(entries)
        events: list[Event] = []
        for (tag, req), (res, evs) in zip(tags, results):
            if evs:
                events.extend(evs)
            if req is not None and res is not None:
                self._leases.applied(req, res)
            if tag is not None and tag[0] == self.name:
                self._pending.resolve(tag[1], res)
        for ctag, result in conf_done:
            if ctag[0] == self.name:
                self._pending.resolve(ctag[1], result)
        if events and self._watches:
            self._watches.publish(events, self.kv.revision)

    def _apply_conf(self, e: Entry) -> tuple | None:
        cc, tag, endpoint = self._decode_conf(e)
        if cc is None:
            return None
        if cc.type == ConfChangeType.ADD_NODE:
            if endpoint:
                self.members[cc.node_id] = endpoint
                self._save_members()
            log.info("member %s added (%s)", cc.node_id, self.members.get(cc.node_id, "endpoint unknown"))
        else:
            if cc.node_id != self.name and cc.node_id not in self.opts.peers:
                self.members.pop(cc.node_id, None)
                self._save_members()
            log.info("member %s removed%s", cc.node_id,
                     ": this replica is no longer a voter" if cc.node_id == self.name else "")
        return tag

    def _save_members(self) -> None:
        self.storage.put_meta(b"members", packb(self.members))

    def _install_received_snapshot(self, snap: Snapshot) -> None:
        log.info("restoring from the leader's snapshot at index %d (%d bytes)", snap.meta.index, len(snap.data))
        self._restore_state(snap.data)
        self.metrics.snapshots_restored += 1
        self._held_snapshot = None

    def _restore_state(self, data: bytes) -> None:
        kv_data, members = unwrap_snapshot(data)
        self.kv.restore(kv_data)
        self.metrics.extra_fsyncs += 1
        self.members.update(members)
        self.members[self.name] = self.opts.listen
        self._save_members()
        self._watches.fail_all(wire.Unavailable("watch cancelled: the replica restored a snapshot; watch again",
                                                {"reason": "restored"}))

    # ============================================================================ snapshots

    async def _maybe_snapshot(self) -> None:
        """Compact the log, and make a snapshot only for a follower that needs one (see the
        module docstring). Made at every compaction instead, a busy store's 30-90 MB of
        history took 1-2 s of CPU in each replica at once, and writes dropped to a third."""
        raft = self.raft
        held = self._held_snapshot
        if held is not None and held[0] <= raft.applied:  # (after a restart it may be ahead)
            self._held_snapshot = None
            index, data = held
            if raft.snapshot_wanted and index >= raft.log.snap_index:
                await self._compact(index, data)
        catch_up = min(SNAPSHOT_CATCHUP_ENTRIES, self.opts.snapshot_count)
        upto = min(self.kv.applied_index, raft.applied) - catch_up
        if upto - raft.log.snap_index >= self.opts.snapshot_count:
            await self._compact(upto, None)
        if raft.snapshot_wanted and self._encoding is None and self._held_snapshot is None:
            applied = self.kv.applied_index
            encode = self.kv.snapshot_encoder()  # the state as of `applied`, read later
            self._encoding = self._spawn(self._encode_snapshot(applied, encode, dict(self.members)))

    async def _compact(self, index: int, data: bytes | None) -> None:
        meta = self.raft.compact(index, data)
        deleted = await self.loop.run_in_executor(
            self._io, self.storage.compact, meta, [(b"members", packb(self.members))])
        self.metrics.snapshots_installed += 1
        log.info("compacted the Raft log up to %d (%d entries deleted%s)", index, deleted,
                 "" if data is None else f", with a snapshot of {len(data)} bytes for a follower")

    async def _encode_snapshot(self, applied: int, encode: Callable[[], bytes], members: dict) -> None:
        """On the I/O thread: the Readys go on meanwhile (inline, it stalled a busy leader for
        0.2-0.4 s per 100k keys)."""
        try:
            data = await self.loop.run_in_executor(self._io, lambda: wrap_snapshot(encode(), members))
        except Exception as exc:  # e.g. shutting down
            log.warning("taking a snapshot at %d failed: %s", applied, exc)
            return
        finally:
            self._encoding = None
        self._held_snapshot = (applied, data)
        self.metrics.snapshots_taken += 1  # handed over at the next Ready (a heartbeat's at the latest)
        log.info("took a snapshot at %d for a follower (%d bytes)", applied, len(data))

    # ============================================================================ housekeeping

    def _housekeeping(self, now: float) -> None:
        self._gc.tick(now)
        stale = [ctx for ctx, (_, t) in self._reads.items() if now - t > 2 * self.opts.request_timeout]
        for ctx in stale:
            fut = self._reads.pop(ctx)[0]
            if not fut.done():
                fut.cancel()
        if self._is_leader and self.raft.state == Role.LEADER:
            self._auto_compact(now)

    def _auto_compact(self, now: float) -> None:
        target = self._compaction.target(now, self.kv.revision)
        if target > self.kv.compact_revision and target <= self.kv.revision:
            log.info("auto-compaction: compacting at revision %d", target)
            self._propose_internal(compact_op(target))

    # ============================================================================ proposals

    def _require_leader(self) -> None:
        if self.raft.state != Role.LEADER or self._stopping:
            self._raise_not_leader()

    def _raise_not_leader(self, hint: str | None = None):
        leader = hint if hint is not None else self.raft.leader_id
        if leader == self.name:
            leader = None
        raise NotLeader.of(leader, self.members.get(leader) if leader else None)

    def _new_rid(self) -> int:
        return self._rid_base | next(self._rid)

    def _propose_data(self, data: bytes) -> None:
        try:
            self.raft.propose(data)
        except RaftNotLeader as exc:
            self._raise_not_leader(exc.leader_hint)
        except ProposalDropped as exc:
            raise wire.Unavailable(f"proposal dropped: {exc}") from None
        self.metrics.proposals += 1
        self._kick.set()

    def _propose_internal(self, req: dict) -> None:
        """A proposal nobody waits for (lease revocations, auto-compaction)."""
        try:
            self._propose_data(packb([self.name, 0, req]))
        except wire.WireError as exc:
            log.info("could not propose %s: %s", req.get("op"), exc)

    def _propose(self, req: dict) -> asyncio.Future:
        """Propose a client's request; the future gets its result once it applies here. A plain
        function, so the wire answers when the future is done, without a task per request."""
        self._require_leader()
        try:
            op = parse_request(req)  # fail malformed requests before they cost a log entry
            if self._disk_full and faults.grows_store(op):
                raise NoSpace.alarm(self.name)  # etcd's quota check, before the proposal
            rid = self._new_rid()
            data = packb([self.name, rid, req])
            check_request_size(len(data))
        except StoreError as err:
            raise to_wire_error(err) from None
        self._propose_data(data)
        return self._pending.add(rid, self.raft.term, self.loop.time(), op)

    # ============================================================================ reads

    def _flush_reads(self) -> None:
        fut = self._read_batch
        if fut is None:
            return
        self._read_batch = None
        ctx = os.urandom(8) + next(self._rid).to_bytes(8, "big")
        try:
            self.raft.read_index(ctx)
        except RaftError:
            if not fut.done():
                fut.set_exception(wire.Unavailable("no leader is known right now"))
            return
        self.metrics.read_index_requests += 1
        self._reads[ctx] = (fut, self.loop.time())

    def _on_read_state(self, rs: ReadState) -> None:
        entry = self._reads.pop(rs.ctx, None)
        if entry is not None and not entry[0].done():
            entry[0].set_result(rs.index)

    async def _read_barrier(self) -> None:
        """Wait until a linearizable read may be served locally (ReadIndex)."""
        loop = self.loop
        deadline = loop.time() + self.opts.request_timeout
        retry = max(0.3, 2 * self.opts.election_s)
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise wire.Unavailable("could not confirm a read index in time (no quorum or no leader)")
            if self._read_batch is None:
                self._read_batch = loop.create_future()
                self._kick.set()
            fut = self._read_batch
            try:
                index = await asyncio.wait_for(asyncio.shield(fut), min(retry, remaining))
                break
            except asyncio.TimeoutError:
                continue
            except asyncio.CancelledError:
                if fut.cancelled() and not asyncio.current_task().cancelling():
                    continue  # a stale read context was dropped: ask again
                raise
            except wire.Unavailable:
                await asyncio.sleep(min(max(0.02, self.opts.election_s / 2), max(0.0, deadline - loop.time())))
        if self.kv.applied_index >= index:
            return
        waiter = loop.create_future()
        heapq.heappush(self._applied_waiters, (index, next(self._waiter_seq), waiter))
        try:
            await asyncio.wait_for(waiter, max(0.001, deadline - loop.time()))
        except asyncio.TimeoutError:
            raise wire.Unavailable(f"this replica did not apply up to the read index {index} in time") from None

    def _wake_applied(self) -> None:
        applied = self.kv.applied_index
        heap = self._applied_waiters
        while heap and heap[0][0] <= applied:
            fut = heapq.heappop(heap)[2]
            if not fut.done():
                fut.set_result(None)

    # ============================================================================ the client API

    def _handlers(self) -> dict[str, Callable]:
        return {
            "raft": self.rpc_raft, "raft_snapshot": self.rpc_raft_snapshot,
            "put": self.rpc_put, "range": self.rpc_range, "delete_range": self.rpc_delete_range,
            "txn": self.rpc_txn, "compact": self.rpc_compact,
            "lease_grant": self.rpc_lease_grant, "lease_revoke": self.rpc_lease_revoke,
            "lease_keepalive": self.rpc_lease_keepalive, "lease_leases": self.rpc_lease_leases,
            "status": self.rpc_status, "member_list": self.member_list, "member_add": self.rpc_member_add,
            "member_remove": self.rpc_member_remove, "move_leader": self.rpc_move_leader,
            "watch": self.rpc_watch, "fault": self.rpc_fault, "defragment": self.rpc_defragment,
        }

    def rpc_put(self, key, value=b"", lease=0, prev_kv=False) -> asyncio.Future:
        return self._propose(put_op(key, value, lease=lease, prev_kv=prev_kv))

    async def rpc_range(self, key, range_end=None, revision=0, limit=0, count_only=False, keys_only=False,
                        serializable=False) -> dict:
        if type(serializable) is not bool:
            raise wire.Invalid("serializable: expected a boolean", {"field": "serializable"})
        if not serializable:
            await self._read_barrier()
        try:
            return self.kv.range(key, range_end, revision=revision, limit=limit, count_only=count_only,
                                 keys_only=keys_only)
        except StoreError as err:
            raise to_wire_error(err) from None

    def rpc_delete_range(self, key, range_end=None, prev_kv=False) -> asyncio.Future:
        req = {"op": "delete_range", "key": key}
        if range_end is not None:
            req["range_end"] = range_end
        if prev_kv is not False:
            req["prev_kv"] = prev_kv
        return self._propose(req)

    def rpc_txn(self, compare=(), success=(), failure=()) -> asyncio.Future:
        if not all(isinstance(x, (list, tuple)) for x in (compare, success, failure)):
            raise wire.Invalid("txn: compare, success and failure must be lists")
        return self._propose(txn_op(compare, success, failure))

    def rpc_compact(self, revision, physical=False) -> asyncio.Future:
        return self._propose({"op": "compact", "revision": revision})

    def rpc_lease_grant(self, ttl, id=0) -> asyncio.Future:
        self._require_leader()
        if type(id) is not int or id < 0 or id > MAX_LEASE_ID:
            raise wire.Invalid("id: expected a lease id (0: let the leader choose)", {"field": "id"})
        if id == 0:
            taken = {lid for lid, _, _ in self.kv.leases()}
            while id == 0 or id in taken:
                id = random.randint(1, MAX_LEASE_ID)
        return self._propose(lease_grant_op(id, ttl))

    def rpc_lease_revoke(self, id) -> asyncio.Future:
        return self._propose(lease_revoke_op(id))

    def rpc_lease_keepalive(self, id) -> dict:
        self._require_leader()
        if not self._is_leader:  # leading in the core, but the lease clock is not reset yet
            raise wire.Unavailable("this replica is just taking over as leader; retry")
        if type(id) is not int:
            raise wire.Invalid("id: expected an integer", {"field": "id"})
        ttl = self._leases.keepalive(id)
        return {"id": id, "ttl": ttl, "header": {"revision": self.kv.revision}}

    async def rpc_lease_leases(self) -> dict:
        await self._read_barrier()
        return {"header": {"revision": self.kv.revision},
                "leases": [{"id": lid, "ttl": ttl} for lid, ttl, _ in self.kv.leases()]}

    def rpc_status(self) -> dict:
        raft, kv, st = self.raft, self.kv, self.storage
        leader = raft.leader_id
        m = self.metrics
        return {
            "name": self.name, "endpoint": self.opts.listen, "pid": os.getpid(), "mode": self.mode,
            "role": str(raft.state), "term": raft.term, "leader": leader,
            "leader_endpoint": self.members.get(leader) if leader else None,
            "commit_index": raft.commit_index, "applied_index": kv.applied_index, "raft_index": raft.last_index,
            "snapshot_index": raft.log.snap_index,
            "revision": kv.revision, "compact_revision": kv.compact_revision,
            "db_size": self._db_size(),
            "fsyncs": st.fsyncs + m.extra_fsyncs, "persisted_entries": st.entries_written,
            "unsynced_writes": st.unsynced_writes, "unsafe_no_fsync": self.opts.unsafe_no_fsync,
            "proposals": m.proposals, "applied_entries": m.applied_entries, "readies": m.readies,
            "read_index_requests": m.read_index_requests,
            "snapshots_taken": m.snapshots_taken, "snapshots_installed": m.snapshots_installed,
            "snapshots_restored": m.snapshots_restored, "snapshots_sent": m.snapshots_sent,
            "msgs_sent": m.msgs_sent, "msgs_dropped": m.msgs_dropped, "bad_peer_input": m.bad_peer_input,
            "leader_changes": m.leader_changes, "watchers": len(self._watches), "leases": len(kv.leases()),
            "members": self.member_list(),
            "alarms": ["NOSPACE"] if self._disk_full else [],
            "faults": None if self._faults.healthy else faults.describe(self._faults),
        }

    def rpc_fault(self, **params) -> dict:
        """Injected faults (see the module docstring and `store.faults`)."""
        try:
            req = faults.parse_request(params)
        except ValueError as exc:
            raise wire.Invalid(f"fault: {exc}") from None
        if req.action == "power-loss":
            self._halt = True  # from now on nothing is written or sent: the power is off
            self._kick.set()
            self.loop.call_later(0.05, self._power_off)  # after the answer has left
            log.warning("power loss injected")
            return {"name": self.name, "faults": faults.describe(self._faults)}
        state = self._faults = faults.apply(self._faults, req)
        self._peers.faults = faults.peer_faults(state, self.name, list(self.members))
        self.disk.mode = state.disk
        self._disk_full = state.disk is faults.DiskMode.FULL
        if req.action != "list":
            log.warning("injected faults now: %s", faults.describe(state) if not state.healthy else "none")
        return {"name": self.name, "faults": faults.describe(state)}

    async def rpc_defragment(self) -> dict:
        """etcd's Maintenance.Defragment for this replica alone: a compaction (MVCC history, Raft
        log) only writes deletion markers, and LevelDB keeps them and the values they hide in its
        files until a background compaction happens to merge that key range down a level, which
        an idle range may never see; `backend.defragment` forces that everywhere. It runs on the
        I/O thread, so it never overlaps the database's close, and the Raft log's own compactions
        wait for it (etcd's defragment blocks even writes; here writes and reads go on)."""
        before = self._db_size()
        await self.loop.run_in_executor(self._io, defragment, self.db)
        after = self._db_size()
        log.info("defragmented: db size %d -> %d bytes", before, after)
        return {"name": self.name, "db_size_before": before, "db_size_after": after}

    def _db_size(self) -> int:
        """Bytes of the LevelDB files (etcd's dbSize is the file size too)."""
        total = 0
        try:
            with os.scandir(os.path.join(self.opts.data_dir, "db")) as it:
                for entry in it:
                    if entry.is_file():
                        total += entry.stat().st_size
        except OSError:
            pass
        return total

    def member_list(self) -> list[dict]:
        return [{"name": v, "endpoint": self.members.get(v)} for v in self.raft.voters]

    async def _conf_change(self, ctype: ConfChangeType, name, endpoint: str = "") -> dict:
        self._require_leader()
        if not isinstance(name, str) or not name or len(name) > 256:
            raise wire.Invalid("name: expected a member name", {"field": "name"})
        rid = self._new_rid()
        cc = ConfChange(ctype, name, packb([self.name, rid, endpoint]))
        try:
            self.raft.propose_conf_change(cc)
        except RaftNotLeader as exc:
            self._raise_not_leader(exc.leader_hint)
        except ProposalDropped as exc:
            raise wire.Unavailable(f"membership change dropped: {exc}") from None
        except ValueError as exc:
            raise wire.Conflict(str(exc), {"name": name}) from None
        if endpoint:
            self.members[name] = endpoint
        self.metrics.proposals += 1
        self._kick.set()
        return await self._pending.add(rid, self.raft.term, self.loop.time())

    async def rpc_member_add(self, name, endpoint) -> dict:
        if not isinstance(endpoint, str) or not endpoint:
            raise wire.Invalid("endpoint: expected a wire endpoint", {"field": "endpoint"})
        return await self._conf_change(ConfChangeType.ADD_NODE, name, endpoint)

    async def rpc_member_remove(self, name) -> dict:
        return await self._conf_change(ConfChangeType.REMOVE_NODE, name)

    async def rpc_move_leader(self, to) -> dict:
        self._require_leader()
        if to == self.name:
            return {"leader": self.name, "endpoint": self.opts.listen}
        try:
            self.raft.transfer_leadership(to)
        except RaftNotLeader as exc:
            self._raise_not_leader(exc.leader_hint)
        except (ValueError, TypeError) as exc:
            raise wire.Invalid(str(exc), {"field": "to"}) from None
        self._kick.set()
        raft = self.raft

        # etcd's MoveLeader waits its whole request timeout (5 s plus two election timeouts);
        # Raft abandons a transfer after one election timeout (a slow or busy target), so a
        # leader still in charge offers the hand-off again rather than giving up.
        deadline = self.loop.time() + self.opts.request_timeout + 2 * self.opts.election_s
        while raft.leader_id != to and self.loop.time() < deadline:
            if raft.state == Role.LEADER:
                if raft.lead_transferee is None and to in raft.voters:
                    raft.transfer_leadership(to)
                    self._kick.set()
            elif raft.leader_id is not None:
                break  # someone else leads now
            await self._wait_until(lambda: raft.leader_id == to, self.opts.election_s)
        if raft.leader_id != to:
            raise wire.Unavailable(f"leadership did not move to {to} in time", {"leader": raft.leader_id})
        return {"leader": to, "endpoint": self.members.get(to)}

    async def rpc_watch(self, key, range_end=None, start_revision=0, prev_kv=False) -> AsyncIterator[dict]:
        try:
            keys = parse_key_range(key, range_end)
        except StoreError as err:
            raise to_wire_error(err) from None
        if type(start_revision) is not int or start_revision < 0:
            raise wire.Invalid("start_revision: expected a non-negative integer", {"field": "start_revision"})
        if type(prev_kv) is not bool:
            raise wire.Invalid("prev_kv: expected a boolean", {"field": "prev_kv"})
        await self._read_barrier()
        kv = self.kv
        rev = kv.revision
        if start_revision and start_revision <= kv.compact_revision:
            raise to_wire_error(Compacted(kv.compact_revision))
        # no await since the read barrier: nothing after `rev` is missed
        w = self._watches.add(keys, prev_kv, max(start_revision, rev + 1))
        try:
            yield {"created": True, "header": {"revision": rev}}
            if start_revision and start_revision <= rev:
                async with contextlib.aclosing(history(kv, key, range_end, start_revision, rev,
                                                       prev_kv)) as items:
                    async for item in items:
                        yield item
            while True:
                yield await w.next()
        finally:
            self._watches.discard(w)
