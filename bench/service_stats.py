"""The pure parts of `kubemu bench service`: reading kube-proxy's latency log lines, the order of
paired rounds, their ratios, an HTTP answer's body, and which targets were met."""
from __future__ import annotations

import datetime
import re

from .stats import summary

# kube-proxy's line after a sync that programmed endpoint changes (components/kube_proxy/__main__.py),
# after logging's asctime (local time, milliseconds after a comma).
_LATENCY_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*network programming latency: "
                           r"seconds=([0-9.,]+) sync=(\w+)", re.MULTILINE)

SLO_P99_S = 30.0          # Kubernetes' network programming latency SLO (p99, at scale)
CLUSTER_IP_TARGET = 0.9   # issue 16: requests/s through the ClusterIP >= 0.9x direct to the pod


def programming_latencies(log: str, since: float) -> list[float]:
    """The network programming latencies (seconds) kube-proxy logged at or after `since`
    (epoch seconds), in the order logged."""
    found = []
    for stamp, seconds, _kind in _LATENCY_LINE.findall(log):
        logged = datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time, as logged
        if logged >= since:
            found += [float(s) for s in seconds.split(",") if s]
    return found


def round_order(index: int, names: list[str]) -> list[str]:
    """The order of round `index`'s measurements: rotated by one each round, so no side is
    always first (a warmer or a busier moment)."""
    k = index % len(names)
    return names[k:] + names[:k]


def paired_ratios(rounds: list[dict[str, float]], numerator: str, denominator: str) -> dict:
    """numerator / denominator within each round (both measured in it), summarised over rounds,
    with the per-round ratios; rounds where the denominator is 0 are left out."""
    ratios = [r[numerator] / r[denominator] for r in rounds if r.get(denominator)]
    return dict(summary(ratios), samples=ratios)


def rates(rounds: list[dict[str, float]], key: str) -> dict:
    return dict(summary([r[key] for r in rounds]), unit="per s")


def answer_body(response: bytes) -> str | None:
    """The body of a complete `HTTP/1.x 200` answer, None for anything else."""
    head, sep, body = response.partition(b"\r\n\r\n")
    if not sep or not head.startswith(b"HTTP/1.") or head.split(b" ", 2)[1:2] != [b"200"]:
        return None
    return body.decode("ascii", "replace")


def ready_addresses(slices: list[dict]) -> set[str]:
    """The addresses of the ready endpoints of a Service's EndpointSlices."""
    return {a for s in slices for ep in s.get("endpoints") or []
            if (ep.get("conditions") or {}).get("ready") for a in ep.get("addresses") or []}


def verdicts(results: dict) -> dict[str, str]:
    """Each target of the issue beside what was measured: "met" / "not met" (printed, never
    asserted); a target whose figure is missing is left out."""
    out = {}
    ratio = (results.get("throughput") or {}).get("ratio", {}).get("p50")
    if ratio is not None:
        out["ClusterIP req/s >= 0.9x direct (p50 of paired rounds)"] = \
            "met" if ratio >= CLUSTER_IP_TARGET else "not met"
    for node, row in ((results.get("endpoint_change") or {}).get("kube_proxy_sli") or {}).items():
        if row.get("n"):
            out[f"network programming latency p99 <= 30 s ({node})"] = \
                "met" if row["p99"] / 1000 <= SLO_P99_S else "not met"
    return out
