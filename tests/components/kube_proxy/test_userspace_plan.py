"""The userspace proxy's decisions: listeners, round-robin, ClientIP affinity, notices said once."""
from __future__ import annotations

import pytest

from components.kube_proxy.endpoints import Endpoint, ServicePort
from components.kube_proxy.userspace_plan import (Balancer, Listener, Planner, Target, is_loopback,
                                                  privileged_port_start)


def ep(ip: str, port: int = 8080) -> Endpoint:
    return Endpoint(ip=ip, port=port, node="node-0", ready=True, serving=True, terminating=False)


def sp(name: str = "web", cluster_ip: str = "127.96.0.20", port: int = 8080, node_port: int | None = None,
       protocol: str = "TCP", eps=(), external_eps=None, affinity: int | None = None) -> ServicePort:
    eps = tuple(eps)
    return ServicePort(namespace="default", name=name, port_name="", protocol=protocol, cluster_ip=cluster_ip,
                       port=port, node_port=node_port, external_ips=(), affinity_timeout=affinity,
                       internal_local=False, external_local=external_eps is not None, endpoints=eps,
                       external_endpoints=eps if external_eps is None else tuple(external_eps),
                       all_endpoints=eps)


# -- listeners --

def test_listeners_for_cluster_ips_and_node_ports():
    planner = Planner(["127.0.0.1/32"], privileged_below=1024)
    plan = planner.plan([sp(node_port=30080), sp("dns", "127.96.0.10", 5353, protocol="UDP")], set())
    web = ("default", "web", "TCP", "")
    assert plan.routes == {
        Listener("TCP", "127.96.0.20", 8080): Target(web),
        Listener("TCP", "127.0.0.1", 30080): Target(web, external=True),
        Listener("UDP", "127.96.0.10", 5353): Target(("default", "dns", "UDP", "")),
    }
    assert plan.open == tuple(sorted(plan.routes)) and plan.close == () and plan.notices == ()


def test_node_ports_on_the_nodeport_addresses_only_and_not_shared():
    """kube-proxy's --nodeport-addresses: a listener per address; none given, no NodePort (in
    host mode every node and every cluster shares 127/8). A NodePort's listener is one proxy's
    alone (no SO_REUSEPORT): another cluster's proxy must not join it; a ClusterIP's is shared
    by the cluster's nodes."""
    web = ("default", "web", "TCP", "")
    plan = Planner([], privileged_below=1024).plan([sp(node_port=30080)], set())
    assert plan.routes == {Listener("TCP", "127.96.0.20", 8080): Target(web)}
    plan = Planner(["127.0.0.1/32", "127.0.0.2", "127.0.0.1"], privileged_below=1024).plan(
        [sp(node_port=30080)], set())
    assert sorted(plan.routes) == [Listener("TCP", "127.0.0.1", 30080), Listener("TCP", "127.0.0.2", 30080),
                                   Listener("TCP", "127.96.0.20", 8080)]
    assert {listener.port: target.reuse_port for listener, target in plan.routes.items()} == {
        30080: False, 8080: True}


def test_listener_diff_opens_the_new_and_closes_the_gone():
    planner = Planner(["127.0.0.1/32"], privileged_below=1024)
    listening = {Listener("TCP", "127.96.0.20", 8080), Listener("TCP", "127.0.0.1", 30080)}
    plan = planner.plan([sp(), sp("api", "127.96.0.21", 9090)], listening)
    assert plan.open == (Listener("TCP", "127.96.0.21", 9090),)
    assert plan.close == (Listener("TCP", "127.0.0.1", 30080),)
    assert planner.plan([], set(plan.routes)).close == tuple(sorted(plan.routes))


def test_a_privileged_port_is_said_once_while_it_is_wanted():
    planner = Planner(["127.0.0.1/32"], privileged_below=1024)
    first = planner.plan([sp(port=80), sp("ok", "127.96.0.21", 8080)], set())
    assert Listener("TCP", "127.96.0.20", 80) not in first.routes
    assert [(n.name, n.reason) for n in first.notices] == [("web", "PrivilegedPort")]
    assert "default/web: cannot serve 127.96.0.20:80/TCP: ports below 1024 need CAP_NET_BIND_SERVICE" \
        == first.notices[0].message
    assert planner.plan([sp(port=80)], set()).notices == ()         # the next syncs say nothing
    assert planner.plan([sp(port=80)], set()).notices == ()
    planner.plan([], set())                                         # gone, and back: said again
    assert len(planner.plan([sp(port=80)], set()).notices) == 1


