from __future__ import annotations

import ipaddress
import itertools

import pytest

from components.kube_proxy import rules
from components.kube_proxy.endpoints import service_ports

CLUSTER = "10.244.0.0/16"
NODE0 = rules.scope("10.244.0.0/24", CLUSTER, 14, "host0", "10.244.255.253")
NODE1 = rules.scope("10.244.1.0/24", CLUSTER)

GOLDEN = """\
add table ip kube-proxy-1 { comment "rules for kube-proxy" ; }
add chain ip kube-proxy-1 filter-prerouting { type filter hook prerouting priority -110 ; }
add chain ip kube-proxy-1 nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip kube-proxy-1 nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip kube-proxy-1 mark-for-masquerade
add chain ip kube-proxy-1 masquerading
add chain ip kube-proxy-1 services
add chain ip kube-proxy-1 endpoints-check
add chain ip kube-proxy-1 reject-chain
add map ip kube-proxy-1 service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip kube-proxy-1 service-nodeports { type inet_proto . inet_service : verdict ; }
add map ip kube-proxy-1 no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip kube-proxy-1 no-endpoint-nodeports { type inet_proto . inet_service : verdict ; }
add set ip kube-proxy-1 cluster-ips { type ipv4_addr ; }
add set ip kube-proxy-1 service-ports { type ipv4_addr . inet_proto . inet_service ; }
add set ip kube-proxy-1 nodeport-ips { type ipv4_addr ; }
flush chain ip kube-proxy-1 filter-prerouting
flush chain ip kube-proxy-1 nat-prerouting
flush chain ip kube-proxy-1 nat-postrouting
flush chain ip kube-proxy-1 mark-for-masquerade
flush chain ip kube-proxy-1 masquerading
flush chain ip kube-proxy-1 services
flush chain ip kube-proxy-1 endpoints-check
flush chain ip kube-proxy-1 reject-chain
flush map ip kube-proxy-1 service-ips
flush map ip kube-proxy-1 service-nodeports
flush map ip kube-proxy-1 no-endpoint-services
flush map ip kube-proxy-1 no-endpoint-nodeports
flush set ip kube-proxy-1 cluster-ips
flush set ip kube-proxy-1 service-ports
flush set ip kube-proxy-1 nodeport-ips
add rule ip kube-proxy-1 filter-prerouting ct state new jump endpoints-check
add rule ip kube-proxy-1 endpoints-check iifname "kmbr1" ip daddr . meta l4proto . th dport vmap @no-endpoint-services
add rule ip kube-proxy-1 endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports
add rule ip kube-proxy-1 endpoints-check iifname "kmbr1" ip daddr @cluster-ips ip daddr . meta l4proto . th dport != @service-ports reject
add rule ip kube-proxy-1 reject-chain reject
add rule ip kube-proxy-1 nat-prerouting iifname "kmbr1" jump services
add rule ip kube-proxy-1 nat-prerouting ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports
add rule ip kube-proxy-1 services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip kube-proxy-1 nat-postrouting jump masquerading
add rule ip kube-proxy-1 masquerading mark and 0x4000 == 0 return
add rule ip kube-proxy-1 masquerading mark set mark xor 0x4000
add rule ip kube-proxy-1 masquerading masquerade fully-random
add rule ip kube-proxy-1 mark-for-masquerade mark set mark or 0x4000
add element ip kube-proxy-1 nodeport-ips { 10.244.1.1 }
add chain ip kube-proxy-1 endpoint-UHC27TME-default/web/tcp/http__10.244.1.2/8000
flush chain ip kube-proxy-1 endpoint-UHC27TME-default/web/tcp/http__10.244.1.2/8000
add chain ip kube-proxy-1 service-SUSTUHLJ-default/web/tcp/http
flush chain ip kube-proxy-1 service-SUSTUHLJ-default/web/tcp/http
add rule ip kube-proxy-1 endpoint-UHC27TME-default/web/tcp/http__10.244.1.2/8000 ip saddr 10.244.1.2 jump mark-for-masquerade
add rule ip kube-proxy-1 endpoint-UHC27TME-default/web/tcp/http__10.244.1.2/8000 meta l4proto tcp dnat to 10.244.1.2:8000
add rule ip kube-proxy-1 service-SUSTUHLJ-default/web/tcp/http ip daddr 10.96.0.50 tcp dport 80 ip saddr != 10.244.0.0/16 jump mark-for-masquerade
add rule ip kube-proxy-1 service-SUSTUHLJ-default/web/tcp/http numgen random mod 1 vmap { 0 : goto endpoint-UHC27TME-default/web/tcp/http__10.244.1.2/8000 }
add element ip kube-proxy-1 service-ips { 10.96.0.50 . tcp . 80 : goto service-SUSTUHLJ-default/web/tcp/http }
add element ip kube-proxy-1 cluster-ips { 10.96.0.50 }
add element ip kube-proxy-1 service-ports { 10.96.0.50 . tcp . 80 }
"""


