"""The leak check: a node's processes are judged against what it is supposed to run now (its
units, the pods the kubelet reports), not against a count taken before the run."""
from __future__ import annotations

from kubemu.chaos.leftovers import Pod, owners, unaccounted

INIT, KUBELET = 10, 11


def pod(name: str, *containers: int, namespace: str = "kube-system", app: str = "", waiting: int = 0) -> dict:
    statuses = [{"name": f"c{pid}", "containerID": f"process://{pid}", "state": {"running": {}}} for pid in containers]
    statuses += [{"name": "w", "containerID": f"process://{waiting}", "state": {"waiting": {}}}] if waiting else []
    return {"metadata": {"name": name, "namespace": namespace, "labels": {"app": app}},
            "status": {"containerStatuses": statuses}}


def node(*extra: tuple[int, int]) -> dict[int, int]:
    """init, the kubelet, and a coredns pod: holder 20, shim 21, container 22 (with a child 23,
    an exec), as the node's processes (PID -> parent)."""
    return {INIT: 1, KUBELET: INIT, 20: INIT, 21: INIT, 22: 21, 23: 22, **dict(extra)}


def lost(parents, pods, ignore=lambda pod: False) -> list[int]:
    return unaccounted(parents, INIT, owners(parents, INIT, {"kubelet.service": KUBELET}, pods, ignore))


COREDNS = Pod(pod("coredns-a", 22), holder=20)


def test_a_pod_started_during_the_run_is_accounted_for_not_a_leak():
    # the flake: a coredns replica still starting when the run counted the node's processes
    # (21), running when it ended (22); every process is the kubelet's or a pod's it reports
    late = Pod(pod("coredns-b", 32), holder=30)
    assert lost(node((30, INIT), (31, INIT), (32, 31)), [COREDNS, late]) == []


def test_a_process_of_no_unit_and_no_reported_pod_is_a_leak():
    # a shim and its container the kubelet no longer reports (its pod gone), and a holder
    # nobody records: each is named, with the rest of the node accounted for
    assert lost(node((40, INIT), (41, 40), (50, INIT)), [COREDNS]) == [40, 41, 50]


def test_the_same_count_with_one_pod_gone_and_one_process_leaked_is_a_leak():
    # a count cannot see it: coredns-a's processes went, as many others appeared
    leaked = {INIT: 1, KUBELET: INIT, 60: INIT, 61: INIT, 62: 61, 63: 62}
    assert lost(leaked, [Pod(pod("coredns-a", 22), holder=20)]) == [60, 61, 62, 63]


def test_a_container_whose_shim_died_is_a_leak_even_while_reported():
    # its shim gone, the container was re-parented to init: the shim would have stopped it,
    # nothing will now
    assert lost({INIT: 1, KUBELET: INIT, 20: INIT, 22: INIT}, [COREDNS]) == [22]


def test_a_kubelets_children_are_its_own_and_an_orphan_of_a_restarted_kubelet_is_a_leak():
    assert lost(node((70, KUBELET), (71, 70)), [COREDNS]) == []
    assert lost(node((70, INIT)), [COREDNS]) == [70]


def test_a_process_outside_the_tree_or_a_cycle_is_a_leak_and_init_itself_is_not():
    assert lost(node((80, 1), (81, 999)), [COREDNS]) == [80, 81]
    assert lost({INIT: 1, KUBELET: INIT, 90: 91, 91: 90}, []) == [90, 91]


def test_a_container_not_running_accounts_for_nothing():
    waiting = Pod(pod("web", waiting=42), holder=None)
    assert lost(node((41, INIT), (42, 41)), [COREDNS, waiting]) == [41, 42]


def test_pods_the_run_deleted_account_for_nothing():
    web = Pod(pod("chaos-web-1", 52, namespace="default", app="chaos-web"), holder=50)
    parents = node((50, INIT), (51, INIT), (52, 51))
    assert lost(parents, [COREDNS, web]) == []
    assert lost(parents, [COREDNS, web], ignore=lambda p: p["metadata"]["labels"]["app"] == "chaos-web") \
        == [50, 51, 52]
