"""components.apiserver.serviceips: kube-apiserver's ClusterIP and NodePort allocators."""
from __future__ import annotations

import ipaddress
import random

import pytest

from components.apiserver.serviceips import (AllocationError, IPAllocator, PortAllocator, PortRange,
                                             cluster_ips, node_ports, parse_port_range, rebuild)

PORTS = parse_port_range("30000-32767")


def svc(name, ip=None, *nodeports, ns="default"):
    spec = {"ports": [{"port": 80 + i, "nodePort": n} for i, n in enumerate(nodeports)]}
    if ip is not None:
        spec.update(clusterIP=ip, clusterIPs=[ip])
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def test_port_ranges_parse_as_kube_apiserver_reads_them():
    assert parse_port_range("30000-32767") == PortRange(30000, 2768)
    assert str(parse_port_range(" 31000-31010 ")) == "31000-31010"
    assert parse_port_range("30000") == PortRange(30000, 1)
    for bad in ("", "a-b", "32767-30000", "0-10", "30000-70000", "-5"):
        with pytest.raises(ValueError):
            parse_port_range(bad)


def test_dynamic_ips_come_from_the_upper_band_and_the_lower_band_once_it_is_full():
    ips = IPAllocator("10.96.0.0/12", rand=random.Random(7))
    net = ipaddress.ip_network("10.96.0.0/12")
    # a /12 has 2^20 - 2 usable addresses: the static band is capped at 256 (10.96.0.1-10.96.1.0)
    assert ips.bits.band == 256
    for _ in range(200):
        ip = ipaddress.ip_address(ips.allocate_next())
        assert ip in net and int(ip) - int(net.network_address) > 256
    small = IPAllocator("10.0.0.0/24", rand=random.Random(1))
    assert small.bits.size == 254 and small.bits.band == 16  # max(16, 254/16)
    got = [small.allocate_next() for _ in range(254)]
    assert len(set(got)) == 254
    assert "10.0.0.0" not in got and "10.0.0.255" not in got  # network and broadcast never given
    upper_first = [int(ipaddress.ip_address(ip)) - int(ipaddress.ip_address("10.0.0.1")) for ip in got]
    assert all(o >= 16 for o in upper_first[:238]) and all(o < 16 for o in upper_first[238:])
    with pytest.raises(AllocationError, match="^range is full$"):
        small.allocate_next()


def test_the_same_seed_allocates_the_same_addresses():
    def sequence(seed):
        ips = IPAllocator("10.96.0.0/12", rand=random.Random(seed))
        return [ips.allocate_next() for _ in range(5)]
    assert sequence(3) == sequence(3) != sequence(4)


def test_specific_ips_and_their_errors_in_kubernetes_words():
    ips = IPAllocator("10.96.0.0/12")
    ips.allocate("10.96.0.10")
    assert ips.has("10.96.0.10")
    with pytest.raises(AllocationError, match=r"^provided IP is already allocated$"):
        ips.allocate("10.96.0.10")
    for outside in ("10.0.0.1", "10.96.0.0", "10.111.255.255", "::1", "nonsense"):
        with pytest.raises(AllocationError) as err:
            ips.allocate(outside)
        assert str(err.value) == (f"the provided IP ({outside}) is not in the valid range. "
                                  "The range of valid IPs is 10.96.0.0/12")
    ips.release("10.96.0.10")
    ips.release("10.0.0.1")  # not held: nothing happens
    ips.allocate("10.96.0.10")


def test_node_ports_bands_errors_and_release():
    ports = PortAllocator(PORTS, rand=random.Random(2))
    assert ports.bits.band == 86  # min(max(16, 2768/32), 128): 30000-30085 is the static band
    for _ in range(100):
        assert 30086 <= ports.allocate_next() <= 32767
    with pytest.raises(AllocationError) as err:
        ports.allocate(40000)
    assert str(err.value) == "provided port is not in the valid range. The range of valid ports is 30000-32767"
    ports.allocate(30080)
    with pytest.raises(AllocationError, match="^provided port is already allocated$"):
        ports.allocate(30080)
    ports.release(30080)
    assert not ports.has(30080)
    tiny = PortAllocator(parse_port_range("31000-31003"))
    assert tiny.bits.band == 0 and sorted(tiny.allocate_next() for _ in range(4)) == [31000, 31001, 31002, 31003]
    with pytest.raises(AllocationError, match="^range is full$"):
        tiny.allocate_next()


