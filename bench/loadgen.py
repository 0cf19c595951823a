"""The one load generator of `kubemu bench store`, the same for every system it drives.

    python -m bench.loadgen '{"system": "kubemu", "target": {...}, "op": "put", "clients": 64,
                              "warmup": 1.0, "seconds": 5.0}'

prints one JSON line with what it measured. It is a separate process (the benchmark starts
one per level, so a level never inherits another's sockets or garbage) running one asyncio
loop with `clients` workers. Each worker is a closed loop: pick a random key of the keyspace,
send one request, wait for its answer, repeat; so "clients" is the number of requests in
flight. After `warmup` seconds the window opens; every request that completes inside the
window is counted and its latency (send to answer, `time.perf_counter`) recorded. The window
closes after `seconds`; workers finish the request they have in flight and stop.

What differs between systems is only the protocol each one speaks, with the thinnest correct
client for it (no retries, no routing: the benchmark tells the driver the leader's address):

* kubemu: one `kubemu.wire.Client` (one ZeroMQ DEALER connection, msgpack frames) to the
  leader carrying all in-flight requests: exactly what `store.client.StoreClient` sends after
  leader discovery, without its per-call routing bookkeeping (target "client": "storeclient"
  drives the real StoreClient instead, to show what that bookkeeping costs);
* etcd, "grpc": one HTTP/2 channel (grpcio's asyncio API) with the protobuf messages encoded
  by hand (PutRequest/RangeRequest need three fields), like etcd's own `benchmark` tool with
  --conns 1; "http": the v3 JSON gateway (`POST /v3/kv/put`, base64 key and value) over
  HTTP/1.1 keep-alive, one connection per worker (HTTP/1.1 has one request in flight per
  connection), parsed by the small client below;
* PySyncObj: a `kubemu.wire.Client` to a replica process that serves its replicated dict on
  the same wire (see `bench.store`), so its client costs exactly what kubemu's does.

At the window's edges the driver also reads the servers' own counters (kubemu: every
replica's `status`; etcd: /metrics) so the benchmark can report fsyncs per committed entry
over exactly the measured window, and the CPU time the servers' processes used in it (psutil,
given their PIDs). The load generator's own CPU time over the window is reported too (a load
generator at 100% of a core is a bottleneck, and the table says so), and the whole machine's,
so that CPU taken by anything else during the window shows.
"""
from __future__ import annotations

import asyncio
import base64
import json
import math
import random
import resource
import sys
import time

KEYSPACE = 10_000
VALUE_SIZE = 256


def _key(i: int) -> bytes:
    return b"bench/%08d" % i


def _summary_ms(samples: list[float]) -> dict:
    if not samples:
        return {"n": 0, "p50": math.nan, "p99": math.nan, "min": math.nan, "max": math.nan, "mean": math.nan}
    ordered = sorted(samples)

    def pct(p: float) -> float:
        return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1] * 1000

    return {"n": len(ordered), "p50": pct(50), "p99": pct(99), "min": ordered[0] * 1000,
            "max": ordered[-1] * 1000, "mean": sum(ordered) / len(ordered) * 1000}


# ------------------------------------------------------------------------------ drivers

class Driver:
    """open(), then `request(op, i)` from many workers at once, counters(), close()."""

    async def open(self, clients: int) -> None: ...

    def worker(self, index: int):
        """The coroutine function one worker calls per request: f(op, key_index)."""
        raise NotImplementedError

    async def counters(self) -> dict:
        return {}

    async def close(self) -> None: ...


