"""The authorization reviews (authorization.k8s.io/v1): may this user do this?

    reviews = Reviews(rbac_cache)
    await reviews.review("selfsubjectaccessreviews", {"spec": {"resourceAttributes": {...}}})

  * SelfSubjectAccessReview: may the caller (`caller.current`) do what spec.resourceAttributes
    or spec.nonResourceAttributes say (`kubectl auth can-i list pods`);
  * SubjectAccessReview: may spec.user / spec.groups do it (cluster-wide);
  * LocalSubjectAccessReview: the same within the request's namespace (its resourceAttributes
    must name that namespace);
  * SelfSubjectRulesReview: everything the caller may do in spec.namespace
    (`kubectl auth can-i --list`).

Each answers the review it was given with its `status` filled in, as kube-apiserver's
registry/authorization handlers do: {allowed, denied (only when true), reason, evaluationError}
for the access reviews, {resourceRules, nonResourceRules, incomplete, evaluationError} for the
rules review. A malformed review is Invalid with Kubernetes' field messages (`exactly one of
nonResourceAttributes or resourceAttributes must be specified`); the review itself is not
stored. Who may create reviews is the authorizer's business, before this is called
(system:basic-user grants the self reviews to every authenticated user).
"""
from __future__ import annotations

import copy
from typing import Any

from kubemu.api.authz import Attributes
from kubemu.api.fielderrors import FieldError, ValidationError, invalid as invalid_field
from kubemu.api.identity import UserInfo
from kubemu.api.resources import UnknownResourceError, resolve
from kubemu.wire import BadRequest

from . import caller
from .rbaccache import RBACCache
from .strategy import invalid

ACCESS_REVIEWS = ("SelfSubjectAccessReview", "SubjectAccessReview", "LocalSubjectAccessReview")
RULES_REVIEW = "SelfSubjectRulesReview"
RESOURCE_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
NON_RESOURCE_FIELDS = ("path", "verb")


class Reviews:
    def __init__(self, rbac_cache: RBACCache):
        self._rbac = rbac_cache

    async def review(self, resource: str, object: dict, namespace: str | None = None) -> dict:
        """The review `object` (of the review kind `resource`) answered."""
        try:
            r = resolve(resource)
        except UnknownResourceError as err:
            raise BadRequest(str(err), {"field": "resource"}) from None
        if r.kind not in (*ACCESS_REVIEWS, RULES_REVIEW):
            raise BadRequest(f"{r.plural} is not an authorization review", {"field": "resource"})
        review = _review_object(r.kind, r.api_version, object)
        if r.kind == RULES_REVIEW:
            return self._rules_review(review)
        attrs = access_attributes(review, namespace, caller.current_user())
        decision = self._rbac.authorize(attrs)
        status: dict = {"allowed": decision.allowed}
        if decision.reason:
            status["reason"] = decision.reason
        review["status"] = status
        return review

    def _rules_review(self, review: dict) -> dict:
        user = _self(caller.current_user())
        namespace = _dict(review.get("spec")).get("namespace")
        if not isinstance(namespace, str) or not namespace:
            raise BadRequest("no namespace on request", {"field": "spec.namespace"})
        rules = self._rbac.rules_for(user, namespace)
        status: dict = {"resourceRules": rules.resource_rules,
                        "nonResourceRules": rules.non_resource_rules,
                        "incomplete": rules.incomplete}
        if rules.evaluation_error:
            status["evaluationError"] = rules.evaluation_error
        review["status"] = status
        return review


def _review_object(kind: str, api_version: str, obj: Any) -> dict:
    """A copy of the review, its apiVersion and kind filled in (and checked if given)."""
    if not isinstance(obj, dict):
        raise BadRequest("object must be a map", {"field": "object"})
    out = copy.deepcopy(obj)
    for field, want in (("apiVersion", api_version), ("kind", kind)):
        if out.get(field) in (None, ""):
            out[field] = want
        elif out[field] != want:
            raise BadRequest(f"the {field} of the object ({out[field]!r}) does not match the "
                             f"resource ({want!r})", {"field": field})
    if out.get("metadata") is None:
        out["metadata"] = {}
    return out


