"""The one rule by which a node's clients order the apiservers."""
from __future__ import annotations

from kubemu.apipreference import for_node, node_index, preference

EPS = ["ipc:///a", "ipc:///b", "ipc:///c"]


def test_a_control_plane_node_asks_its_own_apiserver_first_and_workers_are_spread():
    assert for_node(EPS, "node-0") == EPS
    assert for_node(EPS, "node-1") == ["ipc:///b", "ipc:///c", "ipc:///a"]
    assert for_node(EPS, "node-2") == ["ipc:///c", "ipc:///a", "ipc:///b"]
    assert [for_node(EPS, f"node-{i}")[0] for i in range(3, 6)] == EPS   # workers, round robin
    assert for_node(["ipc:///only"], "node-7") == ["ipc:///only"]


def test_a_name_without_an_index_starts_at_node_0_s():
    assert node_index("worker-a") == 0 and node_index("laptop") == 0 and node_index("node-12") == 12
    assert for_node(EPS, "laptop") == EPS
    assert preference(EPS, 4) == preference(EPS, 1)
