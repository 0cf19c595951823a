"""The cluster zone: what the cluster DNS answers, as CoreDNS's kubernetes plugin answers it with
kubeadm's Corefile (`pods insecure`, authoritative for the cluster domain and, for the addresses
it knows, in-addr.arpa/ip6.arpa). Pure: a `ClusterView` built from the API's objects, a parsed
query in, a response out; `respond` does the wire: bytes in, bytes (or nothing) out.

Names under the cluster domain (the Kubernetes DNS-Based Service Discovery specification):

    <svc>.<ns>.svc.<domain>              A/AAAA: the ClusterIP(s); headless: every ready endpoint;
                                         ExternalName: a CNAME to spec.externalName
    <ep>.<svc>.<ns>.svc.<domain>         the endpoint whose hostname (or dashed IP) is <ep>
    _<port>._<proto>.<svc>.<ns>.svc...   SRV per matching named port (the plain service name
                                         gives SRV for every port), targets in the additional
    <a-b-c-d>.<ns>.pod.<domain>          A a.b.c.d when namespace <ns> exists (`pods insecure`)
    dns-version.<domain>                 TXT: the specification's version
    <domain>                             SOA

A Service or endpoint whose name could not exist (a label past 63 octets, the name past 255) has
no records: no query can name it. Under a cluster domain of at most MAX_DOMAIN_LENGTH characters
that happens to no object Kubernetes's validation accepts (Service and namespace names and
hostnames are DNS labels).

A name under the domain that matches nothing is NXDOMAIN, an existing name without records of
the asked type NOERROR with no answer (both with the zone's SOA in the authority section, so
resolvers cache the negative answer for the TTL); before the first sync of the view, NXDOMAIN
becomes SERVFAIL (CoreDNS's kubernetes plugin: not known yet is not known not to exist). Names
outside the domain, and reverse names of addresses the cluster does not hold, would be forwarded
to the node's resolver by CoreDNS: kubemu's DNS runs in a pod's network namespace, which has no
route out of the cluster, so it answers REFUSED for them (the stub resolver then fails the lookup
at once instead of waiting for a forward that cannot happen).

Wire rules (miekg/dns's defaults, which CoreDNS serves with): a datagram shorter than a header,
or one that is itself a response, is dropped; an opcode other than QUERY gets NOTIMP; anything
that does not parse, or has not exactly one question, gets FORMERR with the query's id; an answer
larger than the client's UDP size (512 without EDNS) is sent as the question alone with TC set,
so the client retries over TCP.
"""
from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.opcode
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.ANY.CNAME
import dns.rdtypes.ANY.PTR
import dns.rdtypes.ANY.SOA
import dns.rdtypes.ANY.TXT
import dns.rdtypes.IN.A
import dns.rdtypes.IN.AAAA
import dns.rdtypes.IN.SRV
import dns.rrset
import dns.reversename

from kubemu.netplan import CLUSTER_DOMAIN

DEFAULT_DOMAIN = CLUSTER_DOMAIN
DEFAULT_TTL = 5               # the kubernetes plugin's default `ttl`
SCHEMA_VERSION = "1.1.0"      # dns-version.<domain> TXT, as CoreDNS answers it
SCHEMA_TTL = 28800
SOA_REFRESH, SOA_RETRY, SOA_EXPIRE = 7200, 1800, 86400
UDP_MIN = 512                 # what a UDP answer may always hold (RFC 1035)
TCP_MAX = 65535
OUR_PAYLOAD = 1232            # the EDNS UDP size we advertise (DNS flag day 2020)
SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MAX_NAME = 255                # octets a name takes on the wire, at most (RFC 1035)
# The longest name the zone builds is an endpoint's, <hostname>.<service>.<namespace>.svc.<domain>,
# its first three labels DNS labels of up to 63 characters (as Kubernetes validates them). The
# longest cluster domain under which it fits, in characters as written without the final dot
# (57): each label takes its length plus a length octet, and the root one more octet.
MAX_DOMAIN_LENGTH = MAX_NAME - sum(n + 1 for n in (63, 63, 63, len("svc"))) - 2

