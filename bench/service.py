"""`kubemu bench service`: what Services cost and how fast they follow changes, on a real
`kubemu up --nodes 2 --fast` cluster with pod networks (its own state directory; skipped, with
the reason `kubemu up` gives, where pods cannot have networks). Everything is measured from the
host, whose route to the service CIDR goes into the fabric, through node-0's kube-proxy table.
The backends are bench/service_responder.py (a fixed HTTP answer naming the pod's IP).

1. New Service -> first connection: a Deployment of 2 backends runs; a Service selecting them
   is created; from the create call's return to the first complete HTTP answer through its
   ClusterIP (a new connection every 5 ms: before the rules exist it fails at once or times
   out after 0.2 s). Trials 1.5 s apart, longer than kube-proxy's --min-sync-period (1 s), so
   each starts with an idle proxy.
2. Endpoint change -> rules updated: a Deployment of 1 behind its Service, scaled 1 -> 2 and
   back per trial. kube-proxy's own network programming latency (the SLI: from the
   EndpointSlice's last-change-trigger-time to the end of the sync that programmed it, logged by
   every node's proxy for every change of the phase, scale-downs too; the trigger time has whole
   seconds, as in Kubernetes, so the SLI reads 0-1 s high), and from outside: the bench sees the slice list the new ready endpoint -> the
   new pod answers through the ClusterIP, and the scale call -> that answer.
3. DNS queries/s: the DNS component (components/dns/measure.py's client: 32 queries in flight
   on one UDP socket) on a DNS pod's IP, on the kube-dns ClusterIP, and on its pod IP with a new
   spelling of the name each time (no answer cache helps), beside the floor in the same rounds:
   dnspython's plainest server loop on 127.0.0.1 answering the same question.
4. Requests/s through the ClusterIP beside directly to the pod's IP: one backend behind its
   own Service, paired rounds of two short windows in alternating order, 4 concurrent clients,
   one new connection per request (the DNAT is decided per connection); the ratio per round and
   its spread. Then one request at a time, direct and through the ClusterIP in turn: what the
   ClusterIP adds to a request, paired as finely as can be (on a busy machine the rates' rounds
   spread widely; these pairs do not).
Targets (printed, never asserted): ClusterIP >= 0.9x direct; the SLI's p99 <= 30 s.
"""
from __future__ import annotations

import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from kubemu import _wire_auth as wireauth
from kubemu import addons, cluster, netplan, network
from kubemu.apiclient import SyncApiClient
from kubemu.statedir import StateDir

from . import service_stats as ss
from .machine import machine_with_load
from .skip import Skip
from .stats import summary

NODES = 2
NAMESPACE = "default"
PORT, SERVICE_PORT = 8080, 80
BOOT_TIMEOUT = 180.0
TIMEOUT = 60.0            # s for any one thing the cluster is asked to do
PROBE_TIMEOUT = 0.2       # s for one connection attempt while waiting for rules
REQUEST_TIMEOUT = 5.0     # s for one request once served
POLL = 0.005
SETTLE = 1.5              # s between trials: past kube-proxy's --min-sync-period
CLIENTS = 4
LINGER_RESET = struct.pack("ii", 1, 0)  # struct linger {on, 0 s}: close() resets
DNS_NAME = "kubernetes.default.svc.cluster.local"
DNS_SELECTOR = "k8s-app=kube-dns"  # kubemu/addons.py's (kubeadm's) label of the DNS pods
DNS_ROWS = ("floor (dnspython loop, 127.0.0.1)", "component, pod IP", "component, kube-dns ClusterIP",
            "component, pod IP, a new spelling each time")
DIRECT, VIA = "direct to the pod IP", "through the ClusterIP"


def _defaults(quick: bool) -> dict:
    return {"services": 3 if quick else 20, "changes": 2 if quick else 10, "dns_rounds": 2 if quick else 5,
            "seconds": 1.0 if quick else 3.0, "rounds": 6 if quick else 30, "window": 0.5 if quick else 1.0,
            "requests": 300 if quick else 2000}


# -- the cluster -----------------------------------------------------------------------------

