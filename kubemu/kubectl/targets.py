"""Which objects a command is about, from kubectl's arguments:

    TYPE [NAME...]          pods web db         (TYPE: kind, plural, singular or short name)
    TYPE1,TYPE2 [NAME...]   deploy,rs
    TYPE/NAME...            deployment/web pod/db
"""
from __future__ import annotations

from dataclasses import dataclass, field

from components.controllers.podutil import is_pod_ready, parse_time, ready_since
from kubemu.api.labels import Selector, selector_from_label_selector
from kubemu.api.resources import RESOURCES, Resource, UnknownResourceError, resolve

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
    return [Target(r, list(args[1:])) for kind in args[0].split(",") if kind for r in expand(kind)]


def category(name: str) -> list[Resource]:
    """The resources of a discovery category (`all`), in the order kubectl lists them on a
    Kubernetes cluster: the core group first, then the other groups, each group's resources
    alphabetically (as the apiserver's discovery serves them)."""
    groups = list(dict.fromkeys(["", *(r.group for r in RESOURCES)]))
    members = [r for r in RESOURCES if name.lower() in r.categories]
    return sorted(members, key=lambda r: (groups.index(r.group), r.plural))


def expand(name: str) -> list[Resource]:
    """The resource a name means, else the members of the category it names."""
    try:
        return [resolve(name)]
    except UnknownResourceError:
        members = category(name)
        if not members:
            raise
        return members


def one_target(args: tuple[str, ...], verb: str) -> tuple[Resource, str]:
    """The single TYPE NAME or TYPE/NAME of scale and rollout."""
    targets = parse_targets(args)
    if len(targets) != 1 or len(targets[0].names) != 1:
        raise CommandError(f"{verb} takes exactly one resource: TYPE NAME or TYPE/NAME")
    return targets[0].resource, targets[0].names[0]


def one_pod_target(arg: str) -> tuple[Resource, str]:
    """`logs`' argument: NAME (a pod) or TYPE/NAME."""
    if "/" not in arg:
        return resolve("pods"), arg
    (target,) = parse_targets((arg,))
    return target.resource, target.names[0]


# Kinds whose pods `logs TYPE/NAME` picks one of (kubectl's SelectorsForObject, the kinds kubemu serves).
SELECTS_PODS = ("Deployment", "ReplicaSet")


def pod_selector(r: Resource, obj: dict) -> Selector:
    """The selector of the pods an object runs (its spec.selector), as kubectl's
    SelectorsForObject finds it; a kind without one is kubectl's error."""
    if r.kind not in SELECTS_PODS:
        go_type = f"*{r.version}.{r.kind}"
        raise CommandError(f"cannot get the logs from {go_type}: selector for {go_type} not implemented")
    try:
        return selector_from_label_selector((obj.get("spec") or {}).get("selector"))
    except ValueError as err:
        raise CommandError(f"invalid label selector: {err}") from None


def logging_order(pod: dict) -> tuple:
    """kubectl's podutils.ByLogging, the order in which `logs TYPE/NAME` prefers pods: on a
    node, then Running (or ended) < Unknown < Pending, ready, ready for longer, more restarts,
    older (an unset time last)."""
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod.get("metadata") or {}
    restarts = max((c.get("restartCount") or 0 for c in status.get("containerStatuses") or []), default=0)
    return (not spec.get("nodeName"), {"Unknown": 1, "Pending": 2}.get(status.get("phase"), 0),
            not is_pod_ready(pod), _time_or_last(ready_since(pod)), -restarts,
            _time_or_last(parse_time(meta.get("creationTimestamp"))))


def _time_or_last(t: float | None) -> tuple[bool, float]:
    return (t is None, t or 0.0)


def namespace_of(r: Resource, namespace: str | None) -> str | None:
    """The namespace to send: none for cluster-scoped resources, else -n or `default`."""
    return (namespace or DEFAULT_NAMESPACE) if r.namespaced else None
