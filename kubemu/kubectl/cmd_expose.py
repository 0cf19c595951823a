"""kubemu expose: a Service for a Deployment, ReplicaSet, Pod or Service, as kubectl expose makes it."""
from __future__ import annotations

import click

from kubemu.api.resources import resolve
from kubemu.apiclient import WireError

from .expose import ExposeFlags, exposed_service
from .options import GoCommand, namespace_option
from .output import object_name
from .session import CommandError, connect, handle_errors, is_connection_error, report_errors, server_error
from .targets import namespace_of, parse_targets

NO_RESOURCES = ("You must provide one or more resources by argument or filename.\nExample resource specifications "
                "include:\n   '-f rsrc.yaml'\n   '--filename=rsrc.json'\n   '<resource> <name>'\n   '<resource>'")


@click.command("expose", cls=GoCommand)
@click.argument("args", nargs=-1)
@namespace_option
@click.option("--port", default="", help="the port the Service serves on (default: the object's ports)")
@click.option("--target-port", default="", help="the container port (number or name) traffic goes to")
@click.option("--name", default="", help="the Service's name (default: the object's)")
@click.option("--type", "type_", default="", help="ClusterIP (the default), NodePort or LoadBalancer")
@click.option("--protocol", default="", help="TCP (the default), UDP or SCTP")
@click.option("--selector", default="", help="the pods' labels, k=v,... (default: the object's selector)")
@click.option("-l", "--labels", default="", help="the Service's labels (default: the object's)")
@click.option("--external-ip", default="", help="an external IP the Service also accepts")
@click.option("--session-affinity", default="", help="None or ClientIP")
@click.option("--cluster-ip", default="", help="the ClusterIP wanted; None for a headless Service")
@click.option("--load-balancer-ip", default="", help="the IP wanted for a LoadBalancer")
@click.pass_obj
@handle_errors
def expose(obj, args, namespace, port, target_port, name, type_, protocol, selector, labels, external_ip,
           session_affinity, cluster_ip, load_balancer_ip) -> None:
    """Expose a Deployment, ReplicaSet, Pod or Service as a new Service (kubectl expose).

    \b
    kubemu expose deployment web --port=80 --target-port=8000
    kubemu expose pod solo --port=444 --name=frontend
    kubemu expose deploy web --type=NodePort --port=80
    """
    if not args:
        raise CommandError(NO_RESOURCES)
    flags = ExposeFlags(port=port, target_port=target_port, name=name, type=type_, protocol=protocol,
                        selector=selector, labels=labels, external_ip=external_ip,
                        session_affinity=session_affinity, cluster_ip=cluster_ip,
                        load_balancer_ip=load_balancer_ip)
    targets = parse_targets(args)
    if any(not t.names for t in targets):
        raise CommandError("resource(s) were provided, but no name was specified")
    services = resolve("services")
    errors: list = []
    with connect(obj) as api:
        for t in targets:
            ns = namespace_of(t.resource, namespace)
            for target_name in t.names:
                try:
                    found = api.get(t.resource.plural, target_name, ns)
                    created = api.create(services.plural, exposed_service(found, flags), ns)
                except CommandError as err:
                    errors.append(err)
                    continue
                except WireError as err:
                    if is_connection_error(err):
                        raise
                    errors.append(server_error(err))
                    continue
                click.echo(f"{object_name(services, created['metadata']['name'])} exposed")
    report_errors(errors)
