"""Which apiserver a node's clients ask first: node-i's own on a control-plane node, and the
workers' first choices spread over the apiservers. One rule for every client on a node: the
kubelet and the static pods `up` writes their flags for (kubemu/cluster.py), and kube-proxy,
whose one DaemonSet template gives every node the same list and which orders it by the node it
runs on (components/kube_proxy/__main__.py).

    for_node(["ipc://a", "ipc://b", "ipc://c"], "node-1") -> ["ipc://b", "ipc://c", "ipc://a"]
"""
from __future__ import annotations


def preference(endpoints: list[str], index: int) -> list[str]:
    """`endpoints` rotated to start at `index` (modulo their number)."""
    k = index % len(endpoints)
    return endpoints[k:] + endpoints[:k]


def node_index(node: str) -> int:
    """i of `node-i`; 0 for a name without one (a node joined under its hostname)."""
    _, _, index = node.rpartition("-")
    return int(index) if index.isdigit() else 0


def for_node(endpoints: list[str], node: str) -> list[str]:
    """`endpoints` (every apiserver's, node-0's first) in `node`'s order of preference."""
    return preference(endpoints, node_index(node))
