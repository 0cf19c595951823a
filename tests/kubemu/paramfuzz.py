"""Wrong-typed params for every method of a wire server: the servers' tests send each call and
expect a bad-input answer (BadRequest, or the handler's own Invalid), never Internal."""
from __future__ import annotations

from collections.abc import Iterator

# one value of every msgpack type, plus the falsy ones that once meant "all"
WRONG_VALUES = [None, True, False, 0, 5, -1, 1.5, "", "s", b"b", [], [1, "x"], {}, {"a": {"b": 1}}]
BAD_INPUT = ("BadRequest", "UnknownMethod", "Invalid", "NotFound", "Gone", "Conflict", "TooLarge")


def _same_kind(a, b) -> bool:
    """Whether `b` would pass where `a` is valid anyway (so it is not a wrong type)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return True
    return type(a) is type(b)


def wrong_typed_calls(valid: dict[str, dict], nullable: frozenset = frozenset()) -> Iterator[tuple[str, dict]]:
    """For each method's valid params, the same params with one of them given a wrong type
    (nil is valid for the names in `nullable`)."""
    for method, params in valid.items():
        for name, good in params.items():
            for bad in WRONG_VALUES:
                if not _same_kind(good, bad) and not (bad is None and name in nullable):
                    yield method, {**params, name: bad}
