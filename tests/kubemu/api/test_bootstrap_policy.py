"""kubemu.api.bootstrap_policy: the default roles let kubemu's own components make every call
they make, and users get what Kubernetes' default roles give."""
from __future__ import annotations

import pytest

from kubemu.api import rbac
from kubemu.api.authz import Attributes
from kubemu.api.bootstrap_policy import bootstrap_objects
from kubemu.api.identity import (ADMIN_GROUP, NODES, UserInfo, authenticated,
                                 service_account_groups, service_account_username)
from kubemu.api.objects import default_object, validate_object
from kubemu.api.resources import RESOURCES

VIEW = rbac.view(bootstrap_objects())

SCHEDULER = authenticated("system:kube-scheduler")
CONTROLLER_MANAGER = authenticated("system:kube-controller-manager")
KUBELET = authenticated("system:node:node-1", [NODES])
ADMIN = authenticated("kubernetes-admin", [ADMIN_GROUP])
ANONYMOUS = UserInfo("system:anonymous", ("system:unauthenticated",))
KUBE_PROXY = authenticated("system:kube-proxy")
COREDNS = authenticated("system:serviceaccount:kube-system:coredns",
                        ["system:serviceaccounts", "system:serviceaccounts:kube-system"])
NAMESPACED = [r for r in RESOURCES if r.namespaced and r.stored]


def call(verb, plural, namespace="", subresource="", name=""):
    """(verb, resource, subresource, namespace, name) with the resource's API group."""
    r = next(r for r in RESOURCES if r.plural == plural)
    return verb, r.group, plural, subresource, namespace, name


def allowed(user, c) -> bool:
    verb, group, plural, subresource, namespace, name = c
    return rbac.authorize(Attributes(user, verb, True, group, "v1", plural, subresource,
                                     namespace, name), VIEW).allowed


# What each component calls (grep its ApiClient uses): informers list and watch cluster-wide.
EVENTS = [call("create", "events", "default"), call("patch", "events", "default")]  # kubemu/events.py
SCHEDULER_CALLS = [  # components/scheduler/scheduler.py
    call("list", "pods"), call("watch", "pods"), call("list", "nodes"), call("watch", "nodes"),
    call("create", "pods", "default", "binding", "web"),
    call("patch", "pods", "default", "status", "web"),
    *EVENTS,
]
CONTROLLER_MANAGER_CALLS = [  # components/controller_manager/*.py
    *(call(v, p) for v in ("list", "watch")
      for p in ("pods", "replicasets", "deployments", "nodes", "namespaces")),
    call("list", "leases", "kube-node-lease"), call("watch", "leases", "kube-node-lease"),
    # replicaset and deployment controllers (executor.py)
    call("create", "pods", "default"), call("delete", "pods", "default", name="web"),
    call("create", "replicasets", "default"), call("patch", "replicasets", "default", name="rs"),
    call("patch", "deployments", "default", name="d"),
    call("patch", "replicasets", "default", "status", "rs"),
    call("patch", "deployments", "default", "status", "d"),
    call("patch", "pods", "default", name="web"),  # adopt / release (ownerReferences)
    # garbage collector: read owners, delete dependents
    *(call("get", p, "default", name="x") for p in ("pods", "replicasets", "deployments")),
    # node lifecycle: taints and conditions, pod readiness, evictions; node IPAM: podCIDRs
    call("patch", "nodes", name="node-1"), call("patch", "pods", "default", "status", "web"),
    # namespace controller: list and delete everything in a namespace, then finalize it
    *(call(v, r.plural, "doomed", name="x" if v == "delete" else "")
      for r in NAMESPACED for v in ("list", "delete")),
    call("update", "namespaces", name="doomed"),
    # kube-root-ca.crt publisher and the default ServiceAccount (components/controllers)
    call("create", "configmaps", "default"), call("update", "configmaps", "default",
                                                  name="kube-root-ca.crt"),
    call("create", "serviceaccounts", "default"),
    # endpoint and endpointslice controllers
    *(call(v, p) for v in ("list", "watch") for p in ("services", "endpoints", "endpointslices")),
    *(call(v, p, "default", name="" if v == "create" else "web")
      for v in ("create", "update", "delete") for p in ("endpoints", "endpointslices")),
    *EVENTS,
]
KUBE_PROXY_CALLS = [  # components/kube_proxy
    *(call(v, p) for v in ("list", "watch") for p in ("services", "endpointslices", "nodes")),
    call("get", "nodes", name="node-1"), *EVENTS,
]
COREDNS_CALLS = [  # components/dns
    *(call(v, p) for v in ("list", "watch")
      for p in ("services", "endpoints", "endpointslices", "pods", "namespaces")),
]
KUBELET_CALLS = [  # kubelet/heartbeat.py, apiagent.py, hollow.py
    call("create", "nodes"), call("get", "nodes", name="node-1"),
    call("patch", "nodes", "", "status", "node-1"),
    call("create", "leases", "kube-node-lease"),
    call("patch", "leases", "kube-node-lease", name="node-1"),
    call("list", "pods"), call("watch", "pods"),
    call("create", "pods", "kube-system"),  # mirror pods of static pods
    call("delete", "pods", "default", name="web"),
    call("patch", "pods", "default", "status", "web"),
    call("list", "services"), call("watch", "services"),  # service environment variables
    *EVENTS,
]


