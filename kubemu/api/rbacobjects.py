"""Defaulting and validation of Role, ClusterRole, RoleBinding and ClusterRoleBinding
(rbac.authorization.k8s.io/v1), with objects.py's contract:

    default_rolebinding(obj) / default_clusterrolebinding(obj)   -> a new, defaulted object
    validate_role(obj, strict=True) / validate_clusterrole / validate_rolebinding /
    validate_clusterrolebinding                                   -> [FieldError, ...]
    validate_binding_update(old, new)   -> [FieldError, ...] (a binding's roleRef is immutable)

As kube-apiserver's rbac validation has them (pkg/apis/rbac/validation): names are path
segments (`system:node` is a valid name, `a/b` is not); every rule needs verbs; a resource rule
needs apiGroups and resources; nonResourceURLs only in ClusterRoles, never with resources; an
aggregationRule has at least one selector; roleRef names a Role or ClusterRole (a
ClusterRoleBinding: a ClusterRole) of this API group; subjects are Users, Groups (API group
rbac.authorization.k8s.io) or ServiceAccounts (core group; a ClusterRoleBinding's need a
namespace). Defaulting fills roleRef.apiGroup and each subject's apiGroup from its kind.
"""
from __future__ import annotations

from typing import Any, Callable

from .fielderrors import FieldError, child, invalid, not_supported, required
from .meta import Checker, check_label_selector, register, table
from .pod import LIST, OBJ, STR, STRS, dns1123_subdomain_errors

GROUP = "rbac.authorization.k8s.io"
USER, GROUP_KIND, SERVICE_ACCOUNT = "User", "Group", "ServiceAccount"
SUBJECT_KINDS = (SERVICE_ACCOUNT, USER, GROUP_KIND)  # the order of Kubernetes' message

_META = "apiVersion:string kind:string metadata:ObjectMeta"
_BINDING = f"{_META} subjects:[]Subject roleRef:RoleRef"

register(
    Role=table("apiVersion kind metadata rules", {"rules": LIST},
               types=f"{_META} rules:[]PolicyRule"),
    ClusterRole=table("apiVersion kind metadata rules aggregationRule",
                      {"rules": LIST, "aggregationRule": OBJ},
                      types=f"{_META} rules:[]PolicyRule aggregationRule:AggregationRule"),
    PolicyRule=table("verbs apiGroups resources resourceNames nonResourceURLs",
                     {"verbs": STRS, "apiGroups": STRS, "resources": STRS,
                      "resourceNames": STRS, "nonResourceURLs": STRS},
                     types="""verbs:[]string apiGroups:[]string resources:[]string
                     resourceNames:[]string nonResourceURLs:[]string"""),
    AggregationRule=table("clusterRoleSelectors", {"clusterRoleSelectors": LIST},
                          types="clusterRoleSelectors:[]LabelSelector"),
    RoleBinding=table("apiVersion kind metadata subjects roleRef",
                      {"subjects": LIST, "roleRef": OBJ}, types=_BINDING),
    ClusterRoleBinding=table("apiVersion kind metadata subjects roleRef",
                             {"subjects": LIST, "roleRef": OBJ}, types=_BINDING),
    Subject=table("kind apiGroup name namespace",
                  {"kind": STR, "apiGroup": STR, "name": STR, "namespace": STR},
                  types="kind:string apiGroup:string name:string namespace:string"),
    RoleRef=table("apiGroup kind name", {"apiGroup": STR, "kind": STR, "name": STR},
                  types="apiGroup:string kind:string name:string"),
)


# --- names ------------------------------------------------------------------------------------

