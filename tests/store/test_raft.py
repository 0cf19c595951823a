"""Unit tests of store/raft.py, the pure Raft core: each test drives a few nodes by hand
through a tiny in-memory network that honours the Ready contract (persist, send, apply)."""
from __future__ import annotations

import random

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.raft import (CAMPAIGN_TRANSFER, ConfChange, ConfChangeType, Config, Entry, EntryKind, HardState,
                        Message, MessageType, NotLeader, PersistentState, ProposalDropped, Raft, ReadState, Role,
                        Snapshot, SnapshotMeta)

from .raftsim import Disk

MT = MessageType
ADD, REMOVE = ConfChangeType.ADD_NODE, ConfChangeType.REMOVE_NODE


def boot(ids) -> list[Entry]:
    """The log every bootstrap member starts with: one committed ADD_NODE per peer, term 1."""
    return [Entry(1, i + 1, EntryKind.CONF_CHANGE, ConfChange(ADD, p).encode()) for i, p in enumerate(sorted(ids))]


def ents(term: int, lo: int, hi: int) -> list[Entry]:
    return [Entry(term, i, EntryKind.NORMAL, b"%d@%d" % (i, term)) for i in range(lo, hi + 1)]


class Net:
    """Nodes plus a network that can isolate nodes and drop chosen messages."""

    def __init__(self, ids, cfg: Config | None = None, states: dict | None = None, seed: int = 0):
        self.ids = list(ids)
        self.cfg = cfg or Config()
        self.rng = random.Random(seed)
        self.nodes: dict[str, Raft] = {}
        self.disks: dict[str, Disk] = {}
        self.applied: dict[str, list[Entry]] = {}
        self.read_states: dict[str, list[ReadState]] = {}
        self.restored: dict[str, list[Snapshot]] = {}
        self.isolated: set[str] = set()
        self.drop = lambda m: False
        self.sent: list[Message] = []
        for i in self.ids:
            self.add(i, self.ids, (states or {}).get(i))

    def add(self, nid: str, peers, state: PersistentState | None = None) -> Raft:
        self.nodes[nid] = Raft(nid, list(peers), state, self.cfg, random.Random(self.rng.random()))
        self.disks[nid] = Disk()
        if state is not None:
            self.disks[nid].hard, self.disks[nid].entries = state.hard_state, list(state.entries)
        self.applied[nid], self.read_states[nid], self.restored[nid] = [], [], []
        return self.nodes[nid]

    def restart(self, nid: str, wipe: bool = False) -> Raft:
        """Restart from what the node persisted; `wipe` loses its disk: it then starts empty,
        like a node joining (no bootstrap), and must be brought back by the leader."""
        if wipe:
            self.disks[nid] = Disk()
        state = None if wipe else self.disks[nid].state()
        self.nodes[nid] = Raft(nid, [] if wipe else self.ids, state, self.cfg, random.Random(self.rng.random()))
        return self.nodes[nid]

    def __getitem__(self, nid: str) -> Raft:
        return self.nodes[nid]

    def process(self, nid: str) -> list[Message]:
        r = self.nodes[nid]
        if not r.has_ready():
            return []
        rd = r.ready()
        self.disks[nid].persist(rd)
        if rd.snapshot is not None:
            self.restored[nid].append(rd.snapshot)
        self.applied[nid].extend(rd.committed_entries)
        self.read_states[nid].extend(rd.read_states)
        r.advance(rd)
        return rd.early_messages + rd.messages

    def deliverable(self, m: Message) -> bool:
        return (m.frm not in self.isolated and m.to not in self.isolated and m.to in self.nodes
                and not self.drop(m))

    def flush(self, limit: int = 10000) -> None:
        """Process Readies and deliver messages until the network is quiet (no ticks). A Ready
        that sends nothing can still lead to another (a leader's own write, once persisted,
        may commit), so quiet means no node has a Ready left."""
        for _ in range(limit):
            if not any(r.has_ready() for r in self.nodes.values()):
                return
            msgs = [m for nid in list(self.nodes) for m in self.process(nid)]
            self.sent.extend(msgs)
            for m in msgs:
                if self.deliverable(m):
                    self.nodes[m.to].step(m)
        raise AssertionError("network never went quiet")

    def tick(self, n: int = 1, only=None) -> None:
        for _ in range(n):
            for nid, r in self.nodes.items():
                if only is None or nid in only:
                    r.tick()
            self.flush()

    def elect(self, nid: str) -> Raft:
        """Let `nid` time out first, then run the network until it leads."""
        r = self.nodes[nid]
        for _ in range(2 * self.cfg.election_ticks):
            r.tick()
            if r.state != Role.FOLLOWER:
                break
        self.flush()
        assert r.state == Role.LEADER, r
        return r

    def leader(self) -> Raft | None:
        leaders = [r for r in self.nodes.values() if r.state == Role.LEADER and r.id not in self.isolated]
        return max(leaders, key=lambda r: r.term) if leaders else None

    def propose(self, nid: str, *datas: bytes) -> None:
        for d in datas:
            self.nodes[nid].propose(d)
        self.flush()

    def data(self, nid: str) -> list[bytes]:
        return [e.data for e in self.applied[nid] if e.kind == EntryKind.NORMAL]


def ids(n: int) -> list[str]:
    return [f"n{i}" for i in range(n)]


# --- bootstrap and elections ---------------------------------------------------------------

def test_bootstrap_log_is_identical_and_committed():
    net = Net(ids(3))
    for r in net.nodes.values():
        assert r.term == 1 and r.commit_index == 3 and r.voters == ("n0", "n1", "n2")
        assert r.log.entries_after(0) == boot(ids(3))
    net.flush()
    assert all(len(net.applied[i]) == 3 for i in ids(3))  # the shell sees the initial members


def test_single_node_elects_itself_and_commits():
    net = Net(["solo"])
    r = net.elect("solo")
    assert r.term == 2 and r.leader_id == "solo"
    net.propose("solo", b"x")
    assert net.data("solo") == [b"x"]
    assert r.commit_index == r.applied == r.last_index


