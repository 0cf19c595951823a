"""kubemu describe: kubectl describe's sections, ending with the object's events."""
from __future__ import annotations

import time

import click

from kubemu.api.meta import format_selector
from kubemu.api.resources import Resource
from kubemu.apiclient import NotFound, SyncApiClient

from .cmd_get import no_resources_message
from .describe import Related, describe
from .describe_service import SERVICE_NAME_LABEL
from .options import GoCommand, all_namespaces_option, namespace_option
from .session import CommandError, connect, handle_errors, server_error
from .targets import namespace_of, parse_targets

LEASE_NAMESPACE = "kube-node-lease"


def event_selector(obj: dict, with_uid: bool = True) -> str:
    """The field selector of an object's events (kubectl's searchEvents)."""
    meta, kind = obj.get("metadata") or {}, obj.get("kind") or ""
    terms = [f"involvedObject.kind={kind}", f"involvedObject.name={meta.get('name', '')}"]
    if meta.get("namespace"):
        terms.append(f"involvedObject.namespace={meta['namespace']}")
    if with_uid and meta.get("uid"):
        terms.append(f"involvedObject.uid={meta['uid']}")
    return ",".join(terms)


def related_objects(api: SyncApiClient, r: Resource, obj: dict) -> Related:
    """Everything the describer of this kind shows beside the object."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or None
    if r.kind == "Node":
        # the kubelet records node events with the node's name as uid, controllers with its uid
        events = [e for e in api.list_all("events", None, field_selector=event_selector(obj, with_uid=False))["items"]
                  if (e.get("involvedObject") or {}).get("uid") in (None, "", meta.get("uid"), meta.get("name"))]
    else:
        events = api.list_all("events", ns, field_selector=event_selector(obj))["items"]
    related = Related(events=events)
    if r.kind == "Node":
        pods = api.list_all("pods", None, field_selector=f"spec.nodeName={meta.get('name', '')}")["items"]
        related.pods = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        try:
            related.lease = api.get("leases", meta.get("name", ""), LEASE_NAMESPACE)
        except NotFound:
            pass
    elif r.kind == "Deployment":
        related.replicasets = api.list_all("replicasets", ns)["items"]
    elif r.kind in ("ReplicaSet", "PersistentVolumeClaim"):
        related.pods = api.list_all("pods", ns)["items"]
    elif r.kind in ("StatefulSet", "DaemonSet", "Job"):
        related.pods = api.list_all("pods", ns, format_selector((obj.get("spec") or {}).get("selector")))["items"]
    elif r.kind == "Service":
        related.endpointslices = api.list_all("endpointslices", ns,
                                              f"{SERVICE_NAME_LABEL}={meta.get('name', '')}")["items"]
    return related


def _matching(api: SyncApiClient, r: Resource, ns: str | None, name: str | None) -> list[dict]:
    """The object called `name`, else (as kubectl does) those whose name starts with it;
    every object when no name is given."""
    if name:
        try:
            return [api.get(r.plural, name, ns)]
        except NotFound as err:
            items = [o for o in api.list_all(r.plural, ns)["items"]
                     if (o.get("metadata") or {}).get("name", "").startswith(name)]
            if not items:
                raise err
            return items
    return api.list_all(r.plural, ns)["items"]


@click.command("describe", cls=GoCommand)
@click.argument("args", nargs=-1)
@namespace_option
@all_namespaces_option
@click.option("--show-events/--no-show-events", default=True, help="show the object's events")
@click.pass_obj
@handle_errors
def describe_cmd(obj, args, namespace, all_namespaces, show_events) -> None:
    """Show details of a resource, as `kubectl describe` does.

    \b
    kubemu describe pod web
    kubemu describe deployment/web
    kubemu describe nodes
    """
    targets = parse_targets(args)
    if all_namespaces and any(t.names for t in targets):
        raise CommandError("a resource cannot be retrieved by name across all namespaces")
    texts, errors = [], []
    with connect(obj) as api:
        for t in targets:
            ns = None if all_namespaces else namespace_of(t.resource, namespace)
            for name in t.names or [None]:
                try:
                    found = _matching(api, t.resource, ns, name)
                except NotFound as err:
                    errors.append(server_error(err))
                    continue
                for item in found:
                    related = related_objects(api, t.resource, item)
                    if not show_events:
                        related.events = None
                    texts.append(describe(item, related, time.time()))
    if not texts and not errors:
        click.echo(no_resources_message(targets, namespace, all_namespaces), err=True)
    click.echo("\n\n".join(texts), nl=False)
    for message in errors:
        click.echo(message, err=True)
    if errors:
        raise SystemExit(1)

