"""Jepsen-style tests of the store: concurrent clients against real replica processes while a
nemesis kill -9s, SIGSTOPs and SIGCONTs replicas (the leader included); the recorded history must
be linearizable (tests/store/linearizability.py, unknown outcomes modelled as such). And a paused
old leader must neither serve stale reads nor commit anything after it resumes.

Seeded: the workload and the nemesis schedule come from `random.Random`s derived from one seed
(KUBEMU_JEPSEN_SEED to replay one; it is printed, and named in every failure message).
KUBEMU_JEPSEN_SECONDS sets how long the workload runs (default 20).

How ops are recorded (the checker's verdict must be the only thing a correct store can fail):
    a write (put, delete, cas txn) that succeeded             ok, with its output
    NotLeader / Unavailable (the client's "not executed")     failed: left out of the history
    OutcomeUnknown, a timeout, any other error                unknown: may take effect any time later
    a read that fails in any way                              dropped (tells nothing)
Call and return times come from one clock (time.monotonic), taken right around the client call.
"""
from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field

import pytest

from kubemu import wire
from store.client import SyncStoreClient
from store.mvcc import compare, put_op

from ..conftest import DEADLINE, wait_for
from .cluster import StoreCluster
from .linearizability import History, Inconclusive, check

FAST = {"tick_ms": 20, "election_ticks": 10}  # election timeout 200-400 ms
SECONDS = float(os.environ.get("KUBEMU_JEPSEN_SECONDS", "20"))
WORKERS = 5
KEYS = [b"j/k%d" % i for i in range(4)]  # few keys: the workers' ops conflict
OP_TIMEOUT = 3.0  # a client op's timeout (a write stuck on a paused leader ends as OutcomeUnknown)
MIN_OK_OPS = 300  # the workload runs past SECONDS (up to 3x) until this many ops succeeded
QUEUED, AFTER = 6, 2  # requests sent to a paused old leader before / right after it resumes
MODES = ("running", "stopped", "cut off")  # see _paused_leader_round
REG = b"p/reg"


def _seed() -> int:
    text = os.environ.get("KUBEMU_JEPSEN_SEED")
    return int(text) if text else random.SystemRandom().randrange(1 << 32)


def _value(kv: dict | None) -> bytes | None:
    return None if kv is None else kv["value"]


def _kv_value(resp: dict) -> bytes | None:
    kvs = resp.get("kvs") or []
    return kvs[0]["value"] if kvs else None


# ------------------------------------------------------------------------------ the workload

@dataclass
class Stats:
    ok: Counter = field(default_factory=Counter)  # kind -> acknowledged ops
    unknown: Counter = field(default_factory=Counter)  # kind -> ops with an unknown outcome
    failed: Counter = field(default_factory=Counter)  # kind -> definitely not executed / dropped reads
    errors: Counter = field(default_factory=Counter)  # error class name -> count

    def merge(self, other: Stats) -> None:
        for mine, theirs in ((self.ok, other.ok), (self.unknown, other.unknown), (self.failed, other.failed),
                             (self.errors, other.errors)):
            mine.update(theirs)


