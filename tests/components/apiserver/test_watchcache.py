"""components.apiserver.watchcache: a watcher gets only the events after its resourceVersion,
also when the cache has not reached that version yet (an informer failing over from another
apiserver), and a version the store has not reached is refused as too large."""
from __future__ import annotations

import asyncio
import shutil
import tempfile

import msgpack
import pytest

from components.apiserver.audit import AuditLog
from components.apiserver.handlers import API
from components.apiserver import watchcache
from components.apiserver.memstorage import MemoryStoreClient, MemStorage
from components.apiserver.storage import ABSENT, Current, Storage, decode, encode
from components.apiserver.strategy import Timeout
from components.apiserver.watchcache import CacheEvent, Watcher, WatchCache, Written, to_cache_event
from kubemu import wire
from kubemu.api.resources import field_set
from kubemu.apiclient import ApiClient, is_too_large_resource_version
from kubemu.cache import meta_namespace_key
from kubemu.informer import Informer
from store.mvcc import Event
from tests.conftest import DEADLINE


def ev(rev: int) -> CacheEvent:
    return CacheEvent(rev, "PUT", f"/registry/pods/ns/p{rev}", {"rev": rev}, None)


def test_a_watcher_made_while_the_cache_is_behind_skips_what_it_asked_to_start_after():
    w = Watcher(start=7)  # the cache has seen up to 5 when the watch from 7 arrives
    for rev in (6, 7, 8, 9):
        w.offer(ev(rev))
    assert [e.revision for e in w.queue] == [8, 9]
    assert w.wake.is_set()


def test_a_cacher_starts_from_a_list_of_every_key_by_pages_then_follows_the_watch(monkeypatch):
    monkeypatch.setattr(watchcache, "LIST_PAGE", 2)  # five pods: three pages

    async def body():
        storage = MemStorage()
        keys = [f"/registry/pods/ns/p{i}" for i in range(5)]
        for key in keys:
            await storage.create(key, encode(pod_obj(key)))
        await storage.create("/registry/podtemplates/ns/t", encode(pod_obj("t")))  # past the prefix
        cacher = WatchCache(storage.client).cacher("/registry/pods/")
        assert cacher.current(keys[0]) is None  # not running: nothing to go by
        await cacher.ensure_started()
        try:
            assert {k: cacher.current(k) for k in keys} == {k: await storage.read(k) for k in keys}
            assert set(cacher.state) == set(keys)
            rev = await storage.update(keys[0], encode(pod_obj("changed")), cacher.current(keys[0]).revision)
            await storage.delete(keys[1], cacher.current(keys[1]).revision)
            while cacher.revision < rev + 1:
                await asyncio.sleep(0.001)
            assert cacher.current(keys[0]) == Current(encode(pod_obj("changed")), rev)
            assert cacher.current(keys[1]) == ABSENT
        finally:
            await cacher.close()
        assert cacher.current(keys[0]) is None  # stopped: no longer kept up to date
    asyncio.run(asyncio.wait_for(body(), DEADLINE))


def test_an_events_old_state_and_fields_are_the_previous_events_while_that_is_in_the_window(monkeypatch):
    monkeypatch.setattr(watchcache, "WINDOW", 2)

    async def body():
        storage = MemStorage()
        cacher = WatchCache(storage.client).cacher("/registry/pods/")
        await cacher.ensure_started()
        seen: list[CacheEvent] = []
        w = cacher.register(cacher.revision)
        a, b = "/registry/pods/ns/a", "/registry/pods/ns/b"
        rev = await storage.create(a, encode(pod_obj("a1")))
        rev = await storage.update(a, encode(pod_obj("a2")), rev)
        await storage.create(b, encode(pod_obj("b1")))
        await storage.create("/registry/pods/ns/c", encode(pod_obj("c1")))  # a's last event leaves the window
        await storage.delete(a, rev)
        while len(seen) < 5:
            await w.wake.wait()
            w.wake.clear()
            seen.extend(w.queue)
            w.queue.clear()
        await cacher.close()
        a1, a2, _, _, gone = seen
        assert a2.old is a1.obj  # decoded once, shared
        assert gone.old == a2.obj and gone.old is not a2.obj  # decoded again: a2 had left the window
        assert gone.old["metadata"] == {"name": "a2", "namespace": "ns", "resourceVersion": str(rev)}
        for e in seen:  # each object's selectable fields, computed once, go with it
            assert e.fields == (field_set("pods", e.obj) if e.obj is not None else None)
            assert e.old_fields == (field_set("pods", e.old) if e.old is not None else None)
        assert a2.old_fields is a1.fields and a2.fields["metadata.name"] == "a2"
    asyncio.run(asyncio.wait_for(body(), DEADLINE))



