"""Leader election's pure core with a fake clock: client-go's tryAcquireOrRenew rules, the renew
deadline rule, and electors racing on one Lease (simulated store with resourceVersions, writes
in flight, pauses like SIGSTOP) never having two leaders at once."""
from __future__ import annotations

import random

import pytest

from kubemu.leaderelection import (Create, Elector, Record, Timings, Update, Wait, lease_spec,
                                   record_from_lease)

T = Timings(lease_duration=15.0, renew_deadline=10.0, retry_period=2.0)
WALL = 1_700_000_000.0


def lead(elector: Elector, now: float) -> Record:
    """`elector` creates the Lease at `now` and holds it."""
    decision = elector.attempt(None, now, WALL + now)
    assert isinstance(decision, Create)
    elector.written(decision.record, now)
    return decision.record


def test_the_first_elector_creates_the_lease_and_leads():
    a = Elector("node-0_1", T)
    assert not a.is_leader(0.0)
    record = lead(a, 0.0)
    assert record.holder_identity == "node-0_1" and record.lease_duration_seconds == 15
    assert record.acquire_time == record.renew_time == "2023-11-14T22:13:20.000000Z"
    assert record.leader_transitions == 0
    assert a.is_leader(0.0) and a.is_leader(9.99) and a.leader() == "node-0_1"


def test_a_lease_held_by_another_is_taken_only_after_a_lease_duration_unchanged_as_observed_here():
    a, b = Elector("a", T), Elector("b", T)
    held = lead(a, 0.0)
    # b first sees the record at 100 (whatever its renewTime says): it waits 15 s from then
    assert b.attempt(held, 100.0, WALL) == Wait("a")
    assert b.attempt(held, 114.9, WALL) == Wait("a")
    took = b.attempt(held, 115.0, WALL + 115)
    assert isinstance(took, Update)
    assert took.record.holder_identity == "b" and took.record.leader_transitions == 1
    # a renewal (a changed record) restarts b's wait
    b2 = Elector("b2", T)
    assert b2.attempt(held, 0.0, WALL) == Wait("a")
    renewed = Record(**{**held.__dict__, "renew_time": "2023-11-14T22:13:30.000000Z"})
    assert b2.attempt(renewed, 14.0, WALL) == Wait("a")
    assert b2.attempt(renewed, 28.9, WALL) == Wait("a")
    assert isinstance(b2.attempt(renewed, 29.0, WALL), Update)


def test_a_lease_is_waited_out_for_the_duration_its_holder_declared_not_our_own():
    """client-go's isLeaseValid: the observed record's leaseDurationSeconds. An elector with a
    shorter lease must not take a lease declared longer while its holder still acts."""
    a, b = Elector("a", T), Elector("b", Timings(6.0, 4.0, 1.0))
    held = lead(a, 0.0)
    assert held.lease_duration_seconds == 15
    assert b.attempt(held, 0.5, WALL) == Wait("a")
    assert a.is_leader(6.5) and b.attempt(held, 6.5, WALL) == Wait("a")
    assert b.attempt(held, 15.4, WALL) == Wait("a")
    assert not a.is_leader(15.5) and isinstance(b.attempt(held, 15.5, WALL), Update)
    # and one with a longer lease takes a shorter declared one once that has run out
    c, d = Elector("c", Timings(6.0, 4.0, 1.0)), Elector("d", Timings(30.0, 20.0, 1.0))
    short = lead(c, 0.0)
    assert d.attempt(short, 0.0, WALL) == Wait("c")
    assert not c.is_leader(6.0) and isinstance(d.attempt(short, 6.0, WALL), Update)


def test_a_record_without_a_duration_is_waited_out_for_our_own():
    b = Elector("b", T)
    undeclared = Record("a", 0, "2023-11-14T22:13:20.000000Z", "2023-11-14T22:13:20.000000Z", 0)
    assert b.attempt(undeclared, 0.0, WALL) == Wait("a")
    assert b.attempt(undeclared, 14.9, WALL) == Wait("a")
    assert isinstance(b.attempt(undeclared, 15.0, WALL), Update)


