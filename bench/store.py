"""`kubemu bench store`: the store (kubemu's etcd analog) beside etcd 3.4 and PySyncObj, in one run.

Every system runs as 3 replicas on 127.0.0.1 (TCP loopback, distinct ports, data in one temp
dir), each on a fresh cluster, one system after the other, and is driven by the same load
generator (`bench/loadgen.py`: one separate asyncio process per level, N requests in flight,
a warm-up, then a fixed window; see its docstring for the per-system clients):

- durable writes (put, 14-byte keys from a 10,000-key space, 256-byte values) at each
  --clients level: writes/s, p50/p99 latency, and the ratio to etcd at the same level;
- reads at the --read-clients levels: linearizable (kubemu: ReadIndex; etcd: the default
  range) and serializable (local; PySyncObj's only kind: a read of its local dict). All
  requests go to the leader, as kubemu's StoreClient sends them;
- fsyncs per committed entry at 64 clients (kubemu: the replicas' `status` counters; etcd:
  its /metrics wal_fsync count), over exactly the measured window;
- every level records the CPU the replicas, the load generator and everything else on the
  machine used in its window; a level in which other processes used more than 0.25 cores is
  measured again (at most twice more) and the least disturbed attempt kept, for every system;
- failover: kill -9 the kubemu leader under light load (4 writers through one StoreClient,
  a 5 ms pause between writes) -> the first successful write that was *sent after* the kill,
  on a cluster run with short Raft timings (--tick-ms 10 --election-ticks 10: an election
  timeout of 100-200 ms), and when a survivor first said it led (a status poll every 5 ms).

Peers, installed only for the benchmark, and only when missing: etcd 3.4 (`apt-get install
etcd-server`, default settings: it fsyncs its WAL on every Ready) driven through its gRPC API
(grpcio, pip) and its v3 JSON gateway over HTTP/1.1 (both rows are shown; "×etcd" compares with
the better of the two at each level, so the client library never flatters kubemu); PySyncObj
(pip), 3 replica processes each holding a `@replicated` dict and serving it on kubemu's wire
(`python -m bench.store pysyncobj-replica`; a put calls the replicated setter with a callback
that answers the wire call once the entry is applied on that replica, the asyncio form of
sync=True). PySyncObj keeps its Raft log in memory and never fsyncs: its figures are not
durable writes. So beside it, kubemu runs once more with --unsafe-no-fsync (etcd's flag of that
name; writes rows only): neither fsyncing, that ratio compares everything but the disk. If an
install fails the benchmark prints one line and skips that peer.
"""
from __future__ import annotations

import asyncio
import json
import math
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

from .stats import machine, percentile, summary

HERE = Path(__file__).parent
REPO = HERE.parent
SYSTEMS = ("kubemu", "etcd", "pysyncobj")
PEERS = ("etcd", "pysyncobj")
CLIENTS = (1, 16, 64, 256)
READ_CLIENTS = (1, 64)
FSYNC_LEVEL = 64
OTHER_CPU_LIMIT = 0.25  # cores other processes may use in a window before the level is measured again
RETRIES = 2
FAILOVER_FLAGS = {"tick_ms": 10, "election_ticks": 10}  # election timeout 100-200 ms (default 1-2 s)
FAILOVER_WRITERS = 4
FAILOVER_PAUSE = 0.005
PYSYNCOBJ_FAST = "PySyncObj (no batching)"
PYSYNCOBJ_DEFAULT = "PySyncObj (defaults)"
KUBEMU_NO_FSYNC = "kubemu (--unsafe-no-fsync)"  # PySyncObj's like: measures what the fsyncs cost

# etcd's figures on this kind of machine, from the issue (etcd's own benchmark tool, gRPC)
ETCD_REFERENCE = {"writes_per_s": {"1": 1016, "64": 10048, "256": 14115}, "p50_ms_1_client": 0.95,
                  "write_fdatasync_ms": 0.14}
TARGETS = ("kubemu writes/s >= 1.0x etcd at 64 and at 256 clients; kubemu single-client p50 <= 1.5x etcd's; "
           "kubemu ahead of PySyncObj at equal concurrency")
UNITS = {"writes_per_s": "1/s", "reads_per_s": "1/s", "p50_ms": "ms", "p99_ms": "ms", "min_ms": "ms",
         "max_ms": "ms", "mean_ms": "ms", "seconds": "s", "loadgen_cpu": "fraction of one core",
         "loadgen_cpu_per_op_us": "us", "servers_cpu": "cores (CPU seconds of the 3 replicas / second)",
         "servers_cpu_per_op_us": "us of the 3 replicas' CPU per request",
         "other_cpu": "cores used by every other process on the machine during the window",
         "attempts": "times the level was measured (again while others used > 0.25 cores); the least disturbed kept",
         "fsyncs_per_entry": "fsyncs per committed Raft entry",
         "ratio_vs_etcd": "x (this system's writes/s / etcd's best at that concurrency)",
         "p50_ratio_vs_etcd": "x (this p50 / etcd's best p50)", "failover": "ms from kill -9 to the event"}


class Skip(Exception):
    """A peer that cannot run here; the suite prints why and carries on."""


def _say(text: str) -> None:
    print(text, flush=True)


# ------------------------------------------------------------------------------ installs

def _pip(package: str) -> str | None:
    """pip-install `package` into this interpreter's environment; None, or why it failed."""
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], capture_output=True, text=True)
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["pip failed"])[-1][:200]
    return None