def test_the_event_of_a_write_this_apiserver_made_carries_the_object_it_wrote_as_decoding_would_give():
    """No decode for the cacher: each event's object is the one the handler wrote and answered,
    equal to the stored value decoded, down to the order of its keys (what watchers are sent)."""
    async def body():
        storage = MemStorage()
        api = API(storage, WatchCache(storage.client), AuditLog(None))
        await api.ensure_system_namespaces()
        cacher = api.cache.cacher("/registry/pods/")
        await cacher.ensure_started()
        w = cacher.register(cacher.revision)
        seen: list[CacheEvent] = []

        async def event() -> dict:  # each write's client acts on the event of the one before
            await w.wake.wait()
            w.wake.clear()
            seen.extend(w.queue)
            w.queue.clear()
            return seen[-1].obj
        pod = {"metadata": {"name": "p", "namespace": "default", "labels": {"app": "a"}},
               "spec": {"containers": [{"name": "c", "image": "i"}]}}
        written = [await api.create("pods", pod, "default")]
        await event()
        written.append(await api.bind("p", "n1", "default"))
        await event()
        written.append(await api.patch("pods", "p", {"status": {"phase": "Running"}}, "default",
                                       subresource="status"))
        patched = await event()
        # the client's resourceVersion in the middle of its metadata, where the strategy keeps it
        sent = {**patched, "metadata": {"resourceVersion": patched["metadata"]["resourceVersion"],
                                        **{k: v for k, v in patched["metadata"].items() if k != "resourceVersion"},
                                        "labels": {"app": "b"}}}
        written.append(await api.update("pods", sent, "default"))
        await event()
        await cacher.close()
        assert len(seen) == len(written)
        for ev, obj in zip(seen, written):
            assert ev.obj is obj
            stored = storage.client.kv.range(ev.key.encode(), revision=ev.revision)["kvs"][0]["value"]
            assert msgpack.packb(obj) == msgpack.packb(decode(stored, ev.revision))
            assert ev.fields == field_set("pods", decode(stored, ev.revision))
        assert cacher.written == {}  # every offered object was taken
    asyncio.run(asyncio.wait_for(body(), DEADLINE))


def test_an_offered_object_is_used_only_by_the_event_of_its_own_revision():
    key = "/registry/pods/ns/a"
    stored = encode(pod_obj("stored"))

    def put(rev: int) -> Event:
        return Event("PUT", {"key": key.encode(), "value": stored, "mod_revision": rev})
    ahead = {key: Written(8, pod_obj("later"))}  # written at 8, its event still to come
    assert to_cache_event(put(7), written=ahead).obj == decode(stored, 7)
    assert key in ahead
    missed = {key: Written(6, pod_obj("earlier"))}  # its event went by (the cache was not running)
    assert to_cache_event(put(7), written=missed).obj == decode(stored, 7)
    assert missed == {}
    mine = pod_obj("mine")
    offered = {key: Written(7, mine)}
    assert to_cache_event(put(7), written=offered).obj is mine and offered == {}
    gone = {key: Written(7, mine)}  # a delete at the revision (not a write of this apiserver's)
    assert to_cache_event(Event("DELETE", {"key": key.encode(), "value": b"", "mod_revision": 7}),
                          written=gone).obj is None and gone == {}


