"""The cluster zone's answers (CoreDNS's kubernetes plugin with kubeadm's Corefile) and its wire
rules for bad input, on built views: no process, no socket."""
from __future__ import annotations

import struct

import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdatatype
import dns.reversename
import pytest

from components.dns import zone


def service(name, cluster_ip="10.96.0.5", ports=(("http", 80, "TCP"),), namespace="default", **spec):
    ips = [cluster_ip] if cluster_ip else []
    return {"metadata": {"namespace": namespace, "name": name},
            "spec": {"clusterIP": cluster_ip or "", "clusterIPs": ips,
                     "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in ports], **spec}}


def endpoint_slice(service_name, endpoints, ports=(("http", 8080, "TCP"),), namespace="default", suffix="abc"):
    return {"metadata": {"namespace": namespace, "name": f"{service_name}-{suffix}",
                         "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4", "endpoints": endpoints,
            "ports": [{"name": n, "port": p, "protocol": proto} for n, p, proto in ports]}


def ep(ip, ready=True, hostname=None):
    out = {"addresses": [ip], "conditions": {"ready": ready, "serving": ready, "terminating": False}}
    if hostname:
        out["hostname"] = hostname
    return out


@pytest.fixture
def view():
    return zone.build_view("cluster.local", [
        service("web"),
        service("db", cluster_ip="None", ports=(("pg", 5432, "TCP"),)),
        service("empty", cluster_ip="None", ports=()),
        service("ext", cluster_ip=None, ports=(), type="ExternalName", externalName="example.com"),
        service("alias", cluster_ip=None, ports=(), type="ExternalName",
                externalName="web.default.svc.cluster.local"),
        service("kube-dns", cluster_ip="10.96.0.10",
                ports=(("dns", 53, "UDP"), ("dns-tcp", 53, "TCP"), ("metrics", 9153, "TCP")),
                namespace="kube-system"),
    ], [
        endpoint_slice("web", [ep("10.244.1.7"), ep("10.244.2.7")]),
        endpoint_slice("db", [ep("10.244.1.2", hostname="db-0"), ep("10.244.1.3"), ep("10.244.1.4", ready=False)],
                       ports=(("pg", 5432, "TCP"),)),
        endpoint_slice("db", [ep("10.244.2.9", hostname="db-1")], ports=(("pg", 5432, "TCP"),), suffix="def"),
    ], ["default", "kube-system"], serial=1234)


def ask(view, name, rdtype="A", **kw) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype, **kw)
    out = zone.respond(query.to_wire(), view)
    assert out.reply is not None and not out.problem
    response = dns.message.from_wire(out.reply)
    assert response.id == query.id
    return response


def addresses(response, rdtype="A") -> set[str]:
    return {rd.to_text() for rrset in response.answer if rrset.rdtype == dns.rdatatype.from_text(rdtype)
            for rd in rrset}


def soa_in_authority(response) -> bool:
    return [(r.name.to_text(), r.rdtype) for r in response.authority] == [("cluster.local.", dns.rdatatype.SOA)]


def test_a_record_of_a_cluster_ip_service_is_authoritative_with_the_plugins_ttl(view):
    r = ask(view, "web.default.svc.cluster.local")
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    assert addresses(r) == {"10.96.0.5"}
    assert r.answer[0].ttl == zone.DEFAULT_TTL == 5
    assert not r.flags & dns.flags.RA   # CoreDNS answers its zone without recursion


def test_names_are_case_insensitive_and_answers_keep_the_askers_spelling(view):
    r = ask(view, "WEB.Default.SVC.cluster.LOCAL")
    assert addresses(r) == {"10.96.0.5"}
    assert r.answer[0].name.to_text() == "WEB.Default.SVC.cluster.LOCAL."


def test_aaaa_of_an_ipv4_only_service_is_nodata_with_the_soa(view):
    r = ask(view, "web.default.svc.cluster.local", "AAAA")
    assert r.rcode() == dns.rcode.NOERROR and not r.answer and soa_in_authority(r)


def test_headless_service_returns_every_ready_endpoint_of_all_its_slices(view):
    r = ask(view, "db.default.svc.cluster.local")
    assert addresses(r) == {"10.244.1.2", "10.244.1.3", "10.244.2.9"}   # not the unready 10.244.1.4


def test_headless_service_without_ready_endpoints_is_nxdomain_as_coredns_answers(view):
    r = ask(view, "empty.default.svc.cluster.local")
    assert r.rcode() == dns.rcode.NXDOMAIN and soa_in_authority(r)


def test_srv_for_a_named_port_of_a_cluster_ip_service(view):
    r = ask(view, "_http._tcp.web.default.svc.cluster.local", "SRV")
    [rrset] = r.answer
    assert [rd.to_text() for rd in rrset] == ["0 100 80 web.default.svc.cluster.local."]
    assert [(a.name.to_text(), addresses_of(a)) for a in r.additional] == \
        [("web.default.svc.cluster.local.", {"10.96.0.5"})]


def addresses_of(rrset) -> set[str]:
    return {rd.to_text() for rd in rrset}


def test_srv_of_the_plain_service_name_lists_every_port(view):
    r = ask(view, "kube-dns.kube-system.svc.cluster.local", "SRV")
    # one SRV per distinct port (53/UDP and 53/TCP are one), weights sharing 100 as in CoreDNS
    assert sorted(rd.to_text() for rd in r.answer[0]) == ["0 33 53 kube-dns.kube-system.svc.cluster.local.",
                                                          "0 33 9153 kube-dns.kube-system.svc.cluster.local."]
    r = ask(view, "_dns._udp.kube-dns.kube-system.svc.cluster.local", "SRV")
    assert [rd.port for rd in r.answer[0]] == [53]
    r = ask(view, "_dns._tcp.kube-dns.kube-system.svc.cluster.local", "SRV")   # dns is UDP only
    assert r.rcode() == dns.rcode.NXDOMAIN


def test_srv_of_a_headless_service_targets_each_endpoint_by_hostname_or_dashed_ip(view):
    r = ask(view, "_pg._tcp.db.default.svc.cluster.local", "SRV")
    assert sorted(rd.to_text() for rd in r.answer[0]) == [
        "0 33 5432 10-244-1-3.db.default.svc.cluster.local.",
        "0 33 5432 db-0.db.default.svc.cluster.local.",
        "0 33 5432 db-1.db.default.svc.cluster.local."]
    assert {a.name.to_text(): addresses_of(a) for a in r.additional} == {
        "10-244-1-3.db.default.svc.cluster.local.": {"10.244.1.3"},
        "db-0.db.default.svc.cluster.local.": {"10.244.1.2"},
        "db-1.db.default.svc.cluster.local.": {"10.244.2.9"}}


def test_unknown_port_name_is_nxdomain(view):
    assert ask(view, "_nope._tcp.web.default.svc.cluster.local", "SRV").rcode() == dns.rcode.NXDOMAIN


def test_endpoint_by_hostname_statefulset_style_and_by_dashed_ip(view):
    assert addresses(ask(view, "db-0.db.default.svc.cluster.local")) == {"10.244.1.2"}
    assert addresses(ask(view, "10-244-1-3.db.default.svc.cluster.local")) == {"10.244.1.3"}
    assert addresses(ask(view, "10-244-2-7.web.default.svc.cluster.local")) == {"10.244.2.7"}
    assert ask(view, "db-9.db.default.svc.cluster.local").rcode() == dns.rcode.NXDOMAIN
    assert ask(view, "10-244-1-4.db.default.svc.cluster.local").rcode() == dns.rcode.NXDOMAIN   # not ready


def test_pod_record_answers_the_ip_of_its_name_in_an_existing_namespace(view):
    assert addresses(ask(view, "10-244-3-9.default.pod.cluster.local")) == {"10.244.3.9"}
    assert ask(view, "10-244-3-9.nosuchns.pod.cluster.local").rcode() == dns.rcode.NXDOMAIN
    assert ask(view, "not-an-ip.default.pod.cluster.local").rcode() == dns.rcode.NXDOMAIN
    assert ask(view, "10-244-3-999.default.pod.cluster.local").rcode() == dns.rcode.NXDOMAIN
    r = ask(view, "10-244-3-9.default.pod.cluster.local", "AAAA")
    assert r.rcode() == dns.rcode.NOERROR and not r.answer


def test_unknown_names_under_the_domain_are_nxdomain_with_the_zones_soa(view):
    for name in ("nope.default.svc.cluster.local", "web.nosuchns.svc.cluster.local",
                 "web.default.svc.cluster.local.default.svc.cluster.local",   # ndots:5 search tries
                 "a.b.c.web.default.svc.cluster.local", "web.default.xyz.cluster.local"):
        r = ask(view, name)
        assert r.rcode() == dns.rcode.NXDOMAIN and r.flags & dns.flags.AA, name
        assert soa_in_authority(r), name
    [soa] = r.authority[0]
    assert soa.to_text() == "ns.dns.cluster.local. hostmaster.cluster.local. 1234 7200 1800 86400 5"


def test_existing_names_without_that_type_are_nodata(view):
    for name, rdtype in (("default.svc.cluster.local", "A"), ("svc.cluster.local", "A"),
                         ("cluster.local", "A"), ("web.default.svc.cluster.local", "MX"),
                         ("web.default.svc.cluster.local", "TXT")):
        r = ask(view, name, rdtype)
        assert r.rcode() == dns.rcode.NOERROR and not r.answer and soa_in_authority(r), (name, rdtype)


def test_apex_soa_and_dns_version(view):
    r = ask(view, "cluster.local", "SOA")
    assert [rr.rdtype for rr in r.answer] == [dns.rdatatype.SOA]
    r = ask(view, "dns-version.cluster.local", "TXT")
    assert [rd.to_text() for rd in r.answer[0]] == ['"1.1.0"']


def test_names_outside_the_domain_are_refused(view):
    for name in ("example.com", "kubernetes.io", "local", "cluster.local.example.com"):
        r = ask(view, name)
        assert r.rcode() == dns.rcode.REFUSED and not r.answer and not r.flags & dns.flags.AA, name


def test_external_name_is_a_cname_followed_inside_the_zone(view):
    r = ask(view, "ext.default.svc.cluster.local")
    assert [rr.to_text() for rr in r.answer] == ["ext.default.svc.cluster.local. 5 IN CNAME example.com."]
    r = ask(view, "alias.default.svc.cluster.local")
    assert [rr.rdtype for rr in r.answer] == [dns.rdatatype.CNAME, dns.rdatatype.A]
    assert addresses(r) == {"10.96.0.5"}
    r = ask(view, "ext.default.svc.cluster.local", "CNAME")
    assert [rr.to_text() for rr in r.answer] == ["ext.default.svc.cluster.local. 5 IN CNAME example.com."]
    assert not ask(view, "ext.default.svc.cluster.local", "SRV").answer


def test_ptr_for_cluster_ips_and_endpoints_and_refused_for_other_addresses(view):
    def ptr(ip):
        return ask(view, dns.reversename.from_address(ip).to_text(), "PTR")
    assert [rd.to_text() for rd in ptr("10.96.0.5").answer[0]] == ["web.default.svc.cluster.local."]
    assert [rd.to_text() for rd in ptr("10.244.1.2").answer[0]] == ["db-0.db.default.svc.cluster.local."]
    assert ptr("10.244.1.4").rcode() == dns.rcode.REFUSED   # unready: not in the zone
    assert ptr("192.0.2.1").rcode() == dns.rcode.REFUSED
    assert ask(view, "10.in-addr.arpa", "PTR").rcode() == dns.rcode.REFUSED


def test_zone_transfers_and_other_classes_are_refused(view):
    assert ask(view, "cluster.local", "AXFR").rcode() == dns.rcode.REFUSED
    assert ask(view, "web.default.svc.cluster.local", "A", rdclass="CH").rcode() == dns.rcode.REFUSED


def test_before_the_first_sync_unknown_is_servfail_not_nxdomain():
    empty = zone.build_view("cluster.local", (), (), (), synced=False)
    assert ask(empty, "web.default.svc.cluster.local").rcode() == dns.rcode.SERVFAIL
    assert ask(empty, "example.com").rcode() == dns.rcode.REFUSED


def test_another_cluster_domain():
    v = zone.build_view("k8s.example", [service("web")], (), ["default"])
    assert addresses(ask(v, "web.default.svc.k8s.example")) == {"10.96.0.5"}
    assert ask(v, "web.default.svc.cluster.local").rcode() == dns.rcode.REFUSED


def test_edns_is_answered_with_edns(view):
    r = ask(view, "web.default.svc.cluster.local", use_edns=0, payload=4096)
    assert r.edns == 0 and r.payload == zone.OUR_PAYLOAD


# -- truncation --

@pytest.fixture
def big_view():
    many = [ep(f"10.244.{i // 250}.{i % 250 + 1}") for i in range(60)]   # 60 A records: ~1 KB
    return zone.build_view("cluster.local", [service("big", cluster_ip="None")],
                           [endpoint_slice("big", many)], ["default"])


def test_an_answer_too_big_for_udp_is_truncated_and_whole_over_tcp(big_view):
    query = dns.message.make_query("big.default.svc.cluster.local", "A")
    out = zone.respond(query.to_wire(), big_view)
    assert len(out.reply) <= 512
    r = dns.message.from_wire(out.reply)
    assert r.flags & dns.flags.TC and r.id == query.id and not r.answer
    r = dns.message.from_wire(zone.respond(query.to_wire(), big_view, tcp=True).reply)
    assert not r.flags & dns.flags.TC and len(addresses(r)) == 60
    # EDNS with room for it: whole over UDP too
    query = dns.message.make_query("big.default.svc.cluster.local", "A", use_edns=0, payload=4096)
    r = dns.message.from_wire(zone.respond(query.to_wire(), big_view).reply)
    assert not r.flags & dns.flags.TC and len(addresses(r)) == 60


# -- bad input --

def good_wire(name="web.default.svc.cluster.local", qid=0x1234) -> bytes:
    q = dns.message.make_query(name, "A")
    q.id = qid
    return q.to_wire()


def header(wire: bytes) -> tuple[int, int, int]:
    qid, flags = struct.unpack_from("!HH", wire)
    return qid, flags, struct.unpack_from("!H", wire, 4)[0]


def assert_formerr(out: zone.Outcome, qid=0x1234):
    assert out.reply is not None and out.problem
    r = dns.message.from_wire(out.reply)
    assert r.rcode() == dns.rcode.FORMERR and r.id == qid and r.flags & dns.flags.QR


@pytest.mark.parametrize("size", [0, 1, 5, 11])
def test_datagrams_shorter_than_a_header_are_dropped(view, size):
    out = zone.respond(good_wire()[:size], view)
    assert out.reply is None and "shorter than a DNS header" in out.problem


def test_a_truncated_query_is_formerr_with_its_id(view):
    wire = good_wire()
    for cut in (12, 13, 20, len(wire) - 1):
        assert_formerr(zone.respond(wire[:cut], view))


def test_a_300_byte_name_is_formerr(view):
    labels = b"".join(bytes([50]) + b"a" * 50 for _ in range(6))   # 306 bytes of labels
    wire = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + labels + b"\x00" + struct.pack("!HH", 1, 1)
    out = zone.respond(wire, view)
    assert_formerr(out)
    assert "NameTooLong" in out.problem


def test_a_compression_loop_is_formerr(view):
    # the question's name is a pointer to itself (offset 12)
    wire = struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\xc0\x0c" + struct.pack("!HH", 1, 1)
    assert_formerr(zone.respond(wire, view))


def test_garbage_after_a_header_is_formerr(view):
    assert_formerr(zone.respond(struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\xff" * 40, view))


def test_not_exactly_one_question_is_formerr(view):
    wire = good_wire()
    two = wire[:4] + struct.pack("!H", 2) + wire[6:] + wire[12:]
    assert_formerr(zone.respond(two, view))
    assert_formerr(zone.respond(wire[:4] + struct.pack("!H", 0) + wire[6:12], view))


def test_another_opcode_is_notimp(view):
    wire = bytearray(good_wire())
    wire[2] |= dns.opcode.to_flags(dns.opcode.NOTIFY) >> 8
    out = zone.respond(bytes(wire), view)
    r = dns.message.from_wire(out.reply)
    assert r.rcode() == dns.rcode.NOTIMP and r.id == 0x1234 and r.opcode() == dns.opcode.NOTIFY


def test_a_response_is_not_answered(view):
    wire = bytearray(good_wire())
    wire[2] |= 0x80
    assert zone.respond(bytes(wire), view).reply is None


def test_a_failure_while_answering_is_servfail_never_an_exception(view, monkeypatch):
    def broken(query, view):
        raise RuntimeError("boom")
    monkeypatch.setattr(zone, "answer", broken)
    out = zone.respond(good_wire(), view)
    assert dns.message.from_wire(out.reply).rcode() == dns.rcode.SERVFAIL and "boom" in out.problem


def test_build_view_ignores_objects_it_cannot_use():
    v = zone.build_view("cluster.local", [{"metadata": {}}, {"spec": {}}, service("web")],
                        [{"metadata": {"name": "x"}}, {"metadata": {"namespace": "default", "labels": {
                            "kubernetes.io/service-name": "web"}}, "addressType": "FQDN",
                          "endpoints": [{"addresses": ["example.com"]}]}], ["default"])
    assert set(v.services) == {("default", "web")} and not any(v.endpoints.values())


# -- names that cannot exist --

LABEL_63 = "x" * 63
LONG_DOMAIN = ".".join(["a" * 40, "b" * 40, "local"])   # 87 characters: past MAX_DOMAIN_LENGTH


def test_names_too_long_to_exist_are_left_out_and_the_rest_is_answered():
    # <63>.<63>.<63>.svc.<87-character domain> would be 283 octets; <63>.<63>.svc.<domain> fits
    v = zone.build_view(LONG_DOMAIN, [
        service(LABEL_63, cluster_ip="10.96.0.7", namespace=LABEL_63),
        service("a" * 100, cluster_ip="10.96.0.8"),              # a label past 63 octets
        service("db", cluster_ip="None", ports=(("pg", 5432, "TCP"),)),
    ], [
        endpoint_slice(LABEL_63, [ep("10.244.1.7", hostname=LABEL_63)], namespace=LABEL_63),
        endpoint_slice("db", [ep("10.244.2.2", hostname="db-0")], ports=(("pg", 5432, "TCP"),)),
    ], ["default", LABEL_63])
    assert set(v.services) == {(LABEL_63, LABEL_63), ("default", "db")}
    assert v.endpoints[(LABEL_63, LABEL_63)] == ()
    assert addresses(ask(v, f"{LABEL_63}.{LABEL_63}.svc.{LONG_DOMAIN}")) == {"10.96.0.7"}
    assert addresses(ask(v, f"db-0.db.default.svc.{LONG_DOMAIN}")) == {"10.244.2.2"}
    ptr = ask(v, dns.reversename.from_address("10.96.0.7").to_text(), "PTR")
    assert ptr.answer[0][0].target.to_text() == f"{LABEL_63}.{LABEL_63}.svc.{LONG_DOMAIN}."
    for ip in ("10.244.1.7", "10.96.0.8"):    # names no record can have
        assert ask(v, dns.reversename.from_address(ip).to_text(), "PTR").rcode() == dns.rcode.REFUSED


def test_under_the_longest_domain_allowed_the_longest_names_are_answered():
    domain = ".".join(["a" * 28, "b" * (zone.MAX_DOMAIN_LENGTH - 29)])
    assert zone.domain_length(dns.name.from_text(domain)) == len(domain) == zone.MAX_DOMAIN_LENGTH
    v = zone.build_view(domain, [service(LABEL_63, cluster_ip="None", namespace=LABEL_63)],
                        [endpoint_slice(LABEL_63, [ep("10.244.1.7", hostname=LABEL_63)], namespace=LABEL_63)],
                        [LABEL_63])
    longest = f"{LABEL_63}.{LABEL_63}.{LABEL_63}.svc.{domain}"
    assert len(dns.name.from_text(longest).to_wire()) == zone.MAX_NAME
    assert addresses(ask(v, longest)) == {"10.244.1.7"}
    srv = ask(v, f"_http._tcp.{LABEL_63}.{LABEL_63}.svc.{domain}", "SRV", use_edns=0, payload=4096)
    assert [rd.target.to_text() for rd in srv.answer[0]] == [longest + "."]
    with pytest.raises(dns.name.NameTooLong):
        dns.name.from_text(f"{LABEL_63}.{LABEL_63}.{LABEL_63}.svc.c{domain}")   # one character more


def test_failure_is_servfail_with_the_querys_id_or_nothing_for_what_is_dropped():
    out = zone.failure(good_wire(), "why")
    reply = dns.message.from_wire(out.reply)
    assert (reply.id, reply.rcode(), out.problem) == (0x1234, dns.rcode.SERVFAIL, "why")
    response = bytearray(good_wire())
    response[2] |= 0x80
    assert zone.failure(bytes(response), "why").reply is None
    assert zone.failure(b"\x42", "why").reply is None
