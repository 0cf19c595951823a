"""`kubemu node add [--control-plane]` and `kubemu node remove NAME`, decided without I/O: what
joins or leaves, in which order, and when to refuse (kubeadm join --control-plane and kubeadm
reset on a stacked-etcd cluster, where each control-plane node holds one store member).

A `Layout` is the cluster's nodes and which node runs each store replica; the control-plane
nodes are those that run one. `kubemu up` derives the first layout from its flags; once a node
was added or removed the layout is recorded in <state>/membership.json (`to_json`) and `up`
follows it, so `down` then `up` brings the same cluster back.

Adding a control-plane node: the store member is added first (etcd's runtime reconfiguration:
`member add`, then start the member empty and let it learn the log), then the node is written
and booted, then the new member is waited for until it has caught up and the node until Ready.
Refused, as etcd's --strict-reconfig-check refuses, when the members that answer would not be a
quorum of the grown cluster.

Removing one: the store member goes first (while the node still runs, the cluster never counts
a dead voter), then the node is stopped, the layout recorded without it, and its directory and
its Node deleted. Refused when
it would remove the last member or the last control-plane node, or when the members left would
not hold a quorum of healthy ones (the change could not commit, or the cluster would stall).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

NODE_NAME = re.compile(r"node-(\d+)")


class MembershipError(Exception):
    """A change refused, in one line."""


@dataclass(frozen=True)
class Layout:
    nodes: tuple[str, ...]                               # every node, in order
    stores: dict[str, str] = field(default_factory=dict)  # store replica -> the node running it

    @property
    def control_plane(self) -> tuple[str, ...]:
        """The nodes that run a store replica (stacked etcd: the control-plane nodes), in order."""
        return tuple(n for n in self.nodes if n in self.stores.values())

    def stores_of(self, node: str) -> list[str]:
        return [s for s, n in self.stores.items() if n == node]

    def to_json(self) -> str:
        return json.dumps({"nodes": list(self.nodes), "stores": self.stores}, indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Layout:
        """ValueError, naming what is wrong, for anything but a layout `to_json` wrote."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("expected an object with nodes and stores")
        nodes, stores = data.get("nodes"), data.get("stores")
        if not isinstance(nodes, list) or not all(isinstance(n, str) and NODE_NAME.fullmatch(n) for n in nodes):
            raise ValueError("nodes: expected a list of node-<i> names")
        if not isinstance(stores, dict) or not stores or not all(
                isinstance(s, str) and n in nodes for s, n in stores.items()):
            raise ValueError("stores: expected replica names mapped to nodes of the layout")
        return cls(tuple(nodes), dict(stores))


def quorum(members: int) -> int:
    return members // 2 + 1


def next_node(layout: Layout) -> str:
    """The name of the next node: one above the highest of the layout (a gap a removed node left
    stays a gap, so the nodes keep the order they joined in)."""
    used = [int(m.group(1)) for n in layout.nodes if (m := NODE_NAME.fullmatch(n))]
    return f"node-{max(used, default=-1) + 1}"


def next_store(layout: Layout, node: str) -> str:
    """The new member's name: store-<i> on node-<i> as `up` names them, unless one node holds
    several replicas (a single control-plane node's), whose names run past i."""
    taken = [int(s.rpartition("-")[2]) for s in layout.stores if s.rpartition("-")[2].isdigit()]
    return f"store-{max(int(node.rpartition('-')[2]), max(taken, default=-1) + 1)}"


# --- the steps, in order; the shell carries out each -----------------------------------------

@dataclass(frozen=True)
class MemberAdd:
    store: str
    node: str


@dataclass(frozen=True)
class MemberRemove:
    store: str


@dataclass(frozen=True)
class WriteNode:
    node: str


@dataclass(frozen=True)
class StartNode:
    node: str


@dataclass(frozen=True)
class WaitCaughtUp:
    store: str


@dataclass(frozen=True)
class WaitReady:
    node: str


@dataclass(frozen=True)
class StopNode:
    node: str


@dataclass(frozen=True)
class DeleteNode:
    node: str  # its Node object and its directory


@dataclass(frozen=True)
class Record:
    layout: Layout  # <state>/membership.json, api-endpoint and store-endpoints


Step = MemberAdd | MemberRemove | WriteNode | StartNode | WaitCaughtUp | WaitReady | StopNode | DeleteNode | Record


@dataclass(frozen=True)
class Plan:
    node: str
    layout: Layout  # after the change
    steps: tuple[Step, ...]


def plan_add(layout: Layout, control_plane: bool, healthy: set[str] | frozenset[str] = frozenset()) -> Plan:
    """Add the next node; with `control_plane`, with one store replica store-<i> on node-<i>.
    `healthy`: the store members that answer now (used for a control-plane node only)."""
    node = next_node(layout)
    if not control_plane:
        after = Layout((*layout.nodes, node), layout.stores)
        return Plan(node, after, (Record(after), WriteNode(node), StartNode(node), WaitReady(node)))
    store = next_store(layout, node)
    grown = len(layout.stores) + 1
    alive = len(healthy & layout.stores.keys())
    if alive < quorum(grown):  # the joiner counts only once it caught up
        raise MembershipError(
            f"cannot add a store member: {alive} of {len(layout.stores)} members answer, and {grown} members "
            f"need {quorum(grown)} (the new one catches up only after the change commits); bring the others back first")
    after = Layout((*layout.nodes, node), {**layout.stores, store: node})
    return Plan(node, after, (MemberAdd(store, node), Record(after), WriteNode(node), StartNode(node),
                              WaitCaughtUp(store), WaitReady(node)))


def plan_remove(layout: Layout, node: str, healthy: set[str] | frozenset[str] = frozenset(),
                pinned: dict[str, str] | None = None) -> Plan:
    """Remove `node`: its store members first (one at a time), then the node itself. `pinned`:
    the nodes that must stay, with why."""
    if node not in layout.nodes:
        raise MembershipError(f"there is no node {node} in this cluster (nodes: {', '.join(layout.nodes)})")
    if node in (pinned or {}):
        raise MembershipError(f"{node} cannot be removed: {pinned[node]}")
    leaving = layout.stores_of(node)
    remaining = {s: n for s, n in layout.stores.items() if n != node}
    if leaving:
        if not remaining:
            raise MembershipError(f"{node} runs the last store member ({', '.join(leaving)}) and the last control "
                                  "plane: removing it would leave no cluster")
        alive_now = len(healthy & layout.stores.keys())
        alive_after = len(healthy & remaining.keys())
        if alive_now < quorum(len(layout.stores)) or alive_after < quorum(len(remaining)):
            down = sorted(set(remaining) - healthy)
            raise MembershipError(
                f"removing {node}'s store member {', '.join(leaving)} would leave {alive_after} healthy of "
                f"{len(remaining)} members, fewer than a quorum of {quorum(len(remaining))}"
                + (f" ({', '.join(down)} not answering)" if down else "") + "; bring them back first")
    after = Layout(tuple(n for n in layout.nodes if n != node), remaining)
    return Plan(node, after, (*(MemberRemove(s) for s in leaving), StopNode(node), Record(after), DeleteNode(node)))
