"""Label selectors: the `-l` strings kubectl accepts and the LabelSelector objects in specs.

A port of k8s.io/apimachinery/pkg/labels (Parse, Requirement, Selector) and of
metav1.LabelSelectorAsSelector / ValidateLabelSelector, with Kubernetes' error wording:

    >>> s = parse_selector("environment in (production, qa), tier!=frontend, !canary")
    >>> str(s)
    '!canary,environment in (production,qa),tier!=frontend'
    >>> s.matches({"environment": "qa", "tier": "backend"})
    True

Grammar (as apimachinery's lexer and parser implement it):

    selector    := "" | requirement ("," requirement)*
    requirement := ["!"] KEY
                 | KEY ("=" | "==" | "!=" | ">" | "<") [VALUE]
                 | KEY ("in" | "notin") "(" [VALUE ("," VALUE)*] ")"

Whitespace (space, tab, CR, LF) separates tokens and is otherwise ignored; an identifier runs until
whitespace or one of `= ! ( ) , > <`. Requirements are kept sorted by key, which is the canonical
order `str()` prints. Syntax errors raise LabelSelectorError (a ValueError) whose message is
Kubernetes' (`unable to parse requirement: ...`, `found ',', expected: ...`) followed by the
character position of the offending token.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kubemu.api.fielderrors import (FieldError, ValidationError, child, forbidden, go_quote,
                                    index, invalid, not_supported, required)
from kubemu.api.pod import label_value_errors, qualified_name_errors

# selection.Operator values
DOES_NOT_EXIST = "!"
EQUALS = "="
DOUBLE_EQUALS = "=="
IN = "in"
NOT_EQUALS = "!="
NOT_IN = "notin"
EXISTS = "exists"
GREATER_THAN = "gt"
LESS_THAN = "lt"

OPERATORS = (DOES_NOT_EXIST, EQUALS, DOUBLE_EQUALS, IN, NOT_EQUALS, NOT_IN, EXISTS, GREATER_THAN,
             LESS_THAN)
_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)

# metav1.LabelSelectorOperator -> selection.Operator
SELECTOR_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}

_INT64 = re.compile(r"[+-]?[0-9]+")


class LabelSelectorError(ValueError):
    """A selector that does not parse or whose requirements are invalid.

    `message` is Kubernetes' text; str() adds where in the input it went wrong.
    """

    def __init__(self, message: str, position: int | None = None, text: str | None = None):
        self.message = message
        self.position = position
        self.text = text
        full = message
        if position is not None:
            full += f" (at position {position}"
            full += f" in {text!r})" if text is not None else ")"
        super().__init__(full)


def _int64(text: str) -> int | None:
    if not _INT64.fullmatch(text):
        return None
    n = int(text)
    return n if -(2**63) <= n < 2**63 else None


def _aggregate(errors: list[FieldError]) -> str:
    texts = list(dict.fromkeys(str(e) for e in errors))
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


@dataclass(frozen=True)
class Requirement:
    """One `key op values` term. Build with `requirement()` to get Kubernetes' validation."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, Any] | None) -> bool:
        labels = labels or {}
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels or not isinstance(labels[self.key], str):
                return False
            have = _int64(labels[self.key])
            want = _int64(self.values[0]) if len(self.values) == 1 else None
            if have is None or want is None:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        if op == EXISTS:
            return self.key
        if op in (IN, NOT_IN):
            return f"{self.key} {op} ({','.join(sorted(self.values))})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
        return self.key + symbol + (self.values[0] if self.values else "")