def test_three_nodes_elect_one_leader():
    net = Net(ids(3))
    lead = net.elect("n0")
    assert lead.term == 2
    for nid in ("n1", "n2"):
        assert net[nid].state == Role.FOLLOWER and net[nid].leader_id == "n0" and net[nid].term == 2
    # The new leader's no-op commits and reaches everyone.
    assert all(r.commit_index == 4 for r in net.nodes.values())
    assert net.disks["n1"].entries[-1] == Entry(2, 4, EntryKind.NOOP, b"")


def test_randomized_election_timeout_in_range():
    cfg = Config(election_ticks=10)
    seen = set()
    for seed in range(200):
        r = Raft("a", ["a", "b", "c"], None, cfg, random.Random(seed))
        for t in range(1, 21):
            r.tick()
            if r.state != Role.FOLLOWER:
                seen.add(t)
                break
    assert min(seen) >= 10 and max(seen) <= 19 and len(seen) > 5


def test_prevote_does_not_raise_terms_of_a_healthy_cluster():
    net = Net(ids(3))
    net.elect("n0")
    net.isolated.add("n2")
    net.tick(60)  # n2 keeps timing out and pre-campaigning, unheard
    assert net["n2"].term == 2 and net["n2"].state == Role.PRE_CANDIDATE
    net.isolated.clear()
    net.tick(5)
    assert net["n0"].state == Role.LEADER and net["n0"].term == 2
    assert net["n2"].leader_id == "n0" and net["n2"].term == 2


def test_without_prevote_a_rejoining_node_disrupts_the_leader():
    net = Net(ids(3), Config(pre_vote=False, check_quorum=False))
    net.elect("n0")
    net.isolated.add("n2")
    net.tick(60)
    assert net["n2"].term > 2  # it kept bumping its term
    net.isolated.clear()
    net.tick(60)
    assert net.leader().term > 2  # the old leader was deposed


def test_prevote_granted_without_changing_the_voters_term_or_vote():
    r = Raft("b", [], PersistentState(HardState(term=3), boot("abc")), Config(check_quorum=False))
    r.step(Message(MT.PRE_VOTE, "b", "a", term=4, index=3, log_term=1))
    rd = r.ready()
    assert [(m.type, m.term, m.reject) for m in rd.messages] == [(MT.PRE_VOTE_RESP, 4, False)]
    assert r.term == 3 and r.vote is None and rd.hard_state is None


# --- vote rules -------------------------------------------------------------------------------

def _voter(term: int = 3) -> Raft:
    # Log: bootstrap (1..3, term 1), then index 4 term 2 and index 5 term 3.
    return Raft("b", [], PersistentState(HardState(term=term), boot("abc") + ents(2, 4, 4) + ents(3, 5, 5)))


@pytest.mark.parametrize("index, log_term, granted", [
    (10, 2, False),  # longer log but older last term: less up to date
    (4, 3, False),  # same last term, shorter
    (5, 3, True),  # identical
    (6, 3, True),  # same last term, longer
    (1, 4, True),  # newer last term wins whatever the length
])
def test_vote_requires_an_up_to_date_log(index, log_term, granted):
    r = _voter()
    r.step(Message(MT.VOTE, "b", "a", term=4, index=index, log_term=log_term))
    (resp,) = r.ready().messages
    assert resp.type == MT.VOTE_RESP and resp.reject == (not granted)
    assert r.term == 4 and r.vote == ("a" if granted else None)


def test_one_vote_per_term_and_the_vote_is_persisted_with_the_reply():
    r = _voter()
    r.step(Message(MT.VOTE, "b", "a", term=4, index=5, log_term=3))
    r.step(Message(MT.VOTE, "b", "c", term=4, index=5, log_term=3))
    r.step(Message(MT.VOTE, "b", "a", term=4, index=5, log_term=3))  # a retry gets the same answer
    rd = r.ready()
    assert [(m.to, m.reject) for m in rd.messages] == [("a", False), ("c", True), ("a", False)]
    assert rd.hard_state == HardState(4, "a", 0)  # persisted in the same Ready, before sending


def test_lease_ignores_votes_unless_leadership_transfer():
    net = Net(ids(3))
    net.elect("n0")
    f = net["n1"]
    f.step(Message(MT.VOTE, "n1", "n2", term=9, index=100, log_term=2))
    f.step(Message(MT.PRE_VOTE, "n1", "n2", term=9, index=100, log_term=2))
    assert f.term == 2 and not f.has_ready()  # ignored: it heard from n0 within the timeout
    f.step(Message(MT.VOTE, "n1", "n2", term=9, index=100, log_term=2, context=CAMPAIGN_TRANSFER))
    assert f.term == 9 and f.vote == "n2"


def test_a_rejected_higher_term_candidate_does_not_reset_the_election_timer():
    net = Net(ids(3), Config(pre_vote=False, check_quorum=False))
    net.elect("n0")
    f = net["n1"]
    for _ in range(5):
        f.tick()
    f.step(Message(MT.VOTE, "n1", "n2", term=7, index=1, log_term=1))  # stale log: rejected
    assert f.term == 7 and f.vote is None and f._election_elapsed == 5
    f.step(Message(MT.VOTE, "n1", "n0", term=7, index=4, log_term=2))  # granted: resets
    assert f.vote == "n0" and f._election_elapsed == 0


def test_lower_term_append_gets_our_term_back_so_a_stale_leader_steps_down():
    net = Net(ids(3))
    lead = net.elect("n0")
    net["n1"].step(Message(MT.VOTE, "n1", "n2", term=5, index=10, log_term=5, context=CAMPAIGN_TRANSFER))
    net.flush()
    net.tick(1, only={"n0"})  # heartbeat at term 2 -> n1 answers with term 5
    assert lead.state == Role.FOLLOWER and lead.term == 5


# --- log replication and conflicts ------------------------------------------------------------

def _follower(extra: list[Entry], term: int = 2, commit: int = 3) -> Raft:
    """Node f of {L, f, g}: bootstrap entries 1..3 (term 1, committed), then `extra`."""
    return Raft("f", [], PersistentState(HardState(term=term, commit=commit), boot(["L", "f", "g"]) + extra))


