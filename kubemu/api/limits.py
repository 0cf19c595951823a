"""How deep and how large an API object may be: one rule for `kubemu apply` and the apiserver.

    depth(obj, MAX_DEPTH)        -> the nesting depth, or MAX_DEPTH + 1 once it is deeper
    check_shape(obj)             -> None, or raises ShapeError("...nested more than 100 levels deep")
    json_too_deep_at(text)       -> the offset where a JSON text nests deeper than MAX_DEPTH, or None

Python code that walks an object recurses (copy.deepcopy, json.dumps, msgpack, the merges), and
Python's recursion limit is about 1000 frames, several per level: an object nested deeper than
MAX_DEPTH is refused before any of that runs. kube-apiserver's JSON decoder stops at 10000 levels;
kubemu's limit is lower because of that recursion, and far above any real manifest (a Deployment
nests about 10 deep). Each check here is iterative, so it is safe at any depth.
"""
from __future__ import annotations

import re

MAX_DEPTH = 100
MAX_OBJECT_BYTES = 3 * 1024 * 1024 // 2  # 1.5 MiB: etcd's default request limit, so the largest object
# Every value of an object takes at least one byte of its encoding, so an object with more values
# than this could never be stored; counting them also stops a YAML alias bomb (a few lines whose
# aliases expand to billions of values) before anything expands it.
MAX_VALUES = MAX_OBJECT_BYTES
MAX_MANIFEST_BYTES = 8 * 1024 * 1024  # one -f file or stdin: several times the largest manifests in use


class ShapeError(ValueError):
    """An object nested too deep or holding too many values; the message says which limit."""


def depth(value: object, limit: int = MAX_DEPTH) -> int:
    """How many maps and lists are nested in `value` (a scalar is 0, `{"a": []}` is 2); stops
    counting at `limit + 1`, so a cyclic or very deep value costs no more than the limit."""
    return _walk(value, limit, None)[0]


def check_shape(value: object, max_depth: int = MAX_DEPTH, max_values: int | None = MAX_VALUES) -> None:
    """Raise ShapeError if `value` nests deeper than `max_depth` or holds more than `max_values`
    values (maps, lists and scalars, counted as often as they are reached)."""
    deepest, count = _walk(value, max_depth, max_values)
    if deepest > max_depth:
        raise ShapeError(f"nested more than {max_depth} levels deep (the limit)")
    if max_values is not None and count > max_values:
        raise ShapeError(f"more than {max_values} values (the limit)")


_NESTING = (dict, list, tuple)


def _walk(value: object, max_depth: int, max_values: int | None) -> tuple[int, int]:
    """(depth up to max_depth + 1, values counted until past max_values), without recursion.
    A map or list counts all its children at once and only nested ones go on the stack: this
    runs on every request's object, and a step per scalar cost twice as much. The stack
    never holds more than the values counted, so an alias bomb stops once past max_values."""
    if not isinstance(value, _NESTING):
        return 0, 1
    deepest, count = 0, 1
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if level > deepest:
            deepest = level
            if level > max_depth:
                break
        children = item.values() if isinstance(item, dict) else item
        count += len(children)
        if max_values is not None and count > max_values:
            break
        for child in children:
            if isinstance(child, _NESTING):
                stack.append((child, level + 1))
    return deepest, count


# A JSON string (escapes included), or one bracket: brackets inside strings are not structure.
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def json_too_deep_at(text: str, limit: int = MAX_DEPTH) -> int | None:
    """The offset in `text` of the bracket that opens level `limit + 1`, or None: checked before
    the (recursive) JSON decoder sees the text. Malformed JSON is left to the decoder."""
    level = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            level += 1
            if level > limit:
                return match.start()
        elif token in "]}":
            level -= 1
    return None
