"""Plain data of the MVCC state machine: errors, events, key-values, and their encodings.

Public names are re-exported by `store.mvcc`; import them from there.
"""
from __future__ import annotations

from typing import NamedTuple

import msgpack

from kubemu.packer import packb

# etcd's default --max-request-bytes is 1.5 MiB.
MAX_REQUEST_BYTES = 3 * 512 * 1024
# etcd's default --max-txn-ops.
MAX_TXN_OPS = 128
# Lease ids are etcd's int64, never 0 (0 means "no lease"); etcd's MaxLeaseTTL is 9,000,000,000 s.
MAX_LEASE_ID = 2**63 - 1
MAX_LEASE_TTL = 9_000_000_000

PUT = "PUT"
DELETE = "DELETE"


# ---------------------------------------------------------------------------------------- errors

class StoreError(Exception):
    """A typed failure of a request: `code` is one of the subclasses' codes, `details` a
    msgpack-friendly map. `to_wire`/`from_wire` carry it across processes."""

    code = "StoreError"
    _by_code: dict[str, type[StoreError]] = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        StoreError._by_code[cls.code] = cls

    def __init__(self, code: str, message: str, **details) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r}, {self.details!r})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, StoreError) and (self.code, self.message, self.details)
                == (other.code, other.message, other.details))

    __hash__ = Exception.__hash__

    def to_wire(self) -> dict:
        return {"code": self.code, "message": self.message, "details": dict(self.details)}

    @staticmethod
    def from_wire(obj: dict) -> StoreError:
        err = StoreError(obj["code"], obj["message"], **obj.get("details", {}))
        cls = StoreError._by_code.get(err.code)
        if cls is not None:
            err.__class__ = cls
        return err


class Compacted(StoreError):
    """The revision asked for is below the compact revision (etcd ErrCompacted)."""
    code = "Compacted"

    def __init__(self, compact_revision: int, message: str = "") -> None:
        super().__init__(self.code, message or "required revision has been compacted",
                         compact_revision=compact_revision)

    @property
    def compact_revision(self) -> int:
        return self.details["compact_revision"]


def _simple(name: str, doc: str) -> type[StoreError]:
    def __init__(self, message: str, **details) -> None:
        StoreError.__init__(self, name, message, **details)
    return type(name, (StoreError,), {"code": name, "__doc__": doc, "__init__": __init__})


FutureRevision = _simple("FutureRevision", "The revision asked for is above the current one (etcd ErrFutureRev).")
LeaseNotFound = _simple("LeaseNotFound", "No lease with that id (etcd ErrLeaseNotFound).")
LeaseExists = _simple("LeaseExists", "A lease with that id already exists (etcd ErrLeaseExists).")
KeyNotFound = _simple("KeyNotFound", "ignore_value/ignore_lease put on a missing key (etcd ErrKeyNotFound).")
DuplicateKey = _simple("DuplicateKey", "A txn writes one key twice (etcd ErrDuplicateKey).")
InvalidRequest = _simple("InvalidRequest", "A malformed request; details['field'] names the field.")
TooLarge = _simple("TooLarge", "A request over MAX_REQUEST_BYTES (etcd ErrRequestTooLarge).")


def invalid(field: str, message: str) -> StoreError:
    return InvalidRequest(f"{field}: {message}", field=field)


def check_request_size(encoded_len: int) -> None:
    """For the shell, before proposing: refuse a request whose encoding is over 1.5 MiB."""
    if encoded_len > MAX_REQUEST_BYTES:
        raise TooLarge(f"request is {encoded_len} bytes, over the limit of {MAX_REQUEST_BYTES}",
                       size=encoded_len, limit=MAX_REQUEST_BYTES)


# -------------------------------------------------------------------------- key-values and events

def make_kv(key: bytes, value: bytes, create_revision: int, mod_revision: int, version: int,
            lease: int) -> dict:
    """etcd's mvccpb.KeyValue as a plain dict."""
    return {"key": key, "value": value, "create_revision": create_revision,
            "mod_revision": mod_revision, "version": version, "lease": lease}


class Event(NamedTuple):
    """A change, for watchers: type PUT or DELETE; kv is the new state (for DELETE a tombstone:
    the key and mod_revision = the delete's revision, everything else zero/empty); prev_kv is
    the state just before, or None (key absent, or not asked for)."""
    type: str
    kv: dict
    prev_kv: dict | None = None

    @property
    def revision(self) -> int:
        return self.kv["mod_revision"]

    def to_wire(self) -> dict:
        return {"type": self.type, "kv": self.kv, "prev_kv": self.prev_kv}

    @classmethod
    def from_wire(cls, obj: dict) -> Event:
        return cls(obj["type"], obj["kv"], obj.get("prev_kv"))


# ---------------------------------------------------------------------------- on-disk encodings

SUB_BITS = 32
SUB_MASK = (1 << SUB_BITS) - 1


def pack_rev(main: int, sub: int) -> int:
    """A (revision, sub-revision) pair as one int that orders like the pair."""
    return (main << SUB_BITS) | sub


def main_of(packed: int) -> int:
    return packed >> SUB_BITS


class Record(NamedTuple):
    """One version of a key, as stored under its revision. version == 0 marks a tombstone."""
    key: bytes
    value: bytes
    create_revision: int
    version: int
    lease: int

    @property
    def tombstone(self) -> bool:
        return self.version == 0

    def kv(self, packed: int, keys_only: bool = False) -> dict:
        return make_kv(self.key, b"" if keys_only else self.value, self.create_revision,
                       main_of(packed), self.version, self.lease)

    def encode(self) -> bytes:
        return packb(self)  # a tuple subclass: packed as the array it is

    @classmethod
    def decode(cls, data: bytes) -> Record:
        key, value, create, version, lease = msgpack.unpackb(data, raw=False)
        if not (isinstance(key, bytes) and isinstance(value, bytes)
                and all(type(n) is int for n in (create, version, lease))):
            raise ValueError("malformed record")
        return cls(key, value, create, version, lease)


def tombstone(key: bytes) -> Record:
    return Record(key, b"", 0, 0, 0)
