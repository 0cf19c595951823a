"""ObjectMeta validation shared by every kind (ValidateObjectMeta, ValidateObjectMetaUpdate).

    validate_object_meta(meta, *, namespaced, path="metadata", name_rule=None, strict=True)
        -> [FieldError, ...]
    validate_object_meta_update(old_meta, new_meta, *, require_resource_version=True, path=...)
    validate_update(old_obj, new_obj, *, require_resource_version=True)  (their metadata)

What is checked, with Kubernetes' messages: name (a DNS-1123 subdomain, or a label for
Namespaces; `name or generateName is required`), generateName (a prefix), namespace (required
for namespaced kinds, `Forbidden: not allowed on this type` for cluster-scoped ones), labels,
annotations (at most 256 KiB in all), ownerReferences (apiVersion, kind, name, uid; at most one
controller), finalizers (qualified names), and the types of the fields the server sets (uid,
resourceVersion, generation >= 0, RFC 3339 timestamps). Like pod.py, nothing here raises on a
malformed object, and a field that defaulting or the server would fill may be absent.

Also the shared machinery of objects.py: a Checker that knows every kind's field tables, and
checks for timestamps, label selectors and int-or-percent values.
"""
from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Callable

from . import pod
from .fielderrors import FieldError, child, forbidden, go_quote, index, required
from .pod import (_absent, _annotations, _is_int, _labels, _name_rule, dns1123_label_errors,
                  dns1123_subdomain_errors, label_value_errors, qualified_name_errors)

__all__ = ["validate_object_meta", "validate_object_meta_update", "validate_update", "Checker",
           "KNOWN_FIELDS", "SHAPES", "ENUMS", "TYPES", "SERVER_FIELDS"]

# --- field tables of the kinds beyond Pod (objects.py fills them in) ---------------------------

KNOWN_FIELDS: dict[str, frozenset[str]] = {
    "OwnerReference": frozenset("apiVersion kind name uid controller blockOwnerDeletion".split()),
}
SHAPES: dict[str, dict[str, str]] = {
    "OwnerReference": {"apiVersion": pod.STR, "kind": pod.STR, "name": pod.STR, "uid": pod.STR,
                       "controller": pod.BOOL, "blockOwnerDeletion": pod.BOOL},
}
ENUMS: dict[str, dict[str, tuple[str, ...]]] = {}
# type -> field -> the field's type, in Go's notation: "PodSpec", "[]Container", "map[string]string",
# "string", "integer", "boolean", "IntOrString", "Time", "Quantity" (what OpenAPI and explain show).
TYPES: dict[str, dict[str, str]] = {
    "OwnerReference": {"apiVersion": "string", "kind": "string", "name": "string",
                       "uid": "string", "controller": "boolean", "blockOwnerDeletion": "boolean"},
}

# Fields of ObjectMeta the server sets; a client's values are overwritten on create.
SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp",
                 "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "managedFields")


def table(known: str, shapes: dict[str, str] | None = None,
          enums: dict[str, tuple[str, ...]] | None = None,
          types: dict[str, str] | str | None = None) -> tuple:
    """(known fields, shapes, enums, types) of one object type, for `register`; `types` may be
    written "field:type field:type ..." (pod.field_types)."""
    if isinstance(types, str):
        types = pod.field_types(types)
    return frozenset(known.split()), shapes or {}, enums or {}, types or {}


def register(**tables: tuple) -> None:
    for kind, (known, shapes, enums, types) in tables.items():
        KNOWN_FIELDS[kind] = known
        if shapes:
            SHAPES[kind] = shapes
        if enums:
            ENUMS[kind] = enums
        if types:
            TYPES[kind] = types


