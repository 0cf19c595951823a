"""The cluster DNS as a real process: against a real store and apiserver it answers what the API
holds and follows changes; bad packets get their error (or nothing) and it keeps serving; the
probes; SIGTERM. Clients are dnspython's dns.query over UDP and TCP on 127.0.0.1."""
from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys

import dns.flags
import dns.message
import dns.query
import dns.rcode
import pytest

from components.dns import zone
from components.dns.server import Zone
from kubemu.apiclient import SyncApiClient
from tests.components.apiserver import REPO, APIServerEnv
from tests.conftest import spawn_marked, terminate, wait_for

from . import SERVING, DNSProc

HEADLESS_PODS = ["10.244.1.5", "10.244.2.5", "10.244.3.5"]
MANY_PODS = [f"10.244.9.{i}" for i in range(1, 61)]   # 60 A records: more than 512 bytes


def udp(proc: DNSProc, name: str, rdtype: str = "A", **kw) -> dns.message.Message:
    return dns.query.udp(dns.message.make_query(name, rdtype, **kw), proc.host, port=proc.port, timeout=10)


def tcp(proc: DNSProc, name: str, rdtype: str = "A") -> dns.message.Message:
    return dns.query.tcp(dns.message.make_query(name, rdtype), proc.host, port=proc.port, timeout=10)


def addresses(response) -> set[str]:
    return {rd.to_text() for rrset in response.answer for rd in rrset if rrset.rdtype == dns.rdatatype.A}


@pytest.fixture
def cluster(state_dir):
    env = APIServerEnv(state_dir)
    try:
        env.start()
        with SyncApiClient(env.endpoint, timeout=15) as api:
            yield env, api
    finally:
        env.stop()


def service(name: str, headless: bool = False) -> dict:
    spec = {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name}, "spec": spec}


def endpoint_slice(service_name: str, ips: list[str]) -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{service_name}-abcde", "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}


def test_answers_what_the_api_holds_and_follows_its_changes(cluster, state_dir):
    env, api = cluster
    web = api.create("services", service("web"), namespace="default")
    api.create("services", service("db", headless=True), namespace="default")
    api.create("endpointslices", endpoint_slice("db", HEADLESS_PODS), namespace="default")
    api.create("services", service("big", headless=True), namespace="default")
    api.create("endpointslices", endpoint_slice("big", MANY_PODS), namespace="default")
    proc = DNSProc(state_dir, env.endpoint)
    try:
        wait_for(lambda: proc.probe("/ready") == 200, message="/ready to answer 200 once synced")
        r = udp(proc, "web.default.svc.cluster.local")
        assert addresses(r) == {web["spec"]["clusterIP"]} and r.flags & dns.flags.AA
        assert addresses(tcp(proc, "db.default.svc.cluster.local")) == set(HEADLESS_PODS)
        srv = udp(proc, "_http._tcp.web.default.svc.cluster.local", "SRV")
        assert [rd.port for rd in srv.answer[0]] == [80]
        assert udp(proc, "example.com").rcode() == dns.rcode.REFUSED
        # too big for a UDP answer: truncated, and the client gets it whole over TCP
        assert udp(proc, "big.default.svc.cluster.local").flags & dns.flags.TC
        whole, used_tcp = dns.query.udp_with_fallback(dns.message.make_query("big.default.svc.cluster.local", "A"),
                                                      proc.host, port=proc.port, timeout=10)
        assert used_tcp and addresses(whole) == set(MANY_PODS)

        # a new Service is answered, a deleted one is gone
        assert udp(proc, "late.default.svc.cluster.local").rcode() == dns.rcode.NXDOMAIN
        late = api.create("services", service("late"), namespace="default")
        wait_for(lambda: addresses(udp(proc, "late.default.svc.cluster.local")) == {late["spec"]["clusterIP"]},
                 message="the new Service to resolve")
        api.delete("services", "web", namespace="default")
        wait_for(lambda: udp(proc, "web.default.svc.cluster.local").rcode() == dns.rcode.NXDOMAIN,
                 message="the deleted Service to be NXDOMAIN")
        assert proc.stop() == 0
        assert "Traceback" not in proc.log_text()
    finally:
        proc.stop()


LABEL_63 = "x" * 63
LONG_DOMAIN = ".".join(["a" * 40, "b" * 40, "local"])   # 87 characters
# The DNS component with --cluster-domain's bound lifted: the view must hold whatever the domain.
UNBOUND_DOMAIN = """
import sys
from components.dns import __main__
__main__._domain = str
sys.exit(__main__.main())
"""


