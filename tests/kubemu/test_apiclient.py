"""kubemu.apiclient against a real 3-replica store + apiserver: CRUD, typed errors, paging,
watches (including 410 Expired), retry_on_conflict under concurrent writers, the blocking twin."""
from __future__ import annotations

import asyncio
import copy
import os
import subprocess
import sys

import pytest

from kubemu import apiclient, wire
from kubemu.apiclient import (AlreadyExists, ApiClient, Expired, SyncApiClient, is_already_exists, is_conflict,
                              is_expired, is_not_found, retry_on_conflict, retry_on_conflict_sync)
from kubemu.informer import Informer
from store.client import SyncStoreClient
from tests.components.apiserver import REPO, api, deployment, pod  # noqa: F401  (api is a fixture)
from tests.conftest import DEADLINE, wait_for


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, DEADLINE))


def compact(api, rv) -> None:
    """Compact the store's history up to `rv` (blocking: call it in a thread from async code)."""
    with SyncStoreClient(list(api.store.endpoints.values())) as sc:
        sc.compact(int(rv))


def _ns(api, name):
    api.call("create", resource="namespaces", object={"metadata": {"name": name}})
    return name


def test_crud_and_typed_errors(api):
    ns = _ns(api, "c1")

    async def main():
        async with ApiClient(api.endpoint) as c:
            assert (await c.healthz())["ok"] is True
            created = await c.create("pods", pod("web", labels={"app": "web"}), namespace=ns)
            assert created["metadata"]["namespace"] == ns and created["metadata"]["resourceVersion"]
            got = await c.get("pods", "web", namespace=ns)
            assert got["metadata"]["uid"] == created["metadata"]["uid"]

            with pytest.raises(AlreadyExists) as e:
                await c.create("pods", pod("web"), namespace=ns)
            assert isinstance(e.value, wire.Conflict)
            assert is_already_exists(e.value) and not is_conflict(e.value)

            with pytest.raises(wire.NotFound) as e:
                await c.get("pods", "nope", namespace=ns)
            assert is_not_found(e.value) and not is_conflict(e.value)

            upd = copy.deepcopy(got)
            upd["metadata"]["labels"]["tier"] = "front"
            updated = await c.update("pods", upd)
            assert updated["metadata"]["labels"]["tier"] == "front"
            assert int(updated["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])

            stale = copy.deepcopy(got)          # the old resourceVersion
            stale["metadata"]["labels"]["tier"] = "back"
            with pytest.raises(wire.Conflict) as e:
                await c.update("pods", stale)
            assert is_conflict(e.value) and not is_already_exists(e.value)
            assert not isinstance(e.value, AlreadyExists)

            st = copy.deepcopy(updated)
            st["status"] = {"phase": "Running"}
            st = await c.update_status("pods", st)
            assert st["status"]["phase"] == "Running"

            patched = await c.patch("pods", "web", {"metadata": {"annotations": {"a": "1"}}}, namespace=ns)
            assert patched["metadata"]["annotations"] == {"a": "1"}
            patched = await c.patch("pods", "web", [{"op": "add", "path": "/metadata/labels/j", "value": "2"}],
                                    namespace=ns, patch_type="json")
            assert patched["metadata"]["labels"]["j"] == "2"

            with pytest.raises(wire.Invalid):
                await c.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
                                        "spec": {"containers": []}}, namespace=ns)

            bound = await c.bind("web", "node-1", namespace=ns)
            assert bound["spec"]["nodeName"] == "node-1"

            await c.delete("pods", "web", namespace=ns, grace_period_seconds=0)
            with pytest.raises(wire.NotFound):
                await c.get("pods", "web", namespace=ns)
            with pytest.raises(wire.NotFound):
                await c.delete("pods", "web", namespace=ns)

    run(main())


