"""`kubemu chaos`: a Jepsen-style run against the cluster of the state directory (kubemu/chaos/)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from .chaos import nemesis
from .kubectl.durations import parse_duration
from .statedir import NoCluster
from .wire import WireError


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)


@click.command()
@click.option("--duration", default="10m", show_default=True, help="how long faults are injected (Go duration)")
@click.option("--faults", default=",".join(nemesis.FAULTS), show_default=True,
              help="which faults, comma-separated")
@click.option("--seed", type=int, default=0, show_default=True, help="the nemesis schedule's seed")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write the report (JSON) here")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="write latency-over-time plots (faults shaded) and their data into this directory")
@click.pass_obj
def chaos(obj, duration: str, faults: str, seed: int, out: Path | None, plot_dir: Path | None) -> None:
    """Run a workload while a seeded nemesis kills, pauses and partitions the cluster's
    processes and attacks its store (delays, disk faults, power loss, leadership transfers,
    membership changes), then check the store's history is linearizable, acknowledged writes survived,
    watches were exact, stale resourceVersions got 409, the workload converged after each
    fault, no two leaders acted in one term and nothing leaked. Exits 1 on any violation."""
    from .chaos import run  # the runner pulls in the store and API clients: only when run
    try:
        seconds = parse_duration(duration)
        kinds = nemesis.parse_faults(faults)
        obj.state.require_running()
    except (ValueError, NoCluster) as exc:
        _fail(str(exc))
    try:
        report = run.run(obj.state.root, seconds, kinds, seed, out, say=click.echo, plot_dir=plot_dir)
    except WireError as exc:  # the cluster could not even start the workload (or is gone)
        _fail(f"chaos: {exc}")
    click.echo(report.text(timeline=False))
    if not report.ok:
        _fail("chaos: the cluster violated its guarantees (see above)")
