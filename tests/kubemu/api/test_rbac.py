"""kubemu.api.rbac: RBAC decisions as kube-apiserver's RBAC authorizer makes them."""
from __future__ import annotations

import pytest

from kubemu.api import rbac
from kubemu.api.authz import Attributes, forbidden_message
from kubemu.api.identity import (SYSTEM_MASTERS, UserInfo, authenticated,
                                 service_account_groups, service_account_username)
from kubemu.api.rbac import Rule

GROUP = "rbac.authorization.k8s.io"


def cluster_role(name, *rules, labels=None, selectors=None):
    obj = {"apiVersion": f"{GROUP}/v1", "kind": "ClusterRole",
           "metadata": {"name": name, "labels": labels or {}}, "rules": list(rules)}
    if selectors is not None:
        obj["aggregationRule"] = {"clusterRoleSelectors": selectors}
    return obj


def role(namespace, name, *rules):
    return {"apiVersion": f"{GROUP}/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace}, "rules": list(rules)}


def binding(name, role_kind, role_name, *subjects, namespace=None):
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": GROUP, "kind": role_kind, "name": role_name},
            "subjects": list(subjects)}


def user(name):
    return {"kind": "User", "apiGroup": GROUP, "name": name}


def group(name):
    return {"kind": "Group", "apiGroup": GROUP, "name": name}


def sa(name, namespace=None):
    return {"kind": "ServiceAccount", "name": name, **({"namespace": namespace} if namespace else {})}


def rule(verbs, groups=(), resources=(), names=(), urls=()):
    out = {"verbs": list(verbs)}
    for k, v in (("apiGroups", groups), ("resources", resources), ("resourceNames", names),
                 ("nonResourceURLs", urls)):
        if v:
            out[k] = list(v)
    return out


def attrs(who, verb, resource="", namespace="", *, group="", subresource="", name="", path=""):
    u = who if isinstance(who, UserInfo) else authenticated(who)
    if path:
        return Attributes(u, verb, False, path=path)
    return Attributes(u, verb, True, group, "v1", resource, subresource, namespace, name)


# --- one rule against one request (pkg/apis/rbac/v1/evaluation_helpers.go) --------------------

JANE = authenticated("jane")

RULE_CASES = [
    # (rule, request, allowed)
    (rule(["get"], [""], ["pods"]), attrs(JANE, "get", "pods", "ns"), True),
    (rule(["get"], [""], ["pods"]), attrs(JANE, "list", "pods", "ns"), False),
    (rule(["*"], [""], ["pods"]), attrs(JANE, "deletecollection", "pods", "ns"), True),
    (rule(["get"], ["apps"], ["pods"]), attrs(JANE, "get", "pods", "ns"), False),
    (rule(["get"], ["*"], ["deployments"]), attrs(JANE, "get", "deployments", group="apps"), True),
    (rule(["get"], [""], ["*"]), attrs(JANE, "get", "nodes"), True),
    (rule(["get"], [""], ["*"]), attrs(JANE, "get", "pods", subresource="log"), True),
    # a subresource is its own resource: pods does not grant pods/log ...
    (rule(["get"], [""], ["pods"]), attrs(JANE, "get", "pods", "ns", subresource="log"), False),
    (rule(["get"], [""], ["pods/log"]), attrs(JANE, "get", "pods", "ns", subresource="log"), True),
    (rule(["get"], [""], ["pods/log"]), attrs(JANE, "get", "pods", "ns"), False),
    # ... */log grants any resource's log, but not the resource itself ...
    (rule(["get"], [""], ["*/log"]), attrs(JANE, "get", "pods", "ns", subresource="log"), True),
    (rule(["get"], [""], ["*/log"]), attrs(JANE, "get", "pods", "ns"), False),
    (rule(["get"], [""], ["*/status"]), attrs(JANE, "get", "pods", subresource="log"), False),
    # ... and pods/* is no wildcard in Kubernetes
    (rule(["get"], [""], ["pods/*"]), attrs(JANE, "get", "pods", subresource="log"), False),
    (rule(["get"], [""], ["pods"], ["web"]), attrs(JANE, "get", "pods", "ns", name="web"), True),
    (rule(["get"], [""], ["pods"], ["web"]), attrs(JANE, "get", "pods", "ns", name="db"), False),
    # resourceNames restrict: a list (no name) is not allowed by a named rule
    (rule(["list"], [""], ["pods"], ["web"]), attrs(JANE, "list", "pods", "ns"), False),
    (rule(["get"], urls=["/healthz"]), attrs(JANE, "get", path="/healthz"), True),
    (rule(["get"], urls=["/healthz"]), attrs(JANE, "get", path="/healthz/etcd"), False),
    (rule(["get"], urls=["/apis/*"]), attrs(JANE, "get", path="/apis/apps/v1"), True),
    (rule(["get"], urls=["/apis/*"]), attrs(JANE, "get", path="/apis"), False),
    (rule(["get"], urls=["*"]), attrs(JANE, "get", path="/metrics"), True),
    (rule(["get"], urls=["/healthz"]), attrs(JANE, "post", path="/healthz"), False),
    # resource rules never match paths, URL rules never match resources
    (rule(["*"], ["*"], ["*"]), attrs(JANE, "get", path="/healthz"), False),
    (rule(["*"], urls=["*"]), attrs(JANE, "get", "pods", "ns"), False),
]


