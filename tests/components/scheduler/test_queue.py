"""The scheduling queue, with a fake clock: plain numbers for `now`."""
from __future__ import annotations

from components.scheduler.queue import (ACTIVE, BACKOFF, IN_FLIGHT, UNSCHEDULABLE, SchedulingQueue)
from components.scheduling.backoff import Backoff


def queue(timeout: float = 300.0) -> SchedulingQueue:
    return SchedulingQueue(Backoff(1, 10), unschedulable_timeout=timeout)


def drain(q: SchedulingQueue, now: float) -> list:
    out = []
    while (key := q.pop(now)) is not None:
        out.append(key)
    return out


def test_first_come_first_served_within_a_priority_and_higher_priority_first():
    q = queue()
    for key, prio in (("a", 0), ("b", 0), ("hi", 100), ("c", 0), ("low", -5)):
        assert q.add(key, prio)
    assert drain(q, 0) == ["hi", "a", "b", "c", "low"]
    assert all(q.where(k) == IN_FLIGHT for k in "abc")


def test_add_is_idempotent_and_keeps_the_place():
    q = queue()
    q.add("a")
    q.add("b")
    assert not q.add("a")
    assert drain(q, 0) == ["a", "b"]
    assert not q.add("a")           # in flight: not handed out twice
    assert q.pop(0) is None


def test_unschedulable_waits_for_a_move_and_respects_the_backoff():
    q = queue()
    q.add("p")
    assert q.pop(0) == "p"
    q.unschedulable("p", 0)         # 1st failure: backing off until 1
    assert q.where("p") == UNSCHEDULABLE
    assert q.pop(100) is None       # no cluster change: stays parked (timeout is 300)
    q2 = queue()
    q2.add("p")
    q2.pop(0)
    q2.unschedulable("p", 0)
    q2.move_all(0.5)                # still backing off: to backoff, not active
    assert q2.where("p") == BACKOFF
    assert q2.pop(0.9) is None
    assert q2.next_wakeup() == 1
    assert q2.pop(1) == "p"


def test_move_after_the_backoff_makes_it_active_at_once():
    q = queue()
    q.add("p")
    q.pop(0)
    q.unschedulable("p", 0)
    q.move_all(5)
    assert q.where("p") == ACTIVE
    assert q.pop(5) == "p"


def test_backoff_doubles_and_caps():
    q = queue()
    q.add("p")
    now, delays = 0.0, []
    for _ in range(6):
        assert q.pop(now) == "p"
        q.requeue("p", now)
        ready = q.next_wakeup()
        delays.append(ready - now)
        assert q.pop(ready - 0.01) is None
        now = ready
    assert delays == [1, 2, 4, 8, 10, 10]


def test_a_change_during_the_attempt_sends_a_failure_to_backoff_not_unschedulable():
    q = queue()
    q.add("p")
    q.add("other")
    q.pop(0)                                 # p in flight
    q.move_all(0)                            # e.g. a node was added meanwhile
    q.unschedulable("p", 0)
    assert q.where("p") == BACKOFF           # retried after 1 s without waiting for another event
    assert drain(q, 1) == ["other", "p"]
    q.unschedulable("p", 1)                  # no change during this attempt: parked
    assert q.where("p") == UNSCHEDULABLE


def test_an_update_of_the_pod_in_flight_counts_as_a_change():
    q = queue()
    q.add("p")
    q.pop(0)
    q.update("p", 0)
    q.unschedulable("p", 0)
    assert q.where("p") == BACKOFF


def test_update_of_an_unschedulable_pod_retries_it_after_its_backoff():
    q = queue()
    q.add("p")
    q.pop(0)
    q.unschedulable("p", 0)
    q.update("p", 0.5)
    assert q.where("p") == BACKOFF
    assert q.pop(1) == "p"
    q.unschedulable("p", 1)                  # 2nd failure: backing off until 3
    q.update("p", 3)
    assert q.where("p") == ACTIVE


def test_update_elsewhere_changes_nothing():
    q = queue()
    q.add("p")
    q.update("p", 0)
    q.update("unknown", 0)
    assert q.where("p") == ACTIVE and "unknown" not in q


def test_unschedulable_pods_come_back_after_the_timeout():
    q = queue(timeout=60)
    for key in ("a", "b"):
        q.add(key)
    assert drain(q, 0) == ["a", "b"]
    q.unschedulable("a", 0)
    q.unschedulable("b", 30)
    assert q.next_wakeup() == 60
    assert q.pop(59) is None
    assert q.pop(60) == "a"
    assert q.next_wakeup() == 90
    assert q.pop(90) == "b"


def test_delete_forgets_everything_including_the_backoff():
    q = queue()
    q.add("p")
    q.pop(0)
    q.requeue("p", 0)
    q.delete("p")
    assert "p" not in q and q.next_wakeup() is None and q.pop(100) is None
    q.add("p")
    assert q.pop(0) == "p"
    q.requeue("p", 0)
    assert q.next_wakeup() == 1              # backoff starts over


def test_outcomes_of_a_pod_deleted_during_its_attempt_are_ignored():
    q = queue()
    q.add("p")
    q.pop(0)
    q.delete("p")
    q.unschedulable("p", 0)
    q.requeue("p", 0)
    assert "p" not in q and len(q) == 0


def test_stale_heap_entries_never_hand_a_pod_out_twice():
    q = queue()
    q.add("p")
    q.add("q")
    q.delete("p")
    q.add("p")                               # a second heap entry for p; the first is stale
    assert drain(q, 0) == ["q", "p"]
    q.requeue("p", 0)
    q.delete("p")
    assert q.next_wakeup() is None           # the stale backoff entry is not a wakeup
    assert q.pop(10) is None


def test_counts():
    q = queue()
    for key in "abcd":
        q.add(key)
    q.pop(0)
    q.pop(0)
    q.unschedulable("a", 0)
    q.requeue("b", 0)
    q.pop(0)
    assert q.counts() == {ACTIVE: 1, BACKOFF: 1, UNSCHEDULABLE: 1, IN_FLIGHT: 1}
    assert len(q) == 4
