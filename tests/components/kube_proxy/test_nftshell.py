"""nftshell against the real kernel, only ever inside throw-away `unshare --net` namespaces this
test makes (held by a `sleep`, addressed as /proc/<pid>/ns/net, gone when it is killed): never
the host's namespace or ruleset."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from components.kube_proxy import nftshell, rules
from components.kube_proxy.endpoints import service_ports
from tests.conftest import DEADLINE, wait_for

NFT = nftshell.find_nft()
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or NFT is None or not shutil.which("unshare") or not shutil.which("nsenter"),
    reason="needs root, nft, unshare and nsenter (throw-away network namespaces)")

CLUSTER = "10.244.0.0/16"
NODE1 = rules.scope("10.244.1.0/24", CLUSTER)


def _inode(pid: int | str) -> int:
    return os.stat(f"/proc/{pid}/ns/net").st_ino


class Netns:
    """A network namespace of its own, held by `sleep`; killed (by its PID) at close."""

    def __init__(self):
        self.proc = subprocess.Popen(["unshare", "--net", "sleep", "600"], start_new_session=True,
                                     stdin=subprocess.DEVNULL)
        mine = _inode("self")
        wait_for(lambda: os.path.exists(self.path) and _inode(self.proc.pid) != mine, message="unshare --net")
        self.sh("ip", "link", "set", "lo", "up")

    @property
    def path(self) -> str:
        return f"/proc/{self.proc.pid}/ns/net"

    def sh(self, *argv: str) -> str:
        return subprocess.run(["nsenter", f"--net={self.path}", *argv], check=True, capture_output=True,
                              text=True, timeout=DEADLINE).stdout

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def fabric():
    ns = Netns()
    yield ns
    ns.close()


def run(coro):
    return asyncio.run(coro)


def svc(name="web", cluster_ip="10.96.0.50", port=80, **spec):
    ports = [{"name": "http", "port": port, "protocol": "TCP", **({"nodePort": spec.pop("node_port")}
                                                                  if "node_port" in spec else {})}]
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": cluster_ip, "type": "NodePort" if "nodePort" in ports[0] else "ClusterIP",
                     "ports": ports, **spec}}


def slice_(endpoints, service="web", port=8000):
    return {"metadata": {"name": f"{service}-1", "namespace": "default",
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "nodeName": "n2"} for ip in endpoints],
            "ports": [{"name": "http", "port": port, "protocol": "TCP"}]}


def desired(services, slices, sc=NODE1):
    return rules.desired(service_ports(services, slices, "n1"), sc)


def ruleset(ns: Netns, table: str = NODE1.table) -> str:
    return ns.sh(NFT, "list", "table", "ip", table)


def elements(ns: Netns, name: str, table: str = NODE1.table) -> list:
    for item in json.loads(ns.sh(NFT, "-j", "list", "map", "ip", table, name))["nftables"]:
        if "map" in item:
            return item["map"].get("elem", [])
    return []


def test_full_then_partial_then_stale_deletion_in_the_kernel(fabric):
    two = desired([svc(sessionAffinity="ClientIP")], [slice_(["10.244.2.2", "10.244.2.3"])])
    t0 = rules.transaction(None, two, now=0)
    run(nftshell.apply(fabric.path, t0.text, nft=NFT))
    chains, sets = run(nftshell.list_table(fabric.path, NODE1.table, nft=NFT))
    assert set(two.chains) <= set(chains) and set(rules.BASE_CHAINS) <= set(chains)
    assert {s: t for s, t in sets.items() if s.startswith("affinity-")} == {s: 10800 for s in two.affinity_sets}
    assert len(elements(fabric, "service-ips")) == 1

    one = desired([svc(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}})],
                  [slice_(["10.244.2.2"])])
    t1 = rules.transaction(t0.after, one, now=10)
    run(nftshell.apply(fabric.path, t1.text, nft=NFT))  # a remade set and a flushed stale chain
    [gone] = t1.after.pending_delete
    chains, sets = run(nftshell.list_table(fabric.path, NODE1.table, nft=NFT))
    assert gone in chains and f"chain {gone} {{\n\t}}" in ruleset(fabric)
    assert {s: t for s, t in sets.items() if s.startswith("affinity-")} == {s: 60 for s in one.affinity_sets}
    t2 = rules.transaction(t1.after, one, now=11)
    run(nftshell.apply(fabric.path, t2.text, nft=NFT))
    chains, _ = run(nftshell.list_table(fabric.path, NODE1.table, nft=NFT))
    assert gone not in chains and set(one.chains) <= set(chains)

    # a restarted proxy reads the table back and its full sync converges it
    listed = rules.from_listing(NODE1, *run(nftshell.list_table(fabric.path, NODE1.table, nft=NFT)))
    none = desired([svc()], [slice_([])])
    t3 = rules.transaction(listed, none, now=20, full=True)
    run(nftshell.apply(fabric.path, t3.text, nft=NFT))
    assert set(t3.after.pending_delete) == set(one.chains)
    assert elements(fabric, "service-ips") == [] and len(elements(fabric, "no-endpoint-services")) == 1
    run(nftshell.apply(fabric.path, rules.transaction(t3.after, none, now=22).text, nft=NFT))
    chains, sets = run(nftshell.list_table(fabric.path, NODE1.table, nft=NFT))
    assert sorted(chains) == sorted(rules.BASE_CHAINS) and not [s for s in sets if s.startswith("affinity-")]


def test_a_broken_transaction_changes_nothing(fabric):
    st = desired([svc()], [slice_(["10.244.2.2"])])
    t0 = rules.transaction(None, st, now=0)
    run(nftshell.apply(fabric.path, t0.text, nft=NFT))
    before = ruleset(fabric)
    other = desired([svc(), svc("db", "10.96.0.60", 5432)], [slice_(["10.244.2.2"]), slice_(["10.244.2.9"], "db")])
    t1 = rules.transaction(t0.after, other, now=1)
    broken = t1.text + f"add rule ip {NODE1.table} services no such thing\n"
    with pytest.raises(nftshell.NftError) as err:
        run(nftshell.apply(fabric.path, broken, nft=NFT))
    assert "\n" not in str(err.value) and "Error:" in str(err.value)
    assert ruleset(fabric) == before


def test_listing_a_missing_table_and_cleanup(fabric):
    assert run(nftshell.list_table(fabric.path, "kube-proxy-7", nft=NFT)) == ([], {})
    run(nftshell.apply(fabric.path, rules.transaction(None, desired([], []), now=0).text, nft=NFT))
    run(nftshell.delete_table(fabric.path, NODE1.table, nft=NFT))
    run(nftshell.delete_table(fabric.path, NODE1.table, nft=NFT))  # already gone: no error
    assert fabric.sh(NFT, "list", "tables") == ""
    assert run(nftshell.fabric_problem(fabric.path, nft=NFT)) is None
    assert "does not exist" in run(nftshell.fabric_problem("/proc/0/ns/net", nft=NFT))


SERVER = textwrap.dedent("""
    import socket, sys
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], 8000))
    s.listen(16)
    print("listening", flush=True)
    while True:
        c, peer = s.accept()
        c.sendall(("hello from %s to %s" % (sys.argv[1], peer[0])).encode())
        c.close()
