"""Which objects a command is about, from kubectl's arguments:

    TYPE [NAME...]          pods web db         (TYPE: kind, plural, singular or short name)
    TYPE1,TYPE2 [NAME...]   deploy,rs
    TYPE/NAME...            deployment/web pod/db
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kubemu.api.resources import Resource, resolve

from .session import CommandError

DEFAULT_NAMESPACE = "default"


@dataclass
class Target:
    resource: Resource
    names: list[str] = field(default_factory=list)  # empty: every object


def parse_targets(args: tuple[str, ...] | list[str]) -> list[Target]:
    if not args:
        raise CommandError("Required resource not specified.")
    if any("/" in a for a in args):
        if not all("/" in a for a in args):
            raise CommandError("there is no need to specify a resource type as a separate argument when "
                               "passing arguments in resource/name form (e.g. 'kubemu get resource/<resource_name>' "
                               "instead of 'kubemu get resource resource/<resource_name>'")
        targets: list[Target] = []
        for arg in args:
            kind, _, name = arg.partition("/")
            if not name:
                raise CommandError("arguments in resource/name form must have a single resource and name")
            r = resolve(kind)
            if targets and targets[-1].resource == r:
                targets[-1].names.append(name)
            else:
                targets.append(Target(r, [name]))
        return targets
    return [Target(resolve(kind), list(args[1:])) for kind in args[0].split(",") if kind]


def one_target(args: tuple[str, ...], verb: str) -> tuple[Resource, str]:
    """The single TYPE NAME or TYPE/NAME of scale and rollout."""
    targets = parse_targets(args)
    if len(targets) != 1 or len(targets[0].names) != 1:
        raise CommandError(f"{verb} takes exactly one resource: TYPE NAME or TYPE/NAME")
    return targets[0].resource, targets[0].names[0]


def namespace_of(r: Resource, namespace: str | None) -> str | None:
    """The namespace to send: none for cluster-scoped resources, else -n or `default`."""
    return (namespace or DEFAULT_NAMESPACE) if r.namespaced else None
