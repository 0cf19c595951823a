"""Parsing and validation of request dicts into typed operations.

Everything that can be decided from the request alone is decided here, before the state machine
changes anything: field types, unknown fields, etcd's "key is not provided", request size, the
txn op limit and etcd's duplicate-key rule. What depends on the state (leases, compaction, key
existence) is checked by the state machine, still before it writes.

Every failure is a StoreError (InvalidRequest names the field); nothing else escapes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ._mvcc_types import (MAX_LEASE_ID, MAX_LEASE_TTL, MAX_REQUEST_BYTES, MAX_TXN_OPS, DuplicateKey,
                          StoreError, TooLarge, invalid)

_REQUIRED = object()

TARGETS = ("value", "version", "create_revision", "mod_revision", "lease")
RESULTS = ("=", "!=", "<", ">")


# The parsed forms below are plain slotted dataclasses, not frozen ones: every replica parses
# every committed entry (~7 instances per txn), and a frozen dataclass's __init__ costs ~3x a
# plain one's (each field through object.__setattr__). They are still values: nothing assigns
# to a field after parsing, and the leader's op goes from parse to apply untouched. The parsers
# of the ops in every txn (Put, Range, DeleteRange, Compare) pass fields by position, in the
# order declared here: keyword arguments cost twice as much.
@dataclass(slots=True)
class KeyRange:
    """A half-open interval [start, stop) of keys; stop None means no upper bound.

    etcd's conventions map onto it: no range_end is the single key (stop = key + b"\\0", the
    next possible key), range_end b"\\0" is every key >= key, and range_end <= key is empty."""
    start: bytes
    stop: bytes | None

    @classmethod
    def of(cls, key: bytes, range_end: bytes | None) -> KeyRange:
        if not range_end:  # None or b"": etcd treats an empty range_end as "just the key"
            return cls(key, key + b"\0")
        if range_end == b"\0":
            return cls(key, None)
        return cls(key, range_end)

    def __contains__(self, key: bytes) -> bool:
        return self.start <= key and (self.stop is None or key < self.stop)


@dataclass(slots=True)
class Put:
    key: bytes
    value: bytes
    lease: int
    prev_kv: bool
    ignore_value: bool
    ignore_lease: bool


@dataclass(slots=True)
class Range:
    keys: KeyRange
    revision: int
    limit: int
    count_only: bool
    keys_only: bool


@dataclass(slots=True)
class DeleteRange:
    keys: KeyRange
    prev_kv: bool


@dataclass(slots=True)
class Compare:
    keys: KeyRange
    target: str
    result: str
    operand: int | bytes


@dataclass(slots=True)
class Txn:
    compare: tuple[Compare, ...]
    success: tuple[Put | Range | DeleteRange, ...]
    failure: tuple[Put | Range | DeleteRange, ...]


@dataclass(slots=True)
class Compact:
    revision: int


@dataclass(slots=True)
class LeaseGrant:
    id: int
    ttl: int


@dataclass(slots=True)
class LeaseRevoke:
    id: int


Op = Put | Range | DeleteRange | Txn | Compact | LeaseGrant | LeaseRevoke


# ------------------------------------------------------------------------------- field readers

class _Fields:
    """Typed access to one request dict; `where` names it in error messages (e.g. "success[2]"
    makes "success[2].key"): a str, or an `_Item` spelled out only when an error needs it, since
    every replica parses every committed entry and almost none fails."""

    __slots__ = ("req", "_where")

    def __init__(self, req, where: str | _Item, allowed: frozenset[str]) -> None:
        if not isinstance(req, dict):
            raise invalid(_spelled(where) or "request", f"expected a map, got {type(req).__name__}")
        self.req, self._where = req, where
        if not allowed.issuperset(req):
            for name in req:  # the first unknown one, in the request's order
                if name not in allowed:
                    raise invalid(self.name(name if isinstance(name, str) else repr(name)), "unknown field")

    def name(self, field: str) -> str:
        where = _spelled(self._where)
        return f"{where}.{field}" if where else field

    def missing(self, field: str) -> StoreError:
        return invalid(self.name(field), "required")

    def bytes(self, field: str, default=_REQUIRED, nonempty: bool = False) -> bytes:
        value = self.req.get(field, default)
        if value is _REQUIRED:
            raise self.missing(field)
        if not isinstance(value, bytes):
            raise invalid(self.name(field), f"expected bytes, got {type(value).__name__}")
        if nonempty and not value:
            raise invalid(self.name(field), "key is not provided")  # etcd ErrEmptyKey
        return value

    def opt_bytes(self, field: str) -> bytes | None:
        return None if self.req.get(field) is None else self.bytes(field)

    def int(self, field: str, default=_REQUIRED, lo: int | None = None, hi: int | None = None) -> int:
        value = self.req.get(field, default)
        if value is _REQUIRED:
            raise self.missing(field)
        if type(value) is not int:  # bool is an int subclass, and not a number here
            raise invalid(self.name(field), f"expected an integer, got {type(value).__name__}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise invalid(self.name(field), f"{value} is out of range [{lo}, {hi}]")
        return value

    def bool(self, field: str) -> bool:
        value = self.req.get(field, False)
        if type(value) is not bool:
            raise invalid(self.name(field), f"expected a boolean, got {type(value).__name__}")
        return value

    def choice(self, field: str, choices: tuple[str, ...]) -> str:
        value = self.req.get(field, _REQUIRED)
        if value is _REQUIRED:
            raise self.missing(field)
        if value not in choices or not isinstance(value, str):
            raise invalid(self.name(field), f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def list(self, field: str) -> list:
        value = self.req.get(field, [])
        if not isinstance(value, (list, tuple)):
            raise invalid(self.name(field), f"expected a list, got {type(value).__name__}")
        if len(value) > MAX_TXN_OPS:  # etcd ErrTooManyOps
            raise invalid(self.name(field), f"too many operations in txn request (over {MAX_TXN_OPS})")
        return value

    def key_range(self) -> KeyRange:
        return KeyRange.of(self.bytes("key", nonempty=True), self.opt_bytes("range_end"))


# The unspelled name of a list element inside a request, (parent, field, index): it reads
# `parent.name(field)[index]`. A plain tuple, as the cheapest thing to build per element.
_Item = tuple["_Fields", str, int]


def _spelled(where: str | _Item) -> str:
    if isinstance(where, str):
        return where
    parent, field, index = where
    return f"{parent.name(field)}[{index}]"


def _lease_id(f: _Fields, field: str, default=_REQUIRED, lo: int = 1) -> int:
    return f.int(field, default, lo=lo, hi=MAX_LEASE_ID)


# -------------------------------------------------------------------------------------- parsers

def _parse_put(f: _Fields) -> Put:
    key, value = f.bytes("key", nonempty=True), f.bytes("value", b"")
    if len(f.req) == 2 + ("value" in f.req):  # op, key and maybe value: every option is absent
        return Put(key, value, 0, False, False, False)
    op = Put(key, value, _lease_id(f, "lease", 0, lo=0),
             f.bool("prev_kv"), f.bool("ignore_value"), f.bool("ignore_lease"))
    if op.ignore_value and op.value:
        raise invalid(f.name("value"), "value is provided with ignore_value")  # etcd ErrValueProvided
    if op.ignore_lease and op.lease:
        raise invalid(f.name("lease"), "lease is provided with ignore_lease")  # etcd ErrLeaseProvided
    return op


def _parse_range(f: _Fields) -> Range:
    keys = f.key_range()
    if len(f.req) == 2:  # op and key (a txn's read of one key): every option is absent
        return Range(keys, 0, 0, False, False)
    return Range(keys, max(0, f.int("revision", 0)), f.int("limit", 0, lo=0), f.bool("count_only"),
                 f.bool("keys_only"))


def _parse_delete(f: _Fields) -> DeleteRange:
    return DeleteRange(f.key_range(), f.bool("prev_kv"))


_COMPARE_FIELDS = frozenset(("key", "range_end", "target", "result", *TARGETS))


def _parse_compare(item, where: _Item) -> Compare:
    f = _Fields(item, where, _COMPARE_FIELDS)
    target = f.choice("target", TARGETS)
    operand = f.bytes(target) if target == "value" else f.int(target)
    return Compare(f.key_range(), target, f.choice("result", RESULTS), operand)


def _parse_txn(f: _Fields) -> Txn:
    compare = tuple([_parse_compare(c, (f, "compare", i)) for i, c in enumerate(f.list("compare"))])
    branches = []
    for branch in ("success", "failure"):
        ops = tuple([_parse_op(o, (f, branch, i), _TXN_PARSERS) for i, o in enumerate(f.list(branch))])
        _check_intervals(ops)
        branches.append(ops)
    return Txn(compare, *branches)


def _parse_compact(f: _Fields) -> Compact:
    f.bool("physical")  # accepted for etcd compatibility; every compaction here is "physical"
    return Compact(revision=f.int("revision", lo=1))


def _parse_lease_grant(f: _Fields) -> LeaseGrant:
    # The id is chosen by the proposer (the leader), never here: apply must be deterministic.
    return LeaseGrant(id=_lease_id(f, "id"), ttl=f.int("ttl", lo=1, hi=MAX_LEASE_TTL))


def _parse_lease_revoke(f: _Fields) -> LeaseRevoke:
    return LeaseRevoke(id=_lease_id(f, "id"))


# op name -> (parser, allowed fields besides "op")
_OPS = {
    "put": (_parse_put, ("key", "value", "lease", "prev_kv", "ignore_value", "ignore_lease")),
    "range": (_parse_range, ("key", "range_end", "revision", "limit", "count_only", "keys_only",
                             "serializable")),
    "delete_range": (_parse_delete, ("key", "range_end", "prev_kv")),
    "txn": (_parse_txn, ("compare", "success", "failure")),
    "compact": (_parse_compact, ("revision", "physical")),
    "lease_grant": (_parse_lease_grant, ("id", "ttl")),
    "lease_revoke": (_parse_lease_revoke, ("id",)),
}
# op name -> (parser, every allowed field): a set, so that a request's fields take one subset test
_PARSERS = {name: (parser, frozenset(("op", *fields))) for name, (parser, fields) in _OPS.items()}
# etcd also nests txns in txns; kubemu's clients do not, so a txn holds only these.
_TXN_PARSERS = {name: _PARSERS[name] for name in ("put", "range", "delete_range")}


def _parse_op(req, where: str | _Item, parsers: dict):
    if not isinstance(req, dict):
        raise invalid(_spelled(where) or "request", f"expected a map, got {type(req).__name__}")
    name = req.get("op")
    if not isinstance(name, str) or name not in parsers:
        raise invalid(f"{_spelled(where)}.op" if where else "op", f"unknown operation {name!r}")
    parser, allowed = parsers[name]
    return parser(_Fields(req, where, allowed))


def _check_intervals(ops) -> None:
    """etcd's checkIntervals: within one txn branch no key may be put twice, nor put and deleted
    (the outcome would depend on op order in a way etcd chose to forbid)."""
    if len(ops) < 2:
        return  # one op cannot collide with itself (the branch of nearly every txn)
    puts: set[bytes] = set()
    for op in ops:
        if isinstance(op, Put):
            if op.key in puts:
                raise DuplicateKey("duplicate key given in txn request", key=op.key)
            puts.add(op.key)
    for op in ops:
        if isinstance(op, DeleteRange):
            for key in puts:
                if key in op.keys:
                    raise DuplicateKey("duplicate key given in txn request", key=key)


def _payload_size(op) -> int:
    """Bytes of keys and values a parsed op carries: a deterministic stand-in for its encoded
    size (the shell checks the real encoded size with check_request_size before proposing)."""
    kind = type(op)
    if kind is Put:
        return len(op.key) + len(op.value)
    if kind is Txn:
        return sum(map(_payload_size, (*op.compare, *op.success, *op.failure)))
    if kind is Range or kind is DeleteRange or kind is Compare:
        size = len(op.keys.start) + len(op.keys.stop or b"")
        return size + (len(op.operand) if kind is Compare and isinstance(op.operand, bytes) else 0)
    return 0


def parse_request(req) -> Op:
    """The typed operation of one request dict, or StoreError."""
    try:
        op = _parse_op(req, "", _PARSERS)
    except StoreError:
        raise
    except RecursionError:  # a pathologically nested request
        raise invalid("request", "nested too deeply") from None
    size = _payload_size(op)
    if size > MAX_REQUEST_BYTES:
        raise TooLarge(f"request carries {size} bytes, over the limit of {MAX_REQUEST_BYTES}",
                       size=size, limit=MAX_REQUEST_BYTES)
    return op


_KEY_RANGE_FIELDS = frozenset(("key", "range_end"))


def parse_key_range(key, range_end=None, where: str = "") -> KeyRange:
    """A KeyRange from etcd-style key/range_end arguments (for watches), or InvalidRequest."""
    return _Fields({"key": key, "range_end": range_end}, where, _KEY_RANGE_FIELDS).key_range()


def parse_range_args(args: dict) -> Range:
    """A Range from keyword arguments of KVStore.range (the same checks as a range request)."""
    return _parse_op({"op": "range", **args}, "", _PARSERS)