_IN = dns.rdataclass.IN
_A, _AAAA, _SRV, _TXT = dns.rdatatype.A, dns.rdatatype.AAAA, dns.rdatatype.SRV, dns.rdatatype.TXT
_CNAME, _PTR, _SOA = dns.rdatatype.CNAME, dns.rdatatype.PTR, dns.rdatatype.SOA
_XFR = (dns.rdatatype.AXFR, dns.rdatatype.IXFR)
_QR, _RD, _TC, _AA = 0x8000, 0x0100, 0x0200, 0x0400
_OPCODE_MASK = 0x7800
_REVERSE_ZONES = (dns.name.from_text("in-addr.arpa."), dns.name.from_text("ip6.arpa."))


# -- the view --

@dataclass(frozen=True)
class Port:
    name: str        # lower-cased; "" for an unnamed port
    protocol: str    # lower-cased: tcp, udp, sctp
    port: int        # -1: the slice declared no port (A records only, no SRV)


NO_PORTS = (Port("", "", -1),)


@dataclass(frozen=True)
class Endpoint:
    ip: str
    name: str                      # its hostname, else its dashed IP: <name>.<svc>.<ns>.svc
    ports: tuple[Port, ...]


@dataclass(frozen=True)
class Service:
    namespace: str
    name: str
    cluster_ips: tuple[str, ...]   # empty: headless (or ExternalName)
    external_name: str             # set for type ExternalName
    ports: tuple[Port, ...]

    @property
    def headless(self) -> bool:
        return not self.cluster_ips and not self.external_name


@dataclass(frozen=True)
class ClusterView:
    """What the zone holds: services by (namespace, name), their ready endpoints, the existing
    namespaces, the reverse names of the addresses. `serial` is the SOA's (CoreDNS: the time of
    the last change); `synced` False until the first LIST of everything was seen."""
    domain: dns.name.Name
    services: Mapping[tuple[str, str], Service] = field(default_factory=dict)
    endpoints: Mapping[tuple[str, str], tuple[Endpoint, ...]] = field(default_factory=dict)
    namespaces: frozenset[str] = frozenset()
    reverse: Mapping[str, dns.name.Name] = field(default_factory=dict)
    serial: int = 0
    ttl: int = DEFAULT_TTL
    synced: bool = True


def _canonical(ip: str) -> str:
    try:
        return str(ipaddress.ip_address(ip))
    except ValueError:
        return ip


def dashed(ip: str) -> str:
    return ip.replace(".", "-").replace(":", "-")


def _ports(raw: Iterable | None) -> tuple[Port, ...]:
    ports = tuple(Port(str(p.get("name") or "").lower(), str(p.get("protocol") or "TCP").lower(),
                       int(p.get("port") if p.get("port") is not None else -1))
                  for p in raw or () if isinstance(p, dict))
    return ports or NO_PORTS


def _service(obj: dict) -> Service | None:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    ns, name = meta.get("namespace"), meta.get("name")
    if not ns or not name:
        return None
    external = ""
    if spec.get("type") == "ExternalName":
        external = str(spec.get("externalName") or "")
    ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    ips = tuple(ip for ip in ips if ip and ip != "None") if not external else ()
    return Service(ns, name, ips, external, _ports(spec.get("ports")))


def _ready_endpoints(slice_: dict) -> list[Endpoint]:
    """The slice's ready addresses (CoreDNS: an unset `ready` counts as ready), FQDN slices aside."""
    if slice_.get("addressType") not in ("IPv4", "IPv6"):
        return []
    ports = _ports(slice_.get("ports"))
    found = []
    for ep in slice_.get("endpoints") or ():
        if not isinstance(ep, dict) or (ep.get("conditions") or {}).get("ready") is False:
            continue
        for ip in ep.get("addresses") or ():
            hostname = str(ep.get("hostname") or "").lower()
            found.append(Endpoint(str(ip), hostname or dashed(str(ip)), ports))
    return found


