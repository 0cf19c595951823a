"""components.apiserver.servicerepair: the repair loops' decisions (repairip.go, portallocator's
repair.go) on a fake clock."""
from __future__ import annotations

import datetime

from components.apiserver.serviceips import IPAllocator, PortAllocator, parse_port_range, rebuild
from components.apiserver.servicerepair import LEAK_ROUNDS, repair_ips, repair_ports
from kubemu.api.ipaddress import LABEL_MANAGED_BY, for_service

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
CIDR = "10.96.0.0/24"
PORTS = parse_port_range("30000-30099")


def svc(name, ip=None, *nodeports, ns="default"):
    spec = {"ports": [{"port": 80 + i, "nodePort": n} for i, n in enumerate(nodeports)]}
    if ip is not None:
        spec.update(clusterIP=ip, clusterIPs=[ip])
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


def address(ip, name, *, age=0.0, ns="default", managed=True):
    obj = for_service(ip, ns, name)
    obj["metadata"]["creationTimestamp"] = (NOW - datetime.timedelta(seconds=age)).strftime("%Y-%m-%dT%H:%M:%SZ")
    if not managed:
        del obj["metadata"]["labels"][LABEL_MANAGED_BY]
    return obj


def test_every_held_address_gets_its_ipaddress_and_only_old_orphans_go():
    services = [svc("web", "10.96.0.5"), svc("db", "10.96.0.6"), svc("twin", "10.96.0.6"),
                svc("out", "10.0.0.1"), svc("moved", "10.96.0.8"), svc("headless", "None")]
    addresses = {
        "10.96.0.6": address("10.96.0.6", "twin"),        # held by two: names one of them, kept
        "10.96.0.7": address("10.96.0.7", "gone", age=61),   # its Service is gone: past the grace
        "10.96.0.9": address("10.96.0.9", "gone", age=30),   # young: maybe a create under way
        "10.96.0.8": address("10.96.0.8", "web", age=600),   # names a Service that does not hold it
        "10.96.0.10": address("10.96.0.10", "web", age=600, managed=False),  # not the allocator's
        "10.0.0.1": address("10.0.0.1", "out"),            # held outside the range: rebuild says so
    }
    plan = repair_ips(IPAllocator(CIDR), services, addresses, now=NOW)
    assert plan.create == (("10.96.0.5", "default", "web"), ("10.96.0.8", "default", "moved"))
    assert plan.delete == ("10.96.0.8", "10.96.0.7")
    assert plan.messages == (
        "the cluster IP 10.96.0.5 for service default/web is not allocated; repairing",
        "the cluster IP 10.96.0.8 for service default/moved has a wrong reference; repairing",
        "the IPAddress 10.96.0.7 appears to have leaked: cleaning up")
    young_gone = repair_ips(IPAllocator(CIDR), [], {"10.96.0.9": address("10.96.0.9", "x", age=60)}, now=NOW)
    assert young_gone.delete == ()
    assert repair_ips(IPAllocator(CIDR), [], {"10.96.0.9": address("10.96.0.9", "x", age=60)},
                      now=NOW + datetime.timedelta(seconds=1)).delete == ("10.96.0.9",)


def test_a_leaked_port_is_kept_for_its_rounds_and_a_held_one_is_taken():
    def stored(*ports):
        alloc = PortAllocator(PORTS)
        for p in ports:
            alloc.allocate(p)
        return alloc

    def rebuilt(services):
        ips, ports = IPAllocator(CIDR), PortAllocator(PORTS)
        rebuild(ips, ports, services)
        return ports

    services = [svc("web", "10.96.0.5", 30001), svc("np", "10.96.0.6", 30002)]
    leaks: dict[int, int] = {}
    first = repair_ports(stored(30001, 30050), rebuilt(services), leaks)
    assert first.changed and first.ports.has(30002) and first.ports.has(30050)
    assert first.messages == ("the node port 30002 is not allocated; repairing",
                              "the node port 30050 may have leaked: flagging for later clean up")
    leaks = first.leaks
    for _ in range(LEAK_ROUNDS - 2):
        again = repair_ports(stored(30001, 30002, 30050), rebuilt(services), leaks)
        assert not again.changed and again.ports.has(30050) and again.messages == ()
        leaks = again.leaks
    last = repair_ports(stored(30001, 30002, 30050), rebuilt(services), leaks)
    assert last.changed and not last.ports.has(30050) and last.leaks == {}
    assert last.messages == ("the node port 30050 appears to have leaked: cleaning up",)
    # a port taken again by a Service before its rounds ran out is no leak any more
    back = repair_ports(stored(30001, 30002, 30050), rebuilt([*services, svc("x", None, 30050)]), {30050: 1})
    assert back.leaks == {} and not back.changed and back.messages == ()