def test_follower_truncates_a_conflicting_suffix():
    f = _follower(ents(2, 4, 6))
    assert f.last_index == 6
    f.step(Message(MT.APP, "f", "L", term=3, index=3, log_term=1, entries=ents(3, 4, 5), commit=3))
    assert [f.log.term(i) for i in (4, 5)] == [3, 3] and f.last_index == 5
    rd = f.ready()
    assert [e.index for e in rd.entries] == [4, 5]  # the shell rewrites from index 4
    assert rd.messages[0].type == MT.APP_RESP and rd.messages[0].index == 5 and not rd.messages[0].reject


def test_reordered_old_append_does_not_truncate_newer_entries():
    f = _follower(ents(2, 4, 6))
    f.step(Message(MT.APP, "f", "L", term=2, index=3, log_term=1, entries=ents(2, 4, 4), commit=3))
    assert f.last_index == 6
    (resp,) = f.ready().messages
    assert resp.index == 4 and not resp.reject


def test_append_below_the_commit_index_is_answered_without_touching_the_log():
    f = _follower(ents(2, 4, 6), commit=5)
    f.step(Message(MT.APP, "f", "L", term=3, index=4, log_term=2, entries=ents(3, 5, 5), commit=5))
    assert f.log.term(5) == 2 and f.last_index == 6
    (resp,) = f.ready().messages
    assert not resp.reject and resp.index == 5  # "I hold everything up to my commit index"


def test_follower_commit_is_limited_to_the_last_entry_the_message_proved():
    # Stale entries 5..6 of term 2; the leader (term 3) sends only entry 4 with commit 6.
    f = _follower(ents(2, 4, 6))
    f.step(Message(MT.APP, "f", "L", term=3, index=3, log_term=1, entries=ents(2, 4, 4), commit=6))
    assert f.commit_index == 4  # not 6: entries 5..6 may differ from the leader's


def test_reject_carries_a_hint_for_fast_backtracking():
    # Follower: 4..30 term 2, 31..40 term 3. Leader probes at index 50 term 5.
    f = _follower(ents(2, 4, 30) + ents(3, 31, 40), term=5)
    f.step(Message(MT.APP, "f", "L", term=5, index=50, log_term=5, commit=3))
    (resp,) = f.ready().messages
    assert resp.reject and (resp.index, resp.hint, resp.hint_term) == (50, 40, 3)


def test_fast_backtracking_needs_few_round_trips():
    ab = boot(ids(3))
    states = {
        "n0": PersistentState(HardState(term=4, commit=3), ab + ents(4, 4, 40)),
        "n1": PersistentState(HardState(term=4, commit=3), ab + ents(2, 4, 30) + ents(3, 31, 60)),
        "n2": PersistentState(HardState(term=4, commit=3), ab + ents(4, 4, 40)),
    }
    net = Net(ids(3), states=states)
    net.elect("n0")
    rejects = [m for m in net.sent if m.type == MT.APP_RESP and m.frm == "n1" and m.reject]
    assert len(rejects) <= 3  # one per term, not one per entry
    assert net["n1"].log.entries_after(3) == net["n0"].log.entries_after(3)


def test_batching_many_proposals_share_one_append_per_follower():
    net = Net(ids(3))
    lead = net.elect("n0")
    for i in range(50):
        lead.propose(b"p%d" % i)
    rd = lead.ready()
    assert rd.messages == []  # the leader's APPs need not wait for its own disk
    apps = [m for m in rd.early_messages if m.type == MT.APP]
    assert sorted(m.to for m in apps) == ["n1", "n2"]
    assert all(len(m.entries) == 50 for m in apps) and len(rd.entries) == 50
    lead.advance(rd)


def test_max_size_per_msg_splits_batches_and_pipelines_within_the_inflight_window():
    net = Net(ids(3), Config(max_size_per_msg=1, max_inflight_msgs=3))
    lead = net.elect("n0")
    for i in range(10):
        lead.propose(b"p%d" % i)
    rd = lead.ready()
    to_n1 = [m for m in rd.early_messages if m.type == MT.APP and m.to == "n1"]
    # One entry per message, three in flight without any acknowledgement (pipelining).
    assert [[e.index for e in m.entries] for m in to_n1] == [[5], [6], [7]]
    net.disks["n0"].persist(rd)
    lead.advance(rd)
    for m in rd.early_messages:
        net[m.to].step(m)
    net.flush()
    assert net.data("n1") == [b"p%d" % i for i in range(10)]


def test_heartbeats_never_announce_a_commit_beyond_the_followers_match():
    net = Net(ids(3))
    lead = net.elect("n0")
    net.isolated.add("n2")
    net.propose("n0", b"a", b"b")
    net.tick(1)
    beats = {m.to: m.commit for m in net.sent if m.type == MT.HEARTBEAT}
    assert lead.commit_index == 6 and beats == {"n1": 6, "n2": 4}


def test_lost_appends_in_replicate_state_are_recovered():
    net = Net(ids(3))
    lead = net.elect("n0")
    net.drop = lambda m: m.type == MT.APP and m.to == "n1"
    net.propose("n0", b"a", b"b")
    assert net["n1"].last_index == 4
    net.drop = lambda m: False
    net.tick(5)
    assert net.data("n1") == [b"a", b"b"] and lead.commit_index == 6


# --- commit rule ------------------------------------------------------------------------------

def test_figure8_an_old_term_entry_is_not_committed_by_counting_replicas():
    """Raft paper Figure 8: n0 leads term 4 holding an entry of term 2 at index 4; once n1 also
    holds it, it sits on a majority, yet n2 (term 3 at index 4) could still be elected and
    overwrite it. It only commits together with an entry of the leader's own term."""
    ab = boot(ids(3))
    states = {
        "n0": PersistentState(HardState(term=3, commit=3), ab + ents(2, 4, 4)),
        "n1": PersistentState(HardState(term=3, commit=3), ab),
        "n2": PersistentState(HardState(term=3, commit=3), ab + ents(3, 4, 4)),
    }
    net = Net(ids(3), Config(max_size_per_msg=1), states=states)
    net.isolated.add("n2")
    # n1 first rejects the probe at index 4, gets index 4 alone, but never the no-op at 5.
    net.drop = lambda m: m.type == MT.APP and m.index == 4 and net["n1"].last_index >= 4
    lead = net.elect("n0")
    assert lead.term == 4 and lead._prs["n1"].match == 4 and net["n1"].log.term(4) == 2
    assert lead.commit_index == 3  # a majority holds index 4, but it is of term 2
    assert net["n1"].log.is_up_to_date(4, 3)  # ...and n2 could still win n1's vote
    net.drop = lambda m: False
    net.tick(5)
    assert lead.commit_index == 5 and net["n1"].commit_index == 5