def test_with_cap_net_bind_service_low_ports_are_served():
    planner = Planner(["127.0.0.1/32"], privileged_port_start(cap_eff=1 << 10, unprivileged_port_start=1024))
    assert Listener("TCP", "127.96.0.20", 80) in planner.plan([sp(port=80)], set()).routes
    assert privileged_port_start(cap_eff=0, unprivileged_port_start=1024) == 1024
    assert privileged_port_start(cap_eff=0, unprivileged_port_start=0) == 0


def test_only_loopback_addresses_are_ever_listened_on():
    planner = Planner(["127.0.0.1/32"], privileged_below=0)
    plan = planner.plan([sp(cluster_ip="10.96.0.20", node_port=30080)], set())
    assert set(plan.routes) == {Listener("TCP", "127.0.0.1", 30080)}
    assert [n.reason for n in plan.notices] == ["NotLoopback"]
    assert planner.plan([sp(cluster_ip="10.96.0.20", node_port=30080)], set()).notices == ()
    for cidr in ("0.0.0.0/32", "10.0.0.1/32", "::1", "localhost", "127.0.0.0/8"):
        with pytest.raises(ValueError, match="single loopback addresses"):
            Planner([cidr], privileged_below=0)
    assert is_loopback("127.255.0.1") and not is_loopback("128.0.0.1") and not is_loopback("nonsense")


def test_sctp_is_said_once_and_not_served():
    planner = Planner(["127.0.0.1/32"], privileged_below=1024)
    plan = planner.plan([sp(protocol="SCTP")], set())
    assert plan.routes == {} and [n.reason for n in plan.notices] == ["UnsupportedProtocol"]
    assert planner.plan([sp(protocol="SCTP")], set()).notices == ()


def test_a_listen_failure_is_said_once():
    planner = Planner(["127.0.0.1/32"], privileged_below=1024)
    listener = Listener("TCP", "127.96.0.20", 8080)
    notice = planner.failed(listener, sp(), "Address already in use")
    assert notice.reason == "ListenFailed" and "Address already in use" in notice.message
    planner.plan([sp()], set())
    assert planner.failed(listener, sp(), "Address already in use") is None


# -- endpoints --

A, B, C = ("127.0.0.1", 9001), ("127.0.0.1", 9002), ("127.0.0.1", 9003)
T = Target(("default", "web", "TCP", ""))


def test_round_robin_over_every_endpoint():
    balancer = Balancer()
    balancer.update(T, [A, B, C], None)
    assert [balancer.pick(T, "127.0.0.1", 0.0) for _ in range(6)] == [A, B, C, A, B, C]


def test_round_robin_skips_what_failed_and_gives_none_when_all_did():
    balancer = Balancer()
    balancer.update(T, [A, B, C], None)
    assert balancer.pick(T, "c", 0.0, exclude={A}) == B
    assert balancer.pick(T, "c", 0.0) == C
    assert balancer.pick(T, "c", 0.0, exclude={A, B, C}) is None
    balancer.update(T, [], None)
    assert balancer.pick(T, "c", 0.0) is None
    assert balancer.pick(Target(("default", "other", "TCP", "")), "c", 0.0) is None


def test_client_ip_affinity_sticks_until_it_expires():
    balancer = Balancer()
    balancer.update(T, [A, B, C], 10)
    first = balancer.pick(T, "10.0.0.1", 100.0)
    assert [balancer.pick(T, "10.0.0.1", t) for t in (101.0, 105.0, 114.9)] == [first] * 3
    other = balancer.pick(T, "10.0.0.2", 115.0)
    assert other != first                                  # another client goes round
    assert balancer.pick(T, "10.0.0.1", 125.0) != first     # 10.1 s after its last use: expired


def test_affinity_moves_off_an_endpoint_that_failed_or_left():
    balancer = Balancer()
    balancer.update(T, [A, B], 60)
    assert balancer.pick(T, "c", 0.0) == A
    assert balancer.pick(T, "c", 1.0, exclude={A}) == B     # the retry after A failed
    assert balancer.pick(T, "c", 2.0) == B                  # and the client now sticks to B
    balancer.update(T, [A, C], 60)                          # B left
    assert balancer.pick(T, "c", 3.0) in (A, C)


def test_expire_forgets_old_affinities_and_retain_drops_targets():
    balancer = Balancer()
    balancer.update(T, [A, B], 10)
    assert balancer.pick(T, "c", 0.0) == A
    balancer.expire(20.0)
    assert balancer._targets[T].affinity == {}
    balancer.retain(set())
    assert balancer.endpoints(T) == ()


def test_endpoint_change_keeps_the_rotation_going():
    balancer = Balancer()
    balancer.update(T, [A, B, C], None)
    assert balancer.pick(T, "c", 0.0) == A
    balancer.update(T, [B, C], None)
    assert {balancer.pick(T, "c", 0.0) for _ in range(4)} == {B, C}