def domain_length(domain: dns.name.Name) -> int:
    """The length of an absolute `domain` as written without its final dot, an escaped
    character counted as the one octet it stands for (so comparable to MAX_DOMAIN_LENGTH)."""
    return len(domain.to_wire()) - 2


def _name(labels: tuple[str, ...], origin: dns.name.Name) -> dns.name.Name | None:
    """`labels` under the zone, or None for a name that cannot exist (a label longer than 63
    octets or empty, or the whole longer than 255): the view holds no record under such a name,
    as no query can ask for it."""
    try:
        return dns.name.Name(labels).concatenate(origin)
    except dns.exception.DNSException:
        return None


def build_view(domain: str, services: Iterable[dict], slices: Iterable[dict], namespaces: Iterable[str],
               *, serial: int = 0, ttl: int = DEFAULT_TTL, synced: bool = True) -> ClusterView:
    """The view of these Services, EndpointSlices (as the API serves them) and namespace names.
    A Service or endpoint whose name cannot exist under the domain is left out (see `_name`)."""
    origin = dns.name.from_text(domain)
    svcs: dict[tuple[str, str], Service] = {}
    names: dict[tuple[str, str], dns.name.Name] = {}
    for obj in services:
        svc = _service(obj)
        name = _name((svc.name, svc.namespace, "svc"), origin) if svc is not None else None
        if name is not None:
            svcs[(svc.namespace, svc.name)], names[(svc.namespace, svc.name)] = svc, name
    eps: dict[tuple[str, str], list[Endpoint]] = {}
    reverse: dict[str, dns.name.Name] = {}
    for obj in slices:
        meta = obj.get("metadata") or {}
        ns, owner = meta.get("namespace"), (meta.get("labels") or {}).get(SERVICE_NAME_LABEL)
        if not owner or not ns:
            continue
        found = eps.setdefault((ns, owner), [])
        for ep in _ready_endpoints(obj):
            name = _name((ep.name, owner, ns, "svc"), origin)
            if name is not None:
                found.append(ep)
                reverse.setdefault(_canonical(ep.ip), name)   # a ClusterIP's name wins (below)
    for key, svc in svcs.items():
        for ip in svc.cluster_ips:
            reverse[_canonical(ip)] = names[key]
    return ClusterView(origin, svcs, {k: tuple(v) for k, v in eps.items()}, frozenset(namespaces),
                       reverse, serial, ttl, synced)


# -- lookups (CoreDNS's parseRequest, findServices, findPods) --

class _NameError(Exception):
    """The name does not exist (NXDOMAIN)."""


@dataclass(frozen=True)
class _Record:
    key: tuple[str, ...]   # the record's own name below the zone, for SRV targets
    host: str              # an IP, or the name an ExternalName points at
    port: int


def _labels(name: dns.name.Name, zone: dns.name.Name) -> list[str]:
    rel = name.relativize(zone)
    return [] if rel == dns.name.empty else [label.decode("ascii", "replace").lower() for label in rel.labels]


def _unscore(label: str) -> str:
    return label[1:] if label.startswith("_") else label


def _records(labels: list[str], view: ClusterView) -> list[_Record]:
    """The records a name holds (possibly none: NODATA); _NameError if it does not exist."""
    if not labels or labels == ["svc"] or labels == ["pod"]:
        return []
    kind = labels[-1]
    if kind not in ("svc", "pod") or len(labels) > 5:
        raise _NameError
    namespace = labels[-2] if len(labels) >= 2 else ""
    if namespace and namespace not in view.namespaces:
        raise _NameError
    if len(labels) == 2:
        return []                       # <ns>.svc / <ns>.pod: the namespace exists
    if kind == "pod":
        return _pod(labels, namespace)
    service = view.services.get((namespace, labels[-3]))
    if service is None:
        raise _NameError
    endpoint, port, proto = "", "", ""
    if len(labels) == 4:
        endpoint = labels[0]
    elif len(labels) == 5:
        port, proto = _unscore(labels[0]), _unscore(labels[1])
    return _service_records(service, view, endpoint, port, proto)


