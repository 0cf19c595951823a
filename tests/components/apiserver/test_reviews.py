"""components.apiserver.reviews: the authorization reviews kubectl auth can-i sends, answered
as kube-apiserver answers them (on the in-memory storage, with the default policy)."""
from __future__ import annotations

import asyncio
import copy

import pytest

from components.apiserver import caller
from components.apiserver.memstorage import MemStorage
from components.apiserver.rbaccache import RBACCache
from components.apiserver.reviews import Reviews
from components.apiserver.storage import encode
from components.apiserver.watchcache import WatchCache
from kubemu import wire
from kubemu.api.bootstrap_policy import bootstrap_objects
from kubemu.api.identity import authenticated
from kubemu.api.resources import for_object, registry_key
from tests.conftest import DEADLINE

GROUP = "rbac.authorization.k8s.io"
JANE = authenticated("jane")
VIEW_FOR_JANE = {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding",
                 "metadata": {"name": "jane-views", "namespace": "team"},
                 "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
                 "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "jane"}]}
MISSING_ROLE = {"apiVersion": f"{GROUP}/v1", "kind": "RoleBinding",
                "metadata": {"name": "ghost", "namespace": "team"},
                "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "gone"},
                "subjects": [{"kind": "User", "apiGroup": GROUP, "name": "jane"}]}


def run(test, *, as_user=JANE):
    """Run `test(reviews)` with the default policy plus VIEW_FOR_JANE, as `as_user`."""
    async def main():
        storage = MemStorage()
        for obj in bootstrap_objects() + [VIEW_FOR_JANE, MISSING_ROLE]:
            meta = obj["metadata"]
            await storage.create(registry_key(for_object(obj), meta.get("namespace"), meta["name"]),
                                 encode(obj))
        cache = WatchCache(storage.client)
        rbac_cache = RBACCache(cache)
        await rbac_cache.start()
        try:
            await asyncio.wait_for(rbac_cache.wait_synced(), DEADLINE)
            caller.current.set(as_user)
            return await asyncio.wait_for(test(Reviews(rbac_cache)), DEADLINE)
        finally:
            await rbac_cache.close()
            await cache.close()
    return asyncio.run(main())


def resource_review(verb, resource, namespace="", **more):
    attrs = {"verb": verb, "resource": resource, **({"namespace": namespace} if namespace else {}),
             **more}
    # as kubectl auth can-i sends it
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": {"resourceAttributes": attrs},
            "status": {"allowed": False}}


def test_self_subject_access_review_answers_for_the_caller():
    async def body(reviews):
        can = await reviews.review("selfsubjectaccessreviews",
                                   resource_review("list", "pods", "team"))
        cannot = await reviews.review("selfsubjectaccessreviews",
                                      resource_review("create", "pods", "team"))
        elsewhere = await reviews.review("selfsubjectaccessreviews",
                                         resource_review("list", "pods", "default"))
        scale = await reviews.review("selfsubjectaccessreviews", resource_review(
            "get", "deployments", "team", group="apps", subresource="scale", name="web"))
        return can, cannot, elsewhere, scale
    can, cannot, elsewhere, scale = run(body)
    assert can["status"] == {"allowed": True, "reason": 'RBAC: allowed by RoleBinding '
                             '"jane-views/team" of ClusterRole "view" to User "jane"'}
    assert can["kind"] == "SelfSubjectAccessReview"
    assert can["spec"] == resource_review("list", "pods", "team")["spec"]
    # the missing Role of a binding in that namespace is the reason of a refusal, as in Kubernetes
    assert cannot["status"] == {"allowed": False, "reason":
                                'RBAC: role.rbac.authorization.k8s.io "gone" not found'}
    assert elsewhere["status"] == {"allowed": False}
    assert scale["status"]["allowed"] is True


def test_self_subject_access_review_of_a_path():
    async def body(reviews):
        review = {"spec": {"nonResourceAttributes": {"verb": "get", "path": "/healthz"}}}
        health = await reviews.review("selfsubjectaccessreviews", review)
        metrics = await reviews.review("selfsubjectaccessreviews", {
            "spec": {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}})
        return review, health, metrics
    given, health, metrics = run(body)
    assert health["status"]["allowed"] is True
    assert health["apiVersion"] == "authorization.k8s.io/v1"
    assert given == {"spec": {"nonResourceAttributes": {"verb": "get", "path": "/healthz"}}}
    assert metrics["status"] == {"allowed": False}


def test_subject_access_review_asks_about_the_user_and_groups_given():
    async def body(reviews):
        def sar(**spec):
            return reviews.review("subjectaccessreviews", {"spec": spec})
        jane = await sar(user="jane", resourceAttributes={"verb": "watch", "resource": "pods",
                                                          "namespace": "team"})
        group = await sar(groups=["system:masters"], resourceAttributes={"verb": "delete",
                                                                         "resource": "nodes"})
        scheduler = await sar(user="system:kube-scheduler", resourceAttributes={
            "verb": "create", "resource": "pods", "subresource": "binding", "namespace": "x"})
        return jane, group, scheduler
    jane, group, scheduler = run(body, as_user=authenticated("kubernetes-admin",
                                                             ["kubeadm:cluster-admins"]))
    assert jane["status"]["allowed"] is True
    assert group["status"] == {"allowed": True}
    assert scheduler["status"]["reason"] == ('RBAC: allowed by ClusterRoleBinding '
                                             '"system:kube-scheduler" of ClusterRole '
                                             '"system:kube-scheduler" to User "system:kube-scheduler"')