def test_the_declared_duration_is_rounded_up_so_it_still_covers_the_renew_deadline():
    t = Timings(1.5, 1.2, 0.5)
    a, b = Elector("a", t), Elector("b", t)
    held = lead(a, 0.0)
    assert held.lease_duration_seconds == 2  # never 1: b could take it while a acts until 1.2
    assert a.is_leader(1.1) and b.attempt(held, 0.0, WALL) == Wait("a")
    assert b.attempt(held, 1.9, WALL) == Wait("a")
    assert isinstance(b.attempt(held, 2.0, WALL), Update)


def test_a_renewal_keeps_acquire_time_and_transitions():
    a = Elector("a", T)
    first = lead(a, 0.0)
    current = Record(**{**first.__dict__, "leader_transitions": 3})
    renew = a.attempt(current, 2.0, WALL + 2)
    assert isinstance(renew, Update)
    assert renew.record.acquire_time == first.acquire_time
    assert renew.record.renew_time == "2023-11-14T22:13:22.000000Z"
    assert renew.record.leader_transitions == 3
    a.written(renew.record, 2.0)
    assert a.is_leader(11.9) and not a.is_leader(12.0)


def test_a_released_lease_is_taken_at_once():
    a, b = Elector("a", T), Elector("b", T)
    lead(a, 0.0)
    release = a.release(1.0, WALL + 1)
    # no holder, and (as client-go writes) 1 s: expired for a reader judging by renewTime too
    assert release.record.holder_identity == "" and release.record.lease_duration_seconds == 1
    assert release.record.renew_time == "2023-11-14T22:13:21.000000Z"
    assert not a.is_leader(1.0)
    assert a.release(1.0, WALL) is None  # nothing more to give up
    assert isinstance(b.attempt(release.record, 1.0, WALL), Update)


def test_the_renew_deadline_rule_a_leader_that_cannot_renew_stops_before_anyone_may_take_over():
    a, b = Elector("a", T), Elector("b", T)
    held = lead(a, 0.0)
    assert b.attempt(held, 0.5, WALL) == Wait("a")  # b sees a's lease right after it was written
    # a's renewals all fail from now on (the apiserver is away for it): it never writes again
    last_acting = max(t / 100 for t in range(0, 3000) if a.is_leader(t / 100))
    first_taking = min(t / 100 for t in range(0, 3000)
                       if isinstance(b.attempt(held, t / 100, WALL), Update))
    assert last_acting < 10.0 <= first_taking - 5  # the gap is lease duration - renew deadline
    assert a.lost(10.0) and a.lost(0.0)  # and, once lost, lost for good


def test_a_pause_past_the_renew_deadline_ends_leadership_even_if_nobody_took_over():
    """SIGSTOP: the monotonic clock runs on; on resume the elector is no longer leader, must not
    renew (its attempt waits) and reports the loss."""
    a = Elector("a", T)
    held = lead(a, 0.0)
    resumed = 12.0  # past the renew deadline, before the lease could be taken
    assert not a.is_leader(resumed)
    assert a.lost(resumed)
    assert isinstance(a.attempt(held, resumed, WALL), Wait)
    a.written(held, resumed)  # even a late reply to an earlier renewal does not bring it back
    assert not a.is_leader(resumed)


def test_a_leader_seeing_another_holder_has_lost():
    a = Elector("a", T)
    held = lead(a, 0.0)
    taken = Record(**{**held.__dict__, "holder_identity": "b", "leader_transitions": 1})
    assert a.attempt(taken, 3.0, WALL) == Wait("b")
    assert not a.is_leader(3.0) and a.lost(3.0)


def test_record_and_lease_spec_round_trip_and_bad_specs_read_as_zero():
    record = Record("node-1_42", 15, "2024-01-01T00:00:00.000000Z", "2024-01-01T00:00:02.000000Z", 4)
    spec = lease_spec(record)
    assert spec == {"holderIdentity": "node-1_42", "leaseDurationSeconds": 15, "leaseTransitions": 4,
                    "acquireTime": "2024-01-01T00:00:00.000000Z", "renewTime": "2024-01-01T00:00:02.000000Z"}
    assert record_from_lease({"spec": spec}) == record
    assert record_from_lease({"spec": {"holderIdentity": 7, "leaseTransitions": True}}) == Record()
    assert record_from_lease({}) == record_from_lease("junk") == Record()


