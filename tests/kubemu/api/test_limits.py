"""The depth and size limits shared by `kubemu apply` and the apiserver: iterative, safe at any depth."""
from __future__ import annotations

import json

import pytest

from kubemu.api.limits import MAX_DEPTH, ShapeError, check_shape, depth, json_too_deep_at


def nested_lists(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def test_depth_counts_maps_and_lists_and_stops_past_the_limit():
    assert depth("x") == 0 and depth({}) == 1 and depth({"a": [1, {"b": "c"}]}) == 3
    assert depth(nested_lists(100_000)) == MAX_DEPTH + 1  # no recursion, no full walk
    cycle: list = []
    cycle.append(cycle)
    assert depth(cycle) == MAX_DEPTH + 1


def test_check_shape_names_the_limit():
    check_shape(nested_lists(MAX_DEPTH))
    with pytest.raises(ShapeError, match=f"^nested more than {MAX_DEPTH} levels deep \\(the limit\\)$"):
        check_shape(nested_lists(MAX_DEPTH + 1))
    shared = ["x"] * 1000
    with pytest.raises(ShapeError, match="^more than 999999 values"):
        check_shape([shared] * 1000, max_values=999_999)  # each time a value is reached counts
    check_shape([shared] * 1000, max_values=1_001_001)  # the list, 1000 lists, 1000 x 1000 strings
    with pytest.raises(ShapeError, match="^more than 1001000 values"):
        check_shape([shared] * 1000, max_values=1_001_000)
    assert depth({"a": [{}], "b": "x"}) == 3 and depth([[], [[]]]) == 3


def test_an_alias_bomb_is_refused_after_a_bounded_walk():
    bomb: list = ["x"] * 10
    for _ in range(40):  # 10**41 values once expanded
        bomb = [bomb] * 10
    with pytest.raises(ShapeError, match="^more than 1000 values"):
        check_shape(bomb, max_values=1000)


def test_json_text_depth_before_decoding():
    assert json_too_deep_at(json.dumps(nested_lists(MAX_DEPTH))) is None
    assert json_too_deep_at(json.dumps(nested_lists(MAX_DEPTH + 1))) == MAX_DEPTH
    assert json_too_deep_at('{"a": "' + "[" * 500 + '\\"[[", "b": ' + "{}" * 500 + "}") is None
    assert json_too_deep_at("[" * 10_000_000, limit=3) == 3