def _dict(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _self(user: UserInfo | None) -> UserInfo:
    if user is None:
        raise BadRequest("no user present on request")
    return user


def access_attributes(review: dict, namespace: str | None, current: UserInfo | None) -> Attributes:
    """The request a SelfSubject-, Subject- or LocalSubjectAccessReview asks about
    (ValidateSubjectAccessReview & co., then ResourceAttributesFrom / NonResourceAttributesFrom)."""
    kind = review["kind"]
    errors: list[FieldError] = []
    meta = review.get("metadata")
    if not isinstance(meta, dict):
        errors.append(invalid_field("metadata", meta, "must be an object"))
        meta = {}
    spec = review.get("spec")
    if not isinstance(spec, dict):
        spec = {}
        if review.get("spec") is not None:
            errors.append(invalid_field("spec", review.get("spec"), "must be an object"))
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        errors.append(invalid_field("spec.nonResourceAttributes", non_resource,
                                    "cannot be specified in combination with resourceAttributes"))
    if resource is None and non_resource is None:
        errors.append(invalid_field("spec.resourceAttributes", None, "exactly one of "
                                    "nonResourceAttributes or resourceAttributes must be specified"))
    for path, value in (("spec.resourceAttributes", resource),
                        ("spec.nonResourceAttributes", non_resource)):
        if value is not None and not isinstance(value, dict):
            errors.append(invalid_field(path, value, "must be an object"))
    resource = resource if isinstance(resource, dict) else None
    non_resource = non_resource if isinstance(non_resource, dict) else None

    if kind == "SelfSubjectAccessReview":
        user = current
    else:
        user = _subject(spec, errors)
    local_namespace = ""
    if kind == "LocalSubjectAccessReview":
        local_namespace = _local_namespace(meta, namespace)
        if resource is not None and (resource.get("namespace") or "") != local_namespace:
            errors.append(invalid_field("spec.resourceAttributes.namespace",
                                        resource.get("namespace") or "",
                                        "must match metadata.namespace"))
        if non_resource is not None:
            errors.append(invalid_field("spec.nonResourceAttributes", non_resource,
                                        "disallowed on this kind of request"))
    if {k: v for k, v in meta.items() if v not in (None, "", {}, [])
            and k != "managedFields" and not (k == "namespace" and local_namespace)}:
        errors.append(invalid_field("metadata", meta, "must be empty except for namespace"
                                    if kind == "LocalSubjectAccessReview" else "must be empty"))
    given = {}  # the attributes' strings ("" when absent)
    for attrs_path, attrs, fields in (("spec.resourceAttributes", resource, RESOURCE_FIELDS),
                                      ("spec.nonResourceAttributes", non_resource,
                                       NON_RESOURCE_FIELDS)):
        for field in fields if attrs is not None else ():
            value = attrs.get(field)
            if value is not None and not isinstance(value, str):
                errors.append(invalid_field(f"{attrs_path}.{field}", value, "must be a string"))
            given[field] = value if isinstance(value, str) else ""
    if errors:
        raise invalid(ValidationError(errors, kind=f"{kind}.authorization.k8s.io", name=""))
    user = _self(user)
    if resource is not None:  # ResourceAttributesFrom: no version is every version
        return Attributes(user, given["verb"], True, given["group"], given["version"] or "*",
                          given["resource"], given["subresource"], given["namespace"],
                          given["name"])
    return Attributes(user, given["verb"], False, path=given["path"])


def _subject(spec: dict, errors: list[FieldError]) -> UserInfo | None:
    """The user a (Local)SubjectAccessReview asks about: spec.user, groups, uid, extra, taken
    as given (no system:authenticated is added)."""
    name, groups, uid = spec.get("user") or "", spec.get("groups") or [], spec.get("uid") or ""
    extra = spec.get("extra") or {}
    if not isinstance(name, str):
        errors.append(invalid_field("spec.user", name, "must be a string"))
        name = ""
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        errors.append(invalid_field("spec.groups", groups, "must be a list of strings"))
        groups = []
    if not isinstance(uid, str):
        errors.append(invalid_field("spec.uid", uid, "must be a string"))
        uid = ""
    if not isinstance(extra, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(s, str) for s in v)
            for k, v in extra.items()):
        errors.append(invalid_field("spec.extra", extra, "must be a map of lists of strings"))
        extra = {}
    if not name and not groups:
        errors.append(invalid_field("spec.user", name, "at least one of user or group must be "
                                                       "specified"))
        return None
    return UserInfo(name, tuple(groups), uid, {k: tuple(v) for k, v in extra.items()})


def _local_namespace(meta: dict, namespace: str | None) -> str:
    given = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
    if namespace and given and given != namespace:
        raise BadRequest("the namespace of the provided object does not match the namespace "
                         "sent on the request", {"field": "metadata.namespace"})
    ns = namespace or given
    if not ns:
        raise BadRequest("namespace is required on this type: ", {"field": "namespace"})
    meta["namespace"] = ns
    return ns


__all__ = ["Reviews", "access_attributes"]
