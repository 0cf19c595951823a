"""The scale benchmark's table: the startup, the steady window's API calls beside Kubernetes'
SLOs, the nodes' Lease renewal, memory and CPU per role, the store before and after a
compaction and a defragment; and the anchors it is set beside."""
from __future__ import annotations

from rich.table import Table

from .tables import machine_line, number


def _met(ok: bool) -> str:
    return "[green]met[/green]" if ok else "[red]missed[/red]"


def table(report: dict) -> Table:
    c = report["config"]
    t = Table(title=f"scale: {c['pods']} pods in {c['deployments']} Deployments on {c['hollow_nodes']} hollow nodes, "
                    f"3 store replicas, {c['steady_s']:g} s steady window ({machine_line(report['machine'])})")
    t.add_column("figure")
    t.add_column("kubemu", justify="right")
    t.add_column("SLO / anchor / detail")
    for rows in (_startup, _calls, _nodes, _memory, _cpu, _store, _anchors):
        for row in rows(report):
            t.add_row(*row)
        t.add_section()
    return t


def _startup(report: dict) -> list[tuple[str, str, str]]:
    up = report["results"]["startup"]
    lat = up["latency"]["from_first_seen"]
    return [("first create -> all pods Running", f"{up['seconds']:.1f} s",
             f"{up['pods_per_s']:.0f} pods/s; startup ms p50/p99 {lat['p50_ms']:.0f} / {lat['p99_ms']:.0f} "
             f"(SLO p99 <= 5 s: {_met(lat['p99_ms'] <= 5000)})"),
            ("  CPU per pod, whole cluster", f"{up['cpu_per_pod']['cluster_ms']:.2f} ms",
             ", ".join(f"{r} {ms:.2f}" for r, ms in up["cpu_per_pod"]["by_role_ms"].items()) + " ms/pod")]


def _calls(report: dict) -> list[tuple[str, str, str]]:
    steady = report["results"]["steady"]
    rows = []
    for name, row in steady["calls"].items():
        errors = ", ".join(f"{e} x{n}" for e, n in row["errors"].items())
        rows.append((f"steady: {name} p50 / p99 ms", f"{number(row['p50_ms'], '{:.0f}')} / "
                     f"{number(row['p99_ms'], '{:.0f}')}",
                     f"SLO p99 <= {row['slo_p99_ms'] / 1000:g} s: {_met(row['slo_met'])}; n {row['n']}"
                     + (f"; failed: {errors}" if errors else "")))
    for scope, lists in steady["listed_items"].items():
        slowest = max(lists, key=lambda x: x["seconds"])
        rows.append((f"steady: whole LIST pods ({scope}), every page, slowest", f"{slowest['seconds']:.2f} s",
                     f"{slowest['items']} pods; {len(lists)} such lists"))
    api = steady["api_requests"]
    verbs = ", ".join(f"{v} {n:.1f}" for v, n in api["by_verb_per_s"].items())
    failed = ", ".join(f"{code} x{n}" for code, n in api["failed"].items())
    rows.append(("steady: mutating calls/s, the cluster's and this client's (audit log: no latencies)",
                 f"{api['per_s']:.1f}", (verbs or "none") + (f"; failed: {failed}" if failed else "")))
    return rows


def _nodes(report: dict) -> list[tuple[str, str, str]]:
    steady = report["results"]["steady"]
    lease, nodes = steady["lease_renewal"], steady["nodes"]
    return [("steady: Lease renewal lag, worst node (max / p50 of samples)",
             f"{number(lease['max_lag_s'], '{:.1f}')} / {number(lease['p50_max_lag_s'], '{:.1f}')} s",
             f"renewed every {lease['renew_interval_s']:g} s (late by {number(lease['late_by_s'], '{:.1f}')} s); "
             f"within the {number(lease['lease_duration_s'], '{:g}')} s lease: {_met(lease['within_duration'])}; "
             f"{lease['leases']} Leases, {lease['samples']} samples"),
            ("steady: nodes Ready at the end", f"{nodes['ready']} / {nodes['total']}",
             f"{steady['pods_running']} pods Running")]


