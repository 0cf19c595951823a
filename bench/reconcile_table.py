"""The reconcile benchmark's table: the headline beside its targets and anchors, then where the
time and the CPU went."""
from __future__ import annotations

from rich.table import Table

from .tables import machine_line, number


def _ms(row: dict) -> str:
    return f"{row['p50_ms']:.0f} / {row['p90_ms']:.0f} / {row['p99_ms']:.0f}"


def _met(ok: bool) -> str:
    return "[green]met[/green]" if ok else "[red]missed[/red]"


def table(report: dict) -> Table:
    c, m = report["config"], report["machine"]
    t = Table(title=f"reconcile: {c['deployments']} Deployments, {c['pods']} pods on {c['hollow_nodes']} hollow "
                    f"nodes, 3 store replicas ({machine_line(m)}"
                    f"{', CPU-profiled' if c['profiled'] else ''})")
    t.add_column("figure")
    t.add_column("kubemu", justify="right")
    t.add_column("target / anchor")
    for rows in (_headline, _recovery, _workloads, _control_planes, _traffic, _cpu):
        for row in rows(report):
            t.add_row(*row)
    return t


def _headline(report: dict) -> list[tuple[str, str, str]]:
    up, down = report["results"]["startup"], report["results"]["deletion"]
    ratios, targets, lat, pipe = report["ratios"], report["targets"], up["latency"], up["pipeline"]
    return [
        ("pods/s (first create -> all Running)", f"{up['pods_per_s']:.1f}",
         f">= 500: {_met(targets['pods_per_s >= 500'])}; kube-scheduler_perf 680-810: "
         f"{ratios['pods_per_s / kube-scheduler_perf 680']:.2f}x-{ratios['pods_per_s / kube-scheduler_perf 810']:.2f}x;"
         f" kwok 20: {ratios['pods_per_s / kwok 20']:.1f}x"),
        ("startup ms p50/p90/p99 (watch ADDED -> Running)", _ms(lat["from_first_seen"]),
         f"p99 <= 1.5 s: {_met(targets['p99 startup <= 1.5 s'])}; SLO p99 <= 5 s: "
         f"{ratios['p99 startup / SLO 5 s']:.2f} of it"),
        ("startup ms p50/p90/p99 (creationTimestamp, 1 s steps)", _ms(lat["from_creation_timestamp"]), ""),
        ("  of which scheduling (ADDED -> on a node)", _ms(lat["scheduling"]), ""),
        ("  of which kubelet (on a node -> Running)", _ms(lat["kubelet"]), ""),
        ("  last pod created / bound / Running, s after the first create",
         f"{pipe['last_created_after_s']:.1f} / {pipe['last_bound_after_s']:.1f} / {pipe['last_running_after_s']:.1f}",
         ""),
        ("deletions/s (scale to 0 -> all DELETED)", f"{down['deletions_per_s']:.1f}", ""),
    ]


def _recovery(report: dict) -> list[tuple[str, str, str]]:
    rows = []
    for rec in report["results"]["recovery"]:
        back = rec["controller_manager_running_again_after_s"]
        rows.append((f"recovery: kill -9 controller-manager at {rec['at_kill']['seen']} created, "
                     f"{rec['at_kill']['running']} Running -> all created / all Running",
                     f"{rec['kill_to_all_created_s']:.2f} / {rec['kill_to_converged_s']:.2f} s",
                     f"total {rec['total_s']:.2f} s ({rec['pods_per_s']:.0f} pods/s); its mirror pod Running again "
                     + (f"after {back:.2f} s" if back is not None else "never")))
    return rows


def _workloads(report: dict) -> list[tuple[str, str, str]]:
    """The other controllers' startup rows, beside the Deployment's of the same run."""
    deployment = report["results"]["startup"]["pods_per_s"]
    rows = []
    for kind, up in report["results"].get("workloads", {}).items():
        owners = len(report["config"]["workload_replicas"][kind])
        rows.append((f"{kind}: pods/s ({up['pods']} pods, {owners} objects)", f"{up['pods_per_s']:.1f}",
                     f"{up['pods_per_s'] / deployment:.2f}x the Deployment row; startup ms p50/p90/p99 "
                     f"{_ms(up['latency']['from_first_seen'])}"))
    return rows