@contextmanager
def service_cluster(root: Path):
    """`kubemu up --nodes 2 --fast` and its addons in `root`; yields (StateDir, network record)
    once every node is Ready and runs its kube-proxy; always torn down, then checked: no fabric left."""
    mode = network.probe(None)
    if mode.kind != netplan.CNI:
        raise Skip(f"no pod networks here: {mode.reason}")
    state = StateDir(root)
    rec = None
    try:
        nodes, _ = cluster.up(state, NODES, fast=True, api_port=0)  # 6443 stays the user's
        rec = network.load(state.root)
        if rec is None or rec.mode != netplan.CNI:
            raise Skip(f"no pod networks here: {rec.reason if rec else 'no network record'}")
        cluster.wait_started(state, nodes, BOOT_TIMEOUT)
        cluster.wait_ready(state, nodes, BOOT_TIMEOUT)
        _, refused = cluster.apply_addons(state, TIMEOUT)
        if refused:
            raise RuntimeError(f"the addons (kube-proxy, the cluster DNS) are not all there: {'; '.join(refused)}")
        yield state, rec
    finally:
        cluster.down(state)
        left = network.leftovers(rec) if rec is not None else []
        if left:
            raise RuntimeError(f"the benchmark's pod network is still there: {', '.join(left)}")


def backends(name: str, replicas: int) -> dict:
    """A Deployment of responders, Ready once their port accepts."""
    container = {"name": "responder", "image": "python:3.11",
                 "command": [sys.executable, "-m", "bench.service_responder", "--port", str(PORT)],
                 "ports": [{"name": "http", "containerPort": PORT}],
                 "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 1}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"terminationGracePeriodSeconds": 2, "containers": [container]}}}}


def service(name: str, app: str) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"selector": {"app": app},
                     "ports": [{"name": "http", "port": SERVICE_PORT, "targetPort": PORT}]}}


def _wait(what: str, check, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:g}s")
        time.sleep(0.05)


def _ready_pod_ips(api: SyncApiClient, selector: str, namespace: str = NAMESPACE) -> set[str]:
    ips = set()
    for pod in api.list("pods", namespace, label_selector=selector)["items"]:
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        if ready and status.get("podIP") and not pod["metadata"].get("deletionTimestamp"):
            ips.add(status["podIP"])
    return ips


def _slices(api: SyncApiClient, svc: str, namespace: str = NAMESPACE) -> list[dict]:
    return api.list("endpointslices", namespace, label_selector=f"kubernetes.io/service-name={svc}")["items"]


def _one_endpoint(api: SyncApiClient, svc: str) -> set[str] | None:
    """The one address the Service's slices list (ready or not), None while they list more or none."""
    found = {a for s in _slices(api, svc) for ep in s.get("endpoints") or [] for a in ep.get("addresses") or []}
    return found if len(found) == 1 else None


def fetch(ip: str, port: int, timeout: float = PROBE_TIMEOUT) -> str | None:
    """One GET on a new connection: the answer's body, None when it fails or is not a 200.
    The connection is reset once answered (SO_LINGER 0), leaving no TIME_WAIT on either side:
    the responder closes first, and its TIME_WAITs meeting the host's reused ports made each
    round of thousands of connections slower than the last (3,000 -> 150 req/s over 20 s)."""
    try:
        with socket.create_connection((ip, port), timeout=timeout) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
            s.sendall(b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n")
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
    except OSError:
        return None
    return ss.answer_body(b"".join(chunks))


def deploy(api: SyncApiClient, app: str, replicas: int, svc: str | None = None) -> str | None:
    """The Deployment and, if named, its Service; once its pods are Ready (and the Service
    answers through its ClusterIP); the ClusterIP."""
    api.create("deployments", backends(app, replicas), NAMESPACE)
    _wait(f"{replicas} ready pod(s) of {app}", lambda: len(_ready_pod_ips(api, f"app={app}")) == replicas)
    if svc is None:
        return None
    ip = api.create("services", service(svc, app), NAMESPACE)["spec"]["clusterIP"]
    _wait(f"Service {svc} answering on {ip}", lambda: fetch(ip, SERVICE_PORT) is not None)
    return ip


# -- 1. new Service -> first connection ------------------------------------------------------

def new_services(api: SyncApiClient, count: int, tick=None) -> dict:
    samples = []
    for i in range(count):
        time.sleep(SETTLE)
        created = api.create("services", service(f"bench-new-{i}", "bench-web"), NAMESPACE)
        start = time.perf_counter()
        ip = created["spec"]["clusterIP"]
        deadline = start + TIMEOUT
        while fetch(ip, SERVICE_PORT) is None:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"Service bench-new-{i} ({ip}) did not answer within {TIMEOUT:g}s")
            time.sleep(POLL)
        samples.append((time.perf_counter() - start) * 1000)
        if tick:
            tick()
    return dict(summary(samples), unit="ms", samples=samples)