@pytest.mark.parametrize("policy_rule,request_attrs,allowed", RULE_CASES)
def test_a_rule_allows_what_its_verbs_groups_resources_names_or_urls_match(
        policy_rule, request_attrs, allowed):
    assert Rule.parse(policy_rule).allows(request_attrs) is allowed


# --- bindings and subjects ---------------------------------------------------------------------

READ_PODS = rule(["get", "list", "watch"], [""], ["pods"])
WORLD = [
    cluster_role("pod-reader", READ_PODS),
    role("team", "team-pods", rule(["create"], [""], ["pods"])),
    binding("readers", "ClusterRole", "pod-reader", user("alice"), group("auditors")),
    binding("team-read", "ClusterRole", "pod-reader", user("bob"), namespace="team"),
    binding("team-write", "Role", "team-pods", user("bob"), sa("robot"), namespace="team"),
    binding("cross", "ClusterRole", "pod-reader", sa("bot", "team"), namespace="other"),
    binding("sa-everywhere", "ClusterRole", "pod-reader", sa("watcher", "ops")),
    binding("sa-no-namespace", "ClusterRole", "pod-reader", sa("lost")),
]


def sa_user(namespace, name):
    return authenticated(service_account_username(namespace, name),
                         service_account_groups(namespace))


BINDING_CASES = [
    # who, request, allowed, reason
    ("alice", attrs("alice", "list", "pods", "anywhere"), True,
     'RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "pod-reader" to User "alice"'),
    ("alice", attrs("alice", "list", "pods"), True,
     'RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "pod-reader" to User "alice"'),
    ("alice", attrs("alice", "create", "pods", "team"), False, ""),
    ("an auditor", attrs(authenticated("carol", ["auditors"]), "get", "pods", "x"), True,
     'RBAC: allowed by ClusterRoleBinding "readers" of ClusterRole "pod-reader" to Group "auditors"'),
    # a ClusterRole bound in a namespace grants it there only
    ("bob in team", attrs("bob", "list", "pods", "team"), True,
     'RBAC: allowed by RoleBinding "team-read/team" of ClusterRole "pod-reader" to User "bob"'),
    ("bob elsewhere", attrs("bob", "list", "pods", "default"), False, ""),
    ("bob cluster-wide", attrs("bob", "list", "pods"), False, ""),
    ("bob's role", attrs("bob", "create", "pods", "team"), True,
     'RBAC: allowed by RoleBinding "team-write/team" of Role "team-pods" to User "bob"'),
    # a RoleBinding's ServiceAccount without a namespace is one of the binding's namespace
    ("robot in team", attrs(sa_user("team", "robot"), "create", "pods", "team"), True,
     'RBAC: allowed by RoleBinding "team-write/team" of Role "team-pods" to '
     'ServiceAccount "robot/team"'),
    ("another namespace's robot", attrs(sa_user("other", "robot"), "create", "pods", "team"),
     False, ""),
    # a ServiceAccount of one namespace bound in another namespace
    ("team's bot in other", attrs(sa_user("team", "bot"), "get", "pods", "other"), True,
     'RBAC: allowed by RoleBinding "cross/other" of ClusterRole "pod-reader" to '
     'ServiceAccount "bot/team"'),
    ("team's bot in team", attrs(sa_user("team", "bot"), "get", "pods", "team"), False, ""),
    ("a cluster-wide ServiceAccount", attrs(sa_user("ops", "watcher"), "watch", "pods", "x"),
     True, 'RBAC: allowed by ClusterRoleBinding "sa-everywhere" of ClusterRole "pod-reader" to '
           'ServiceAccount "watcher/ops"'),
    # a ClusterRoleBinding's ServiceAccount without a namespace is nobody
    ("a namespace-less ServiceAccount", attrs(sa_user("", "lost"), "get", "pods", "x"), False, ""),
    ("a user named like a ServiceAccount's group", attrs("system:serviceaccounts:team", "get",
                                                          "pods", "team"), False, ""),
    ("system:masters", attrs(UserInfo("root", (SYSTEM_MASTERS,)), "delete", "nodes"), True, ""),
    ("system:masters on a path", attrs(UserInfo("root", (SYSTEM_MASTERS,)), "get",
                                       path="/anything"), True, ""),
]