def test_names_too_long_to_exist_are_left_out_and_the_rest_is_answered(cluster, state_dir):
    # <63>.<63>.<63>.svc.<87-character domain> is 283 octets: that endpoint's name cannot exist
    env, api = cluster
    api.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LABEL_63}})
    svc = api.create("services", service(LABEL_63), namespace=LABEL_63)
    slice_ = endpoint_slice(LABEL_63, ["10.244.1.5"])
    slice_["endpoints"][0]["hostname"] = LABEL_63
    api.create("endpointslices", slice_, namespace=LABEL_63)
    proc = DNSProc(state_dir, env.endpoint, "--cluster-domain", LONG_DOMAIN, main=("-c", UNBOUND_DOMAIN))
    try:
        wait_for(lambda: proc.probe("/ready") == 200, message="/ready to answer 200 once synced")
        name = f"{LABEL_63}.{LABEL_63}.svc.{LONG_DOMAIN}"
        assert addresses(udp(proc, name)) == {svc["spec"]["clusterIP"]}
        assert addresses(tcp(proc, name)) == {svc["spec"]["clusterIP"]}
        assert proc.stop() == 0
        assert "Traceback" not in proc.log_text() and "ERROR" not in proc.log_text()
    finally:
        proc.stop()


UNREACHABLE = "ipc:///nonexistent/kubemu-dns-test/api.sock"


@pytest.fixture
def unsynced(state_dir):
    """The DNS component whose API never answers: it serves, never synced."""
    proc = DNSProc(state_dir, UNREACHABLE)
    yield proc
    proc.stop()


def test_probes_health_at_once_ready_only_after_the_sync(unsynced):
    assert unsynced.probe("/health") == 200
    assert unsynced.probe("/ready") == 503
    assert unsynced.probe("/nope") == 404
    # not known yet is not known not to exist
    assert udp(unsynced, "web.default.svc.cluster.local").rcode() == dns.rcode.SERVFAIL


def test_bad_packets_get_their_answer_or_none_and_it_keeps_serving(unsynced):
    good = dns.message.make_query("example.com", "A")
    header = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0)
    too_long = header + b"".join(bytes([50]) + b"a" * 50 for _ in range(6)) + b"\x00\x00\x01\x00\x01"
    loop = header + b"\xc0\x0c\x00\x01\x00\x01"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(10)
        s.connect((unsynced.host, unsynced.port))
        for short in (b"", b"\x42", header[:11]):
            s.send(short)                      # dropped: no answer to wait for
        for bad in (too_long, loop, header + b"\xff" * 30):
            s.send(bad)
            reply = dns.message.from_wire(s.recv(4096))
            assert reply.id == 0x4242 and reply.rcode() == dns.rcode.FORMERR
        s.send(good.to_wire())                 # the next answer is the good query's: nothing else came
        reply = dns.message.from_wire(s.recv(4096))
        assert reply.id == good.id and reply.rcode() == dns.rcode.REFUSED
    # over TCP: a malformed message, then a good one on the same connection
    with socket.create_connection((unsynced.host, unsynced.port), timeout=10) as c:
        c.sendall(struct.pack("!H", len(loop)) + loop + struct.pack("!H", len(good.to_wire())) + good.to_wire())
        for want_id, want_rcode in ((0x4242, dns.rcode.FORMERR), (good.id, dns.rcode.REFUSED)):
            size, = struct.unpack("!H", recv_exactly(c, 2))
            reply = dns.message.from_wire(recv_exactly(c, size))
            assert (reply.id, reply.rcode()) == (want_id, want_rcode)
    assert udp(unsynced, "example.com").rcode() == dns.rcode.REFUSED
    log = unsynced.log_text()
    # one line for the first bad packet; the rest from that peer are counted, not logged
    assert [line.split(": ", 2)[-1] for line in log.splitlines() if "WARNING" in line] == \
        ["0-byte datagram shorter than a DNS header: dropped"]
    assert "Traceback" not in log
    assert unsynced.stop() == 0


class FakeInformer:
    def __init__(self, listing):
        self.listing = listing

    def add_event_handler(self, *handlers) -> None:
        pass

    def has_synced(self) -> bool:
        return True

    def list(self):
        return self.listing()


