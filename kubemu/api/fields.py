"""Field selectors: `--field-selector metadata.name=x,spec.nodeName!=,status.phase=Running`.

A port of k8s.io/apimachinery/pkg/fields (ParseSelector, hasTerm/notHasTerm, escaping) plus the
apiserver's per-resource check of which fields may be selected on:

    >>> s = parse_field_selector("status.phase=Running,spec.nodeName!=", POD_FIELDS)
    >>> str(s)
    'spec.nodeName!=,status.phase=Running'
    >>> s.matches({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    True

Only `=`, `==` and `!=` exist. Terms are split on unescaped commas; in values `\\,`, `\\=` and
`\\\\` stand for `,`, `=` and `\\`. Nothing is trimmed: `a = b` selects on the field "a ".
A field absent from the object compares as "" (so `spec.nodeName=` matches unscheduled pods),
booleans as "true"/"false" and numbers as their decimal text.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
_TERM_OPERATORS = (NOT_EQUALS, DOUBLE_EQUALS, EQUALS)  # the order splitTerm tries them in

# What the apiserver lets you select on (pkg/apis/core/v1/conversion.go and friends).
META_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
POD_FIELDS = META_FIELDS | {
    "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
    "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs",
    "status.nominatedNodeName"}
NODE_FIELDS = META_FIELDS | {"spec.unschedulable"}
EVENT_FIELDS = META_FIELDS | {
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"}
REPLICASET_FIELDS = META_FIELDS | {"status.replicas"}
SECRET_FIELDS = META_FIELDS | {"type"}
NAMESPACE_FIELDS = META_FIELDS | {"status.phase"}
JOB_FIELDS = META_FIELDS | {"status.successful"}

FIELDS_BY_KIND = {"Pod": POD_FIELDS, "Node": NODE_FIELDS, "Event": EVENT_FIELDS,
                  "ReplicaSet": REPLICASET_FIELDS, "Secret": SECRET_FIELDS,
                  "Namespace": NAMESPACE_FIELDS, "Job": JOB_FIELDS}


def supported_fields(kind: str) -> frozenset[str]:
    """The selectable fields of a kind: metadata.name and metadata.namespace at least."""
    return FIELDS_BY_KIND.get(kind, META_FIELDS)


class FieldSelectorError(ValueError):
    """A field selector that does not parse, or selects on a field the resource lacks."""


def escape_value(value: str) -> str:
    """fields.EscapeValue."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(text: str) -> str:
    """fields.UnescapeValue: undo escape_value; a bare `,` or `=` or a bad escape is an error."""
    if "\\" not in text and "=" not in text and "," not in text:
        return text
    out = []
    in_slash = False
    for ch in text:
        if in_slash:
            if ch not in "\\,=":
                raise FieldSelectorError(
                    f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            raise FieldSelectorError(f"invalid field selector: unescaped character in value: {ch}")
        else:
            out.append(ch)
    if in_slash:
        raise FieldSelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def field_value(obj: Any, path: str) -> str:
    """The selectable text of the dotted `path` in `obj`; "" when any part is missing."""
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return ""
        value = value[part]
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if path == "status.podIPs" and isinstance(value, list):
        # the apiserver indexes the first IP of each family; kubemu joins them
        return ",".join(str(v.get("ip", "")) for v in value if isinstance(v, Mapping))
    return str(value)


@dataclass(frozen=True)
class Term:
    field: str
    operator: str  # "=", "==" or "!="
    value: str

    def matches(self, obj: Any) -> bool:
        have = field_value(obj, self.field)
        return have != self.value if self.operator == NOT_EQUALS else have == self.value

    def __str__(self) -> str:
        op = NOT_EQUALS if self.operator == NOT_EQUALS else EQUALS
        return f"{self.field}{op}{escape_value(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    """An AND of terms; empty matches everything."""

    terms: tuple[Term, ...] = ()

    def matches(self, obj: Any) -> bool:
        return all(t.matches(obj) for t in self.terms)

    def empty(self) -> bool:
        return not self.terms

    def requires_exact_match(self, field: str) -> str | None:
        """fields.Selector.RequiresExactMatch: the value `field` must equal, else None."""
        for t in self.terms:
            if t.field == field and t.operator != NOT_EQUALS:
                return t.value
        return None

    def fields(self) -> list[str]:
        return [t.field for t in self.terms]

    def __str__(self) -> str:
        return ",".join(str(t) for t in self.terms)


EVERYTHING = FieldSelector()


def _split_terms(text: str) -> list[str]:
    if not text:
        return []
    terms, start, in_slash = [], 0, False
    for i, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def parse_field_selector(text: str, supported: Iterable[str] | None = None) -> FieldSelector:
    """fields.ParseSelector, then (when `supported` is given) the apiserver's field check.

    Raises FieldSelectorError: `invalid selector: 'x'; can't understand 'x'` for a term without
    an operator, `field label not supported: spec.foo` for a field outside `supported`.
    """
    if not isinstance(text, str):
        raise FieldSelectorError(f"field selector must be a string, not {type(text).__name__}")
    terms = []
    for part in sorted(_split_terms(text)):
        if part == "":
            continue
        split = _split_term(part)
        if split is None:
            raise FieldSelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        lhs, op, rhs = split
        op = NOT_EQUALS if op == NOT_EQUALS else EQUALS  # hasTerm does not remember "=="
        terms.append(Term(lhs, op, unescape_value(rhs)))
    if supported is not None:
        allowed = set(supported)
        for t in terms:
            if t.field not in allowed:
                raise FieldSelectorError(f"field label not supported: {t.field}")
    return FieldSelector(tuple(terms))


parse = parse_field_selector


def selector_from_set(fields: Mapping[str, str] | None) -> FieldSelector:
    """fields.SelectorFromSet: `field=value` for every pair, sorted by field."""
    return FieldSelector(tuple(Term(k, EQUALS, v) for k, v in sorted((fields or {}).items())))


def one_term_equal(field: str, value: str) -> FieldSelector:
    """fields.OneTermEqualSelector."""
    return FieldSelector((Term(field, EQUALS, value),))