def etcd_path(install: bool) -> str:
    found = shutil.which("etcd")
    if found or not install:
        if not found:
            raise Skip("etcd is not installed (apt-get install etcd-server)")
        return found
    if os.geteuid() != 0:
        raise Skip("etcd is not installed and installing it needs root (apt-get install etcd-server)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    argv = ["apt-get", "install", "-y", "-q", "etcd-server"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:  # the package lists may be missing or stale
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True, env=env)
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
    found = shutil.which("etcd")
    if done.returncode != 0 or not found:
        why = (done.stderr.strip().splitlines() or ["apt-get failed"])[-1][:200]
        raise Skip(f"could not install etcd-server with apt-get: {why}")
    _say(f"installed etcd-server with apt-get for the benchmark ({_etcd_version(found)})")
    return found


def _etcd_version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("etcd Version")),
                "unknown")


def _have(module: str) -> bool:
    probe = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True)
    return probe.returncode == 0


def ensure_module(module: str, package: str, install: bool) -> None:
    """Make `module` importable by the benchmark's child processes (pip, only if missing)."""
    if _have(module):
        return
    if not install:
        raise Skip(f"{package} is not installed (pip install {package})")
    why = _pip(package)
    if why is not None or not _have(module):
        raise Skip(f"could not pip-install {package}: {why or 'still not importable'}")
    _say(f"installed {package} with pip into {sys.prefix} for the benchmark")