@pytest.mark.parametrize("case,request_attrs,allowed,reason", BINDING_CASES,
                         ids=[c[0] for c in BINDING_CASES])
def test_bindings_grant_their_roles_to_their_subjects_where_they_apply(case, request_attrs,
                                                                       allowed, reason):
    decision = rbac.authorize(request_attrs, rbac.view(WORLD))
    assert (decision.allowed, decision.reason) == (allowed, reason)


def test_a_user_with_no_binding_is_refused_with_kubernetes_words():
    a = attrs("x", "list", "pods", "default")
    decision = rbac.authorize(a, rbac.view(WORLD))
    assert not decision.allowed
    assert forbidden_message(a, decision.reason) == \
        'pods is forbidden: User "x" cannot list resource "pods" in API group "" in the ' \
        'namespace "default"'


def test_a_service_account_bound_to_view_can_list_but_not_create():
    from kubemu.api.bootstrap_policy import bootstrap_objects
    objects = bootstrap_objects() + [binding("viewer", "ClusterRole", "view", sa("reader"),
                                             namespace="default")]
    v = rbac.view(objects)
    reader = sa_user("default", "reader")
    listing = rbac.authorize(attrs(reader, "list", "pods", "default"), v)
    assert listing.allowed
    assert listing.reason == ('RBAC: allowed by RoleBinding "viewer/default" of ClusterRole '
                              '"view" to ServiceAccount "reader/default"')
    create = attrs(reader, "create", "pods", "default")
    refused = rbac.authorize(create, v)
    assert not refused.allowed
    assert forbidden_message(create, refused.reason) == \
        'pods is forbidden: User "system:serviceaccount:default:reader" cannot create ' \
        'resource "pods" in API group "" in the namespace "default"'
    assert not rbac.authorize(attrs(reader, "get", "secrets", "default"), v).allowed
    assert not rbac.authorize(attrs(reader, "list", "pods", "kube-system"), v).allowed


def test_a_binding_to_a_missing_role_is_the_reason_of_a_refusal():
    objects = [binding("ghost", "ClusterRole", "gone", user("x")),
               binding("ghost-role", "Role", "gone-too", user("x"), namespace="default")]
    a = attrs("x", "list", "pods", "default")
    decision = rbac.authorize(a, rbac.view(objects))
    assert not decision.allowed
    assert decision.reason == ('RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, '
                               'role.rbac.authorization.k8s.io "gone-too" not found]')
    one = rbac.authorize(attrs("x", "list", "pods"), rbac.view(objects))
    assert one.reason == 'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found'
    assert forbidden_message(attrs("x", "list", "pods"), one.reason).endswith(
        'at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found')


def test_a_missing_role_does_not_hide_a_binding_that_allows():
    objects = [binding("a-ghost", "ClusterRole", "gone", user("x")),
               cluster_role("reader", READ_PODS), binding("b-real", "ClusterRole", "reader", user("x"))]
    decision = rbac.authorize(attrs("x", "get", "pods", "ns"), rbac.view(objects))
    assert decision.allowed and '"b-real"' in decision.reason


def test_a_binding_that_applies_names_its_first_matching_subject_and_bindings_go_by_name():
    objects = [cluster_role("reader", READ_PODS),
               binding("z", "ClusterRole", "reader", user("x")),
               binding("a", "ClusterRole", "reader", group("devs"), user("x"))]
    decision = rbac.authorize(attrs(authenticated("x", ["devs"]), "get", "pods", "n"),
                              rbac.view(objects))
    assert decision.reason == 'RBAC: allowed by ClusterRoleBinding "a" of ClusterRole "reader" ' \
                              'to Group "devs"'


def test_before_the_roles_are_known_only_system_masters_is_allowed():
    refused = rbac.authorize(attrs("admin", "get", "pods", "default"), None)
    assert (refused.allowed, refused.reason) == (False, rbac.NOT_LOADED)
    assert rbac.authorize(attrs(UserInfo("root", (SYSTEM_MASTERS,)), "get", "pods"), None).allowed


