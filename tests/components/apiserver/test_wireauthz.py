"""components.apiserver.wireauthz: wire requests as the REST path's authorization attributes."""
from __future__ import annotations

import pytest

from components.apiserver.wireauthz import attributes, user_info
from kubemu.api.authz import Attributes, forbidden_message
from kubemu.api.identity import ADMIN_GROUP, AUTHENTICATED, NODES

U = user_info("jane")


def _a(verb, resource="", subresource="", namespace="", name="", group="", version="v1") -> Attributes:
    return Attributes(user=U, verb=verb, api_group=group, api_version=version, resource=resource,
                      subresource=subresource, namespace=namespace, name=name)


POD = {"metadata": {"name": "web", "namespace": "team"}}


@pytest.mark.parametrize("method, params, want", [
    ("create", {"resource": "pods", "object": POD}, _a("create", "pods", namespace="team")),
    ("create", {"resource": "po", "object": {"metadata": {"name": "x"}}}, _a("create", "pods", namespace="default")),
    ("create", {"resource": "namespaces", "object": {"metadata": {"name": "n"}}}, _a("create", "namespaces")),
    ("get", {"resource": "pods", "name": "web", "namespace": "team"}, _a("get", "pods", namespace="team", name="web")),
    ("get", {"resource": "nodes", "name": "n1"}, _a("get", "nodes", name="n1")),
    ("list", {"resource": "pods"}, _a("list", "pods")),
    ("list", {"resource": "deployments.apps", "namespace": "team"},
     _a("list", "deployments", namespace="team", group="apps")),
    ("watch", {"resource": "pods", "namespace": "team", "resource_version": "5"},
     _a("watch", "pods", namespace="team")),
    ("update", {"resource": "pods", "object": POD}, _a("update", "pods", namespace="team", name="web")),
    ("update_status", {"resource": "pods", "object": POD},
     _a("update", "pods", "status", namespace="team", name="web")),
    ("patch", {"resource": "deploy", "name": "d", "patch": {}, "namespace": "team"},
     _a("patch", "deployments", namespace="team", name="d", group="apps")),
    ("patch", {"resource": "pods", "name": "web", "patch": {}, "subresource": "status"},
     _a("patch", "pods", "status", namespace="default", name="web")),
    ("update_approval", {"resource": "certificatesigningrequests", "object": {"metadata": {"name": "c"}}},
     _a("update", "certificatesigningrequests", "approval", name="c", group="certificates.k8s.io")),
    ("patch", {"resource": "csr", "name": "c", "patch": {}, "subresource": "approval"},
     _a("patch", "certificatesigningrequests", "approval", name="c", group="certificates.k8s.io")),
    ("review", {"resource": "subjectaccessreviews", "object": {"spec": {}}},
     _a("create", "subjectaccessreviews", group="authorization.k8s.io")),
    ("delete", {"resource": "pods", "name": "web", "namespace": "team"},
     _a("delete", "pods", namespace="team", name="web")),
    ("delete_collection", {"resource": "pods", "namespace": "team"}, _a("deletecollection", "pods", namespace="team")),
    ("bind", {"name": "web", "node": "n1", "namespace": "team"},
     _a("create", "pods", "binding", namespace="team", name="web")),
    ("evict", {"name": "web", "namespace": "team"}, _a("create", "pods", "eviction", namespace="team", name="web")),
    ("get_scale", {"resource": "replicasets", "name": "r", "namespace": "team"},
     _a("get", "replicasets", "scale", namespace="team", name="r", group="apps")),
    ("update_scale", {"resource": "deployments", "name": "d", "replicas": 3},
     _a("update", "deployments", "scale", namespace="default", name="d", group="apps")),
    ("log", {"name": "web", "namespace": "team", "container": "c"},
     _a("get", "pods", "log", namespace="team", name="web")),
    ("token_request", {"name": "default", "namespace": "team", "object": {"kind": "TokenRequest"}},
     _a("create", "serviceaccounts", "token", namespace="team", name="default")),
])
def test_resource_requests(method, params, want):
    assert attributes(U, method, params) == want


@pytest.mark.parametrize("method, params, want", [
    ("get", {"resource": "namespaces", "name": "team", "namespace": "other"},
     _a("get", "namespaces", namespace="team", name="team")),
    ("update_status", {"resource": "ns", "object": {"metadata": {"name": "team"}}},
     _a("update", "namespaces", "status", namespace="team", name="team")),
    ("delete", {"resource": "namespaces", "name": "team"}, _a("delete", "namespaces", namespace="team", name="team")),
    ("list", {"resource": "namespaces", "namespace": "team"}, _a("list", "namespaces")),
])
def test_a_namespace_request_is_in_that_namespace(method, params, want):
    """As kube-apiserver's RequestInfo reads /api/v1/namespaces/<name>: a RoleBinding in a
    namespace can grant on that namespace itself."""
    assert attributes(U, method, params) == want


def test_healthz_is_a_non_resource_get():
    a = attributes(U, "healthz", {})
    assert (a.resource_request, a.verb, a.path) == (False, "get", "/healthz")
    assert forbidden_message(a) == 'forbidden: User "jane" cannot get path "/healthz"'


def test_the_message_reads_as_kube_apiservers():
    a = attributes(U, "log", {"name": "web", "namespace": "default"})
    assert forbidden_message(a) == ('pods "web" is forbidden: User "jane" cannot get resource "pods/log" '
                                    'in API group "" in the namespace "default"')


@pytest.mark.parametrize("method, params", [
    ("frobnicate", {"resource": "pods"}),       # not a method this table knows: refuse
    ("get", {"resource": "gizmos", "name": "g"}),
    ("list", {"resource": 7}),
    ("list", {}),
])
def test_unknown_requests_name_nothing(method, params):
    assert attributes(U, method, params) is None


def test_garbage_params_do_not_leak_into_the_attributes():
    a = attributes(U, "create", {"resource": "pods", "object": {"metadata": ["x"]}, "namespace": 5})
    assert (a.namespace, a.name) == ("default", "")
    a = attributes(U, "get", {"resource": "pods", "name": {"x": 1}, "namespace": "n"})
    assert a.name == ""


def test_identities_become_users():
    admin = user_info("kubernetes-admin")
    assert admin.name == "kubernetes-admin" and set(admin.groups) == {ADMIN_GROUP, AUTHENTICATED}
    node = user_info("system:node:node-0")
    assert set(node.groups) == {NODES, AUTHENTICATED}
    assert user_info("system:kube-scheduler").groups == (AUTHENTICATED,)


def test_a_service_account_identity_is_in_the_service_account_groups():
    coredns = user_info("system:serviceaccount:kube-system:coredns")
    assert set(coredns.groups) == {"system:serviceaccounts", "system:serviceaccounts:kube-system",
                                   AUTHENTICATED}
    for malformed in ("system:serviceaccount:kube-system", "system:serviceaccount::x",
                      "system:serviceaccount:a:b:c"):
        assert user_info(malformed).groups == (AUTHENTICATED,)