@pytest.mark.parametrize("who,user,calls", [
    ("scheduler", SCHEDULER, SCHEDULER_CALLS),
    ("controller-manager", CONTROLLER_MANAGER, CONTROLLER_MANAGER_CALLS),
    ("kubelet", KUBELET, KUBELET_CALLS),
    ("kube-proxy", KUBE_PROXY, KUBE_PROXY_CALLS),
    ("coredns", COREDNS, COREDNS_CALLS),
])
def test_every_call_a_component_makes_is_allowed_for_its_identity(who, user, calls):
    refused = [c for c in calls if not allowed(user, c)]
    assert refused == [], f"{who} may not: {refused}"


@pytest.mark.parametrize("user,c", [
    (SCHEDULER, call("delete", "nodes", name="node-1")),
    (SCHEDULER, call("create", "deployments", "default")),
    (KUBELET, call("create", "deployments", "default")),
    (KUBELET, call("delete", "nodes", name="node-2")),
    (KUBELET, call("create", "clusterroles")),
    (CONTROLLER_MANAGER, call("create", "clusterrolebindings")),
    (authenticated("jane"), call("list", "pods", "default")),
    (KUBE_PROXY, call("create", "services", "default")),
    (KUBE_PROXY, call("list", "pods")),
    (COREDNS, call("get", "secrets", "kube-system", name="x")),
    (COREDNS, call("create", "endpointslices", "default")),
    (authenticated("system:serviceaccount:default:coredns",
                   ["system:serviceaccounts", "system:serviceaccounts:default"]),
     call("list", "services")),
    # IPAddresses are the apiserver's own (its allocator writes the store): no default role but
    # cluster-admin's names them, as upstream (only its ServiceCIDR controller, not run here, reads them)
    (KUBE_PROXY, call("list", "ipaddresses")), (KUBELET, call("get", "ipaddresses", name="10.96.0.1")),
    (authenticated("jane"), call("list", "ipaddresses")),
])
def test_components_and_users_get_no_more_than_their_roles(user, c):
    assert not allowed(user, c)


def test_the_admin_group_and_system_masters_may_do_anything():
    assert allowed(ADMIN, call("delete", "clusterrolebindings", name="x"))
    assert allowed(ADMIN, call("delete", "ipaddresses", name="10.96.0.1"))
    assert rbac.authorize(Attributes(ADMIN, "get", False, path="/metrics"), VIEW).allowed
    reason = rbac.authorize(Attributes(ADMIN, "list", True, resource="pods"), VIEW).reason
    assert reason == ('RBAC: allowed by ClusterRoleBinding "kubeadm:cluster-admins" of '
                      'ClusterRole "cluster-admin" to Group "kubeadm:cluster-admins"')
    masters = UserInfo("root", ("system:masters",))
    assert rbac.rules_for(masters, "default", VIEW).resource_rules == [
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]


@pytest.mark.parametrize("path,authenticated_ok,anonymous_ok", [
    ("/version", True, True), ("/healthz", True, True), ("/readyz", True, True),
    ("/livez", True, True), ("/api", True, False), ("/api/v1", True, False),
    ("/apis/apps/v1", True, False), ("/openapi/v3", True, False), ("/openapi/v2", True, False),
    ("/metrics", False, False),
])
def test_discovery_for_the_authenticated_and_public_info_for_everyone(path, authenticated_ok,
                                                                      anonymous_ok):
    def get(user):
        return rbac.authorize(Attributes(user, "get", False, path=path), VIEW).allowed
    assert get(authenticated("jane")) is authenticated_ok
    assert get(ANONYMOUS) is anonymous_ok