def test_a_cacher_keeps_an_offered_object_only_while_its_event_is_to_come():
    async def body():
        storage = MemStorage()
        cacher = WatchCache(storage.client).cacher("/registry/pods/")
        key = "/registry/pods/ns/a"
        cacher.wrote(key, 1, pod_obj("a"))
        assert cacher.written == {}  # not running: its events are never seen, so nothing would take it
        await cacher.ensure_started()
        rev = await storage.create(key, encode(pod_obj("a")))
        while cacher.revision < rev:
            await asyncio.sleep(0.001)
        cacher.wrote(key, rev, pod_obj("a"))  # answered after the cache saw its event
        assert cacher.written == {}
        await cacher.close()
    asyncio.run(asyncio.wait_for(body(), DEADLINE))

def pod_obj(name: str) -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns"}}


# -- a watch from a resourceVersion this apiserver's cache has not reached -----------------------
# Two apiservers (API handler stacks with their own watch caches, served on real wire sockets in
# this process) and an informer on a FailoverClient naming both, the way a client of an HA
# control plane fails over when the apiserver serving its watch goes away.

class HeldStore:
    """A store client whose watches deliver nothing until `release` is set: an apiserver whose
    watch cache lags behind the store."""

    def __init__(self, inner):
        self.inner = inner
        self.release = asyncio.Event()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def watch(self, *args, **kwargs):
        return _HeldWatch(self.inner.watch(*args, **kwargs), self.release)


class _HeldWatch:
    def __init__(self, inner, release: asyncio.Event):
        self.inner, self.release = inner, release

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        pass

    async def aclose(self):
        pass

    def __aiter__(self):
        return self._events()

    async def _events(self):
        async for ev in self.inner:
            await self.release.wait()
            yield ev


class Apiserver:
    def __init__(self, sockdir: str, name: str, store, cache_store=None):
        self.api = API(Storage(store), WatchCache(cache_store or store), AuditLog(None))
        self.server = wire.Server(wire.ipc_endpoint(sockdir, f"{name}.sock"), self.api.handlers())
        self.endpoint = self.server.endpoint

    async def start(self) -> Apiserver:
        await self.api.ensure_system_namespaces()
        await self.server.start()
        return self

    async def stop(self) -> None:
        await self.server.close()
        await self.api.namespaces.close()
        await self.api.cache.close()

    def watchers(self, resource: str) -> int:
        return sum(len(c.watchers) for prefix, c in self.api.cache.cachers.items() if resource in prefix)


def configmap(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}


class Recorded:
    """An informer on configmaps in default through `client`, recording its handler calls."""

    def __init__(self, client: ApiClient):
        self.informer = Informer(client, "configmaps", "default", backoff_max=0.5)
        self.calls: list[tuple[str, str]] = []
        self.informer.add_event_handler(
            on_add=lambda o: self.calls.append(("add", o["metadata"]["name"])),
            on_update=lambda old, new: self.calls.append(("update", new["metadata"]["name"])),
            on_delete=lambda o: self.calls.append(("delete", meta_namespace_key(o) if isinstance(o, dict)
                                                   else o.key)))
        self.stop = asyncio.Event()
        self.task = asyncio.ensure_future(self.informer.run(self.stop))

    def names(self) -> set[str]:
        return {key.split("/", 1)[1] for key in self.informer.indexer.list_keys()}

    async def close(self) -> None:
        self.stop.set()
        await asyncio.gather(self.task, return_exceptions=True)


