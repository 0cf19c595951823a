"""Follower-side handlers: appends, heartbeats, snapshots (mixed into store.raft.Raft)."""
from __future__ import annotations

from ._raft_types import Entry, EntryKind, Message, MessageType, ReadState, Role, Snapshot

MT = MessageType


class FollowerMixin:
    """Follower behaviour of `Raft`; it relies on the state `Raft.__init__` sets up."""

    # --- follower handlers ---------------------------------------------------------------

    def _heard_from_leader(self, m: Message) -> None:
        self._election_elapsed = 0
        self.leader_id = m.frm

    def _on_append(self, m: Message) -> None:
        self._heard_from_leader(m)
        log = self.log
        if m.index < log.committed:
            # Old news (a duplicate or reordered APP): everything up to our commit index matches
            # the leader's log by Leader Completeness, so say we hold that much.
            self._reply(m, MT.APP_RESP, index=log.committed)
            return
        if not log.match_term(m.index, m.log_term):
            hint, hint_term = log.find_conflict_by_term(m.index, m.log_term)
            self._reply(m, MT.APP_RESP, index=m.index, reject=True, hint=hint, hint_term=hint_term)
            return
        last_new, conflict = log.maybe_append(m.index, m.entries)
        if conflict:
            self._after_follower_append(m.entries, conflict)
        # Paper Figure 2: commit up to the leader's commit, but not past what this message
        # proved we hold (later entries of ours may still be stale).
        log.commit_to(min(m.commit, last_new))
        self._reply(m, MT.APP_RESP, index=last_new)

    def _after_follower_append(self, entries: list[Entry], conflict: int) -> None:
        if conflict <= self._conf_index:
            self._recompute_conf()  # a configuration entry was truncated: roll back to the log's
            return
        for e in entries:
            if e.index >= conflict and e.kind == EntryKind.CONF_CHANGE:
                self._apply_conf_entry(e)

    def _on_heartbeat(self, m: Message) -> None:
        self._heard_from_leader(m)
        last = self.log.last_index
        self.log.commit_to(min(m.commit, last))
        # The leader never announces a commit index beyond what we acknowledged holding. If we
        # hold less, our storage was lost (a wiped node): say how far we got, so that the
        # leader replicates to us again instead of trusting its match index forever.
        lost = m.commit > last
        self._reply(m, MT.HEARTBEAT_RESP, context=m.context, reject=lost, index=last if lost else 0)

    def _on_snapshot(self, m: Message) -> None:
        self._heard_from_leader(m)
        if self._restore(m.snapshot):
            self._reply(m, MT.APP_RESP, index=self.log.last_index)
        else:
            self._reply(m, MT.APP_RESP, index=self.log.committed)

    def _restore(self, snap: Snapshot) -> bool:
        log = self.log
        if snap.meta.index <= log.committed:
            return False
        if log.match_term(snap.meta.index, snap.meta.term):
            # We hold the snapshot's last entry: our log already agrees, just commit up to it.
            log.commit_to(snap.meta.index)
            return False
        log.restore(snap)
        self._snapshot = snap
        self._snap_voters = set(snap.meta.voters)
        self._recompute_conf()
        return True

    def _on_timeout_now(self, m: Message) -> None:
        # The leader asks us to take over (leadership transfer): campaign now, skipping PreVote.
        self._hup(transfer=True)

    def _on_read_index_resp(self, m: Message) -> None:
        self._read_states.append(ReadState(m.context, m.index))

    def _candidate_on_leader_msg(self, m: Message) -> None:
        # A leader exists for our term (or, for a pre-candidate, the current one): follow it.
        self._become_follower(m.term, m.frm)
        self._HANDLERS[Role.FOLLOWER][m.type](self, m)
