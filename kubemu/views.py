"""How the command line shows things: pure functions from status dicts to rich renderables."""
from __future__ import annotations

import calendar
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


def parse_time(stamp: str | None) -> float | None:
    """RFC 3339 UTC as the API writes it (2026-11-21T20:57:40Z) -> epoch seconds."""
    if not stamp:
        return None
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


def container_state(c: dict) -> tuple[str, str]:
    """(text, style) for a containerStatus's state, as `kubectl get pods` words it."""
    state = c.get("state") or {}
    if "running" in state:
        return ("running" + ("" if c.get("ready") else ", not ready")), "green" if c.get("ready") else "yellow"
    if "waiting" in state:
        return state["waiting"].get("reason", "Waiting"), "yellow" if state["waiting"].get("reason") in (
            None, "ContainerCreating", "PodInitializing") else "bold red"
    if "terminated" in state:
        term = state["terminated"]
        return term.get("reason", "Terminated"), "dim" if term.get("exitCode") == 0 else "red"
    return "unknown", ""


def termination(term: dict | None) -> str:
    if not term:
        return ""
    if term.get("signal"):
        return last_exit({"exit_signal": term["signal"]})
    return f"exit {term.get('exitCode')}"


def pod_rows(pods: list[dict], indent: str, now: float | None) -> list[tuple]:
    """Rows for the kubelet's pods and their containers, indented under the kubelet."""
    rows = []
    for i, pod in enumerate(pods):
        last_pod = i == len(pods) - 1
        status = pod.get("status") or {}
        statuses = status.get("initContainerStatuses", []) + status.get("containerStatuses", [])
        app = status.get("containerStatuses", [])
        ready = f"{sum(1 for c in app if c.get('ready'))}/{len(app)}"
        phase = status.get("phase", "Pending")
        meta = pod["metadata"]
        rows.append((f"{indent}{'└─' if last_pod else '├─'} pod {meta['namespace']}/{meta['name']}", "",
                     Text(f"{phase} {ready}", style="green" if phase == "Running" else "yellow"),
                     str(sum(c.get("restartCount", 0) for c in statuses)), "",
                     age(parse_time(status.get("startTime")), now)))
        inner = indent + ("   " if last_pod else "│  ")
        for j, c in enumerate(statuses):
            text, style = container_state(c)
            cid = c.get("containerID", "")
            running = (c.get("state") or {}).get("running") or {}
            rows.append((f"{inner}{'└─' if j == len(statuses) - 1 else '├─'} {c['name']}",
                         cid.removeprefix("process://") or "-", Text(text, style=style), str(c.get("restartCount", 0)),
                         termination((c.get("lastState") or {}).get("terminated")
                                     or (c.get("state") or {}).get("terminated")),
                         age(parse_time(running.get("startedAt")), now)))
    return rows


def ps_table(nodes: list[str], statuses: dict[str, dict | None], now: float | None = None,
             pods: dict[str, list[dict]] | None = None) -> Table:
    """The supervision tree: node -> init -> units (-> the kubelet's pods -> containers), with
    PIDs, states, restarts, last exits and ages."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("NAME", "PID", "STATE", "RESTARTS", "LAST EXIT", "AGE"):
        table.add_column(col, no_wrap=col == "NAME")
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
            if row["name"] == "kubelet.service":
                for cells in pod_rows((pods or {}).get(node, []), "      " if branch == "└─" else "   │  ", now):
                    table.add_row(*cells)
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
