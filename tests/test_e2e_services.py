"""Services end to end (issue 16 §5), real processes on a `kubemu up --nodes 3 --fast` cluster:
three web servers behind a ClusterIP Service, reached by name from a pod on another node
(cluster DNS + kube-proxy's DNAT); a backend failing readiness leaves the rotation; scale to 0 →
refused, back → served; kill -9 of a kube-proxy leaves its rules serving and the restarted proxy
converges; a NodePort on the node's addresses; a headless Service's name gives every pod;
`kubemu down` leaves no table, namespace or route. Needs root, the CNI plugins and nft:
otherwise skipped, with the reason `kubemu up` gives."""
from __future__ import annotations

import collections
import errno
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request

import psutil
import pytest

from kubemu import addons, netplan, network
from kubemu.wire import WireError
from tests.conftest import wait_for
from tests.test_e2e import LONG, cluster, container_pid, ready  # noqa: F401 (cluster: the fixture)

PY = sys.executable

_mode = network.probe(None)
needs_pod_networks = pytest.mark.skipif(_mode.kind != "cni", reason=f"no pod networks here: {_mode.reason}")

# Answers its pod's name; /fail makes its readiness endpoint answer 500 from then on.
SERVER = """\
import http.server, socket, sys
name, failing = socket.gethostname(), []
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/fail":
            failing.append(1)
        code = 500 if self.path == "/ready" and failing else 200
        body = name.encode()
        self.send_response(code); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("", int(sys.argv[1])), Handler).serve_forever()
"""
# Fetches a URL every 0.1 s for ever: one line each, `ok <backend>`, `refused` or `error <why>`.
PROBE = """\
import sys, time, urllib.request
while True:
    try:
        print("ok " + urllib.request.urlopen(sys.argv[1], timeout=2).read().decode(), flush=True)
    except OSError as exc:
        refused = isinstance(getattr(exc, "reason", exc), ConnectionRefusedError)
        print("refused" if refused else f"error {exc}", flush=True)
    time.sleep(0.1)
"""
# Fetches a URL `count` times, a new connection (and a new name lookup) each time, and prints
# how many answers each backend gave, as one JSON line; then waits to be read.
FETCH = """\
import collections, json, sys, time, urllib.request
url, count = sys.argv[1], int(sys.argv[2])
for attempt in range(600):
    try:
        urllib.request.urlopen(url, timeout=5).read(); break
    except OSError as exc:
        print("retry", exc, flush=True); time.sleep(0.2)
seen = collections.Counter(urllib.request.urlopen(url, timeout=5).read().decode() for _ in range(count))
print("SEEN " + json.dumps(seen), flush=True)
time.sleep(3600)
"""


def web(replicas: int) -> list[dict]:
    labels = {"app": "web"}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels}, "spec": {
                               "terminationGracePeriodSeconds": 2,
                               "containers": [{"name": "web", "command": [PY, "-c", SERVER, "8000"],
                                               "ports": [{"name": "http", "containerPort": 8000}],
                                               "readinessProbe": {"httpGet": {"path": "/ready", "port": 8000},
                                                                  "periodSeconds": 1, "failureThreshold": 1}}]}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": "http"}]}}
    nodeport = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-np"},
                "spec": {"type": "NodePort", "selector": labels,
                         "ports": [{"port": 80, "targetPort": 8000, "nodePort": 30080}]}}
    headless = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-headless"},
                "spec": {"clusterIP": "None", "selector": labels, "ports": [{"port": 8000}]}}
    return [deployment, service, nodeport, headless]


def fetch(url: str) -> str | None:
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        return None


def answers(url: str, count: int) -> collections.Counter:
    return collections.Counter(fetch(url) for _ in range(count))


def probe_log(cluster) -> str:
    return cluster.call("log", "probe", "default") or ""


def connect_error(ip: str, port: int) -> int | None:
    """The errno of a TCP connect (0 when it connects)."""
    with socket.socket() as s:
        s.settimeout(5)
        return s.connect_ex((ip, port))