def svc(name="web", cluster_ip="10.96.0.50", port=80, node_port=None, ns="default", **spec):
    p = {"name": "http", "port": port, "protocol": "TCP"}
    if node_port:
        p["nodePort"] = node_port
        spec.setdefault("type", "NodePort")
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": cluster_ip, "type": "ClusterIP", "ports": [p], **spec}}


def slice_(service="web", endpoints=(), ns="default"):
    return {"metadata": {"name": f"{service}-1", "namespace": ns,
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}, "nodeName": node}
                          for ip, node in endpoints],
            "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}]}


def state(services, slices, node="n1", sc=NODE1):
    return rules.desired(service_ports(services, slices, node), sc)


def lines(tx):
    return tx.text.splitlines()


def test_golden_full_transaction_for_one_service():
    tx = rules.transaction(None, state([svc()], [slice_(endpoints=[("10.244.1.2", "n1")])]), now=0)
    assert tx.full and tx.text == GOLDEN


def test_chain_names_are_kube_proxys():
    [sp] = service_ports([svc()], [slice_(endpoints=[("10.244.1.2", "n1")])], "n1")
    assert rules.service_chain(sp) == "service-SUSTUHLJ-default/web/tcp/http"
    assert rules.endpoint_chain(sp, sp.endpoints[0]) == "endpoint-UHC27TME-default/web/tcp/http__10.244.1.2/8000"
    assert rules.affinity_set(sp, sp.endpoints[0]).startswith("affinity-UHC27TME-")


def test_nothing_changed_is_an_empty_partial():
    st = state([svc()], [slice_(endpoints=[("10.244.1.2", "n1")])])
    first = rules.transaction(None, st, now=0)
    again = rules.transaction(first.after, st, now=5)
    assert not again.full and again.text == "" and again.changed_chains == 0


def test_partial_touches_only_the_changed_service():
    services = [svc(), svc("db", "10.96.0.60", 5432)]
    before = state(services, [slice_(endpoints=[("10.244.1.2", "n1")]), slice_("db", [("10.244.1.3", "n1")])])
    after = state(services, [slice_(endpoints=[("10.244.1.2", "n1"), ("10.244.0.7", "n0")]),
                             slice_("db", [("10.244.1.3", "n1")])])
    first = rules.transaction(None, before, now=0)
    tx = rules.transaction(first.after, after, now=10)
    assert not tx.full and tx.text
    for line in lines(tx):
        assert "default/web/" in line, line
        assert "db" not in line
    # the new endpoint's chain, the rewritten service chain; the old endpoint chain untouched
    assert tx.changed_chains == 2
    assert "add rule ip kube-proxy-1 service-SUSTUHLJ-default/web/tcp/http numgen random mod 2 vmap" in tx.text
    assert not any("10.244.1.2/8000" in line and line.startswith("flush") for line in lines(tx))
    assert not any(line.startswith(("add table", "flush map")) for line in lines(tx))


def test_stale_chains_flushed_now_deleted_a_second_later():
    two = state([svc()], [slice_(endpoints=[("10.244.1.2", "n1"), ("10.244.1.3", "n1")])])
    one = state([svc()], [slice_(endpoints=[("10.244.1.2", "n1")])])
    gone = "endpoint-" + rules.hash_and_truncate("default/web/tcp/http__10.244.1.3/8000")
    t0 = rules.transaction(None, two, now=100)
    t1 = rules.transaction(t0.after, one, now=200)
    assert f"flush chain ip kube-proxy-1 {gone}" in lines(t1)
    assert f"delete chain ip kube-proxy-1 {gone}" not in t1.text
    assert t1.after.next_due() == 201
    t2 = rules.transaction(t1.after, one, now=200.5)
    assert t2.text == ""
    t3 = rules.transaction(t2.after, one, now=201)
    assert lines(t3) == [f"delete chain ip kube-proxy-1 {gone}"]
    assert t3.after.next_due() is None
    # a stale chain wanted again before its deletion is written again and not deleted
    t1b = rules.transaction(rules.transaction(t1.after, two, now=200.2).after, two, now=202)
    assert gone not in t1b.text


