"""kubemu rollout status|history|undo, for Deployments."""
from __future__ import annotations

import click

from components.controllers.deployment import REVISION, RollbackError, rollout_status, undo
from components.controllers.podutil import equal_ignore_hash
from kubemu.apiclient import SyncApiClient

from .durations import Duration
from .history import history_table, revision_template, revisions, rollback_annotations, rollback_target
from .options import GoCommand, namespace_option
from .output import object_name
from .session import CommandError, Deadline, connect, follow, handle_errors
from .targets import namespace_of, one_target

VIEWERS = {"status": "status viewer", "history": "history viewer", "undo": "rollbacker"}


def _deployment(args: tuple[str, ...], namespace: str | None, verb: str):
    r, name = one_target(args, f"rollout {verb}")
    if r.kind != "Deployment":
        what = f"{r.kind}.{r.group}" if r.group else r.kind
        raise CommandError(f"no {VIEWERS[verb]} has been implemented for {what}")
    return r, name, namespace_of(r, namespace)


@click.group("rollout")
def rollout() -> None:
    """Manage the rollout of a Deployment: status, history, undo."""


@rollout.command("status", cls=GoCommand)
@click.argument("args", nargs=-1, required=True)
@namespace_option
@click.option("-w", "--watch/--no-watch", default=True, help="wait until the rollout is done")
@click.option("--timeout", type=Duration(), default=0.0, help="give up after this long (0: never)")
@click.option("--revision", type=int, default=0, help="the revision the rollout must be of")
@click.pass_obj
@handle_errors
def status(obj, args, namespace, watch, timeout, revision) -> None:
    """Show a Deployment's rollout, until it is done (kubectl rollout status)."""
    r, name, ns = _deployment(args, namespace, "status")
    with connect(obj) as api:
        deployment = api.get(r.plural, name, ns)
        if not watch:
            _say(deployment, revision)
            return
        last = None
        for type_, current in follow(api, r.plural, ns, field_selector=f"metadata.name={name}",
                                     deadline=Deadline(timeout or None)):
            if type_ == "DELETED":
                raise CommandError("object has been deleted")
            message, done = _say(current, revision, unless=last)
            last = message
            if done:
                return
    raise CommandError("timed out waiting for the condition")


def _say(deployment: dict, revision: int, unless: str | None = None) -> tuple[str, bool]:
    """Print the rollout's state (unless it is the line printed last); fail when it failed."""
    if revision:
        running = ((deployment.get("metadata") or {}).get("annotations") or {}).get(REVISION, "")
        if running != str(revision):
            raise CommandError(f"desired revision ({revision}) is different from the running revision ({running})")
    st = rollout_status(deployment)
    if st.failed:
        raise CommandError(st.message.removeprefix("error: "))
    if st.message != unless:
        click.echo(st.message)
    return st.message, st.done


@rollout.command("history", cls=GoCommand)
@click.argument("args", nargs=-1, required=True)
@namespace_option
@click.option("--revision", type=int, default=0, help="show this revision's pod template")
@click.pass_obj
@handle_errors
def history(obj, args, namespace, revision) -> None:
    """List a Deployment's revisions and their change causes (kubectl rollout history)."""
    r, name, ns = _deployment(args, namespace, "history")
    with connect(obj) as api:
        deployment, replicasets = _with_replicasets(api, r.plural, name, ns)
    by_revision = revisions(deployment, replicasets)
    if revision:
        if revision not in by_revision:
            raise CommandError("unable to find the specified revision")
        click.echo(f"{object_name(r, name)} with revision #{revision}\n{revision_template(by_revision[revision])}")
    else:
        click.echo(f"{object_name(r, name)} \n{history_table(by_revision)}")


def _with_replicasets(api: SyncApiClient, plural: str, name: str, ns: str | None) -> tuple[dict, list[dict]]:
    deployment = api.get(plural, name, ns)
    return deployment, api.list_all("replicasets", ns)["items"]


@rollout.command("undo", cls=GoCommand)
@click.argument("args", nargs=-1, required=True)
@namespace_option
@click.option("--to-revision", type=int, default=0, help="the revision to go back to (0: the previous one)")
@click.pass_obj
@handle_errors
def undo_cmd(obj, args, namespace, to_revision) -> None:
    """Go back to an earlier revision's pod template (kubectl rollout undo)."""
    r, name, ns = _deployment(args, namespace, "undo")
    with connect(obj) as api:
        deployment, replicasets = _with_replicasets(api, r.plural, name, ns)
        try:
            template = undo(deployment, replicasets, to_revision)
        except RollbackError as err:
            raise CommandError(str(err)) from None
        target = rollback_target(deployment, replicasets, to_revision)
        if equal_ignore_hash(template, (deployment.get("spec") or {}).get("template") or {}):
            click.echo(f"{object_name(r, name)} skipped rollback (current template already matches revision "
                       f"{(target['metadata'].get('annotations') or {}).get(REVISION, to_revision)})")
            return
        # "add" replaces an existing member and, unlike "replace", also works where there is none
        patch = [{"op": "add", "path": "/spec/template", "value": template},
                 {"op": "add", "path": "/metadata/annotations", "value": rollback_annotations(deployment, target)}]
        api.patch(r.plural, name, patch, ns, patch_type="json")
    click.echo(f"{object_name(r, name)} rolled back")
