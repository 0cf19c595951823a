"""kubemu.informer against a real 3-replica store + apiserver: sync, ordered events, selector
enter/leave, resync, kill -9 of the apiserver mid-watch, and a compaction forcing a relist.

Each informer runs on its own event loop in a background thread (`Running`), so the test body
stays blocking and can drive the apiserver fixture; the cache is read on the informer's loop."""
from __future__ import annotations

import asyncio
import threading

from kubemu.apiclient import ApiClient
from kubemu.cache import NAMESPACE_INDEX, DeletedFinalStateUnknown, meta_namespace_key
from kubemu.informer import Backoff, Informer
from store.client import SyncStoreClient
from tests.components.apiserver import APIServerEnv, api, pod  # noqa: F401  (api is a fixture)
from tests.conftest import DEADLINE, wait_for


class Running:
    """An Informer on its own loop thread, recording every handler call as a tuple."""

    def __init__(self, endpoint: str, resource: str, **kw):
        self.events: list[tuple] = []
        self._lock = threading.Lock()
        self.loop = asyncio.new_event_loop()
        self.client = ApiClient(endpoint, timeout=5)
        self.informer = Informer(self.client, resource, backoff_max=1.0, **kw)
        self.informer.add_event_handler(
            on_add=lambda o: self._record(("add", meta_namespace_key(o), o)),
            on_update=lambda old, new: self._record(("update", meta_namespace_key(new), old, new)),
            on_delete=lambda o: self._record(("delete", meta_namespace_key(o), o)))
        self.error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()
        assert self._ready.wait(DEADLINE)

    def _record(self, ev: tuple) -> None:
        with self._lock:
            self.events.append(ev)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def body():
            self._stop = asyncio.Event()
            self._ready.set()
            try:
                await self.informer.run(self._stop)
            finally:
                await self.client.close()

        try:
            self.loop.run_until_complete(body())
        except BaseException as exc:  # noqa: BLE001  (reported by stop())
            self.error = exc
        finally:
            self.loop.close()

    def on_loop(self, fn):
        async def call():
            return fn()
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(DEADLINE)

    def keys(self) -> set[str]:
        return set(self.on_loop(self.informer.indexer.list_keys))

    def rvs(self) -> dict[str, str]:
        return self.on_loop(lambda: {meta_namespace_key(o): o["metadata"]["resourceVersion"]
                                     for o in self.informer.indexer.list()})

    def synced(self) -> bool:
        return self.informer.has_synced()

    def since(self, n: int) -> list[tuple]:
        with self._lock:
            return [e[:2] for e in self.events[n:]]

    def count(self) -> int:
        with self._lock:
            return len(self.events)

    def stop(self) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self._stop.set)
            self.thread.join(DEADLINE)
        assert not self.thread.is_alive(), "the informer did not stop"
        assert self.error is None, self.error

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _ns(api, name):
    api.call("create", resource="namespaces", object={"metadata": {"name": name}})
    return name


def fresh(api, ns, **kw) -> dict[str, str]:
    listed = api.call("list", resource="pods", namespace=ns, **kw)
    return {meta_namespace_key(o): o["metadata"]["resourceVersion"] for o in listed["items"]}


def side_apiserver(api) -> APIServerEnv:
    """A second apiserver on the same store (so writes can happen while the first is down)."""
    other = APIServerEnv(api.dir)
    other.store = api.store
    other.endpoint = f"ipc://{api.dir}/api2.sock"
    other.log_path = api.dir / "apiserver2.log"
    other.start_apiserver()
    return other


def stop_side(other: APIServerEnv) -> None:
    other.kill_apiserver()
    if other.client is not None:
        other.client.close()
        other.client = None


