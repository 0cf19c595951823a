"""What a wire handler accepts: its parameter names and, from its annotations, their types.

Built once per handler when a `Server` registers it (`handler_params`), then `ParamSpec.error`
checks each request's params before the handler runs, so a wrong name or a wrong type is a
BadRequest instead of a TypeError inside the handler (an Internal).

Annotations are read as msgpack delivers values: ``bool`` is only true/false (and is *not* an
``int``: true is not a count), ``float`` also takes an integer, ``list``/``tuple`` take an array,
``X | None`` takes nil, a parameter whose default is None also takes nil, ``list[X]`` checks its
elements, ``Literal[...]`` its values. ``Any``, ``object``, no annotation, and anything else
(a class, a TypedDict) are not checked: the handler validates those itself.
"""
from __future__ import annotations

import inspect
import types
import typing
from typing import Any, Callable, NamedTuple

from ._wire_errors import BadRequest

_Check = Callable[[object], bool]

# annotation -> (the classes isinstance() accepts, what it wants, in words)
_SIMPLE: dict[object, tuple[tuple[type, ...], str]] = {
    int: ((int,), "an integer"),
    float: ((int, float), "a number"),
    bool: ((bool,), "a boolean"),
    str: ((str,), "a string"),
    bytes: ((bytes,), "bytes"),
    dict: ((dict,), "a map"),
    list: ((list,), "a list"),
    tuple: ((list,), "a list"),  # msgpack arrays arrive as lists
    type(None): ((type(None),), "nil"),
}


class _Rule(NamedTuple):
    """One parameter's check: isinstance(value, classes), bool refused unless `bool` was
    named (true is not a count), then `extra` (elements, Literal values) if any."""

    classes: tuple[type, ...]
    no_bool: bool
    extra: _Check | None
    wanted: str

    def admits(self, value: object) -> bool:
        return (isinstance(value, self.classes) and not (self.no_bool and value.__class__ is bool)
                and (self.extra is None or self.extra(value)))


def _rule(annotation: object) -> _Rule | None:
    """The check for an annotation, or None when it is not checked."""
    simple = _SIMPLE.get(annotation)
    if simple is not None:
        classes, wanted = simple
        return _Rule(classes, annotation is not bool, None, wanted)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        parts = [_rule(a) for a in args]
        if any(p is None for p in parts):
            return None  # one member is unchecked, so anything could be meant
        classes = tuple(c for p in parts for c in p.classes)
        wanted = " or ".join(p.wanted for p in parts)
        extras = [p for p in parts if p.extra is not None]
        extra = None if not extras else (lambda v: any(p.admits(v) for p in parts))
        return _Rule(classes, bool not in classes, extra, wanted)
    if origin is typing.Literal:
        allowed = args
        return _Rule(tuple({a.__class__ for a in allowed}), False,
                     lambda v: any(v == a and v.__class__ is a.__class__ for a in allowed),
                     "one of " + ", ".join(repr(a) for a in allowed))
    if origin in (list, tuple):
        homogeneous = len(args) == 1 if origin is list else (len(args) == 2 and args[1] is Ellipsis)
        inner = _rule(args[0]) if homogeneous else None
        if inner is None:
            return _Rule((list,), False, None, "a list")
        return _Rule((list,), False, lambda v: all(inner.admits(x) for x in v), f"a list of ({inner.wanted})")
    if origin is dict:
        return _Rule((dict,), False, None, "a map")
    return None


class ParamSpec(NamedTuple):
    """A handler's accepted and required keyword names (accepted None: it takes **kwargs) and
    its type checks; `signature` words the name errors."""

    signature: inspect.Signature
    accepted: frozenset | None
    required: frozenset
    checks: tuple[tuple[str, _Rule], ...]

    def error(self, method: str, params: dict) -> BadRequest | None:
        """BadRequest if `params` do not fit the handler; None if they do. A set test and one
        check per present typed parameter: this runs for every request."""
        if not ((self.accepted is None or params.keys() <= self.accepted) and self.required <= params.keys()):
            try:
                self.signature.bind(**params)
            except TypeError as exc:
                return BadRequest(f"bad params for {method!r}: {exc}", {"method": method})
        for name, (classes, no_bool, extra, wanted) in self.checks:
            if name in params:
                value = params[name]
                if not isinstance(value, classes) or (no_bool and value.__class__ is bool) or (
                        extra is not None and not extra(value)):
                    return BadRequest(f"bad params for {method!r}: {name}: expected {wanted}, "
                                      f"got {_type_name(value)}", {"method": method, "field": name})
        return None


def _type_name(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", bytes: "bytes",
            dict: "a map", list: "a list", type(None): "nil"}.get(value.__class__, value.__class__.__name__)


def handler_params(name: str, fn: Callable) -> ParamSpec | None:
    """What `fn` accepts, or None if that cannot be known (some builtins, positional-only
    parameters): then the call itself complains. A TypeError names an annotation that does
    not resolve: a bug in the handler, found at registration rather than per request."""
    try:
        inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature = inspect.signature(fn, eval_str=True)
    except Exception as exc:
        raise TypeError(f"handler {name!r}: cannot resolve its annotations: {exc}") from None
    P = inspect.Parameter
    parameters = signature.parameters.values()
    if any(p.kind == P.POSITIONAL_ONLY for p in parameters):
        return None
    keyword = [p for p in parameters if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)]
    accepted = None if any(p.kind == P.VAR_KEYWORD for p in parameters) else frozenset(p.name for p in keyword)
    required = frozenset(p.name for p in keyword if p.default is P.empty)
    checks = []
    for p in keyword:
        annotation: Any = p.annotation
        if annotation is P.empty:
            continue
        if p.default is None:
            annotation = typing.Optional[annotation]
        rule = _rule(annotation)
        if rule is not None:
            checks.append((p.name, rule))
    return ParamSpec(signature, accepted, required, tuple(checks))
