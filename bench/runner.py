"""What `kubemu bench SUITE` prints and writes: a live progress line, then a table, and
optionally every figure as JSON (with its unit and the machine)."""
from __future__ import annotations

import json

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import restart, store

SUITES = {"restart": restart, "store": store}


def run_suite(name: str, quick: bool, json_path: str | None, kills: int | None = None, **options) -> dict:
    """`options` go to suites other than restart, which also get `quick` and their own `kills`
    default, and may bring their own `table(report)`."""
    console = Console()
    suite = SUITES[name]
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        def factory(label: str, total: int):
            task = progress.add_task(f"{name}: {label}", total=total)
            return lambda: progress.advance(task)
        if suite is restart:
            report = suite.run(kills=kills or (5 if quick else 30), progress_factory=factory)
        else:
            report = suite.run(quick=quick, kills=kills, progress_factory=factory, **options)
    console.print(getattr(suite, "table", table)(report))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(report, f, indent=2)
        console.print(f"figures written to {json_path}")
    return report


def table(report: dict) -> Table:
    m = report["machine"]
    t = Table(title=f"{report['suite']}: kill -9 -> new PID alive, {report['kills']} kills each "
                    f"({m['cpus']} cpus, {m['cpu_model']}, Python {m['python']}, {m['date']})")
    for col in ("supervisor", "p50 ms", "p99 ms", "min ms", "max ms", "p50 / floor"):
        t.add_column(col, justify="left" if col == "supervisor" else "right")
    for name, row in report["results"].items():
        if "skipped" in row:
            t.add_row(name, f"skipped: {row['skipped']}", "", "", "", "")
            continue
        t.add_row(name, f"{row['p50']:.2f}", f"{row['p99']:.2f}", f"{row['min']:.2f}", f"{row['max']:.2f}",
                  f"{row.get('ratio_p50_to_floor', float('nan')):.2f}x")
    t.caption = f"target: {report['target']}"
    return t
