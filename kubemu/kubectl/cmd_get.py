"""kubemu get: kubectl get's tables, -o json|yaml|name|wide, selectors and -w."""
from __future__ import annotations

import time

import click

from kubemu.api.resources import Resource
from kubemu.apiclient import SyncApiClient, WireError

from .options import GoCommand, all_namespaces_option, namespace_option, watch_timeout_option
from .output import OUTPUTS, Printer, as_list
from .session import CommandError, Deadline, connect, follow, handle_errors, is_connection_error, server_error
from .targets import DEFAULT_NAMESPACE, Target, namespace_of, parse_targets

def no_resources_message(targets: list[Target], namespace: str | None, all_namespaces: bool) -> str:
    if all_namespaces or not any(t.resource.namespaced for t in targets):
        return "No resources found"
    return f"No resources found in {namespace or DEFAULT_NAMESPACE} namespace."


@click.command("get", cls=GoCommand)
@click.argument("args", nargs=-1)
@namespace_option
@all_namespaces_option
@click.option("-l", "--selector", default="", help="label selector, e.g. app=web,tier!=db")
@click.option("--field-selector", default="", help="field selector, e.g. status.phase=Running")
@click.option("-o", "--output", type=click.Choice(OUTPUTS), default=None, help="output format")
@click.option("-w", "--watch", is_flag=True, help="after listing, print a row for every change")
@click.option("--watch-only", is_flag=True, help="print a row for every change, without listing first")
@click.option("--show-labels", is_flag=True, help="add a LABELS column")
@click.option("--no-headers", is_flag=True, help="leave out the header row")
@watch_timeout_option
@click.pass_obj
@handle_errors
def get(obj, args, namespace, all_namespaces, selector, field_selector, output, watch, watch_only, show_labels,
        no_headers, watch_timeout) -> None:
    """Display one or many resources, as `kubectl get` does.

    \b
    kubemu get pods
    kubemu get deploy web -o yaml
    kubemu get pods -A -o wide -l app=web
    kubemu get pods -w
    """
    targets = parse_targets(args)
    named = [name for t in targets for name in t.names]
    if named and all_namespaces:
        raise CommandError("a resource cannot be retrieved by name across all namespaces")
    if named and (selector or field_selector):
        raise CommandError("name cannot be provided when a selector is specified")
    watching = watch or watch_only
    if watching and len(targets) > 1:
        raise CommandError("you may only specify a single resource type")
    if watching and len(named) > 1:
        raise CommandError("watch is only supported on individual resources and resource collections, "
                           f"but {len(named)} resources were found")
    printer = Printer(output, all_namespaces=all_namespaces, with_kind=len(targets) > 1,
                      show_labels=show_labels, no_headers=no_headers)
    with connect(obj) as api:
        found, errors = [], []
        for t in targets:
            ns = None if all_namespaces else namespace_of(t.resource, namespace)
            found.append((t.resource, ns, *_fetch(api, t, ns, selector, field_selector, errors)))
        if not watch_only:
            _print_found(printer, found, single=len(named) == 1)
            if printer.is_table and not errors and not watching and not any(objs for _, _, objs, _ in found):
                click.echo(no_resources_message(targets, namespace, all_namespaces), err=True)
        for message in errors:
            click.echo(message, err=True)
        if errors:
            raise SystemExit(1)
        if watching:
            r, ns, _objs, rv = found[0]
            name_selector = f"metadata.name={named[0]}" if named else field_selector
            _watch(api, printer, r, ns, rv, selector, name_selector, Deadline(watch_timeout))


def _fetch(api: SyncApiClient, t: Target, ns: str | None, selector: str, field_selector: str,
           errors: list[str]) -> tuple[list[dict], str]:
    """The objects (and the version to watch from) of one target; NotFound and the like
    are collected in `errors` (kubectl prints what it found, then the errors)."""
    if not t.names:
        listing = api.list_all(t.resource.plural, ns, selector, field_selector)
        return listing.get("items") or [], str(listing["metadata"]["resourceVersion"])
    objs, rv = [], ""
    for name in t.names:
        try:
            objs.append(api.get(t.resource.plural, name, ns))
        except WireError as err:
            if is_connection_error(err):
                raise
            errors.append(server_error(err))
    if objs:
        rv = str(objs[-1]["metadata"].get("resourceVersion") or "")
    return objs, rv


def _print_found(printer: Printer, found: list, single: bool) -> None:
    now = time.time()
    if printer.is_table or printer.output == "name":
        for r, _, objs, _ in found:
            click.echo(printer.objects(r, objs, now), nl=False)
        return
    items = [o for _, _, objs, _ in found for o in objs]
    if single and len(items) == 1:
        click.echo(printer.document(found[0][0], items[0]), nl=False)
    elif not single:
        click.echo(printer.document(found[0][0], as_list(items)), nl=False)


def _watch(api: SyncApiClient, printer: Printer, r: Resource, ns: str | None, rv: str, selector: str,
           field_selector: str, deadline: Deadline) -> None:
    for _type, obj in follow(api, r.plural, ns, rv, selector, field_selector, deadline):
        click.echo(printer.objects(r, [obj], time.time()), nl=False)