class Worker(threading.Thread):
    """One client (its own SyncStoreClient, so its own connections) doing random get / put /
    cas (txn: compare value, or version = 0 for "absent", then put) / delete on KEYS and
    recording every op in the shared History. Some of its reads go through a second client
    that knows only its `home` replica (as a client bound to one node would): those are
    answered by that replica whatever it believes, e.g. a deposed leader that was cut off."""

    def __init__(self, wid: int, endpoints: list[str], home: str, history: History, rng: random.Random,
                 stop: threading.Event):
        super().__init__(name=f"jepsen-worker-{wid}", daemon=True)
        self.wid = wid
        self.endpoints = endpoints
        self.home = home
        self.history = history
        self.rng = rng
        self.stop_event = stop
        self.stats = Stats()
        self.ok_count = 0  # read by the main thread while this one runs (Stats are not, until joined)
        self.seen: dict[bytes, bytes | None] = {}  # the last value this worker saw per key
        self.seq = 0
        self.crash: str | None = None  # a traceback if the worker itself broke (a test bug)

    def run(self) -> None:
        clients: list[SyncStoreClient] = []
        try:
            clients.append(SyncStoreClient(self.endpoints, timeout=OP_TIMEOUT, dial_timeout=0.5))
            clients.append(SyncStoreClient([self.home], timeout=OP_TIMEOUT, dial_timeout=0.5))
            while not self.stop_event.is_set():
                self.one_op(*clients)
        except BaseException:
            self.crash = traceback.format_exc()
        finally:
            for client in clients:
                try:
                    client.close()
                except Exception:
                    pass

    def _new_value(self) -> bytes:
        self.seq += 1
        return b"w%d-%d" % (self.wid, self.seq)  # unique: a read tells which write it saw

    def one_op(self, client: SyncStoreClient, pinned: SyncStoreClient) -> None:
        key = self.rng.choice(KEYS)
        r = self.rng.random()
        if r < 0.45:
            self.get(pinned if self.rng.random() < 0.3 else client, key)
        elif r < 0.75:
            self.write(client, "put", key, self._new_value())
        elif r < 0.95:
            expected = self.seen.get(key)
            if expected is not None and self.rng.random() < 0.15:
                expected = None  # now and then a create-if-absent that is likely to fail
            self.write(client, "cas", key, (expected, self._new_value()))
        else:
            self.write(client, "delete", key, None)

    def get(self, client: SyncStoreClient, key: bytes) -> None:
        call = self.history.call(self.wid, "get", key)
        try:
            kv = client.get(key)
        except wire.WireError as err:
            self.history.failed(call)  # a read that failed tells nothing
            self.stats.failed["get"] += 1
            self.stats.errors[type(err).__name__] += 1
            return
        self.history.ok(call, _value(kv))
        self.stats.ok["get"] += 1
        self.ok_count += 1
        self.seen[key] = _value(kv)

    def write(self, client: SyncStoreClient, kind: str, key: bytes, value) -> None:
        call = self.history.call(self.wid, kind, key, value)
        try:
            if kind == "put":
                client.put(key, value)
                output = None
            elif kind == "delete":
                client.delete(key)
                output = None
            else:
                expected, new = value
                cmp = (compare(key, "version", "=", 0) if expected is None
                       else compare(key, "value", "=", expected))
                output = bool(client.txn([cmp], [put_op(key, new)], [])["succeeded"])
        except wire.OutcomeUnknown as err:  # store.client.OutcomeUnknown and the wire's
            self.history.unknown(call)
            self.stats.unknown[kind] += 1
            self.stats.errors[type(err).__name__] += 1
            return
        except wire.Unavailable as err:  # NotLeader included: definitely not executed
            self.history.failed(call)
            self.stats.failed[kind] += 1
            self.stats.errors[type(err).__name__] += 1
            return
        except wire.WireError as err:  # not expected for these requests: assume the worst
            self.history.unknown(call)
            self.stats.unknown[kind] += 1
            self.stats.errors[type(err).__name__] += 1
            return
        self.history.ok(call, output)
        self.stats.ok[kind] += 1
        self.ok_count += 1
        if kind == "put":
            self.seen[key] = value
        elif kind == "delete":
            self.seen[key] = None
        elif output:
            self.seen[key] = value[1]


# ------------------------------------------------------------------------------ the nemesis

def _cut_off(c: StoreCluster, name: str) -> str:
    """Move `name`'s ipc socket file away: connections made before stay up, but nobody can
    connect to it anew (the peers keep retrying) until `_reconnect`. Returns the moved path."""
    path = c.endpoints[name].removeprefix("ipc://")
    os.rename(path, path + ".cut")
    return path


def _reconnect(path: str) -> None:
    os.rename(path + ".cut", path)


def _pid(c: StoreCluster, name: str) -> int:
    return c.procs[name].pid


