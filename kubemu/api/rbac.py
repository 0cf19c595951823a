"""RBAC authorization, as kube-apiserver's RBAC authorizer decides (pure: no I/O).

    view(objects)                       -> RBACView: a snapshot of Roles, ClusterRoles,
                                           RoleBindings and ClusterRoleBindings (dicts, any order)
    authorize(attrs, view)              -> Decision
    rules_for(user, namespace, view)    -> Rules (for SelfSubjectRulesReview)
    aggregated_rules(cluster_roles)     -> {name: rules} with aggregationRules applied

What a request may do (plugin/pkg/auth/authorizer/rbac, pkg/registry/rbac/validation):

  * a rule allows a resource request when its verbs, apiGroups, resources and resourceNames all
    match: `*` matches any verb, group or resource; a subresource is asked for as
    `pods/log` and matched by `pods/log` or `*/log` (`pods/*` is no wildcard, as in Kubernetes);
    no resourceNames means any name. A non-resource request (a path such as /healthz) matches
    by verbs and nonResourceURLs, where `*` is any path and a trailing `*` a prefix;
  * a binding applies to a user named in its subjects: a User by name, a Group by membership,
    a ServiceAccount by the user name `system:serviceaccount:<namespace>:<name>` (in a
    RoleBinding a ServiceAccount without a namespace is one of the binding's namespace);
  * ClusterRoleBindings grant everywhere; RoleBindings only within their namespace, whether
    they refer to a Role there or to a ClusterRole (which is then granted in that namespace);
  * the first rule of an applying binding that allows the request decides; the reason names
    it as RBAC does (`RBAC: allowed by ClusterRoleBinding "x" of ClusterRole "y" to User "z"`).
    A request nothing allows is not allowed, with no reason unless a binding applying to the
    user refers to a role that does not exist (`RBAC: clusterrole.rbac.authorization.k8s.io "y"
    not found`), which kube-apiserver reports the same way;
  * members of system:masters may do anything without any binding (the privileged-group
    authorizer that kube-apiserver runs before RBAC).

ClusterRole aggregation: a ClusterRole with an aggregationRule has the rules of every
ClusterRole its selectors match (sorted by name, without duplicates), as kube-controller-manager's
clusterrole-aggregation controller would write into it. kubemu runs no such controller: the view
computes them when it is built, so `admin`, `edit` and `view` grant their aggregated rules while
the stored objects show only their aggregationRule.

Bindings are visited in name order (Kubernetes' listers have no defined order), so which of two
allowing bindings the reason names is deterministic.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Iterable, Iterator, NamedTuple

from .authz import Attributes, Decision
from .identity import SYSTEM_MASTERS, UserInfo, service_account_username
from .meta import selector_matches

GROUP = "rbac.authorization.k8s.io"
ALL = "*"
# Why a request is refused before the roles and bindings are known (the apiserver just started).
NOT_LOADED = "RBAC: the roles and bindings are not loaded yet; try again"


@dataclass(frozen=True)
class Rule:
    """A PolicyRule."""
    verbs: tuple[str, ...] = ()
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    @classmethod
    def parse(cls, rule: Any) -> Rule:
        rule = rule if isinstance(rule, dict) else {}
        return cls(*(_strings(rule.get(f)) for f in
                     ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")))

    def allows(self, a: Attributes) -> bool:
        """RuleAllows."""
        if not verb_matches(self, a.verb):
            return False
        if not a.resource_request:
            return non_resource_url_matches(self, a.path)
        combined = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        return (api_group_matches(self, a.api_group)
                and resource_matches(self, combined, a.subresource)
                and resource_name_matches(self, a.name))


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


# --- matching (pkg/apis/rbac/v1/evaluation_helpers.go) ----------------------------------------

def verb_matches(rule: Rule, verb: str) -> bool:
    return any(v == ALL or v == verb for v in rule.verbs)


def api_group_matches(rule: Rule, group: str) -> bool:
    return any(g == ALL or g == group for g in rule.api_groups)


def resource_matches(rule: Rule, combined: str, subresource: str) -> bool:
    """`combined` is resource or resource/subresource; `*/sub` matches any resource's `sub`."""
    for r in rule.resources:
        if r == ALL or r == combined:
            return True
        if subresource and r == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: Rule, name: str) -> bool:
    return not rule.resource_names or name in rule.resource_names


def non_resource_url_matches(rule: Rule, path: str) -> bool:
    for url in rule.non_resource_urls:
        if url == ALL or url == path:
            return True
        if url.endswith("*") and path.startswith(url.rstrip("*")):
            return True
    return False


# --- subjects and bindings ----------------------------------------------------------------------