def path_segment_errors(name: str) -> list[str]:
    """ValidateRBACName (path.IsValidPathSegmentName): anything that can be one URL path
    segment, so `system:kube-scheduler` is a name."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


# --- defaults ---------------------------------------------------------------------------------

def _defaulted(obj: Any, fill: Callable[[dict], None], *, namespaced: bool) -> Any:
    # objects.py imports this module to merge its tables, hence the late import of its frame.
    from .objects import _defaulted as frame
    return frame(obj, fill, namespaced=namespaced)


def _default_binding(binding: dict) -> None:
    """SetDefaults_RoleBinding / _ClusterRoleBinding and SetDefaults_Subject."""
    ref = binding.get("roleRef")
    if ref is None:
        ref = binding["roleRef"] = {}
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = GROUP
    subjects = binding.get("subjects")
    for subject in subjects if isinstance(subjects, list) else []:
        if isinstance(subject, dict) and not subject.get("apiGroup") \
                and subject.get("kind") in (USER, GROUP_KIND):
            subject["apiGroup"] = GROUP


def default_role(obj: Any) -> Any:
    """Roles have no defaults (the namespace aside)."""
    return _defaulted(obj, lambda role: None, namespaced=True)


def default_clusterrole(obj: Any) -> Any:
    """ClusterRoles have no defaults."""
    return _defaulted(obj, lambda role: None, namespaced=False)


def default_rolebinding(obj: Any) -> Any:
    return _defaulted(obj, _default_binding, namespaced=True)


def default_clusterrolebinding(obj: Any) -> Any:
    return _defaulted(obj, _default_binding, namespaced=False)


# --- validation -------------------------------------------------------------------------------

def _validate(obj: Any, kind: str, strict: bool, body: Callable[[Checker, dict], None]):
    from .objects import _validate as frame  # see _defaulted
    return frame(obj, kind, strict, body, name_rule=path_segment_errors)


def _rules(c: Checker, value: Any, namespaced: bool) -> None:
    """ValidatePolicyRule for each rule."""
    for path, rule in c.each_obj(c.array(value, "rules") or [], "rules", "PolicyRule"):
        def given(field: str) -> list:
            v = rule.get(field)
            return v if isinstance(v, list) else []
        if not given("verbs"):
            c.add(required(child(path, "verbs"), "verbs must contain at least one value"))
        urls = given("nonResourceURLs")
        if urls:
            url_path = child(path, "nonResourceURLs")
            if namespaced:
                c.add(invalid(url_path, urls, "namespaced rules cannot apply to non-resource URLs"))
            if given("apiGroups") or given("resources") or given("resourceNames"):
                c.add(invalid(url_path, urls,
                              "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not given("apiGroups"):
            c.add(required(child(path, "apiGroups"),
                           "resource rules must supply at least one api group"))
        if not given("resources"):
            c.add(required(child(path, "resources"),
                           "resource rules must supply at least one resource"))


def validate_role(obj: Any, *, strict: bool = True) -> list[FieldError]:
    return _validate(obj, "Role", strict, lambda c, role: _rules(c, role.get("rules"), True))


def validate_clusterrole(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, role: dict) -> None:
        _rules(c, role.get("rules"), False)
        agg = c.obj(role.get("aggregationRule"), "aggregationRule", "AggregationRule")
        if agg is None:
            return
        path = "aggregationRule.clusterRoleSelectors"
        selectors = c.array(agg.get("clusterRoleSelectors"), path)
        if not selectors:
            c.add(required(path, "at least one clusterRoleSelector required if "
                                 "aggregationRule is non-nil"))
        for i, selector in enumerate(selectors or []):
            if selector is None:
                c.invalid(f"{path}[{i}]", selector, "must be an object")
            else:
                check_label_selector(c, selector, f"{path}[{i}]")
    return _validate(obj, "ClusterRole", strict, body)


def _role_ref(c: Checker, binding: dict, kinds: tuple[str, ...]) -> None:
    ref = c.obj(binding.get("roleRef"), "roleRef", "RoleRef")
    ref = ref if ref is not None else {}
    group = ref.get("apiGroup") if ref.get("apiGroup") is not None else ""
    if group != GROUP:
        c.add(not_supported("roleRef.apiGroup", group, (GROUP,)))
    kind = ref.get("kind") if ref.get("kind") is not None else ""
    if kind not in kinds:
        c.add(not_supported("roleRef.kind", kind, kinds))
    name = ref.get("name")
    if not name:
        c.add(required("roleRef.name"))
    elif isinstance(name, str):
        for msg in path_segment_errors(name):
            c.invalid("roleRef.name", name, msg)


def _subjects(c: Checker, value: Any, namespaced: bool) -> None:
    """ValidateRoleBindingSubject for each subject."""
    for path, subject in c.each_obj(c.array(value, "subjects") or [], "subjects", "Subject"):
        name = subject.get("name")
        if not name:
            c.add(required(child(path, "name")))
        group = subject.get("apiGroup") if isinstance(subject.get("apiGroup"), str) else ""
        kind = subject.get("kind") if subject.get("kind") is not None else ""
        if kind == SERVICE_ACCOUNT:
            if isinstance(name, str) and name:
                for msg in dns1123_subdomain_errors(name):
                    c.invalid(child(path, "name"), name, msg)
            if group:
                c.add(not_supported(child(path, "apiGroup"), group, ("",)))
            if not namespaced and not subject.get("namespace"):
                c.add(required(child(path, "namespace")))
        elif kind in (USER, GROUP_KIND):
            if group != GROUP:
                c.add(not_supported(child(path, "apiGroup"), group, (GROUP,)))
        else:
            c.add(not_supported(child(path, "kind"), kind, SUBJECT_KINDS))


def validate_rolebinding(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, binding: dict) -> None:
        _role_ref(c, binding, ("Role", "ClusterRole"))
        _subjects(c, binding.get("subjects"), True)
    return _validate(obj, "RoleBinding", strict, body)


def validate_clusterrolebinding(obj: Any, *, strict: bool = True) -> list[FieldError]:
    def body(c: Checker, binding: dict) -> None:
        _role_ref(c, binding, ("ClusterRole",))
        _subjects(c, binding.get("subjects"), False)
    return _validate(obj, "ClusterRoleBinding", strict, body)


def validate_binding_update(old: Any, new: Any) -> list[FieldError]:
    """ValidateRoleBindingUpdate's own rule: a binding's roleRef never changes (delete and
    recreate the binding instead)."""
    before = old.get("roleRef") if isinstance(old, dict) else None
    after = new.get("roleRef") if isinstance(new, dict) else None
    if before != after:
        return [invalid("roleRef", after, "cannot change roleRef")]
    return []


DEFAULTERS: dict[str, Callable[[Any], Any]] = {
    "Role": default_role, "ClusterRole": default_clusterrole,
    "RoleBinding": default_rolebinding, "ClusterRoleBinding": default_clusterrolebinding,
}
VALIDATORS: dict[str, Callable[..., list[FieldError]]] = {
    "Role": validate_role, "ClusterRole": validate_clusterrole,
    "RoleBinding": validate_rolebinding, "ClusterRoleBinding": validate_clusterrolebinding,
}
# Rules of an update beyond the new object's own validity (objects.validate_object_update).
UPDATE_VALIDATORS: dict[str, Callable[[Any, Any], list[FieldError]]] = {
    "RoleBinding": validate_binding_update, "ClusterRoleBinding": validate_binding_update,
}