def test_malformed_objects_read_as_empty_and_never_raise():
    objects = [{"kind": "ClusterRole", "metadata": "nope", "rules": "x"},
               {"kind": "ClusterRoleBinding", "metadata": {"name": "b"}, "roleRef": [],
                "subjects": [None, {"kind": 3}]},
               {"kind": "Role"}, {"kind": "RoleBinding", "subjects": "?"}, None, "junk",
               cluster_role("odd", {"verbs": "get", "apiGroups": [1]})]
    v = rbac.view(objects)
    assert not rbac.authorize(attrs("x", "get", "pods", "n"), v).allowed


# --- aggregation --------------------------------------------------------------------------------

def test_an_aggregated_cluster_role_has_the_rules_of_the_roles_its_selectors_match():
    to_view = {"rbac.example.com/aggregate-to-view": "true"}
    to_edit = {"rbac.example.com/aggregate-to-edit": "true"}
    objects = [
        cluster_role("view", selectors=[{"matchLabels": to_view}], labels=to_edit),
        cluster_role("edit", rule(["create"], [""], ["pods"]),  # own rules are replaced
                     selectors=[{"matchLabels": to_edit}]),
        cluster_role("b-view-pods", READ_PODS, labels=to_view),
        cluster_role("a-view-cm", rule(["get"], [""], ["configmaps"]), READ_PODS, labels=to_view),
        cluster_role("edit-pods", rule(["delete"], [""], ["pods"]), labels=to_edit),
        cluster_role("unrelated", rule(["*"], ["*"], ["*"])),
    ]
    v = rbac.view(objects)
    cm, pods, delete = Rule.parse(rule(["get"], [""], ["configmaps"])), Rule.parse(READ_PODS), \
        Rule.parse(rule(["delete"], [""], ["pods"]))
    assert v.cluster_roles["view"] == (cm, pods)            # by role name, each rule once
    assert set(v.cluster_roles["edit"]) == {cm, pods, delete}  # view's aggregated rules too
    assert Rule.parse(rule(["create"], [""], ["pods"])) not in v.cluster_roles["edit"]


def test_aggregation_cycles_end():
    a = cluster_role("a", READ_PODS, labels={"x": "a"}, selectors=[{"matchLabels": {"x": "b"}}])
    b = cluster_role("b", rule(["get"], [""], ["nodes"]), labels={"x": "b"},
                     selectors=[{"matchLabels": {"x": "a"}}])
    v = rbac.view([a, b])  # the controller would flip them forever; here they just end
    stored = {Rule.parse(READ_PODS), Rule.parse(rule(["get"], [""], ["nodes"]))}
    assert v.cluster_roles["a"] and set(v.cluster_roles["a"]) <= stored
    assert v.cluster_roles["b"] and set(v.cluster_roles["b"]) <= stored



def test_roles_aggregating_each_other_are_resolved_once_each():
    # Walking every aggregation path took factorial time (14 roles: hours), stalling the
    # apiserver that builds the view in its event loop.
    same = {"x": "all"}
    roles = [cluster_role(f"r{i:02}", rule(["get"], [""], [f"res{i}"]), labels=same,
                          selectors=[{"matchLabels": same}]) for i in range(14)]
    v = rbac.view(roles)
    every = tuple(Rule.parse(rule(["get"], [""], [f"res{i}"])) for i in range(14))
    assert all(v.cluster_roles[f"r{i:02}"] == every for i in range(14))

# --- rules_for (SelfSubjectRulesReview) ----------------------------------------------------------

def test_rules_for_lists_cluster_wide_and_namespace_rules_split_by_kind():
    objects = WORLD + [cluster_role("urls", rule(["get"], urls=["/healthz"])),
                       binding("bob-urls", "ClusterRole", "urls", user("bob")),
                       binding("bob-ghost", "Role", "nope", user("bob"), namespace="team")]
    found = rbac.rules_for(authenticated("bob"), "team", rbac.view(objects))
    assert found.resource_rules == [
        {"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
        {"verbs": ["create"], "apiGroups": [""], "resources": ["pods"]},
    ]
    assert found.non_resource_rules == [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]
    assert found.incomplete is False
    assert found.evaluation_error == 'role.rbac.authorization.k8s.io "nope" not found'
    assert rbac.rules_for(authenticated("bob"), "default", rbac.view(objects)).resource_rules == []
    assert rbac.rules_for(authenticated("bob"), "team", None) == ([], [], True, rbac.NOT_LOADED)