def test_every_authenticated_user_may_ask_about_itself():
    jane = authenticated("jane")
    for group, plural in (("authorization.k8s.io", "selfsubjectaccessreviews"),
                          ("authorization.k8s.io", "selfsubjectrulesreviews"),
                          ("authentication.k8s.io", "selfsubjectreviews")):
        assert rbac.authorize(Attributes(jane, "create", True, group, "v1", plural), VIEW).allowed
    assert not rbac.authorize(Attributes(jane, "create", True, "authorization.k8s.io", "v1",
                                         "subjectaccessreviews"), VIEW).allowed


def bound(role_name, namespace="team"):
    """A ServiceAccount bound to `role_name` in `namespace`, and the view with that binding."""
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "b", "namespace": namespace},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": role_name},
               "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}
    user = authenticated(service_account_username(namespace, "sa"),
                         service_account_groups(namespace))
    return user, rbac.view(bootstrap_objects() + [binding])


@pytest.mark.parametrize("role_name,verb,plural,subresource,expected", [
    ("view", "list", "pods", "", True), ("view", "get", "pods", "log", True),
    ("view", "watch", "deployments", "", True), ("view", "get", "deployments", "scale", True),
    ("view", "list", "events", "", True), ("view", "get", "configmaps", "", True),
    ("view", "get", "secrets", "", False), ("view", "create", "pods", "", False),
    ("view", "list", "roles", "", False),
    ("edit", "create", "pods", "", True), ("edit", "delete", "deployments", "", True),
    ("edit", "patch", "deployments", "scale", True), ("edit", "get", "secrets", "", True),
    ("edit", "create", "secrets", "", True), ("edit", "list", "pods", "", True),
    ("edit", "create", "rolebindings", "", False), ("edit", "update", "pods", "status", False),
    ("admin", "create", "rolebindings", "", True), ("admin", "delete", "roles", "", True),
    ("admin", "list", "replicasets", "", True),
    ("admin", "create", "clusterroles", "", False),
    ("view", "create", "pods", "portforward", False), ("edit", "create", "pods", "portforward", True),
    ("edit", "get", "pods", "portforward", True), ("admin", "create", "pods", "portforward", True),
])
def test_admin_edit_and_view_aggregate_and_grant_within_their_namespace(
        role_name, verb, plural, subresource, expected):
    user, v = bound(role_name)
    r = next(r for r in RESOURCES if r.plural == plural)
    a = Attributes(user, verb, True, r.group, "v1", plural, subresource, "team", "x")
    assert rbac.authorize(a, v).allowed is expected
    elsewhere = Attributes(user, verb, True, r.group, "v1", plural, subresource, "other", "x")
    assert not rbac.authorize(elsewhere, v).allowed


def test_the_objects_are_valid_labelled_and_annotated_as_kubernetes_makes_them():
    objects = bootstrap_objects()
    names = {(o["kind"], o["metadata"]["name"]) for o in objects}
    for wanted in ("cluster-admin", "admin", "edit", "view", "system:basic-user",
                   "system:discovery", "system:public-info-viewer", "system:node",
                   "system:kube-scheduler", "system:kube-controller-manager"):
        assert ("ClusterRole", wanted) in names
    assert ("ClusterRoleBinding", "kubeadm:cluster-admins") in names
    for obj in objects:
        assert validate_object(default_object(obj)) == [], obj["metadata"]["name"]
        meta = obj["metadata"]
        if not meta["name"].startswith("kubeadm:"):  # kubeadm's, not bootstrap defaults
            assert meta["labels"]["kubernetes.io/bootstrapping"] == "rbac-defaults"
            assert meta["annotations"] == {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    objects[0]["metadata"]["name"] = "changed"  # a fresh copy each call
    assert bootstrap_objects()[0]["metadata"]["name"] == "cluster-admin"


@pytest.mark.parametrize("role_name", ["view", "edit", "admin"])
def test_kubectl_top_pods_for_view_and_up_as_metrics_server_grants_it(role_name):
    """system:aggregated-metrics-reader (metrics-server's role) aggregates into view, edit and
    admin: bound in a namespace, they read its pods' metrics, not the nodes' (cluster scope)."""
    user, v = bound(role_name)
    pods = Attributes(user, "list", True, "metrics.k8s.io", "v1beta1", "pods", "", "team", "")
    assert rbac.authorize(pods, v).allowed
    assert not rbac.authorize(Attributes(user, "list", True, "metrics.k8s.io", "v1beta1", "pods", "", "other", ""),
                              v).allowed
    assert not rbac.authorize(Attributes(user, "list", True, "metrics.k8s.io", "v1beta1", "nodes", "", "", ""),
                              v).allowed
