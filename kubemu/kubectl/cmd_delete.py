"""kubemu delete: by TYPE NAME..., TYPE/NAME, selector, --all or -f; then, like kubectl,
wait until the objects are really gone (a pod first terminates gracefully)."""
from __future__ import annotations

import click

from kubemu.api.resources import Resource
from kubemu.apiclient import Expired, NotFound, SyncApiClient, WireError

from .cmd_apply import manifest_namespace, read_manifests, recursive_option
from .durations import Duration
from .options import GoCommand, namespace_option
from .output import qualified_kind, plural_name
from .session import CommandError, Deadline, connect, follow, handle_errors, is_connection_error, report_errors, \
    server_error
from .targets import namespace_of, parse_targets

POLICIES = {"background": "Background", "foreground": "Foreground", "orphan": "Orphan",
            "true": "Background", "false": "Orphan"}  # true/false: kubectl's deprecated spellings
WAIT_MARGIN = 60.0  # the default wait: the grace period, and this much more
FORCE_WARNING = ("Warning: Immediate deletion does not wait for confirmation that the running resource has been "
                 "terminated. The resource may continue to run on the cluster indefinitely.")


def grace_seconds(grace_period: int, force: bool, now: bool) -> int | None:
    """The grace period to ask for (None: the object's own), as kubectl reads its flags:
    --grace-period=0 means 1 unless --force (immediate deletion must be asked for twice)."""
    if now:
        return 1
    if force:
        return 0 if grace_period < 0 else grace_period
    if grace_period < 0:
        return None
    return grace_period or 1


def _doomed(api: SyncApiClient, args: tuple[str, ...], filenames: tuple[str, ...], recursive: bool,
            namespace: str | None, selector: str, everything: bool, errors: list
            ) -> list[tuple[Resource, str | None, str]]:
    """(resource, namespace, name) of every object to delete; a manifest that cannot be read
    or mapped adds its error to `errors` (the others are still deleted, as by kubectl)."""
    if filenames:
        if args:
            raise CommandError("when paths, URLs, or stdin is provided as input, you may not specify "
                               "a resource by arguments as well")
        items, unread = read_manifests(filenames, recursive)
        errors.extend(unread)
        return [(r, manifest_namespace(m, r, namespace), m.name) for m, r in items]
    out = []
    for t in parse_targets(args):
        ns = namespace_of(t.resource, namespace)
        if t.names:
            if selector or everything:
                raise CommandError("name cannot be provided when a selector is specified")
            out += [(t.resource, ns, name) for name in t.names]
        elif selector or everything:
            listing = api.list_all(t.resource.plural, ns, selector)
            out += [(t.resource, ns, o["metadata"]["name"]) for o in listing["items"]]
        else:
            raise CommandError("resource(s) were provided, but no name was specified")
    return out


@click.command("delete", cls=GoCommand)
@click.argument("args", nargs=-1)
@click.option("-f", "--filename", "filenames", multiple=True, help="delete the objects of these manifests")
@recursive_option
@namespace_option
@click.option("-l", "--selector", default="", help="delete the objects with these labels")
@click.option("--all", "everything", is_flag=True, help="delete every object of the type in the namespace")
@click.option("--grace-period", type=int, default=-1, help="seconds a pod gets to stop (-1: its own)")
@click.option("--force", is_flag=True, help="with --grace-period=0: remove at once, without waiting")
@click.option("--now", is_flag=True, help="a grace period of 1 second")
@click.option("--cascade", type=click.Choice(list(POLICIES)), default="background",
              help="what happens to the objects it owns")
@click.option("--wait/--no-wait", default=True, help="wait until the objects are gone")
@click.option("--timeout", type=Duration(), default=0.0,
              help="how long to wait (0: the grace period and 60 s more)")
@click.option("--ignore-not-found", is_flag=True, help="an object that does not exist is no error")
@click.pass_obj
@handle_errors
def delete(obj, args, filenames, recursive, namespace, selector, everything, grace_period, force, now, cascade,
           wait, timeout, ignore_not_found) -> None:
    """Delete objects, as `kubectl delete` does.

    \b
    kubemu delete pod web
    kubemu delete deployment/web --cascade=foreground
    kubemu delete -f app.yaml
    """
    grace = grace_seconds(grace_period, force, now)
    if force:
        click.echo(FORCE_WARNING, err=True)
    verb = "force deleted" if force and grace == 0 else "deleted"
    errors, deleted = [], []
    with connect(obj) as api:
        doomed = _doomed(api, args, filenames, recursive, namespace, selector, everything, errors)
        if not doomed and (selector or everything):
            click.echo("No resources found", err=True)
        for r, ns, name in doomed:
            try:
                last = api.delete(r.plural, name, ns, grace_period_seconds=grace,
                                  propagation_policy=POLICIES[cascade])
            except WireError as err:
                if is_connection_error(err):
                    raise
                if not (ignore_not_found and isinstance(err, NotFound)):
                    errors.append(server_error(err))
                continue
            click.echo(f'{qualified_kind(r)} "{name}" {verb}')
            deleted.append((r, ns, last))
        if wait and not (force and grace == 0):
            for r, ns, last in deleted:
                seconds = timeout or (last["metadata"].get("deletionGracePeriodSeconds") or 0) + WAIT_MARGIN
                if not wait_until_gone(api, r, ns, last, Deadline(seconds)):
                    errors.append(CommandError(f"timed out waiting for the condition on {plural_name(r)}/"
                                               f"{last['metadata']['name']}"))
    report_errors(errors)


def wait_until_gone(api: SyncApiClient, r: Resource, ns: str | None, last: dict, deadline: Deadline) -> bool:
    """Whether the object (this very one: same uid) is gone before the deadline. `last` is
    what the delete returned: without a deletionTimestamp the delete removed it at once."""
    meta = last["metadata"]
    if not meta.get("deletionTimestamp"):
        return True
    rv = str(meta.get("resourceVersion") or "")
    while not deadline.passed():
        try:
            for type_, obj in follow(api, r.plural, ns, rv, field_selector=f"metadata.name={meta['name']}",
                                     deadline=deadline):
                if type_ == "DELETED" or (obj.get("metadata") or {}).get("uid") != meta.get("uid"):
                    return True
            return False
        except Expired:  # too far behind to resume: look again
            try:
                current = api.get(r.plural, meta["name"], ns)
            except NotFound:
                return True
            if current["metadata"].get("uid") != meta.get("uid"):
                return True
            rv = str(current["metadata"].get("resourceVersion") or "")
    return False