class Checker(pod._Checker):
    """pod.py's checker, looking up kinds in this module's tables before pod.py's."""

    def unknown_fields(self, obj: dict, path: str, kind: str) -> None:
        if self.strict:
            self.fields_outside(obj, path, KNOWN_FIELDS.get(kind) or pod.KNOWN_FIELDS[kind])

    def shapes(self, obj: dict, path: str, kind: str) -> None:
        for field, shape in (SHAPES.get(kind) or pod.SHAPES.get(kind, {})).items():
            value = obj.get(field)
            if value is not None:
                pod._SHAPE_CHECKS[shape](self, value, child(path, field))

    def enums(self, obj: dict, path: str, kind: str) -> None:
        for field, allowed in (ENUMS.get(kind) or pod.ENUMS.get(kind, {})).items():
            value = obj.get(field)
            if value == "":
                self.add(required(child(path, field)))
            elif value is not None and value not in allowed:
                self.add(pod.not_supported(child(path, field), value, allowed))

    def nonnegative(self, value: Any, path: str) -> int | None:
        """ValidateNonnegativeField; the integer if it is one."""
        number = self.integer(value, path)
        if number is not None and number < 0:
            self.invalid(path, number, "must be greater than or equal to 0")
        return number

    def timestamp(self, value: Any, path: str) -> None:
        """metav1.Time / MicroTime: an RFC 3339 date-time (fractional seconds allowed)."""
        text = self.string(value, path)
        if text and not is_timestamp(text):
            self.invalid(path, text, 'must be an RFC 3339 date-time, e.g. "2006-01-02T15:04:05Z"')


_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def is_timestamp(text: str) -> bool:
    if not _TIMESTAMP.fullmatch(text) or not text.isascii():
        return False
    try:  # a real day of its month (year 1 on), hour < 24, minute and second < 60: datetime's checks,
        # without strptime, which costs several times as much and re-parses what the pattern matched
        datetime(int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]), int(text[14:16]),
                 int(text[17:19]))
    except ValueError:
        return False
    zone = text[-6:]
    return zone[-1] in "Zz" or (int(zone[1:3]) < 24 and int(zone[4:6]) < 60)


# --- ObjectMeta -------------------------------------------------------------------------------

def validate_object_meta(meta: Any, *, namespaced: bool, path: str = "metadata",
                         name_rule: Callable[[str], list[str]] | None = None,
                         strict: bool = True) -> list[FieldError]:
    """Every reason `meta` is not valid metadata for an object of a namespaced (or
    cluster-scoped) kind. `name_rule` defaults to DNS-1123 subdomain names."""
    c = Checker(strict)
    check_object_meta(c, meta, path, namespaced=namespaced, name_rule=name_rule)
    return c.errors


def check_object_meta(c: Checker, value: Any, path: str, *, namespaced: bool,
                      name_rule: Callable[[str], list[str]] | None = None) -> None:
    rule = name_rule or dns1123_subdomain_errors
    name_path = child(path, "name")
    if value is None:
        c.add(required(name_path, "name or generateName is required"))
        if namespaced:
            c.add(required(child(path, "namespace")))
        return
    meta = c.obj(value, path)
    if meta is None:
        return
    c.unknown_fields(meta, path, "ObjectMeta")
    name = c.string(meta.get("name"), name_path)
    generate = c.string(meta.get("generateName"), child(path, "generateName"))
    if _absent(meta.get("name")) and _absent(meta.get("generateName")):
        c.add(required(name_path, "name or generateName is required"))
    if name:
        _name_rule(c, name, name_path, rule)
    if generate:
        # A prefix: the random suffix appended later makes a trailing dash legal.
        for msg in rule(generate.rstrip("-") or "a"):
            c.invalid(child(path, "generateName"), generate, msg)
    ns_path = child(path, "namespace")
    namespace = c.string(meta.get("namespace"), ns_path)
    if namespaced:
        if _absent(meta.get("namespace")):
            c.add(required(ns_path))
        elif namespace is not None:
            _name_rule(c, namespace, ns_path, dns1123_label_errors)
    elif meta.get("namespace") not in (None, ""):
        c.add(forbidden(ns_path, "not allowed on this type"))
    _labels(c, meta.get("labels"), child(path, "labels"))
    _annotations(c, meta.get("annotations"), child(path, "annotations"))
    _owner_references(c, meta.get("ownerReferences"), child(path, "ownerReferences"))
    _finalizers(c, meta.get("finalizers"), child(path, "finalizers"))
    for field in ("uid", "resourceVersion", "selfLink"):
        c.string(meta.get(field), child(path, field))
    c.nonnegative(meta.get("generation"), child(path, "generation"))
    c.nonnegative(meta.get("deletionGracePeriodSeconds"), child(path, "deletionGracePeriodSeconds"))
    for field in ("creationTimestamp", "deletionTimestamp"):
        c.timestamp(meta.get(field), child(path, field))
    c.array(meta.get("managedFields"), child(path, "managedFields"))


