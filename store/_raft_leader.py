"""Leader-side replication, commit, heartbeats and ReadIndex (mixed into store.raft.Raft)."""
from __future__ import annotations

from ._raft_progress import Progress, ProgressState
from ._raft_types import Entry, EntryKind, Message, MessageType, NotLeader, ProposalDropped, ReadState, Role

MT = MessageType


class LeaderMixin:
    """Leader behaviour of `Raft`; it relies on the state `Raft.__init__` sets up."""

    # --- sending ---------------------------------------------------------------------------

    def _send_timeout_now(self, to: str) -> None:
        self._send(Message(MT.TIMEOUT_NOW, to, self.id, self.term))

    def _send_append(self, to: str, send_if_empty: bool = True) -> bool:
        """Send `to` the entries it misses, or a snapshot if they were compacted.
        Returns whether a message was sent."""
        pr = self._prs[to]
        if pr.is_paused():
            return False
        log = self.log
        prev = pr.next - 1
        prev_term = log.term(prev)
        if prev_term is None:
            return self._send_snapshot(to, pr)
        ents = log.slice(pr.next, log.last_index + 1, self.cfg.max_size_per_msg) if prev < log.last_index else []
        if not ents and not send_if_empty:
            return False
        self._send(Message(MT.APP, to, self.id, self.term, log_term=prev_term, index=prev,
                           entries=ents or (), commit=log.committed))
        if ents:
            pr.sent_entries(ents[-1].index)
        elif pr.state == ProgressState.PROBE:
            pr.probe_sent = True
        return True

    def _send_snapshot(self, to: str, pr: Progress) -> bool:
        # Like etcd, do not ship a (possibly large) snapshot to a peer that seems down.
        if not pr.recent_active:
            return False
        if self._snapshot is None:
            self._snapshot_wanted = True
            return False
        self._send(Message(MT.SNAP, to, self.id, self.term, snapshot=self._snapshot))
        pr.become_snapshot(self._snapshot.meta.index)
        return True

    def _bcast_heartbeat(self) -> None:
        ctx = self._read_only.last_ctx()
        committed = self.log.committed
        for to, pr in self._prs.items():
            # Never announce a commit index beyond what the follower is known to hold.
            self._send(Message(MT.HEARTBEAT, to, self.id, self.term,
                               commit=min(pr.match, committed), context=ctx))

    # --- ticks ------------------------------------------------------------------------------

    def _tick_leader(self) -> None:
        self._heartbeat_elapsed += 1
        self._election_elapsed += 1
        if self._election_elapsed >= self.cfg.election_ticks:
            self._election_elapsed = 0
            if self.cfg.check_quorum and not self._quorum_active():
                self._become_follower(self.term, None)
                return
            self._lead_transferee = None  # a transfer must finish within one election timeout
        for pr in self._prs.values():
            if pr.state == ProgressState.SNAPSHOT:
                pr.snapshot_elapsed += 1
                if pr.snapshot_elapsed >= self.cfg.snapshot_retry_ticks:
                    pr.become_probe()
        if self._heartbeat_elapsed >= self.cfg.heartbeat_ticks:
            self._heartbeat_elapsed = 0
            self._bcast_heartbeat()

    def _quorum_active(self) -> bool:
        """CheckQuorum (thesis §6.2): did a quorum answer us during the last election timeout?"""
        active = sum(1 for v in self._voters if v == self.id or self._prs[v].recent_active)
        for pr in self._prs.values():
            pr.recent_active = False
        return active >= self._quorum()

    # --- leader handlers -------------------------------------------------------------------

    def _check_can_propose(self) -> None:
        if self.state != Role.LEADER:
            raise NotLeader(self.leader_id)
        if self._lead_transferee is not None:
            raise ProposalDropped(f"leadership transfer to {self._lead_transferee} in progress")

    def _committed_in_term(self) -> bool:
        return self.log.term(self.log.committed) == self.term

    def _append_entry(self, kind: EntryKind, data: bytes) -> None:
        e = Entry(self.term, self.log.last_index + 1, kind, data)
        self.log.append((e,))
        if kind == EntryKind.CONF_CHANGE:
            self._apply_conf_entry(e)  # in force from now on, on the leader too
        self._bcast_append_pending = True
        self._maybe_commit()

    def _maybe_commit(self) -> bool:
        """Advance commit to the highest index a quorum holds, but only if that entry is of our
        term (paper §5.4.2 / Figure 8: replica counting never commits older-term entries). The
        leader holds only what it has persisted (`log.stable`): its APPs leave before its own
        write is done, so a commit may rest on followers alone but never on a copy that a crash
        of the leader would lose."""
        if not self._voters:
            return False
        durable = self.log.stable
        matches = sorted(durable if v == self.id else self._prs[v].match for v in self._voters)
        mci = matches[(len(matches) - 1) // 2]
        if mci <= self.log.committed or self.log.term(mci) != self.term:
            return False
        self.log.commit_to(mci)
        self._bcast_append_pending = True  # followers learn the new commit index
        if self._reads_waiting:
            waiting, self._reads_waiting = self._reads_waiting, []
            for ctx, requester in waiting:
                self._leader_read_index(ctx, requester)
        if self.id not in self._voter_set and self.log.committed >= self._conf_index:
            self._step_down_removed()
        return True

    def _step_down_removed(self) -> None:
        # Thesis §4.2.2: a leader removed from the configuration steps down once the removal is
        # committed. Let the most up-to-date remaining member start the next election at once.
        for to, pr in self._prs.items():
            if pr.match == self.log.last_index:
                self._send_timeout_now(to)
                break
        self._become_follower(self.term, None)

    def _on_append_resp(self, m: Message) -> None:
        pr = self._prs.get(m.frm)
        if pr is None:
            return
        pr.recent_active = True
        if m.reject:
            self._on_append_reject(m, pr)
            return
        if m.index > self.log.last_index:
            self.invalid_messages += 1
            return
        was_paused = pr.is_paused()
        if not pr.maybe_update(m.index) and not (pr.state == ProgressState.PROBE and m.index == pr.match):
            return
        pr.stalled_heartbeats = 0
        if pr.state == ProgressState.PROBE:
            pr.become_replicate()
        elif pr.state == ProgressState.SNAPSHOT and pr.match >= pr.pending_snapshot:
            pr.become_probe()
            pr.become_replicate()
        elif pr.state == ProgressState.REPLICATE:
            pr.inflights.free_le(m.index)
        if self._maybe_commit():
            if self.state != Role.LEADER:
                return  # we committed our own removal
        elif was_paused:
            self._send_append(m.frm)
        while self._send_append(m.frm, send_if_empty=False):
            pass  # pipelining: fill the in-flight window
        if m.frm == self._lead_transferee and pr.match == self.log.last_index:
            self._send_timeout_now(m.frm)

    def _on_append_reject(self, m: Message, pr: Progress) -> None:
        next_probe = m.hint
        if m.hint_term > 0:
            # Skip every index whose term in our log cannot match the follower's (§5.3).
            next_probe, _ = self.log.find_conflict_by_term(m.hint, m.hint_term)
        if pr.maybe_decr_to(m.index, next_probe):
            if pr.state == ProgressState.REPLICATE:
                pr.become_probe()
            self._send_append(m.frm)

    def _on_heartbeat_resp(self, m: Message) -> None:
        pr = self._prs.get(m.frm)
        if pr is None:
            return
        pr.recent_active = True
        pr.probe_sent = False  # heartbeat answers double as the probe retry timer
        if m.reject and m.index < pr.match:
            pr.lost_log(m.index)
        last = self.log.last_index
        if pr.state == ProgressState.REPLICATE:
            if pr.inflights.full():
                pr.inflights.free_first()  # let at least one APP through per heartbeat
            if pr.match < last and pr.next > last:
                # Everything was sent but not all acknowledged: after a few heartbeat rounds,
                # assume the APPs were lost and probe again.
                pr.stalled_heartbeats += 1
                if pr.stalled_heartbeats >= self.cfg.stall_heartbeats:
                    pr.stalled_heartbeats = 0
                    pr.become_probe()
            self._send_append(m.frm, send_if_empty=False)
        elif pr.match < last:
            self._send_append(m.frm)
        if m.context:
            self._on_read_ack(m.context, m.frm)

    def _leader_read_index(self, ctx: bytes, requester: str) -> None:
        if not self._committed_in_term():
            # Before its no-op commits, a new leader's commit index may be behind the real one.
            self._reads_waiting.append((ctx, requester))
            return
        if self._voters == (self.id,):
            self._respond_read(ctx, self.log.committed, requester)
            return
        if self._read_only.add(ctx, self.log.committed, requester):
            self._on_read_ack(ctx, self.id)
            self._bcast_heartbeat_pending = True

    def _on_read_index_req(self, m: Message) -> None:
        self._leader_read_index(m.context, m.frm)

    def _on_read_ack(self, ctx: bytes, frm: str) -> None:
        acks = self._read_only.ack(ctx, frm)
        if acks is None or len(acks & self._voter_set) < self._quorum():
            return
        for req in self._read_only.release_through(ctx):
            self._respond_read(req.ctx, req.index, req.requester)

    def _respond_read(self, ctx: bytes, index: int, requester: str) -> None:
        if requester == self.id:
            self._read_states.append(ReadState(ctx, index))
        else:
            self._send(Message(MT.READ_INDEX_RESP, requester, self.id, self.term, index=index, context=ctx))
