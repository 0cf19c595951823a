"""What a wire request asks to do, as the REST path would say it: (user, method, params) ->
`kubemu.api.authz.Attributes`, for the same RBAC rules on both transports. Pure.

    create        create <r>                  get           get <r>
    list          list <r>                    watch         watch <r>
    update        update <r>                  update_status update <r>/status
    patch         patch <r> (or <r>/status)   delete        delete <r>
    delete_collection  deletecollection <r>   bind          create pods/binding
    evict         create pods/eviction        get_scale     get <r>/scale
    update_scale  update <r>/scale            log           get pods/log                token_request create serviceaccounts/token
    update_approval  update <r>/approval      review        create <the review's resource>
    healthz       get /healthz (a non-resource request)

The namespace is the one the request names, else the object's (create, update), else
"default" for a namespaced object request (as the handlers default it); a list or watch
without one is across all namespaces (""), as GET /api/v1/pods is. A request for one Namespace
is in that namespace, as /api/v1/namespaces/<name> is. A method not in this
table, or a resource no table knows, gives None: the caller refuses what it cannot name.

The wire identity IS the user name (kubemu._wire_auth); `user_info` gives it its groups: the
admin is in kubeadm:cluster-admins, a kubelet (system:node:<node>) in system:nodes, a
ServiceAccount (system:serviceaccount:<ns>:<name>, e.g. the cluster DNS) in system:serviceaccounts
and system:serviceaccounts:<ns> as its token would put it, everyone in system:authenticated.
"""
from __future__ import annotations

from typing import Any

from kubemu._wire_auth import ADMIN
from kubemu.api.authz import Attributes
from kubemu.api.identity import (ADMIN_GROUP, NODE_PREFIX, NODES, SERVICE_ACCOUNT_PREFIX, UserInfo,
                                 authenticated, service_account_groups)
from kubemu.api.resources import UnknownResourceError, resolve

# method -> (verb, subresource); "" = the resource itself
_RESOURCE_METHODS: dict[str, tuple[str, str]] = {
    "create": ("create", ""), "get": ("get", ""), "list": ("list", ""), "watch": ("watch", ""),
    "update": ("update", ""), "update_status": ("update", "status"), "patch": ("patch", ""),
    "delete": ("delete", ""), "delete_collection": ("deletecollection", ""), "bind": ("create", "binding"),
    "evict": ("create", "eviction"), "get_scale": ("get", "scale"), "update_scale": ("update", "scale"),
    "log": ("get", "log"), "finalize": ("update", "finalize"), "token_request": ("create", "token"),
    "update_approval": ("update", "approval"), "review": ("create", ""),
}
_FIXED_RESOURCE = {"bind": "pods", "evict": "pods", "log": "pods", "token_request": "serviceaccounts"}
_COLLECTION_VERBS = frozenset({"list", "watch", "deletecollection"})
_NON_RESOURCE_METHODS = {"healthz": "/healthz"}


def user_info(identity: str) -> UserInfo:
    """The Kubernetes user an authenticated wire identity is."""
    if identity == ADMIN:
        return authenticated(identity, (ADMIN_GROUP,))
    if identity.startswith(NODE_PREFIX):
        return authenticated(identity, (NODES,))
    namespace, sep, name = identity[len(SERVICE_ACCOUNT_PREFIX):].partition(":")
    if identity.startswith(SERVICE_ACCOUNT_PREFIX) and sep and namespace and name and ":" not in name:
        return authenticated(identity, service_account_groups(namespace))
    return authenticated(identity)


def attributes(user: UserInfo, method: str, params: dict) -> Attributes | None:
    """The request's authorization attributes; None if it names nothing authorizable."""
    path = _NON_RESOURCE_METHODS.get(method)
    if path is not None:
        return Attributes(user=user, verb="get", resource_request=False, path=path)
    verb_sub = _RESOURCE_METHODS.get(method)
    if verb_sub is None:
        return None
    verb, subresource = verb_sub
    try:
        r = resolve(_FIXED_RESOURCE.get(method) or params.get("resource"))
    except UnknownResourceError:
        return None
    if method == "patch" and params.get("subresource") in ("status", "approval"):
        subresource = params["subresource"]
    obj = params.get("object")
    meta = obj.get("metadata") if isinstance(obj, dict) and method in ("create", "update", "update_status",
                                                                       "finalize", "update_approval") else None
    meta = meta if isinstance(meta, dict) else {}
    namespace = ""
    if r.namespaced:
        namespace = _text(params.get("namespace")) or _text(meta.get("namespace"))
        if not namespace and verb not in _COLLECTION_VERBS:
            namespace = "default"
    name = "" if verb in _COLLECTION_VERBS or (verb == "create" and not subresource) else (
        _text(params.get("name")) or _text(meta.get("name")))
    if r.kind == "Namespace":
        namespace = name  # /api/v1/namespaces/<name>: RequestInfo's namespace is the name
    return Attributes(user=user, verb=verb, api_group=r.group, api_version=r.version, resource=r.plural,
                      subresource=subresource, namespace=namespace, name=name)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
