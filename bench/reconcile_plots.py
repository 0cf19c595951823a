"""`kubemu bench reconcile --plot DIR`: the pod startup latency CDF of every workload, and the
pods Running (or deleted) over time, with the controller-manager's kill in the label; the HA
cluster's startup beside them."""
from __future__ import annotations

from pathlib import Path

from .plots import cdf, timeline


def _count(times: list[float]) -> tuple[list[float], list[int]]:
    return times, list(range(1, len(times) + 1))


def plots(report: dict, directory: str | Path) -> list[Path]:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    res = report["results"]
    up, down = res["startup"], res["deletion"]
    latency = {"startup": up["latency"]["from_first_seen"]["samples_ms"]}
    counts = {"startup: pods Running": _count(up["running_over_time"]),
              "scale to 0: pods deleted": _count(down["deleted_over_time"])}
    for i, rec in enumerate(res["recovery"], 1):
        label = f"recovery {i} (controller-manager killed at {rec['kill_after_s']:.1f} s)"
        latency[label] = rec["latency"]["from_first_seen"]["samples_ms"]
        counts[f"{label}: pods Running"] = _count(rec["running_over_time"])
    ha = res.get("ha")
    if ha is not None:
        label = f"{ha['control_plane_nodes']} control-plane nodes"
        latency[f"startup, {label}"] = ha["startup"]["latency"]["from_first_seen"]["samples_ms"]
        counts[f"startup, {label}: pods Running"] = _count(ha["startup"]["running_over_time"])
    return [cdf(directory, "reconcile-startup-cdf", "reconcile: pod startup latency, watch ADDED -> Running (CDF)",
                latency, "ms"),
            timeline(directory, "reconcile-pods-over-time",
                     "reconcile: pods over time (seconds after the first create / the scale to 0)", counts, "pods")]