def test_commit_needs_a_majority_of_five():
    net = Net(ids(5))
    lead = net.elect("n0")
    net.isolated.update({"n2", "n3", "n4"})
    net.propose("n0", b"x")
    assert lead.commit_index == 6 and lead.last_index == 7  # only n0, n1 hold index 7
    net.isolated.discard("n2")
    net.tick(5)
    assert lead.commit_index == 7



def _leader_with_unpersisted_entry(n: int = 3):
    """A leader that proposed one entry: its Ready is out (APPs included) but not persisted."""
    net = Net(ids(n))
    lead = net.elect("n0")
    before = lead.commit_index
    lead.propose(b"x")
    rd = lead.ready()
    assert [e.data for e in rd.entries] == [b"x"] and rd.messages == []
    apps = {m.to: m for m in rd.early_messages if m.type == MT.APP}
    assert sorted(apps) == ids(n)[1:]  # sent before the leader's own write is done
    return net, lead, rd, apps, before


def _ack(net: Net, lead: Raft, app: Message) -> None:
    """The follower takes the APP, persists it, and its answer reaches the leader."""
    net[app.to].step(app)
    for m in net.process(app.to):
        lead.step(m)


def test_leader_does_not_count_its_own_unpersisted_entry_toward_commit():
    net, lead, rd, apps, before = _leader_with_unpersisted_entry()
    _ack(net, lead, apps["n1"])
    # n1 and the leader hold the entry, a majority of three, but the leader's copy is not on
    # disk yet: a crash now would leave it on n1 alone
    assert lead._prs["n1"].match == rd.entries[-1].index
    assert lead.commit_index == before
    net.disks["n0"].persist(rd)
    lead.advance(rd)
    assert lead.commit_index == rd.entries[-1].index  # durable on n0 and n1 now
    net.flush()
    assert net.data("n0") == net.data("n1") == [b"x"]


def test_followers_alone_can_commit_while_the_leader_is_still_persisting():
    net, lead, rd, apps, before = _leader_with_unpersisted_entry()
    _ack(net, lead, apps["n1"])
    _ack(net, lead, apps["n2"])
    assert lead.commit_index == rd.entries[-1].index  # two durable copies of three
    assert not lead.has_ready()  # still one Ready at a time: applying waits for advance()
    net.disks["n0"].persist(rd)
    lead.advance(rd)
    net.flush()
    assert net.data("n0") == [b"x"]


def test_single_voter_commits_only_after_persisting():
    net = Net(["solo"])
    r = net.elect("solo")
    r.propose(b"x")
    rd = r.ready()
    assert rd.entries and rd.committed_entries == [] and r.commit_index < rd.entries[-1].index
    net.disks["solo"].persist(rd)
    r.advance(rd)
    assert r.commit_index == rd.entries[-1].index
    assert [e.data for e in r.ready().committed_entries] == [b"x"]


def test_a_leader_sends_early_only_once_its_term_is_durable():
    """A lone voter elects itself within one step: until the Ready carrying its new term is
    persisted, what it sends waits for the disk like anyone's."""
    r = Raft("solo", ["solo"], None, Config(), random.Random(0))
    rd = r.ready()
    r.advance(rd)  # the bootstrap entries and term 1 are on disk
    while r.state != Role.LEADER:
        r.tick()
    stray = Message(MT.APP, "solo", "gone", term=1)  # a removed member still thinks it leads
    r.step(stray)
    rd = r.ready()
    assert rd.hard_state.term == 2 and [m.type for m in rd.messages] == [MT.APP_RESP]
    assert rd.early_messages == []
    r.advance(rd)
    r.step(stray)
    rd = r.ready()
    assert rd.messages == [] and [m.type for m in rd.early_messages] == [MT.APP_RESP]


# --- CheckQuorum -------------------------------------------------------------------------------

def test_check_quorum_leader_steps_down_when_cut_off():
    net = Net(ids(3))
    lead = net.elect("n0")
    net.isolated.add("n0")
    net.tick(2 * net.cfg.election_ticks)
    assert lead.state == Role.FOLLOWER and lead.term == 2


def test_check_quorum_leader_stays_with_a_majority():
    net = Net(ids(3))
    lead = net.elect("n0")
    net.isolated.add("n2")
    net.tick(5 * net.cfg.election_ticks, only={"n0", "n1"})
    assert lead.state == Role.LEADER


def test_without_check_quorum_an_isolated_leader_stays_leader():
    net = Net(ids(3), Config(check_quorum=False))
    lead = net.elect("n0")
    net.isolated.add("n0")
    net.tick(5 * net.cfg.election_ticks, only={"n0"})
    assert lead.state == Role.LEADER


# --- ReadIndex ---------------------------------------------------------------------------------

def test_read_index_on_the_leader_after_a_heartbeat_round():
    net = Net(ids(3))
    lead = net.elect("n0")
    net.propose("n0", b"w")
    lead.read_index(b"r1")
    rd = lead.ready()
    assert rd.read_states == []
    assert {m.context for m in rd.early_messages if m.type == MT.HEARTBEAT} == {b"r1"}
    lead.advance(rd)
    for m in rd.early_messages:
        net[m.to].step(m)
    net.flush()
    assert net.read_states["n0"] == [ReadState(b"r1", 5)]


def test_read_index_forwarded_by_a_follower():
    net = Net(ids(3))
    net.elect("n0")
    net.propose("n0", b"w")
    net["n2"].read_index(b"via-n2")
    net.flush()
    assert net.read_states["n2"] == [ReadState(b"via-n2", 5)]