def _pod(labels: list[str], namespace: str) -> list[_Record]:
    if len(labels) != 3:
        raise _NameError
    name = labels[0]
    text = name.replace("-", ".") if name.count("-") == 3 and "--" not in name else name.replace("-", ":")
    try:
        ip = str(ipaddress.ip_address(text))
    except ValueError:
        raise _NameError from None
    return [_Record((name, namespace, "pod"), ip, -1)]


def _port_matches(p: Port, port: str, proto: str) -> bool:
    return (not port or p.name == port) and (not proto or p.protocol == proto)


def _service_records(svc: Service, view: ClusterView, endpoint: str, port: str, proto: str) -> list[_Record]:
    key = (svc.name, svc.namespace, "svc")
    if svc.external_name:
        return [_Record(key, svc.external_name, -1)]
    found: list[_Record] = []
    if svc.headless or endpoint:
        for ep in view.endpoints.get((svc.namespace, svc.name), ()):
            if endpoint and ep.name != endpoint:
                continue
            found.extend(_Record((ep.name, *key), ep.ip, p.port) for p in ep.ports
                         if _port_matches(p, port, proto))
        if not found:
            raise _NameError
        return found
    matching = [p for p in svc.ports if _port_matches(p, port, proto)]
    if not matching:
        raise _NameError
    return [_Record(key, ip, p.port) for p in matching for ip in svc.cluster_ips]


# -- answers --

def _ip_version(host: str) -> int:
    try:
        return ipaddress.ip_address(host).version
    except ValueError:
        return 0        # a name (ExternalName)


def _rrset(name: dns.name.Name, ttl: int, rdtype, rdatas) -> dns.rrset.RRset:
    rrset = dns.rrset.RRset(name, _IN, rdtype)
    for rd in rdatas:
        rrset.add(rd, ttl)
    return rrset


def _soa(zone: dns.name.Name, view: ClusterView) -> dns.rrset.RRset:
    rd = dns.rdtypes.ANY.SOA.SOA(_IN, _SOA, dns.name.Name((b"ns", b"dns")).concatenate(zone),
                                 dns.name.Name((b"hostmaster",)).concatenate(zone), view.serial & 0xFFFFFFFF,
                                 SOA_REFRESH, SOA_RETRY, SOA_EXPIRE, view.ttl)
    return _rrset(zone, min(view.ttl, 300), _SOA, [rd])


def _address_answers(qname: dns.name.Name, rdtype, records: list[_Record], view: ClusterView,
                     depth: int = 0) -> list[dns.rrset.RRset]:
    """A or AAAA rrsets for `records` (CoreDNS's plugin.A/AAAA): addresses of the asked family,
    an ExternalName as a CNAME, followed inside the zone (at most 8 deep, no loops)."""
    want = 4 if rdtype == _A else 6
    answers: list[dns.rrset.RRset] = []
    seen: list = []
    for rec in records:
        version = _ip_version(rec.host)
        if version == want and rec.host not in seen:
            seen.append(rec.host)
        elif version == 0:
            answers.extend(_cname_chain(qname, rec.host, rdtype, view, depth))
    if seen:
        cls = dns.rdtypes.IN.A.A if rdtype == _A else dns.rdtypes.IN.AAAA.AAAA
        answers.insert(0, _rrset(qname, view.ttl, rdtype, [cls(_IN, rdtype, ip) for ip in seen]))
    return answers


