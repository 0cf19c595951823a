"""The token APIs of authentication.k8s.io/v1, written like the wire methods in handlers.py
(keyword parameters, the answer object returned, `kubemu.wire` errors raised):

    tokens = Tokens(api, signer, authenticator)
    await tokens.token_request(name, object, namespace)   serviceaccounts/<name>/token
    await tokens.token_review(object)                     tokenreviews
    await tokens.self_subject_review(object)              selfsubjectreviews (kubectl auth whoami)

TokenRequest, as kube-apiserver's serviceaccount token REST: the ServiceAccount must exist;
spec.audiences default to the API's (the issuer), spec.expirationSeconds to 3600 (at least 600,
at most 2^32); an optional spec.boundObjectRef (a Pod running as this ServiceAccount, or a
Secret) ties the token to that object, whose uid, if given, must be the current one. The answer
is the request with status.token and status.expirationTimestamp.

TokenReview answers with the same Authenticator the requests go through (status.authenticated,
user, audiences, or error). SelfSubjectReview shows the caller (`caller.current`).

`request_parameters` and `review_spec` are the pure parts: the request's checks and defaults.
"""
from __future__ import annotations

import datetime
import time
import uuid
from dataclasses import dataclass
from typing import Any

from kubemu import serviceaccount_token as satoken
from kubemu.api.fielderrors import ValidationError, go_quote, invalid
from kubemu.api.meta import Checker
from kubemu.api.pod import _is_int
from kubemu.wire import BadRequest, Conflict

from . import caller
from .authn import AuthenticationError, Authenticator
from .strategy import invalid as invalid_error

GROUP_VERSION = "authentication.k8s.io/v1"
TOKEN_REQUEST_KIND = "TokenRequest.authentication.k8s.io"   # as its Invalid errors name it


@dataclass(frozen=True)
class RequestParameters:
    audiences: tuple[str, ...]
    expiration_seconds: int
    bound_ref: dict | None   # {kind, apiVersion, name, uid?}


