"""store._mvcc_requests: the typed ops a request dict parses into, and the field its errors name.

(test_mvcc.py covers the same parser through the state machine's behaviour.)"""
from __future__ import annotations

import pytest

from store._mvcc_requests import (Compare, DeleteRange, KeyRange, Put, Range, Txn, parse_key_range,
                                  parse_request)
from store.mvcc import InvalidRequest, compare, delete_op, put_op, range_op, txn_op


def test_every_field_lands_where_it_is_declared():
    """The parsers build the ops of a txn by position: each field set to its own non-default
    value must come out under its own name (a swapped pair of flags would not)."""
    put = {"op": "put", "key": b"k", "value": b"v", "lease": 7, "prev_kv": True, "ignore_lease": False}
    keep_value = {"op": "put", "key": b"k", "ignore_value": True, "ignore_lease": True}
    rng = {"op": "range", "key": b"a", "range_end": b"z", "revision": 5, "limit": 3, "count_only": True}
    keys_only = {"op": "range", "key": b"a", "keys_only": True}
    cmp = compare(b"c", "version", ">", 2, range_end=b"d")
    req = txn_op([cmp], [put, rng, delete_op(b"x", b"y", prev_kv=True)], [keep_value, keys_only])
    assert parse_request(req) == Txn(
        compare=(Compare(keys=KeyRange(b"c", b"d"), target="version", result=">", operand=2),),
        success=(Put(key=b"k", value=b"v", lease=7, prev_kv=True, ignore_value=False, ignore_lease=False),
                 Range(keys=KeyRange(b"a", b"z"), revision=5, limit=3, count_only=True, keys_only=False),
                 DeleteRange(keys=KeyRange(b"x", b"y"), prev_kv=True)),
        failure=(Put(key=b"k", value=b"", lease=0, prev_kv=False, ignore_value=True, ignore_lease=True),
                 Range(keys=KeyRange(b"a", b"a\0"), revision=0, limit=0, count_only=False, keys_only=True)))


@pytest.mark.parametrize("req, op", [
    ({"op": "put", "key": b"k", "lease": 7}, Put(b"k", b"", 7, False, False, False)),
    ({"op": "put", "key": b"k", "prev_kv": True}, Put(b"k", b"", 0, True, False, False)),
    ({"op": "put", "key": b"k", "value": b"v"}, Put(b"k", b"v", 0, False, False, False)),
    ({"op": "put", "key": b"k"}, Put(b"k", b"", 0, False, False, False)),
    ({"op": "range", "key": b"k", "limit": 2}, Range(KeyRange(b"k", b"k\0"), 0, 2, False, False)),
    ({"op": "range", "key": b"k", "range_end": b"z"}, Range(KeyRange(b"k", b"z"), 0, 0, False, False)),
    ({"op": "range", "key": b"k"}, Range(KeyRange(b"k", b"k\0"), 0, 0, False, False)),
])
def test_options_are_read_whenever_present(req, op):
    """A put of key and value, or a range of a key, skips reading the absent options: counted
    by fields, one option in place of the value must still be read."""
    assert parse_request(req) == op


@pytest.mark.parametrize("req, message", [
    ({"op": "put", "key": b"a", "extra": 1}, "extra: unknown field"),
    ({"op": "put", "key": b"a", 7: 1}, "7: unknown field"),
    (txn_op(success=[{"op": "put", "key": b"a", "extra": 1}]), "success[0].extra: unknown field"),
    (txn_op(failure=[put_op(b"a"), 5]), "failure[1]: expected a map, got int"),
    (txn_op(failure=[range_op(b"a"), {"key": b"b"}]), "failure[1].op: unknown operation None"),
    (txn_op([compare(b"a", "version", "=", 0), {"target": "version", "result": "=", "version": 0}]),
     "compare[1].key: required"),
    ({"op": "put", "key": b"a", "value": "v"}, "value: expected bytes, got str"),
    ({"op": "range", "key": b""}, "key: key is not provided"),
    (txn_op([compare(b"a", "value", "=", b"v"), compare(b"b", "value", "=", 3)]),
     "compare[1].value: expected bytes, got int"),
    (txn_op(success=[range_op(b"a"), {"op": "range", "key": b"a", "limit": -1}]),
     "success[1].limit: -1 is out of range [0, None]"),
    ({"op": "txn", "success": {"op": "put"}}, "success: expected a list, got dict"),
])
def test_an_error_names_the_field_by_its_full_path(req, message):
    """Nested names are spelled only when an error needs them: each still gives the full path."""
    with pytest.raises(InvalidRequest) as caught:
        parse_request(req)
    assert caught.value.message == message
    assert caught.value.details["field"] == message.split(": ")[0]


def test_a_single_op_branch_is_valid_and_duplicates_in_longer_ones_are_not():
    assert parse_request(txn_op(success=[put_op(b"a")], failure=[delete_op(b"a")]))
    with pytest.raises(Exception, match="duplicate key"):
        parse_request(txn_op(success=[put_op(b"a"), delete_op(b"a")]))
    with pytest.raises(Exception, match="duplicate key"):
        parse_request(txn_op(failure=[put_op(b"b"), range_op(b"a"), put_op(b"b")]))


def test_a_watch_key_range_names_its_fields():
    assert parse_key_range(b"a", b"\0") == KeyRange(b"a", None)
    with pytest.raises(InvalidRequest) as caught:
        parse_key_range(b"", where="watch")
    assert caught.value.message == "watch.key: key is not provided"
