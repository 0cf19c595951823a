"""`kubemu bench service`: its pure parts, its backends' responder, and a small run of the suite
on a real 2-node cluster with pod networks (skipped with `kubemu up`'s reason where pods cannot
have networks). Figures are checked for existence and sanity, never for speed."""
import datetime
import socket
import subprocess
import sys

import psutil
import pytest

from bench import service, service_stats
from kubemu import netplan, network

from ..conftest import DEADLINE, terminate
from .outputs import check_outputs, sane_latency


def _stamp(ts: float) -> str:
    """logging's asctime for `ts` (local time, milliseconds after a comma)."""
    moment = datetime.datetime.fromtimestamp(ts)
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{moment.microsecond // 1000:03d}"


def test_programming_latencies_are_those_logged_since_the_phase_began():
    t0 = 1_800_000_000.0
    log = "\n".join([
        f"{_stamp(t0 - 5)} kube-proxy[9] INFO kubemu.kube_proxy: network programming latency: seconds=9.000 sync=full",
        f"{_stamp(t0 + 1)} kube-proxy[9] INFO kubemu.kube_proxy: partial sync in 0.060s: wrote 6 chains",
        f"{_stamp(t0 + 2)} kube-proxy[9] INFO kubemu.kube_proxy: network programming latency: seconds=0.412,1.398 "
        "sync=partial",
        "garbage line with network programming latency: seconds=",
        f"{_stamp(t0 + 3)} kube-proxy[9] INFO kubemu.kube_proxy: network programming latency: seconds=2.5 sync=partial",
    ])
    assert service_stats.programming_latencies(log, t0) == [0.412, 1.398, 2.5]
    assert service_stats.programming_latencies(log, t0 + 2.5) == [2.5]
    assert service_stats.programming_latencies("", t0) == []


def test_rounds_alternate_their_order_and_pair_their_ratios():
    assert [service_stats.round_order(i, ["a", "b"]) for i in range(3)] == [["a", "b"], ["b", "a"], ["a", "b"]]
    assert service_stats.round_order(4, ["a", "b", "c"]) == ["b", "c", "a"]
    rounds = [{"direct": 100.0, "via": 90.0}, {"direct": 200.0, "via": 200.0}, {"direct": 0.0, "via": 5.0}]
    ratio = service_stats.paired_ratios(rounds, "via", "direct")
    assert ratio["samples"] == [0.9, 1.0] and ratio["n"] == 2 and ratio["min"] == 0.9 and ratio["max"] == 1.0
    assert service_stats.rates(rounds, "via")["p50"] == 90.0


def test_an_answer_counts_only_when_it_is_a_whole_200():
    assert service_stats.answer_body(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n10.0.0.7") == "10.0.0.7"
    assert service_stats.answer_body(b"HTTP/1.1 503 Service Unavailable\r\n\r\nno") is None
    assert service_stats.answer_body(b"HTTP/1.1 200 OK\r\nContent-Len") is None  # cut short
    assert service_stats.answer_body(b"") is None and service_stats.answer_body(b"SSH-2.0\r\n\r\n") is None


def test_ready_addresses_leave_out_endpoints_that_are_not_ready():
    slices = [{"endpoints": [{"addresses": ["10.0.0.2"], "conditions": {"ready": True}},
                             {"addresses": ["10.0.0.3"], "conditions": {"ready": False, "terminating": True}},
                             {"addresses": ["10.0.0.4"]}]},
              {"endpoints": None}, {"endpoints": [{"addresses": ["10.0.1.2"], "conditions": {"ready": True}}]}]
    assert service_stats.ready_addresses(slices) == {"10.0.0.2", "10.0.1.2"}


def test_targets_are_judged_in_the_units_they_are_given():
    results = {"throughput": {"ratio": {"p50": 0.93}},
               "endpoint_change": {"kube_proxy_sli": {"node-0": {"n": 3, "p99": 25_000.0},   # ms
                                                      "node-1": {"n": 3, "p99": 31_000.0},
                                                      "node-2": {"n": 0}}}}
    assert service_stats.verdicts(results) == {
        "ClusterIP req/s >= 0.9x direct (p50 of paired rounds)": "met",
        "network programming latency p99 <= 30 s (node-0)": "met",
        "network programming latency p99 <= 30 s (node-1)": "not met"}
    assert service_stats.verdicts({"throughput": {"ratio": {"p50": 0.89}}}) == {
        "ClusterIP req/s >= 0.9x direct (p50 of paired rounds)": "not met"}


def test_the_responder_answers_each_request_with_its_address_and_stops_on_sigterm():
    proc = subprocess.Popen([sys.executable, "-m", "bench.service_responder", "--port", "0"], stdout=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    try:
        line = proc.stdout.readline()
        assert line.startswith("service_responder: listening on 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        assert [service.fetch("127.0.0.1", port, DEADLINE) for _ in range(3)] == ["127.0.0.1"] * 3
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE) as s:  # no blank line, ever
            s.sendall(b"x" * 20000)
            assert s.recv(100) == b""  # closed without an answer
        assert service.fetch("127.0.0.1", port, DEADLINE) == "127.0.0.1"  # and still serving
        proc.terminate()
        assert proc.wait(DEADLINE) == 0
    finally:
        terminate(proc)


def test_fetch_leaves_no_time_wait_on_either_side():
    """The responder closes first: without the client's reset, each request would leave a
    TIME_WAIT on the server's side, which the client's reused ports then meet."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.service_responder", "--port", "0"], stdout=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL)
    try:
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        assert [service.fetch("127.0.0.1", port, DEADLINE) for _ in range(5)] == ["127.0.0.1"] * 5
        waiting = [c for c in psutil.net_connections("tcp4") if c.status == psutil.CONN_TIME_WAIT
                   and port in (c.laddr.port, c.raddr.port if c.raddr else None)]
        assert waiting == []
    finally:
        terminate(proc)


def test_the_suite_is_skipped_with_the_reason_where_pods_have_no_networks(bench_dir, monkeypatch, tmp_path):
    monkeypatch.setattr(network, "probe", lambda requested: netplan.Mode(netplan.HOST, "no CNI plugin bridge in /x"))
    report = service.run(quick=True, workdir=bench_dir)
    assert report["skipped"] == "no pod networks here: no CNI plugin bridge in /x"
    assert service.headlines(report) == [("skipped", report["skipped"], "")]
    text = check_outputs(report, service, tmp_path, plots=0)
    assert "skipped: no pod networks here: no CNI plugin bridge in /x" in text
    assert list(bench_dir.iterdir()) == []


def test_the_quick_suite_measures_every_figure(bench_dir, tmp_path):
    if network.probe(None).kind != netplan.CNI:
        pytest.skip(f"no pod networks here: {network.probe(None).reason}")
    report = service.run(quick=True, workdir=bench_dir, services=2, changes=2, dns_rounds=1, seconds=0.5, rounds=2,
                         window=0.3, requests=100)
    assert "skipped" not in report, report.get("skipped")
    res = report["results"]
    sane_latency(res["new_service"])
    assert res["new_service"]["n"] == 2
    change = res["endpoint_change"]
    for row in (change["slice_to_answer"], change["scale_to_answer"]):
        assert row["n"] == 2 and 0 <= row["min"] <= row["max"]
    assert change["slice_to_answer"]["max"] <= change["scale_to_answer"]["max"]
    sli = change["kube_proxy_sli"]
    assert set(sli) == {"node-0", "node-1"}
    for row in sli.values():  # every node's proxy programmed the new endpoints: each logged its latency
        sane_latency(row)
    dns = res["dns"]
    for name in service.DNS_ROWS:
        assert dns["rates"][name]["n"] == 1 and dns["rates"][name]["min"] > 0
    assert set(dns["ratio_to_floor"]) == set(service.DNS_ROWS[1:])
    tp = res["throughput"]
    assert tp[service.DIRECT]["min"] > 0 and tp[service.VIA]["min"] > 0 and tp["ratio"]["n"] == 2
    lat = res["request_latency"]
    for name in (service.DIRECT, service.VIA):
        sane_latency(lat[name])
        assert lat[name]["n"] == 100
    assert len(report["targets"]) == 3
    text = check_outputs(report, service, tmp_path, plots=2)
    for words in ("new Service -> first answer", "network programming latency (SLI), node-1", "x the floor",
                  "ratio ClusterIP / direct", "one request on a new connection", "targets"):
        assert words in text
    assert len(service.headlines(report)) == 6