def test_syncs_existing_objects_then_sees_changes_in_order(api):
    ns = _ns(api, "i1")
    for n in ("a", "b", "c"):
        api.call("create", resource="pods", namespace=ns, object=pod(n))
    api.call("create", resource="pods", namespace="default", object=pod("elsewhere-i1"))
    with Running(api.endpoint, "pods", namespace=ns) as r:
        wait_for(r.synced, message="the informer to sync")
        assert r.keys() == {f"{ns}/a", f"{ns}/b", f"{ns}/c"}
        assert sorted(r.since(0)) == [("add", f"{ns}/a"), ("add", f"{ns}/b"), ("add", f"{ns}/c")]
        assert {o["metadata"]["name"] for o in r.on_loop(
            lambda: r.informer.indexer.by_index(NAMESPACE_INDEX, ns))} == {"a", "b", "c"}
        n = r.count()
        api.call("create", resource="pods", namespace=ns, object=pod("d"))
        api.call("patch", resource="pods", namespace=ns, name="a", patch={"metadata": {"labels": {"x": "1"}}})
        api.call("delete", resource="pods", namespace=ns, name="b", grace_period_seconds=0)
        api.call("create", resource="pods", namespace="default", object=pod("elsewhere2-i1"))
        expected = [("add", f"{ns}/d"), ("update", f"{ns}/a"), ("delete", f"{ns}/b")]
        wait_for(lambda: len(r.since(n)) >= 3, message="three events")
        assert r.since(n) == expected
        upd = r.events[n + 1]
        assert not upd[2]["metadata"].get("labels") and upd[3]["metadata"]["labels"] == {"x": "1"}
        wait_for(lambda: r.rvs() == fresh(api, ns), message="cache == list")


def test_label_selector_enter_and_leave(api):
    ns = _ns(api, "i2")
    api.call("create", resource="pods", namespace=ns, object=pod("s", labels={"app": "no"}))
    api.call("create", resource="pods", namespace=ns, object=pod("t", labels={"app": "yes"}))
    with Running(api.endpoint, "pods", namespace=ns, label_selector="app=yes") as r:
        wait_for(r.synced)
        assert r.keys() == {f"{ns}/t"}
        n = r.count()
        api.call("patch", resource="pods", namespace=ns, name="s", patch={"metadata": {"labels": {"app": "yes"}}})
        wait_for(lambda: r.since(n) == [("add", f"{ns}/s")], message="s enters")
        api.call("patch", resource="pods", namespace=ns, name="t", patch={"metadata": {"labels": {"app": "no"}}})
        wait_for(lambda: r.since(n) == [("add", f"{ns}/s"), ("delete", f"{ns}/t")], message="t leaves")
        assert r.keys() == {f"{ns}/s"}


def test_resync_redelivers_cached_objects_as_updates(api):
    ns = _ns(api, "i3")
    api.call("create", resource="pods", namespace=ns, object=pod("r"))
    with Running(api.endpoint, "pods", namespace=ns, resync_period=0.2) as r:
        wait_for(r.synced)

        def resynced():
            return [e for e in list(r.events) if e[0] == "update" and e[2] is e[3]]
        got = wait_for(resynced, message="a resync update")
        assert got[0][1] == f"{ns}/r"
        assert r.informer.stats["resyncs"] >= 1


def test_late_handler_gets_existing_objects(api):
    ns = _ns(api, "i4")
    api.call("create", resource="pods", namespace=ns, object=pod("x"))
    with Running(api.endpoint, "pods", namespace=ns) as r:
        wait_for(r.synced)
        seen = []
        r.on_loop(lambda: r.informer.add_event_handler(on_add=lambda o: seen.append(meta_namespace_key(o))))
        assert seen == [f"{ns}/x"]


def test_a_failing_handler_keeps_no_event_from_the_others(caplog):
    """Handlers of each kind run in the order added, a raising one is logged and skipped, and
    one registered for some kinds only never sees the others (no network: events applied
    directly)."""
    inf = Informer(None, "pods")
    seen: list[str] = []

    def broken(*_args):
        raise RuntimeError("handler bug")

    inf.add_event_handler(broken, broken, broken)
    inf.add_event_handler(lambda o: seen.append("add"), lambda old, new: seen.append("update"),
                          lambda o: seen.append("delete"))
    inf.add_event_handler(on_update=lambda old, new: seen.append("update only"))
    obj = {"metadata": {"namespace": "ns", "name": "a", "resourceVersion": "1"}}
    inf._apply("ADDED", obj)
    inf._apply("MODIFIED", {"metadata": {**obj["metadata"], "resourceVersion": "2"}})
    inf._apply("DELETED", {"metadata": {**obj["metadata"], "resourceVersion": "3"}})
    assert seen == ["add", "update", "update only", "delete"]
    inf._apply("ADDED", obj)
    inf.add_event_handler(on_add=broken)      # a late joiner's failure is logged the same way
    inf.add_event_handler(on_add=lambda o: seen.append("late add"))
    assert seen[-2:] == ["add", "late add"]
    failures = [r for r in caplog.records if "event handler" in r.getMessage()]
    assert len(failures) == 5 and all("broken" in r.getMessage() for r in failures)
    assert inf.last_resource_version == "1" and inf.get("ns/a") is obj