def test_service_removed_deletes_its_map_element_before_flushing():
    st = state([svc()], [slice_(endpoints=[("10.244.1.2", "n1")])])
    empty = state([], [])
    t0 = rules.transaction(None, st, now=0)
    t1 = rules.transaction(t0.after, empty, now=1)
    out = lines(t1)
    delete = out.index("delete element ip kube-proxy-1 service-ips { 10.96.0.50 . tcp . 80 }")
    assert delete < out.index("flush chain ip kube-proxy-1 service-SUSTUHLJ-default/web/tcp/http")


def test_no_endpoints_reject_and_back():
    none = state([svc()], [slice_(endpoints=[])])
    assert dict(none.maps["no-endpoint-services"]) == {"10.96.0.50 . tcp . 80": "goto reject-chain"}
    assert not none.maps["service-ips"] and not none.chains
    # the ClusterIP's other ports are refused by the cluster-ips check, which these sets feed
    assert dict(none.maps["cluster-ips"]) == {"10.96.0.50": ""}
    assert dict(none.maps["service-ports"]) == {"10.96.0.50 . tcp . 80": ""}
    some = state([svc()], [slice_(endpoints=[("10.244.1.2", "n1")])])
    t0 = rules.transaction(None, none, now=0)
    t1 = rules.transaction(t0.after, some, now=1)
    assert "delete element ip kube-proxy-1 no-endpoint-services { 10.96.0.50 . tcp . 80 }" in lines(t1)
    assert any(line.startswith("add element ip kube-proxy-1 service-ips") for line in lines(t1))


def test_internal_traffic_policy_local_drops_when_endpoints_are_elsewhere():
    st = state([svc(internalTrafficPolicy="Local")], [slice_(endpoints=[("10.244.0.2", "n0")])])
    assert dict(st.maps["no-endpoint-services"]) == {"10.96.0.50 . tcp . 80": "drop"}
    here = state([svc(internalTrafficPolicy="Local")], [slice_(endpoints=[("10.244.1.2", "n1")])])
    [verdict] = here.maps["service-ips"].values()
    assert verdict.startswith("goto local-")


def test_affinity_sets_and_rules():
    st = state([svc(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 60}})],
               [slice_(endpoints=[("10.244.1.2", "n1")])])
    ep_chain = "endpoint-UHC27TME-default/web/tcp/http__10.244.1.2/8000"
    aff = "affinity-UHC27TME-default/web/tcp/http__10.244.1.2/8000"
    assert dict(st.affinity_sets) == {aff: 60}
    assert st.chains[ep_chain] == ("ip saddr 10.244.1.2 jump mark-for-masquerade", f"update @{aff} {{ ip saddr }}",
                                   "meta l4proto tcp dnat to 10.244.1.2:8000")
    assert f"ip saddr @{aff} goto {ep_chain}" in st.chains["service-SUSTUHLJ-default/web/tcp/http"]
    t0 = rules.transaction(None, st, now=0)
    assert f"add set ip kube-proxy-1 {aff} {{ type ipv4_addr ; flags dynamic,timeout ; timeout 60s ; }}" in lines(t0)
    # a new timeout remakes the set: its users flushed first, then delete, add, rules again
    st2 = state([svc(sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 90}})],
                [slice_(endpoints=[("10.244.1.2", "n1")])])
    out = lines(rules.transaction(t0.after, st2, now=1))
    assert out.index(f"flush chain ip kube-proxy-1 {ep_chain}") < out.index(f"delete set ip kube-proxy-1 {aff}") \
        < out.index(f"add set ip kube-proxy-1 {aff} {{ type ipv4_addr ; flags dynamic,timeout ; timeout 90s ; }}") \
        < out.index(f"add rule ip kube-proxy-1 {ep_chain} update @{aff} {{ ip saddr }}")
    # affinity off: the set is deleted at once, after its chains were flushed
    st3 = state([svc()], [slice_(endpoints=[("10.244.1.2", "n1")])])
    out = lines(rules.transaction(t0.after, st3, now=1))
    assert out.index(f"flush chain ip kube-proxy-1 {ep_chain}") < out.index(f"delete set ip kube-proxy-1 {aff}")