class KubemuDriver(Driver):
    def __init__(self, target: dict, value: bytes):
        self.target = target
        self.value = value
        self.client = None
        self.status_clients = {}

    async def open(self, clients: int) -> None:
        from kubemu import wire

        if self.target.get("client") == "storeclient":
            from store.client import StoreClient
            self.client = StoreClient(self.target["endpoints"], timeout=10.0)  # finds the leader itself
        else:
            self.client = wire.Client(self.target["leader"], timeout=10.0)
        self.status_clients = {ep: wire.Client(ep, timeout=5.0) for ep in self.target["endpoints"]}

    def worker(self, index: int):
        value = self.value
        if self.target.get("client") == "storeclient":
            sc = self.client

            async def request(op: str, i: int):
                if op == "put":
                    await sc.put(_key(i), value)
                else:
                    await sc.range(_key(i), serializable=(op == "get_serializable"))
            return request
        call = self.client.call

        async def request(op: str, i: int):
            if op == "put":
                await call("put", {"key": _key(i), "value": value})
            else:
                await call("range", {"key": _key(i), "serializable": op == "get_serializable"})
        return request

    async def counters(self) -> dict:
        async def one(ep, c):
            try:
                st = await c.call("status", {}, timeout=5.0)
            except Exception as exc:  # a replica that does not answer: no counters from it
                return ep, {"error": str(exc)}
            return ep, {k: st.get(k) for k in ("name", "role", "fsyncs", "commit_index", "applied_index",
                                               "proposals", "readies", "read_index_requests")}
        return dict(await asyncio.gather(*(one(ep, c) for ep, c in self.status_clients.items())))

    async def close(self) -> None:
        for c in [self.client, *self.status_clients.values()]:
            if c is not None:
                await c.close()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _pb_bytes(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


class EtcdGrpcDriver(Driver):
    """etcdserverpb.KV/Put and /Range over grpcio's asyncio channel, messages hand-encoded:
    PutRequest{key=1, value=2}, RangeRequest{key=1, serializable=7}."""

    def __init__(self, target: dict, value: bytes):
        self.target = target
        self.value = value

    async def open(self, clients: int) -> None:
        import grpc

        host = self.target["leader"].split("://", 1)[-1]
        self.channel = grpc.aio.insecure_channel(host)
        await self.channel.channel_ready()
        self.put = self.channel.unary_unary("/etcdserverpb.KV/Put")
        self.range = self.channel.unary_unary("/etcdserverpb.KV/Range")
        self.http = _Http(self.target["endpoints"])

    def worker(self, index: int):
        put, rng = self.put, self.range
        value_field = _pb_bytes(2, self.value)

        async def request(op: str, i: int):
            if op == "put":
                await put(_pb_bytes(1, _key(i)) + value_field)
            elif op == "get_serializable":
                await rng(_pb_bytes(1, _key(i)) + b"\x38\x01")
            else:
                await rng(_pb_bytes(1, _key(i)))
        return request

    async def counters(self) -> dict:
        return await self.http.metrics()

    async def close(self) -> None:
        await self.channel.close()


class _Conn:
    """One HTTP/1.1 keep-alive connection: POST a JSON body, read a Content-Length reply."""

    def __init__(self, hostport: str):
        self.host, port = hostport.rsplit(":", 1)
        self.port = int(port)
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(b"%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\n\r\n%s" % (method.encode(), path.encode(), self.host.encode(),
                                                             self.port, len(body), body))
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = None
        chunked = False
        for line in head.split(b"\r\n")[1:]:
            name, _, val = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(val)
            elif name == b"transfer-encoding" and b"chunked" in val.lower():
                chunked = True
        if chunked:
            data = bytearray()
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                data += chunk[:-2]
            data = bytes(data)
        else:
            data = await self.reader.readexactly(length or 0)
        return status, data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class _Http:
    """Reads etcd's /metrics from every member: the fsync and commit counters."""

    NAMES = {"etcd_disk_wal_fsync_duration_seconds_count": "fsyncs",
             "etcd_server_proposals_committed_total": "commit_index",
             "etcd_server_proposals_applied_total": "applied_index",
             "etcd_disk_backend_commit_duration_seconds_count": "backend_commits",
             "etcd_server_is_leader": "is_leader"}

    def __init__(self, endpoints: list[str]):
        self.endpoints = endpoints

    async def metrics(self) -> dict:
        async def one(ep):
            conn = _Conn(ep.split("://", 1)[-1])
            try:
                status, body = await asyncio.wait_for(conn.request("GET", "/metrics"), 5.0)
            except Exception as exc:
                return ep, {"error": str(exc)}
            finally:
                conn.close()
            found = {}
            for line in body.decode(errors="replace").splitlines():
                name, _, val = line.partition(" ")
                if name in self.NAMES:
                    found[self.NAMES[name]] = float(val)
            if "is_leader" in found:
                found["role"] = "leader" if found.pop("is_leader") else "follower"
            return ep, found
        return dict(await asyncio.gather(*(one(ep) for ep in self.endpoints)))


class EtcdHttpDriver(Driver):
    """etcd 3.4's JSON gateway (/v3/kv/put, /v3/kv/range), one keep-alive connection per worker."""

    def __init__(self, target: dict, value: bytes):
        self.target = target
        self.value64 = base64.b64encode(value)
        self.conns: list[_Conn] = []

    async def open(self, clients: int) -> None:
        hostport = self.target["leader"].split("://", 1)[-1]
        self.conns = [_Conn(hostport) for _ in range(clients)]
        self.http = _Http(self.target["endpoints"])

    def worker(self, index: int):
        conn = self.conns[index]
        value64 = self.value64
        keys64 = {}

        async def request(op: str, i: int):
            k = keys64.get(i)
            if k is None:
                k = keys64[i] = base64.b64encode(_key(i))
            if op == "put":
                status, body = await conn.request("POST", "/v3/kv/put", b'{"key":"%s","value":"%s"}' % (k, value64))
            elif op == "get_serializable":
                status, body = await conn.request("POST", "/v3/kv/range", b'{"key":"%s","serializable":true}' % k)
            else:
                status, body = await conn.request("POST", "/v3/kv/range", b'{"key":"%s"}' % k)
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {body[:200]!r}")
        return request

    async def counters(self) -> dict:
        return await self.http.metrics()

    async def close(self) -> None:
        for c in self.conns:
            c.close()


class PySyncObjDriver(Driver):
    """The PySyncObj replica process (bench.store) speaks kubemu's wire: put -> the replicated
    method (answered when applied on that replica), get -> its local dict (no linearizable read)."""

    def __init__(self, target: dict, value: bytes):
        self.target = target
        self.value = value

    async def open(self, clients: int) -> None:
        from kubemu import wire
        self.client = wire.Client(self.target["leader"], timeout=10.0)

    def worker(self, index: int):
        call, value = self.client.call, self.value

        async def request(op: str, i: int):
            if op == "put":
                await call("put", {"key": _key(i), "value": value})
            elif op == "get_serializable":
                await call("get", {"key": _key(i)})
            else:
                raise ValueError("PySyncObj has no linearizable read")
        return request

    async def close(self) -> None:
        await self.client.close()


DRIVERS = {"kubemu": KubemuDriver, "etcd-grpc": EtcdGrpcDriver, "etcd-http": EtcdHttpDriver,
           "pysyncobj": PySyncObjDriver}


# ------------------------------------------------------------------------------ the run

def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _machine_cpu() -> float:
    """CPU seconds every process on the machine has used so far (all CPUs, busy time)."""
    import psutil

    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


def _servers_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the servers' processes have used so far."""
    import psutil

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return total


async def run(spec: dict) -> dict:
    rng = random.Random(spec.get("seed", 1))
    value = bytes(rng.getrandbits(8) for _ in range(spec.get("value_size", VALUE_SIZE)))
    keyspace = spec.get("keyspace", KEYSPACE)
    op, clients = spec["op"], spec["clients"]
    driver = DRIVERS[spec["system"]](spec["target"], value)
    await driver.open(clients)
    loop = asyncio.get_running_loop()
    samples: list[float] = []
    errors: dict[str, int] = {}
    window = {"open": math.inf, "close": math.inf}
    stop = False

    async def worker(index: int) -> None:
        request = driver.worker(index)
        wrng = random.Random(index * 7919 + 1)
        perf = time.perf_counter
        while not stop:
            i = wrng.randrange(keyspace)
            t0 = perf()
            try:
                await request(op, i)
            except Exception as exc:
                t1 = perf()
                if window["open"] <= t1 <= window["close"]:
                    kind = type(exc).__name__
                    errors[kind] = errors.get(kind, 0) + 1
                await asyncio.sleep(0.001)  # a failing system must not turn workers into a spin
                continue
            t1 = perf()
            if window["open"] <= t1 <= window["close"]:
                samples.append(t1 - t0)

    tasks = [loop.create_task(worker(n)) for n in range(clients)]
    try:
        await asyncio.sleep(spec.get("warmup", 1.0))
        pids = spec["target"].get("pids", [])
        before = await driver.counters()
        cpu0, servers0, machine0 = _cpu(), _servers_cpu(pids), _machine_cpu()
        window["open"] = time.perf_counter()
        await asyncio.sleep(spec["seconds"])
        window["close"] = time.perf_counter()
        cpu1, servers1, machine1 = _cpu(), _servers_cpu(pids), _machine_cpu()
        after = await driver.counters()
        stop = True
        done, pending = await asyncio.wait(tasks, timeout=15.0)
        for t in pending:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        stop = True
        for t in tasks:
            t.cancel()
        await driver.close()
    elapsed = window["close"] - window["open"]
    return {"system": spec["system"], "op": op, "clients": clients, "seconds": elapsed, "ops": len(samples),
            "ops_per_s": len(samples) / elapsed, "errors": sum(errors.values()), "error_kinds": errors,
            "latency_ms": _summary_ms(samples), "loadgen_cpu_s": cpu1 - cpu0,
            "loadgen_cpu_per_op_us": (cpu1 - cpu0) / len(samples) * 1e6 if samples else math.nan,
            "servers_cpu_s": servers1 - servers0 if pids else math.nan, "machine_cpu_s": machine1 - machine0,
            "servers_cpu_per_op_us": (servers1 - servers0) / len(samples) * 1e6 if pids and samples else math.nan,
            "counters_before": before, "counters_after": after}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    spec = json.loads(argv[0])
    result = asyncio.run(run(spec))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
