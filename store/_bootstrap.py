"""How a replica starts: restart from its Raft state, join an existing cluster, or bootstrap a
fresh one (decided once, when the data directory holds no Raft state; see "Bootstrap or join"
in `store.server`), and the `Raft` it starts with."""
from __future__ import annotations

import asyncio
import logging
import os
import random

from kubemu import wire

from ._peers import FRAME, peer_credentials
from .options import Options
from .raft import Config, Raft
from .raftlog import RaftStorage

log = logging.getLogger("store.server")

PROBE_TIMEOUT_S = 0.5


async def choose_mode(opts: Options, storage: RaftStorage) -> str:
    """"restart", "join" or "bootstrap"."""
    if not storage.is_empty():
        return "restart"
    if opts.join:
        return "join"
    other = await _probe_initialised_peer(opts)
    if other is not None:
        log.warning("data directory is empty but %s is past the bootstrap entries: this is not a "
                    "fresh cluster, joining instead of bootstrapping (start with --join to say so)", other)
        return "join"
    return "bootstrap"


async def _probe_initialised_peer(opts: Options) -> str | None:
    others = {n: ep for n, ep in opts.peers.items() if n != opts.name}
    if not others:
        return None
    credentials = peer_credentials(opts.name, opts.wire_secrets)
    clients = {n: wire.Client(ep, timeout=PROBE_TIMEOUT_S, max_frame=FRAME, credentials=credentials)
               for n, ep in others.items()}
    try:
        results = await asyncio.gather(*(c.call("status", {}) for c in clients.values()), return_exceptions=True)
    finally:
        for c in clients.values():
            await c.close()
    fresh = len(opts.peers)  # a fresh member holds just the bootstrap entries, at term <= 1
    for n, res in zip(clients, results):
        if isinstance(res, dict) and (res.get("raft_index", 0) > fresh or res.get("term", 0) > 1):
            return f"{n} (log index {res.get('raft_index')}, term {res.get('term')})"
    return None


def create_raft(opts: Options, mode: str, storage: RaftStorage, applied: int) -> Raft:
    """The Raft core for `mode`; on restart, from the persisted state (entries after `applied`
    are handed out again)."""
    cfg = Config(election_ticks=opts.election_ticks, heartbeat_ticks=opts.heartbeat_ticks)
    rng = random.Random(int.from_bytes(os.urandom(8), "big"))
    if mode == "restart":
        state = storage.load(applied=applied)
        return Raft(opts.name, [], state, cfg, rng)
    peers = sorted(opts.peers) if mode == "bootstrap" else []
    return Raft(opts.name, peers, None, cfg, rng)