def test_read_index_without_known_leader_raises():
    net = Net(ids(3))
    with pytest.raises(NotLeader):
        net["n1"].read_index(b"x")


def test_read_index_waits_until_the_leader_commits_in_its_term():
    net = Net(ids(3))
    net.drop = lambda m: m.type == MT.APP_RESP  # the no-op cannot commit
    lead = net.elect("n0")
    assert lead.commit_index == 3
    lead.read_index(b"early")
    net.tick(3)
    assert net.read_states["n0"] == []
    net.drop = lambda m: False
    net.tick(3)
    assert net.read_states["n0"] == [ReadState(b"early", 4)]


@pytest.mark.parametrize("check_quorum", [True, False])
def test_isolated_leader_never_produces_a_read_state(check_quorum):
    net = Net(ids(3), Config(check_quorum=check_quorum))
    lead = net.elect("n0")
    net.isolated.add("n0")
    lead.read_index(b"stale?")
    net.tick(10 * net.cfg.election_ticks)
    assert net.read_states["n0"] == []
    # Meanwhile the majority moved on and serves reads.
    new = net.leader()
    assert new is not None and new.id != "n0" and new.term > 2


def test_single_voter_read_index_is_immediate():
    net = Net(["solo"])
    r = net.elect("solo")
    r.read_index(b"x")
    net.flush()
    assert net.read_states["solo"] == [ReadState(b"x", r.commit_index)]


# --- leadership transfer ------------------------------------------------------------------------

def test_transfer_to_an_up_to_date_follower():
    net = Net(ids(3))
    lead = net.elect("n0")
    lead.transfer_leadership("n1")
    net.flush()
    assert net["n1"].state == Role.LEADER and net["n1"].term == 3
    assert lead.state == Role.FOLLOWER and lead.leader_id == "n1"


def test_transfer_to_a_lagging_follower_catches_it_up_first():
    net = Net(ids(3))
    lead = net.elect("n0")
    net.isolated.add("n2")
    net.propose("n0", b"a", b"b", b"c")
    net.isolated.clear()
    lead.transfer_leadership("n2")
    with pytest.raises(ProposalDropped):
        lead.propose(b"during transfer")
    net.flush()
    assert net["n2"].state == Role.LEADER
    assert net["n2"].log.entries_after(4)[:3] == lead.log.entries_after(4)[:3]


def test_transfer_is_aborted_after_an_election_timeout():
    net = Net(ids(3))
    lead = net.elect("n0")
    net.isolated.add("n2")
    lead.transfer_leadership("n2")
    with pytest.raises(ProposalDropped):
        lead.propose(b"x")
    net.tick(net.cfg.election_ticks, only={"n0", "n1"})
    assert lead.state == Role.LEADER and lead.lead_transferee is None
    lead.propose(b"x")


def test_transfer_from_a_follower_raises():
    net = Net(ids(3))
    net.elect("n0")
    with pytest.raises(NotLeader) as exc:
        net["n1"].transfer_leadership("n2")
    assert exc.value.leader_hint == "n0"


# --- membership -----------------------------------------------------------------------------------

def test_add_a_node_that_catches_up_from_scratch():
    net = Net(ids(3))
    lead = net.elect("n0")
    joiner = net.add("n3", [])  # starts empty and learns everything from the leader
    assert joiner.voters == () and joiner.term == 0
    lead.propose_conf_change(ConfChange(ADD, "n3", b"addr"))
    assert lead.voters == ("n0", "n1", "n2", "n3")  # in force once appended
    net.tick(3)
    assert joiner.voters == ("n0", "n1", "n2", "n3") and joiner.commit_index == lead.commit_index
    # The shell sees the change applied, with its context.
    cc = [ConfChange.decode(e.data) for e in net.applied["n3"] if e.kind == EntryKind.CONF_CHANGE]
    assert cc[-1] == ConfChange(ADD, "n3", b"addr")
    net.isolated.update({"n1", "n2"})
    net.propose("n0", b"needs 3 of 4")
    assert lead.commit_index < lead.last_index
    net.isolated.discard("n1")
    net.tick(5)
    assert lead.commit_index == lead.last_index


def test_remove_a_follower():
    net = Net(ids(3))
    lead = net.elect("n0")
    lead.propose_conf_change(ConfChange(REMOVE, "n2"))
    net.flush()
    assert lead.voters == ("n0", "n1") and "n2" not in lead._prs
    net.isolated.add("n2")
    net.propose("n0", b"x")
    assert net.data("n1") == [b"x"]


def test_removed_leader_steps_down_after_committing_its_removal():
    net = Net(ids(3))
    lead = net.elect("n0")
    lead.propose_conf_change(ConfChange(REMOVE, "n0"))
    assert lead.state == Role.LEADER  # keeps leading (without counting itself) until committed
    net.flush()
    assert lead.state == Role.FOLLOWER
    new = net.leader()
    assert new is not None and new.id in ("n1", "n2") and new.voters == ("n1", "n2")  # via TimeoutNow
    term = lead.term
    net.tick(5 * net.cfg.election_ticks)
    assert lead.state == Role.FOLLOWER and net.leader() is new and lead.term == term  # never campaigns


def test_only_one_conf_change_pending_at_a_time():
    net = Net(ids(3))
    lead = net.elect("n0")
    net.isolated.update({"n1", "n2"})
    lead.propose_conf_change(ConfChange(REMOVE, "n2"))
    with pytest.raises(ProposalDropped):
        lead.propose_conf_change(ConfChange(REMOVE, "n1"))
    net.isolated.clear()
    net.tick(2)
    lead.propose_conf_change(ConfChange(ADD, "n2"))


def test_conf_change_waits_for_the_leader_to_commit_in_its_term():
    net = Net(ids(3))
    net.drop = lambda m: m.type == MT.APP_RESP
    lead = net.elect("n0")
    with pytest.raises(ProposalDropped):
        lead.propose_conf_change(ConfChange(ADD, "n9"))