def test_the_caller_is_who_the_credentials_authenticate_never_a_param(tmp_path):
    """Writes carry no `user` parameter: an apiserver that requires wire credentials learns who
    is asking from the handshake, and SyncApiClient presents the same credentials."""
    from kubemu import _wire_auth

    secrets = tmp_path / "wire"
    creds = _wire_auth.load_credentials(_wire_auth.ensure_secret(secrets, "system:kube-scheduler"))
    seen = []

    def create(resource, object, namespace=None, **extra) -> dict:
        seen.append((wire.peer_identity.get(), sorted(extra)))
        return object

    endpoint = wire.ipc_endpoint(tmp_path, "api.sock")

    async def main():
        async with wire.Server(endpoint, {"create": create}, auth=wire.ServerAuth(secrets)):
            async with ApiClient(endpoint, credentials=creds) as c:
                await c.create("pods", pod("p"), namespace="default")
            await asyncio.to_thread(sync_create)

    def sync_create():
        with SyncApiClient(endpoint, credentials=creds) as c:
            c.create("pods", pod("q"), namespace="default")

    run(main())
    assert seen == [("system:kube-scheduler", []), ("system:kube-scheduler", [])]


def test_list_all_follows_continue_and_selectors(api):
    ns = _ns(api, "c2")

    async def main():
        async with ApiClient(api.endpoint) as c:
            for i in range(7):
                await c.create("pods", pod(f"p{i}", labels={"even": str(i % 2 == 0).lower()}), namespace=ns)
            page = await c.list("pods", namespace=ns, limit=3)
            assert len(page["items"]) == 3 and page["metadata"]["continue"]
            page2 = await c.list("pods", namespace=ns, limit=3, continue_=page["metadata"]["continue"])
            assert {p["metadata"]["name"] for p in page2["items"]}.isdisjoint(
                p["metadata"]["name"] for p in page["items"])
            full = await c.list_all("pods", namespace=ns, limit=2)
            assert sorted(p["metadata"]["name"] for p in full["items"]) == [f"p{i}" for i in range(7)]
            assert "continue" not in full["metadata"] and full["metadata"]["resourceVersion"]
            even = await c.list_all("pods", namespace=ns, label_selector="even=true", limit=2)
            assert sorted(p["metadata"]["name"] for p in even["items"]) == ["p0", "p2", "p4", "p6"]

    run(main())


def test_watch_and_expired(api):
    ns = _ns(api, "c3")

    async def main():
        async with ApiClient(api.endpoint) as c:
            first = await c.create("pods", pod("a"), namespace=ns)
            rv = first["metadata"]["resourceVersion"]
            async with c.watch("pods", namespace=ns, resource_version=rv) as w:
                await c.create("pods", pod("b"), namespace=ns)
                await c.patch("pods", "a", {"metadata": {"labels": {"x": "y"}}}, namespace=ns)
                await c.delete("pods", "b", namespace=ns, grace_period_seconds=0)
                got = []
                async for type_, obj in w:
                    got.append((type_, obj["metadata"]["name"]))
                    if len(got) == 3:
                        break
                assert got == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]

            # from "": the current state as ADDED first
            w = c.watch("pods", namespace=ns)
            try:
                type_, obj = await w.__anext__()
                assert (type_, obj["metadata"]["name"]) == ("ADDED", "a")
            finally:
                await w.aclose()

            # compact past an old rv: watching from it is the 410, typed as Expired (leases: no
            # watch cache for them yet, whose window would still reach back)
            lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
                     "spec": {"holderIdentity": "a"}}
            old = await c.create("leases", lease, namespace=ns)
            latest = await c.patch("leases", "l", {"spec": {"holderIdentity": "b"}}, namespace=ns)
            await asyncio.to_thread(compact, api, latest["metadata"]["resourceVersion"])
            w = c.watch("leases", namespace=ns, resource_version=old["metadata"]["resourceVersion"])
            with pytest.raises(Expired) as e:
                async for _ in w:
                    pass
            await w.aclose()
            assert isinstance(e.value, wire.Gone) and is_expired(e.value)

    run(main())