class Nemesis(threading.Thread):
    """Faults from a seeded schedule, one at a time, each healed before the next: kill -9 (the
    leader or any replica) and restart after a while; SIGSTOP (often the leader, for longer
    than the election timeout: the others elect, the paused one is cut off as by a partition)
    then SIGCONT; both followers or the leader and a follower paused at once (no quorum for a
    moment); the leader paused, then killed while paused; the leader paused and cut off while
    the others restart and elect, then resumed while still cut off (it believes it leads).
    Only this thread touches the cluster while it runs. `heal()` undoes whatever is in effect."""

    KINDS = {"pause_leader": 4, "kill_leader": 2, "pause_random": 1, "kill_random": 1, "pause_two": 1,
             "pause_then_kill_leader": 1, "cut_off_leader": 1}

    def __init__(self, c: StoreCluster, rng: random.Random, stop: threading.Event):
        super().__init__(name="jepsen-nemesis", daemon=True)
        self.c = c
        self.rng = rng
        self.stop_event = stop
        self.paused: set[str] = set()
        self.dead: set[str] = set()
        self.cut: set[str] = set()  # socket paths moved away (see _cut_off)
        self.leaders: list[tuple[int, str]] = []  # (term, leader) as observed, in order
        self.events: list[str] = []
        self.crash: str | None = None

    # --- observation (never asks a paused or dead replica: that would only wait out a timeout)

    def look(self) -> str | None:
        """The leader of the highest term among the replicas that answer, or None."""
        best: tuple[int, str] | None = None
        for name in self.c.names:
            if name in self.paused or name in self.dead or not self.c.alive(name):
                continue
            st = self.c.status(name, timeout=1.0)
            if st and st["role"] == "leader" and (best is None or st["term"] > best[0]):
                best = (st["term"], name)
        if best is not None and (not self.leaders or self.leaders[-1] != best):
            self.leaders.append(best)
        return best[1] if best else None

    def wait_leader(self, timeout: float = 10.0, exclude: tuple[str, ...] = ()) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leader = self.look()
            if leader is not None and leader not in exclude:
                return leader
            time.sleep(0.05)
        return None  # no verdict here: the history is what is checked

    # --- faults

    def pause(self, name: str) -> None:
        os.kill(_pid(self.c, name), signal.SIGSTOP)
        self.paused.add(name)

    def resume(self, name: str) -> None:
        if name in self.paused:
            if self.c.alive(name):
                os.kill(_pid(self.c, name), signal.SIGCONT)
            self.paused.discard(name)

    def kill(self, name: str) -> None:
        self.dead.add(name)
        self.c.kill(name, signal.SIGKILL)  # works on a stopped process too
        self.paused.discard(name)

    def restart(self, name: str) -> None:
        if name in self.dead:
            self.c.restart(name)
            self.dead.discard(name)

    def heal(self) -> None:
        for path in list(self.cut):
            _reconnect(path)
            self.cut.discard(path)
        for name in list(self.paused):
            self.resume(name)
        for name in list(self.dead):
            self.restart(name)

    def _sleep(self, lo: float, hi: float) -> None:
        time.sleep(self.rng.uniform(lo, hi))

    def _victim(self, leader_first: bool) -> str:
        leader = self.look() if leader_first else None
        return leader or self.rng.choice(self.c.names)

    def act(self, kind: str) -> None:
        if kind in ("pause_leader", "pause_random"):
            victim = self._victim(kind == "pause_leader")
            self.events.append(f"{kind} {victim}")
            self.pause(victim)
            if kind == "pause_leader":
                self.wait_leader(timeout=3.0, exclude=(victim,))  # the others elect meanwhile
            self._sleep(0.3, 1.5)
            self.resume(victim)
        elif kind in ("kill_leader", "kill_random"):
            victim = self._victim(kind == "kill_leader")
            self.events.append(f"{kind} {victim}")
            self.kill(victim)
            self._sleep(0.2, 1.5)
            self.restart(victim)
        elif kind == "pause_two":
            leader = self.look()
            victims = self.rng.sample(self.c.names, 2)
            if leader is not None and leader not in victims and self.rng.random() < 0.5:
                victims[0] = leader
            self.events.append(f"{kind} {'+'.join(victims)}")
            for v in victims:
                self.pause(v)
            self._sleep(0.3, 1.2)
            for v in self.rng.sample(victims, 2):
                self.resume(v)
        elif kind == "pause_then_kill_leader":
            victim = self._victim(True)
            self.events.append(f"{kind} {victim}")
            self.pause(victim)
            self.wait_leader(timeout=3.0, exclude=(victim,))
            self._sleep(0.1, 0.8)
            self.kill(victim)
            self._sleep(0.2, 1.0)
            self.restart(victim)
        elif kind == "cut_off_leader":
            # the leader stopped and unreachable; the others killed and restarted (so no message
            # of the next term waits in its socket): they elect and serve; then it runs again,
            # still cut off, believing it leads (see _paused_leader_round's "cut off")
            victim = self._victim(True)
            others = [n for n in self.c.names if n != victim]
            self.events.append(f"{kind} {victim}")
            self.pause(victim)
            self.cut.add(_cut_off(self.c, victim))
            self.dead.update(others)
            for n in others:
                self.c.kill(n, signal.SIGKILL, wait=False)
            for n in others:
                self.kill(n)
            for n in others:
                self.restart(n)
            self.wait_leader(timeout=10.0, exclude=(victim,))
            self._sleep(0.2, 1.0)
            self.resume(victim)
            self._sleep(0.3, 1.0)
        else:
            raise ValueError(kind)

    def run(self) -> None:
        try:
            self.look()
            kinds, weights = list(self.KINDS), list(self.KINDS.values())
            # the two key faults first, so every seed changes the leader at least twice
            schedule = iter(["pause_leader", "kill_leader"])
            while not self.stop_event.is_set():
                self.wait_leader(timeout=10.0)  # let the cluster recover (and the clients work)
                self._sleep(0.4, 1.5)
                if self.stop_event.is_set():
                    break
                kind = next(schedule, None) or self.rng.choices(kinds, weights)[0]
                try:
                    self.act(kind)
                finally:
                    self.heal()
        except BaseException:
            self.crash = traceback.format_exc()
        finally:
            try:
                self.heal()
            except Exception:
                if self.crash is None:
                    self.crash = traceback.format_exc()