def test_hairpin_masquerade_in_every_endpoint_chain():
    st = state([svc()], [slice_(endpoints=[("10.244.1.2", "n1"), ("10.244.0.5", "n0")])])
    eps = {name: r for name, r in st.chains.items() if name.startswith("endpoint-")}
    assert len(eps) == 2
    for name, chain_rules in eps.items():
        ip = name.rsplit("__", 1)[1].split("/")[0]
        assert chain_rules[0] == f"ip saddr {ip} jump mark-for-masquerade"


def test_nodeport_scoping():
    assert NODE0.table == "kube-proxy-0" and NODE0.interfaces == ("kmbr0", "host0")
    assert NODE0.nodeport_addresses == ("10.244.0.1", "10.244.255.253")
    assert NODE1.table == "kube-proxy-1" and NODE1.nodeport_addresses == ("10.244.1.1",)
    st = state([svc(node_port=30080)], [slice_(endpoints=[("10.244.1.2", "n1")])])
    assert dict(st.maps["service-nodeports"]) == {"tcp . 30080": "goto external-SUSTUHLJ-default/web/tcp/http"}
    assert st.chains["external-SUSTUHLJ-default/web/tcp/http"] == (
        "jump mark-for-masquerade", "goto service-SUSTUHLJ-default/web/tcp/http")
    text = rules.transaction(None, st, now=0).text
    assert "add element ip kube-proxy-1 nodeport-ips { 10.244.1.1 }" in text
    assert "add rule ip kube-proxy-1 nat-prerouting ip daddr @nodeport-ips meta l4proto . th dport vmap " \
           "@service-nodeports" in text
    with pytest.raises(ValueError):
        rules.scope("10.250.0.0/24", CLUSTER)


def test_external_traffic_policy_local():
    services = [svc(node_port=30080, externalTrafficPolicy="Local")]
    slices = [slice_(endpoints=[("10.244.1.2", "n1"), ("10.244.0.2", "n0")])]
    st = state(services, slices, node="n1")
    ext = st.chains["external-SUSTUHLJ-default/web/tcp/http"]
    assert ext == ("goto local-SUSTUHLJ-default/web/tcp/http",)  # no masquerade: the client's address stays
    local = st.chains["local-SUSTUHLJ-default/web/tcp/http"]
    assert local == ("numgen random mod 1 vmap { 0 : goto endpoint-UHC27TME-default/web/tcp/http__10.244.1.2/8000 }",)
    assert "numgen random mod 2" in st.chains["service-SUSTUHLJ-default/web/tcp/http"][-1]  # ClusterIP: all
    elsewhere = state(services, [slice_(endpoints=[("10.244.0.2", "n0")])], node="n1")
    assert dict(elsewhere.maps["no-endpoint-nodeports"]) == {"tcp . 30080": "drop"}
    nowhere = state(services, [slice_(endpoints=[])], node="n1")
    assert dict(nowhere.maps["no-endpoint-nodeports"]) == {"tcp . 30080": "goto reject-chain"}


def test_full_sync_from_a_listing_removes_what_is_not_wanted():
    st = state([svc()], [slice_(endpoints=[("10.244.1.2", "n1")])])
    old_chain, old_set = "service-AAAAAAAA-default/old/tcp/http", "affinity-AAAAAAAA-default/old/tcp/http__1.2.3.4/80"
    prev = rules.from_listing(NODE1, ["nat-prerouting", "services", old_chain], {old_set: 10800, "nodeport-ips": None})
    tx = rules.transaction(prev, st, now=0, full=True)
    out = lines(tx)
    assert f"flush chain ip kube-proxy-1 {old_chain}" in out and f"delete set ip kube-proxy-1 {old_set}" in out
    assert "flush chain ip kube-proxy-1 services" in out and "delete chain ip kube-proxy-1 services" not in tx.text
    assert tx.after.pending_delete == {old_chain: 1.0}


def _matches(st: rules.ProxyState, iif: str, daddr: str, proto: str, port: int) -> bool:
    """Whether a new packet would hit a rule of this table (DNAT or no-endpoint verdict)."""
    sc = st.scope
    key, nodeport_key = f"{daddr} . {proto} . {port}", f"{proto} . {port}"
    by_iif = iif in sc.interfaces and any(key in st.maps[m] for m in ("service-ips", "no-endpoint-services"))
    by_addr = daddr in sc.nodeport_addresses and any(
        nodeport_key in st.maps[m] for m in ("service-nodeports", "no-endpoint-nodeports"))
    return by_iif or by_addr