def test_local_subject_access_review_stays_in_its_namespace():
    async def body(reviews):
        spec = {"user": "jane", "resourceAttributes": {"verb": "get", "resource": "pods",
                                                       "namespace": "team"}}
        ok = await reviews.review("localsubjectaccessreviews", {"spec": spec}, namespace="team")
        with pytest.raises(wire.Invalid) as mismatch:
            await reviews.review("localsubjectaccessreviews", {"spec": spec}, namespace="other")
        with pytest.raises(wire.BadRequest) as no_namespace:
            await reviews.review("localsubjectaccessreviews", {"spec": spec})
        with pytest.raises(wire.Invalid) as path:
            await reviews.review("localsubjectaccessreviews", {"spec": {
                "user": "jane", "nonResourceAttributes": {"verb": "get", "path": "/"}}},
                namespace="team")
        return ok, mismatch.value, no_namespace.value, path.value
    ok, mismatch, no_namespace, path = run(body)
    assert ok["status"]["allowed"] is True and ok["metadata"] == {"namespace": "team"}
    assert mismatch.message == ('LocalSubjectAccessReview.authorization.k8s.io "" is invalid: '
                             'spec.resourceAttributes.namespace: Invalid value: "team": must '
                             'match metadata.namespace')
    assert no_namespace.message == "namespace is required on this type: "
    assert 'spec.nonResourceAttributes: Invalid value: {"verb":"get","path":"/"}: disallowed ' \
           'on this kind of request' in path.message


@pytest.mark.parametrize("resource,review,message", [
    ("selfsubjectaccessreviews", {"spec": {}},
     'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: '
     "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be "
     "specified"),
    ("selfsubjectaccessreviews", {"spec": {"resourceAttributes": {"verb": "get"},
                                           "nonResourceAttributes": {"verb": "get"}}},
     'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.nonResourceAttributes: '
     'Invalid value: {"verb":"get"}: cannot be specified in combination with resourceAttributes'),
    ("selfsubjectaccessreviews", {"metadata": {"name": "x"},
                                  "spec": {"resourceAttributes": {"verb": "get"}}},
     'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: metadata: Invalid value: '
     '{"name":"x"}: must be empty'),
    ("subjectaccessreviews", {"spec": {"resourceAttributes": {"verb": "get"}}},
     'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: Invalid value: "": at '
     "least one of user or group must be specified"),
    ("subjectaccessreviews", {"spec": {"user": 3, "groups": "g",
                                       "resourceAttributes": {"verb": ["get"]}}},
     'SubjectAccessReview.authorization.k8s.io "" is invalid: [spec.user: Invalid value: 3: '
     'must be a string, spec.groups: Invalid value: "g": must be a list of strings, spec.user: '
     'Invalid value: "": at least one of user or group must be specified, '
     'spec.resourceAttributes.verb: Invalid value: ["get"]: must be a string]'),
])
def test_malformed_access_reviews_are_invalid_with_kubernetes_messages(resource, review,
                                                                       message):
    async def body(reviews):
        with pytest.raises(wire.Invalid) as err:
            await reviews.review(resource, review)
        return err.value
    assert run(body).message == message


@pytest.mark.parametrize("resource,review,namespace,message", [
    ("pods", {}, None, "pods is not an authorization review"),
    ("nonsense", {}, None, 'the server doesn\'t have a resource type "nonsense"'),
    ("selfsubjectaccessreviews", [], None, "object must be a map"),
    ("selfsubjectaccessreviews", {"kind": "SubjectAccessReview"}, None,
     "the kind of the object ('SubjectAccessReview') does not match the resource "
     "('SelfSubjectAccessReview')"),
    ("selfsubjectrulesreviews", {"spec": {}}, None, "no namespace on request"),
])
def test_what_is_not_a_review_is_a_bad_request(resource, review, namespace, message):
    async def body(reviews):
        with pytest.raises(wire.BadRequest) as err:
            await reviews.review(resource, review, namespace)
        return err.value
    assert run(body).message == message


def test_a_self_review_without_a_caller_is_a_bad_request():
    async def body(reviews):
        with pytest.raises(wire.BadRequest) as err:
            await reviews.review("selfsubjectaccessreviews", resource_review("get", "pods"))
        return err.value
    assert run(body, as_user=None).message == "no user present on request"


def test_self_subject_rules_review_lists_what_the_caller_may_do_in_the_namespace():
    async def body(reviews):
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                  "spec": {"namespace": "team"}}
        before = copy.deepcopy(review)
        team = await reviews.review("selfsubjectrulesreviews", review)
        assert review == before
        other = await reviews.review("selfsubjectrulesreviews", {"spec": {"namespace": "x"}})
        return team, other
    team, other = run(body)
    rules = team["status"]["resourceRules"]
    assert {"verbs": ["get", "list", "watch"], "apiGroups": [""],
            "resources": ["pods", "serviceaccounts", "configmaps"]} in rules
    assert {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]} in rules
    assert {"verbs": ["get"], "nonResourceURLs": ["/livez", "/readyz", "/healthz", "/version",
                                                  "/version/"]} in team["status"]["nonResourceRules"]
    assert team["status"]["incomplete"] is False
    assert team["status"]["evaluationError"] == 'role.rbac.authorization.k8s.io "gone" not found'
    assert not any("pods" in r["resources"] for r in other["status"]["resourceRules"])
    assert "evaluationError" not in other["status"]


def test_selectors_in_resource_attributes_are_accepted_and_ignored():
    async def body(reviews):  # kubectl >= 1.31 may send them; RBAC does not look at them
        review = resource_review("list", "pods", "team",
                                 fieldSelector={"rawSelector": "spec.nodeName=node-1"},
                                 labelSelector={"requirements": [{"key": "app",
                                                                  "operator": "Exists"}]})
        return await reviews.review("selfsubjectaccessreviews", review)
    assert run(body)["status"]["allowed"] is True
