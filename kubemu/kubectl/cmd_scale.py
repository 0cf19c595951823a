"""kubemu scale: set the replicas of Deployments and ReplicaSets, as kubectl scale does."""
from __future__ import annotations

import click

from kubemu.apiclient import WireError

from .options import GoCommand, namespace_option
from .output import object_name
from .session import CommandError, connect, handle_errors, is_connection_error, server_error
from .targets import namespace_of, parse_targets


@click.command("scale", cls=GoCommand)
@click.argument("args", nargs=-1, required=True)
@namespace_option
@click.option("--replicas", type=int, required=True, help="the number of replicas wanted")
@click.option("--current-replicas", type=int, default=-1, help="only if it has this many now")
@click.option("--resource-version", default="", help="only if it is still at this version")
@click.pass_obj
@handle_errors
def scale(obj, args, namespace, replicas, current_replicas, resource_version) -> None:
    """Set the replicas of a Deployment or ReplicaSet (kubectl scale).

    \b
    kubemu scale deployment/web --replicas=3
    kubemu scale rs web-5d4f8 --replicas=0
    """
    if replicas < 0:
        raise CommandError("The --replicas=COUNT flag is required, and COUNT must be greater than or equal to 0")
    errors = []
    with connect(obj) as api:
        for t in parse_targets(args):
            if not t.names:
                raise CommandError("resource(s) were provided, but no name was specified")
            ns = namespace_of(t.resource, namespace)
            for name in t.names:
                try:
                    version = resource_version
                    if current_replicas >= 0:
                        current = api.get_scale(t.resource.plural, name, ns)
                        if current["spec"]["replicas"] != current_replicas:
                            raise CommandError(f"Expected replicas to be {current_replicas}, "
                                               f"was {current['spec']['replicas']}")
                        version = version or current["metadata"].get("resourceVersion", "")
                    api.update_scale(t.resource.plural, name, replicas, ns, resource_version=version or None)
                except CommandError as err:
                    errors.append(f"error: {err}")
                    continue
                except WireError as err:
                    if is_connection_error(err):
                        raise
                    errors.append(server_error(err))
                    continue
                click.echo(f"{object_name(t.resource, name)} scaled")
    for message in errors:
        click.echo(message, err=True)
    if errors:
        raise SystemExit(1)