def _cname_chain(qname: dns.name.Name, target_text: str, rdtype, view: ClusterView,
                 depth: int) -> list[dns.rrset.RRset]:
    try:
        target = dns.name.from_text(target_text)
    except dns.exception.DNSException:
        return []
    if target == qname or depth > 7:
        return []
    cname = _rrset(qname, view.ttl, _CNAME, [dns.rdtypes.ANY.CNAME.CNAME(_IN, _CNAME, target)])
    if not target.is_subdomain(view.domain):
        return [cname]          # outside the zone: the client resolves the target itself
    try:
        further = _address_answers(target, rdtype, _records(_labels(target, view.domain), view), view, depth + 1)
    except _NameError:
        return []
    return [cname, *further] if further else []


def _srv_answers(qname: dns.name.Name, zone: dns.name.Name, records: list[_Record],
                 view: ClusterView) -> tuple[list, list]:
    """SRV rrset and the targets' addresses (CoreDNS's plugin.SRV: equal priority 0, weights
    sharing 100; ExternalName services and port-less endpoints have none)."""
    records = [r for r in records if r.port >= 0 and _ip_version(r.host)]
    if not records:
        return [], []
    weight = max(1, 100 // len(records))
    srvs, extra, seen_srv, seen_addr = [], [], set(), set()
    for rec in records:
        target = dns.name.Name(rec.key).concatenate(zone)
        if (target, rec.port) not in seen_srv:
            seen_srv.add((target, rec.port))
            srvs.append(dns.rdtypes.IN.SRV.SRV(_IN, _SRV, 0, weight, rec.port, target))
        if (target, rec.host) not in seen_addr:
            seen_addr.add((target, rec.host))
            rdtype = _A if _ip_version(rec.host) == 4 else _AAAA
            cls = dns.rdtypes.IN.A.A if rdtype == _A else dns.rdtypes.IN.AAAA.AAAA
            extra.append(_rrset(target, view.ttl, rdtype, [cls(_IN, rdtype, rec.host)]))
    return [_rrset(qname, view.ttl, _SRV, srvs)], extra


def _zone_of(qname: dns.name.Name, domain: dns.name.Name) -> dns.name.Name:
    """The zone's name as the query spells it (answers keep the asker's case)."""
    return dns.name.Name(qname.labels[len(qname.labels) - len(domain.labels):])


def _reverse(response: dns.message.Message, qname: dns.name.Name, rdtype, view: ClusterView) -> None:
    try:
        ip = str(ipaddress.ip_address(dns.reversename.to_address(qname)))
    except (dns.exception.DNSException, ValueError):
        ip = ""
    target = view.reverse.get(ip)
    if target is None:
        response.set_rcode(dns.rcode.REFUSED)   # would be forwarded: see the module docstring
        return
    response.flags |= dns.flags.AA
    if rdtype == _PTR:
        response.answer.append(_rrset(qname, view.ttl, _PTR, [dns.rdtypes.ANY.PTR.PTR(_IN, _PTR, target)]))


def answer(query: dns.message.Message, view: ClusterView) -> dns.message.Message:
    """The response to a parsed query that has exactly one question."""
    response = dns.message.make_response(query, our_payload=OUR_PAYLOAD)
    q = query.question[0]
    qname, rdtype = q.name, q.rdtype
    if q.rdclass != _IN or rdtype in _XFR:
        response.set_rcode(dns.rcode.REFUSED)   # no CHAOS zone, no zone transfers
        return response
    if not qname.is_subdomain(view.domain):
        if any(qname.is_subdomain(z) for z in _REVERSE_ZONES):
            _reverse(response, qname, rdtype, view)
        else:
            response.set_rcode(dns.rcode.REFUSED)
        return response
    response.flags |= dns.flags.AA
    zone = _zone_of(qname, view.domain)
    labels = _labels(qname, view.domain)
    try:
        if labels == ["dns-version"]:
            records = []
            if rdtype == _TXT:
                response.answer.append(_rrset(qname, SCHEMA_TTL, _TXT,
                                              [dns.rdtypes.ANY.TXT.TXT(_IN, _TXT, [SCHEMA_VERSION])]))
        else:
            records = _records(labels, view)
    except _NameError:
        response.set_rcode(dns.rcode.NXDOMAIN if view.synced else dns.rcode.SERVFAIL)
        if view.synced:
            response.authority.append(_soa(zone, view))
        return response
    if rdtype in (_A, _AAAA):
        response.answer.extend(_address_answers(qname, rdtype, records, view))
    elif rdtype == _SRV:
        srvs, extra = _srv_answers(qname, zone, records, view)
        response.answer.extend(srvs)
        response.additional.extend(extra)
    elif rdtype == _CNAME and records and not _ip_version(records[0].host):
        target = dns.name.from_text(records[0].host)
        response.answer.append(_rrset(qname, view.ttl, _CNAME, [dns.rdtypes.ANY.CNAME.CNAME(_IN, _CNAME, target)]))
    elif rdtype == _SOA and not labels:
        response.answer.append(_soa(zone, view))
    if not response.answer:
        response.authority.append(_soa(zone, view))   # NODATA
    return response


# -- the wire --

def _header_only(wire: bytes, rcode: int) -> bytes:
    """A response of just a header: the query's id, opcode and RD, QR set, `rcode`."""
    qid, flags = struct.unpack_from("!HH", wire)
    return struct.pack("!HHHHHH", qid, _QR | (flags & (_OPCODE_MASK | _RD)) | (rcode & 0xF), 0, 0, 0, 0)


@dataclass(frozen=True)
class Outcome:
    """What `respond` made of a datagram: the bytes to send (None: send nothing) and, for a
    query that was not answered normally, why (for a rate-limited log line)."""
    reply: bytes | None
    problem: str = ""


def _dropped(wire: bytes) -> Outcome | None:
    """The outcome of a datagram that gets no answer at all; None for one that does."""
    if len(wire) < 12:
        return Outcome(None, f"{len(wire)}-byte datagram shorter than a DNS header: dropped")
    if struct.unpack_from("!H", wire, 2)[0] & _QR:
        return Outcome(None, "a response, not a query: dropped")
    return None


def failure(wire: bytes, problem: str) -> Outcome:
    """SERVFAIL with the query's id, for a query that could not be answered (`problem`: why, and
    that it was SERVFAIL); nothing for a datagram that gets no answer anyway."""
    return _dropped(wire) or Outcome(_header_only(wire, dns.rcode.SERVFAIL), problem)


def respond(wire: bytes, view: ClusterView, *, tcp: bool = False) -> Outcome:
    """Parse, answer and encode one query; never raises."""
    dropped = _dropped(wire)
    if dropped is not None:
        return dropped
    flags, qdcount = struct.unpack_from("!HH", wire, 2)
    opcode = (flags & _OPCODE_MASK) >> 11
    if opcode != dns.opcode.QUERY:
        return Outcome(_header_only(wire, dns.rcode.NOTIMP), f"opcode {dns.opcode.to_text(opcode)}: NOTIMP")
    if qdcount != 1:
        return Outcome(_header_only(wire, dns.rcode.FORMERR), f"{qdcount} questions: FORMERR")
    try:
        query = dns.message.from_wire(wire)
    except Exception as err:  # noqa: BLE001  (whatever the parser raises, the input was bad)
        return Outcome(_header_only(wire, dns.rcode.FORMERR),
                       f"malformed query ({type(err).__name__}: {err}): FORMERR")
    try:
        response = answer(query, view)
        limit = TCP_MAX if tcp else max(UDP_MIN, min(query.payload if query.edns >= 0 else UDP_MIN, TCP_MAX))
        try:
            return Outcome(response.to_wire(max_size=limit))
        except dns.exception.TooBig:
            truncated = dns.message.make_response(query, our_payload=OUR_PAYLOAD)
            truncated.flags |= (response.flags & dns.flags.AA) | dns.flags.TC
            truncated.set_rcode(response.rcode())
            return Outcome(truncated.to_wire())
    except Exception as err:  # noqa: BLE001  (a query must never take the server down)
        return failure(wire, f"cannot answer {query.question[0]} ({type(err).__name__}: {err}): SERVFAIL")