@dataclass(frozen=True)
class Subject:
    kind: str
    name: str
    namespace: str = ""

    def applies_to(self, user: UserInfo, namespace: str) -> bool:
        """appliesToUser; `namespace` is the RoleBinding's ("" for a ClusterRoleBinding)."""
        if self.kind == "User":
            return user.name == self.name
        if self.kind == "Group":
            return self.name in user.groups
        if self.kind == "ServiceAccount":
            sa_namespace = self.namespace or namespace
            return bool(sa_namespace) and user.name == service_account_username(sa_namespace,
                                                                                 self.name)
        return False

    def describe(self, binding_namespace: str) -> str:
        if self.kind == "ServiceAccount":
            return f'{self.kind} "{self.name}/{self.namespace or binding_namespace}"'
        return f'{self.kind} "{self.name}"'


@dataclass(frozen=True)
class Binding:
    kind: str                 # "ClusterRoleBinding" or "RoleBinding"
    name: str
    namespace: str            # "" for a ClusterRoleBinding
    role_kind: str            # "ClusterRole" or "Role"
    role_name: str
    subjects: tuple[Subject, ...]

    @classmethod
    def parse(cls, obj: dict) -> Binding:
        meta = _dict(obj.get("metadata"))
        ref = _dict(obj.get("roleRef"))
        subjects = tuple(Subject(_str(s.get("kind")), _str(s.get("name")), _str(s.get("namespace")))
                         for s in _list(obj.get("subjects")) if isinstance(s, dict))
        return cls(_str(obj.get("kind")), _str(meta.get("name")), _str(meta.get("namespace")),
                   _str(ref.get("kind")), _str(ref.get("name")), subjects)

    def subject_for(self, user: UserInfo) -> Subject | None:
        """The first subject that is `user` (appliesTo)."""
        return next((s for s in self.subjects if s.applies_to(user, self.namespace)), None)

    def describe(self, subject: Subject) -> str:
        """clusterRoleBindingDescriber / roleBindingDescriber."""
        name = f"{self.name}/{self.namespace}" if self.namespace else self.name
        return (f'{self.kind} "{name}" of {self.role_kind} "{self.role_name}" to '
                f"{subject.describe(self.namespace)}")