def _sigcont_all(c: StoreCluster) -> None:
    """Every replica process is continued (a stopped one would ignore stop()'s SIGTERM)."""
    for proc in c.procs.values():
        if proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def _converged(c: StoreCluster, keys: list[bytes]):
    """Every replica applied the same log up to the same commit index and holds the same values."""
    sts = c.statuses()
    if len(sts) != len(c.names):
        return False
    applied = {s["applied_index"] for s in sts.values()} | {s["commit_index"] for s in sts.values()}
    if len(applied) != 1:
        return False
    views = {}
    for name in c.names:
        try:
            views[name] = {k: _kv_value(c.call(name, "range", {"key": k, "serializable": True}, timeout=2.0))
                           for k in keys}
        except wire.WireError:
            return False
    first = views[c.names[0]]
    return all(v == first for v in views.values()) and first


def _check(history: History, seed: int, what: str) -> None:
    try:
        ok, info = check(history.ops)
    except Inconclusive as exc:  # not a verdict: say so rather than pass or fail silently
        pytest.fail(f"seed {seed}: the checker could not decide on {what}: {exc}")
    if not ok:
        pytest.fail(f"seed {seed}: {what} is NOT linearizable:\n{info['message']}\n"
                    f"(longest partial linearization: {len(info['linearized'])} ops; "
                    f"register state {info['state']!r}; search steps {info['steps']})")


# ----------------------------------------------------------------------------------- tests

@pytest.fixture
def seed() -> int:
    value = _seed()
    print(f"jepsen seed {value} (KUBEMU_JEPSEN_SEED={value} replays the workload and the schedule)")
    return value


@pytest.fixture
def cluster(state_dir, seed):
    c = StoreCluster(state_dir, n=3, **FAST)
    try:
        yield c
    finally:
        _sigcont_all(c)
        c.stop()


@contextlib.contextmanager
def _diagnosed(c: StoreCluster, seed: int):
    """On any failure inside: print the seed, each replica's process state and its log's end
    (shown with the failure), then let the failure through."""
    try:
        yield
    except BaseException:
        _sigcont_all(c)
        _print_diagnostics(c, seed)
        raise


def _print_diagnostics(c: StoreCluster, seed: int, lines: int = 30) -> None:
    print(f"\n==== FAILED with seed {seed} (KUBEMU_JEPSEN_SEED={seed}); replicas:")
    for name in c.names:
        proc = c.procs.get(name)
        state = "never started" if proc is None else (
            f"pid {proc.pid} running" if proc.poll() is None else f"pid {proc.pid} exited {proc.returncode}")
        tail = "\n    ".join(c.log_text(name).splitlines()[-lines:])
        print(f"-- {name}: {state}; last lines of {c.log_path(name)}:\n    {tail}")


def test_linearizable_under_kills_and_pauses(cluster, seed):
    """Concurrent clients, a nemesis killing and pausing replicas: the history is linearizable."""
    with _diagnosed(cluster, seed):
        _linearizable_under_kills_and_pauses(cluster, seed)