def _memory(report: dict) -> list[tuple[str, str, str]]:
    mem = report["results"]["steady"]["memory"]
    total = mem["total"]
    rows = [("memory at the end of the steady window: PSS / RSS", f"{total['pss_mb']:.0f} / {total['rss_mb']:.0f} MB",
             f"{total['processes']} processes; PSS counts shared pages once; the benchmark's client "
             f"{mem['benchmark_client_rss_mb']:.0f} MB RSS")]
    for name, row in mem["by_role"].items():
        rows.append((f"  {name}", f"{row['pss_mb']:.0f} / {row['rss_mb']:.0f} MB", f"{row['processes']} process(es)"))
    return rows


def _cpu(report: dict) -> list[tuple[str, str, str]]:
    procs = report["results"]["steady"]["processes"]
    rows = [("steady: CPU, whole cluster", f"{procs['cluster_cpu_s'] / procs['seconds']:.2f} cores",
             f"benchmark client {procs['bench_client_cpu_s'] / procs['seconds']:.2f} cores; "
             f"other processes {procs['other_cores']:.2f} cores")]
    for name, row in sorted(procs["roles"].items(), key=lambda kv: -kv[1]["cores"]):
        rows.append((f"  {name}", f"{row['cores']:.2f} cores", f"peak RSS {row['peak_rss_mb']:.0f} MiB"))
    return rows


def _store(report: dict) -> list[tuple[str, str, str]]:
    store = report["results"]["store"]
    if "skipped" in store:
        return [("store compaction", "skipped", store["skipped"])]
    applied = store["applied_everywhere_after_s"]
    rows = [("store: compaction at revision", str(store["compacted_at_revision"]),
             f"applied on every replica after {number(applied)} s; then a defragment of each replica in turn")]
    for name, r in store["replicas"].items():
        defrag = (f"defragment failed: {r['defragment_error']}" if "defragment_error" in r
                  else f"defragment {number(r['defragment_s'], '{:.1f}')} s")
        rows.append((f"  {name}{' (leader)' if name == store['leader'] else ''}: db size before -> compacted "
                     "-> defragmented",
                     f"{_mb(r['db_size_before'])} -> {_mb(r['db_size_after_compaction'])} -> "
                     f"{_mb(r['db_size_after'])} MB",
                     f"{defrag}; RSS {number(r['rss_mb_before'], '{:.0f}')} -> "
                     f"{number(r['rss_mb_after'], '{:.0f}')} MB"))
    return rows


def _mb(size: int | None) -> str:
    return number(size / 1e6 if size is not None else None, "{:.1f}")


def _anchors(report: dict) -> list[tuple[str, str, str]]:
    return [(f"anchor: {name}", "-", claim) for name, claim in report["anchors"].items()]


def headlines(report: dict) -> list[tuple[str, str, str]]:
    """The figures `kubemu bench all` shows for this suite."""
    c, res = report["config"], report["results"]
    up, steady = res["startup"], res["steady"]
    slow = [name for name, row in steady["calls"].items() if not row["slo_met"]]
    return [(f"{c['pods']} pods on {c['hollow_nodes']} hollow nodes: create -> all Running",
             f"{number(up['seconds'], '{:.0f}')} s", f"{number(up['pods_per_s'], '{:.0f}')} pods/s"),
            ("API call latency SLOs (steady window)", "met" if not slow else f"missed by {len(slow)}",
             ", ".join(slow) or f"{len(steady['calls'])} kinds of call"),
            ("cluster memory (PSS)", f"{number(steady['memory']['total']['pss_mb'], '{:.0f}')} MB",
             "kwok: 1,000 nodes / 100,000 pods on a laptop"),
            ("Lease renewal lag, worst node", f"{number(steady['lease_renewal']['max_lag_s'], '{:.1f}')} s",
             f"lease {number(steady['lease_renewal']['lease_duration_s'], '{:g}')} s")]
