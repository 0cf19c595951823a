"""`kubemu chaos --plot DIR`: Jepsen's perf plots of a run: every register operation's latency
against the time it was invoked, by operation and outcome, and the completed operations per
second, with each fault's window shaded. The rows are pure (`latency_rows`, `rates`); `write`
is the shell: it always writes the data (latency.csv, faults.json) and draws latency.png only
when matplotlib can be imported, saying so when it cannot.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Sequence

from .history import Operation

COLUMNS = ("process", "f", "key", "status", "invoked", "latency")
OUTCOME_MARKERS = {"ok": "o", "fail": "x", "info": "^"}


def latency_rows(ops: Sequence[Operation]) -> list[dict]:
    """One row per operation, in invoke order: latency in seconds (None: outcome unknown)."""
    return [{"process": op.process, "f": op.f, "key": op.key, "status": op.status, "invoked": round(op.call, 6),
             "latency": None if op.ret is None else round(op.ret - op.call, 6)}
            for op in sorted(ops, key=lambda o: o.call)]


def rates(ops: Sequence[Operation], bucket: float = 1.0) -> list[tuple[float, int]]:
    """(bucket start, operations completed in it) over the run, empty buckets included."""
    done = sorted(op.ret for op in ops if op.ret is not None)
    if not done:
        return []
    counts: dict[int, int] = {}
    for t in done:
        counts[int(t // bucket)] = counts.get(int(t // bucket), 0) + 1
    return [(i * bucket, counts.get(i, 0)) for i in range(int(done[-1] // bucket) + 1)]


def write(directory: Path, ops: Sequence[Operation], faults: Sequence[dict], title: str) -> list[str]:
    """Write the run's plot data (and the plot, when matplotlib is there) into `directory`;
    returns one line per file written or skipped."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = latency_rows(ops)
    data = directory / "latency.csv"
    with open(data, "w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=COLUMNS)
        out.writeheader()
        out.writerows({**r, "latency": "" if r["latency"] is None else r["latency"]} for r in rows)
    windows = directory / "faults.json"
    windows.write_text(json.dumps(list(faults), indent=2))
    said = [f"plot data: {data}, {windows}"]
    try:
        import matplotlib
    except ImportError:
        return said + ["plots skipped: matplotlib is not installed (the data above is what they would show)"]
    matplotlib.use("Agg")  # files only, on machines without a display too
    import matplotlib.pyplot as plt

    fig, (lat, rate) = plt.subplots(2, 1, figsize=(11, 7), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    for ax in (lat, rate):
        for w in faults:
            ax.axvspan(w["start"], w["end"] if w["end"] is not None else w["start"], color="tab:red", alpha=0.12, lw=0)
    for w in faults:
        lat.annotate(w["kind"], (w["start"], 1), xycoords=("data", "axes fraction"), rotation=90, fontsize=7,
                     va="top", ha="right", color="tab:red")
    known = [r["latency"] for r in rows if r["latency"] is not None]
    top = max(known) if known else 1.0
    for f_name in sorted({r["f"] for r in rows}):
        for status, marker in OUTCOME_MARKERS.items():
            pts = [r for r in rows if r["f"] == f_name and r["status"] == status]
            if pts:  # an unknown outcome has no latency: drawn at the top edge
                lat.scatter([r["invoked"] for r in pts], [r["latency"] if r["latency"] is not None else top
                                                          for r in pts],
                            s=6, marker=marker, alpha=0.6, label=f"{f_name} {status} ({len(pts)})")
    lat.set_yscale("log")
    lat.set_ylabel("latency (s)")
    lat.set_title(title, fontsize=10)
    lat.legend(fontsize=7, markerscale=2, loc="upper left", bbox_to_anchor=(1.01, 1))
    points = rates(ops)
    rate.plot([t for t, _n in points], [n for _t, n in points], drawstyle="steps-post", color="black", lw=0.8)
    rate.set_ylabel("ops/s")
    rate.set_xlabel("time since the workload started (s); faults shaded")
    fig.tight_layout()
    image = directory / "latency.png"
    fig.savefig(image, dpi=110)
    plt.close(fig)
    return said + [f"plot: {image}"]