def _linearizable_under_kills_and_pauses(c: StoreCluster, seed: int) -> None:
    c.start()
    first_term = c.status(c.leader())["term"]
    history = History()
    stop_workers, stop_nemesis = threading.Event(), threading.Event()
    eps = list(c.endpoints.values())
    workers = [Worker(i, eps, eps[i % len(eps)], history, random.Random(f"{seed}-worker-{i}"), stop_workers)
               for i in range(WORKERS)]
    nemesis = Nemesis(c, random.Random(f"{seed}-nemesis"), stop_nemesis)
    started = time.monotonic()
    try:
        for w in workers:
            w.start()
        nemesis.start()
        end, cap = started + SECONDS, started + 3 * SECONDS
        while time.monotonic() < cap:
            if not nemesis.is_alive() or any(not w.is_alive() for w in workers):
                break  # something crashed: reported below
            done = sum(w.ok_count for w in workers)
            if time.monotonic() >= end and done >= MIN_OK_OPS:
                break
            time.sleep(0.1)
        stop_nemesis.set()
        nemesis.join(DEADLINE)
        stop_workers.set()
        for w in workers:
            w.join(DEADLINE)
    finally:
        stop_nemesis.set()
        stop_workers.set()
        nemesis.join(DEADLINE)  # heals on its way out
        for w in workers:
            w.join(DEADLINE)
        _sigcont_all(c)
    elapsed = time.monotonic() - started
    assert not nemesis.is_alive() and not any(w.is_alive() for w in workers), f"seed {seed}: a thread hung"
    assert nemesis.crash is None, f"seed {seed}: the nemesis broke:\n{nemesis.crash}"
    for w in workers:
        assert w.crash is None, f"seed {seed}: worker {w.wid} broke:\n{w.crash}"

    # healed (the nemesis restarted whatever it killed): no replica may have died on its own
    crashed = {n: c.procs[n].returncode for n in c.names if not c.alive(n)}
    assert not crashed, f"seed {seed}: replicas exited by themselves (exit codes {crashed})"
    c.leader()
    with SyncStoreClient(list(c.endpoints.values()), timeout=DEADLINE) as client:
        for key in KEYS:
            call = history.call("final", "get", key)
            history.ok(call, _value(client.get(key)))
        last_term = client.status()["term"]
    final = wait_for(lambda: _converged(c, KEYS), message="every replica applied the same log")

    stats = Stats()
    for w in workers:
        stats.merge(w.stats)
    ok_ops = sum(stats.ok.values())
    terms = {t for t, _ in nemesis.leaders}
    summary = (f"seed {seed}: {elapsed:.1f}s, {len(history.ops)} ops recorded; ok {dict(stats.ok)}; "
               f"unknown {dict(stats.unknown)}; failed/dropped {dict(stats.failed)}; errors {dict(stats.errors)}; "
               f"{len(nemesis.events)} faults {nemesis.events}; leaders seen (term, name) {nemesis.leaders}; "
               f"terms {first_term}..{last_term}; final {final}")
    print(summary)

    # non-trivial: many acknowledged reads and writes, and the leader changed
    assert ok_ops >= MIN_OK_OPS, f"only {ok_ops} acknowledged ops: {summary}"
    assert stats.ok["get"] >= 30 and stats.ok["put"] + stats.ok["cas"] >= 30, summary
    assert len(nemesis.events) >= 2, summary
    assert len(terms) >= 2 and last_term > first_term, f"the leader never changed: {summary}"

    t0 = time.monotonic()
    _check(history, seed, f"the history of {len(history.ops)} ops")
    print(f"checked in {time.monotonic() - t0:.2f}s")


def _leader_among(c: StoreCluster, names: list[str], timeout: float = DEADLINE) -> tuple[str, int]:
    """(leader, term) that the replicas `names` (all answering) agree on; asks only them."""
    deadline = time.monotonic() + timeout
    while True:
        sts = {n: c.status(n, timeout=1.0) for n in names}
        leaders = [n for n, s in sts.items() if s and s["role"] == "leader"]
        if len(leaders) == 1 and all(s and s["leader"] == leaders[0] and s["term"] == sts[leaders[0]]["term"]
                                     for s in sts.values()):
            return leaders[0], sts[leaders[0]]["term"]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{names} agreed on no leader within {timeout:g}s: {sts}")
        time.sleep(0.05)


