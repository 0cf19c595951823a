"""The control-plane node rows of `kubemu bench failover`, their pure part: from the kills'
clocks to the rows, their targets and verdicts, and the table that shows them beside the
single-process rows. (The rows' real run is the failover smoke test's.)"""
from __future__ import annotations

import io
import math

from rich.console import Console

from bench import failover, failover_ha, summary

FAST, DEFAULT = failover_ha.MODES


def names(mode: str) -> list[str]:
    return [failover_ha.row_name(clock, mode) for clock in failover_ha.CLOCKS]


WRITE, SCHEDULED, CONVERGED = names(FAST)


def kills(*clocks: tuple) -> list[dict]:
    return [{"first_write_ms": w, "pod_scheduled_ms": s, "deployment_converged_ms": c} for w, s, c in clocks]


def test_rows_summarise_the_stopped_clocks_and_count_the_others():
    rows = failover_ha.trial_rows(kills((300.0, 1500.0, 7000.0), (900.0, None, 9000.0), (500.0, 2500.0, None)), FAST)

    assert list(rows) == [WRITE, SCHEDULED, CONVERGED]
    write = rows[WRITE]
    assert (write["n"], write["p50"], write["p99"], write["min"], write["max"]) == (3, 500.0, 900.0, 300.0, 900.0)
    assert write["missing"] == 0 and write["samples_ms"] == [300.0, 900.0, 500.0] and write["unit"] == "ms"
    assert rows[SCHEDULED]["n"] == 2 and rows[SCHEDULED]["missing"] == 1
    assert rows[CONVERGED]["samples_ms"] == [7000.0, 9000.0] and rows[CONVERGED]["missing"] == 1


def test_only_the_first_write_is_judged_and_against_its_modes_target():
    met = failover_ha.trial_rows(kills((1900.0, 60000.0, 60000.0)), FAST)
    assert met[WRITE]["target_ms"] == 2000.0 and met[WRITE]["target_met"] is True
    # the issue sets no target for a pod scheduled or a Deployment converged: printed as measured
    assert "target_ms" not in met[SCHEDULED] and "target_ms" not in met[CONVERGED]
    assert failover_ha.target_note(met[SCHEDULED]) == failover_ha.target_note(met[CONVERGED]) == ""

    missed = failover_ha.trial_rows(kills((2100.0, 1.0, 1.0)), FAST)
    assert missed[WRITE]["target_met"] is False
    assert failover_ha.target_note(missed[WRITE]) == "p99 <= 2 s (--fast): NOT met"
    assert failover_ha.target_note(met[WRITE]) == "p99 <= 2 s (--fast): met"

    # with the default timings the bound is Kubernetes' own floor: lease duration 15 s + retry period 2 s
    write, scheduled, converged = names(DEFAULT)
    default = failover_ha.trial_rows(kills((16900.0, 1.0, 1.0)), DEFAULT)
    assert list(default) == [write, scheduled, converged]
    assert default[write]["target_ms"] == 17000.0 and default[write]["target_met"] is True
    assert failover_ha.target_note(default[write]) == "p99 <= lease duration + retry period (17 s): met"
    assert failover_ha.trial_rows(kills((17100.0, 1.0, 1.0)), DEFAULT)[write]["target_met"] is False
    assert "target_ms" not in default[scheduled] and "target_ms" not in default[converged]


def test_no_clock_stopped_gives_no_verdict():
    rows = failover_ha.trial_rows(kills((None, None, None)), FAST)
    assert rows[WRITE]["n"] == 0 and math.isnan(rows[WRITE]["p99"]) and rows[WRITE]["target_met"] is None
    assert failover_ha.target_note(rows[WRITE]) == "p99 <= 2 s (--fast): no figure"


def report(quick: bool) -> dict:
    single = {"n": 5, "p50": 150.0, "p99": 300.0, "min": 100.0, "max": 300.0, "unit": "ms", "missing": 0}
    results = {"apiserver kill -> first request, long-lived ApiClient": single}
    results.update(failover_ha.trial_rows(kills((400.0, 6500.0, 9000.0), (2500.0, 5000.0, 8000.0)), FAST))
    results.update(failover_ha.trial_rows(kills((3000.0, 16000.0, 19000.0), (2000.0, 15000.0, 18000.0)), DEFAULT))
    return {"suite": "failover", "trials": 5, "node_kills": 2, "quick": quick, "results": results,
            "machine": {"cpus": 2, "cpu_model": "test", "python": "3", "date": "today", "loadavg_end": [1, 1, 1]}}


def printed(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=250).print(renderable)
    return out.getvalue()


def test_the_table_shows_the_node_rows_beside_the_process_rows_with_their_verdicts():
    text = printed(failover.table(report(quick=True)))
    assert "long-lived ApiClient" in text and "first API write" in text and "Deployment scaled" in text
    assert "2 control-plane node kills per timing (--fast, default timings) (--quick: too few for a p99)" in text
    assert "p99 <= 2 s (--fast): NOT met" in text  # 2,500 ms
    assert "p99 <= lease duration + retry period (17 s): met" in text  # 3,000 ms
    assert "first API write (client of every apiserver), default timings" in text
    assert "--quick" not in printed(failover.table(report(quick=False)))

    lines = {figure: beside for figure, _, beside in summary.headlines(report(quick=False))}
    assert lines[WRITE] == "p99 2500.00 ms; p99 <= 2 s (--fast): NOT met"
    assert lines["apiserver kill -> first request, long-lived ApiClient"] == "p99 300.00 ms"