def _owner_references(c: Checker, value: Any, path: str) -> None:
    """ValidateOwnerReferences. Like Kubernetes, errors name the list, not the element."""
    refs = c.array(value, path) or []
    first_controller = ""
    for i, ref in enumerate(refs):
        ref = c.obj(ref, index(path, i), "OwnerReference", element=True)
        if ref is None:
            continue
        api_version = ref.get("apiVersion") if isinstance(ref.get("apiVersion"), str) else ""
        version = api_version.rpartition("/")[2]
        for field, shown, missing in (("apiVersion", api_version, not version),
                                      ("kind", ref.get("kind"), _absent(ref.get("kind"))),
                                      ("name", ref.get("name"), _absent(ref.get("name"))),
                                      ("uid", ref.get("uid"), _absent(ref.get("uid")))):
            if missing:
                what = "version" if field == "apiVersion" else field
                c.invalid(child(path, field), shown or "", f"{what} must not be empty")
        if ref.get("controller") is True:
            current = f"{ref.get('kind')}/{ref.get('name')}"
            if first_controller:
                c.invalid(path, refs, "Only one reference can have Controller set to true. "
                          f'Found "true" in references for {first_controller} and {current}')
            else:
                first_controller = current


def _finalizers(c: Checker, value: Any, path: str) -> None:
    for name in c.strings(value, path) or []:
        _name_rule(c, name, path, qualified_name_errors)


# --- updates ----------------------------------------------------------------------------------

_IMMUTABLE = ("name", "namespace", "uid", "creationTimestamp", "deletionGracePeriodSeconds")


def validate_object_meta_update(old: Any, new: Any, *, require_resource_version: bool = True,
                                path: str = "metadata") -> list[FieldError]:
    """ValidateObjectMetaUpdate's rules: name, namespace, uid, creationTimestamp are immutable
    (`field is immutable`); an update carries a resourceVersion when `require_resource_version`;
    generation never goes down; no new finalizers once deletion started. A server-set field
    the new object leaves out (uid, creationTimestamp) counts as unchanged: the apiserver
    copies it over, as rest.BeforeUpdate does."""
    c = Checker(False)
    old = old if isinstance(old, dict) else {}
    new = new if isinstance(new, dict) else {}
    if require_resource_version and _absent(new.get("resourceVersion")):
        c.invalid(child(path, "resourceVersion"), new.get("resourceVersion") or "",
                  "must be specified for an update")
    for field in _IMMUTABLE:
        before, after = old.get(field), new.get(field)
        if field in ("uid", "creationTimestamp", "deletionGracePeriodSeconds") and after is None:
            continue
        if (before or None) != (after or None) and not (before == 0 and after == 0):
            c.invalid(child(path, field), after, "field is immutable")
    if _is_int(old.get("generation")) and _is_int(new.get("generation")) \
            and new["generation"] < old["generation"]:
        c.invalid(child(path, "generation"), new["generation"], "must not be decremented")
    if old.get("deletionTimestamp"):
        before = set(_str_list(old.get("finalizers")))
        extra = [f for f in _str_list(new.get("finalizers")) if f not in before]
        if extra:
            shown = ", ".join(go_quote(f) for f in sorted(set(extra)))
            c.add(forbidden(child(path, "finalizers"), "no new finalizers can be added if the "
                            f"object is being deleted, found new finalizers []string{{{shown}}}"))
    return c.errors


def validate_update(old_obj: Any, new_obj: Any, *,
                    require_resource_version: bool = True) -> list[FieldError]:
    """validate_object_meta_update on two objects' metadata."""
    def meta(obj: Any) -> Any:
        return obj.get("metadata") if isinstance(obj, dict) else None
    return validate_object_meta_update(meta(old_obj), meta(new_obj),
                                       require_resource_version=require_resource_version)