def _dict(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


# --- the snapshot -------------------------------------------------------------------------------

@dataclass(frozen=True)
class RBACView:
    """Roles and bindings at one moment, indexed for authorization."""
    cluster_roles: dict[str, tuple[Rule, ...]] = field(default_factory=dict)  # aggregated
    roles: dict[tuple[str, str], tuple[Rule, ...]] = field(default_factory=dict)  # (ns, name)
    cluster_role_bindings: tuple[Binding, ...] = ()
    role_bindings: dict[str, tuple[Binding, ...]] = field(default_factory=dict)  # by namespace

    def role_rules(self, kind: str, name: str, namespace: str) -> tuple[Rule, ...] | str:
        """GetRoleReferenceRules: the rules of a binding's role, or why there are none."""
        if kind == "ClusterRole":
            rules = self.cluster_roles.get(name)
        elif kind == "Role":
            rules = self.roles.get((namespace, name))
        else:
            return f'unsupported role reference kind: "{kind}"'
        if rules is None:
            return f'{kind.lower()}.{GROUP} "{name}" not found'
        return rules


def view(objects: Iterable[dict]) -> RBACView:
    """The snapshot of these Role, ClusterRole, RoleBinding and ClusterRoleBinding objects
    (others are ignored; malformed fields read as empty)."""
    cluster_roles: dict[str, dict] = {}
    roles: dict[tuple[str, str], tuple[Rule, ...]] = {}
    crbs: list[Binding] = []
    rbs: dict[str, list[Binding]] = {}
    for obj in objects:
        if not isinstance(obj, dict):
            continue
        kind, meta = obj.get("kind"), _dict(obj.get("metadata"))
        if kind == "ClusterRole":
            cluster_roles[_str(meta.get("name"))] = obj
        elif kind == "Role":
            roles[(_str(meta.get("namespace")), _str(meta.get("name")))] = _rules(obj)
        elif kind == "ClusterRoleBinding":
            crbs.append(Binding.parse(obj))
        elif kind == "RoleBinding":
            b = Binding.parse(obj)
            rbs.setdefault(b.namespace, []).append(b)
    by_name = attrgetter("name")
    return RBACView(aggregated_rules(cluster_roles), roles, tuple(sorted(crbs, key=by_name)),
                    {ns: tuple(sorted(bs, key=by_name)) for ns, bs in rbs.items()})


def _rules(role: dict) -> tuple[Rule, ...]:
    return tuple(Rule.parse(r) for r in _list(role.get("rules")))


def aggregated_rules(cluster_roles: dict[str, dict]) -> dict[str, tuple[Rule, ...]]:
    """Each ClusterRole's rules; one with an aggregationRule gets, instead of its own, the rules
    of the ClusterRoles its selectors reach (themselves aggregated: `admin` selects `edit`,
    which selects `view`), each rule once, the roles taken in name order, as the
    clusterrole-aggregation controller converges to. An aggregating role on a cycle (which the
    controller would rewrite forever) contributes its stored rules to every role reaching it.

    Each role's reach is walked once, not once per path: roles aggregating each other would
    otherwise take factorial time, and the view is built inside the apiserver's event loop."""
    selected = {name: _selected(name, role, cluster_roles) for name, role in cluster_roles.items()
                if isinstance(role.get("aggregationRule"), dict)}
    reach = {name: _reachable(name, selected) for name in selected}
    out: dict[str, tuple[Rule, ...]] = {}
    for name, role in cluster_roles.items():
        if name not in selected:
            out[name] = _rules(role)
            continue
        rules: dict[Rule, None] = {}  # ordered, each rule once
        for other in sorted(reach[name]):
            if other not in selected or other in reach[other]:
                rules.update(dict.fromkeys(_rules(cluster_roles[other])))
        out[name] = tuple(rules)
    return out


def _selected(name: str, role: dict, cluster_roles: dict[str, dict]) -> set[str]:
    """The other ClusterRoles that `role`'s aggregationRule selects."""
    found: set[str] = set()
    for selector in _list(role["aggregationRule"].get("clusterRoleSelectors")):
        if isinstance(selector, dict):
            found.update(other for other, obj in cluster_roles.items() if other != name
                         and selector_matches(selector, _dict(obj.get("metadata")).get("labels")))
    return found


def _reachable(name: str, selected: dict[str, set[str]]) -> set[str]:
    """The roles reachable from `name` through one or more aggregation selections (`name`
    itself only through a cycle)."""
    seen: set[str] = set()
    todo = list(selected[name])
    while todo:
        other = todo.pop()
        if other not in seen:
            seen.add(other)
            todo.extend(selected.get(other, ()))
    return seen


# --- decisions ----------------------------------------------------------------------------------

def _visit(user: UserInfo, namespace: str, v: RBACView
           ) -> Iterator[tuple[Binding, Subject, tuple[Rule, ...]] | str]:
    """VisitRulesFor: (binding, the subject that is `user`, the role's rules) of each binding
    that applies to `user` in `namespace` (cluster-wide ones first), or why a binding's role
    cannot be resolved."""
    scopes = [v.cluster_role_bindings]
    if namespace:
        scopes.append(v.role_bindings.get(namespace, ()))
    for bindings in scopes:
        for b in bindings:
            subject = b.subject_for(user)
            if subject is None:
                continue
            rules = v.role_rules(b.role_kind, b.role_name, b.namespace)
            yield rules if isinstance(rules, str) else (b, subject, rules)


def authorize(a: Attributes, v: RBACView | None) -> Decision:
    """Whether RBAC allows the request, and why. `v` None: the roles are not known yet, and
    only system:masters is allowed."""
    if SYSTEM_MASTERS in a.user.groups:
        return Decision(True)
    if v is None:
        return Decision(False, NOT_LOADED)
    errors: list[str] = []
    for found in _visit(a.user, a.namespace, v):
        if isinstance(found, str):
            errors.append(found)
            continue
        binding, subject, rules = found
        if any(rule.allows(a) for rule in rules):
            return Decision(True, f"RBAC: allowed by {binding.describe(subject)}")
    return Decision(False, f"RBAC: {aggregate(errors)}" if errors else "")


def aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate(...).Error(): one message as is, several deduplicated in []."""
    unique = list(dict.fromkeys(errors))
    if len(errors) == 1 or len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


class Rules(NamedTuple):
    """What SelfSubjectRulesReview reports: rules as the API shows them."""
    resource_rules: list[dict]       # ResourceRule: verbs, apiGroups, resources, resourceNames
    non_resource_rules: list[dict]   # NonResourceRule: verbs, nonResourceURLs
    incomplete: bool                 # RBAC enumerates everything it allows: always False
    evaluation_error: str            # roles that could not be resolved, as `authorize` words it


def rules_for(user: UserInfo, namespace: str, v: RBACView | None) -> Rules:
    """Every rule granted to `user` in `namespace` (RBACAuthorizer.RulesFor): a rule with
    resources is a resource rule, one with nonResourceURLs a non-resource rule. `v` None: the
    roles are not known yet (incomplete, saying so)."""
    if v is None:
        return Rules([], [], True, NOT_LOADED)
    resource, non_resource, errors = [], [], []
    for found in _visit(user, namespace, v):
        if isinstance(found, str):
            errors.append(found)
            continue
        for rule in found[2]:
            if rule.resources:
                resource.append({k: val for k, val in (
                    ("verbs", list(rule.verbs)), ("apiGroups", list(rule.api_groups)),
                    ("resources", list(rule.resources)),
                    ("resourceNames", list(rule.resource_names))) if val or k == "verbs"})
            if rule.non_resource_urls:
                non_resource.append({"verbs": list(rule.verbs),
                                     "nonResourceURLs": list(rule.non_resource_urls)})
    return Rules(resource, non_resource, False, aggregate(errors) if errors else "")


__all__ = ["Rule", "Subject", "Binding", "RBACView", "Rules", "view", "authorize", "rules_for",
           "aggregated_rules", "aggregate", "verb_matches", "api_group_matches",
           "resource_matches", "resource_name_matches", "non_resource_url_matches", "NOT_LOADED"]
