"""The register operations of `history` as store requests, and the store's answers as outcomes.

A recorder against the store (a StoreClient, or a KVStore in tests) does, per operation:

    h.invoke(p, f, key, input)
    response = send(request)            # read_request / write_request / cas_request
    output, revision = outcome(f, response)
    versions.learn(key, revision, output if f == READ else new value)
    h.ok(p, output, revision=revision)  # or fail / info, by the error (see store.client)

* read   a range of the key (through ReadIndex: the linearizable read path); the answer's value
         and its mod_revision (0: absent).
* write  a put, or a delete for None; revision: the put's header revision, or the delete's if
         it deleted something (a delete of an absent key changes nothing and has no revision).
* swap   the same with prev_kv: the output is the replaced value.
* cas    a txn: compare the key's mod_revision with the one the client last saw for it, put
         (or delete) on success, read the key on failure. An absent key compares as 0, so after
         a delete the revision to name is 0, never the delete's. The history's input is
         (versions.value_at(key, revision), new): the value that revision names.

The apiserver maps the same way, with resourceVersion for mod_revision: create is cas(None, v)
(AlreadyExists on failure), update with metadata.resourceVersion R is cas(value at R, v) (409
Conflict on failure), delete with a resourceVersion precondition is cas(value at R, None), get is
read. Values are the store's bytes (or what `decode` makes of them); unique per write.
"""
from __future__ import annotations

from typing import Any, Callable

from store.mvcc import compare, delete_op, put_op, range_op, txn_op

from .history import CAS, READ, SWAP, WRITE, HistoryError


def read_request(key: bytes) -> dict:
    return range_op(key)


def write_request(key: bytes, value: bytes | None, *, prev: bool = False) -> dict:
    """A put, or a delete if value is None; prev (a swap) asks for the replaced value."""
    return delete_op(key, prev_kv=prev) if value is None else put_op(key, value, prev_kv=prev)


def cas_request(key: bytes, revision: int, value: bytes | None) -> dict:
    """Write `value` if the key's mod_revision is still `revision` (0: the key is absent)."""
    return txn_op([compare(key, "mod_revision", "=", revision)], [write_request(key, value)], [range_op(key)])


def outcome(f: str, response: dict, decode: Callable[[bytes], Any] = lambda b: b) -> tuple[Any, int | None]:
    """(output, revision) of an answered operation, as the history records them."""
    revision = response["header"]["revision"]
    if f == READ:
        kvs = response.get("kvs") or []
        return (decode(kvs[0]["value"]), kvs[0]["mod_revision"]) if kvs else (None, 0)
    if f == CAS:
        return response["succeeded"], revision if response["succeeded"] and _changed(response["responses"][0]) else None
    if f not in (WRITE, SWAP):
        raise HistoryError(f"unknown operation {f!r}")
    changed = _changed(response)
    if f == WRITE:
        return None, revision if changed else None
    prev = response.get("prev_kv") or (response.get("prev_kvs") or [None])[0]
    return (None if prev is None else decode(prev["value"])), revision if changed else None


def _changed(response: dict) -> bool:
    """Whether a put or delete response made a new revision (a delete of nothing does not)."""
    return response.get("deleted", 1) > 0