def test_invalid_conf_changes_are_rejected():
    net = Net(ids(3))
    lead = net.elect("n0")
    with pytest.raises(ValueError):
        lead.propose_conf_change(ConfChange(ADD, "n1"))
    with pytest.raises(ValueError):
        lead.propose_conf_change(ConfChange(REMOVE, "n7"))
    with pytest.raises(NotLeader):
        net["n1"].propose_conf_change(ConfChange(ADD, "n7"))
    solo = Net(["s"]).elect("s")
    with pytest.raises(ValueError):
        solo.propose_conf_change(ConfChange(REMOVE, "s"))


def test_an_overwritten_conf_change_is_rolled_back():
    f = _follower([])
    assert f.voters == ("L", "f", "g")
    f.step(Message(MT.APP, "f", "L", term=2, index=3, log_term=1,
                   entries=[Entry(2, 4, EntryKind.CONF_CHANGE, ConfChange(ADD, "x").encode())], commit=3))
    assert f.voters == ("L", "f", "g", "x")  # in force as soon as appended
    f.step(Message(MT.APP, "f", "M", term=3, index=3, log_term=1, entries=ents(3, 4, 4), commit=3))
    assert f.voters == ("L", "f", "g")


def test_conf_change_round_trip_and_garbage():
    cc = ConfChange(REMOVE, "node-é", b"\x00ctx")
    assert ConfChange.decode(cc.encode()) == cc
    for bad in (b"", b"\x05\x00\x01a", b"\x00\x00\x09ab", b"\x00\x00\x02\xff\xfe", b"\x00\x00\x00"):
        with pytest.raises(ValueError):
            ConfChange.decode(bad)


# --- snapshots -------------------------------------------------------------------------------------

def _lagging_follower_after_compaction(cfg: Config | None = None) -> Net:
    net = Net(ids(3), cfg)
    lead = net.elect("n0")
    net.isolated.add("n2")
    net.propose("n0", *[b"v%d" % i for i in range(10)])
    meta = lead.compact(lead.applied, b"state@%d" % lead.applied)
    assert (meta.index, meta.term, meta.voters) == (14, 2, ("n0", "n1", "n2"))
    assert lead.log.first_index == 15
    return net


def test_lagging_follower_catches_up_by_snapshot():
    net = _lagging_follower_after_compaction()
    net.isolated.clear()
    net.propose("n0", b"after")
    net.tick(2)
    f = net["n2"]
    assert [s.data for s in net.restored["n2"]] == [b"state@14"]
    assert f.log.snap_index == 14 and f.applied == f.commit_index == net["n0"].commit_index
    assert net.data("n2") == [b"after"]  # entries after the snapshot are applied normally
    assert net.disks["n2"].snap.meta.index == 14


def test_wiped_follower_catches_up_by_snapshot():
    net = _lagging_follower_after_compaction()
    net.isolated.clear()
    net.tick(2)
    f = net.restart("n2", wipe=True)
    assert f.last_index == 0 and f.voters == ()
    net.tick(3)
    assert f.voters == ("n0", "n1", "n2") and f.commit_index == net["n0"].commit_index
    assert net.restored["n2"][-1].data == b"state@14"


def test_lost_snapshot_is_sent_again():
    net = _lagging_follower_after_compaction(Config(snapshot_retry_ticks=5))
    net.isolated.clear()
    net.drop = lambda m: m.type == MT.SNAP
    net.tick(3)
    assert net["n2"].log.snap_index == 0
    net.drop = lambda m: False
    net.tick(8)
    assert net["n2"].log.snap_index == 14
    assert sum(m.type == MT.SNAP for m in net.sent) >= 2


def test_compacting_without_data_asks_the_shell_for_a_snapshot_when_a_follower_needs_one():
    net = _lagging_follower_after_compaction()  # n0 holds a snapshot at 14
    lead = net["n0"]
    net.propose("n0", *[b"w%d" % i for i in range(5)])
    lead.compact(lead.applied)  # no data: the state machine holds the state; 14 no longer reaches
    assert not lead.snapshot_wanted
    net.isolated.clear()
    net.tick(3)
    assert lead.snapshot_wanted and net["n2"].log.snap_index == 0
    assert not any(m.type == MT.SNAP for m in net.sent)
    at = lead.applied
    lead.compact(at, b"state@%d" % at)  # the shell answers with the state as of now
    assert not lead.snapshot_wanted
    net.tick(3)
    assert [s.data for s in net.restored["n2"]] == [b"state@%d" % at]
    assert net["n2"].commit_index == lead.commit_index


def test_a_restarted_leader_without_snapshot_data_sends_it_once_compact_provides_it():
    net = _lagging_follower_after_compaction()
    ps = net.disks["n0"].state()
    ps.snapshot_meta, ps.snapshot_data = SnapshotMeta(14, 2, ("n0", "n1", "n2")), None
    net.nodes["n0"] = Raft("n0", [], ps, net.cfg, random.Random(1))
    net.restart("n1")  # (forgets its leader, so that it votes at once)
    lead = net.elect("n0")
    net.isolated.clear()
    net.tick(5)
    assert net["n2"].log.snap_index == 0 and not any(m.type == MT.SNAP for m in net.sent)
    assert lead.snapshot_wanted and not net["n1"].snapshot_wanted
    lead.compact(14, b"reloaded")  # the shell hands the snapshot data back
    assert not lead.snapshot_wanted
    net.tick(3)
    assert net.restored["n2"][-1].data == b"reloaded" and net["n2"].commit_index == lead.commit_index


def test_snapshot_at_or_below_commit_is_not_restored():
    net = Net(ids(3))
    net.elect("n0")
    f = net["n1"]
    assert f.commit_index == 4
    meta = net["n0"].compact(4, b"s")
    f.step(Message(MT.SNAP, "n1", "n0", term=2, snapshot=Snapshot(meta, b"s")))
    assert f.log.snap_index == 0 and f.log.pending_snapshot is None
    (resp,) = f.ready().messages
    assert resp.type == MT.APP_RESP and resp.index == 4


def test_compact_validates_its_index():
    net = Net(ids(3))
    lead = net.elect("n0")
    with pytest.raises(ValueError):
        lead.compact(lead.applied + 1, b"")
    with pytest.raises(ValueError):
        lead.compact(0, b"")


# --- restart ---------------------------------------------------------------------------------------

