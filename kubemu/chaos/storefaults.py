"""The store faults of a chaos run as `fault` requests (pure): which members hear which request
(`store.faults` parses them; `kubemu store fault ...` sends the same ones), which member a
transfer or a membership change picks, and when the store is whole again after a heal.

The runner learns the leader and the members from the store at the moment of the fault and
passes its seeded random source, so a seed still names the run's choices.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Mapping, Sequence

# the faults of `nemesis.FAULTS` carried by one `fault` request to the store's members
REQUEST_FAULTS = ("partition", "asymmetric", "delay", "disk", "power-loss")
DELAY_MS = (20.0, 250.0)  # netem-like hold of each batch of Raft messages, jitter as large
DISK_MODES = ("full", "fsync-fail")


@dataclass(frozen=True)
class Request:
    """One `fault` request: `params` sent to each of `members` (every member for partitions and
    delays: each end drops or holds what it sends or gets on a faulty link)."""
    members: tuple[str, ...]
    params: dict
    says: str  # the timeline's words for it


def heal(members: Sequence[str]) -> Request:
    return Request(tuple(sorted(members)), {"action": "heal"}, "store faults healed")


def request(kind: str, leader: str, members: Sequence[str], rng: random.Random) -> Request:
    """The request that injects fault `kind` (one of REQUEST_FAULTS) given who leads."""
    everyone = tuple(sorted(members))
    others = [m for m in everyone if m != leader]
    if kind == "partition":
        return Request(everyone, {"action": "partition", "from": [leader], "to": others, "symmetric": True},
                       f"store partition {leader} | {','.join(others)}")
    if kind == "asymmetric":
        # either the leader cannot be heard (it keeps hearing the others: it goes on believing it
        # leads until its quorum check) or it cannot hear them (its heartbeats still arrive)
        if rng.random() < 0.5:
            frm, to, says = [leader], others, f"{leader} -> {','.join(others)}"
        else:
            frm, to, says = others, [leader], f"{','.join(others)} -> {leader}"
        return Request(everyone, {"action": "partition", "from": frm, "to": to, "symmetric": False},
                       f"store asymmetric partition: messages {says} dropped")
    if kind == "delay":
        ms = round(rng.uniform(*DELAY_MS))
        return Request(everyone, {"action": "delay", "ms": ms, "jitter_ms": ms, "from": None, "to": None},
                       f"store messages delayed {ms}ms ±{ms}ms between every replica (reordered)")
    if kind == "disk":
        member, mode = rng.choice(everyone), rng.choice(DISK_MODES)
        role = "leader" if member == leader else "follower"
        return Request((member,), {"action": "disk", "mode": mode}, f"store disk {mode} on {member} ({role})")
    if kind == "power-loss":
        member = rng.choice(everyone)
        role = "leader" if member == leader else "follower"
        return Request((member,), {"action": "power-loss"},
                       f"store power loss on {member} ({role}): its unsynced writes are gone")
    raise ValueError(f"{kind} is not a store fault request")


def pick_follower(leader: str, members: Sequence[str], rng: random.Random) -> str | None:
    """A member that does not lead (the target of a transfer, the member removed and added
    back); None when there is none."""
    followers = sorted(m for m in members if m != leader)
    return rng.choice(followers) if followers else None


def lagging(statuses: Sequence[Mapping], members: Sequence[str], target: int) -> list[str]:
    """Why the store is not whole yet: each member of `members` must answer its status, agree
    on one leader with the others, and have applied up to `target` (the leader's commit index
    when the wait began); [] when it is whole."""
    by_name = {st["name"]: st for st in statuses if "name" in st and "error" not in st}
    why = [f"{m} does not answer" for m in sorted(members) if m not in by_name]
    leaders = {st.get("leader") for st in by_name.values()}
    if len(leaders) != 1 or None in leaders:
        why.append(f"no leader all agree on ({', '.join(sorted(str(x) for x in leaders))})")
    why += [f"{name} applied {st.get('applied_index', 0)} < {target}" for name, st in sorted(by_name.items())
            if name in members and st.get("applied_index", 0) < target]
    return why


def commit_index(statuses: Sequence[Mapping]) -> int | None:
    """The commit index of the member that leads in the highest term (None: no leader)."""
    leaders = [st for st in statuses if st.get("role") == "leader"]
    return max(leaders, key=lambda st: st.get("term", 0)).get("commit_index", 0) if leaders else None
