"""kubemu apply -f / create -f: objects from manifests, kubectl's way.

Every manifest is read (and its kind mapped) before anything is sent. As kubectl does, each
object that can be read and mapped is then handled on its own, whatever became of the others
(a document of a kind kubemu does not serve, or a file that does not parse, is an error of its
own): successes print as they happen (`deployment.apps/web created|configured|unchanged`),
errors are printed after them (`report_errors`) and make the exit status 1.
"""
from __future__ import annotations

import sys

import click

from kubemu.api.resources import Resource
from kubemu.apiclient import NotFound, SyncApiClient, WireError

from .apply import LAST_APPLIED, PATCH_TYPE, apply_patch, with_last_applied
from .manifests import Manifest, load
from .options import GoCommand, namespace_option
from .output import object_name, plural_name
from .session import CommandError, connect, handle_errors, is_connection_error, report_errors, server_error
from .targets import DEFAULT_NAMESPACE

filename_option = click.option("-f", "--filename", "filenames", multiple=True, required=True,
                               help="a manifest file, a directory of them, or - for stdin")
recursive_option = click.option("-R", "--recursive", is_flag=True, help="read directories recursively")


def read_manifests(filenames: tuple[str, ...], recursive: bool
                   ) -> tuple[list[tuple[Manifest, Resource]], list[CommandError]]:
    """The objects of the manifests with the resource serving each, and the errors of the files
    and documents that could not be read or mapped."""
    manifests, errors = load(list(filenames), recursive, sys.stdin.buffer.read)
    items = []
    for m in manifests:
        try:
            items.append((m, m.resource()))
        except CommandError as err:
            errors.append(err)
    return items, errors


def manifest_namespace(m: Manifest, r: Resource, namespace: str | None) -> str | None:
    """The manifest's namespace, else -n, else default; -n may not contradict the manifest."""
    if not r.namespaced:
        return None
    if m.namespace and namespace and m.namespace != namespace:
        raise CommandError(f'the namespace from the provided object "{m.namespace}" does not match the namespace '
                           f'"{namespace}". You must pass \'--namespace={m.namespace}\' to perform this operation.')
    return m.namespace or namespace or DEFAULT_NAMESPACE


def for_each(api: SyncApiClient, items: list[tuple[Manifest, Resource]], errors: list, namespace: str | None,
             command: str, action) -> None:
    """`command` (apply, create): run `action(manifest, resource, ns)` on every object, printing
    what it returns; then the errors of reading (`errors`) and of each object, with its source
    file (exit 1 if any)."""
    if not items and not errors:
        raise CommandError(f"no objects passed to {command}")
    verb = command.removesuffix("e") + "ing"  # error when applying|creating "FILE": ...
    errors = list(errors)
    for m, r in items:
        try:
            ns = manifest_namespace(m, r, namespace)
            click.echo(action(m, r, ns))
        except CommandError as err:
            errors.append(err)
        except WireError as err:
            if is_connection_error(err):
                raise
            errors.append(server_error(err, verb, m.source))
    report_errors(errors)


def _require_name(m: Manifest, r: Resource, ns: str | None) -> None:
    if not m.name:
        raise CommandError(f'error when retrieving current configuration of:\nResource: "{r.api_version}, '
                           f'Resource={r.plural}", GroupVersionKind: "{r.api_version}, Kind={r.kind}"\n'
                           f'Name: "", Namespace: "{ns or ""}"\nfrom server for: "{m.source}": '
                           "resource name may not be empty")


@click.command("apply", cls=GoCommand)
@filename_option
@recursive_option
@namespace_option
@click.pass_obj
@handle_errors
def apply(obj, filenames, recursive, namespace) -> None:
    """Create objects, or bring them in line with their manifests, as `kubectl apply` does.

    Fields removed from a manifest since the last apply are removed from the object; fields
    set by others are kept (three-way merge over the last-applied-configuration annotation).
    """
    items, errors = read_manifests(filenames, recursive)
    with connect(obj) as api:
        def apply_one(m: Manifest, r: Resource, ns: str | None) -> str:
            _require_name(m, r, ns)
            name = object_name(r, m.name)
            try:
                current = api.get(r.plural, m.name, ns)
            except NotFound:
                api.create(r.plural, with_last_applied(m.obj), ns)
                return f"{name} created"
            if LAST_APPLIED not in ((current.get("metadata") or {}).get("annotations") or {}):
                click.echo(f"Warning: resource {plural_name(r)}/{m.name} is missing the {LAST_APPLIED} annotation "
                           "which is required by kubemu apply. kubemu apply should only be used on resources "
                           "created declaratively by either kubemu create --save-config or kubemu apply. "
                           "The missing annotation will be patched automatically.", err=True)
            patch = apply_patch(m.obj, current)
            if not patch:
                return f"{name} unchanged"
            api.patch(r.plural, m.name, patch, ns, patch_type=PATCH_TYPE)
            return f"{name} configured"

        for_each(api, items, errors, namespace, "apply", apply_one)


@click.command("create", cls=GoCommand)
@filename_option
@recursive_option
@namespace_option
@click.option("--save-config", is_flag=True, help="record the manifest for later `kubemu apply`")
@click.pass_obj
@handle_errors
def create(obj, filenames, recursive, namespace, save_config) -> None:
    """Create objects from manifests, as `kubectl create -f` does (an existing one is an error)."""
    items, errors = read_manifests(filenames, recursive)
    with connect(obj) as api:
        def create_one(m: Manifest, r: Resource, ns: str | None) -> str:
            created = api.create(r.plural, with_last_applied(m.obj) if save_config else m.obj, ns)
            return f"{object_name(r, created['metadata']['name'])} created"

        for_each(api, items, errors, namespace, "create", create_one)