def test_restart_from_persisted_state():
    net = Net(ids(3))
    net.elect("n0")
    net.propose("n0", b"a", b"b")
    before = net["n1"]
    after = net.restart("n1")
    assert (after.term, after.vote, after.commit_index, after.last_index) == \
        (before.term, before.vote, before.commit_index, before.last_index)
    assert after.voters == before.voters and after.state == Role.FOLLOWER
    assert after.log.entries_after(0) == before.log.entries_after(0)


def test_restart_with_snapshot_and_applied():
    net = _lagging_follower_after_compaction()
    net.propose("n0", b"15", b"16")
    disk = net.disks["n0"]
    data = b"state@14"
    disk.compact(Snapshot(net["n0"].compact(14, data), data))  # same index: refreshes the data
    ps = disk.state()
    ps.applied = 15
    r = Raft("n0", [], ps, Config())
    assert r.log.snap_index == 14 and r.voters == ("n0", "n1", "n2") and r.applied == 15
    rd = r.ready()
    assert [e.index for e in rd.committed_entries] == [16]  # nothing at or below `applied` again


def test_restart_rejects_a_corrupt_log():
    with pytest.raises(ValueError):
        Raft("a", [], PersistentState(HardState(term=2), boot("ab") + ents(2, 4, 4)), Config())
    with pytest.raises(ValueError):
        Raft("a", [], PersistentState(HardState(term=2, commit=9), boot("ab")), Config())


# --- the Ready contract ------------------------------------------------------------------------------

def test_one_ready_at_a_time():
    net = Net(ids(3))
    r = net["n0"]
    rd = r.ready()
    assert not r.has_ready()
    with pytest.raises(RuntimeError):
        r.ready()
    with pytest.raises(RuntimeError):
        r.advance(net["n1"].ready())
    r.advance(rd)


def test_entries_rewritten_while_a_ready_is_outstanding_stay_unstable():
    f = _follower([])
    f.step(Message(MT.APP, "f", "L", term=2, index=3, log_term=1, entries=ents(2, 4, 5), commit=3))
    rd1 = f.ready()
    assert [e.index for e in rd1.entries] == [4, 5]
    # Before rd1 is persisted, a new leader overwrites index 4.
    f.step(Message(MT.APP, "f", "M", term=3, index=3, log_term=1, entries=ents(3, 4, 4), commit=3))
    f.advance(rd1)
    rd2 = f.ready()
    assert rd2.entries == ents(3, 4, 4)  # the rewrite is still to be persisted


def test_soft_state_and_must_sync():
    net = Net(ids(3))
    r = net["n0"]
    for _ in range(20):
        r.tick()
    rd = r.ready()
    assert rd.soft_state is not None and rd.soft_state.role == Role.PRE_CANDIDATE and rd.must_sync
    r.advance(rd)
    assert not r.has_ready()


@pytest.mark.parametrize("change", ["term", "vote", "commit", "role", "leader"])
def test_a_change_of_any_one_hard_or_soft_state_field_makes_a_ready(change):
    # has_ready/ready compare the fields one by one (no HardState/SoftState built per call):
    # each field alone must still be noticed, and the Ready must carry the new value.
    net = Net(ids(3))
    net.flush()
    r = net["n1"]
    assert not r.has_ready()
    if change == "term":
        r.term += 1
    elif change == "vote":
        r.vote = "n2" if r.vote != "n2" else "n0"
    elif change == "commit":
        r.log.committed -= 1  # only the comparison matters here, not that it is a legal move
    elif change == "role":
        r.state = Role.PRE_CANDIDATE
    else:
        r.leader_id = "n2" if r.leader_id != "n2" else "n0"
    assert r.has_ready()
    rd = r.ready()
    if change in ("term", "vote", "commit"):
        assert rd.hard_state == HardState(r.term, r.vote, r.log.committed) and rd.soft_state is None
    else:
        assert rd.soft_state is not None and (rd.soft_state.role, rd.soft_state.leader_id) == (r.state, r.leader_id)
        assert rd.hard_state is None
    r.advance(rd)
    assert not r.has_ready()


def test_enum_fields_take_only_their_own_enums_values():
    # Decoding looks values up in per-enum tables: a value of another enum is refused, and a
    # decoded value is the enum member itself.
    m = Message.from_wire({"type": int(MT.APP), "to": "a", "from": "b", "term": 2, "index": 0,
                           "entries": [[2, 1, int(EntryKind.NOOP), b""]]})
    assert m.type is MT.APP and m.entries[0].kind is EntryKind.NOOP
    with pytest.raises(ValueError, match="entry.kind: unknown value 5"):
        Entry.from_wire([1, 1, int(MT.APP), b""])  # 5 is a message type, not an entry kind
    with pytest.raises(ValueError, match="message.type: unknown value 0"):
        Message.from_wire({"type": 0, "to": "a", "from": "b", "term": 1})  # 0 is an entry kind only
    with pytest.raises(ValueError, match="expected an int enum value"):
        Entry.from_wire([1, 1, False, b""])  # bool is not an int here


def test_messages_to_others_and_garbage_addressing_are_dropped():
    net = Net(ids(3))
    net.flush()
    r = net["n1"]
    r.step(Message(MT.VOTE, "n2", "n0", term=9, index=9, log_term=9))  # not for us
    r.step(Message(MT.VOTE, "n1", "n1", term=9, index=9, log_term=9))  # "from" ourselves
    assert r.term == 1 and not r.has_ready()


# --- wire format ----------------------------------------------------------------------------------