def _acked_put(c: StoreCluster, history: History, names: list[str], key: bytes, make_value) -> bytes:
    """Put fresh values through whichever of `names` leads until one is acknowledged (an attempt
    with an unknown outcome is recorded as such); return the acknowledged value."""
    deadline = time.monotonic() + DEADLINE
    while True:
        leader, _ = _leader_among(c, names)
        value = make_value()
        call = history.call("setup", "put", key, value)
        try:
            c.call(leader, "put", {"key": key, "value": value}, timeout=5.0)
        except wire.OutcomeUnknown:
            history.unknown(call)
        except wire.Unavailable:
            history.failed(call)
        else:
            history.ok(call)
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"no put on {key!r} was acknowledged within {DEADLINE:g}s")
        time.sleep(0.05)


@dataclass
class DirectOp:
    """One request sent straight to the resumed old leader (no leader discovery)."""
    kind: str  # "get" or "put"
    key: bytes
    value: bytes | None
    outcome: str = "?"  # "ok", "rejected" (NotLeader/Unavailable: not executed), "unknown"
    output: bytes | None = None
    error: str = ""


def _direct(client: wire.SyncClient, history: History, op: DirectOp, who: str) -> None:
    call = history.call(who, op.kind, op.key, op.value)
    try:
        if op.kind == "get":
            resp = client.call("range", {"key": op.key}, timeout=10.0)
        else:
            resp = client.call("put", {"key": op.key, "value": op.value}, timeout=10.0)
    except wire.WireError as err:
        op.error = f"{type(err).__name__}: {err}"
        if op.kind == "get":
            op.outcome = "rejected"
            history.failed(call)  # a read that failed tells nothing
        elif isinstance(err, wire.Unavailable) and not isinstance(err, wire.OutcomeUnknown):
            op.outcome = "rejected"
            history.failed(call)
        else:
            op.outcome = "unknown"
            history.unknown(call)
        return
    op.outcome = "ok"
    if op.kind == "get":
        op.output = _kv_value(resp)
        history.ok(call, op.output)
    else:
        history.ok(call)


def test_paused_leader_serves_no_stale_reads_and_commits_nothing(cluster, seed):
    """A leader SIGSTOPped while the others elect and write, then SIGCONTed with requests waiting
    for it: it serves no stale read, and acknowledges no write that does not commit."""
    with _diagnosed(cluster, seed):
        _paused_leader_rounds(cluster, seed)


def _paused_leader_round(c: StoreCluster, history: History, rng: random.Random, seed: int, rnd: int,
                         mode: str, fresh) -> tuple[str, list[DirectOp]]:
    """SIGSTOP the leader L (term T); the two others elect a new leader N (term > T) and
    acknowledge a new value of REG. Requests go straight to L: QUEUED of them while it is still
    stopped (they wait in its socket), AFTER more the instant it is SIGCONTed; reads of REG and
    puts on keys of their own alternate. As L wakes up, the others
        running   keep running: their new-term messages wait in L's socket next to the requests;
        stopped   are SIGSTOPped for 0.3-1 s: L hears nothing new for a while;
        cut off   were killed -9 and restarted while L was stopped, with L's socket file moved
                  away: no new-term message waits for L and nobody can reach it, so L wakes up
                  believing it still leads term T (only its quorum checks can tell it otherwise),
                  until the socket is moved back 0.3-1 s later.
    Returns a description of the round and the direct requests (with their outcomes)."""
    old = c.leader()
    others = [n for n in c.names if n != old]
    old_term = c.status(old)["term"]
    v_old = _acked_put(c, history, c.names, REG, fresh)
    ops = [DirectOp("get", REG, None) if i % 2 == 0 else DirectOp("put", b"p/%d/%d" % (rnd, i), b"L%d-%d" % (rnd, i))
           for i in range(QUEUED + AFTER)]
    direct = [wire.SyncClient(c.endpoints[old], timeout=10.0) for _ in ops]
    threads = [threading.Thread(target=_direct, args=(cl, history, o, f"L{i}"), daemon=True)
               for i, (cl, o) in enumerate(zip(direct, ops))]
    cut = None
    try:
        for cl in direct:
            cl.call("status", {})  # connected now, while L answers (these stay up when cut off)
        os.kill(_pid(c, old), signal.SIGSTOP)
        try:
            if mode == "cut off":
                cut = _cut_off(c, old)
                for n in others:  # at once, before either can campaign (and tell L)
                    c.kill(n, signal.SIGKILL, wait=False)
                for n in others:
                    c.kill(n)
                for n in others:
                    c.restart(n)
            new, new_term = _leader_among(c, others)
            assert new_term > old_term, f"seed {seed}: {new} leads term {new_term} <= {old_term}"
            v_new = _acked_put(c, history, others, REG, fresh)
            call = history.call("check", "get", REG)  # a linearizable read through the new leader
            history.ok(call, _kv_value(c.call(new, "range", {"key": REG}, timeout=10.0)))
            for th in threads[:QUEUED]:
                th.start()
            time.sleep(rng.uniform(0.05, 0.2))  # sent: waiting in L's socket
            if mode == "stopped":
                for n in others:
                    os.kill(_pid(c, n), signal.SIGSTOP)
        finally:
            os.kill(_pid(c, old), signal.SIGCONT)
            try:
                for th in threads[QUEUED:]:
                    th.start()
                if mode != "running":
                    time.sleep(rng.uniform(0.3, 1.0))  # longer than an election timeout
            finally:
                for n in others:
                    if c.alive(n):
                        os.kill(_pid(c, n), signal.SIGCONT)
                if cut is not None:
                    _reconnect(cut)
                    cut = None
        for th in threads:
            th.join(DEADLINE)
        assert not any(th.is_alive() for th in threads), f"seed {seed}: a direct request hung"
    finally:
        if cut is not None:
            _reconnect(cut)
        for cl in direct:
            cl.close()
    text = (f"round {rnd} ({mode}): {old} paused in term {old_term}, {new} leads term {new_term}; "
            f"{v_old!r} -> {v_new!r}; straight to {old}: "
            + "; ".join(f"{o.kind} {o.key.decode()} {o.outcome}"
                        + (f" {o.output!r}" if o.kind == "get" and o.outcome == "ok" else "")
                        + (f" ({o.error[:60]})" if o.error else "") for o in ops))
    for o in ops:
        if o.kind == "get" and o.outcome == "ok":
            assert o.output != v_old, (f"seed {seed}: STALE READ: {old}, resumed, answered {o.output!r} after "
                                       f"{new} acknowledged {v_new!r}\n{text}")
    return text, ops


