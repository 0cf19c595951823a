"""kubemu rollout status|history|undo, for Deployments, StatefulSets and DaemonSets."""
from __future__ import annotations

import click

from components.controllers.deployment import REVISION, RollbackError, undo
from components.controllers.history import template_of
from components.controllers.podutil import equal_ignore_hash
from kubemu.apiclient import SyncApiClient

from .durations import Duration
from .history import (UndoError, controller_revisions, history_table, revision_template, revisions,
                      rollback_annotations, rollback_target, template_text, undo_revision)
from .options import GoCommand, namespace_option
from .output import object_name
from .rollout_status import VIEWERS as STATUS_VIEWERS
from .session import CommandError, Deadline, connect, follow, handle_errors
from .targets import namespace_of, one_target

VIEWERS = {"status": "status viewer", "history": "history viewer", "undo": "rollbacker"}


def _target(args: tuple[str, ...], namespace: str | None, verb: str):
    r, name = one_target(args, f"rollout {verb}")
    if r.kind not in STATUS_VIEWERS:
        what = f"{r.kind}.{r.group}" if r.group else r.kind
        raise CommandError(f"no {VIEWERS[verb]} has been implemented for {what}")
    return r, name, namespace_of(r, namespace)


@click.group("rollout")
def rollout() -> None:
    """Manage the rollout of a Deployment, StatefulSet or DaemonSet: status, history, undo."""


@rollout.command("status", cls=GoCommand)
@click.argument("args", nargs=-1, required=True)
@namespace_option
@click.option("-w", "--watch/--no-watch", default=True, help="wait until the rollout is done")
@click.option("--timeout", type=Duration(), default=0.0, help="give up after this long (0: never)")
@click.option("--revision", type=int, default=0, help="the revision the rollout must be of")
@click.pass_obj
@handle_errors
def status(obj, args, namespace, watch, timeout, revision) -> None:
    """Show a rollout, until it is done (kubectl rollout status)."""
    r, name, ns = _target(args, namespace, "status")
    with connect(obj) as api:
        current = api.get(r.plural, name, ns)
        if not watch:
            _say(current, revision)
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


def _say(workload: dict, revision: int, unless: str | None = None) -> tuple[str, bool]:
    """Print the rollout's state (unless it is the line printed last); fail when it failed.
    Only a Deployment's revision is checked (kubectl's other viewers ignore --revision)."""
    kind = workload.get("kind") or "Deployment"
    if revision and kind == "Deployment":
        running = ((workload.get("metadata") or {}).get("annotations") or {}).get(REVISION, "")
        if running != str(revision):
            raise CommandError(f"desired revision ({revision}) is different from the running revision ({running})")
    st = STATUS_VIEWERS[kind](workload)
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
    """List the revisions and their change causes (kubectl rollout history)."""
    r, name, ns = _target(args, namespace, "history")
    with connect(obj) as api:
        if r.kind == "Deployment":
            deployment, replicasets = _with_replicasets(api, r.plural, name, ns)
            by_revision = revisions(deployment, replicasets)
            show = revision_template
        else:
            owner, all_revisions = _with_revisions(api, r.plural, name, ns)
            by_revision = controller_revisions(owner, all_revisions)
            show = lambda revision: template_text(template_of(revision))  # noqa: E731
    if revision:
        if revision not in by_revision:
            raise CommandError("unable to find the specified revision")
        click.echo(f"{object_name(r, name)} with revision #{revision}\n{show(by_revision[revision])}")
    else:
        click.echo(f"{object_name(r, name)} \n{history_table(by_revision)}")


def _with_replicasets(api: SyncApiClient, plural: str, name: str, ns: str | None) -> tuple[dict, list[dict]]:
    deployment = api.get(plural, name, ns)
    return deployment, api.list_all("replicasets", ns)["items"]


def _with_revisions(api: SyncApiClient, plural: str, name: str, ns: str | None) -> tuple[dict, list[dict]]:
    owner = api.get(plural, name, ns)
    return owner, api.list_all("controllerrevisions", ns)["items"]


@rollout.command("undo", cls=GoCommand)
@click.argument("args", nargs=-1, required=True)
@namespace_option
@click.option("--to-revision", type=int, default=0, help="the revision to go back to (0: the previous one)")
@click.pass_obj
@handle_errors
def undo_cmd(obj, args, namespace, to_revision) -> None:
    """Go back to an earlier revision's pod template (kubectl rollout undo)."""
    r, name, ns = _target(args, namespace, "undo")
    if r.kind != "Deployment":
        _undo_from_revisions(obj, r, name, ns, to_revision)
        return
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


def _undo_from_revisions(obj, r, name: str, ns: str | None, to_revision: int) -> None:
    """kubectl's StatefulSetRollbacker / DaemonSetRollbacker: the chosen ControllerRevision's
    template becomes the object's."""
    with connect(obj) as api:
        owner, all_revisions = _with_revisions(api, r.plural, name, ns)
        try:
            target = undo_revision(controller_revisions(owner, all_revisions), to_revision)
        except UndoError as err:
            raise CommandError(str(err)) from None
        template = template_of(target)
        if template == (owner.get("spec") or {}).get("template"):
            click.echo(f"{object_name(r, name)} skipped rollback")
            return
        api.patch(r.plural, name, [{"op": "add", "path": "/spec/template", "value": template}], ns,
                  patch_type="json")
    click.echo(f"{object_name(r, name)} rolled back")