def _samples() -> list[Message]:
    snap = Snapshot(SnapshotMeta(9, 2, ("a", "b")), b"state")
    return [
        Message(MT.PRE_VOTE, "b", "a", term=3, index=7, log_term=2),
        Message(MT.VOTE, "b", "a", term=3, index=7, log_term=2, context=CAMPAIGN_TRANSFER),
        Message(MT.VOTE_RESP, "a", "b", term=3, reject=True),
        Message(MT.APP, "b", "a", term=3, index=7, log_term=2, commit=6,
                entries=[Entry(3, 8, EntryKind.NOOP, b""), Entry(3, 9, EntryKind.NORMAL, b"\x00\xff"),
                         Entry(3, 10, EntryKind.CONF_CHANGE, ConfChange(ADD, "c").encode())]),
        Message(MT.APP_RESP, "a", "b", term=3, index=7, reject=True, hint=5, hint_term=2),
        Message(MT.HEARTBEAT, "b", "a", term=3, commit=6, context=b"ctx"),
        Message(MT.HEARTBEAT_RESP, "a", "b", term=3, context=b"ctx"),
        Message(MT.SNAP, "b", "a", term=3, snapshot=snap),
        Message(MT.TIMEOUT_NOW, "b", "a", term=3),
        Message(MT.READ_INDEX, "a", "b", term=3, context=b"r"),
        Message(MT.READ_INDEX_RESP, "b", "a", term=3, index=9, context=b"r"),
    ]


@pytest.mark.parametrize("m", _samples(), ids=lambda m: m.type.name)
def test_wire_round_trip(m):
    w = m.to_wire()
    assert w == msgpack.unpackb(msgpack.packb(w))  # plain msgpack-able data
    assert Message.from_wire(msgpack.unpackb(msgpack.packb(w))) == m


def test_persisted_types_round_trip():
    hs = HardState(5, "n1", 9)
    assert HardState.from_wire(msgpack.unpackb(msgpack.packb(hs.to_wire()))) == hs
    assert HardState.from_wire(HardState().to_wire()) == HardState()
    e = Entry(2, 3, EntryKind.NORMAL, b"x")
    assert Entry.from_wire(e.to_wire()) == e
    meta = SnapshotMeta(4, 2, ("a", "b"))
    assert SnapshotMeta.from_wire(meta.to_wire()) == meta


@pytest.mark.parametrize("w", [
    None, [], "x", {"type": 5},
    {"type": 99, "to": "a", "from": "b", "term": 1},  # unknown type
    {"type": 5, "to": "", "from": "b", "term": 1},  # empty id
    {"type": 5, "to": "a", "from": "b", "term": -1},  # negative
    {"type": 5, "to": "a", "from": "b", "term": True},  # bool is not an int here
    {"type": 5, "to": "a", "from": "b", "term": 1 << 64},  # too big
    {"type": 5, "to": "a", "from": "b", "term": 1, "bogus": 1},  # unknown key
    {"type": 5, "to": "a", "from": "b", "term": 1, "entries": [[1, 2, 0, b""]]},  # not after index
    {"type": 5, "to": "a", "from": "b", "term": 1, "entries": [[2, 1, 0, b""]]},  # term above message term
    {"type": 5, "to": "a", "from": "b", "term": 2, "index": 0, "entries": [[2, 1, 1, b"zz"]]},  # bad conf change
    {"type": 7, "to": "a", "from": "b", "term": 1, "entries": [[1, 1, 0, b""]]},  # entries on a heartbeat
    {"type": 9, "to": "a", "from": "b", "term": 1},  # SNAP without snapshot
    {"type": 9, "to": "a", "from": "b", "term": 1, "snapshot": {"index": 1, "term": 2, "voters": [], "data": b""}},
    {"type": 5, "to": "a", "from": "b", "term": 1, "reject": 2},
    {"type": 5, "to": "a", "from": "b", "term": 1, "context": "not bytes"},
])
def test_from_wire_rejects_malformed_messages(w):
    with pytest.raises(ValueError):
        Message.from_wire(w)


_leaf = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5) | st.binary(max_size=5)
_anything = st.recursive(_leaf, lambda c: st.lists(c, max_size=4) | st.dictionaries(
    st.sampled_from(["type", "to", "from", "term", "index", "log_term", "commit", "entries", "snapshot",
                     "context", "reject", "hint", "hint_term", "voters", "data", "x"]) | st.text(max_size=3),
    c, max_size=6), max_leaves=25)


def _decode_or_value_error(obj):
    try:
        return Message.from_wire(obj)
    except ValueError:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_anything)
def test_from_wire_never_raises_anything_but_value_error(obj):
    _decode_or_value_error(obj)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_samples()), st.data())
def test_from_wire_on_mutated_valid_messages(m, data):
    w = m.to_wire()
    for _ in range(data.draw(st.integers(1, 3))):
        key = data.draw(st.sampled_from(sorted(w) + ["entries", "snapshot", "context", "reject"]))
        w[key] = data.draw(_anything)
    _decode_or_value_error(w)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes_through_msgpack_never_crash_the_decoder(raw):
    try:
        obj = msgpack.unpackb(raw)
    except Exception:  # the shell's transport error, not ours
        return
    _decode_or_value_error(obj)


# Well-formed but arbitrary messages (a confused or malicious peer): stepping them must never
# raise, and the node's basic invariants must hold afterwards.
_small = st.integers(0, 12)
_messages = st.builds(
    lambda t, frm, term, index, log_term, commit, n, reject, hint, hint_term, ctx: {
        "type": int(t), "to": "n1", "from": frm, "term": term, "index": index, "log_term": log_term,
        "commit": commit, "reject": int(reject), "hint": hint, "hint_term": hint_term, "context": ctx,
        **({"entries": [[term, index + 1 + k, 0, b"e"] for k in range(n)]} if t == MT.APP else {}),
        **({"snapshot": {"index": index or 1, "term": min(log_term, term), "voters": ["n0", frm],
                         "data": b"s"}} if t == MT.SNAP else {})},
    st.sampled_from(list(MT)), st.sampled_from(["n0", "n2", "zz"]), _small, _small, _small, _small,
    st.integers(0, 3), st.booleans(), _small, _small, st.sampled_from([b"", b"c"]))


@settings(max_examples=300, deadline=None)
@given(st.lists(_messages, max_size=12), st.booleans())
def test_arbitrary_well_formed_messages_never_crash_a_node(wires, leader):
    net = Net(ids(3))
    net.elect("n1" if leader else "n0")
    r = net["n1"]
    for w in wires:
        m = _decode_or_value_error(w)
        if m is not None:
            r.step(m)
            r.tick()
            net.process("n1")
    assert r.log.snap_index <= r.applied <= r.commit_index <= r.last_index