def test_what_a_service_holds():
    assert cluster_ips(svc("a", "10.96.0.5")) == ["10.96.0.5"]
    assert cluster_ips(svc("h", "None")) == [] and cluster_ips(svc("e")) == []
    assert cluster_ips({"spec": {"clusterIP": "10.96.0.7"}}) == ["10.96.0.7"]
    assert node_ports(svc("n", "10.96.0.5", 30001, 30001, 30002)) == [30001, 30002]
    assert node_ports({"spec": {"ports": "junk"}}) == [] and node_ports({}) == []


def test_rebuild_takes_what_services_hold_and_says_what_it_cannot_once_each():
    ips, ports = IPAllocator("10.96.0.0/12"), PortAllocator(PORTS)
    ips.allocate("10.96.0.99")  # stale: rebuilt away
    warnings = rebuild(ips, ports, [
        svc("a", "10.96.0.1", 30001), svc("b", "10.0.0.1", 40000), svc("c", "10.96.0.1", 30001),
        svc("h", "None"), svc("e"),
    ])
    assert warnings == [
        "the cluster IP 10.0.0.1 for service default/b is not within the service CIDR 10.96.0.0/12; "
        "please recreate",
        "the node port 40000 for service default/b is not within the port range 30000-32767; please recreate",
        "the cluster IP 10.96.0.1 for service default/c was assigned to multiple services; please recreate",
        "the node port 30001 for service default/c was assigned to multiple services; please recreate",
    ]
    assert ips.has("10.96.0.1") and not ips.has("10.96.0.99") and ports.has(30001)
    assert ips.free() == ips.bits.size - 1 and ports.free() == 2767


def test_a_health_check_node_port_is_held_only_by_a_service_that_needs_one():
    spec = {"type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": 30099,
            "ports": [{"port": 80, "nodePort": 30080}]}
    assert node_ports({"spec": spec}) == [30080, 30099]
    assert node_ports({"spec": {**spec, "externalTrafficPolicy": "Cluster"}}) == [30080]
    assert node_ports({"spec": {"type": "ClusterIP", "healthCheckNodePort": 30080, "ports": [{"port": 80}]}}) == []


def test_check_and_next_free_take_nothing():
    ports = PortAllocator(parse_port_range("30000-30001"), rand=random.Random(1))
    ports.allocate(30000)
    assert ports.next_free() == 30001 and ports.check(30001) == 1 and ports.free() == 1
    with pytest.raises(AllocationError, match="range is full"):
        ports.next_free(exclude=[30001])
    with pytest.raises(AllocationError, match="already allocated"):
        ports.check(30000)
    ips = IPAllocator("10.96.0.0/30", rand=random.Random(1))  # .1 and .2
    assert ips.next_free(exclude=["10.96.0.1"]) == "10.96.0.2" and ips.free() == 2
    with pytest.raises(AllocationError, match="not in the valid range"):
        ips.check("10.0.0.1")


def test_a_port_bitmap_snapshot_round_trips_and_reads_another_range_port_by_port():
    ports = PortAllocator(parse_port_range("30000-30099"))
    for port in (30000, 30007, 30099):
        ports.allocate(port)
    text, data = ports.snapshot()
    assert text == "30000-30099" and int.from_bytes(data, "big") == (1 << 0) | (1 << 7) | (1 << 99)
    back = PortAllocator(parse_port_range("30000-30099"))
    back.allocate(30050)  # restore replaces what was held
    back.restore(text, data)
    assert sorted(back.range.base + o for o in back.bits.used) == [30000, 30007, 30099]
    narrower = PortAllocator(parse_port_range("30005-30010"))
    narrower.restore(text, data)
    assert [narrower.has(p) for p in (30007, 30000, 30099)] == [True, False, False]
    for text, data in (("nonsense", data), (text, None), (None, None)):
        back.restore(text, data)
        assert back.free() == 100
    assert PortAllocator(PORTS).snapshot() == ("30000-32767", b"")