def requirement_errors(key: str, operator: str, values: Iterable[str],
                       path: str = "") -> list[FieldError]:
    """labels.NewRequirement's checks, as field errors (paths relative to `path`)."""
    values = list(values)
    errors = []
    key_errors = qualified_name_errors(key) if isinstance(key, str) else ["must be a string"]
    if key_errors:
        errors.append(invalid(child(path, "key"), key, "; ".join(key_errors)))
    vpath = child(path, "values")
    if operator in (IN, NOT_IN):
        if not values:
            errors.append(invalid(vpath, values, "for 'in', 'notin' operators, values set can't be empty"))
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(values) != 1:
            errors.append(invalid(vpath, values, "exact-match compatibility requires one single value"))
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if values:
            errors.append(invalid(vpath, values, "values set must be empty for exists and does not exist"))
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(values) != 1:
            errors.append(invalid(vpath, values, "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, v in enumerate(values):
            if not isinstance(v, str) or _int64(v) is None:
                errors.append(invalid(index(vpath, i), v,
                                      "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        errors.append(not_supported(child(path, "operator"), operator, _BINARY_OPERATORS
                                    + (EXISTS, DOES_NOT_EXIST)))
    for i, v in enumerate(values):
        msgs = label_value_errors(v) if isinstance(v, str) else ["must be a string"]
        if msgs:
            errors.append(invalid(f"{index(vpath, i)}[{key}]", v, "; ".join(msgs)))
    return errors


def requirement(key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
    """labels.NewRequirement: a validated Requirement, or LabelSelectorError."""
    values = list(values)
    errors = requirement_errors(key, operator, values)
    if errors:
        raise LabelSelectorError(_aggregate(errors))
    if operator in (IN, NOT_IN):
        values = sorted(set(values))
    return Requirement(key, operator, tuple(values))


@dataclass(frozen=True)
class Selector:
    """An AND of requirements, sorted by key. The empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = field(default=False, compare=True)  # labels.Nothing(): matches no object

    def matches(self, labels: Mapping[str, Any] | None) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.nothing and not self.requirements

    def add(self, *reqs: Requirement) -> "Selector":
        return Selector(_sorted(self.requirements + tuple(reqs)), self.nothing)

    def requires_exact_match(self, key: str) -> str | None:
        """The value `key` must equal for a match (=, == or a one-value `in`), else None."""
        for r in self.requirements:
            if r.key == key and r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                return r.values[0]
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __bool__(self) -> bool:  # a selector object is always "something", even when empty
        return True


EVERYTHING = Selector()
NOTHING = Selector(nothing=True)


def _sorted(reqs: Iterable[Requirement]) -> tuple[Requirement, ...]:
    return tuple(sorted(reqs, key=lambda r: r.key))


# --- the lexer ------------------------------------------------------------------------------

_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")
_SYMBOLS = {"=": EQUALS, "==": DOUBLE_EQUALS, "!=": NOT_EQUALS, "!": "NOT", "(": "(", ")": ")",
            ",": ",", ">": ">", "<": "<"}

# token kinds
_ID, _END, _ERROR, _IN, _NOTIN = "ID", "END", "ERROR", "IN", "NOTIN"


def _lex(text: str) -> list[tuple[str, str, int]]:
    """(kind, literal, position) for every token, ending with END (or at the first ERROR)."""
    tokens = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            tokens.append((_END, "", i))
            return tokens
        start = i
        if text[i] in _SPECIAL:
            buf, last = "", None
            while i < n and text[i] in _SPECIAL:
                buf += text[i]
                if buf in _SYMBOLS:
                    last = (buf, i + 1)
                elif last is not None:
                    break
                i += 1
            if last is None:
                tokens.append((_ERROR, f"error expected: keyword found '{buf}'", start))
                return tokens
            literal, i = last
            tokens.append((_SYMBOLS[literal], literal, start))
        else:
            while i < n and text[i] not in _WHITESPACE and text[i] not in _SPECIAL:
                i += 1
            word = text[start:i]
            kind = {"in": _IN, "notin": _NOTIN}.get(word, _ID)
            tokens.append((kind, word, start))


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens = _lex(text)
        self.pos = 0

    def _err(self, message: str, at: int | None = None) -> LabelSelectorError:
        if at is None:
            at = self.tokens[min(self.pos, len(self.tokens) - 1)][2]
        return LabelSelectorError(message, at, self.text)

    def lookahead(self, values: bool = True) -> tuple[str, str, int]:
        kind, lit, at = self.tokens[min(self.pos, len(self.tokens) - 1)]
        if values and kind in (_IN, _NOTIN):
            kind = _ID  # in the Values context, `in` and `notin` are plain identifiers
        return kind, lit, at

    def consume(self, values: bool = True) -> tuple[str, str, int]:
        tok = self.lookahead(values)
        if self.pos < len(self.tokens) - 1:
            self.pos += 1
        return tok

    def parse(self) -> Selector:
        reqs = []
        while True:
            kind, lit, at = self.lookahead()
            if kind in (_ID, "NOT"):
                try:
                    reqs.append(self.requirement())
                except LabelSelectorError as e:
                    raise LabelSelectorError("unable to parse requirement: " + e.message,
                                             e.position, self.text) from None
                kind, lit, at = self.consume()
                if kind == _END:
                    return Selector(_sorted(reqs))
                if kind == ",":
                    kind2, lit2, at2 = self.lookahead()
                    if kind2 not in (_ID, "NOT"):
                        raise self._err(f"found '{lit2}', expected: identifier after ','", at2)
                else:
                    raise self._err(f"found '{lit}', expected: ',' or 'end of string'", at)
            elif kind == _END:
                return Selector(_sorted(reqs))
            else:
                raise self._err(f"found '{lit}', expected: !, identifier, or 'end of string'", at)

    def requirement(self) -> Requirement:
        start = self.lookahead()[2]
        kind, key, at = self.consume()
        operator = None
        if kind == "NOT":
            operator = DOES_NOT_EXIST
            kind, key, at = self.consume()
        if kind != _ID:
            raise self._err(f"found '{key}', expected: identifier", at)
        key_errors = qualified_name_errors(key)
        if key_errors:
            raise self._err(str(FieldError("<nil>", "Invalid value", "; ".join(key_errors), key)), at)
        if self.lookahead()[0] in (_END, ","):
            operator = operator or EXISTS
        if operator in (EXISTS, DOES_NOT_EXIST):
            return self.new(key, operator, [], start)
        kind, lit, at = self.consume(values=False)
        operator = {_IN: IN, _NOTIN: NOT_IN, EQUALS: EQUALS, DOUBLE_EQUALS: DOUBLE_EQUALS,
                    NOT_EQUALS: NOT_EQUALS, ">": GREATER_THAN, "<": LESS_THAN}.get(kind)
        if operator is None:
            raise self._err(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}", at)
        values = self.set_values() if operator in (IN, NOT_IN) else self.exact_value()
        return self.new(key, operator, sorted(values), start)

    def new(self, key: str, operator: str, values: list[str], at: int) -> Requirement:
        errors = requirement_errors(key, operator, values)
        if errors:
            raise self._err(_aggregate(errors), at)
        return Requirement(key, operator, tuple(values))

    def set_values(self) -> set[str]:
        kind, lit, at = self.consume()
        if kind != "(":
            raise self._err(f"found '{lit}' expected: '('", at)
        kind, lit, at = self.lookahead()
        if kind in (_ID, ","):
            values = self.identifiers()
            kind2, _, at2 = self.consume()
            if kind2 != ")":
                raise self._err(f"found '{lit}', expected: ')'", at2)
            return values
        if kind == ")":
            self.consume()
            return {""}
        raise self._err(f"found '{lit}', expected: ',', ')' or identifier", at)

    def identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            kind, lit, at = self.consume()
            if kind == _ID:
                values.add(lit)
                kind2, lit2, at2 = self.lookahead()
                if kind2 == ",":
                    continue
                if kind2 == ")":
                    return values
                raise self._err(f"found '{lit2}', expected: ',' or ')'", at2)
            if kind == ",":
                if not values:
                    values.add("")  # "(,"
                kind2 = self.lookahead()[0]
                if kind2 == ")":
                    values.add("")  # ",)"
                    return values
                if kind2 == ",":
                    self.consume()
                    values.add("")  # ",,"
            else:
                raise self._err(f"found '{lit}', expected: ',', or identifier", at)

    def exact_value(self) -> list[str]:
        kind = self.lookahead()[0]
        if kind in (_END, ","):
            return [""]
        kind, lit, at = self.consume()
        if kind == _ID:
            return [lit]
        raise self._err(f"found '{lit}', expected: identifier", at)


def parse_selector(text: str) -> Selector:
    """labels.Parse: a `-l` selector string. "" is the everything-selector."""
    if not isinstance(text, str):
        raise LabelSelectorError(f"label selector must be a string, not {type(text).__name__}")
    return _Parser(text).parse()


parse = parse_selector


def selector_from_set(labels: Mapping[str, str] | None) -> Selector:
    """labels.SelectorFromSet: `k=v` for every pair (no validation, as SelectorFromValidatedSet)."""
    return Selector(_sorted(Requirement(k, EQUALS, (v,)) for k, v in (labels or {}).items()))


def format_labels(labels: Mapping[str, str] | None) -> str:
    """labels.Set.String(): `k=v` pairs sorted by key, comma-separated."""
    return ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items()))


# --- metav1.LabelSelector objects -----------------------------------------------------------

def selector_from_label_selector(obj: Mapping[str, Any] | None) -> Selector:
    """metav1.LabelSelectorAsSelector: None selects nothing, {} selects everything.

    Raises LabelSelectorError for a bad operator or requirement (validate first for field errors).
    """
    if obj is None:
        return NOTHING
    if not isinstance(obj, Mapping):
        raise LabelSelectorError(f"label selector must be an object, not {type(obj).__name__}")
    match_labels = obj.get("matchLabels") or {}
    exprs = obj.get("matchExpressions") or []
    if not match_labels and not exprs:
        return EVERYTHING
    reqs = [requirement(k, EQUALS, [v]) for k, v in match_labels.items()]
    for expr in exprs:
        op = SELECTOR_OPERATORS.get(expr.get("operator"))
        if op is None:
            raise LabelSelectorError(f"{_go_q(expr.get('operator'))} is not a valid label selector "
                                     "operator")
        reqs.append(requirement(expr.get("key"), op, list(expr.get("values") or [])))
    return Selector(_sorted(reqs))


def _go_q(value: Any) -> str:
    return go_quote(value if isinstance(value, str) else ("" if value is None else str(value)))


def validate_label_selector(obj: Any, path: str = "spec.selector") -> list[FieldError]:
    """metav1validation.ValidateLabelSelector, plus shape checks for hand-written YAML."""
    errors: list[FieldError] = []
    if obj is None:
        return errors
    if not isinstance(obj, Mapping):
        return [invalid(path, obj, "must be an object")]
    ml_path = child(path, "matchLabels")
    match_labels = obj.get("matchLabels")
    if match_labels is not None:
        if not isinstance(match_labels, Mapping):
            errors.append(invalid(ml_path, match_labels, "must be a map of string keys and values"))
        else:
            for k, v in match_labels.items():
                errors += _label_name(k, ml_path)
                if not isinstance(v, str):
                    errors.append(invalid(ml_path, v, "must be a string"))
                else:
                    errors += [invalid(ml_path, v, m) for m in label_value_errors(v)]
    me_path = child(path, "matchExpressions")
    exprs = obj.get("matchExpressions")
    if exprs is None:
        return errors
    if not isinstance(exprs, list):
        return errors + [invalid(me_path, exprs, "must be a list")]
    for i, expr in enumerate(exprs):
        errors += validate_label_selector_requirement(expr, index(me_path, i))
    return errors


def validate_label_selector_requirement(expr: Any, path: str) -> list[FieldError]:
    if not isinstance(expr, Mapping):
        return [invalid(path, expr, "must be an object")]
    errors: list[FieldError] = []
    op = expr.get("operator")
    values = expr.get("values")
    vpath = child(path, "values")
    if values is not None and not isinstance(values, list):
        errors.append(invalid(vpath, values, "must be a list of strings"))
        values = []
    values = values or []
    if op in ("In", "NotIn"):
        if not values:
            errors.append(required(vpath, "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            errors.append(forbidden(vpath, "may not be specified when `operator` is 'Exists' or "
                                           "'DoesNotExist'"))
    elif op is None:
        errors.append(required(child(path, "operator"), ""))
    else:
        errors.append(invalid(child(path, "operator"), op, "not a valid selector operator"))
    key = expr.get("key")
    if key is None or key == "":
        errors += _label_name("", child(path, "key"))
    else:
        errors += _label_name(key, child(path, "key"))
    for i, v in enumerate(values):
        if not isinstance(v, str):
            errors.append(invalid(index(vpath, i), v, "must be a string"))
        else:
            errors += [invalid(index(vpath, i), v, m) for m in label_value_errors(v)]
    return errors


def _label_name(name: Any, path: str) -> list[FieldError]:
    if not isinstance(name, str):
        return [invalid(path, name, "must be a string")]
    return [invalid(path, name, m) for m in qualified_name_errors(name)]


def check_label_selector(obj: Any, path: str = "spec.selector", *, kind: str = "Pod",
                         name: str = "") -> Selector:
    """Validate and convert in one step; raises ValidationError with every field error."""
    errors = validate_label_selector(obj, path)
    if errors:
        raise ValidationError(errors, kind=kind, name=name)
    return selector_from_label_selector(obj)