def resolve(server: str, name: str) -> set[str]:
    import dns.message
    import dns.query
    reply = dns.query.udp(dns.message.make_query(name, "A"), server, timeout=5)
    return {r.address for rrset in reply.answer for r in rrset if rrset.rdtype == 1}


def proxy_pod(cluster, node: str) -> dict | None:
    """The node's kube-proxy pod (the DaemonSet's; None while the API does not answer)."""
    try:
        return addons.kube_proxy_pod(cluster.api, node)
    except WireError:
        return None


def proxy_log(cluster, node: str) -> str:
    pod = proxy_pod(cluster, node)
    return (cluster.call("log", pod["metadata"]["name"], "kube-system") or "") if pod else ""


def nft_tables(netns: str) -> str:
    return subprocess.run(["ip", "netns", "exec", netns, "nft", "list", "tables"], capture_output=True,
                          text=True).stdout


def host_ruleset() -> str:
    return subprocess.run(["nft", "list", "ruleset"], capture_output=True, text=True).stdout


@needs_pod_networks
def test_a_deployment_behind_a_service(cluster, tmp_path):
    before = host_ruleset()
    cluster.cli("up", "--nodes", "3", "--fast", "--detach")
    rec = network.load(cluster.dir)
    assert rec is not None and rec.mode == "cni", rec
    api = cluster.api

    # One file with a Deployment and its Services: `apply -f` creates them all.
    manifest = tmp_path / "web.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": web(3)}))
    cluster.cli("apply", "-f", str(manifest))
    svc = api.get("services", "web", namespace="default")
    cluster_ip = svc["spec"]["clusterIP"]
    assert ipaddress.ip_address(cluster_ip) in ipaddress.ip_network(rec.service_cidr)
    pods = wait_for(lambda: cluster.ready_web(3), timeout=LONG, interval=0.25, message="3 web pods Ready")
    names = {p["metadata"]["name"] for p in pods}

    # The machine reaches the Service through the fabric (node-0's table takes the host link).
    wait_for(lambda: set(answers(f"http://{cluster_ip}/", 30)) == names, timeout=LONG, interval=0.5,
             message="every backend through the ClusterIP")

    # A pod on another node fetches the Service by name 300 times and meets all 3 backends.
    client_node = "node-1"
    client = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "client"},
              "spec": {"nodeName": client_node, "terminationGracePeriodSeconds": 1,
                       "containers": [{"name": "fetch", "command": [
                           PY, "-c", FETCH, "http://web.default.svc.cluster.local", "300"]}]}}
    api.create("pods", client, namespace="default")
    line = wait_for(lambda: next((x for x in (cluster.call("log", "client", "default") or "").splitlines()
                                  if x.startswith("SEEN ")), None), timeout=LONG, interval=0.5,
                    message="the client's 300 fetches by name")
    seen = json.loads(line.removeprefix("SEEN "))
    assert set(seen) == names and sum(seen.values()) == 300, seen

    # Readiness: a failing backend leaves the rotation.
    failing = pods[0]
    assert fetch(f"http://{failing['status']['podIP']}:8000/fail") == failing["metadata"]["name"]
    wait_for(lambda: set(answers(f"http://{cluster_ip}/", 30)) == names - {failing["metadata"]["name"]},
             timeout=LONG, interval=0.5, message="the unready backend out of the rotation")

    # NodePort: on every node's gateway address and on the fabric's end of the host link.
    node_gateways = [str(next(ipaddress.ip_network(n["spec"]["podCIDR"]).hosts()))
                     for n in api.list("nodes")["items"] if n["spec"].get("podCIDR")]
    for address in [*node_gateways, rec.fabric_addr]:
        assert fetch(f"http://{address}:30080/") in names, address

    # Headless: the name gives every ready pod's address, from the kube-dns Service.
    dns_ip = netplan.service_ip(rec.service_cidr, netplan.DNS_SERVICE_INDEX)
    ready_ips = {p["status"]["podIP"] for p in pods if p is not failing}
    wait_for(lambda: resolve(dns_ip, "web-headless.default.svc.cluster.local.") == ready_ips, timeout=LONG,
             interval=0.5, message="the headless Service's ready pods in DNS")

    # kill -9 of node-1's kube-proxy: its rules keep serving node-1's pods meanwhile (a pod
    # there fetches all along); the restarted proxy converges: after a scale to 0 that pod is
    # refused at once, after a scale back to 1 served by the new pod.
    api.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
                        "spec": {"nodeName": client_node, "terminationGracePeriodSeconds": 1,
                                 "containers": [{"name": "fetch", "command": [
                                     PY, "-c", PROBE, f"http://{cluster_ip}/"]}]}}, namespace="default")
    wait_for(lambda: "ok " in probe_log(cluster), timeout=LONG, interval=0.5, message="the probe's first answer")
    proxy = proxy_pod(cluster, client_node)
    pid = container_pid(proxy)
    assert pid
    seen_before = len(probe_log(cluster).splitlines())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: (p := proxy_pod(cluster, client_node)) and p["metadata"]["uid"] == proxy["metadata"]["uid"]
             and container_pid(p) not in (None, pid) and ready(p), timeout=LONG, interval=0.5,
             message="kube-proxy's container restarted in its pod")
    meanwhile = probe_log(cluster).splitlines()[seen_before:]
    assert meanwhile and all(x.startswith("ok ") for x in meanwhile), meanwhile

    # Scale to 0: refused at once (from the host and from node-1); back to 1: served again.
    api.patch("deployments", "web", {"spec": {"replicas": 0}}, namespace="default")
    wait_for(lambda: connect_error(cluster_ip, 80) == errno.ECONNREFUSED, timeout=LONG, interval=0.5,
             message="connection refused with no endpoints")
    wait_for(lambda: probe_log(cluster).rstrip().endswith("refused"), timeout=LONG, interval=0.5,
             message="node-1's restarted proxy refusing too")
    api.patch("deployments", "web", {"spec": {"replicas": 1}}, namespace="default")
    one = wait_for(lambda: cluster.ready_web(1), timeout=LONG, interval=0.25, message="1 web pod Ready")
    name = one[0]["metadata"]["name"]
    wait_for(lambda: fetch(f"http://{cluster_ip}/") == name, timeout=LONG, interval=0.5,
             message="served again after the scale-up")
    wait_for(lambda: probe_log(cluster).rstrip().endswith(f"ok {name}"), timeout=LONG, interval=0.5,
             message="node-1's pods served by the new pod")

    # kubemu down: no table, namespace, link or route of this cluster is left.
    assert "kube-proxy" in nft_tables(rec.netns)
    cluster.close_api()
    cluster.cli("down")
    assert network.leftovers(rec) == []
    assert rec.netns not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert host_ruleset() == before


