"""Validation errors shaped and worded like Kubernetes' field.Error and apierrors.NewInvalid.

A FieldError prints as `<path>: <type>[: <value>][: <detail>]`, e.g.

    spec.containers[0].name: Required value
    spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"
    spec.containers[1].name: Duplicate value: "app"

and a ValidationError joins them as kubectl shows a rejected object:

    Pod "web" is invalid: [spec.containers[0].name: Required value, spec.restartPolicy: ...]

Values are rendered the way Go's fmt renders them in those messages (strings %q-quoted,
numbers and booleans bare, nil as null), so messages read like the real apiserver's.
Objects and lists, which Go would print as raw structs, are rendered as compact JSON.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable

REQUIRED = "Required value"
INVALID = "Invalid value"
NOT_SUPPORTED = "Unsupported value"
DUPLICATE = "Duplicate value"
FORBIDDEN = "Forbidden"
TOO_LONG = "Too long"
UNKNOWN_FIELD = "Unknown field"  # kubemu's strict mode; Kubernetes reports these at decoding
NOT_FOUND = "Not found"

TYPES = (REQUIRED, INVALID, NOT_SUPPORTED, DUPLICATE, FORBIDDEN, TOO_LONG, UNKNOWN_FIELD,
         NOT_FOUND)

# Types whose message never shows the value (field.Error.ErrorBody does the same).
_VALUELESS = frozenset({REQUIRED, FORBIDDEN, TOO_LONG, UNKNOWN_FIELD})

OMIT = ...  # "no value": the value part of the message is left out

# A rendered value longer than this is cut: a pathological manifest must not make a huge message.
MAX_VALUE_CHARS = 256


@dataclass(frozen=True)
class FieldError:
    path: str
    type: str
    detail: str = ""
    value: Any = OMIT

    def __str__(self) -> str:
        return f"{self.path}: {self.body()}" if self.path else self.body()

    def body(self) -> str:
        """The message without the path (field.Error.ErrorBody)."""
        text = self.type
        if self.type not in _VALUELESS and self.value is not OMIT:
            text += ": " + go_value(self.value)
        if self.detail:
            text += ": " + self.detail
        return text


class ValidationError(Exception):
    """An object rejected as invalid, with every reason (apierrors.NewInvalid's message)."""

    def __init__(self, errors: Iterable[FieldError], *, kind: str = "Pod", name: str = ""):
        self.errors = list(errors)
        self.kind = kind
        self.name = name
        super().__init__(self.message())

    def message(self) -> str:
        head = f"{self.kind} {go_quote(self.name)} is invalid"
        # Identical messages are reported once, as errors.ToAggregate does.
        texts = list(dict.fromkeys(str(e) for e in self.errors))
        if not texts:
            return head
        if len(texts) == 1:
            return f"{head}: {texts[0]}"
        return f"{head}: [{', '.join(texts)}]"

    def __str__(self) -> str:
        return self.message()


# --- constructors named after field.Required, field.Invalid, ... ------------------------------

def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, REQUIRED, detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, INVALID, detail, value)


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    listed = ", ".join(go_quote(s) for s in supported)
    return FieldError(path, NOT_SUPPORTED, f"supported values: {listed}", value)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, DUPLICATE, "", value)


def not_found(path: str, value: Any) -> FieldError:
    return FieldError(path, NOT_FOUND, "", value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, FORBIDDEN, detail)


def too_long(path: str, max_bytes: int) -> FieldError:
    return FieldError(path, TOO_LONG, f"may not be more than {max_bytes} bytes")


def unknown_field(path: str) -> FieldError:
    return FieldError(path, UNKNOWN_FIELD)


# --- paths, as field.Path prints them -------------------------------------------------------

def child(path: str, name: Any) -> str:
    return f"{path}.{name}" if path else str(name)


def index(path: str, i: int) -> str:
    return f"{path}[{i}]"


def key(path: str, k: Any) -> str:
    return f"{path}[{k}]"


# --- values, as Go's fmt prints them ----------------------------------------------------------

_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "\v": "\\v", "\\": "\\\\", '"': '\\"'}


def go_quote(s: str) -> str:
    """strconv.Quote: double quotes, Go escapes, printable Unicode kept as is."""
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def go_float(f: float) -> str:
    """%v of a float64: shortest digits, exponent form below 1e-4 or from 1e21 on."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign, digits, exp = Decimal(repr(f)).normalize().as_tuple()
    ds = "".join(map(str, digits))
    point = len(ds) + exp  # the decimal point sits after `point` digits
    head = "-" if sign else ""
    if point - 1 < -4 or point - 1 >= 21:
        e = point - 1
        mantissa = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
        return f"{head}{mantissa}e{'+' if e >= 0 else '-'}{abs(e):02d}"
    if point <= 0:
        return f"{head}0.{'0' * -point}{ds}"
    if point >= len(ds):
        return f"{head}{ds}{'0' * (point - len(ds))}"
    return f"{head}{ds[:point]}.{ds[point:]}"


def go_value(value: Any) -> str:
    """A bad value as it appears in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        try:
            return _cut(str(value))
        except ValueError:  # beyond Python's int-to-str digit limit
            return f"<{value.bit_length()}-bit integer>"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return _cut(go_quote(value))
    return _cut(_compact(value, MAX_VALUE_CHARS + 1))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS] + "..."


def _compact(value: Any, budget: int) -> str:
    """Compact JSON of `value`, giving up after about `budget` characters. Bounded so that a
    cyclic or alias-bomb YAML structure renders in constant time instead of hanging."""
    parts: list[str] = []
    used = 0

    def emit(text: str) -> bool:
        nonlocal used
        parts.append(text)
        used += len(text)
        return used < budget

    def walk(v: Any, depth: int) -> bool:
        if depth > 32:
            return emit("...")
        if isinstance(v, dict):
            if not emit("{"):
                return False
            for i, (k, item) in enumerate(v.items()):
                if (i and not emit(",")) or not emit(json.dumps(str(k)) + ":"):
                    return False
                if not walk(item, depth + 1):
                    return False
            return emit("}")
        if isinstance(v, (list, tuple)):
            if not emit("["):
                return False
            for i, item in enumerate(v):
                if (i and not emit(",")) or not walk(item, depth + 1):
                    return False
            return emit("]")
        if isinstance(v, str):
            return emit(json.dumps(v, ensure_ascii=False))
        if v is None or isinstance(v, (bool, int, float)):
            return emit(go_value(v))
        return emit(repr(v)[:budget])

    walk(value, 0)
    return "".join(parts)