def test_timings_are_checked_with_client_gos_words():
    assert Timings().problems() == []
    assert Timings(3, 2, 0.5).problems() == []   # kubemu up --fast
    assert "leaseDuration must be greater than renewDeadline" in Timings(10, 10, 2).problems()
    assert "renewDeadline must be greater than retryPeriod*JitterFactor" in Timings(15, 2, 2).problems()
    with pytest.raises(ValueError, match="renewDeadline"):
        Elector("a", Timings(10, 10, 2))
    with pytest.raises(ValueError, match="identity"):
        Elector("", T)


# -- electors racing ----------------------------------------------------------------------------

class FakeLeases:
    """One Lease with a resourceVersion; writes are conditional, as the apiserver's."""

    def __init__(self):
        self.record: Record | None = None
        self.rv = 0

    def read(self) -> tuple[Record | None, int]:
        return self.record, self.rv

    def apply(self, decision, rv: int) -> bool:
        if isinstance(decision, Create):
            if self.record is not None:
                return False  # AlreadyExists
        elif self.record is None or rv != self.rv:
            return False      # Conflict (or NotFound)
        self.record, self.rv = decision.record, self.rv + 1
        return True


class Campaigner:
    """One elector's shell, stepwise: read -> decide -> send -> (in flight) -> applied -> reply."""

    def __init__(self, name: str, timings: Timings = T):
        self.core = Elector(name, timings)
        self.t = timings
        self.phase = "idle"
        self.next_at = 0.0
        self.pending = None  # (decision, rv, sent_at, ok)

    def step(self, leases: FakeLeases, now: float, rng: random.Random) -> None:
        if self.phase == "idle":
            current, rv = leases.read()
            decision = self.core.attempt(current, now, WALL + now)
            if isinstance(decision, Wait):
                self.next_at = now + self.t.retry_period * (1 + rng.random())
                return
            self.pending = [decision, rv, now, None]
            self.phase = "in flight"
            self.next_at = now + rng.uniform(0, 1.0)  # the write's trip to the store
        elif self.phase == "in flight":
            self.pending[3] = leases.apply(self.pending[0], self.pending[1])
            self.phase = "replying"
            self.next_at = now + rng.uniform(0, 1.0)  # the reply's trip back
        else:
            decision, _, sent_at, ok = self.pending
            if ok:
                self.core.written(decision.record, sent_at)
            self.phase = "idle"
            self.next_at = now + self.t.retry_period


# electors started with different --leader-elect-* flags (a cluster being reconfigured)
MIXED = [T, Timings(6.0, 4.0, 1.0), Timings(2.5, 1.5, 0.5)]


@pytest.mark.parametrize("mixed", [False, True], ids=["same-flags", "mixed-flags"])
@pytest.mark.parametrize("seed", range(40))
def test_electors_racing_with_pauses_never_lead_at_once(seed, mixed):
    rng = random.Random(seed)
    leases = FakeLeases()
    timings = MIXED if mixed else [T] * 3
    electors = [Campaigner(f"node-{i}_{100 + i}", timings[i]) for i in range(3)]
    now, led, takeovers = 0.0, set(), 0
    while now < 600.0:
        now += rng.uniform(0.01, 0.5)
        for c in electors:
            if now >= c.next_at:
                if rng.random() < 0.01:  # SIGSTOP for a while: nothing runs, the clock does
                    c.next_at = now + rng.uniform(5, 40)
                    continue
                c.step(leases, now, rng)
        leaders = [c.core.identity for c in electors if c.core.is_leader(now)]
        assert len(leaders) <= 1, f"two leaders at {now:.2f}: {leaders}"
        if leaders and leaders[0] not in led:
            led.add(leaders[0])
            takeovers += 1
        # a lost elector is done (its process exits); a new process campaigns in its place
        for i, c in enumerate(electors):
            if c.core.lost(now) and c.phase == "idle":
                electors[i] = Campaigner(f"node-{i}_{rng.randrange(1000, 99999)}", timings[i])
                electors[i].next_at = now + 1.0
    assert takeovers >= 1
    assert leases.record is not None and leases.record.leader_transitions >= takeovers - 1
