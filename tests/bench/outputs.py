"""What every suite's smoke test checks besides its figures: its table prints, its report
survives the -o JSON round trip, and --plot writes real PNG files."""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

from rich.console import Console

from bench import runner

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def sane_latency(row: dict) -> None:
    assert row["n"] > 0
    assert 0 < row["min"] <= row["p50"] <= row["p99"] <= row["max"] and math.isfinite(row["max"])


def check_outputs(report: dict, module, plot_dir: Path, plots: int) -> str:
    """The printed table's text, after checking the JSON form and the plots."""
    assert report["machine"]["cpus"] >= 1 and len(report["machine"]["loadavg_end"]) == 3
    assert json.loads(json.dumps(report))["suite"] == report["suite"]
    paths = runner.write_plots(report, plot_dir)
    assert len(paths) == plots
    for path in paths:
        assert Path(path).read_bytes()[:8] == PNG_MAGIC
    out = io.StringIO()
    Console(file=out, width=200).print(module.table(report))
    return out.getvalue()