def _paused_leader_rounds(c: StoreCluster, seed: int) -> None:
    rng = random.Random(f"{seed}-paused")
    c.start()
    history = History()
    counter = iter(range(1_000_000))
    fresh = lambda: b"v%d" % next(counter)  # noqa: E731
    report: list[str] = []
    direct_writes: list[tuple[int, DirectOp]] = []
    outcomes: Counter = Counter()
    unknown_puts: Counter = Counter()
    for rnd, mode in enumerate(MODES * 2):
        text, ops = _paused_leader_round(c, history, rng, seed, rnd, mode, fresh)
        report.append(text)
        direct_writes += [(rnd, o) for o in ops if o.kind == "put"]
        outcomes.update(f"{mode}: {o.kind} {o.outcome}" + (f" ({o.error.split(':')[0]})" if o.error else "")
                        for o in ops)
        c.leader()  # everyone agrees on a leader again before the next round
    print("\n".join(report))
    print(f"requests straight to resumed old leaders: {dict(sorted(outcomes.items()))}")

    # only now, long after: a put a resumed old leader acknowledged is there, one it rejected is not
    with SyncStoreClient(list(c.endpoints.values()), timeout=DEADLINE) as client:
        for rnd, o in direct_writes:
            call = history.call("final", "get", o.key)
            got = _value(client.get(o.key))
            history.ok(call, got)
            if o.outcome == "ok":
                assert got == o.value, (f"seed {seed}: round {rnd}: a resumed old leader acknowledged a put of "
                                        f"{o.value!r} that did not commit (read {got!r})\n" + "\n".join(report))
            elif o.outcome == "rejected":
                assert got is None, (f"seed {seed}: round {rnd}: a resumed old leader rejected a put "
                                     f"({o.error}) that took effect anyway (read {got!r})\n" + "\n".join(report))
            else:
                unknown_puts["applied" if got == o.value else "not applied"] += 1
        call = history.call("final", "get", REG)
        history.ok(call, _value(client.get(REG)))
    print(f"their puts with an unknown outcome, in the end: {dict(unknown_puts)}")
    keys = [REG] + [o.key for _, o in direct_writes]
    wait_for(lambda: _converged(c, keys), message="every replica applied the same log")
    _check(history, seed, f"the paused-leader history of {len(history.ops)} ops")
