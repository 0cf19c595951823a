"""kubemu.wire: the envelope codec, endpoints, and the RPC/stream behaviour over real sockets.

Async tests drive their coroutine with `run()` (no pytest-asyncio); every test waits on
conditions with generous deadlines and never asserts speed."""
from __future__ import annotations

import asyncio
import copy
import logging
import os
import pickle
import shutil
import socket
import stat
import tempfile
import threading
import time

import msgpack
import pytest
import zmq
import zmq.asyncio

from kubemu import wire

DEADLINE = 20.0  # upper bound for anything that should happen "soon"; never a speed claim


def run(coro, timeout: float = 60.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def eventually(event: asyncio.Event, what: str, timeout: float = DEADLINE) -> None:
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except asyncio.TimeoutError:
        pytest.fail(f"timed out after {timeout:g}s waiting for {what}")


@pytest.fixture
def sockdir():
    # short on purpose: pytest's tmp_path can push an ipc path past the 107-byte limit
    path = tempfile.mkdtemp(prefix="kw-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def ctx():
    context = zmq.asyncio.Context()
    try:
        yield context
    finally:
        context.destroy(linger=0)


@pytest.fixture
def ep(sockdir):
    return wire.ipc_endpoint(sockdir, "t.sock")


async def echo(**params):
    return params


def sync_echo(**params):
    return params


class ThreadedServer:
    """A Server on its own event loop in a background thread, for blocking callers
    (SyncClient, hypothesis)."""

    def __init__(self, endpoint: str, handlers: dict, **kwargs):
        self.loop = asyncio.new_event_loop()
        self.context = zmq.asyncio.Context()
        self.server = wire.Server(endpoint, handlers, context=self.context, **kwargs)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="wire-test-server", daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.start())
        except BaseException as exc:
            self._error = exc
            return
        finally:
            self._ready.set()
        self.loop.run_forever()

    def __enter__(self) -> ThreadedServer:
        self._thread.start()
        if not self._ready.wait(DEADLINE):
            self.close()
            raise RuntimeError("server thread did not start")
        if self._error is not None:
            self.close()
            raise self._error
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def run(self, coro, timeout: float = DEADLINE):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        try:
            if self._thread.is_alive():
                try:
                    self.run(self.server.close())
                finally:
                    self.loop.call_soon_threadsafe(self.loop.stop)
                    self._thread.join(DEADLINE)
        finally:
            if not self._thread.is_alive():
                self.loop.close()
            self.context.destroy(linger=0)


# -- the envelope, as pure functions ------------------------------------------------------


def test_request_round_trip():
    req = wire.decode_request([wire.encode_call(7, "get", {"name": "a", "n": 1})])
    assert req == wire.Request(wire.REQ, 7, "get", {"name": "a", "n": 1})
    req = wire.decode_request([wire.encode_stream(8, "watch", None)])
    assert req == wire.Request(wire.STREAM, 8, "watch", {})
    assert wire.decode_request([wire.encode_cancel(9)]) == wire.Request(wire.CANCEL, 9, None, None)


def test_reply_round_trip():
    assert wire.decode_reply([wire.encode_reply(3, {"a": [1, b"x"]})]) == (wire.REPLY, 3, {"a": [1, b"x"]})
    assert wire.decode_reply([wire.encode_stream_start(4)]) == (wire.STREAM_START, 4, None)
    assert wire.decode_reply([wire.encode_stream_item(4, "i")]) == (wire.STREAM_ITEM, 4, "i")
    assert wire.decode_reply([wire.encode_stream_end(4)]) == (wire.STREAM_END, 4, None)
    assert wire.decode_reply([wire.encode_ping()]) == (wire.PING, None, None)
    kind, rid, err = wire.decode_reply([wire.encode_error(5, wire.Conflict("taken", {"rv": 3}))])
    assert (kind, rid) == (wire.ERROR, 5)
    assert isinstance(err, wire.Conflict) and err.message == "taken" and err.details == {"rv": 3}
    kind, rid, err = wire.decode_reply([wire.encode_error(None, wire.BadRequest("junk"))])
    assert rid is None and isinstance(err, wire.BadRequest)


def test_a_shared_stream_item_is_packed_once_and_reads_as_the_plain_item(monkeypatch):
    from kubemu import _wire_codec
    item = {"type": "MODIFIED", "object": {"metadata": {"name": "a"}, "spec": [1, "x", None, True]}}
    shared = _wire_codec.SharedItem(item)
    packs = []
    real = _wire_codec._packb
    monkeypatch.setattr(_wire_codec, "_packb", lambda obj: packs.append(obj) or real(obj))
    for rid in (0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**40):  # every msgpack int width
        payload = wire.encode_stream_item(rid, shared)
        assert payload == real([wire.STREAM_ITEM, rid, item])  # byte for byte the plain encoding
        assert wire.decode_reply([payload]) == (wire.STREAM_ITEM, rid, item)
    assert sum(p is shared for p in packs) == 1  # the item itself, once
    with pytest.raises(wire.TooLarge):
        wire.encode_stream_item(1, shared, max_frame=10)


def test_a_shared_map_inside_shared_items_is_packed_once_for_all_of_them(monkeypatch):
    from kubemu import _wire_codec
    obj = {"metadata": {"name": "a"}, "n": list(range(20))}
    shared_obj = _wire_codec.SharedItem(obj)
    events = [_wire_codec.SharedItem(type=t, object=shared_obj) for t in ("ADDED", "MODIFIED")]
    packs = []
    real = _wire_codec._packb
    monkeypatch.setattr(_wire_codec, "_packb", lambda v: packs.append(v) or real(v))
    for rid, event in enumerate(events):
        payload = wire.encode_stream_item(rid, event)
        assert payload == real([wire.STREAM_ITEM, rid, {"type": event["type"], "object": obj}])
    assert sum(p is shared_obj for p in packs) == 1
    for made in (copy.copy(events[0]), copy.deepcopy(events[0])):  # to be changed: plain, unpacked
        assert type(made) is dict and made == events[0]
        made["type"] = "DELETED"
        assert wire.decode_reply([wire.encode_stream_item(1, made)])[2]["type"] == "DELETED"
    big = _wire_codec.SharedItem({f"k{i}": i for i in range(40)}, inner=_wire_codec.SharedItem(a=1))
    assert big.packed() == real({**{f"k{i}": i for i in range(40)}, "inner": {"a": 1}})  # a 16-bit map header


def test_a_failed_encoding_leaves_nothing_in_front_of_the_next_message():
    # the codec reuses a msgpack Packer: a pack that fails halfway, its first bytes already
    # written, must not leave them in front of the next message
    with pytest.raises(TypeError):
        wire.encode_reply(1, {"a": "x" * 100, "b": {1, 2}})
    assert wire.decode_reply([wire.encode_reply(2, "ok")]) == (wire.REPLY, 2, "ok")
    with pytest.raises(TypeError):
        wire.encode_stream_item(3, wire.SharedItem(type="ADDED", object=wire.SharedItem(a="x" * 100, b={1})))
    assert wire.decode_reply([wire.encode_stream_item(4, "i")]) == (wire.STREAM_ITEM, 4, "i")


def test_threads_encoding_at_once_do_not_mix_their_messages():
    # SyncClient runs its loop on a thread of its own, so packing may happen on several threads
    # at once; a map whose items() lets other threads run is where a shared Packer interleaves
    class Yielding(dict):
        def items(self):
            time.sleep(0.0005)
            return super().items()

    wrong = []

    def encode(n: int) -> None:
        for _ in range(40):
            payload = wire.encode_reply(n, Yielding(n=n, pad="x" * n))
            try:
                ok = wire.decode_reply([payload]) == (wire.REPLY, n, {"n": n, "pad": "x" * n})
            except wire.WireError:
                ok = False
            if not ok:
                wrong.append(payload)

    threads = [threading.Thread(target=encode, args=(n,)) for n in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_envelopes_are_compact_arrays():
    assert msgpack.unpackb(wire.encode_call(1, "m", {"a": 1})) == [1, 1, "m", {"a": 1}]
    assert msgpack.unpackb(wire.encode_error(2, wire.NotFound("x"))) == [5, 2, "NotFound", "x", None]


def pk(obj) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


@pytest.mark.parametrize("frames, rid, fragment", [
    ([pk([1, 1, "m", {}]), b"x"], None, "exactly 1 frame"),
    ([b""], None, "undecodable"),
    ([b"\xc1"], None, "undecodable"),
    ([pk([1, 5, "m", {}])[:-1]], 5, "undecodable"),  # truncated: the id is still readable
    ([pk([1, 5, "m", {}]) + b"\x00"], 5, "undecodable"),  # trailing bytes
    ([pk({"kind": 1})], None, "array"),
    ([pk([1])], None, "array"),
    ([pk([1, "7", "m", {}])], None, "integer"),
    ([pk([1, True, "m", {}])], None, "integer"),
    ([pk([1, None, "m", {}])], None, "integer"),
    ([pk([True, 7, "m", {}])], 7, "unknown message kind"),
    ([pk([1.0, 7, "m", {}])], 7, "unknown message kind"),
    ([pk([42, 7])], 7, "unknown message kind"),
    ([pk([1, 7, "m"])], 7, "[kind, id, method, params]"),
    ([pk([1, 7, b"m", {}])], 7, "method name"),
    ([pk([1, 7, "m", [1, 2]])], 7, "must be a map"),
    ([pk([1, 7, "m", {1: 2}])], 7, "must be strings"),
    ([pk([3, 7, 1])], 7, "cancel"),
    ([b"\x94\x01\x07\xa1m\x81\x91\x01\x01"], 7, "undecodable"),  # a list as a map key
    ([b"\x91" * 100_000], None, "undecodable"),  # nesting deeper than the unpacker's stack
])
def test_decode_request_rejects(frames, rid, fragment):
    with pytest.raises(wire.BadRequest) as info:
        wire.decode_request(frames)
    assert type(info.value) is wire.BadRequest
    assert info.value.request_id == rid
    assert fragment in info.value.message


def test_decode_request_too_large_reads_the_id():
    data = wire.encode_call(12, "put", {"blob": b"x" * 2000})
    with pytest.raises(wire.TooLarge) as info:
        wire.decode_request([data], max_frame=1024)
    assert info.value.request_id == 12
    assert info.value.details == {"size": len(data), "limit": 1024}
    assert wire.decode_request([data], max_frame=len(data)).id == 12  # the limit is inclusive


def test_decode_request_accepts_big_ids_and_odd_values():
    req = wire.decode_request([pk([1, 2**64 - 1, "m", {"k": [None, 1.5, b"\x00", {1: 2}]}])])
    assert req.id == 2**64 - 1 and req.params == {"k": [None, 1.5, b"\x00", {1: 2}]}
    assert wire.decode_request([pk([1, -(2**63), "m", None])]).params == {}


@pytest.mark.parametrize("data", [
    pk([4, 1]), pk([4, "1", 2]), pk([5, 1, "X", "m"]), pk([5, 1, 7, "m", None]), pk([5, 1, "X", "m", [1]]),
    pk([6, 1, 2]), pk([99, 1]), pk([]), pk("x"), b"\xc1", pk([4, True, 1]), pk([11, 1, "ab"]), pk([11, 1, [1], 2]),
])
def test_decode_reply_rejects(data):
    with pytest.raises(wire.Internal):
        wire.decode_reply([data])


def test_decode_reply_too_large_reads_the_id():
    with pytest.raises(wire.TooLarge) as info:
        wire.decode_reply([wire.encode_reply(33, "x" * 5000)], max_frame=1000)
    assert info.value.request_id == 33


def test_encoders_check_size():
    with pytest.raises(wire.TooLarge):
        wire.encode_reply(1, "x" * 2000, max_frame=1024)
    with pytest.raises(wire.TooLarge):
        wire.encode_call(1, "m", {"x": "x" * 2000}, max_frame=1024)
    with pytest.raises(TypeError):
        wire.encode_reply(1, {1, 2})


def test_encode_error_never_fails():
    err = wire.Invalid("bad", {"obj": object()})
    kind, rid, back = wire.decode_reply([wire.encode_error(3, err)])
    assert isinstance(back, wire.Invalid) and back.message == "bad" and back.details == {}
    big = wire.encode_error(4, wire.Invalid("m" * 5000), max_frame=2000)
    assert len(big) <= 2000
    _, _, listed = wire.decode_reply([wire.encode_error(5, wire.Invalid("x", ["a"]))])
    assert listed.details == {"details": ["a"]}


def test_error_codes_map_to_classes():
    for cls in (wire.NotFound, wire.Conflict, wire.Invalid, wire.Unavailable, wire.TooLarge, wire.BadRequest,
                wire.UnknownMethod, wire.Internal, wire.Gone, wire.Cancelled, wire.OutcomeUnknown):
        err = wire.error_from_code(cls.code, "msg", {"k": 1})
        assert type(err) is cls and err.code == cls.code and err.message == "msg" and err.details == {"k": 1}
    odd = wire.error_from_code("Teapot", "short and stout", None)
    assert type(odd) is wire.WireError and odd.code == "Teapot" and odd.details == {}
    assert issubclass(wire.UnknownMethod, wire.BadRequest)
    assert str(wire.NotFound("pod x")) == "NotFound: pod x"
    assert wire.WireError("m", code="Custom").code == "Custom"


def test_error_subclasses_register_and_pickle():
    class Expired(wire.WireError):
        code = "TestExpired"

    assert type(wire.error_from_code("TestExpired", "old")) is Expired
    err = pickle.loads(pickle.dumps(wire.Conflict("c", {"a": 1})))
    assert type(err) is wire.Conflict and err.message == "c" and err.details == {"a": 1}


# -- endpoints ----------------------------------------------------------------------------


@pytest.mark.parametrize("endpoint", [
    "tcp://0.0.0.0:0", "tcp://*:0", "tcp://[::]:0", "tcp://:::0", "tcp://eth0:5555", "tcp://10.1.2.3:5555",
])
def test_public_binds_are_refused(endpoint):
    with pytest.raises(ValueError, match="without CURVE"):
        wire.Server(endpoint, {})
    with pytest.raises(ValueError, match="without CURVE"):
        wire.Server(endpoint, {}, auth=wire.ServerAuth("/nonexistent"))  # PLAIN is not enough
    import zmq

    public, secret = zmq.curve_keypair()
    wire.Server(endpoint, {}, auth=wire.CurveAuth(public, secret, lambda key: None))  # constructing does not bind


@pytest.mark.parametrize("endpoint", ["udp://127.0.0.1:1", "tcp://127.0.0.1", "tcp://127.0.0.1:http", "ipc://"])
def test_bad_endpoints_are_refused(endpoint):
    with pytest.raises(ValueError):
        wire.Server(endpoint, {})


def test_tcp_endpoint():
    assert wire.tcp_endpoint() == "tcp://127.0.0.1:0"
    assert wire.tcp_endpoint(5555, "::1") == "tcp://[::1]:5555"
    with pytest.raises(ValueError):
        wire.tcp_endpoint(70000)


def test_ipc_directory_is_private(sockdir):
    nested = os.path.join(sockdir, "a", "b")
    endpoint = wire.ipc_endpoint(nested, "x.sock")
    assert endpoint == "ipc://" + os.path.join(nested, "x.sock")
    assert stat.S_IMODE(os.stat(nested).st_mode) == 0o700
    loose = os.path.join(sockdir, "loose")
    os.mkdir(loose)
    os.chmod(loose, 0o755)
    wire.ipc_endpoint(loose, "y.sock")
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o700
    with pytest.raises(ValueError):
        wire.ipc_endpoint(sockdir, "a/b.sock")


def test_a_server_keeps_its_socket_directory_private(sockdir):
    loose = os.path.join(sockdir, "loose")
    os.mkdir(loose)
    os.chmod(loose, 0o755)

    async def main():
        async with wire.Server("ipc://" + os.path.join(loose, "s.sock"), {}):
            assert stat.S_IMODE(os.stat(loose).st_mode) == 0o700

    run(main())


def test_overlong_ipc_path_is_refused(sockdir):
    directory = os.path.join(sockdir, "d" * 120)
    with pytest.raises(ValueError, match="107") as info:
        wire.ipc_endpoint(directory, "x.sock")
    assert directory in str(info.value)
    assert not os.path.exists(directory)
    long_endpoint = "ipc://" + os.path.join(directory, "x.sock")
    with pytest.raises(ValueError, match="107"):
        wire.Server(long_endpoint, {})
    with pytest.raises(ValueError, match="107"):
        wire.Client(long_endpoint)
    fits = "/" + "p" * 106
    wire.Server("ipc://" + fits, {})  # exactly at the limit is fine


def test_tcp_loopback_round_trip(ctx):
    async def main():
        async with wire.Server(wire.tcp_endpoint(), {"echo": echo}, context=ctx) as server:
            assert server.endpoint.startswith("tcp://127.0.0.1:") and not server.endpoint.endswith(":0")
            async with wire.Client(server.endpoint, context=ctx) as client:
                assert await client.call("echo", {"via": "tcp"}) == {"via": "tcp"}
    run(main())


def test_stale_ipc_socket_is_replaced_and_removed_on_close(sockdir, ctx):
    path = os.path.join(sockdir, "stale.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)
    dead.close()  # a crashed server leaves this file behind
    assert stat.S_ISSOCK(os.lstat(path).st_mode)

    async def main():
        async with wire.Server("ipc://" + path, {"echo": echo}, context=ctx):
            async with wire.Client("ipc://" + path, context=ctx) as client:
                assert await client.call("echo", {"a": 1}) == {"a": 1}
        assert not os.path.exists(path)
    run(main())


def test_live_ipc_socket_is_not_stolen(ep, ctx):
    async def main():
        async with wire.Server(ep, {"echo": echo}, context=ctx):
            with pytest.raises(OSError, match="in use"):
                await wire.Server(ep, {}, context=ctx).start()
            async with wire.Client(ep, context=ctx) as client:
                assert await client.call("echo", {"still": "first"}) == {"still": "first"}
    run(main())


def test_ipc_path_that_is_not_a_socket_is_left_alone(sockdir, ctx):
    path = os.path.join(sockdir, "file")
    open(path, "w").close()

    async def main():
        with pytest.raises(ValueError, match="not a socket"):
            await wire.Server("ipc://" + path, {}, context=ctx).start()
    run(main())
    assert os.path.isfile(path)


# -- calls --------------------------------------------------------------------------------


def test_round_trip_async_and_sync_handlers(ep, ctx):
    async def add(a, b=10):
        return a + b

    def mul(a, b):
        return a * b

    async def main():
        handlers = {"add": add, "mul": mul, "echo": echo, "lam": lambda **p: add(**p)}
        async with wire.Server(ep, handlers, context=ctx), wire.Client(ep, context=ctx) as client:
            assert await client.call("add", {"a": 1}) == 11
            assert await client.call("add", {"a": 1, "b": 2}) == 3
            assert await client.call("mul", {"a": 3, "b": 4}) == 12
            assert await client.call("lam", {"a": 5}) == 15  # a plain function handing back a coroutine
            value = {"s": "text", "b": b"\x00\xff", "l": [1, 2.5, None, True], "m": {"k": {"n": -1}}}
            assert await client.call("echo", value) == value
            assert await client.call("echo") == {}
    run(main())


def test_thousand_calls_in_flight(ep, ctx):
    async def slow_echo(i):
        await asyncio.sleep((i % 7) * 0.001)
        return i

    async def main():
        async with wire.Server(ep, {"echo": slow_echo}, context=ctx), \
                wire.Client(ep, context=ctx, timeout=DEADLINE) as client:
            results = await asyncio.gather(*(client.call("echo", {"i": i}) for i in range(1000)))
            assert results == list(range(1000))
    run(main())


@pytest.mark.parametrize("cls", [wire.NotFound, wire.Conflict, wire.Invalid, wire.Unavailable, wire.Gone,
                                 wire.Cancelled, wire.TooLarge, wire.OutcomeUnknown])
def test_typed_errors_arrive_as_their_class(ep, ctx, cls):
    async def fail(name):
        raise cls(f"{name} went wrong", {"name": name})

    async def main():
        async with wire.Server(ep, {"fail": fail}, context=ctx), wire.Client(ep, context=ctx) as client:
            with pytest.raises(cls) as info:
                await client.call("fail", {"name": "pod-1"})
            assert type(info.value) is cls
            assert info.value.message == "pod-1 went wrong"
            assert info.value.details == {"name": "pod-1"}
    run(main())


def test_custom_error_code_survives(ep, ctx):
    async def fail():
        raise wire.WireError("nope", code="Forbidden")

    async def main():
        async with wire.Server(ep, {"fail": fail}, context=ctx), wire.Client(ep, context=ctx) as client:
            with pytest.raises(wire.WireError) as info:
                await client.call("fail")
            assert info.value.code == "Forbidden" and info.value.message == "nope"
    run(main())


def test_unknown_method(ep, ctx):
    async def main():
        async with wire.Server(ep, {"echo": echo}, context=ctx), wire.Client(ep, context=ctx) as client:
            with pytest.raises(wire.UnknownMethod, match="nope"):
                await client.call("nope")
            with pytest.raises(wire.UnknownMethod):
                async for _ in client.stream("nope"):
                    pass
            assert await client.call("echo", {"ok": 1}) == {"ok": 1}
    run(main())


def test_bad_params_are_bad_requests(ep, ctx):
    async def get(name, *, namespace="default"):
        return f"{namespace}/{name}"

    async def main():
        async with wire.Server(ep, {"get": get}, context=ctx), wire.Client(ep, context=ctx) as client:
            with pytest.raises(wire.BadRequest, match="name"):
                await client.call("get")
            with pytest.raises(wire.BadRequest, match="colour"):
                await client.call("get", {"name": "a", "colour": "red"})
            with pytest.raises(wire.BadRequest, match="map"):
                await client.call("get", ["a"])
            with pytest.raises(wire.BadRequest, match="not serializable"):
                await client.call("get", {"name": {1, 2}})  # refused before sending
            assert await client.call("get", {"name": "a", "namespace": "kube-system"}) == "kube-system/a"
    run(main())


def test_handler_failures_are_internal_and_logged_once(ep, ctx, caplog):
    async def broken(x):
        return len(x) + "s"  # a TypeError inside the handler, not a params problem

    async def crash():
        raise RuntimeError("kaboom")

    async def unserializable():
        return {1, 2}

    async def main():
        handlers = {"broken": broken, "crash": crash, "unserializable": unserializable, "echo": echo}
        async with wire.Server(ep, handlers, context=ctx), wire.Client(ep, context=ctx) as client:
            for method, params, fragment in [("broken", {"x": "abc"}, "TypeError"),
                                             ("crash", {}, "kaboom"),
                                             ("unserializable", {}, "not serializable")]:
                caplog.clear()
                with pytest.raises(wire.Internal, match=fragment):
                    await client.call(method, params)
                records = [r for r in caplog.records if r.name == "kubemu.wire"]
                assert len(records) == 1, records
                assert records[0].levelno == logging.ERROR and records[0].exc_info
                assert await client.call("echo", {"after": method}) == {"after": method}
    caplog.set_level(logging.INFO, logger="kubemu.wire")
    run(main())


def test_plain_handler_may_answer_with_a_future(ep, ctx):
    futures: dict[str, asyncio.Future] = {}

    def later(name):
        fut = futures[name] = asyncio.get_running_loop().create_future()
        return fut

    async def main():
        async with wire.Server(ep, {"later": later}, context=ctx) as server, \
                wire.Client(ep, context=ctx) as client:
            calls = {n: asyncio.ensure_future(client.call("later", {"name": n})) for n in "abcd"}
            while len(futures) < 4:
                await asyncio.sleep(0.01)
            assert not server._tasks  # no task per request
            futures["b"].set_result({"b": 2})
            futures["a"].set_exception(wire.NotFound("no a"))
            futures["c"].set_exception(ValueError("a bug"))
            futures["d"].cancel()
            assert await calls["b"] == {"b": 2}
            with pytest.raises(wire.NotFound, match="no a"):
                await calls["a"]
            with pytest.raises(wire.Internal, match="a bug"):
                await calls["c"]
            with pytest.raises(wire.Cancelled):
                await calls["d"]
            # the client gives up (timeout, then CANCEL): the handler's future is cancelled
            with pytest.raises(wire.OutcomeUnknown):
                await client.call("later", {"name": "e"}, timeout=0.2)
            await asyncio.wait_for(asyncio.shield(_cancelled(futures["e"])), DEADLINE)
            call = asyncio.ensure_future(client.call("later", {"name": "f"}))
            while "f" not in futures:
                await asyncio.sleep(0.01)
        assert futures["f"].cancelled()  # closing (the client, then the server) cancels what is pending
        call.cancel()
    run(main())


async def _cancelled(fut: asyncio.Future) -> None:
    while not fut.cancelled():
        await asyncio.sleep(0.01)


def _stray(caplog) -> list:
    """Client-side records of a message nobody waited for: what a notification must not cause."""
    return [r for r in caplog.records if r.name == "kubemu.wire" and "dropped a" in r.getMessage()
            and "notification" not in r.getMessage()]


def test_notify_runs_a_plain_handler_in_order_and_nothing_comes_back(ep, ctx, caplog):
    got = []

    def note(x):
        got.append(x)
        return "ignored"

    async def main():
        async with wire.Server(ep, {"note": note, "echo": echo}, context=ctx), wire.Client(ep, context=ctx) as client:
            await client.call("echo")  # connected: a notification is never queued without a connection
            assert all([client.notify("note", {"x": i}) for i in range(200)])
            # one connection delivers in order, so the call's reply comes after every note ran
            assert await client.call("echo", {"after": 1}) == {"after": 1}
            assert got == list(range(200))
            assert await client.call("echo", {"again": 1}) == {"again": 1}
    caplog.set_level(logging.DEBUG, logger="kubemu.wire")
    run(main())
    assert not _stray(caplog)


def test_bad_notifications_are_logged_once_dropped_and_answered_by_nothing(ep, ctx, caplog):
    def note(x):
        return x

    def crash():
        raise RuntimeError("kaboom")

    def refuse():
        raise wire.Invalid("the handler logs its own reasons")

    async def main():
        handlers = {"note": note, "crash": crash, "refuse": refuse, "echo": echo}
        async with wire.Server(ep, handlers, context=ctx):
            for method, params, level, fragment in [("nope", {}, logging.WARNING, "not a plain"),
                                                    ("echo", {}, logging.WARNING, "not a plain"),
                                                    ("note", {"y": 1}, logging.WARNING, "bad params"),
                                                    ("crash", {}, logging.ERROR, "failed"),
                                                    ("refuse", {}, None, None)]:
                # a client (a peer) each: warnings about one peer's messages are rate-limited
                async with wire.Client(ep, context=ctx) as client:
                    await client.call("echo")
                    caplog.clear()
                    assert client.notify(method, params)
                    assert await client.call("echo", {"after": method}) == {"after": method}
                records = [r for r in caplog.records if r.name == "kubemu.wire" and r.levelno >= logging.WARNING]
                if level is None:
                    assert records == []
                else:
                    assert len(records) == 1, records
                    assert records[0].levelno == level and fragment in records[0].getMessage()
                assert not _stray(caplog)
    caplog.set_level(logging.DEBUG, logger="kubemu.wire")
    run(main())


def test_notify_without_a_connection_sends_nothing(sockdir, ctx):
    async def main():
        async with wire.Client(wire.ipc_endpoint(sockdir, "nobody.sock"), context=ctx) as client:
            assert client.notify("note", {"x": 1}) is False
            with pytest.raises(wire.BadRequest, match="not serializable"):
                client.notify("note", {"x": {1, 2}})
    run(main())


def test_call_and_stream_kinds_must_match(ep, ctx):
    async def gen():
        yield 1

    async def main():
        async with wire.Server(ep, {"gen": gen, "echo": echo}, context=ctx), \
                wire.Client(ep, context=ctx) as client:
            with pytest.raises(wire.BadRequest, match="stream"):
                await client.call("gen")
            with pytest.raises(wire.BadRequest, match="not a stream"):
                async with client.stream("echo"):
                    pass
    run(main())


# -- malformed input from a raw socket ----------------------------------------------------


def test_malformed_messages_get_one_reply_and_one_log_line(ep, ctx, caplog):
    cases = [
        ([b"\xc1"], None, wire.BadRequest),
        ([b"junk", b"more"], None, wire.BadRequest),
        ([pk([1, 77, "echo"])], 77, wire.BadRequest),
        ([pk([1, 78, "echo", "notamap"])], 78, wire.BadRequest),
        ([pk([1, 79, "echo", {"x": b"y" * 3000}])], 79, wire.TooLarge),
        ([pk([1, 80, "nope", {}])], 80, wire.UnknownMethod),
        ([pk([9, 81])], 81, wire.BadRequest),
    ]

    async def main():
        async with wire.Server(ep, {"echo": echo}, context=ctx, max_frame=2048):
            for frames, rid, cls in cases:
                raw = ctx.socket(zmq.DEALER)  # a peer each: one peer's warnings are rate-limited
                raw.linger = 0
                try:
                    raw.connect(ep)
                    caplog.clear()
                    await raw.send_multipart(frames)
                    kind, got_id, err = wire.decode_reply(await asyncio.wait_for(raw.recv_multipart(), DEADLINE))
                    assert (kind, got_id, type(err)) == (wire.ERROR, rid, cls)
                    records = [r for r in caplog.records if r.name == "kubemu.wire"]
                    assert len(records) == 1 and records[0].levelno == logging.WARNING, records
                    await raw.send_multipart([wire.encode_call(5, "echo", {"fine": True})])
                    reply = wire.decode_reply(await asyncio.wait_for(raw.recv_multipart(), DEADLINE))
                    assert reply == (wire.REPLY, 5, {"fine": True})
                finally:
                    raw.close(0)
    caplog.set_level(logging.INFO, logger="kubemu.wire")
    run(main())


# -- limits -------------------------------------------------------------------------------


def test_oversize_request_is_refused_locally(ep, ctx):
    seen = []

    async def record(x):
        seen.append(len(x))
        return len(x)

    async def main():
        async with wire.Server(ep, {"record": record}, context=ctx), \
                wire.Client(ep, context=ctx, max_frame=1024) as client:
            with pytest.raises(wire.TooLarge, match="1024"):
                await client.call("record", {"x": "a" * 2000})
            with pytest.raises(wire.TooLarge):
                async for _ in client.stream("record", {"x": "a" * 2000}):
                    pass
            assert await client.call("record", {"x": "ok"}) == 2
            assert seen == [2]  # the big one never reached the server
    run(main())


def test_oversize_request_gets_too_large_reply(ep, ctx):
    async def main():
        async with wire.Server(ep, {"echo": echo}, context=ctx, max_frame=1024), \
                wire.Client(ep, context=ctx) as client:
            with pytest.raises(wire.TooLarge, match="1024") as info:
                await client.call("echo", {"x": "a" * 2000})
            assert info.value.details["limit"] == 1024
            assert await client.call("echo", {"x": "small"}) == {"x": "small"}
    run(main())


def test_oversize_result_and_item_become_too_large(ep, ctx):
    async def big():
        return "a" * 2000

    async def gen():
        yield "ok"
        yield "a" * 2000
        yield "never"

    async def main():
        async with wire.Server(ep, {"big": big, "gen": gen, "echo": echo}, context=ctx, max_frame=1024), \
                wire.Client(ep, context=ctx) as client:
            with pytest.raises(wire.TooLarge):
                await client.call("big")
            got = []
            with pytest.raises(wire.TooLarge):
                async for item in client.stream("gen"):
                    got.append(item)
            assert got == ["ok"]
            assert await client.call("echo", {"x": 1}) == {"x": 1}
    run(main())


def test_beyond_maxmsgsize_drops_the_connection_and_the_server_goes_on(ep, ctx):
    async def main():
        async with wire.Server(ep, {"echo": echo}, context=ctx, max_frame=1024), \
                wire.Client(ep, context=ctx, timeout=DEADLINE) as client:
            # over 4 x max_frame: libzmq disconnects the sender instead of anyone replying
            with pytest.raises(wire.OutcomeUnknown):
                await client.call("echo", {"x": "a" * 5000})
            assert await client.call("echo", {"x": "back"}) == {"x": "back"}
    run(main())


# -- streams ------------------------------------------------------------------------------


def test_stream_items_in_order_then_end(ep, ctx):
    async def count(n):
        for i in range(n):
            yield {"i": i}

    async def main():
        async with wire.Server(ep, {"count": count}, context=ctx), wire.Client(ep, context=ctx) as client:
            assert [item["i"] async for item in client.stream("count", {"n": 500})] == list(range(500))
            assert [item async for item in client.stream("count", {"n": 0})] == []
            async with client.stream("count", {"n": 3}) as stream:
                assert [item async for item in stream] == [{"i": 0}, {"i": 1}, {"i": 2}]
                with pytest.raises(StopAsyncIteration):
                    await stream.__anext__()
    run(main())


def test_a_batch_is_one_message_whose_items_come_out_one_by_one_in_order(ep, ctx):
    shared = wire.SharedItem(type="ADDED", object=wire.SharedItem(a=1))

    async def gen():
        yield 0
        yield wire.Batch([1, {"two": 2}, shared])
        yield wire.Batch([])  # nothing to send
        yield wire.Batch([4])
        yield 5

    sent = []

    async def main():
        async with wire.Server(ep, {"gen": gen}, context=ctx) as server, wire.Client(ep, context=ctx) as client:
            real = server._send_now
            server._send_now = lambda ident, payload: sent.append(payload) or real(ident, payload)
            assert [item async for item in client.stream("gen")] == [0, 1, {"two": 2}, dict(shared), 4, 5]
    run(main())
    kinds = [wire.decode_reply([payload]).kind for payload in sent]
    assert kinds == [wire.STREAM_START, wire.STREAM_ITEM, wire.STREAM_ITEMS, wire.STREAM_ITEMS, wire.STREAM_ITEM,
                     wire.STREAM_END]


def test_a_batch_too_large_for_one_frame_goes_item_by_item_and_an_item_too_large_alone_ends_it(ep, ctx):
    async def gen():
        yield wire.Batch(["a" * 400, "b" * 400, "c" * 400])  # 1.2 KB together, each fits
        yield wire.Batch(["d", "e" * 2000, "never"])

    async def main():
        async with wire.Server(ep, {"gen": gen}, context=ctx, max_frame=1024), \
                wire.Client(ep, context=ctx) as client:
            got = []
            with pytest.raises(wire.TooLarge):
                async for item in client.stream("gen"):
                    got.append(item)
            assert got == ["a" * 400, "b" * 400, "c" * 400]  # "d" was in the batch that failed
    run(main())


def test_a_batch_counts_against_the_stream_buffer_until_its_last_item_is_taken(ep, ctx):
    # the client's slow-consumer guard counts what is received and not yet taken
    async def gen():
        yield wire.Batch(["x" * 100, "y" * 100, "z" * 100])
        await asyncio.sleep(30)

    async def main():
        async with wire.Server(ep, {"gen": gen}, context=ctx), wire.Client(ep, context=ctx) as client:
            async with client.stream("gen") as stream:
                held = []
                for _ in range(3):
                    held.append(await stream.__anext__())
                    held.append(stream._buffered)
                assert held[0::2] == ["x" * 100, "y" * 100, "z" * 100]
                assert held[1] == held[3] > 300 and held[5] == 0
    run(main())


def test_stream_error_mid_stream(ep, ctx):
    async def fails_after(n):
        for i in range(n):
            yield i
        raise wire.Gone("resource version too old", {"rv": 5})

    async def crashes():
        yield 1
        raise KeyError("x")

    async def main():
        async with wire.Server(ep, {"fails_after": fails_after, "crashes": crashes}, context=ctx), \
                wire.Client(ep, context=ctx) as client:
            got = []
            stream = client.stream("fails_after", {"n": 3})
            with pytest.raises(wire.Gone) as info:
                async for item in stream:
                    got.append(item)
            assert got == [0, 1, 2] and info.value.details == {"rv": 5}
            with pytest.raises(StopAsyncIteration):  # raised once, then exhausted
                await stream.__anext__()
            with pytest.raises(wire.Internal, match="KeyError"):
                async for _ in client.stream("crashes"):
                    pass
    run(main())


def test_aclose_cancels_the_server_side_generator(ep, ctx):
    closed = {}
    forever = asyncio.Event()

    async def waits(tag):
        try:
            yield "first"
            await forever.wait()  # cancelled here: CancelledError inside the generator
            yield "never"
        finally:
            closed[tag].set()

    async def floods(tag):
        try:
            i = 0
            while True:  # suspended at a yield when closed: GeneratorExit
                yield i
                i += 1
        finally:
            closed[tag].set()

    async def main():
        closed.update(waits=asyncio.Event(), floods=asyncio.Event(), ctx=asyncio.Event())
        async with wire.Server(ep, {"waits": waits, "floods": floods}, context=ctx), \
                wire.Client(ep, context=ctx) as client:
            stream = client.stream("waits", {"tag": "waits"})
            assert await stream.__anext__() == "first"
            await stream.aclose()
            await eventually(closed["waits"], "the waiting generator's finally")
            with pytest.raises(StopAsyncIteration):
                await stream.__anext__()

            stream = client.stream("floods", {"tag": "floods"})
            assert [await stream.__anext__() for _ in range(10)] == list(range(10))
            await stream.aclose()
            await eventually(closed["floods"], "the flooding generator's finally")

            async with client.stream("waits", {"tag": "ctx"}) as stream:
                async for item in stream:
                    assert item == "first"
                    break
            await eventually(closed["ctx"], "the generator's finally after leaving `async with`")
    run(main())


def test_many_concurrent_streams(ep, ctx):
    async def count(n, tag):
        for i in range(n):
            if i % 50 == 0:
                await asyncio.sleep(0)
            yield [tag, i]

    async def consume(client, tag):
        return [item async for item in client.stream("count", {"n": 200, "tag": tag})]

    async def main():
        async with wire.Server(ep, {"count": count}, context=ctx), \
                wire.Client(ep, context=ctx, timeout=DEADLINE) as client:
            results = await asyncio.gather(*(consume(client, tag) for tag in range(50)))
            for tag, items in enumerate(results):
                assert items == [[tag, i] for i in range(200)]
    run(main())


def test_vanished_peer_streams_are_cancelled(ep, ctx, caplog):
    closed = asyncio.Event()

    async def waits():
        try:
            yield "first"
            await asyncio.Event().wait()
        finally:
            closed.set()

    async def main():
        async with wire.Server(ep, {"waits": waits}, context=ctx, keepalive=0.05):
            raw = ctx.socket(zmq.DEALER)
            try:
                raw.connect(ep)
                await raw.send_multipart([wire.encode_stream(1, "waits", {})])
                for expected in (wire.STREAM_START, wire.STREAM_ITEM):
                    kind, _, _ = wire.decode_reply(await asyncio.wait_for(raw.recv_multipart(), DEADLINE))
                    assert kind == expected
            finally:
                raw.close(0)  # the client process "dies" without a CANCEL
            await eventually(closed, "the orphaned stream's generator to be closed")
    caplog.set_level(logging.INFO, logger="kubemu.wire")
    run(main())
    assert any("cancelling its 1 stream" in r.getMessage() for r in caplog.records)


def test_server_close_ends_client_streams(ep, ctx):
    closed = asyncio.Event()

    async def waits():
        try:
            yield "first"
            await asyncio.Event().wait()
        finally:
            closed.set()

    async def main():
        server = wire.Server(ep, {"waits": waits}, context=ctx)
        await server.start()
        try:
            async with wire.Client(ep, context=ctx, timeout=DEADLINE) as client:
                stream = client.stream("waits")
                assert await stream.__anext__() == "first"
                await server.close()
                assert closed.is_set()
                with pytest.raises(wire.Unavailable, match="lost"):
                    await asyncio.wait_for(stream.__anext__(), DEADLINE)
        finally:
            await server.close()
    run(main())


# -- timeouts, connection loss and retries -----------------------------------------------


def test_timeout_is_outcome_unknown_and_cancels_the_handler(ep, ctx):
    cancelled = asyncio.Event()

    async def hang():
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def main():
        async with wire.Server(ep, {"hang": hang, "echo": echo}, context=ctx), \
                wire.Client(ep, context=ctx) as client:
            with pytest.raises(wire.OutcomeUnknown, match="hang"):
                await client.call("hang", timeout=0.2)
            await eventually(cancelled, "the server-side handler to be cancelled")
            assert await client.call("echo", {"x": 1}) == {"x": 1}
    run(main())


def test_each_call_times_out_at_its_own_deadline_whatever_the_order(ep, ctx):
    # the calls' deadlines share one timer: a shorter one sent after a longer one must not
    # wait for it, and a longer one must neither go with nor be forgotten after a shorter one
    async def hang():
        await asyncio.Event().wait()

    async def main():
        async with wire.Server(ep, {"hang": hang, "echo": echo}, context=ctx), \
                wire.Client(ep, context=ctx) as client:
            loop = asyncio.get_running_loop()

            async def timed_out_after(timeout: float) -> float:
                start = loop.time()
                with pytest.raises(wire.OutcomeUnknown):
                    await client.call("hang", timeout=timeout)
                return loop.time() - start

            long = asyncio.create_task(timed_out_after(30.0))
            await asyncio.sleep(0.05)
            assert await timed_out_after(0.2) >= 0.2
            assert not long.done()
            short = asyncio.create_task(timed_out_after(0.2))
            longer = asyncio.create_task(timed_out_after(1.0))
            assert await short >= 0.2 and not longer.done()
            assert await longer >= 1.0
            assert not long.done()
            long.cancel()
            assert await client.call("echo", {"x": 1}) == {"x": 1}
            assert client._deadlines == {}   # every call forgot its deadline, answered or not
    run(main())


def test_late_reply_after_timeout_is_dropped(ep, ctx, caplog):
    gate = asyncio.Event()
    dropped = asyncio.Event()

    async def late():
        try:
            await gate.wait()
        except asyncio.CancelledError:
            await gate.wait()  # ignores the client's CANCEL, so the reply really comes late
        return "late"

    class Spy(logging.Handler):
        def emit(self, record):
            if "unknown or abandoned" in record.getMessage():
                dropped.set()

    async def main():
        async with wire.Server(ep, {"late": late, "echo": echo}, context=ctx), \
                wire.Client(ep, context=ctx) as client:
            with pytest.raises(wire.OutcomeUnknown):
                await client.call("late", timeout=0.2)
            gate.set()
            await eventually(dropped, "the late reply to be dropped")
            results = await asyncio.gather(*(client.call("echo", {"i": i}) for i in range(20)))
            assert results == [{"i": i} for i in range(20)]

    spy = Spy()
    logger = logging.getLogger("kubemu.wire")
    logger.addHandler(spy)
    caplog.set_level(logging.DEBUG, logger="kubemu.wire")
    try:
        run(main())
    finally:
        logger.removeHandler(spy)


def test_no_server_is_unavailable(sockdir, ctx):
    endpoint = wire.ipc_endpoint(sockdir, "nobody.sock")

    async def main():
        async with wire.Client(endpoint, context=ctx, timeout=0.3) as client:
            with pytest.raises(wire.Unavailable, match="not sent"):
                await client.call("echo")
            with pytest.raises(wire.Unavailable) as info:
                await client.call("echo", idempotent=True)
            assert info.value.details["attempts"] == 0
            with pytest.raises(wire.Unavailable):
                async with client.stream("watch"):
                    pass
    run(main())


def test_client_connects_to_a_server_that_starts_later(ep, ctx):
    async def main():
        async with wire.Client(ep, context=ctx, timeout=DEADLINE) as client:
            call = asyncio.ensure_future(client.call("echo", {"early": True}))
            await asyncio.sleep(0.1)
            async with wire.Server(ep, {"echo": echo}, context=ctx):
                assert await call == {"early": True}
    run(main())


def _restart_scenario(ep, ctx, idempotent: bool):
    """A first server takes the call and dies without answering; a second one takes over."""
    received = asyncio.Event()

    async def stuck():
        received.set()
        await asyncio.Event().wait()

    async def answers():
        return "from the second server"

    async def main():
        first = wire.Server(ep, {"get": stuck}, context=ctx)
        second = wire.Server(ep, {"get": answers}, context=ctx)
        await first.start()
        try:
            async with wire.Client(ep, context=ctx, timeout=DEADLINE) as client:
                call = asyncio.ensure_future(client.call("get", idempotent=idempotent))
                await eventually(received, "the first server to receive the call")
                await first.close()
                await second.start()
                try:
                    return await asyncio.wait_for(call, DEADLINE * 2)
                finally:
                    call.cancel()
        finally:
            await first.close()
            await second.close()
    return main()


def test_idempotent_call_retried_after_server_restart(ep, ctx):
    assert run(_restart_scenario(ep, ctx, idempotent=True)) == "from the second server"


def test_plain_call_lost_in_server_restart_is_outcome_unknown(ep, ctx):
    with pytest.raises(wire.OutcomeUnknown):
        run(_restart_scenario(ep, ctx, idempotent=False))


def test_idempotent_call_that_never_gets_a_reply_is_unavailable(ep, ctx):
    calls = []

    async def hang():
        calls.append(1)
        await asyncio.Event().wait()

    async def main():
        async with wire.Server(ep, {"hang": hang}, context=ctx), wire.Client(ep, context=ctx) as client:
            with pytest.raises(wire.Unavailable) as info:
                await client.call("hang", timeout=0.6, idempotent=True)
            # how many attempts fit depends on the machine's speed; the bound does not
            assert 1 <= info.value.details["attempts"] <= wire.IDEMPOTENT_ATTEMPTS
            return info.value.details["attempts"]
    attempts = run(main())
    assert 1 <= len(calls) <= attempts


def test_caller_cancellation_cancels_the_handler(ep, ctx):
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def hang():
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()

    async def main():
        async with wire.Server(ep, {"hang": hang}, context=ctx), wire.Client(ep, context=ctx) as client:
            call = asyncio.ensure_future(client.call("hang"))
            await eventually(started, "the handler to start")
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            await eventually(cancelled, "the handler to be cancelled")
    run(main())


def test_client_close_fails_pending_work(ep, ctx):
    async def hang():
        await asyncio.Event().wait()

    async def gen():
        yield 1
        await asyncio.Event().wait()

    async def main():
        async with wire.Server(ep, {"hang": hang, "gen": gen}, context=ctx):
            client = wire.Client(ep, context=ctx)
            call = asyncio.ensure_future(client.call("hang"))
            stream = client.stream("gen")
            assert await stream.__anext__() == 1
            await asyncio.sleep(0.05)
            await client.close()
            with pytest.raises(wire.OutcomeUnknown):
                await call
            with pytest.raises(wire.Cancelled):
                await stream.__anext__()
            with pytest.raises(RuntimeError):
                await client.call("hang")
    run(main())


# -- the blocking client ------------------------------------------------------------------


def test_sync_client_call_and_stream(sockdir):
    finished = threading.Event()

    async def count(n):
        for i in range(n):
            yield i

    async def endless():
        try:
            i = 0
            while True:
                yield i
                i += 1
                await asyncio.sleep(0.001)
        finally:
            finished.set()

    async def fail():
        raise wire.NotFound("no such unit")

    handlers = {"echo": echo, "count": count, "endless": endless, "fail": fail}
    with ThreadedServer(wire.ipc_endpoint(sockdir, "s.sock"), handlers) as server:
        with wire.SyncClient(server.endpoint, timeout=DEADLINE) as client:
            assert client.call("echo", {"a": 1}) == {"a": 1}
            assert client.call("echo", {"a": 2}, idempotent=True) == {"a": 2}
            with pytest.raises(wire.NotFound, match="no such unit"):
                client.call("fail")
            assert list(client.stream("count", {"n": 5})) == [0, 1, 2, 3, 4]
            with client.stream("endless") as stream:
                assert [next(stream) for _ in range(3)] == [0, 1, 2]
            assert finished.wait(DEADLINE), "the endless generator was not closed"
            assert client.call("echo", {"a": 3}) == {"a": 3}
        with pytest.raises(RuntimeError):
            client.call("echo")


def test_sync_client_without_server(sockdir):
    with wire.SyncClient(wire.ipc_endpoint(sockdir, "none.sock"), timeout=0.3) as client:
        with pytest.raises(wire.Unavailable):
            client.call("status", idempotent=True)


def test_peer_gone_mid_stream_is_one_line_without_traceback(ep, ctx, caplog):
    closed = asyncio.Event()

    async def flood():
        try:
            i = 0
            while True:
                i += 1
                if i % 64 == 0:
                    await asyncio.sleep(0.001)
                yield i
        finally:
            closed.set()

    async def main():
        async with wire.Server(ep, {"flood": flood}, context=ctx):
            raw = ctx.socket(zmq.DEALER)
            try:
                raw.connect(ep)
                await raw.send_multipart([wire.encode_stream(1, "flood", {})])
                for expected in (wire.STREAM_START, wire.STREAM_ITEM):
                    kind, _, _ = wire.decode_reply(await asyncio.wait_for(raw.recv_multipart(), DEADLINE))
                    assert kind == expected
            finally:
                raw.close(0)  # gone while the server is still sending
            await eventually(closed, "the stream's generator to be closed")
    caplog.set_level(logging.DEBUG, logger="kubemu.wire")
    run(main())
    records = [r for r in caplog.records if r.name == "kubemu.wire"]
    assert not [r for r in records if r.exc_info or r.levelno >= logging.ERROR], \
        [r.getMessage() for r in records]
    assert [r.getMessage() for r in records if "cancelling its 1 stream" in r.getMessage()]


def test_a_stream_that_cannot_open_leaves_no_unretrieved_exception(ep, ctx, caplog):
    """A watcher re-watching while its server is down (a kubelet while the apiserver is down):
    the open fails, the caller closes the stream, and asyncio must find nothing to complain of."""
    import gc

    async def waits():
        yield "first"
        await asyncio.Event().wait()

    async def main():
        server = wire.Server(ep, {"waits": waits}, context=ctx)
        await server.start()
        async with wire.Client(ep, context=ctx, timeout=DEADLINE) as client:
            stream = client.stream("waits")
            assert await stream.__anext__() == "first"
            await server.close()
            with pytest.raises(wire.Unavailable):
                await asyncio.wait_for(stream.__anext__(), DEADLINE)
            await stream.aclose()
            for _ in range(3):
                again = client.stream("waits", timeout=0.2)
                with pytest.raises((wire.Unavailable, wire.OutcomeUnknown)):
                    await again._open()
                await again.aclose()
                del again
                gc.collect()
                await asyncio.sleep(0)
    caplog.set_level(logging.DEBUG)
    run(main())
    gc.collect()
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


def test_rejection_warnings_are_rate_limited_per_peer(ep, ctx, caplog):
    async def main():
        async with wire.Server(ep, {"echo": echo}, context=ctx):
            socks = [ctx.socket(zmq.DEALER) for _ in range(2)]
            try:
                for sock in socks:
                    sock.linger = 0
                    sock.connect(ep)
                for sock in socks:
                    for i in range(50):  # every one is still answered
                        await sock.send_multipart([wire.encode_call(i + 1, "echo", {"x": 1}, 4096)[:-2]])
                        kind, got_id, err = wire.decode_reply(
                            await asyncio.wait_for(sock.recv_multipart(), DEADLINE))
                        assert kind == wire.ERROR and isinstance(err, wire.BadRequest)
            finally:
                for sock in socks:
                    sock.close(0)
    caplog.set_level(logging.DEBUG, logger="kubemu.wire")
    run(main())
    rejected = [r for r in caplog.records if "rejected a message" in r.getMessage()]
    assert len(rejected) == 100
    # one WARNING per peer (the next one would come after the interval, with the count)
    assert len([r for r in rejected if r.levelno == logging.WARNING]) == 2


def test_a_stream_whose_peer_stops_reading_is_ended_as_a_slow_consumer(ep, ctx, caplog, monkeypatch):
    from kubemu import _wire_server
    monkeypatch.setattr(_wire_server, "PEER_BUFFER_BYTES", 2 * 1024 * 1024)
    monkeypatch.setattr(_wire_server, "SLOW_STREAM_TIMEOUT", 0.5)
    closed = asyncio.Event()
    produced = 0
    chunk = b"x" * (64 * 1024)

    async def flood():
        nonlocal produced
        try:
            while True:
                produced += 1
                if produced % 16 == 0:
                    await asyncio.sleep(0)
                yield chunk
        finally:
            closed.set()

    async def main():
        async with wire.Server(ep, {"flood": flood, "echo": echo}, context=ctx), \
                wire.Client(ep, context=ctx, timeout=DEADLINE) as other:
            raw = ctx.socket(zmq.DEALER)
            raw.linger = 0
            raw.rcvhwm = 1
            raw.rcvbuf = 64 * 1024
            try:
                raw.connect(ep)
                await raw.send_multipart([wire.encode_stream(1, "flood", {})])
                assert wire.decode_reply(await asyncio.wait_for(raw.recv_multipart(), DEADLINE))[0] == \
                    wire.STREAM_START
                await eventually(closed, "the stream to be ended while its peer reads nothing")
                # bounded by bytes: the peer was sent about the bound (plus what the kernel and
                # its own queue took), not the 100,000 messages the HWM would allow
                assert produced * len(chunk) < 16 * 1024 * 1024, produced
                assert await other.call("echo", {"still": "serving"}) == {"still": "serving"}
                while True:
                    kind, rid, value = wire.decode_reply(await asyncio.wait_for(raw.recv_multipart(), DEADLINE))
                    if kind in (wire.STREAM_ITEM, wire.PING):
                        continue
                    assert (kind, rid) == (wire.ERROR, 1)
                    assert isinstance(value, wire.Unavailable) and value.details["reason"] == "SlowConsumer"
                    break
            finally:
                raw.close(0)
    caplog.set_level(logging.INFO, logger="kubemu.wire")
    run(main())
    lines = [r for r in caplog.records if "slow consumer" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING and not lines[0].exc_info


def test_a_client_buffers_an_unread_stream_up_to_a_byte_bound(ep, ctx, monkeypatch):
    from kubemu import _wire_client
    monkeypatch.setattr(_wire_client, "STREAM_BUFFER", 1024 * 1024)
    closed = asyncio.Event()
    chunk = b"x" * (64 * 1024)

    async def flood():
        try:
            i = 0
            while True:
                i += 1
                if i % 16 == 0:
                    await asyncio.sleep(0)
                yield chunk
        finally:
            closed.set()

    async def main():
        async with wire.Server(ep, {"flood": flood}, context=ctx), \
                wire.Client(ep, context=ctx, timeout=DEADLINE) as client:
            stream = client.stream("flood")
            await stream._open()
            await eventually(closed, "the server's stream to be cancelled by the client")  # we read nothing
            assert stream._buffered <= 1024 * 1024 + 2 * len(chunk)
            got = 0
            with pytest.raises(wire.Unavailable, match="MiB behind") as info:
                async for item in stream:
                    got += len(item)
            assert info.value.details["reason"] == "SlowConsumer"
            assert 0 < got <= 1024 * 1024
    run(main())