def test_retry_on_conflict_under_concurrent_updates(api):
    ns = _ns(api, "c4")
    writers = 8

    async def main():
        async with ApiClient(api.endpoint) as c:
            cm = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                  "metadata": {"name": "counter", "annotations": {"n": "0"}}, "spec": {"holderIdentity": "x"}}
            await c.create("leases", cm, namespace=ns)
            calls = []

            async def increment():
                cur = await c.get("leases", "counter", namespace=ns)
                calls.append(1)
                cur = copy.deepcopy(cur)
                cur["metadata"]["annotations"]["n"] = str(int(cur["metadata"]["annotations"]["n"]) + 1)
                return await c.update("leases", cur)

            await asyncio.gather(*(retry_on_conflict(increment, attempts=100) for _ in range(writers)))
            final = await c.get("leases", "counter", namespace=ns)
            assert final["metadata"]["annotations"]["n"] == str(writers)
            assert len(calls) > writers   # concurrent writers did collide and retry

            # attempts exhausted: the last Conflict surfaces, after exactly `attempts` tries
            tries = []

            async def always_conflict():
                tries.append(1)
                raise wire.Conflict("modified", {"reason": "Conflict"})

            with pytest.raises(wire.Conflict):
                await retry_on_conflict(always_conflict, attempts=3)
            assert len(tries) == 3

            # AlreadyExists and other errors are not retried
            tries.clear()

            async def exists():
                tries.append(1)
                return await c.create("leases", cm, namespace=ns)

            with pytest.raises(AlreadyExists):
                await retry_on_conflict(exists)
            assert len(tries) == 1

    run(main())


def test_sync_client(api):
    ns = _ns(api, "c5")
    with SyncApiClient(api.endpoint) as c:
        d = c.create("deployments", deployment("d1", replicas=2), namespace=ns)
        assert d["spec"]["replicas"] == 2
        scale = c.get_scale("deployments", "d1", namespace=ns)
        assert scale["spec"]["replicas"] == 2
        scale = c.update_scale("deployments", "d1", 5, namespace=ns)
        assert scale["spec"]["replicas"] == 5
        assert c.get("deployments", "d1", namespace=ns)["spec"]["replicas"] == 5
        with pytest.raises(AlreadyExists):
            c.create("deployments", deployment("d1"), namespace=ns)

        def bump():
            cur = copy.deepcopy(c.get("deployments", "d1", namespace=ns))
            cur["metadata"].setdefault("labels", {})["bumped"] = "yes"
            return c.update("deployments", cur)

        assert retry_on_conflict_sync(bump)["metadata"]["labels"]["bumped"] == "yes"
        listed = c.list_all("deployments", namespace=ns)
        assert [x["metadata"]["name"] for x in listed["items"]] == ["d1"]
        with c.watch("deployments", namespace=ns, resource_version=listed["metadata"]["resourceVersion"]) as w:
            c.delete("deployments", "d1", namespace=ns, propagation_policy="Background")
            type_, obj = next(iter(w))
            while type_ != "DELETED":   # a delete may first mark the object (MODIFIED)
                type_, obj = next(w)
            assert obj["metadata"]["name"] == "d1"
        with pytest.raises(wire.NotFound):
            c.get("deployments", "d1", namespace=ns)


def test_unreachable_server(tmp_path):
    """Nothing listens: a read gives up with Unavailable; so does a write that could not be sent."""
    endpoint = f"ipc://{tmp_path}/nobody.sock"

    async def main():
        async with ApiClient(endpoint, timeout=0.5) as c:
            with pytest.raises(wire.Unavailable):
                await c.get("pods", "x", namespace="default")
            with pytest.raises(wire.Unavailable):
                await c.create("pods", pod("x"), namespace="default")
            with pytest.raises(wire.Unavailable):
                async with c.watch("pods"):
                    pass

    run(main())


