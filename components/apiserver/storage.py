"""Objects in the store: encoding, and the conditional writes every verb is built from.

Objects are stored as msgpack at `registry_key(...)` without `metadata.resourceVersion`; the
key's mod_revision *is* the resourceVersion (as a string), set on every object read back.
Every write is a txn whose compare is on the key's mod_revision (0: "does not exist"), so a
concurrent change is always detected, never overwritten.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import msgpack

from kubemu.api.limits import MAX_OBJECT_BYTES
from store.client import Compacted, StoreClient
from store.mvcc import compare, delete_op, prefix_end, put_op, range_op


def encode(obj: dict) -> bytes:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "resourceVersion" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"}}
    return msgpack.packb(obj, use_bin_type=True)


def decode(value: bytes, revision: int) -> dict:
    obj = msgpack.unpackb(value, raw=False)
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        meta["resourceVersion"] = str(revision)
    return obj


def _b(key: str | bytes) -> bytes:
    return key.encode() if isinstance(key, str) else key


class Current(NamedTuple):
    """A key's stored state: its encoded value (None: absent) and mod_revision (0: absent).
    Kept encoded, so whoever decodes it gets an object of its own to change."""
    value: bytes | None
    revision: int

    def decoded(self) -> dict | None:
        return None if self.value is None else decode(self.value, self.revision)


ABSENT = Current(None, 0)


def _current(kvs: list | None) -> Current:
    return Current(kvs[0]["value"], kvs[0]["mod_revision"]) if kvs else ABSENT


class Storage:
    """Thin typed wrapper over a StoreClient for API objects."""

    def __init__(self, client: StoreClient):
        self.client = client

    async def get(self, key: str) -> tuple[dict | None, int]:
        """(object, mod_revision) or (None, 0)."""
        current = await self.read(key)
        return current.decoded(), current.revision

    async def read(self, key: str) -> Current:
        """The key's state now (a linearizable read), still encoded."""
        kv = await self.client.get(_b(key))
        return ABSENT if kv is None else Current(kv["value"], kv["mod_revision"])

    async def create(self, key: str, value: bytes) -> int | None:
        """Put if absent: the new revision, or None if the key exists."""
        k = _b(key)
        resp = await self.client.txn([compare(k, "mod_revision", "=", 0)], [put_op(k, value)], [])
        return resp["header"]["revision"] if resp.get("succeeded") else None

    async def update(self, key: str, value: bytes, expected: int) -> int | Current:
        """Put if the key's mod_revision is still `expected`: the new revision, or else the
        key's current state (read in the same txn, as etcd3's GuaranteedUpdate does, so a
        retry needs no read of its own)."""
        return await self._if_unchanged(_b(key), expected, put_op(_b(key), value))

    async def delete(self, key: str, expected: int) -> int | Current:
        """Delete if the key's mod_revision is still `expected`: as `update`."""
        return await self._if_unchanged(_b(key), expected, delete_op(_b(key)))

    async def _if_unchanged(self, key: bytes, expected: int, op: dict) -> int | Current:
        resp = await self.client.txn([compare(key, "mod_revision", "=", expected)], [op], [range_op(key)])
        if resp.get("succeeded"):
            return resp["header"]["revision"]
        return _current(resp["responses"][0].get("kvs"))

    async def list(self, prefix: str, *, start: bytes | None = None, revision: int = 0,
                   limit: int = 0) -> tuple[list[tuple[bytes, dict]], int, bool]:
        """([(key, object)...], the read's revision, more?) for keys in [start or prefix, end of prefix)."""
        p = _b(prefix)
        resp = await self.client.range(start or p, prefix_end(p), revision=revision, limit=limit)
        rev = revision or resp["header"]["revision"]
        items = [(kv["key"], decode(kv["value"], kv["mod_revision"])) for kv in resp.get("kvs") or ()]
        return items, rev, bool(resp.get("more"))

    async def current_revision(self, prefix: str) -> int:
        p = _b(prefix)
        resp = await self.client.range(p, prefix_end(p), count_only=True)
        return resp["header"]["revision"]


__all__ = ["Storage", "Current", "ABSENT", "encode", "decode", "MAX_OBJECT_BYTES", "Compacted", "Any"]