def _module_version(dist: str) -> str:
    out = subprocess.run([sys.executable, "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
                         capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


# ------------------------------------------------------------------------------ processes

def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def child_env(marker: str) -> dict:
    env = dict(os.environ, KUBEMU_STATE_DIR=marker, PYTHONPATH=str(REPO))
    for var in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        env.pop(var, None)
    return env


class Cluster:
    """Three replica processes of one system; subclasses say how to start one and who leads."""

    kind = ""

    def __init__(self, workdir: Path, marker: str):
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.marker = marker
        self.names = [f"{self.kind}-{i}" for i in range(3)]
        self.procs: dict[str, subprocess.Popen] = {}
        self._logs: list = []

    def argv(self, name: str) -> list[str]:
        raise NotImplementedError

    def spawn(self, name: str) -> None:
        log = open(self.dir / f"{name}.log", "ab")
        self._logs.append(log)
        self.procs[name] = subprocess.Popen(self.argv(name), env=child_env(self.marker), cwd=str(REPO),
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def start(self, timeout: float = 60.0) -> None:
        for name in self.names:
            self.spawn(name)
        self.leader(timeout)

    def alive(self, name: str) -> bool:
        proc = self.procs.get(name)
        return proc is not None and proc.poll() is None

    def leader(self, timeout: float = 60.0) -> str:
        """The leading replica's name, once every running replica agrees on it."""
        deadline = time.monotonic() + timeout
        while True:
            found = self._leader()
            if found:
                return found
            dead = [n for n in self.names if n in self.procs and not self.alive(n)]
            if len(dead) > 1 or time.monotonic() > deadline:
                tail = (self.dir / f"{self.names[0]}.log").read_text(errors="replace")[-400:]
                raise RuntimeError(f"{self.kind}: no leader within {timeout:g}s (dead: {dead}); log: {tail}")
            time.sleep(0.05)

    def _leader(self) -> str | None:
        raise NotImplementedError

    def target(self) -> dict:
        """What the load generator needs: the leader's endpoint, every endpoint, the PIDs."""
        raise NotImplementedError

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values() if p.poll() is None]

    def stop(self) -> None:
        live = [p for p in self.procs.values() if p.poll() is None]
        for p in live:
            try:
                p.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        for p in live:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for log in self._logs:
            log.close()
        self._logs.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class WireCluster(Cluster):
    """A cluster whose replicas answer `status` on kubemu's wire (kubemu, and PySyncObj behind
    its wire front): one cached client per replica, dropped when it fails."""

    endpoints: dict[str, str]

    def __init__(self, workdir: Path, marker: str):
        super().__init__(workdir, marker)
        self._clients: dict = {}

    def wire_status(self, name: str, timeout: float = 1.0) -> dict | None:
        from kubemu import wire

        client = self._clients.get(name)
        if client is None:
            client = self._clients[name] = wire.SyncClient(self.endpoints[name], timeout=timeout)
        try:
            return client.call("status", {}, timeout=timeout)
        except wire.WireError:
            self._clients.pop(name).close()
            return None

    def target(self) -> dict:
        return {"leader": self.endpoints[self.leader()], "endpoints": list(self.endpoints.values()),
                "pids": self.pids()}

    def stop(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        super().stop()


class KubemuCluster(WireCluster):
    """python -m store, three replicas on tcp://127.0.0.1 ports."""

    kind = "store"

    def __init__(self, workdir: Path, marker: str, **flags):
        super().__init__(workdir, marker)
        self.endpoints = {n: f"tcp://127.0.0.1:{p}" for n, p in zip(self.names, free_ports(3))}
        self.flags = flags

    def argv(self, name: str) -> list[str]:
        peers = ",".join(f"{n}={ep}" for n, ep in self.endpoints.items())
        argv = [sys.executable, "-m", "store", "--name", name, "--data-dir", str(self.dir / name),
                "--listen", self.endpoints[name], "--peers", peers]
        for key, value in self.flags.items():
            argv += ["--" + key.replace("_", "-")] + ([] if value is True else [str(value)])
        return argv

    def status(self, name: str, timeout: float = 1.0) -> dict | None:
        return self.wire_status(name, timeout) if self.alive(name) else None

    def statuses(self) -> dict[str, dict]:
        return {n: s for n in self.names if (s := self.status(n)) is not None}

    def _leader(self) -> str | None:
        sts = self.statuses()
        leaders = [n for n, s in sts.items() if s["role"] == "leader"]
        if len(leaders) != 1:
            return None
        lead = leaders[0]
        if sts[lead]["term"] == max(s["term"] for s in sts.values()) and all(s["leader"] == lead for s in sts.values()):
            return lead
        return None

    def caught_up(self, timeout: float = 60.0) -> tuple[str, int]:
        """Wait until every replica runs, agrees on the leader and has applied what the leader
        had committed; return the leader's name and term."""
        lead = self.leader(timeout)
        goal = (self.status(lead) or {}).get("commit_index", 0)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sts = self.statuses()
            if len(sts) == len(self.names) and all(s["applied_index"] >= goal for s in sts.values()):
                lead = self.leader(timeout)
                return lead, sts[lead]["term"]
            time.sleep(0.02)
        raise RuntimeError("store: a restarted replica did not catch up")



class EtcdCluster(Cluster):
    """etcd, three members with client and peer URLs on 127.0.0.1 ports, default settings."""

    kind = "etcd"

    def __init__(self, workdir: Path, marker: str, exe: str):
        super().__init__(workdir, marker)
        self.exe = exe
        ports = free_ports(6)
        self.client_urls = {n: f"http://127.0.0.1:{ports[i]}" for i, n in enumerate(self.names)}
        self.peer_urls = {n: f"http://127.0.0.1:{ports[3 + i]}" for i, n in enumerate(self.names)}

    def argv(self, name: str) -> list[str]:
        cluster = ",".join(f"{n}={u}" for n, u in self.peer_urls.items())
        return [self.exe, "--name", name, "--data-dir", str(self.dir / name),
                "--listen-client-urls", self.client_urls[name], "--advertise-client-urls", self.client_urls[name],
                "--listen-peer-urls", self.peer_urls[name], "--initial-advertise-peer-urls", self.peer_urls[name],
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", f"kubemu-bench-{os.getpid()}", "--logger", "zap"]

    def _is_leader(self, name: str) -> bool | None:
        try:
            with urllib.request.urlopen(self.client_urls[name] + "/metrics", timeout=1.0) as resp:
                for line in resp.read().decode(errors="replace").splitlines():
                    if line.startswith("etcd_server_is_leader "):
                        return float(line.split()[1]) == 1.0
        except OSError:
            return None
        return None

    def _leader(self) -> str | None:
        flags = {n: self._is_leader(n) for n in self.names if self.alive(n)}
        leaders = [n for n, f in flags.items() if f]
        if len(leaders) == 1 and all(f is not None for f in flags.values()):
            try:  # a leader that can commit: a write goes through
                req = urllib.request.Request(self.client_urls[leaders[0]] + "/v3/kv/put", method="POST",
                                             data=b'{"key":"cmVhZHk=","value":"MQ=="}')
                with urllib.request.urlopen(req, timeout=2.0) as resp:
                    if resp.status == 200:
                        return leaders[0]
            except OSError:
                return None
        return None

    def target(self) -> dict:
        return {"leader": self.client_urls[self.leader()], "endpoints": list(self.client_urls.values()),
                "pids": self.pids()}


class PySyncObjCluster(WireCluster):
    """Three `python -m bench.store pysyncobj-replica` processes (see pysyncobj_replica)."""

    kind = "pysyncobj"

    def __init__(self, workdir: Path, marker: str, batch: bool = True):
        super().__init__(workdir, marker)
        self.batch = batch
        ports = free_ports(6)
        self.raft_addrs = {n: f"127.0.0.1:{ports[i]}" for i, n in enumerate(self.names)}
        self.endpoints = {n: f"tcp://127.0.0.1:{ports[3 + i]}" for i, n in enumerate(self.names)}

    def argv(self, name: str) -> list[str]:
        partners = ",".join(a for n, a in self.raft_addrs.items() if n != name)
        return [sys.executable, "-m", "bench.store", "pysyncobj-replica", "--self", self.raft_addrs[name],
                "--partners", partners, "--listen", self.endpoints[name]] + ([] if self.batch else ["--no-batch"])


    def _leader(self) -> str | None:
        sts = {n: self.wire_status(n) for n in self.names if self.alive(n)}
        if any(s is None for s in sts.values()):
            return None
        leaders = [n for n, s in sts.items() if s["leader_state"]]
        if len(leaders) == 1 and all(s["leader"] == self.raft_addrs[leaders[0]] for s in sts.values()):
            return leaders[0]
        return None



def pysyncobj_replica(argv: list[str]) -> int:
    """One PySyncObj replica: a SyncObj with a @replicated dict (its default settings: the log in
    memory, no fsync; AppendEntries batched every 0.1 s unless --no-batch), served on kubemu's
    wire: put {key, value} -> {} once applied here; get {key} -> {value} (the local dict);
    status {} -> {leader_state, leader, self, commit_idx, raft_term}."""
    import argparse

    from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated

    from kubemu import wire

    p = argparse.ArgumentParser(prog="python -m bench.store pysyncobj-replica")
    p.add_argument("--self", required=True)
    p.add_argument("--partners", required=True)
    p.add_argument("--listen", required=True)
    p.add_argument("--no-batch", action="store_true", help="appendEntriesUseBatch=False")
    args = p.parse_args(argv)

    class KV(SyncObj):
        def __init__(self, conf):
            super().__init__(args.self, args.partners.split(","), conf)
            self.data: dict = {}

        @replicated
        def set(self, key, value):
            self.data[key] = value

    def resolve(fut: asyncio.Future, err) -> None:
        if not fut.done():
            fut.set_result(err)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        kv = KV(SyncObjConf(appendEntriesUseBatch=not args.no_batch))

        async def put(key, value):
            fut = loop.create_future()
            kv.set(key, value, callback=lambda res, err: loop.call_soon_threadsafe(resolve, fut, err))
            err = await fut
            if err != FAIL_REASON.SUCCESS:
                raise wire.Unavailable(f"PySyncObj refused the write (FAIL_REASON {err})")
            return {}

        def get(key):
            return {"value": kv.data.get(key)}

        def status():
            st = kv.getStatus()
            return {"leader_state": st["state"] == 2, "leader": str(st["leader"]) if st["leader"] else None,
                    "self": str(st["self"]), "commit_idx": st["commit_idx"], "raft_term": st["raft_term"]}

        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        server = wire.Server(args.listen, {"put": put, "get": get, "status": status}, name="pysyncobj")
        await server.start()
        await stop.wait()
        await server.close()
        kv.destroy()
        return 0

    return asyncio.run(main())


# ------------------------------------------------------------------------------ measuring

def loadgen(system: str, target: dict, op: str, clients: int, seconds: float, warmup: float, marker: str) -> dict:
    spec = {"system": system, "target": target, "op": op, "clients": clients, "seconds": seconds, "warmup": warmup}
    done = subprocess.run([sys.executable, "-m", "bench.loadgen", json.dumps(spec)], env=child_env(marker),
                          cwd=str(REPO), capture_output=True, text=True, timeout=warmup + seconds + 120)
    if done.returncode != 0:
        raise RuntimeError(f"load generator failed: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _other_cpu(result: dict) -> float:
    """Cores that processes other than the servers and the load generator used in the window."""
    return (result["machine_cpu_s"] - result["servers_cpu_s"] - result["loadgen_cpu_s"]) / result["seconds"]


def measure(system: str, target: dict, op: str, clients: int, seconds: float, warmup: float, marker: str,
            retries: int = RETRIES) -> dict:
    """One level, measured again (at most `retries` more times) while other processes took more
    than OTHER_CPU_LIMIT cores during its window; the least disturbed attempt is kept. The
    same rule for every system: a machine shared with other work slows whoever runs then."""
    attempts = []
    for _ in range(1 + retries):
        result = loadgen(system, target, op, clients, seconds, warmup, marker)
        attempts.append(result)
        if not _other_cpu(result) > OTHER_CPU_LIMIT:
            break
    best = min(attempts, key=_other_cpu)
    best["attempts"] = len(attempts)
    return best


def _fsyncs(result: dict, leader_ep: str) -> dict:
    """fsyncs per committed entry over the window, on the leader and on each follower."""
    before, after = result["counters_before"], result["counters_after"]
    out: dict = {"followers": []}
    for ep, a in after.items():
        b = before.get(ep, {})
        if "fsyncs" not in a or "fsyncs" not in b or "error" in a or "error" in b:
            continue
        fsyncs = a["fsyncs"] - b["fsyncs"]
        entries = a["commit_index"] - b["commit_index"]
        ratio = fsyncs / entries if entries > 0 else math.nan
        if ep == leader_ep:
            out.update(leader_fsyncs=fsyncs, leader_entries=entries, fsyncs_per_entry=ratio)
        else:
            out["followers"].append({"fsyncs": fsyncs, "entries": entries, "fsyncs_per_entry": ratio})
    out["writes_acknowledged"] = result["ops"]
    if out.get("leader_fsyncs") is not None and result["ops"]:
        out["leader_fsyncs_per_write"] = out["leader_fsyncs"] / result["ops"]
    return out


def _row(result: dict, system: str, label: str, kind: str) -> dict:
    lat = result["latency_ms"]
    rate_key = "writes_per_s" if kind == "put" else "reads_per_s"
    return {"system": system, "label": label, "op": kind, "clients": result["clients"],
            rate_key: result["ops_per_s"], "n": lat["n"], "p50_ms": lat["p50"], "p99_ms": lat["p99"],
            "min_ms": lat["min"], "max_ms": lat["max"], "mean_ms": lat["mean"], "seconds": result["seconds"],
            "errors": result["errors"], "error_kinds": result["error_kinds"],
            "loadgen_cpu": result["loadgen_cpu_s"] / result["seconds"],
            "loadgen_cpu_per_op_us": result["loadgen_cpu_per_op_us"],
            "servers_cpu": result["servers_cpu_s"] / result["seconds"],
            "servers_cpu_per_op_us": result["servers_cpu_per_op_us"],
            "other_cpu": _other_cpu(result), "attempts": result.get("attempts", 1)}


def measure_system(system: str, cluster: Cluster, drivers: dict[str, str], clients, read_clients, reads,
                   seconds: float, warmup: float, marker: str, tick=None,
                   fsync_clients: int = FSYNC_LEVEL, retries: int = RETRIES) -> tuple[list, list, dict]:
    """Write rows, read rows and the fsync figures of one running cluster. `drivers` maps a
    row label to the loadgen driver (etcd has two: gRPC and the JSON gateway)."""
    writes, read_rows, fsyncs = [], [], {}
    target = cluster.target()
    for label, driver in drivers.items():
        for c in clients:
            result = measure(driver, target, "put", c, seconds, warmup, marker, retries)
            writes.append(_row(result, system, label, "put"))
            if c == fsync_clients and result["counters_after"]:
                fsyncs[label] = _fsyncs(result, target["leader"])
            if tick:
                tick()
        for c in read_clients:
            for kind in reads:
                result = measure(driver, target, kind, c, seconds, warmup, marker, retries)
                read_rows.append(_row(result, system, label, kind))
                if tick:
                    tick()
    return writes, read_rows, fsyncs


async def _failover_trial(cluster: KubemuCluster, sc, trial: int) -> dict:
    """One leader kill. Three clocks stop, all measured from the kill: the first write sent
    after the kill that a StoreClient gets acknowledged (what kubemu's components see); the
    first such write a direct prober gets acknowledged (one wire call at a time to one replica,
    100 ms timeout, following NotLeader hints, otherwise rotating over all three: what the
    cluster offers); and the first status poll in which a survivor says it leads."""
    import store.errors  # noqa: F401  (registers the NotLeader error code with the wire)
    from kubemu import wire

    loop = asyncio.get_running_loop()
    lead, old_term = await loop.run_in_executor(None, cluster.caught_up)
    survivors = [n for n in cluster.names if n != lead]
    state = {"kill": math.inf, "storeclient": None, "probe": None, "elected": None, "stop": False}
    got = asyncio.Event()

    def stamp(key: str, t0: float) -> None:
        if t0 >= state["kill"] and state[key] is None:
            state[key] = time.perf_counter()
            if state["storeclient"] is not None and state["probe"] is not None:
                got.set()

    async def writer(w: int) -> None:
        while not state["stop"]:
            t0 = time.perf_counter()
            try:
                await sc.put(f"failover/{w}", b"x" * 64)
            except wire.WireError:
                continue  # OutcomeUnknown (in flight at the kill) or Unavailable: the next write
            stamp("storeclient", t0)
            await asyncio.sleep(FAILOVER_PAUSE)

    async def prober() -> None:
        eps = list(cluster.endpoints.values())
        clients = {ep: wire.Client(ep, timeout=0.1) for ep in eps}
        turn, hint = 0, None
        try:
            while not state["stop"]:
                ep = hint or eps[turn % len(eps)]
                hint = None
                t0 = time.perf_counter()
                try:
                    await clients[ep].call("put", {"key": b"failover/probe", "value": b"x" * 64}, timeout=0.1)
                except wire.WireError as err:
                    named = err.details.get("endpoint") if isinstance(err.details, dict) else None
                    if err.code == "NotLeader" and named in clients and named != ep:
                        hint = named
                    else:
                        turn += 1
                        await asyncio.sleep(FAILOVER_PAUSE)
                    continue
                stamp("probe", t0)
                await asyncio.sleep(FAILOVER_PAUSE)
        finally:
            for c in clients.values():
                await c.close()

    async def watch(name: str) -> None:
        async with wire.Client(cluster.endpoints[name], timeout=0.5) as c:
            while not state["stop"] and state["elected"] is None:
                try:
                    st = await c.call("status", {}, timeout=0.5)
                except wire.WireError:
                    await asyncio.sleep(0.005)
                    continue
                if st["role"] == "leader" and st["term"] > old_term and time.perf_counter() >= state["kill"]:
                    state["elected"] = state["elected"] or time.perf_counter()
                    return
                await asyncio.sleep(0.005)

    tasks = [loop.create_task(writer(w)) for w in range(FAILOVER_WRITERS)] + [loop.create_task(prober())]
    try:
        await asyncio.sleep(0.3)  # the load runs and the clients know the leader
        tasks += [loop.create_task(watch(n)) for n in survivors]
        state["kill"] = time.perf_counter()
        os.kill(cluster.procs[lead].pid, signal.SIGKILL)
        await asyncio.wait_for(got.wait(), 30.0)
    finally:
        state["stop"] = True
        await asyncio.gather(*tasks, return_exceptions=True)
    await loop.run_in_executor(None, cluster.procs[lead].wait)
    cluster.spawn(lead)  # back to three replicas for the next trial

    def ms(key: str) -> float:
        return (state[key] - state["kill"]) * 1000 if state[key] is not None else math.nan

    return {"trial": trial, "killed": lead, "storeclient_first_write_ms": ms("storeclient"),
            "probe_first_write_ms": ms("probe"), "elected_ms": ms("elected")}


async def _failover(cluster: KubemuCluster, trials: int, tick=None) -> list[dict]:
    from store.client import StoreClient

    out = []
    async with StoreClient(list(cluster.endpoints.values()), timeout=5.0) as sc:
        for i in range(trials):
            out.append(await _failover_trial(cluster, sc, i))
            if tick:
                tick()
    return out


def fdatasync_floor(directory: Path, n: int = 200) -> dict:
    """write(4 KiB) + fdatasync on the benchmark's filesystem: the least a durable write costs."""
    path = directory / "fdatasync.probe"
    samples = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        block = os.urandom(4096)
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            samples.append((time.perf_counter() - t0) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return {"p50_ms": percentile(samples, 50), "p99_ms": percentile(samples, 99), "n": n}


def _kubemu_version() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "store", "kubemu/wire.py",
                                "kubemu/_wire_*"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return f"{head or 'unknown'}{' + uncommitted changes in store/ or the wire' if dirty else ''}"


# ------------------------------------------------------------------------------ the suite

def run(quick: bool = False, kills: int | None = None, clients=None, read_clients=None, seconds: float | None = None,
        warmup: float | None = None, peers=PEERS, install: bool = True, progress_factory=None,
        workdir: Path | None = None, marker: str | None = None, storeclient_row: bool | None = None,
        fsync_clients: int = FSYNC_LEVEL, retries: int = RETRIES) -> dict:
    """Run the suite and return its report. `kills`: failover trials (default 20, 10 with quick;
    0: none). `retries`: how often a disturbed level is measured again (see `measure`).
    `install`: install missing peers (else they are skipped). `workdir`: where data and logs go
    (default: a temp dir, removed after); every process started gets KUBEMU_STATE_DIR=`marker`
    (default: workdir)."""
    clients = list(clients or CLIENTS)
    read_clients = list(READ_CLIENTS if read_clients is None else read_clients)
    seconds = seconds or (2.0 if quick else 5.0)
    warmup = warmup if warmup is not None else (0.5 if quick else 1.0)
    trials = kills if kills is not None else (10 if quick else 20)
    storeclient_row = (not quick) if storeclient_row is None else storeclient_row
    peers = [p for p in peers if p]
    unknown = set(peers) - set(PEERS)
    if unknown:
        raise ValueError(f"unknown peers {sorted(unknown)}; known: {', '.join(PEERS)}")

    with ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kbs")))
        workdir = Path(workdir)
        marker = marker or str(workdir)
        report = {"suite": "store", "machine": machine(), "targets_text": TARGETS, "units": UNITS,
                  "reference_etcd_from_issue": ETCD_REFERENCE, "systems": {}, "skipped": {},
                  "config": {"clients": clients, "read_clients": read_clients, "seconds": seconds, "warmup": warmup,
                             "value_size": 256, "keyspace": 10_000, "key_size": 14, "replicas": 3,
                             "transport": "TCP on 127.0.0.1", "requests_go_to": "the leader",
                             "fsync_level_clients": fsync_clients, "failover_trials": trials,
                             "remeasure_if_other_cpu_above": OTHER_CPU_LIMIT, "retries": retries}}
        m = report["machine"]
        m["loadavg_start"] = list(os.getloadavg())
        m["kernel"] = platform.release()
        m["fdatasync_4k"] = fdatasync_floor(workdir)
        writes: list[dict] = []
        reads: list[dict] = []
        fsyncs: dict = {}

        def progress(label: str, total: int):
            return progress_factory(label, total) if progress_factory else None

        # --- kubemu ----------------------------------------------------------------------
        drivers = {"kubemu": "kubemu"}
        n_runs = len(clients) + 2 * len(read_clients) + (1 if storeclient_row else 0)
        tick = progress("kubemu", n_runs)
        report["systems"]["kubemu"] = {"version": _kubemu_version(), "settings": "python -m store defaults "
                                       "(--tick-ms 100, --election-ticks 10, --snapshot-count 100000)",
                                       "client": "kubemu.wire.Client to the leader (what StoreClient sends)"}
        with KubemuCluster(workdir / "kubemu", marker) as cluster:
            cluster.start()
            w, r, f = measure_system("kubemu", cluster, drivers, clients, read_clients,
                                     ("get_linearizable", "get_serializable"), seconds, warmup, marker, tick,
                                     fsync_clients, retries)
            writes += w
            reads += r
            fsyncs.update(f)
            if storeclient_row:
                level = fsync_clients if fsync_clients in clients else clients[-1]
                result = measure("kubemu", dict(cluster.target(), client="storeclient"), "put", level, seconds,
                                 warmup, marker, retries)
                writes.append(_row(result, "kubemu", "kubemu (StoreClient)", "put"))
                if tick:
                    tick()

        # --- etcd ------------------------------------------------------------------------
        if "etcd" in peers:
            try:
                exe = etcd_path(install)
                etcd_drivers = {}
                try:
                    ensure_module("grpc", "grpcio", install)
                    etcd_drivers["etcd (gRPC)"] = "etcd-grpc"
                except Skip as exc:
                    _say(f"etcd over gRPC skipped: {exc}")
                    report["skipped"]["etcd (gRPC)"] = str(exc)
                etcd_drivers["etcd (JSON)"] = "etcd-http"
                report["systems"]["etcd"] = {
                    "version": _etcd_version(exe), "settings": "defaults (heartbeat 100 ms, election 1000 ms, "
                    "snapshot-count 100000; the WAL is fsynced for every Ready that has entries)",
                    "client": "gRPC: grpcio asyncio, one HTTP/2 channel, hand-encoded protobuf; "
                              "JSON gateway: POST /v3/kv/put over HTTP/1.1 keep-alive, one connection per client"}
                tick = progress("etcd", len(etcd_drivers) * (len(clients) + 2 * len(read_clients)))
                with EtcdCluster(workdir / "etcd", marker, exe) as cluster:
                    cluster.start()
                    w, r, f = measure_system("etcd", cluster, etcd_drivers, clients, read_clients,
                                             ("get_linearizable", "get_serializable"), seconds, warmup, marker,
                                             tick, fsync_clients, retries)
                    writes += w
                    reads += r
                    fsyncs.update(f)
            except Skip as exc:
                _say(f"etcd skipped: {exc}")
                report["skipped"]["etcd"] = str(exc)

        # --- PySyncObj -------------------------------------------------------------------
        if "pysyncobj" in peers:
            try:
                ensure_module("pysyncobj", "pysyncobj", install)
                report["systems"]["pysyncobj"] = {
                    "version": _module_version("pysyncobj"),
                    "settings": f"{PYSYNCOBJ_FAST}: SyncObjConf(appendEntriesUseBatch=False), each entry sent at "
                                f"once; {PYSYNCOBJ_DEFAULT}: SyncObjConf() defaults, entries sent in batches every "
                                "0.1 s (writes only). Both keep the Raft log in memory and never fsync: their "
                                "writes are not durable",
                    "client": "kubemu.wire.Client to the leader replica's wire server (the same client as kubemu)"}
                tick = progress("pysyncobj", 2 * len(clients) + len(read_clients))
                for label, batch, read_levels in ((PYSYNCOBJ_FAST, False, read_clients),
                                                  (PYSYNCOBJ_DEFAULT, True, [])):
                    with PySyncObjCluster(workdir / f"pysyncobj-{int(batch)}", marker, batch=batch) as cluster:
                        cluster.start()
                        w, r, _ = measure_system("pysyncobj", cluster, {label: "pysyncobj"}, clients,
                                                 read_levels, ("get_serializable",), seconds, warmup, marker,
                                                 tick, fsync_clients, retries)
                        writes += w
                        reads += r
            except Skip as exc:
                _say(f"PySyncObj skipped: {exc}")
                report["skipped"]["pysyncobj"] = str(exc)
            else:
                # Neither fsyncs here: the difference is the rest of the path, not the disk.
                tick = progress("kubemu --unsafe-no-fsync", len(clients))
                with KubemuCluster(workdir / "kubemu-no-fsync", marker, unsafe_no_fsync=True) as cluster:
                    cluster.start()
                    w, _, _ = measure_system("kubemu", cluster, {KUBEMU_NO_FSYNC: "kubemu"}, clients, [], (),
                                             seconds, warmup, marker, tick, 0, retries)
                    writes += w

        # --- failover --------------------------------------------------------------------
        failover = None
        if trials > 0:
            tick = progress("kubemu failover (kill -9 the leader)", trials)
            with KubemuCluster(workdir / "failover", marker, **FAILOVER_FLAGS) as cluster:
                cluster.start()
                samples = asyncio.run(_failover(cluster, trials, tick))
            def ms_summary(key: str) -> dict:
                values = [s[key] for s in samples if not math.isnan(s[key])]
                return {(f"{k}_ms" if k != "n" else k): v for k, v in summary(values).items()}

            failover = {"flags": "--tick-ms 10 --election-ticks 10 --heartbeat-ticks 1 "
                                 "(election timeout randomized in [100, 200) ms)",
                        "load": f"{FAILOVER_WRITERS} writers through one StoreClient (its defaults: timeout 5 s, "
                                f"dial timeout 2 s) and one direct prober, {FAILOVER_PAUSE * 1000:g} ms between "
                                "a writer's writes",
                        "storeclient_first_write": ms_summary("storeclient_first_write_ms"),
                        "probe_first_write": ms_summary("probe_first_write_ms"),
                        "elected": ms_summary("elected_ms"), "trials": samples}

        m["loadavg_end"] = list(os.getloadavg())
    _ratios(writes, reads)
    report["results"] = {"writes": writes, "reads": reads, "fsyncs": fsyncs, "failover": failover}
    report["targets"] = _targets(writes)
    report["no_fsync_vs_pysyncobj"] = _no_fsync_ratios(writes)
    return report


def _best_etcd(rows: list[dict], op: str, clients: int, rate_key: str) -> tuple[float, float]:
    etcd = [r for r in rows if r["system"] == "etcd" and r["op"] == op and r["clients"] == clients and r["n"]]
    if not etcd:
        return math.nan, math.nan
    return max(r[rate_key] for r in etcd), min(r["p50_ms"] for r in etcd)


def _ratios(writes: list[dict], reads: list[dict]) -> None:
    for rows, key in ((writes, "writes_per_s"), (reads, "reads_per_s")):
        for row in rows:
            rate, p50 = _best_etcd(rows, row["op"], row["clients"], key)
            row["ratio_vs_etcd"] = row[key] / rate if rate else math.nan
            row["p50_ratio_vs_etcd"] = row["p50_ms"] / p50 if p50 else math.nan


def _targets(writes: list[dict]) -> list[dict]:
    def row(label: str, clients: int) -> dict | None:
        return next((r for r in writes if r["label"] == label and r["clients"] == clients), None)

    out = []
    for c in (64, 256):
        k = row("kubemu", c)
        if k and not math.isnan(k["ratio_vs_etcd"]):
            out.append({"target": f"writes/s at {c} clients >= 1.0x etcd", "value": k["ratio_vs_etcd"],
                        "unit": "x", "met": k["ratio_vs_etcd"] >= 1.0})
    k = row("kubemu", 1)
    if k and not math.isnan(k["p50_ratio_vs_etcd"]):
        out.append({"target": "single-client p50 <= 1.5x etcd's", "value": k["p50_ratio_vs_etcd"], "unit": "x",
                    "met": k["p50_ratio_vs_etcd"] <= 1.5})
    for k in (r for r in writes if r["label"] == "kubemu"):
        best = max((r["writes_per_s"] for r in writes if r["system"] == "pysyncobj" and r["clients"] == k["clients"]),
                   default=0)
        if best:
            ratio = k["writes_per_s"] / best
            out.append({"target": f"writes/s ahead of PySyncObj (its faster setting) at {k['clients']} clients",
                        "value": ratio, "unit": "x", "met": ratio > 1.0})
    return out


def _no_fsync_ratios(writes: list[dict]) -> list[dict]:
    """kubemu --unsafe-no-fsync against PySyncObj's faster setting, level by level: neither
    fsyncs, so this is the comparison of everything but the disk."""
    out = []
    for k in (r for r in writes if r["label"] == KUBEMU_NO_FSYNC):
        best = max((r["writes_per_s"] for r in writes if r["system"] == "pysyncobj" and r["clients"] == k["clients"]),
                   default=0)
        if best:
            out.append({"clients": k["clients"], "ratio": k["writes_per_s"] / best})
    return out


# ------------------------------------------------------------------------------ the table

def _f(value, fmt: str = "{:.2f}") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return fmt.format(value)


def table(report: dict):
    from rich.console import Group
    from rich.table import Table

    m = report["machine"]
    cfg = report["config"]
    parts = []
    t = Table(title=f"store: durable writes, 3 replicas, {cfg['seconds']:g} s per level "
                    f"({m['cpus']} cpus, {m['cpu_model']}, Python {m['python']}, {m['date']}; "
                    f"write+fdatasync 4 KiB p50 {m['fdatasync_4k']['p50_ms']:.2f} ms)")
    for col in ("system", "clients", "writes/s", "p50 ms", "p99 ms", "×etcd", "×etcd p50", "errors",
                "srv cpu", "srv µs/op", "lg cpu"):
        t.add_column(col, justify="left" if col == "system" else "right")
    for r in report["results"]["writes"]:
        t.add_row(r["label"], str(r["clients"]), _f(r["writes_per_s"], "{:,.0f}"), _f(r["p50_ms"]), _f(r["p99_ms"]),
                  _f(r["ratio_vs_etcd"], "{:.2f}x"), _f(r["p50_ratio_vs_etcd"], "{:.2f}x"), str(r["errors"]),
                  _f(r["servers_cpu"], "{:.2f}"), _f(r["servers_cpu_per_op_us"], "{:,.0f}"),
                  _f(r["loadgen_cpu"], "{:.2f}"))
    parts.append(t)
    if report["results"]["reads"]:
        t = Table(title="store: reads (to the leader)")
        for col in ("system", "kind", "clients", "reads/s", "p50 ms", "p99 ms", "×etcd", "errors",
                    "srv cpu", "srv µs/op", "lg cpu"):
            t.add_column(col, justify="left" if col in ("system", "kind") else "right")
        for r in report["results"]["reads"]:
            kind = "linearizable" if r["op"] == "get_linearizable" else "serializable"
            t.add_row(r["label"], kind, str(r["clients"]), _f(r["reads_per_s"], "{:,.0f}"), _f(r["p50_ms"]),
                      _f(r["p99_ms"]), _f(r["ratio_vs_etcd"], "{:.2f}x"), str(r["errors"]),
                      _f(r["servers_cpu"], "{:.2f}"), _f(r["servers_cpu_per_op_us"], "{:,.0f}"),
                      _f(r["loadgen_cpu"], "{:.2f}"))
        parts.append(t)
    fs = report["results"]["fsyncs"]
    if fs:
        t = Table(title=f"fsyncs per committed entry at {report['config']['fsync_level_clients']} clients")
        for col in ("system", "leader", "followers", "leader fsyncs / acknowledged writes"):
            t.add_column(col, justify="left" if col == "system" else "right")
        for label, f in fs.items():
            t.add_row(label, _f(f.get("fsyncs_per_entry"), "{:.3f}"),
                      ", ".join(_f(x["fsyncs_per_entry"], "{:.3f}") for x in f["followers"]),
                      _f(f.get("leader_fsyncs_per_write"), "{:.3f}"))
        parts.append(t)
    fo = report["results"]["failover"]
    if fo:
        t = Table(title=f"kubemu failover: kill -9 the leader -> ms until ... "
                        f"({fo['storeclient_first_write']['n']} trials; {fo['flags']})")
        for col in ("event", "p50 ms", "p99 ms", "min ms", "max ms"):
            t.add_column(col, justify="left" if col == "event" else "right")
        for label, s in (("a survivor says it leads", fo["elected"]),
                         ("first write acknowledged, direct prober", fo["probe_first_write"]),
                         ("first write acknowledged, StoreClient", fo["storeclient_first_write"])):
            t.add_row(label, _f(s["p50_ms"]), _f(s["p99_ms"]), _f(s["min_ms"]), _f(s["max_ms"]))
        t.caption = f"load: {fo['load']}"
        parts.append(t)
    lines = ["×etcd: this row's rate (or p50) / the better etcd row's at the same concurrency; srv cpu: CPU of "
             "the 3 replicas (1.00 = one core), srv µs/op: their CPU per request; lg cpu: the load generator's CPU"]
    lines += [f"target {'met' if x['met'] else 'NOT met'}: {x['target']} ({x['value']:.2f}x)"
              for x in report["targets"]]
    others = [r["other_cpu"] for r in report["results"]["writes"] + report["results"]["reads"]
              if not math.isnan(r.get("other_cpu", math.nan))]
    if others:
        load = report["machine"]["loadavg_start"][0]
        retried = sum(1 for r in report["results"]["writes"] + report["results"]["reads"] if r["attempts"] > 1)
        lines.append(f"other processes on the machine used {min(others):.2f}-{max(others):.2f} cores during the "
                     f"windows kept (median {percentile(others, 50):.2f}; load average {load:.2f} at the start); "
                     f"{retried} levels were measured again because others used > {OTHER_CPU_LIMIT} cores")
    for name, why in report["skipped"].items():
        lines.append(f"{name} skipped: {why}")
    if "pysyncobj" in report["systems"]:
        lines.append("PySyncObj keeps its Raft log in memory and never fsyncs: its writes are not durable. "
                     "'no batching' = appendEntriesUseBatch=False; 'defaults' send entries every 0.1 s.")
    if report.get("no_fsync_vs_pysyncobj"):
        lines.append(f"neither fsyncing, {KUBEMU_NO_FSYNC} / PySyncObj (its faster setting): "
                     + ", ".join(f"{x['ratio']:.2f}x at {x['clients']}" for x in report["no_fsync_vs_pysyncobj"]))
    ref = report["reference_etcd_from_issue"]["writes_per_s"]
    lines.append("etcd reference from the issue (etcd's benchmark tool): "
                 + ", ".join(f"{v:,}/s at {k}" for k, v in ref.items()))
    return Group(*parts, "\n".join(lines))


if __name__ == "__main__":
    if sys.argv[1:2] == ["pysyncobj-replica"]:
        sys.exit(pysyncobj_replica(sys.argv[2:]))
    sys.exit("usage: python -m bench.store pysyncobj-replica --self HOST:PORT --partners A,B --listen ENDPOINT")
