"""The few figures of each suite that `kubemu bench all` shows in its combined table:
(figure, value, beside what), read from the suite's report."""
from __future__ import annotations

import math

from .tables import number


def _restart(r: dict) -> list[tuple]:
    return [(name, f"{number(row['p50'])} ms p50",
             f"{number(row['ratio_p50_to_floor'])}x the floor" if "ratio_p50_to_floor" in row else "its own clock")
            for name, row in r["results"].items() if "p50" in row]


def _failover(r: dict) -> list[tuple]:
    from .failover_ha import target_note

    return [(name, f"{number(row['p50'])} ms p50",
             "; ".join(filter(None, (f"p99 {number(row['p99'])} ms", target_note(row)))))
            for name, row in r["results"].items()]


def _wire(r: dict) -> list[tuple]:
    k, ratios = r["results"]["kubemu"], r["ratios"]
    return [("wire round trip", f"{number(k['round_trip']['p50'] * 1000, '{:.0f}')} us p50",
             f"{number(ratios['round_trip_p50_to_floor'])}x pyzmq REQ/REP"),
            ("wire one-way stream", f"{number(k['one_way']['p50'], '{:,.0f}')} msgs/s",
             f"{number(ratios['one_way_rate_to_floor'])}x pyzmq PUSH/PULL")]


def _startup(r: dict) -> list[tuple]:
    return [(name, f"{number(row['p50'])} s p50", ", ".join(f"{number(v, '{:.3f}')}x {a.split()[0]}"
                                                            for a, v in row["ratio_p50_to_anchors"].items()))
            for name, row in r["results"].items()]


def _footprint(r: dict) -> list[tuple]:
    tot = r["results"]["total"]
    ratio = ", ".join(f"{number(v)}x {a}" for a, v in r["ratio_pss_to_anchors"].items())
    rows = [("idle cluster memory (PSS)", f"{number(tot['pss_mb'], '{:.0f}')} MB", ratio),
            ("idle cluster CPU", f"{number(tot['cpu_pct'])} % of a core", f"{tot['processes']} processes")]
    sandbox = r.get("sandbox", {})
    if "holder" in sandbox:
        steps = sandbox["steps_ms"]
        rows.append(("a pod's sandbox: holder PSS / CNI ADD + DEL p50", f"{number(sandbox['holder']['pss_mb'])} MB / "
                     f"{number(steps['CNI ADD']['p50'] + steps['CNI DEL']['p50'], '{:.0f}')} ms",
                     f"host-network pod {number(sandbox['host_network_pod']['pss_mb'])} MB"))
    return rows


def _store(r: dict) -> list[tuple]:
    rows = []
    for w in r["results"]["writes"]:
        if w["label"] == "kubemu":
            beside = "" if math.isnan(w.get("ratio_vs_etcd", math.nan)) else f"{number(w['ratio_vs_etcd'])}x etcd"
            rows.append((f"store writes, {w['clients']} clients", f"{number(w['writes_per_s'], '{:,.0f}')}/s", beside))
    return rows


EXTRACTORS = {"restart": _restart, "failover": _failover, "wire": _wire, "startup": _startup,
              "footprint": _footprint, "store": _store}


def headlines(report: dict, module=None) -> list[tuple]:
    """The suite module's own `headlines(report)` if it has one, else the extractor here."""
    own = getattr(module, "headlines", None)
    if own is not None:
        return list(own(report))
    extract = EXTRACTORS.get(report.get("suite"))
    return extract(report) if extract else [("(see its table above)", "", "")]
