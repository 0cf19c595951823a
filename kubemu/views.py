"""How the command line shows things: pure functions from status dicts to rich renderables."""
from __future__ import annotations

import signal
import time

from rich.table import Table
from rich.text import Text

STATE_STYLE = {"active": "green", "activating": "yellow", "deactivating": "yellow",
               "failed": "bold red", "inactive": "dim"}


def age(since: float | None, now: float | None = None) -> str:
    """kubectl's AGE format: 45s, 3m12s, 5h3m, 2d4h."""
    if since is None:
        return "-"
    secs = max(0, int((now or time.time()) - since))
    if secs < 120:
        return f"{secs}s"
    mins, secs = divmod(secs, 60)
    if mins < 60:
        return f"{mins}m{secs}s" if mins < 10 else f"{mins}m"
    hours, mins = divmod(mins, 60)
    if hours < 24:
        return f"{hours}h{mins}m" if hours < 10 else f"{hours}h"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def unit_state(row: dict) -> str:
    return f"{row['active_state']} ({row['sub_state']})"


def last_exit(row: dict) -> str:
    if row.get("exit_signal"):
        try:
            return signal.Signals(row["exit_signal"]).name
        except ValueError:
            return f"signal {row['exit_signal']}"
    if row.get("exit_code") is not None:
        return f"exit {row['exit_code']}"
    return ""


def ps_table(nodes: list[str], statuses: dict[str, dict | None], now: float | None = None) -> Table:
    """The supervision tree: node -> init -> units, with PIDs, states, restarts, uptime."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("NAME", "PID", "STATE", "RESTARTS", "LAST EXIT", "AGE"):
        table.add_column(col)
    for node in nodes:
        st = statuses.get(node)
        if st is None:
            table.add_row(Text(node, style="bold"), "-", Text("down", style="bold red"), "", "", "")
            continue
        init_state = "stopping" if st.get("shutting_down") else "running"
        table.add_row(Text(node, style="bold"), "", "", "", "", "")
        table.add_row("└─ init", str(st["pid"]), Text(init_state, style="green"), "", "",
                      age(st.get("started_at"), now))
        units = st["units"]
        for i, row in enumerate(units):
            branch = "└─" if i == len(units) - 1 else "├─"
            table.add_row(f"   {branch} {row['name']}", str(row["main_pid"] or "-"),
                          Text(unit_state(row), style=STATE_STYLE.get(row["active_state"], "")),
                          str(row["n_restarts"]), last_exit(row), age(row["since"], now))
    return table


def unit_status_text(row: dict, now: float | None = None) -> str:
    """`systemctl status UNIT`, in systemd's layout."""
    dot = "●" if row["active_state"] in ("active", "activating", "deactivating", "failed") else "○"
    title = f"{dot} {row['name']}" + (f" - {row['description']}" if row.get("description") else "")
    lines = [title, f"     Loaded: {row['load_state']} ({row.get('path', '')})"]
    if row.get("load_error"):
        lines.append(f"      Error: {row['load_error']}")
    active = unit_state(row)
    if row["result"] != "success":
        active += f" (Result: {row['result']})"
    if row.get("since"):
        active += f" since {time.strftime('%a %Y-%m-%d %H:%M:%S', time.localtime(row['since']))}; {age(row['since'], now)} ago"
    lines.append(f"     Active: {active}")
    if row.get("main_pid"):
        lines.append(f"   Main PID: {row['main_pid']}")
    elif last_exit(row):
        lines.append(f"  Last exit: {last_exit(row)}")
    if row.get("status_text"):
        lines.append(f'     Status: "{row["status_text"]}"')
    lines.append(f"   Restarts: {row['n_restarts']}")
    return "\n".join(lines)