def _control_planes(report: dict) -> list[tuple[str, str, str]]:
    """The HA cluster's startup and deletion beside the 1-control-plane cluster's of the same run."""
    ha = report["results"].get("ha")
    if ha is None:
        return []
    n, ratios = ha["control_plane_nodes"], report["ratios"]
    up, down = ha["startup"], ha["deletion"]

    def x(figure: str) -> str:
        return f"{ratios[f'{figure} {n}-CP / 1-CP']:.2f}x the 1-control-plane row"
    return [(f"{n} control-plane nodes: pods/s (first create -> all Running)", f"{up['pods_per_s']:.1f}",
             x("pods_per_s")),
            (f"{n} control-plane nodes: startup ms p50/p90/p99", _ms(up["latency"]["from_first_seen"]),
             f"p50 {x('p50 startup')}, p99 {x('p99 startup')}"),
            (f"{n} control-plane nodes: deletions/s", f"{down['deletions_per_s']:.1f}", x("deletions_per_s")),
            (f"{n} control-plane nodes: startup CPU per pod, whole cluster", f"{up['cpu_per_pod']['cluster_ms']:.2f} ms",
             f"{x('cluster CPU per pod')}; " + ", ".join(f"{name} {ms:.2f}" for name, ms in
                                                          up["cpu_per_pod"]["by_role_ms"].items()) + " ms/pod")]


def _traffic(report: dict) -> list[tuple[str, str, str]]:
    rows = []
    for label in ("startup", "deletion"):
        api, store = report["results"][label]["api_requests"], report["results"][label]["store"]
        verbs = ", ".join(f"{v} {n:.0f}" for v, n in api["by_verb_per_s"].items())
        fsyncs = ", ".join(f"{n} {f:.0f}" for n, f in store["fsyncs_per_s"].items())
        rows += [(f"{label}: API writes/s", f"{api['per_s']:.0f}", verbs),
                 (f"{label}: store commits/s", f"{store['commits_per_s']:.0f}",
                  f"fsyncs/s {fsyncs} (leader {store['leader']}, {store['leader_changes']} leader changes); "
                  f"ReadIndex rounds/s {store['read_index_rounds_per_s']:.0f}")]
    return rows


def _cpu(report: dict) -> list[tuple[str, str, str]]:
    up, cpus = report["results"]["startup"], report["machine"]["cpus"]
    procs, budget = up["processes"], up["cpu_per_pod"]
    rows = [("startup CPU per pod, whole cluster", f"{budget['cluster_ms']:.2f} ms",
             f"<= 3.5 ms: {_met(report['targets']['cluster CPU per pod <= 3.5 ms'])}; -> at most "
             f"{budget['ceiling_pods_per_s']:.0f} pods/s on {cpus} otherwise idle cores")]
    for name, row in sorted(procs["roles"].items(), key=lambda kv: -kv[1]["cpu_s"]):
        rows.append((f"startup CPU: {name}", f"{row['cpu_s']:.2f} s",
                     f"{budget['by_role_ms'].get(name, 0.0):.2f} ms/pod, {row['cores']:.2f} cores, "
                     f"peak RSS {row['peak_rss_mb']:.0f} MiB"))
    rows.append(("startup CPU: benchmark client (watch)", f"{procs['bench_client_cpu_s']:.2f} s",
                 f"other processes on the machine: {procs['other_cores']:.2f} cores"))
    return rows


def headlines(report: dict) -> list[tuple[str, str, str]]:
    """The figures `kubemu bench all` shows for this suite."""
    up, ratios = report["results"]["startup"], report["ratios"]
    rows = [("pods/s, create -> all Running", f"{number(up['pods_per_s'], '{:.0f}')}/s",
             f"{number(ratios['pods_per_s / kube-scheduler_perf 680'])}x kube-scheduler_perf's 680; target 500"),
            ("pod startup p99", f"{number(up['latency']['from_first_seen']['p99_ms'], '{:.0f}')} ms",
             f"{number(ratios['p99 startup / SLO 5 s'])} of the 5 s SLO; target 1.5 s"),
            ("deletions/s, scale to 0", f"{number(report['results']['deletion']['deletions_per_s'], '{:.0f}')}/s", "")]
    for rec in report["results"]["recovery"]:
        rows.append(("controller-manager kill -9 -> all Running", f"{number(rec['kill_to_converged_s'])} s",
                     f"{rec['pods']} pods, {number(rec['total_s'], '{:.1f}')} s in all"))
    ha = report["results"].get("ha")
    if ha is not None:
        n = ha["control_plane_nodes"]
        rows.append((f"pods/s, {n} control-plane nodes", f"{number(ha['startup']['pods_per_s'], '{:.0f}')}/s",
                     f"{number(report['ratios'][f'pods_per_s {n}-CP / 1-CP'])}x the 1-control-plane cluster"))
    for kind, row in report["results"].get("workloads", {}).items():
        rows.append((f"pods/s through the {kind} controller", f"{number(row['pods_per_s'], '{:.0f}')}/s",
                     f"p99 startup {number(row['latency']['from_first_seen']['p99_ms'], '{:.0f}')} ms"))
    return rows