async def until(condition, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not condition():
        if loop.time() > deadline:
            pytest.fail(f"timed out after {DEADLINE:g}s waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.fixture
def sockdir():
    path = tempfile.mkdtemp(prefix="kwc-")  # short: ipc paths are limited to 107 bytes
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_a_watch_from_a_revision_past_the_stores_is_too_large_and_one_it_reached_is_served():
    async def main():
        store = MemoryStoreClient()
        storage, cache = Storage(store), WatchCache(store)
        api = API(storage, cache, AuditLog(None))
        await api.ensure_system_namespaces()
        try:
            await api.create("configmaps", configmap("a"), "default")
            current = await storage.current_revision("/registry/")
            with pytest.raises(Timeout) as err:
                await cache.open("/registry/configmaps/", current + 5)
            assert err.value.details["causes"] == ["ResourceVersionTooLarge"]
            assert is_too_large_resource_version(err.value)
            source, watcher = await cache.open("/registry/configmaps/", current)
            assert watcher is not None
            await api.create("configmaps", configmap("b"), "default")
            ev = await asyncio.wait_for(source.__anext__(), DEADLINE)
            assert ev.obj["metadata"]["name"] == "b"
            await source.aclose()
        finally:
            await api.namespaces.close()
            await cache.close()
    asyncio.run(main())


def test_an_informer_failing_over_to_an_apiserver_whose_cache_is_behind_gets_each_event_once(sockdir):
    async def main():
        store = MemoryStoreClient()
        held = HeldStore(store)
        a = await Apiserver(sockdir, "a", store).start()
        b = await Apiserver(sockdir, "b", store, held).start()
        client = ApiClient([a.endpoint, b.endpoint], timeout=DEADLINE)
        direct = ApiClient(a.endpoint, timeout=DEADLINE)
        recorded = None
        try:
            client.wire.connect()
            await until(lambda: client.wire.connected == [a.endpoint, b.endpoint], "both connections")
            # b's cache starts now and then sees nothing more
            async with ApiClient(b.endpoint, timeout=DEADLINE) as only_b:
                await only_b.watch("configmaps", "default").open()
            recorded = Recorded(client)
            await until(recorded.informer.has_synced, "the informer's first list")
            for name in ("cm-1", "cm-2"):
                await direct.create("configmaps", configmap(name), "default")
            await until(lambda: recorded.names() == {"cm-1", "cm-2"}, "cm-1 and cm-2 through a")
            assert a.watchers("configmaps") == 1 and b.watchers("configmaps") == 0
            await a.stop()
            # the informer watches b from cm-2's resourceVersion, which b's cache has not reached
            await until(lambda: b.watchers("configmaps") == 1, "the informer's watch on b")
            await client.create("configmaps", configmap("cm-3"), "default")
            held.release.set()  # b's cache catches up: cm-1 and cm-2 again, then cm-3
            await until(lambda: "cm-3" in recorded.names(), "cm-3 through b")
            assert recorded.calls == [("add", "cm-1"), ("add", "cm-2"), ("add", "cm-3")]
            assert recorded.informer.stats["lists"] == 1
        finally:
            if recorded is not None:
                await recorded.close()
            await client.close()
            await direct.close()
            await a.stop()
            await b.stop()
    asyncio.run(asyncio.wait_for(main(), 2 * DEADLINE))


def test_an_informer_failing_over_to_an_apiserver_whose_store_is_behind_its_version_lists_again(sockdir):
    """b's store never had the informer's resourceVersion (a store that lost its tail): the
    watch is refused as too large and the informer takes b's state, instead of waiting
    forever for a revision past which b's own events would be skipped."""
    async def main():
        a = await Apiserver(sockdir, "a", MemoryStoreClient()).start()
        b = await Apiserver(sockdir, "b", MemoryStoreClient()).start()
        client = ApiClient([a.endpoint, b.endpoint], timeout=DEADLINE)
        recorded = None
        try:
            client.wire.connect()
            await until(lambda: client.wire.connected == [a.endpoint, b.endpoint], "both connections")
            await b.api.create("configmaps", configmap("only-b"), "default")
            recorded = Recorded(client)
            for i in range(5):
                await a.api.create("configmaps", configmap(f"a-{i}"), "default")
            await until(lambda: recorded.names() == {f"a-{i}" for i in range(5)}, "a's configmaps")
            await a.stop()
            await until(lambda: recorded.names() == {"only-b"}, "b's configmaps")
            assert recorded.informer.stats["lists"] >= 2
            await client.create("configmaps", configmap("b-2"), "default")
            await until(lambda: recorded.names() == {"only-b", "b-2"}, "b's new configmap")
        finally:
            if recorded is not None:
                await recorded.close()
            await client.close()
            await a.stop()
            await b.stop()
    asyncio.run(asyncio.wait_for(main(), 2 * DEADLINE))
