"""What a request asks to do (authorizer.Attributes) and how a refusal is worded.

The attributes are built once per request by its transport and handed to the authorizer
(RBAC, `kubemu.api.rbac`); the refusal's wording is kube-apiserver's `forbiddenMessage`, which
kubectl prints as it comes:

    pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "default"
    pods "web" is forbidden: User "jane" cannot get resource "pods/log" in API group "" in the namespace "default"
    nodes is forbidden: User "jane" cannot list resource "nodes" in API group "" at the cluster scope
    forbidden: User "jane" cannot get path "/metrics"
"""
from __future__ import annotations

from dataclasses import dataclass

from .identity import UserInfo

# The verbs of resource requests, as RBAC rules name them.
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class Attributes:
    user: UserInfo
    verb: str                   # a resource verb above (or e.g. "impersonate"), or an HTTP verb in lower case for paths
    resource_request: bool = True
    api_group: str = ""         # "" is the core group
    api_version: str = ""
    resource: str = ""          # plural: "pods"
    subresource: str = ""       # "log", "status", "scale", ...
    namespace: str = ""
    name: str = ""
    path: str = ""              # the request path (what non-resource rules match)


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""            # why: the binding that allowed, or what is missing


def forbidden_message(a: Attributes, reason: str = "") -> str:
    """The Status message of a 403, as kube-apiserver words it."""
    user = f'User "{a.user.name}"'
    if not a.resource_request:
        text = f'forbidden: {user} cannot {a.verb} path "{a.path}"'
    else:
        resource = a.resource + (f"/{a.subresource}" if a.subresource else "")
        scope = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
        what = f'{user} cannot {a.verb} resource "{resource}" in API group "{a.api_group}" {scope}'
        qualified = a.resource + (f".{a.api_group}" if a.api_group else "")
        subject = f'{qualified} "{a.name}"' if a.name else qualified
        text = f"{subject} is forbidden: {what}"
    return f"{text}: {reason}" if reason else text