# -- 2. endpoint change -> rules updated -----------------------------------------------------

def endpoint_changes(api: SyncApiClient, ip: str, count: int, tick=None) -> dict:
    """Scale bench-scale 1 -> 2: the new pod's endpoint seen in the slices, then its first
    answer through the ClusterIP; back to 1 and settled before the next trial."""
    slice_to_answer, scale_to_answer = [], []
    for i in range(count):
        old = _wait("bench-scale at one endpoint", lambda: _one_endpoint(api, "bench-scale"))
        time.sleep(SETTLE)
        api.update_scale("deployments", "bench-scale", 2, NAMESPACE)
        scaled = time.perf_counter()
        seen = None
        deadline = scaled + TIMEOUT
        while True:
            if seen is None and ss.ready_addresses(_slices(api, "bench-scale")) - old:
                seen = time.perf_counter()
            body = fetch(ip, SERVICE_PORT)
            if body is not None and body not in old:
                answered = time.perf_counter()
                break
            if time.perf_counter() > deadline:
                raise TimeoutError(f"trial {i}: no new backend answered through {ip} within {TIMEOUT:g}s")
            time.sleep(POLL)
        seen = seen if seen is not None else answered  # listed and answering within one poll
        slice_to_answer.append((answered - seen) * 1000)
        scale_to_answer.append((answered - scaled) * 1000)
        api.update_scale("deployments", "bench-scale", 1, NAMESPACE)
        if tick:
            tick()
    _wait("bench-scale back at one endpoint", lambda: _one_endpoint(api, "bench-scale"))
    return {"slice_to_answer": dict(summary(slice_to_answer), unit="ms", samples=slice_to_answer),
            "scale_to_answer": dict(summary(scale_to_answer), unit="ms", samples=scale_to_answer)}


def kube_proxy_sli(api: SyncApiClient, nodes: list[str], since: float) -> dict:
    """Each node's kube-proxy's network programming latencies logged since `since` (ms): every
    endpoint change of the phase, the scale-downs' (a pod terminating, then gone) too."""
    out = {}
    for node in nodes:
        pod = addons.kube_proxy_pod(api, node)
        logged = api.log(pod["metadata"]["name"], "kube-system") if pod else ""
        samples = [s * 1000 for s in ss.programming_latencies(logged, since)]
        out[node] = dict(summary(samples), unit="ms", samples=samples)
    return out


# -- 3. DNS ----------------------------------------------------------------------------------