""")
CLIENT = textwrap.dedent("""
    import socket, sys
    try:
        c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5)
        print(c.recv(100).decode())
    except OSError as exc:
        print("error", exc.errno)
""")


def _wire(fabric: Netns, pod: Netns, iface: str, gateway: str, address: str) -> None:
    """A veth `iface` in the fabric ↔ eth0 in `pod`, the pod routed through the fabric."""
    fabric.sh("ip", "link", "add", iface, "type", "veth", "peer", "name", "eth0", "netns", str(pod.proc.pid))
    fabric.sh("ip", "addr", "add", f"{gateway}/24", "dev", iface)
    fabric.sh("ip", "link", "set", iface, "up")
    pod.sh("ip", "addr", "add", f"{address}/24", "dev", "eth0")
    pod.sh("ip", "link", "set", "eth0", "up")
    pod.sh("ip", "route", "add", "default", "via", gateway)


def test_packets_dnat_nodeport_and_reject(fabric):
    """A client behind `kmbr1` (node 1's interface) reaches a server on another link through
    a ClusterIP and a NodePort; a Service without endpoints refuses at once, before the fabric's
    unreachable route for the service CIDR could answer."""
    client, server = Netns(), Netns()
    srv = None
    try:
        fabric.sh("sysctl", "-qw", "net.ipv4.ip_forward=1")
        fabric.sh("sysctl", "-qw", "net.ipv4.icmp_ratelimit=0")
        fabric.sh("ip", "route", "add", "unreachable", "10.96.0.0/12")
        _wire(fabric, client, "kmbr1", "10.244.1.1", "10.244.1.2")
        _wire(fabric, server, "kmbr2", "10.244.2.1", "10.244.2.2")
        srv = subprocess.Popen(["nsenter", f"--net={server.path}", sys.executable, "-c", SERVER, "10.244.2.2"],
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert srv.stdout.readline().strip() == "listening"
        st = desired([svc(node_port=30080), svc("empty", "10.96.0.51")], [slice_(["10.244.2.2"])])
        run(nftshell.apply(fabric.path, rules.transaction(None, st, now=0).text, nft=NFT))

        def connect(host: str, port: int) -> str:
            return client.sh(sys.executable, "-c", CLIENT, host, str(port)).strip()

        # ClusterIP: DNATed, the pod's own address kept (an in-cluster source is not masqueraded)
        assert connect("10.96.0.50", 80) == "hello from 10.244.2.2 to 10.244.1.2"
        # NodePort on node 1's gateway: masqueraded (the reply must come back through this node)
        assert connect("10.244.1.1", 30080) == "hello from 10.244.2.2 to 10.244.2.1"
        # no endpoints: connection refused (ECONNREFUSED = 111), not the route's unreachable (113)
        assert connect("10.96.0.51", 80) == "error 111"
        # a port the ClusterIP does not serve: refused too (kube-proxy's cluster-ips check)
        assert connect("10.96.0.50", 81) == "error 111"
        # an address no Service has: the fabric's own unreachable route
        assert connect("10.96.0.52", 80) == "error 113"
        # the server's node has its own table beside node 1's; through it the server reaches
        # itself (hairpin): masqueraded to its gateway, else it would answer itself over lo
        node2 = rules.scope("10.244.2.0/24", CLUSTER)
        st2 = rules.desired(service_ports([svc()], [slice_(["10.244.2.2"])], "n2"), node2)
        run(nftshell.apply(fabric.path, rules.transaction(None, st2, now=0).text, nft=NFT))
        hairpin = server.sh(sys.executable, "-c", CLIENT, "10.96.0.50", "80").strip()
        assert hairpin == "hello from 10.244.2.2 to 10.244.2.1"
        assert connect("10.96.0.50", 80) == "hello from 10.244.2.2 to 10.244.1.2"  # node 1's still serve
    finally:
        if srv is not None:
            srv.kill()
            srv.wait()
        client.close()
        server.close()


def test_the_host_reaches_a_service_whose_endpoint_is_the_host_itself(fabric):
    """The `kubernetes` Service's endpoint is the apiserver on the host end of the host link
    (network.json `host_addr`). From the host the packet arrives on `host0` from that very
    address and is DNATed back to it: only the endpoint chain's hairpin masquerade (source =
    the endpoint) sends it back from the fabric's address — with the host's own address as its
    source the host would drop it as a martian. A pod keeps its address (in the cluster CIDR)."""
    host, pod = Netns(), Netns()
    srv = None
    try:
        fabric.sh("sysctl", "-qw", "net.ipv4.ip_forward=1")
        fabric.sh("ip", "route", "add", "unreachable", "10.96.0.0/12")
        # the host link as netplan.fabric_plan makes it: a /32 at each end, routed onlink
        fabric.sh("ip", "link", "add", "host0", "type", "veth", "peer", "name", "km-test", "netns", str(host.proc.pid))
        fabric.sh("ip", "addr", "add", "10.244.255.253/32", "dev", "host0")
        fabric.sh("ip", "link", "set", "host0", "up")
        fabric.sh("ip", "route", "add", "10.244.255.254", "dev", "host0", "scope", "link")
        host.sh("ip", "addr", "add", "10.244.255.254/32", "dev", "km-test")
        host.sh("ip", "link", "set", "km-test", "up")
        for cidr in ("10.96.0.0/12", CLUSTER):
            host.sh("ip", "route", "add", cidr, "via", "10.244.255.253", "dev", "km-test", "onlink",
                    "src", "10.244.255.254")
        _wire(fabric, pod, "kmbr0", "10.244.0.1", "10.244.0.2")
        srv = subprocess.Popen(["nsenter", f"--net={host.path}", sys.executable, "-c", SERVER, "10.244.255.254"],
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
        assert srv.stdout.readline().strip() == "listening"
        kubernetes = slice_(["10.244.255.254"], "kubernetes")
        for ep in kubernetes["endpoints"]:
            del ep["nodeName"]  # the apiserver's endpoint reconciler names no node
        node0 = rules.scope("10.244.0.0/24", CLUSTER, 14, "host0", "10.244.255.253")
        st = rules.desired(service_ports([svc("kubernetes", "10.96.0.1", 443)], [kubernetes], "n0"), node0)
        run(nftshell.apply(fabric.path, rules.transaction(None, st, now=0).text, nft=NFT))

        def connect(ns: Netns) -> str:
            return ns.sh(sys.executable, "-c", CLIENT, "10.96.0.1", "443").strip()

        assert connect(host) == "hello from 10.244.255.254 to 10.244.255.253"
        assert connect(pod) == "hello from 10.244.255.254 to 10.244.0.2"
    finally:
        if srv is not None:
            srv.kill()
            srv.wait()
        host.close()
        pod.close()


@pytest.mark.skipif(nftshell.find_tool("conntrack") is None, reason="needs conntrack (Debian's conntrack)")
def test_stale_udp_flows_deleted_in_the_fabric(fabric):
    """A UDP flow DNATed to an endpoint that leaves the Service is deleted from the fabric's
    conntrack table; the flows of the endpoint that stays are kept."""
    conntrack = nftshell.find_tool("conntrack")
    client, server = Netns(), Netns()
    try:
        fabric.sh("sysctl", "-qw", "net.ipv4.ip_forward=1")
        _wire(fabric, client, "kmbr1", "10.244.1.1", "10.244.1.2")
        _wire(fabric, server, "kmbr2", "10.244.2.1", "10.244.2.2")
        server.sh("ip", "addr", "add", "10.244.2.3/24", "dev", "eth0")

        def dns(ips):
            s = svc("dns", "10.96.0.10", 53)
            s["spec"]["ports"][0]["protocol"] = "UDP"
            sl = slice_(ips, "dns", 5353)
            sl["ports"][0]["protocol"] = "UDP"
            return service_ports([s], [sl], "n1")

        before, after = dns(["10.244.2.2"]), dns(["10.244.2.3"])
        st = rules.desired(before, NODE1)
        run(nftshell.apply(fabric.path, rules.transaction(None, st, now=0).text, nft=NFT))
        client.sh(sys.executable, "-c", "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                  "s.bind(('10.244.1.2', 5000)); s.sendto(b'q', ('10.96.0.10', 53))")

        def flows() -> str:
            return fabric.sh(conntrack, "-L", "-p", "udp")
        assert "dst=10.96.0.10" in wait_for(flows, message="the DNATed UDP flow")
        assert run(nftshell.delete_flows(fabric.path, rules.stale_udp_flows(after, before), conntrack)) is None
        assert "dst=10.96.0.10" in flows()  # 10.244.2.3's flows only: this one stays
        assert run(nftshell.delete_flows(fabric.path, rules.stale_udp_flows(before, after), conntrack)) is None
        assert "dst=10.96.0.10" not in flows()
        assert "unknown option" in run(nftshell.delete_flows(fabric.path, [("--bogus",)], conntrack))
    finally:
        client.close()
        server.close()
