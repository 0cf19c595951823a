"""What `kubemu bench SUITE` prints and writes: a live progress line, then a table, and
optionally every figure as JSON (with its unit and the machine) and PNG plots.

A suite is a module with `run(quick, kills, progress_factory, **options) -> report` and
`table(report)`, and optionally `plots(report, directory)` and `headlines(report)`. Modules
load only when their suite runs, so one that is missing breaks no other."""
from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .machine import machine_with_load

SUITES = {  # name -> module, in the order `all` runs them
    "restart": "bench.restart",
    "failover": "bench.failover",
    "wire": "bench.wirebench",
    "api": "bench.api",
    "startup": "bench.startup",
    "footprint": "bench.footprint",
    "store": "bench.store",
    "reconcile": "bench.reconcile",
    "service": "bench.service",
    "scale": "bench.scale",
}
# The options each suite takes besides quick and kills (others are not passed to it).
OPTIONS = {"store": ("clients", "read_clients", "seconds", "peers"), "startup": ("trials",),
           "reconcile": ("pods", "deployments", "hollow_nodes", "workloads"), "scale": ("pods", "hollow_nodes")}


class SuiteUnavailable(Exception):
    """The suite's module is not there (yet)."""


def load(name: str):
    module = SUITES[name]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise  # the suite is there but something it imports is not: say so
        raise SuiteUnavailable(f"{module} is not installed") from None


def measure(name: str, quick: bool, kills: int | None, console: Console, options: dict) -> dict:
    """Run one suite with a live progress line (one bar per phase the suite announces)."""
    suite = load(name)
    mine = {k: v for k, v in options.items() if k in OPTIONS.get(name, ()) and v is not None}
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        def factory(label: str, total: int):
            task = progress.add_task(f"{name}: {label}", total=total)
            return lambda: progress.advance(task)
        load_before = [round(x, 2) for x in os.getloadavg()]
        report = suite.run(quick=quick, kills=kills, progress_factory=factory, **mine)
    report["quick"] = quick
    report["machine"].setdefault("loadavg_start", load_before)  # the machine is shared: how busy it was
    console.print(suite.table(report))
    return report


def run_suite(name: str, quick: bool, json_path: str | None = None, kills: int | None = None,
              plot_dir: str | None = None, console: Console | None = None, **options) -> dict:
    """Run `name` (or every suite in turn for "all"), print its table(s), write the JSON and
    the plots if asked; return the report."""
    console = console or Console()
    if name == "all":
        report = run_all(quick, kills, console, options)
    else:
        report = measure(name, quick, kills, console, options)
    if json_path:  # first: nothing after this may lose the figures
        with open(json_path, "w") as f:
            json.dump(report, f, indent=2)
        console.print(f"figures written to {json_path}")
    if plot_dir:
        paths = write_plots(report, Path(plot_dir))
        console.print(f"{len(paths)} plot(s) written to {plot_dir}")
    if name == "all":
        console.print(combined_table(report))
    return report


def run_all(quick: bool, kills: int | None, console: Console, options: dict) -> dict:
    """Every suite in order. One that cannot run or fails is recorded as such, and the others
    still run: an hour of figures is not lost to the last suite's error."""
    reports: dict[str, dict] = {}
    for name in SUITES:
        try:
            reports[name] = measure(name, quick, kills, console, options)
        except SuiteUnavailable as exc:
            reports[name] = {"unavailable": str(exc)}
            console.print(f"[yellow]{name}: skipped: {exc}[/]")
        except Exception as exc:  # noqa: BLE001 (reported, and the run fails at the end)
            reports[name] = {"failed": f"{type(exc).__name__}: {exc}"}
            console.print(f"[red]{name}: failed: {type(exc).__name__}: {exc}[/]")
    return {"suite": "all", "quick": quick, "machine": machine_with_load(), "reports": reports}


def combined_table(report: dict) -> Table:
    from .summary import headlines
    from .tables import machine_line

    t = Table(title=f"kubemu bench all{' --quick' if report['quick'] else ''} "
                    f"({machine_line(report['machine'])})")
    for col in ("suite", "figure", "value", "beside"):
        t.add_column(col)
    for name, sub in report["reports"].items():
        if "unavailable" in sub:
            t.add_row(name, "skipped", sub["unavailable"], "")
        elif "failed" in sub:
            t.add_row(name, "FAILED", sub["failed"], "")
        else:
            for figure, value, beside in headlines(sub, load(name)):
                t.add_row(name, str(figure), str(value), str(beside))  # a suite's own headlines may hold numbers
        t.add_section()
    return t


def write_plots(report: dict, directory: Path) -> list[Path]:
    from . import plots

    if report["suite"] == "all":
        return [p for sub in report["reports"].values() if "suite" in sub for p in write_plots(sub, directory)]
    directory.mkdir(parents=True, exist_ok=True)
    own = getattr(load(report["suite"]), "plots", None)
    return list(own(report, directory)) if own else plots.plots(report, directory)


def failed(report: dict) -> list[str]:
    """The suites of an `all` report that failed."""
    return [n for n, sub in report.get("reports", {}).items() if "failed" in sub]
