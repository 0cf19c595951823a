"""The node key cache's shell: Node annotations followed through the watch cache, read by the
CURVE identify hook."""
from __future__ import annotations

import asyncio
import random

import zmq

from components.apiserver.audit import AuditLog
from components.apiserver.handlers import API
from components.apiserver.memstorage import MemStorage
from components.apiserver.nodekeycache import NodeKeyCache
from components.apiserver.nodekeys import ANNOTATION
from components.apiserver.watchcache import WatchCache
from tests.conftest import DEADLINE

A, B = (zmq.curve_keypair()[0].decode() for _ in range(2))


async def until(cond):
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE
    while not cond():
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.01)


def test_the_hook_knows_a_node_by_its_annotation_after_the_keys_of_the_directory():
    async def main():
        storage = MemStorage()
        cache = WatchCache(storage.client)
        api = API(storage, cache, AuditLog(None), rand=random.Random(1))
        await api.create("nodes", {"metadata": {"name": "early", "annotations": {ANNOTATION: A}}})
        keys = NodeKeyCache(cache, retry_seconds=0.01)
        keys.start()
        identify = keys.chain(lambda key: "kubernetes-admin" if key == B else None)
        try:
            await until(lambda: identify(A) == "system:node:early")  # listed
            await api.create("nodes", {"metadata": {"name": "late", "annotations": {ANNOTATION: B}}})
            await api.patch("nodes", "early", {"metadata": {"annotations": {ANNOTATION: None}}})
            await until(lambda: identify(A) is None)  # followed
            assert keys.identify(B) == "system:node:late" and identify(B) == "kubernetes-admin"
            await api.delete("nodes", "late")
            await until(lambda: keys.identify(B) is None)
        finally:
            await keys.close()
            await cache.close()
    asyncio.run(main())


def test_once_listed_the_index_knows_every_node_and_admission_refuses_a_copied_key():
    """The CURVE server opens after wait_listed (server.py): a joined kubelet reconnecting
    right after a restart is known at once. A Node may not name a key another Node names."""
    from components.apiserver import caller
    from kubemu import wire
    from kubemu.api.identity import UserInfo

    async def main():
        storage = MemStorage()
        cache = WatchCache(storage.client)
        keys = NodeKeyCache(cache, retry_seconds=0.01)
        api = API(storage, cache, AuditLog(None), rand=random.Random(1), key_owners=keys.owners)
        await api.create("nodes", {"metadata": {"name": "y", "annotations": {ANNOTATION: A}}})
        await api.create("nodes", {"metadata": {"name": "x"}})
        keys.start()
        try:
            await asyncio.wait_for(keys.wait_listed(), DEADLINE)
            assert keys.identify(A) == "system:node:y" and keys.owners(A) == ["y"]
            caller.current.set(UserInfo("system:node:x", ("system:nodes",)))
            try:
                await api.patch("nodes", "x", {"metadata": {"annotations": {ANNOTATION: A}}})
            except wire.Forbidden as err:
                assert err.message == f'nodes "x" is forbidden: its {ANNOTATION} is node "y"\'s'
            else:
                raise AssertionError("a copied key was admitted")
            assert keys.identify(A) == "system:node:y"  # y stays on the wire
            await api.patch("nodes", "x", {"metadata": {"annotations": {ANNOTATION: B}}})  # its own: admitted
        finally:
            caller.current.set(None)
            await keys.close()
            await cache.close()
    asyncio.run(main())


def test_close_cancelled_is_cancelled_too():
    """close() awaits the follower's end; cancelling close() itself is not swallowed with it."""
    async def main():
        storage = MemStorage()
        cache = WatchCache(storage.client)
        keys = NodeKeyCache(cache, retry_seconds=0.01)
        keys.start()
        await asyncio.wait_for(keys.wait_listed(), DEADLINE)
        closing = asyncio.create_task(keys.close())
        await asyncio.sleep(0)  # close() now awaits the cancelled follower
        closing.cancel()
        try:
            await closing
        except asyncio.CancelledError:
            pass
        else:
            raise AssertionError("close() swallowed its own cancellation")
        finally:
            await cache.close()
    asyncio.run(main())
