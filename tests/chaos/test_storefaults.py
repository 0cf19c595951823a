"""The store faults as `fault` requests: what each member is told, parsed by the store's own
parser (so a request the store would refuse fails here), and when the store is whole again."""
from __future__ import annotations

import random

import pytest

from kubemu.chaos import storefaults
from store import faults as store_faults

MEMBERS = ["store-0", "store-1", "store-2"]


def parsed(req: storefaults.Request) -> store_faults.FaultRequest:
    return store_faults.parse_request(req.params)


def test_partitions_cut_the_leader_both_ways_or_one_way_and_tell_every_member():
    sym = storefaults.request("partition", "store-1", MEMBERS, random.Random(0))
    assert sym.members == tuple(MEMBERS)
    assert parsed(sym).links == {("store-1", "store-0"), ("store-1", "store-2"),
                                 ("store-0", "store-1"), ("store-2", "store-1")}
    directions = set()
    for seed in range(20):
        req = storefaults.request("asymmetric", "store-1", MEMBERS, random.Random(seed))
        assert req.members == tuple(MEMBERS) and "asymmetric" in req.says
        links = parsed(req).links
        assert len(links) == 2 and all("store-1" in link for link in links)
        assert not any((b, a) in links for a, b in links)  # one way only
        directions.add(frozenset(links))
    assert directions == {frozenset({("store-1", "store-0"), ("store-1", "store-2")}),
                          frozenset({("store-0", "store-1"), ("store-2", "store-1")})}


def test_a_delay_holds_every_link_with_as_much_jitter_so_messages_reorder():
    req = storefaults.request("delay", "store-0", MEMBERS, random.Random(4))
    got = parsed(req)
    assert req.members == tuple(MEMBERS)
    assert got.senders is None and got.receivers is None
    assert storefaults.DELAY_MS[0] / 1000 <= got.delay_s <= storefaults.DELAY_MS[1] / 1000
    assert got.jitter_s == got.delay_s


def test_disk_and_power_loss_go_to_one_member_leader_or_follower():
    modes, targets = set(), set()
    for seed in range(30):
        disk = storefaults.request("disk", "store-0", MEMBERS, random.Random(seed))
        assert len(disk.members) == 1
        modes.add(parsed(disk).disk)
        targets.add(disk.members[0])
        power = storefaults.request("power-loss", "store-0", MEMBERS, random.Random(seed))
        assert len(power.members) == 1 and parsed(power).action == "power-loss"
        assert ("(leader)" in power.says) == (power.members == ("store-0",))
    assert modes == {store_faults.DiskMode.FULL, store_faults.DiskMode.FSYNC_FAIL}
    assert targets == set(MEMBERS)


def test_a_seed_names_the_choices():
    def run(seed):
        rng = random.Random(seed)
        return [storefaults.request(k, "store-0", MEMBERS, rng) for k in storefaults.REQUEST_FAULTS]
    assert run(1) == run(1)


def test_heal_reaches_every_member_and_unknown_kinds_are_refused():
    assert parsed(storefaults.heal(MEMBERS)).action == "heal"
    assert storefaults.heal(["b", "a"]).members == ("a", "b")
    with pytest.raises(ValueError):
        storefaults.request("kill", "store-0", MEMBERS, random.Random(0))


def test_a_follower_is_picked_never_the_leader():
    picks = {storefaults.pick_follower("store-1", MEMBERS, random.Random(s)) for s in range(20)}
    assert picks == {"store-0", "store-2"}
    assert storefaults.pick_follower("store-0", ["store-0"], random.Random(0)) is None


def status(name, leader="store-0", applied=10, commit=10, term=2):
    return {"name": name, "role": "leader" if name == leader else "follower", "leader": leader,
            "applied_index": applied, "commit_index": commit, "term": term}


def test_the_store_is_whole_when_every_member_answers_agrees_on_a_leader_and_caught_up():
    whole = [status(m) for m in MEMBERS]
    assert storefaults.commit_index(whole) == 10
    assert storefaults.lagging(whole, MEMBERS, 10) == []
    behind = [status("store-0"), status("store-1", applied=7), status("store-2")]
    assert storefaults.lagging(behind, MEMBERS, 10) == ["store-1 applied 7 < 10"]
    missing = [status("store-0"), status("store-1"), {"endpoint": "ipc://x", "error": "timed out"}]
    assert storefaults.lagging(missing, MEMBERS, 10) == ["store-2 does not answer"]
    split = [status("store-0"), status("store-1", leader=None), status("store-2")]
    assert storefaults.lagging(split, MEMBERS, 10)[0].startswith("no leader all agree on")
    # two replicas that both claim to lead: the higher term's commit index counts
    two = [status("store-0", term=2, commit=5), {**status("store-1", term=3, commit=9), "role": "leader"}]
    assert storefaults.commit_index(two) == 9
    assert storefaults.commit_index([status("store-1", leader="store-0")]) is None