def _str_list(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


# --- label selectors (metav1.LabelSelector) ---------------------------------------------------

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")

register(
    LabelSelector=table("matchLabels matchExpressions", {"matchExpressions": pod.LIST},
                        types={"matchLabels": "map[string]string",
                               "matchExpressions": "[]LabelSelectorRequirement"}),
    LabelSelectorRequirement=table("key operator values", {"key": pod.STR, "operator": pod.STR},
                                   types={"key": "string", "operator": "string",
                                          "values": "[]string"}),
)


def check_label_selector(c: Checker, value: Any, path: str) -> dict | None:
    """ValidateLabelSelector; returns the selector if it can be evaluated, else None."""
    before = len(c.errors)
    sel = c.obj(value, path, "LabelSelector")
    if sel is None:
        return None
    _labels(c, sel.get("matchLabels"), child(path, "matchLabels"))
    exprs_path = child(path, "matchExpressions")
    for e_path, expr in c.each_obj(sel.get("matchExpressions") if isinstance(
            sel.get("matchExpressions"), list) else [], exprs_path, "LabelSelectorRequirement"):
        op = expr.get("operator")
        values_path = child(e_path, "values")
        values = c.strings(expr.get("values"), values_path)
        if op in ("In", "NotIn"):
            if not values:
                c.add(required(values_path, "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                c.add(forbidden(values_path,
                                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        elif isinstance(op, str):
            c.invalid(child(e_path, "operator"), op, "not a valid selector operator")
        key = expr.get("key")
        if isinstance(key, str):
            _name_rule(c, key, child(e_path, "key"), qualified_name_errors)
        for i, v in enumerate(values or []):
            for msg in label_value_errors(v):
                c.invalid(index(values_path, i), v, msg)
    return sel if len(c.errors) == before else None


def selector_matches(selector: dict, labels: Any) -> bool:
    """Whether a valid LabelSelector matches `labels` (a map; anything else is empty)."""
    labels = labels if isinstance(labels, dict) else {}
    for k, v in _dict(selector.get("matchLabels")).items():
        if labels.get(k) != v:
            return False
    for expr in _list(selector.get("matchExpressions")):
        if not isinstance(expr, dict):
            return False
        k, op, values = expr.get("key"), expr.get("operator"), _list(expr.get("values"))
        if not isinstance(k, str):
            return False
        if op == "In" and labels.get(k) not in values:
            return False
        if op == "NotIn" and k in labels and labels[k] in values:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def selector_is_empty(selector: dict) -> bool:
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def format_selector(selector: Any) -> str:
    """metav1.FormatLabelSelector of a valid selector: "app=web,tier in (a,b)"; "" if none."""
    if not isinstance(selector, dict):
        return ""
    reqs: list[tuple[str, str]] = []
    for k, v in _dict(selector.get("matchLabels")).items():
        reqs.append((str(k), f"{k}={v}"))
    for expr in _list(selector.get("matchExpressions")):
        if not isinstance(expr, dict):
            continue
        k, op = str(expr.get("key")), expr.get("operator")
        values = ",".join(sorted(str(v) for v in _list(expr.get("values"))))
        text = {"In": f"{k} in ({values})", "NotIn": f"{k} notin ({values})",
                "Exists": k, "DoesNotExist": f"!{k}"}.get(op)
        if text is not None:
            reqs.append((k, text))
    return ",".join(text for _, text in sorted(reqs, key=lambda r: r[0]))


# --- int-or-percent (intstr.IntOrString) ----------------------------------------------------

_PERCENT = "[0-9]+%"
PERCENT_MSG = pod._regex_error("a valid percent string must be a numeric string followed by an "
                               "ending '%'", _PERCENT, "1%", "93%")


def check_int_or_percent(c: Checker, value: Any, path: str) -> int | None:
    """ValidatePositiveIntOrPercent; returns the number (percent or count) when valid."""
    if value is None:
        return None
    if _is_int(value):
        return c.nonnegative(value, path)
    if isinstance(value, str):
        if re.fullmatch(_PERCENT, value) and value.isascii():
            return int(value[:-1])
        c.invalid(path, value, PERCENT_MSG)
        return None
    c.invalid(path, value, "must be an integer or a percentage string")
    return None


__all__ += ["check_object_meta", "check_label_selector", "selector_matches", "format_selector",
            "check_int_or_percent", "is_timestamp", "register", "table"]
