"""Table pieces every suite prints with rich."""
from __future__ import annotations

import math

from rich.table import Table


def machine_line(m: dict) -> str:
    start, end = m.get("loadavg_start"), m.get("loadavg_end")
    busy = (f", load average {start[0]:.2f} at the start, {end[0]:.2f} at the end" if start and end
            else f", load average {end[0]:.2f} at the end" if end else "")
    return f"{m['cpus']} cpus, {m['cpu_model']}, Python {m['python']}, {m['date']}{busy}"


def number(value, fmt: str = "{:.2f}") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


def latency_table(title: str, rows: dict[str, dict], *, ratio_key: str | None = None, ratio_label: str = "",
                  unit: str = "ms", caption: str = "", note=None, note_label: str = "") -> Table:
    """One row per measured thing with its p50/p99/min/max (keys p50, p99, min, max), an
    optional ratio column and an optional column of words, note(row); a row with "skipped"
    says why instead."""
    t = Table(title=title, caption=caption or None)
    columns = ["", f"p50 {unit}", f"p99 {unit}", f"min {unit}", f"max {unit}", "n"]
    if ratio_key:
        columns.append(ratio_label)
    if note:
        columns.append(note_label)
    for col in columns:
        t.add_column(col, justify="left" if not col else "right")
    for name, row in rows.items():
        if "skipped" in row:
            t.add_row(name, f"skipped: {row['skipped']}", *[""] * (len(columns) - 2))
            continue
        cells = [number(row.get(k)) for k in ("p50", "p99", "min", "max")] + [str(row.get("n", ""))]
        if ratio_key:
            cells.append(number(row.get(ratio_key), "{:.2f}x"))
        if note:
            cells.append(note(row))
        t.add_row(name, *cells)
    return t