# An HTTP server on 127.0.0.1 only (pods share the host's network: never 0.0.0.0, and the
# host's name), answering the word it is given.
LOOPBACK_SERVER = """\
import http.server, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = sys.argv[2].encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""
DROP_NET_CAPS = ["setpriv", "--inh-caps=-net_admin,-sys_admin", "--bounding-set=-net_admin,-sys_admin"]


def free_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reset_at_once(ip: str, port: int) -> bool:
    """A request to ip:port that gets no answer: the connection reset or closed (a hang fails
    the test by its timeout; a refusal means no proxy listens there)."""
    try:
        with socket.create_connection((ip, port), timeout=LONG) as s:  # the reset may beat connect()
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            return s.recv(1024) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True


def listening_in(block: str) -> list:
    """The TCP listeners and UDP sockets on the block's addresses (connections in TIME_WAIT aside)."""
    net = ipaddress.IPv4Network(block)
    return [c for c in psutil.net_connections(kind="inet4") if c.laddr and ipaddress.IPv4Address(c.laddr.ip) in net
            and (c.type == socket.SOCK_DGRAM or c.status == psutil.CONN_LISTEN)]


@pytest.mark.parametrize("privileges", ["root", "no CAP_NET_ADMIN/CAP_SYS_ADMIN"])
def test_without_pod_networks_the_userspace_proxy_serves_the_cluster_ip(cluster, tmp_path, privileges):
    """Host mode (asked for, or the fallback without the privileges): a ClusterIP in the
    cluster's own loopback block answers through every node's userspace proxy; scaled to 0, a
    connection is reset at once; `kubemu down` leaves nothing listening on the block."""
    if privileges != "root" and shutil.which("setpriv") is None:
        pytest.skip("no setpriv (util-linux) to drop capabilities with")
    up = ["up", "--nodes", "2", "--fast", "--detach", "--no-kubeconfig", "--api-port", "0"]
    argv = [PY, "-m", "kubemu.cli", *up] + (["--network", "host"] if privileges == "root" else [])
    env = dict(os.environ, KUBEMU_STATE_DIR=str(cluster.dir), COLUMNS="200")
    done = subprocess.run([*([] if privileges == "root" else DROP_NET_CAPS), *argv], env=env, capture_output=True,
                          text=True, timeout=LONG, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    why = "kubemu up --network host" if privileges == "root" else \
        "CAP_NET_ADMIN and CAP_SYS_ADMIN are needed for pod networks"
    assert said.count("pods share the host's network") == 1 and why in said and "Traceback" not in said, said
    assert "warning: addon" not in said, said  # the DNS addon, kept off hollow nodes, is accepted as it is
    rec = network.load(cluster.dir)
    assert rec.mode == "host" and netplan.is_host_service_cidr(rec.service_cidr)
    for node in ("node-0", "node-1"):  # every node's kube-proxy runs the userspace mode
        wait_for(lambda: "userspace mode" in proxy_log(cluster, node),
                 timeout=LONG, interval=0.25, message=f"kube-proxy on {node} in userspace mode")

    port = free_loopback_port()
    labels = {"app": "web"}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                           "template": {"metadata": {"labels": labels}, "spec": {
                               "terminationGracePeriodSeconds": 2,
                               "containers": [{"name": "web", "command": [PY, "-c", LOOPBACK_SERVER, str(port), "hello"],
                                               "ports": [{"name": "http", "containerPort": port}],
                                               "readinessProbe": {"httpGet": {"path": "/", "port": port},
                                                                  "periodSeconds": 1}}]}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"selector": labels, "ports": [{"port": 8080, "targetPort": "http"}]}}
    (tmp_path / "web.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List",
                                                    "items": [deployment, service]}))
    cluster.cli("apply", "-f", str(tmp_path / "web.json"))
    ip = wait_for(lambda: (cluster.call("get", "services", "web", namespace="default") or {}).get(
        "spec", {}).get("clusterIP"), timeout=LONG, message="the web Service's ClusterIP")
    assert ipaddress.IPv4Address(ip) in ipaddress.IPv4Network(rec.service_cidr)
    wait_for(lambda: cluster.ready_web(1), timeout=LONG, interval=0.25, message="the web pod Ready")
    # every node's proxy holds the listener (SO_REUSEPORT): each one serves, once it has the endpoint
    wait_for(lambda: answers(f"http://{ip}:8080/", 20) == {"hello": 20}, timeout=LONG, interval=0.25,
             message="the ClusterIP answering through the userspace proxies")

    cluster.cli("scale", "deployment", "web", "--replicas", "0")
    wait_for(lambda: cluster.web_pods() == [], timeout=LONG, interval=0.25, message="the web pod gone")
    wait_for(lambda: reset_at_once(ip, 8080), timeout=LONG, interval=0.25,
             message="a connection to the ClusterIP without endpoints reset")

    assert listening_in(rec.service_cidr)
    cluster.cli("down")
    assert listening_in(rec.service_cidr) == []
