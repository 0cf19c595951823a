"""Elections: timeouts, PreVote, votes and the term rules (mixed into store.raft.Raft)."""
from __future__ import annotations

from ._raft_types import CAMPAIGN_TRANSFER, Message, MessageType, Role

MT = MessageType
_PENDING, _WON, _LOST = 0, 1, 2


class ElectionMixin:
    """Election behaviour of `Raft`; it relies on the state `Raft.__init__` sets up."""

    # --- ticks ------------------------------------------------------------------------------

    def _tick_election(self) -> None:
        self._election_elapsed += 1
        if self._election_elapsed >= self._randomized_timeout and self._promotable():
            self._election_elapsed = 0
            self._hup()

    # --- elections ------------------------------------------------------------------------

    def _hup(self, transfer: bool = False) -> None:
        if self.state == Role.LEADER or not self._promotable():
            return
        if self.cfg.pre_vote and not transfer:
            self._become_pre_candidate()
            self._solicit(MT.PRE_VOTE, self.term + 1, b"")
        else:
            self._become_candidate()
            self._solicit(MT.VOTE, self.term, CAMPAIGN_TRANSFER if transfer else b"")

    def _solicit(self, type: MessageType, term: int, ctx: bytes) -> None:
        if self._poll(self.id, True) == _WON:
            self._win()
            return
        last_index, last_term = self.log.last_index, self.log.last_term
        for v in self._voters:
            if v != self.id:
                self._send(Message(type, v, self.id, term, log_term=last_term, index=last_index, context=ctx))

    def _poll(self, frm: str, granted: bool) -> int:
        self._votes.setdefault(frm, granted)  # a node's first answer in a campaign counts
        # Only answers of current voters count (the configuration may change mid-campaign).
        yes = sum(1 for v, g in self._votes.items() if g and v in self._voter_set)
        no = sum(1 for v, g in self._votes.items() if not g and v in self._voter_set)
        q = self._quorum()
        if yes >= q:
            return _WON
        if no > len(self._voters) - q:
            return _LOST
        return _PENDING

    def _win(self) -> None:
        if self.state == Role.PRE_CANDIDATE:
            self._become_candidate()
            self._solicit(MT.VOTE, self.term, b"")
        else:
            self._become_leader()

    def _in_lease(self) -> bool:
        return (self.cfg.check_quorum and self.leader_id is not None
                and self._election_elapsed < self.cfg.election_ticks)

    def _step_term(self, m: Message) -> bool:
        """Term rules shared by every role (paper §5.1, plus PreVote and the leader lease).
        Returns whether the message should still be handled by the role's handler."""
        if m.term > self.term:
            if m.type in (MT.VOTE, MT.PRE_VOTE) and m.context != CAMPAIGN_TRANSFER and self._in_lease():
                # Thesis §4.2.3: we heard from a live leader recently, so this candidate is most
                # likely a disconnected or removed node; ignoring it keeps the leader in place.
                return False
            if m.type == MT.PRE_VOTE or (m.type == MT.PRE_VOTE_RESP and not m.reject):
                return True  # pre-votes are asked and granted for a future term; ours is unchanged
            if m.type in (MT.APP, MT.HEARTBEAT, MT.SNAP):
                self._become_follower(m.term, m.frm)
            else:
                # A higher term alone proves no live leader: keep counting toward our own
                # election (paper Figure 2: only a current leader or a granted vote resets the
                # timer), or a candidate with a stale log that keeps retrying would keep the
                # only electable nodes from ever timing out.
                elapsed = self._election_elapsed
                self._become_follower(m.term, None)
                self._election_elapsed = elapsed
            return True
        if m.term < self.term:
            if (self.cfg.check_quorum or self.cfg.pre_vote) and m.type in (MT.APP, MT.HEARTBEAT):
                # A leader of an older term. With PreVote/CheckQuorum its followers may never
                # bump their term through an election, so tell it our term to make it step down.
                self._reply(m, MT.APP_RESP)
            elif m.type == MT.PRE_VOTE:
                self._reply(m, MT.PRE_VOTE_RESP, reject=True)
            return False
        return True

    def _on_vote_request(self, m: Message) -> None:
        pre = m.type == MT.PRE_VOTE
        resp = MT.PRE_VOTE_RESP if pre else MT.VOTE_RESP
        can_vote = (self.vote == m.frm or (self.vote is None and self.leader_id is None)
                    or (pre and m.term > self.term))
        if can_vote and self.log.is_up_to_date(m.index, m.log_term):
            # The grant carries the campaign's term, so a pre-candidate can tell it apart.
            self._reply(m, resp, term=m.term)
            if not pre:
                self.vote = m.frm
                self._election_elapsed = 0
        else:
            self._reply(m, resp, reject=True)

    def _on_vote_response(self, m: Message) -> None:
        if self.state == Role.PRE_CANDIDATE:
            if m.type != MT.PRE_VOTE_RESP or (not m.reject and m.term != self.term + 1):
                return
        elif m.type != MT.VOTE_RESP:
            return
        result = self._poll(m.frm, not m.reject)
        if result == _WON:
            self._win()
        elif result == _LOST:
            self._become_follower(self.term, None)