def _rfc3339(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _body(object: Any, kind: str) -> dict:
    """The request object (None: an empty one); its apiVersion and kind, when given, must be
    this API's."""
    if object is None:
        return {}
    if not isinstance(object, dict):
        raise BadRequest("object must be a map", {"field": "object"})
    for field, want in (("apiVersion", GROUP_VERSION), ("kind", kind)):
        if object.get(field) not in (None, "", want):
            raise BadRequest(f"the {field} of the object ({object[field]!r}) does not match "
                             f"{want!r}", {"field": field})
    return object


def request_parameters(name: str, namespace: str, object: Any,
                       default_audiences: tuple[str, ...]) -> RequestParameters:
    """The TokenRequest's audiences, expiration and bound object, defaulted and checked
    (ValidateTokenRequest, and a metadata that must match the ServiceAccount's URL)."""
    req = _body(object, "TokenRequest")
    c = Checker(strict=False)
    c.obj(req, "", "TokenRequest")
    meta = c.obj(req.get("metadata"), "metadata") or {}
    for field, want in (("name", name), ("namespace", namespace)):
        if meta.get(field) not in (None, "", want):
            c.add(invalid(f"metadata.{field}", meta[field],
                          f"must match the service account {field} if specified"))
    spec = c.obj(req.get("spec"), "spec", "TokenRequestSpec") or {}
    seconds = spec.get("expirationSeconds")
    seconds = satoken.DEFAULT_EXPIRATION if seconds is None else seconds
    if _is_int(seconds) and seconds < satoken.MIN_EXPIRATION:
        c.invalid("spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes")
    elif _is_int(seconds) and seconds > satoken.MAX_EXPIRATION:
        c.invalid("spec.expirationSeconds", seconds,
                  "may not specify a duration larger than 2^32 seconds")
    ref = c.obj(spec.get("boundObjectRef"), "spec.boundObjectRef", "BoundObjectReference")
    if c.errors:  # every field has its type from here on
        raise invalid_error(ValidationError(c.errors, kind=TOKEN_REQUEST_KIND, name=name))
    if ref is not None:
        kind, api_version = ref.get("kind") or "", ref.get("apiVersion") or ""
        if api_version != "v1" or kind not in satoken.BOUND_RESOURCES:
            group, _, version = api_version.rpartition("/")
            raise BadRequest(f"cannot bind token to object of type {group}/{version}, Kind={kind}")
    return RequestParameters(tuple(spec.get("audiences") or default_audiences), seconds, ref)


def review_spec(object: Any) -> tuple[str, tuple[str, ...]]:
    """A TokenReview's (token, audiences); the token is required."""
    req = _body(object, "TokenReview")
    c = Checker(strict=False)
    c.obj(req, "", "TokenReview")
    spec = c.obj(req.get("spec"), "spec", "TokenReviewSpec") or {}
    if c.errors:
        raise invalid_error(ValidationError(c.errors, kind="TokenReview.authentication.k8s.io"))
    token = spec.get("token")
    if not token:
        raise BadRequest("token is required for TokenReview in authentication")
    return token, tuple(spec.get("audiences") or ())


class Tokens:
    def __init__(self, api, signer: satoken.Signer, authenticator: Authenticator, *,
                 clock=time.time):
        self.api = api
        self.signer = signer
        self.authenticator = authenticator
        self.clock = clock

    async def token_request(self, name: str, object: Any = None,
                            namespace: str | None = None) -> dict:
        namespace = namespace or "default"
        params = request_parameters(name, namespace, object, (self.signer.issuer,))
        sa = await self.api.get("serviceaccounts", name, namespace)
        bound = await self._bound(name, namespace, params.bound_ref)
        now = self.clock()
        token = self.signer.issue(namespace=namespace, name=name, uid=sa["metadata"]["uid"],
                                  audiences=params.audiences,
                                  expiration_seconds=params.expiration_seconds, now=now,
                                  jti=str(uuid.uuid4()), bound=bound)
        spec = {"audiences": list(params.audiences),
                "expirationSeconds": params.expiration_seconds,
                "boundObjectRef": params.bound_ref}
        return {"apiVersion": GROUP_VERSION, "kind": "TokenRequest",
                "metadata": {"name": name, "namespace": namespace,
                             "creationTimestamp": _rfc3339(now)},
                "spec": spec,
                "status": {"token": token,
                           "expirationTimestamp": _rfc3339(int(now) + params.expiration_seconds)}}

    async def _bound(self, sa_name: str, namespace: str, ref: dict | None) -> satoken.Bound | None:
        """The object a token is bound to, as it is now (NotFound if it is not there)."""
        if ref is None:
            return None
        kind, name = ref["kind"], ref.get("name") or ""
        obj = await self.api.get(satoken.BOUND_RESOURCES[kind], name, namespace)
        if kind == "Pod":
            runs_as = (obj.get("spec") or {}).get("serviceAccountName") or "default"
            if runs_as != sa_name:
                raise BadRequest(f"cannot bind token for serviceaccount {go_quote(sa_name)} to "
                                 "pod running with different serviceaccount name.")
        uid = obj["metadata"]["uid"]
        if ref.get("uid") and ref["uid"] != uid:
            raise Conflict(f"Operation cannot be fulfilled on {kind} {go_quote(name)}: the UID in "
                           f"the bound object reference ({ref['uid']}) does not match the UID in "
                           "record. The object might have been deleted and then recreated",
                           {"reason": "Conflict", "kind": kind, "name": name})
        return satoken.Bound(kind, name, uid)

    async def token_review(self, object: Any) -> dict:
        token, audiences = review_spec(object)
        status: dict = {"user": {}}
        try:
            user, accepted = await self.authenticator.authenticate_token(token, audiences or None)
        except AuthenticationError as err:
            status["error"] = err.message
        else:
            status = {"authenticated": True, "user": user.to_dict(), "audiences": list(accepted)}
        return {"apiVersion": GROUP_VERSION, "kind": "TokenReview",
                "metadata": {"creationTimestamp": _rfc3339(self.clock())},
                "spec": dict(object["spec"]), "status": status}

    async def self_subject_review(self, object: Any = None) -> dict:
        _body(object, "SelfSubjectReview")
        user = caller.current.get()
        if user is None:
            raise BadRequest("no user present on request")
        return {"apiVersion": GROUP_VERSION, "kind": "SelfSubjectReview",
                "metadata": {"creationTimestamp": _rfc3339(self.clock())},
                "status": {"userInfo": user.to_dict()}}