def test_backoff_is_capped_jittered_exponential():
    import random
    b = Backoff(initial=0.1, cap=2.0, jitter=0.5, rng=random.Random(7))
    delays = [b.next() for _ in range(12)]
    assert 0.05 <= delays[0] <= 0.1 and 0.1 <= delays[1] <= 0.2 and 0.2 <= delays[2] <= 0.4
    assert all(0 < d <= 2.0 for d in delays)
    assert all(1.0 <= d <= 2.0 for d in delays[6:]) and len(set(delays[6:])) > 1   # capped, still jittered
    b.reset()
    assert b.next() <= 0.1


def test_kill_apiserver_mid_watch_recovers_without_missing_events(api):
    ns = _ns(api, "i5")
    for n in ("k0", "k1", "k2"):
        api.call("create", resource="pods", namespace=ns, object=pod(n))
    with Running(api.endpoint, "pods", namespace=ns) as r:
        wait_for(r.synced)
        api.call("create", resource="pods", namespace=ns, object=pod("k3"))
        wait_for(lambda: f"{ns}/k3" in r.keys(), message="k3 seen")
        api.kill_apiserver()
        # meanwhile, through another apiserver on the same store
        other = side_apiserver(api)
        try:
            other.call("create", resource="pods", namespace=ns, object=pod("while-down"))
            other.call("delete", resource="pods", namespace=ns, name="k0", grace_period_seconds=0)
            other.call("patch", resource="pods", namespace=ns, name="k1",
                       patch={"metadata": {"labels": {"changed": "yes"}}})
        finally:
            stop_side(other)
        n = r.count()
        api.start_apiserver()
        wait_for(lambda: r.rvs() == fresh(api, ns), message="the cache to equal a fresh list")
        assert r.keys() == {f"{ns}/k1", f"{ns}/k2", f"{ns}/k3", f"{ns}/while-down"}
        # resumed from the last resourceVersion: the watch told us each change, no relist
        got = r.since(n)
        assert ("add", f"{ns}/while-down") in got and ("delete", f"{ns}/k0") in got
        assert ("update", f"{ns}/k1") in got
        deleted = [e for e in r.events[n:] if e[0] == "delete"]
        assert not isinstance(deleted[0][2], DeletedFinalStateUnknown)
        assert r.informer.stats["lists"] == 1 and r.informer.stats["errors"] >= 1
        # and it keeps watching
        api.call("create", resource="pods", namespace=ns, object=pod("after"))
        wait_for(lambda: f"{ns}/after" in r.keys(), message="a create after the restart")


def test_compaction_forces_expired_and_relist(api):
    ns = _ns(api, "i6")
    for n in ("c0", "c1"):
        api.call("create", resource="pods", namespace=ns, object=pod(n))
    with Running(api.endpoint, "pods", namespace=ns) as r:
        wait_for(r.synced)
        api.kill_apiserver()
        other = side_apiserver(api)
        try:
            other.call("create", resource="pods", namespace=ns, object=pod("c2"))
            other.call("delete", resource="pods", namespace=ns, name="c0", grace_period_seconds=0)
            last = other.call("patch", resource="pods", namespace=ns, name="c1",
                              patch={"metadata": {"labels": {"v": "2"}}})
        finally:
            stop_side(other)
        with SyncStoreClient(list(api.store.endpoints.values())) as sc:
            sc.compact(int(last["metadata"]["resourceVersion"]))
        n = r.count()
        api.start_apiserver()   # a fresh watch cache: the informer's old RV is only in compacted history
        wait_for(lambda: r.rvs() == fresh(api, ns), message="the cache to equal a fresh list")
        assert r.informer.stats["expired"] >= 1 and r.informer.stats["lists"] >= 2
        events = r.events[n:]
        gone = [e for e in events if e[0] == "delete"]
        assert [e[1] for e in gone] == [f"{ns}/c0"]
        assert isinstance(gone[0][2], DeletedFinalStateUnknown) and gone[0][2].key == f"{ns}/c0"
        assert gone[0][2].obj["metadata"]["name"] == "c0"
        assert ("add", f"{ns}/c2") in [e[:2] for e in events]
        api.call("delete", resource="pods", namespace=ns, name="c2", grace_period_seconds=0)
        wait_for(lambda: f"{ns}/c2" not in r.keys(), message="watching again after the relist")
