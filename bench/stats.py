"""Summaries of measured samples: percentiles by the nearest-rank method, and the machine."""
from __future__ import annotations

import datetime
import math
import os
import platform
import sys


def percentile(samples: list[float], p: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least p% of samples at or below it."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(samples: list[float]) -> dict:
    return {"n": len(samples), "p50": percentile(samples, 50), "p99": percentile(samples, 99),
            "min": min(samples, default=math.nan), "max": max(samples, default=math.nan)}


def machine() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu_model": model, "python": sys.version.split()[0],
            "platform": platform.platform(), "date": datetime.datetime.now().isoformat(timespec="seconds")}