def test_error_refinement_is_local():
    err = wire.error_from_code("Conflict", 'pods "x" already exists', {"reason": "AlreadyExists"})
    refined = apiclient._refine(err)
    assert type(refined) is AlreadyExists and refined.details["reason"] == "AlreadyExists"
    gone = apiclient._refine(wire.error_from_code("Gone", "too old", {"reason": "Expired"}))
    assert type(gone) is Expired and is_expired(gone)
    plain = wire.Conflict("x", {"reason": "Conflict"})
    assert apiclient._refine(plain) is plain
    # the subclasses do not take over the wire codes
    assert type(wire.error_from_code("Conflict", "x")) is wire.Conflict
    assert type(wire.error_from_code("Gone", "x")) is wire.Gone


def test_watching_while_the_apiserver_is_down_leaves_no_unretrieved_exception(caplog):
    """A kubelet's informers re-watch while the apiserver is down: every failed open is
    closed, and asyncio must not log "Future exception was never retrieved"."""
    import gc
    import tempfile

    async def main():
        endpoint = f"ipc://{tempfile.mkdtemp(prefix='kd-')}/nobody.sock"
        async with ApiClient(endpoint, timeout=0.3) as client:
            for _ in range(3):
                with pytest.raises(wire.WireError):
                    async with client.watch("pods"):
                        pass
                gc.collect()
                await asyncio.sleep(0)
    caplog.set_level("DEBUG")
    run(main())
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_a_client_of_two_apiservers_fails_over_when_the_one_it_uses_is_killed(api):
    """A second apiserver process on the same store, listed first; SIGKILL it: calls go to the
    other at once, a write is sent once, and an informer carries on with each event once."""
    ns = _ns(api, "failover")
    second = f"ipc://{api.dir}/api-2.sock"
    env = dict(os.environ, KUBEMU_STATE_DIR=str(api.dir), PYTHONPATH=str(REPO))
    env.pop("NOTIFY_SOCKET", None)
    with open(api.dir / "apiserver-2.log", "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "components.apiserver", "--listen", second,
             "--store-endpoints", ",".join(api.store.endpoints.values()),
             "--audit-log", str(api.dir / "audit-2.log"), "--bookmark-interval", "0.5"],
            env=env, cwd=str(REPO), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    try:
        with wire.SyncClient(second, timeout=5.0) as probe:
            wait_for(lambda: _serves(probe), message="the second apiserver to serve")

        async def main():
            async with ApiClient(f"{second},{api.endpoint}", timeout=DEADLINE) as c:
                c.wire.connect()
                informer = Informer(c, "configmaps", ns, backoff_max=0.5)
                calls = []
                informer.add_event_handler(on_add=lambda o: calls.append(("add", o["metadata"]["name"])),
                                           on_update=lambda old, new: calls.append(("update",
                                                                                    new["metadata"]["name"])),
                                           on_delete=lambda o: calls.append(("delete", o)))
                stop = asyncio.Event()
                task = asyncio.ensure_future(informer.run(stop))
                try:
                    await c.create("configmaps", {"metadata": {"name": "before"}}, namespace=ns)
                    await _until(lambda: ("add", "before") in calls)
                    proc.kill()
                    proc.wait()
                    await _until(lambda: second not in c.wire.connected)
                    after = await c.create("configmaps", {"metadata": {"name": "after"}}, namespace=ns)
                    await _until(lambda: ("add", "after") in calls)
                    assert calls == [("add", "before"), ("add", "after")]
                    assert informer.stats["lists"] == 1
                    assert (await c.get("configmaps", "after", ns))["metadata"]["uid"] == after["metadata"]["uid"]
                finally:
                    stop.set()
                    await asyncio.gather(task, return_exceptions=True)
        run(main())
        # the write after the kill was audited once, by the apiserver that is left
        creates = [line for line in api.audit_path.read_text().splitlines()
                   if '"create"' in line and '"after"' in line]
        assert len(creates) == 1, creates
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _serves(client: wire.SyncClient) -> bool:
    try:
        client.call("get", {"resource": "namespaces", "name": "default"}, timeout=2.0)
        return True
    except wire.WireError:
        return False


async def _until(condition) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not condition():
        assert loop.time() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)
