"""kubemu events: kubectl events' table of Events, oldest first, optionally of one object."""
from __future__ import annotations

import time

import click

from kubemu.api.resources import resolve

from .options import GoCommand, all_namespaces_option, namespace_option, watch_timeout_option
from .output import Printer, as_list
from .printers import EVENT_SUMMARY_HEADERS, event_summary_row, sort_events
from .session import CommandError, Deadline, connect, follow, handle_errors
from .tabwriter import GET, TabWriter
from .targets import DEFAULT_NAMESPACE

TYPES = ("Normal", "Warning")


def for_selector(for_object: str | None) -> str:
    """The field selector of `--for KIND/NAME` (involvedObject's kind and name)."""
    if not for_object:
        return ""
    kind, _, name = for_object.partition("/")
    if not name:
        raise CommandError(f"--for must be in resource/name form, not {for_object!r}")
    return f"involvedObject.kind={resolve(kind).kind},involvedObject.name={name}"


def parse_types(types: str) -> set[str]:
    wanted = {t.strip() for t in types.split(",") if t.strip()}
    for t in wanted:
        if t not in TYPES:
            raise CommandError(f"valid --types are {', '.join(TYPES)}")
    return wanted


class EventTable:
    """Rows of kubectl events, with a NAMESPACE column first under -A; the header once."""

    def __init__(self, all_namespaces: bool, no_headers: bool):
        self.all_namespaces = all_namespaces
        self.header_due = not no_headers
        self.writer = TabWriter(**GET, remember_widths=True)

    def text(self, events: list[dict], now: float) -> str:
        lines = []
        if self.header_due and events:
            lines.append((["NAMESPACE"] if self.all_namespaces else []) + EVENT_SUMMARY_HEADERS)
            self.header_due = False
        for e in events:
            ns = [(e.get("metadata") or {}).get("namespace", "")] if self.all_namespaces else []
            lines.append(ns + event_summary_row(e, now))
        return self.writer.format("".join("\t".join(cells) + "\n" for cells in lines)) if lines else ""


@click.command("events", cls=GoCommand)
@namespace_option
@all_namespaces_option
@click.option("--for", "for_object", default=None, help="only the events of this object: KIND/NAME")
@click.option("--types", default="", help="only these types: Normal, Warning (comma-separated)")
@click.option("-w", "--watch", is_flag=True, help="then print events as they come")
@click.option("-o", "--output", type=click.Choice(["json", "yaml"]), default=None, help="output format")
@click.option("--no-headers", is_flag=True, help="leave out the header row")
@watch_timeout_option
@click.pass_obj
@handle_errors
def events(obj, namespace, all_namespaces, for_object, types, watch, output, no_headers, watch_timeout) -> None:
    """List events, oldest first, as `kubectl events` does.

    \b
    kubemu events
    kubemu events -A
    kubemu events --for pod/web -w
    """
    selector = for_selector(for_object)
    wanted = parse_types(types)
    ns = None if all_namespaces else (namespace or DEFAULT_NAMESPACE)
    table = EventTable(all_namespaces, no_headers)
    printer = Printer(output)
    with connect(obj) as api:
        listing = api.list_all("events", ns, field_selector=selector)
        items = sort_events([e for e in listing["items"] if not wanted or e.get("type") in wanted])
        if output:
            click.echo(printer.document(resolve("events"), as_list(items)), nl=False)
        elif items:
            click.echo(table.text(items, time.time()), nl=False)
        elif not watch:
            click.echo("No events found." if all_namespaces else f"No events found in {ns} namespace.", err=True)
        if not watch:
            return
        for type_, event in follow(api, "events", ns, str(listing["metadata"]["resourceVersion"]),
                                   field_selector=selector, deadline=Deadline(watch_timeout)):
            if type_ != "DELETED" and (not wanted or event.get("type") in wanted):
                text = printer.document(resolve("events"), event) if output else table.text([event], time.time())
                click.echo(text, nl=False)