def test_two_nodes_tables_match_disjoint_packets():
    services = [svc(node_port=30080), svc("db", "10.96.0.60", 5432), svc("lone", "10.96.0.70", 81, node_port=30081)]
    slices = [slice_(endpoints=[("10.244.1.2", "n1"), ("10.244.0.2", "n0")]), slice_("db", [("10.244.0.3", "n0")])]
    tables = [state(services, slices, "n0", NODE0), state(services, slices, "n1", NODE1)]
    ifaces = ["kmbr0", "kmbr1", "host0", "kmbr2"]
    daddrs = ["10.96.0.50", "10.96.0.60", "10.96.0.70", "10.244.0.1", "10.244.1.1", "10.244.255.253"]
    hits = 0
    for iif, daddr, port in itertools.product(ifaces, daddrs, (80, 81, 5432, 30080, 30081)):
        matching = [st.scope.table for st in tables if _matches(st, iif, daddr, "tcp", port)]
        assert len(matching) <= 1, (iif, daddr, port, matching)
        hits += len(matching)
    assert hits > 10  # the check looked at packets the tables do take
    # and the address sets themselves are disjoint
    assert not set(NODE0.interfaces) & set(NODE1.interfaces)
    assert not set(NODE0.nodeport_addresses) & set(NODE1.nodeport_addresses)
    assert all(not ipaddress.IPv4Address(a) in ipaddress.IPv4Network("10.96.0.0/12")
               for a in NODE0.nodeport_addresses + NODE1.nodeport_addresses)


def test_full_sync_keeps_only_pending_deletions_the_kernel_still_has():
    gone, kept = "endpoint-AAAAAAAA-default/a/tcp/__1.1.1.1/80", "endpoint-BBBBBBBB-default/b/tcp/__1.1.1.2/80"
    prev = rules.from_listing(NODE1, ["services", kept], {}, {gone: 5.0, kept: 5.0})
    assert prev.pending_delete == {kept: 5.0} and kept not in prev.state.chains
    tx = rules.transaction(prev, state([], []), now=6, full=True)
    assert gone not in tx.text
    assert f"delete chain ip kube-proxy-1 {kept}" in lines(tx)


def test_without_br_netfilter_local_endpoints_masquerade_their_whole_bridge():
    sc = rules.scope("10.244.1.0/24", CLUSTER, br_netfilter=False)
    st = state([svc()], [slice_(endpoints=[("10.244.1.2", "n1"), ("10.244.0.2", "n0")])], sc=sc)
    here = st.chains["endpoint-UHC27TME-default/web/tcp/http__10.244.1.2/8000"]
    there = [r for name, r in st.chains.items() if name.endswith("__10.244.0.2/8000")][0]
    assert here[0] == "ip saddr 10.244.1.0/24 jump mark-for-masquerade"
    assert there[0] == "ip saddr 10.244.0.2 jump mark-for-masquerade"  # routed back anyway: hairpin only


def test_stale_udp_flows_of_removed_endpoints():
    def udp(eps, **kw):
        s = svc(node_port=30053, **kw)
        s["spec"]["ports"][0]["protocol"] = "UDP"
        sl = slice_(endpoints=eps)
        sl["ports"][0]["protocol"] = "UDP"
        return service_ports([s], [sl], "n1")
    old = udp([("10.244.1.2", "n1"), ("10.244.1.3", "n1")], externalIPs=["192.0.2.7"])
    new = udp([("10.244.1.2", "n1")], externalIPs=["192.0.2.7"])
    assert rules.stale_udp_flows(old, new) == [
        ("-p", "udp", "--orig-dst", "10.96.0.50", "--orig-port-dst", "80", "--dst-nat", "10.244.1.3"),
        ("-p", "udp", "--orig-dst", "192.0.2.7", "--orig-port-dst", "80", "--dst-nat", "10.244.1.3"),
        ("-p", "udp", "--orig-port-dst", "30053", "--dst-nat", "10.244.1.3")]
    assert rules.stale_udp_flows(new, old) == []   # added endpoints leave flows alone
    assert len(rules.stale_udp_flows(old, [])) == 6  # the Service gone: both endpoints' flows
    tcp = service_ports([svc()], [slice_(endpoints=[("10.244.1.2", "n1")])], "n1")
    assert rules.stale_udp_flows(tcp, []) == []
