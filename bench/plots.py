"""`kubemu bench SUITE --plot DIR`: PNG plots of a report, with matplotlib's Agg backend (no
display needed). Per suite: bars of the headline figures beside their floor or anchors,
latency CDFs where every sample was kept, and rates over time where a suite records a time
series. A suite module may bring its own `plots(report, directory)` instead (bench/runner.py)."""
from __future__ import annotations

from pathlib import Path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, on machines without a display too
    import matplotlib.pyplot as plt

    return plt


def _save(fig, directory: Path, name: str) -> Path:
    path = directory / f"{name}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def bars(directory: Path, name: str, title: str, values: dict[str, float], unit: str, *,
         anchors: dict[str, float] | None = None, errors: dict[str, float] | None = None, log: bool = False) -> Path:
    """One bar per value (with an optional upper whisker, e.g. to the p99); anchors (figures
    not measured here) as hatched grey bars beside them."""
    plt = _pyplot()
    labels = list(values) + list(anchors or {})
    heights = list(values.values()) + list((anchors or {}).values())
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(labels)), 4.5))
    colors = ["tab:blue"] * len(values) + ["lightgrey"] * len(anchors or {})
    drawn = ax.bar(range(len(labels)), heights, color=colors, edgecolor="black", linewidth=0.5)
    for patch in list(drawn)[len(values):]:
        patch.set_hatch("//")
    if errors:
        xs = [i for i, k in enumerate(values) if k in errors]
        lows = [0] * len(xs)
        highs = [max(0.0, errors[k] - values[k]) for k in values if k in errors]
        ax.errorbar(xs, [values[k] for k in values if k in errors], yerr=[lows, highs], fmt="none", ecolor="black",
                    capsize=4, label="to p99")
        ax.legend()
    for x, h in zip(range(len(labels)), heights):  # beside the whisker, not under it
        ax.annotate(f"{h:,.0f}" if h >= 100 else f"{h:.3g}", (x, h), xytext=(4, 2), textcoords="offset points",
                    ha="left", va="bottom", fontsize=8)
    ax.set_xticks(range(len(labels)), [_wrap(s) for s in labels], fontsize=8)
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=10)
    if log:
        ax.set_yscale("log")
    return _save(fig, directory, name)


def cdf(directory: Path, name: str, title: str, series: dict[str, list[float]], unit: str) -> Path:
    """Empirical CDF of each series (its samples, or its percentiles 1..100)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, samples in series.items():
        ordered = sorted(samples)
        if ordered:
            ax.step(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], where="post", label=label)
    ax.set_xscale("log")
    ax.set_xlabel(f"{unit} (log scale)")
    ax.set_ylabel("fraction of samples at or below")
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, directory, name)


def timeline(directory: Path, name: str, title: str, series: dict[str, tuple[list, list]], unit: str) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, (xs, ys) in series.items():
        ax.plot(xs, ys, label=label)
    ax.set_xlabel("seconds")
    ax.set_ylabel(unit)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, directory, name)


def _wrap(label: str, width: int = 18) -> str:
    words, lines, line = label.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join(lines + [line])


def _measured(results: dict) -> dict:
    return {k: r for k, r in results.items() if "p50" in r and r.get("n")}


def latency_plots(report: dict, directory: Path, unit: str = "ms") -> list[Path]:
    rows = _measured(report["results"])
    suite = report["suite"]
    return [bars(directory, f"{suite}-p50", f"{suite}: p50 (whisker to p99)", {k: r["p50"] for k, r in rows.items()},
                 unit, errors={k: r["p99"] for k, r in rows.items()}, log=True),
            cdf(directory, f"{suite}-cdf", f"{suite}: latency CDF",
                {k: r["samples_ms"] for k, r in rows.items() if r.get("samples_ms")}, unit)]


def wire_plots(report: dict, directory: Path) -> list[Path]:
    res = report["results"]
    names = {"zmq": "pyzmq (floor)", "kubemu": "kubemu wire", "kubemu-auth": "kubemu wire, authenticated"}
    return [cdf(directory, "wire-round-trip-cdf", "wire: round trip CDF (percentiles 1-100)",
                {names[k]: r["round_trip"]["cdf_ms"] for k, r in res.items()}, "ms"),
            bars(directory, "wire-one-way", "wire: one-way msgs/s (median of the floods)",
                 {names[k]: r["one_way"]["p50"] for k, r in res.items()}, "msgs/s"),
            timeline(directory, "wire-flood-over-time", "wire: msgs/s during the last flood",
                     {names[k]: _flood_series(r["one_way"]["last_flood_timeline"]) for k, r in res.items()},
                     "msgs/s")]


def _flood_series(t: dict) -> tuple[list, list]:
    return [i * t["bin_s"] for i in range(len(t["counts"]))], [n / t["bin_s"] for n in t["counts"]]


def startup_plots(report: dict, directory: Path) -> list[Path]:
    return [bars(directory, "startup", "startup: `kubemu up` -> every node Ready (p50) beside kind and minikube",
                 {k: r["p50"] for k, r in report["results"].items()}, "seconds",
                 anchors={f"{k} (anchor)": v for k, v in report["anchors_s"].items()})]


def footprint_plots(report: dict, directory: Path) -> list[Path]:
    res = report["results"]
    per_role = {f"{k} ({r['processes']})": r["pss_mb"] for k, r in res["per_role"].items()}
    xs, ys = zip(*res["cpu_timeline"]) if res["cpu_timeline"] else ((), ())
    return [bars(directory, "footprint-pss", "footprint: idle cluster PSS per role (processes), total, and k3s",
                 dict(per_role, total=res["total"]["pss_mb"]), "MB",
                 anchors={f"{k} (anchor)": v for k, v in report["anchors_mb"].items()}),
            timeline(directory, "footprint-cpu-over-time", "footprint: idle cluster CPU, every process summed",
                     {"whole cluster": (list(xs), list(ys))}, "% of one core")]


def store_plots(report: dict, directory: Path) -> list[Path]:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_label: dict[str, list] = {}
    for row in report["results"]["writes"]:
        by_label.setdefault(row["label"], []).append((row["clients"], row["writes_per_s"]))
    for label, points in by_label.items():
        points.sort()
        ax.plot([c for c, _ in points], [w for _, w in points], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("clients (requests in flight)")
    ax.set_ylabel("durable writes/s")
    ax.set_title("store: writes/s by concurrency", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    paths = [_save(fig, directory, "store-writes")]
    fo = report["results"].get("failover")
    if fo:
        paths.append(cdf(directory, "store-failover-cdf", "store: leader kill -> first write (CDF)",
                         {"StoreClient": [t["storeclient_first_write_ms"] for t in fo["trials"]],
                          "direct prober": [t["probe_first_write_ms"] for t in fo["trials"]]}, "ms"))
    return paths


BUILTIN = {"restart": latency_plots, "failover": latency_plots, "wire": wire_plots, "startup": startup_plots,
           "footprint": footprint_plots, "store": store_plots}


def plots(report: dict, directory: str | Path) -> list[Path]:
    """Write the plots of one suite's `report` into `directory`; their paths (none for a
    suite this module does not know)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    make = BUILTIN.get(report["suite"])
    return make(report, directory) if make else []