@contextmanager
def dns_floor():
    """components/dns/measure.py's floor server as a process of its own; its port."""
    proc = subprocess.Popen([sys.executable, "-m", "components.dns.measure", "--serve-floor"],
                            stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        yield int(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait()


def dns_rates(api: SyncApiClient, rounds: int, seconds: float, tick=None) -> dict:
    from components.dns import measure

    pod_ip = sorted(_ready_pod_ips(api, DNS_SELECTOR, "kube-system"))[0]
    cluster_ip = api.get("services", "kube-dns", "kube-system")["spec"]["clusterIP"]
    done = []
    with dns_floor() as floor_port:
        targets = {DNS_ROWS[0]: ("127.0.0.1", floor_port, False), DNS_ROWS[1]: (pod_ip, 53, False),
                   DNS_ROWS[2]: (cluster_ip, 53, False), DNS_ROWS[3]: (pod_ip, 53, True)}
        for r in range(rounds):
            row = {}
            for name in ss.round_order(r, list(DNS_ROWS)):
                host, port, vary = targets[name]
                rate, errors = measure.udp_queries_per_second(host, port, DNS_NAME, seconds, vary_case=vary)
                if errors:
                    raise RuntimeError(f"{name}: {errors} answers to {DNS_NAME} were not NOERROR")
                row[name] = rate
            done.append(row)
            if tick:
                tick()
    return {"name": DNS_NAME, "pod_ip": pod_ip, "cluster_ip": cluster_ip, "rounds": done,
            "rates": {n: ss.rates(done, n) for n in DNS_ROWS},
            "ratio_to_floor": {n: ss.paired_ratios(done, n, DNS_ROWS[0]) for n in DNS_ROWS[1:]}}


# -- 4. requests/s through the ClusterIP beside direct ---------------------------------------

def http_rate(ip: str, port: int, seconds: float, clients: int = CLIENTS) -> float:
    """Complete answers per second, each on a new connection, from `clients` threads with
    blocking sockets (twice the rate of as many asyncio clients here: the client must not be
    what is measured)."""
    done, failed = [0] * clients, [0] * clients
    deadline = time.perf_counter() + seconds

    def client(i: int) -> None:
        while time.perf_counter() < deadline:
            if fetch(ip, port, REQUEST_TIMEOUT) is None:
                failed[i] += 1
            else:
                done[i] += 1

    threads = [threading.Thread(target=client, args=(i,), name=f"client {i}") for i in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - started
    if sum(failed) > sum(done) // 100:
        raise RuntimeError(f"{ip}:{port}: {sum(failed)} of {sum(done) + sum(failed)} requests failed")
    return sum(done) / took


def throughput(pod_ip: str, cluster_ip: str, rounds: int, seconds: float, tick=None) -> dict:
    """Paired rounds of two short windows, the order alternating: on a shared machine the two
    sides of a round meet about the same load."""
    targets = {DIRECT: (pod_ip, PORT), VIA: (cluster_ip, SERVICE_PORT)}
    for ip, port in targets.values():  # warm-up, not counted
        http_rate(ip, port, min(seconds, 0.5))
    done = []
    for r in range(rounds):
        done.append({name: http_rate(*targets[name], seconds) for name in ss.round_order(r, [DIRECT, VIA])})
        if tick:
            tick()
    total = {name: sum(r[name] for r in done) for name in (DIRECT, VIA)}
    return {"pod_ip": pod_ip, "cluster_ip": cluster_ip, "clients": CLIENTS, "window_s": seconds, "rounds": done,
            DIRECT: ss.rates(done, DIRECT), VIA: ss.rates(done, VIA), "ratio": ss.paired_ratios(done, VIA, DIRECT),
            "ratio_of_totals": total[VIA] / total[DIRECT]}


def request_latency(pod_ip: str, cluster_ip: str, requests: int, tick=None) -> dict:
    """One request at a time on a new connection, alternating direct / ClusterIP (the order of
    each pair alternating too): what the ClusterIP adds to one request, the finest pairing there is."""
    targets = {DIRECT: (pod_ip, PORT), VIA: (cluster_ip, SERVICE_PORT)}
    samples: dict[str, list[float]] = {DIRECT: [], VIA: []}
    for i in range(requests):
        for name in ss.round_order(i, [DIRECT, VIA]):
            started = time.perf_counter()
            if fetch(*targets[name], REQUEST_TIMEOUT) is None:
                raise RuntimeError(f"{name} ({targets[name][0]}): a request failed")
            samples[name].append((time.perf_counter() - started) * 1e6)
        if tick and (i + 1) % 100 == 0:
            tick()
    rows = {name: dict(summary(v), unit="us") for name, v in samples.items()}
    return dict(rows, ratio_p50=rows[VIA]["p50"] / rows[DIRECT]["p50"])


# -- the suite -------------------------------------------------------------------------------

def measure(root: Path, cfg: dict, progress_factory=None) -> dict:
    def phase(label: str, total: int):
        return progress_factory(label, total) if progress_factory else None

    tick = phase("cluster up, backends deployed", 1)
    with service_cluster(root) as (state, rec):
        with SyncApiClient(cluster.api_endpoint(state), timeout=10,
                           credentials=wireauth.state_credentials(state.root)) as api:
            deploy(api, "bench-web", 2)
            scale_ip = deploy(api, "bench-scale", 1, "bench-scale")
            rps_ip = deploy(api, "bench-rps", 1, "bench-rps")
            _wait("the cluster DNS ready", lambda: _ready_pod_ips(api, DNS_SELECTOR, "kube-system"))
            if tick:
                tick()
            results = {"new_service": new_services(api, cfg["services"], phase("new Service -> first answer",
                                                                                  cfg["services"]))}
            since = time.time()
            changes = endpoint_changes(api, scale_ip, cfg["changes"], phase("endpoint change -> answer", cfg["changes"]))
            changes["kube_proxy_sli"] = kube_proxy_sli(api, cluster.node_names(NODES), since)
            results["endpoint_change"] = changes
            results["dns"] = dns_rates(api, cfg["dns_rounds"], cfg["seconds"], phase("DNS q/s", cfg["dns_rounds"]))
            rps_pod = sorted(_ready_pod_ips(api, "app=bench-rps"))[0]
            results["throughput"] = throughput(rps_pod, rps_ip, cfg["rounds"], cfg["window"],
                                               phase("ClusterIP vs pod IP req/s", cfg["rounds"]))
            results["request_latency"] = request_latency(rps_pod, rps_ip, cfg["requests"],
                                                         phase("ClusterIP vs pod IP, one request", cfg["requests"] // 100))
        results["network"] = {"cluster_cidr": rec.cluster_cidr, "service_cidr": rec.service_cidr}
    return results


def run(quick: bool = False, kills: int | None = None, progress_factory=None, workdir: Path | None = None,
        **sizes) -> dict:
    """`sizes` (tests): services, changes, dns_rounds, seconds, rounds, window, requests (see _defaults)."""
    cfg = {**_defaults(quick), **{k: v for k, v in sizes.items() if v is not None}}
    report = {"suite": "service", "config": dict(cfg, nodes=NODES, clients=CLIENTS, settle_s=SETTLE,
                                                 probe_timeout_s=PROBE_TIMEOUT, dns_name=DNS_NAME)}
    with tempfile.TemporaryDirectory(prefix="ksv", dir=workdir) as tmp:  # short: ipc:// paths <= 107 bytes
        try:
            results = measure(Path(tmp) / "c", cfg, progress_factory)
        except Skip as exc:
            report.update(machine=machine_with_load(), skipped=str(exc))
            return report
    report.update(machine=machine_with_load(), results=results, targets=ss.verdicts(results))
    return report


# -- output ----------------------------------------------------------------------------------

def table(report: dict):
    from rich.console import Group
    from rich.table import Table

    from .tables import latency_table, machine_line, number

    title = f"service: `kubemu up --nodes 2 --fast`, from the host ({machine_line(report['machine'])})"
    if "skipped" in report:
        t = Table(title=title)
        t.add_column("")
        t.add_row(f"skipped: {report['skipped']}")
        return t
    res = report["results"]
    ch = res["endpoint_change"]
    rows = {"new Service -> first answer through its ClusterIP": res["new_service"],
            "endpoint change: the slice lists the new pod -> it answers through the ClusterIP": ch["slice_to_answer"],
            "endpoint change: scale 1 -> 2 called -> the new pod answers": ch["scale_to_answer"]}
    rows.update({f"kube-proxy network programming latency (SLI), {node}": row
                 for node, row in ch["kube_proxy_sli"].items() if row["n"]})
    rows.update({f"kube-proxy network programming latency (SLI), {node}": {"skipped": "no latency logged"}
                 for node, row in ch["kube_proxy_sli"].items() if not row["n"]})
    latency = latency_table(title, rows, caption="SLI: from the EndpointSlice's last-change-trigger-time (whole "
                                                 "seconds, so 0-1 s high, as in Kubernetes) to the sync's end; "
                                                 "Kubernetes' SLO p99 <= 30 s")
    dns = res["dns"]
    d = Table(title=f"service: DNS queries/s over UDP, {dns['name']}, paired rounds")
    for col in ("", "p50 q/s", "min", "max", "n", "x the floor (p50 of rounds)", "min x", "max x"):
        d.add_column(col, justify="left" if not col else "right")
    for name in DNS_ROWS:
        r, ratio = dns["rates"][name], dns["ratio_to_floor"].get(name)
        d.add_row(name, number(r["p50"], "{:,.0f}"), number(r["min"], "{:,.0f}"), number(r["max"], "{:,.0f}"),
                  str(r["n"]), *(number(ratio[k], "{:.2f}x") for k in ("p50", "min", "max")) if ratio else ("",) * 3)
    tp = res["throughput"]
    h = Table(title=f"service: requests/s, a new connection each, {tp['clients']} clients, paired rounds "
                    f"(target: ClusterIP >= {ss.CLUSTER_IP_TARGET}x direct)")
    for col in ("", "p50 req/s", "min", "max", "n"):
        h.add_column(col, justify="left" if not col else "right")
    for name in (DIRECT, VIA):
        r = tp[name]
        h.add_row(name, number(r["p50"], "{:,.0f}"), number(r["min"], "{:,.0f}"), number(r["max"], "{:,.0f}"),
                  str(r["n"]))
    ratio = tp["ratio"]
    h.add_row("ratio ClusterIP / direct, per round", number(ratio["p50"], "{:.3f}x"), number(ratio["min"], "{:.3f}x"),
              number(ratio["max"], "{:.3f}x"), str(ratio["n"]), style="bold")
    h.caption = (f"{tp['window_s']:g} s per side per round; all rounds' requests through the ClusterIP / direct: "
                 f"{number(tp['ratio_of_totals'], '{:.3f}x')}")
    lat = res["request_latency"]
    one = latency_table("service: one request on a new connection, direct and through the ClusterIP in turn",
                        {name: lat[name] for name in (DIRECT, VIA)}, unit="us",
                        caption=f"ClusterIP / direct, p50: {number(lat['ratio_p50'], '{:.3f}x')}")
    verdict = Table(title="service: targets (printed, never asserted)")
    verdict.add_column("target")
    verdict.add_column("")
    for target, met in report["targets"].items():
        verdict.add_row(target, met)
    return Group(latency, d, h, one, verdict)


def headlines(report: dict) -> list[tuple]:
    from .tables import number

    if "skipped" in report:
        return [("skipped", report["skipped"], "")]
    res = report["results"]
    ch, tp, dns = res["endpoint_change"], res["throughput"], res["dns"]
    sli = [row for row in ch["kube_proxy_sli"].values() if row["n"]]
    rows = [("new Service -> first answer, p50 / p99",
             f"{number(res['new_service']['p50'], '{:.0f}')} / {number(res['new_service']['p99'], '{:.0f}')} ms", ""),
            ("endpoint change -> answer through the ClusterIP, p50 / p99",
             f"{number(ch['slice_to_answer']['p50'], '{:.0f}')} / {number(ch['slice_to_answer']['p99'], '{:.0f}')} ms",
             "from the slice seen by the bench")]
    if sli:
        rows.append(("kube-proxy network programming latency p99", f"{number(max(r['p99'] for r in sli), '{:.0f}')} ms",
                     "SLO p99 <= 30 s"))
    rows += [("DNS q/s, component (pod IP)", f"{number(dns['rates'][DNS_ROWS[1]]['p50'], '{:,.0f}')}",
              f"{number(dns['ratio_to_floor'][DNS_ROWS[1]]['p50'])}x the dnspython floor"),
             ("req/s through the ClusterIP", f"{number(tp[VIA]['p50'], '{:,.0f}')}",
              f"{number(tp['ratio']['p50'], '{:.3f}')}x direct (target >= 0.9x)"),
             ("one request through the ClusterIP, p50", f"{number(res['request_latency'][VIA]['p50'], '{:.0f}')} us",
              f"{number(res['request_latency']['ratio_p50'], '{:.3f}')}x direct")]
    return rows


def plots(report: dict, directory: Path) -> list[Path]:
    from .plots import bars, cdf

    if "skipped" in report:
        return []
    res = report["results"]
    ch = res["endpoint_change"]
    series = {"new Service -> answer": res["new_service"]["samples"],
              "slice -> answer": ch["slice_to_answer"]["samples"], "scale -> answer": ch["scale_to_answer"]["samples"]}
    series.update({f"SLI {node}": row["samples"] for node, row in ch["kube_proxy_sli"].items() if row["n"]})
    tp, dns = res["throughput"], res["dns"]
    values = {f"HTTP {DIRECT}": tp[DIRECT]["p50"], f"HTTP {VIA}": tp[VIA]["p50"]}
    values.update({f"DNS {n}": dns["rates"][n]["p50"] for n in DNS_ROWS})
    return [cdf(directory, "service-latency-cdf", "service: change -> answer through the ClusterIP (CDF)", series,
                "ms"),
            bars(directory, "service-rates", "service: requests/s and DNS queries/s (p50 of paired rounds)", values,
                 "per s", log=True)]