def test_a_view_that_cannot_be_built_is_servfail_never_an_exception():
    def broken():
        raise RuntimeError("boom")
    z = Zone("cluster.local", 5, FakeInformer(broken), FakeInformer(list), FakeInformer(list))
    query = dns.message.make_query("web.default.svc.cluster.local", "A")
    out = z.respond(query.to_wire(), tcp=False)
    reply = dns.message.from_wire(out.reply)
    assert (reply.id, reply.rcode()) == (query.id, dns.rcode.SERVFAIL)
    assert out.problem == "cannot build the view of the cluster (RuntimeError: boom): SERVFAIL"


# The DNS component with a build of the view that always fails (the empty one it starts with aside).
BROKEN_VIEW = """
import sys
from components.dns import __main__, zone
build = zone.build_view
def broken(*args, serial=None, **kw):
    if serial is not None:
        raise RuntimeError("boom")
    return build(*args, **kw)
zone.build_view = broken
sys.exit(__main__.main())
"""


def test_a_view_that_cannot_be_built_is_servfail_with_one_log_line_and_it_keeps_serving(state_dir):
    proc = DNSProc(state_dir, UNREACHABLE, main=("-c", BROKEN_VIEW))
    try:
        for ask in (udp, tcp, udp):
            reply = ask(proc, "web.default.svc.cluster.local")
            assert reply.rcode() == dns.rcode.SERVFAIL
        assert proc.probe("/health") == 200
        assert proc.stop() == 0
        log = proc.log_text()
        assert [line.split(": ", 2)[-1] for line in log.splitlines() if "WARNING" in line] == \
            ["cannot build the view of the cluster (RuntimeError: boom): SERVFAIL"]
        assert "Traceback" not in log and "ERROR" not in log
    finally:
        proc.stop()


def recv_exactly(c: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = c.recv(n - len(data))
        assert chunk, "the server closed the connection"
        data += chunk
    return data


def run_to_exit(state_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "components.dns", "--api", UNREACHABLE, *args],
                          cwd=str(REPO), capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(REPO), KUBEMU_STATE_DIR=str(state_dir)))


def test_a_port_in_use_is_one_clear_error(state_dir):
    # a listener without SO_REUSEPORT holds the port: the DNS component cannot share it
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        done = run_to_exit(state_dir, "--port", "0", "--health-port", str(holder.getsockname()[1]),
                           "--ready-port", "0")
    assert done.returncode == 1
    assert "cannot listen on 127.0.0.1" in done.stdout and "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("port", ["--port", "--health-port", "--ready-port"])
def test_in_the_machines_network_a_port_another_dns_holds_is_one_clear_error(state_dir, port):
    # without SO_REUSEPORT: a second cluster's DNS must not share (and answer) the first one's ports
    first = DNSProc(state_dir, UNREACHABLE)
    log_path = state_dir / "second.log"
    second = None
    try:
        taken = {"--port": first.port, "--health-port": first.health_port, "--ready-port": first.ready_port}[port]
        with open(log_path, "wb") as log:
            second = spawn_marked([sys.executable, "-m", "components.dns", "--api", UNREACHABLE, "--port", "0",
                                   "--health-port", "0", "--ready-port", "0", port, str(taken)],
                                  state_dir, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT,
                                  env={"PYTHONPATH": str(REPO)})
        wait_for(lambda: second.poll() is not None or SERVING.search(log_path.read_text()),
                 message="the second DNS component to exit or serve")
        output = log_path.read_text()
        assert second.poll() == 1, output
        assert [line for line in output.splitlines() if line.strip()] == \
            [line for line in output.splitlines() if "ERROR dns: cannot listen on 127.0.0.1" in line]
        assert len(output.splitlines()) == 1 and "Address already in use" in output
        assert udp(first, "example.com").rcode() == dns.rcode.REFUSED and first.probe("/health") == 200
    finally:
        if second is not None:
            terminate(second)
        assert first.stop() == 0


def test_bad_flags_are_usage_errors(state_dir):
    too_long = "a" * 28 + "." + "b" * (zone.MAX_DOMAIN_LENGTH - 28)   # one character more than allowed
    for args in (["--port", "70000"], ["--cluster-domain", "a..b"], ["--ttl", "-1"], ["--cluster-domain", too_long]):
        done = run_to_exit(state_dir, *args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (args, done.stderr)
        assert "usage:" in done.stderr


def test_in_the_machines_network_it_binds_loopback(unsynced):
    assert unsynced.host == "127.0.0.1"


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="a network namespace needs root and unshare")
def test_in_a_network_namespace_of_its_own_it_binds_every_address(state_dir):
    proc = DNSProc(state_dir, UNREACHABLE, wrapper=("unshare", "--net"))
    try:
        assert proc.host == "0.0.0.0"
    finally:
        assert proc.stop() == 0
