"""kubemu.api.rbacobjects: Role, ClusterRole and their bindings, defaulted and validated as
kube-apiserver does (pkg/apis/rbac/validation, rbac/v1 defaults)."""
from __future__ import annotations

import pytest

from kubemu.api import meta
from kubemu.api.objects import default_object, validate_object, validate_object_update

V1 = "rbac.authorization.k8s.io/v1"
GROUP = "rbac.authorization.k8s.io"


def messages(obj, **kw):
    return [str(e) for e in validate_object(default_object(obj), **kw)]


def role(*rules, kind="Role", **extra):
    meta_ = {"name": "r", **({"namespace": "default"} if kind == "Role" else {})}
    return {"apiVersion": V1, "kind": kind, "metadata": meta_, "rules": list(rules), **extra}


def binding(subjects, role_ref=None, kind="RoleBinding", name="b"):
    meta_ = {"name": name, **({"namespace": "default"} if kind == "RoleBinding" else {})}
    obj = {"apiVersion": V1, "kind": kind, "metadata": meta_, "subjects": subjects}
    if role_ref is not None:
        obj["roleRef"] = role_ref
    return obj


VIEW = {"kind": "ClusterRole", "name": "view"}


def test_valid_objects_pass_and_names_are_path_segments():
    assert messages(role({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]})) == []
    assert messages(role({"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
                         kind="ClusterRole")) == []
    named = role(kind="ClusterRole")
    named["metadata"]["name"] = "system:kube-scheduler"
    assert messages(named) == []
    assert messages(binding([{"kind": "User", "name": "jane"}], VIEW)) == []


@pytest.mark.parametrize("name,message", [
    ("a/b", "metadata.name: Invalid value: \"a/b\": may not contain '/'"),
    ("50%", "metadata.name: Invalid value: \"50%\": may not contain '%'"),
    ("..", "metadata.name: Invalid value: \"..\": may not be '..'"),
])
def test_names_may_not_be_dot_segments_or_contain_slash_or_percent(name, message):
    obj = role()
    obj["metadata"]["name"] = name
    assert messages(obj) == [message]


@pytest.mark.parametrize("kind,policy_rule,expected", [
    ("Role", {}, ["rules[0].verbs: Required value: verbs must contain at least one value",
                  "rules[0].apiGroups: Required value: resource rules must supply at least one "
                  "api group",
                  "rules[0].resources: Required value: resource rules must supply at least one "
                  "resource"]),
    ("Role", {"verbs": ["get"], "apiGroups": [""]},
     ["rules[0].resources: Required value: resource rules must supply at least one resource"]),
    ("Role", {"verbs": ["get"], "nonResourceURLs": ["/x"]},
     ['rules[0].nonResourceURLs: Invalid value: ["/x"]: namespaced rules cannot apply to '
      'non-resource URLs']),
    ("ClusterRole", {"verbs": ["get"], "nonResourceURLs": ["/x"], "resources": ["pods"]},
     ['rules[0].nonResourceURLs: Invalid value: ["/x"]: rules cannot apply to both regular '
      'resources and non-resource URLs']),
    ("ClusterRole", {"verbs": "get", "apiGroups": [""], "resources": ["pods"]},
     ['rules[0].verbs: Invalid value: "get": must be a list of strings',
      "rules[0].verbs: Required value: verbs must contain at least one value"]),
    ("ClusterRole", {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "x": 1},
     ["rules[0].x: Unknown field"]),
])
def test_policy_rules(kind, policy_rule, expected):
    assert messages(role(policy_rule, kind=kind)) == expected


def test_an_aggregation_rule_needs_valid_selectors():
    empty = role(kind="ClusterRole", aggregationRule={"clusterRoleSelectors": []})
    assert messages(empty) == ["aggregationRule.clusterRoleSelectors: Required value: at least "
                               "one clusterRoleSelector required if aggregationRule is non-nil"]
    bad = role(kind="ClusterRole", aggregationRule={"clusterRoleSelectors": [
        {"matchExpressions": [{"key": "a", "operator": "Near"}]}]})
    assert messages(bad) == ['aggregationRule.clusterRoleSelectors[0].matchExpressions[0].'
                             'operator: Invalid value: "Near": not a valid selector operator']
    assert messages(role(kind="Role", aggregationRule={})) == ["aggregationRule: Unknown field"]


def test_defaults_fill_the_api_groups_of_the_role_ref_and_of_users_and_groups():
    obj = default_object(binding([{"kind": "User", "name": "a"}, {"kind": "Group", "name": "g"},
                                  {"kind": "ServiceAccount", "name": "s"}], VIEW))
    assert obj["roleRef"] == {"kind": "ClusterRole", "name": "view", "apiGroup": GROUP}
    assert [s.get("apiGroup") for s in obj["subjects"]] == [GROUP, GROUP, None]
    assert obj["metadata"]["namespace"] == "default"


@pytest.mark.parametrize("kind,subject,expected", [
    ("RoleBinding", {"kind": "ServiceAccount", "name": "s"}, []),
    ("ClusterRoleBinding", {"kind": "ServiceAccount", "name": "s"},
     ["subjects[0].namespace: Required value"]),
    ("ClusterRoleBinding", {"kind": "ServiceAccount", "name": "s", "namespace": "n"}, []),
    ("RoleBinding", {"kind": "ServiceAccount", "name": "S_1"},
     ['subjects[0].name: Invalid value: "S_1": a lowercase RFC 1123 subdomain must consist of '
      "lower case alphanumeric characters, '-' or '.', and must start and end with an "
      "alphanumeric character (e.g. 'example.com', regex used for validation is "
      "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]),
    ("RoleBinding", {"kind": "ServiceAccount", "name": "s", "apiGroup": GROUP},
     [f'subjects[0].apiGroup: Unsupported value: "{GROUP}": supported values: ""']),
    ("RoleBinding", {"kind": "User", "name": "u", "apiGroup": "example.com"},
     [f'subjects[0].apiGroup: Unsupported value: "example.com": supported values: "{GROUP}"']),
    ("RoleBinding", {"kind": "Group", "name": ""}, ["subjects[0].name: Required value"]),
    ("RoleBinding", {"kind": "Robot", "name": "r"},
     ['subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", '
      '"User", "Group"']),
])
def test_subjects(kind, subject, expected):
    assert messages(binding([subject], VIEW, kind=kind)) == expected


@pytest.mark.parametrize("kind,ref,expected", [
    ("RoleBinding", None, ['roleRef.kind: Unsupported value: "": supported values: "Role", '
                           '"ClusterRole"', "roleRef.name: Required value"]),
    ("RoleBinding", {"kind": "Role", "name": "r"}, []),
    ("ClusterRoleBinding", {"kind": "Role", "name": "r"},
     ['roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"']),
    ("RoleBinding", {"kind": "Role", "name": "r", "apiGroup": "example.com"},
     [f'roleRef.apiGroup: Unsupported value: "example.com": supported values: "{GROUP}"']),
    ("RoleBinding", {"kind": "ClusterRole", "name": "a/b"},
     ["roleRef.name: Invalid value: \"a/b\": may not contain '/'"]),
])
def test_role_refs(kind, ref, expected):
    assert messages(binding([], ref, kind=kind)) == expected


@pytest.mark.parametrize("kind", ["RoleBinding", "ClusterRoleBinding"])
def test_a_binding_role_ref_cannot_change(kind):
    old = default_object(binding([{"kind": "User", "name": "u"}], VIEW, kind=kind))
    old["metadata"]["resourceVersion"] = "5"
    new = default_object({**old, "roleRef": {"kind": "ClusterRole", "name": "edit"}})
    errors = [str(e) for e in validate_object_update(old, new)]
    assert errors == ['roleRef: Invalid value: {"kind":"ClusterRole","name":"edit","apiGroup":'
                      f'"{GROUP}"}}: cannot change roleRef']
    # subjects may change
    changed = default_object({**old, "subjects": [{"kind": "User", "name": "other"}]})
    assert validate_object_update(old, changed) == []


def test_the_kinds_field_tables_carry_types_for_openapi():
    assert meta.TYPES["Role"]["rules"] == "[]PolicyRule"
    assert meta.TYPES["ClusterRole"]["aggregationRule"] == "AggregationRule"
    assert meta.TYPES["ClusterRoleBinding"]["subjects"] == "[]Subject"
    assert meta.TYPES["RoleBinding"]["roleRef"] == "RoleRef"
    assert meta.TYPES["PolicyRule"]["nonResourceURLs"] == "[]string"
    for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "PolicyRule",
                 "Subject", "RoleRef", "AggregationRule"):
        assert set(meta.TYPES[kind]) == set(meta.KNOWN_FIELDS[kind]), kind


def test_malformed_objects_are_errors_not_exceptions():
    for junk in (None, [], "x", {"kind": "RoleBinding"},
                 binding("nope", "also nope"), binding([None, 3], {"kind": 5, "name": []}),
                 role(None, "x", kind="ClusterRole", aggregationRule={"clusterRoleSelectors": [None]})):
        assert validate_object(default_object(junk))
