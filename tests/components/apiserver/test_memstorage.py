"""components.apiserver.memstorage: Storage's contract (revisions, conditional writes, pages,
compaction) and a watch, from the store's state machine in memory."""
from __future__ import annotations

import asyncio

import pytest

from components.apiserver.memstorage import MemStorage
from components.apiserver.storage import ABSENT, Current, encode
from store.client import Compacted
from tests.conftest import DEADLINE


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


def obj(name: str, **fields) -> dict:
    return {"kind": "Pod", "metadata": {"name": name}, **fields}


def test_conditional_writes_and_revisions():
    async def body():
        s = MemStorage()
        rev = await s.create("/registry/pods/ns/a", encode(obj("a")))
        assert rev and await s.create("/registry/pods/ns/a", encode(obj("a"))) is None  # exists
        got, at = await s.get("/registry/pods/ns/a")
        assert at == rev and got["metadata"]["resourceVersion"] == str(rev)
        # a failed compare answers the key's current state, read by the same txn
        assert await s.update("/registry/pods/ns/a", encode(obj("a", x=1)), rev - 1) == \
            Current(encode(obj("a")), rev)
        rev2 = await s.update("/registry/pods/ns/a", encode(obj("a", x=1)), rev)
        assert rev2 == rev + 1 and await s.current_revision("/registry/pods/") == rev2
        assert await s.delete("/registry/pods/ns/a", rev) == Current(encode(obj("a", x=1)), rev2)
        assert await s.delete("/registry/pods/ns/a", rev2) == rev2 + 1
        assert await s.get("/registry/pods/ns/a") == (None, 0)
        assert await s.update("/registry/pods/ns/a", encode(obj("a")), rev2) == ABSENT
    run(body())


def test_pages_past_revisions_and_compaction():
    async def body():
        s = MemStorage()
        for name in "abc":
            await s.create(f"/registry/pods/ns/{name}", encode(obj(name)))
        first = await s.current_revision("/registry/pods/")
        await s.create("/registry/pods/ns/d", encode(obj("d")))
        page, rev, more = await s.list("/registry/pods/ns/", limit=2)
        assert [k for k, _ in page] == [b"/registry/pods/ns/a", b"/registry/pods/ns/b"] and more
        rest, _, more = await s.list("/registry/pods/ns/", start=page[-1][0] + b"\0", revision=rev)
        assert [o["metadata"]["name"] for _, o in rest] == ["c", "d"] and not more
        old, at, _ = await s.list("/registry/pods/ns/", revision=first)
        assert at == first and [o["metadata"]["name"] for _, o in old] == ["a", "b", "c"]
        await s.client.compact(rev)
        with pytest.raises(Compacted):
            await s.list("/registry/pods/ns/", revision=first)
    run(body())


def test_a_watch_sees_later_writes_and_its_history_until_compacted():
    async def body():
        s = MemStorage()
        rev = await s.create("/registry/pods/ns/a", encode(obj("a")))
        events = s.client.watch("/registry/pods/", prefix=True, start_revision=rev, prev_kv=True).__aiter__()
        assert (await anext(events)).kv["key"] == b"/registry/pods/ns/a"  # history
        await s.delete("/registry/pods/ns/a", rev)
        ev = await anext(events)  # a write after the watch began
        assert ev.type == "DELETE" and ev.prev_kv["mod_revision"] == rev
        await s.client.compact(rev + 1)
        with pytest.raises(Compacted):
            await anext(s.client.watch("/registry/pods/", prefix=True, start_revision=rev).__aiter__())
    run(body())
