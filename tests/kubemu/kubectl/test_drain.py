"""kubemu.kubectl.drain: kubectl drain's pod filters, messages and eviction schedule (fake clock)."""
from __future__ import annotations

import pytest

from kubemu.kubectl import drain


def pod(name, *, ns="default", owner="ReplicaSet", phase="Running", mirror=False, empty_dir=False, uid=None):
    meta = {"name": name, "namespace": ns, "uid": uid or f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner", "controller": True}]
    if mirror:
        meta["annotations"] = {drain.MIRROR_ANNOTATION: "x"}
    spec = {"volumes": [{"name": "scratch", "emptyDir": {}}]} if empty_dir else {}
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def exists(ns, name):
    return None


def verdicts(pods, **opts):
    return [(i.pod["metadata"]["name"], i.delete, i.reason, i.message)
            for i in drain.filter_pods(pods, drain.Options(**opts), exists)]


NODE = [pod("web-1"), pod("kube-proxy-x", ns="kube-system", owner="DaemonSet"),
        pod("apiserver", ns="kube-system", owner=None, mirror=True), pod("cache", empty_dir=True),
        pod("bare", owner=None), pod("done", owner=None, phase="Succeeded")]


def test_without_flags_kubectl_refuses_with_one_error_per_reason():
    items = drain.filter_pods(NODE, drain.Options(), exists)
    assert drain.errors(items) == [
        "cannot delete DaemonSet-managed Pods (use --ignore-daemonsets to ignore): kube-system/kube-proxy-x",
        "cannot delete Pods with local storage (use --delete-emptydir-data to override): default/cache",
        "cannot delete Pods that declare no controller (use --force to override): default/bare"]
    assert drain.aggregate(drain.errors(items)).startswith("[cannot delete DaemonSet-managed Pods")


def test_with_the_flags_the_node_drains_with_warnings():
    items = drain.filter_pods(NODE, drain.Options(ignore_daemonsets=True, delete_emptydir_data=True, force=True),
                              exists)
    assert drain.errors(items) == []
    assert [p["metadata"]["name"] for p in drain.to_delete(items)] == ["web-1", "cache", "bare", "done"]
    assert drain.warnings(items) == ("ignoring DaemonSet-managed Pods: kube-system/kube-proxy-x; "
                                     "deleting Pods that declare no controller: default/bare")


def test_daemonset_pods_whose_daemonset_is_gone():
    orphan = [pod("ds-x", owner="DaemonSet")]
    gone = lambda ns, name: (True, f'daemonsets.apps "{name}" not found')  # noqa: E731
    # --force evicts it (its warning is overwritten by the later filters' Okay, as kubectl's is)
    assert [(i.delete, i.reason) for i in drain.filter_pods(orphan, drain.Options(force=True), gone)] == [
        (True, "Okay")]
    assert drain.errors(drain.filter_pods(orphan, drain.Options(), gone)) == [
        'cannot delete daemonsets.apps "ds-x-owner" not found: default/ds-x']
    finished = [pod("ds-y", owner="DaemonSet", phase="Failed")]
    assert verdicts(finished) == [("ds-y", True, "Okay", "")]


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (0.5, "500ms"), (5, "5s"), (90, "1m30s"),
                                           (3600, "1h0m0s"), (1.5, "1.5s")])
def test_go_durations(seconds, text):
    assert drain.go_duration(seconds) == text


def test_cordon_patches():
    assert drain.cordon_patch({"spec": {}}, True) == {"spec": {"unschedulable": True}}
    assert drain.cordon_patch({"spec": {"unschedulable": True}}, True) is None
    assert drain.cordon_patch({"spec": {"unschedulable": True}}, False) == {"spec": {"unschedulable": None}}
    assert drain.cordon_patch({}, False) is None


def test_gone_means_not_found_or_a_new_uid():
    p = pod("web-1")
    assert drain.gone(p, None) and drain.gone(p, pod("web-1", uid="other"))
    assert not drain.gone(p, p)


def test_evictions_retry_a_blocked_pod_every_5s_and_poll_the_admitted_ones():
    a, b = pod("a"), pod("b")
    ev = drain.Evictions([a, b], now=100.0)
    assert ev.due(100.0) == [("evict", a), ("evict", b)]
    ev.admitted(a, 100.0)
    assert ev.blocked(b, 100.0) == 'error when evicting pods/"b" -n "default" (will retry after 5s)'
    assert ev.next_due() == 101.0 and ev.due(100.5) == []
    assert ev.due(101.0) == [("check", a)]
    ev.still_there(a, 101.0)
    assert ev.due(102.0) == [("check", a)]
    ev.done(a)
    assert ev.next_due() == 105.0 and ev.due(105.0) == [("evict", b)]
    ev.admitted(b, 105.0)
    ev.done(b)
    assert ev.finished and ev.failures == []


def test_the_global_timeout_fails_what_is_left():
    a, b, c = pod("a"), pod("b"), pod("c")
    ev = drain.Evictions([a, b, c], now=0.0, timeout=10.0)
    ev.admitted(a, 0.0)
    ev.blocked(b, 0.0)
    ev.failed(c, "pods \"c\" is forbidden")
    assert ev.next_due() == 1.0
    ev.blocked(b, 6.0)
    ev.still_there(a, 9.5)
    assert ev.next_due() == 10.0  # the deadline comes first
    assert ev.due(10.0) == [] and ev.finished
    assert ev.failures == [
        'error when evicting pods/"c" -n "default": pods "c" is forbidden',
        'error when waiting for pod "a" in namespace "default" to terminate: global timeout reached: 10s',
        'error when evicting pods/"b" -n "default": global timeout reached: 10s']
