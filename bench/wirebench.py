"""`kubemu bench wire`: kubemu's wire beside raw pyzmq, over ipc:// in a temp dir, in one run.

A server process and this process (the client), 64-byte payloads:

- round trip: one call at a time for a fixed window. kubemu: `wire.Client.call("echo")`
  (asyncio, msgpack envelope, ROUTER/DEALER) to a `wire.Server` with a plain-def handler;
  floor: a blocking pyzmq REQ socket to a REP socket that echoes the bytes.
- one-way msgs/s: the server pushes N messages as fast as it can, the client reads them all.
  kubemu: a server-push stream (an async generator handler yielding N items; the client
  `async for`s over `wire.Client.stream`); floor: a PUSH socket to a blocking PULL socket.
  The clock runs from the request to the last message; each flood runs several times.
- kubemu's wire runs twice: as is, and authenticated (the server requires PLAIN credentials
  checked by its ZAP responder, `kubemu._wire_auth`; the client presents them). Its round
  trips also report the CPU both processes spent per call.

The server runs as `python -m bench.wirebench serve kubemu|kubemu-auth|zmq DIR`.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import zmq

from .machine import machine_with_load
from .stats import percentile, summary

PAYLOAD = b"x" * 64
BINS = 50  # of a flood's time series
IDENTITY = "kubemu-bench"
KUBEMU_KINDS = ("kubemu", "kubemu-auth")


def endpoints(directory: Path) -> dict[str, str]:
    return {"kubemu": f"ipc://{directory}/kubemu.sock", "kubemu-auth": f"ipc://{directory}/kubemu.sock",
            "rep": f"ipc://{directory}/rep.sock", "push": f"ipc://{directory}/push.sock"}


def _secrets(directory: Path) -> Path:
    return directory / "wire"


# ----------------------------------------------------------------------------- the servers

async def _serve_kubemu(endpoint: str, secrets: Path | None) -> None:
    from kubemu import wire

    def echo(data: bytes) -> bytes:
        return data

    async def flood(n: int, data: bytes):
        for _ in range(n):
            yield data

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    auth = wire.ServerAuth(secrets) if secrets is not None else None
    async with wire.Server(endpoint, {"echo": echo, "flood": flood}, auth=auth):
        await stop.wait()


def _serve_zmq(eps: dict[str, str]) -> None:
    ctx = zmq.Context()
    rep, push = ctx.socket(zmq.REP), ctx.socket(zmq.PUSH)
    rep.bind(eps["rep"])
    push.bind(eps["push"])
    while True:
        msg = rep.recv()
        if msg.startswith(b"flood:"):
            rep.send(b"ok")
            for _ in range(int(msg[6:])):
                push.send(PAYLOAD)
        else:
            rep.send(msg)


def serve(kind: str, directory: Path) -> None:
    if kind in KUBEMU_KINDS:
        secrets = _secrets(directory) if kind == "kubemu-auth" else None
        asyncio.run(_serve_kubemu(endpoints(directory)[kind], secrets))
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        _serve_zmq(endpoints(directory))


def start_server(kind: str, directory: Path) -> subprocess.Popen:
    env = dict(os.environ, KUBEMU_STATE_DIR=str(directory))
    return subprocess.Popen([sys.executable, "-m", "bench.wirebench", "serve", kind, str(directory)], env=env,
                            cwd=str(Path(__file__).parent.parent), stdin=subprocess.DEVNULL,
                            start_new_session=True)


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------------------ the clients

def _timeline(arrivals: list[float], start: float) -> dict:
    """Messages received per bin from `start` to the last arrival, in BINS equal bins."""
    width = (arrivals[-1] - start) / BINS
    counts = [0] * BINS
    for at in arrivals:
        counts[min(BINS - 1, int((at - start) / width))] += 1
    return {"bin_s": width, "counts": counts}


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


async def _kubemu_client(endpoint: str, seconds: float, flood_n: int, floods: int, server_pid: int,
                         credentials=None) -> tuple[list, list, dict, float]:
    from kubemu import wire

    server, me = psutil.Process(server_pid), psutil.Process()
    async with wire.Client(endpoint, timeout=30, credentials=credentials) as client:
        await client.call("echo", {"data": PAYLOAD}, idempotent=True)  # connected, server up
        rtts = []
        cpu0 = _cpu(server) + _cpu(me)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            await client.call("echo", {"data": PAYLOAD})
            rtts.append(time.perf_counter() - t0)
        cpu_per_call = (_cpu(server) + _cpu(me) - cpu0) / len(rtts)
        rates, timeline = [], {}
        for _ in range(floods):
            arrivals = []
            t0 = time.perf_counter()
            async for _item in client.stream("flood", {"n": flood_n, "data": PAYLOAD}):
                arrivals.append(time.perf_counter())
            rates.append(flood_n / (arrivals[-1] - t0))
            timeline = _timeline(arrivals, t0)
    return rtts, rates, timeline, cpu_per_call


def _zmq_client(eps: dict[str, str], seconds: float, flood_n: int, floods: int) -> tuple[list, list, list]:
    ctx = zmq.Context()
    req, pull = ctx.socket(zmq.REQ), ctx.socket(zmq.PULL)
    try:
        req.connect(eps["rep"])
        pull.connect(eps["push"])
        req.send(PAYLOAD)
        req.recv()  # the server is up
        rtts = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            req.send(PAYLOAD)
            req.recv()
            rtts.append(time.perf_counter() - t0)
        rates, timeline = [], {}
        for _ in range(floods):
            arrivals = []
            t0 = time.perf_counter()
            req.send(b"flood:%d" % flood_n)
            req.recv()
            for _ in range(flood_n):
                pull.recv()
                arrivals.append(time.perf_counter())
            rates.append(flood_n / (arrivals[-1] - t0))
            timeline = _timeline(arrivals, t0)
        return rtts, rates, timeline
    finally:
        ctx.destroy(linger=0)


def _rtt_row(samples: list[float]) -> dict:
    ms = [s * 1000 for s in samples]
    return dict(summary(ms), unit="ms", cdf_ms=[percentile(ms, p) for p in range(1, 101)])


def _rate_row(rates: list[float], timeline: dict) -> dict:
    return dict(summary(rates), unit="msgs/s", runs=rates, last_flood_timeline=timeline)


def run(quick: bool = False, kills: int | None = None, progress_factory=None, workdir: Path | None = None,
        seconds: float | None = None, flood_n: int | None = None, floods: int | None = None) -> dict:
    """`seconds` of round trips per system (default 5, 1 with quick); `floods` one-way floods of
    `flood_n` messages each (default 5 x 50,000; 3 x 20,000 with quick)."""
    del kills  # no kills here: one CLI signature for every suite
    seconds = seconds or (1.0 if quick else 5.0)
    flood_n = flood_n or (20_000 if quick else 50_000)
    floods = floods or (3 if quick else 5)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="kbw", dir=workdir) as tmp:
        directory = Path(tmp)
        eps = endpoints(directory)
        from kubemu import _wire_auth

        credentials = _wire_auth.load_credentials(_wire_auth.ensure_secret(_secrets(directory), IDENTITY))
        for kind, label in (("zmq", "pyzmq REQ/REP + PUSH/PULL (floor)"), ("kubemu", "kubemu wire"),
                            ("kubemu-auth", "kubemu wire, authenticated")):
            tick = progress_factory(label, 1) if progress_factory else None
            server = start_server(kind, directory)
            cpu = None
            try:
                if kind in KUBEMU_KINDS:
                    rtts, rates, timeline, cpu = asyncio.run(_kubemu_client(
                        eps[kind], seconds, flood_n, floods, server.pid,
                        credentials if kind == "kubemu-auth" else None))
                else:
                    rtts, rates, timeline = _zmq_client(eps, seconds, flood_n, floods)
            finally:
                stop_server(server)
            results[kind] = {"round_trip": _rtt_row(rtts), "one_way": _rate_row(rates, timeline)}
            if cpu is not None:
                results[kind]["round_trip"]["cpu_us_per_call"] = cpu * 1e6
            if tick:
                tick()
    floor, kubemu, auth = results["zmq"], results["kubemu"], results["kubemu-auth"]
    ratios = {"round_trip_p50_to_floor": kubemu["round_trip"]["p50"] / floor["round_trip"]["p50"],
              "round_trip_p99_to_floor": kubemu["round_trip"]["p99"] / floor["round_trip"]["p99"],
              "one_way_rate_to_floor": kubemu["one_way"]["p50"] / floor["one_way"]["p50"],
              "auth_round_trip_p50_to_kubemu": auth["round_trip"]["p50"] / kubemu["round_trip"]["p50"],
              "auth_cpu_per_call_to_kubemu": (auth["round_trip"]["cpu_us_per_call"]
                                              / kubemu["round_trip"]["cpu_us_per_call"])}
    return {"suite": "wire", "machine": machine_with_load(), "results": results, "ratios": ratios,
            "config": {"transport": "ipc:// in a temp dir", "payload_bytes": len(PAYLOAD), "round_trip_seconds": seconds,
                       "flood_messages": flood_n, "floods": floods, "one_way_figure": "median of the floods"}}


def table(report: dict):
    from rich.table import Table

    from .tables import machine_line, number

    res, ratios = report["results"], report["ratios"]
    t = Table(title=f"wire: ipc://, {report['config']['payload_bytes']}-byte payloads "
                    f"({machine_line(report['machine'])})")
    for col in ("", "RTT p50 us", "RTT p99 us", "round trips", "CPU us/call", "one-way msgs/s", "min - max"):
        t.add_column(col, justify="left" if not col else "right")
    for kind, label in (("zmq", "floor: pyzmq"), ("kubemu", "kubemu wire"),
                        ("kubemu-auth", "kubemu wire, authenticated")):
        if kind not in res:
            continue  # a report from before the authenticated row
        rt, ow = res[kind]["round_trip"], res[kind]["one_way"]
        cpu = rt.get("cpu_us_per_call")
        t.add_row(label, number(rt["p50"] * 1000, "{:.0f}"), number(rt["p99"] * 1000, "{:.0f}"), str(rt["n"]),
                  "" if cpu is None else number(cpu, "{:.0f}"),
                  number(ow["p50"], "{:,.0f}"), f"{ow['min']:,.0f} - {ow['max']:,.0f}")
    t.caption = ("round trip: one call at a time (floor: REQ/REP); CPU: both processes' per round trip; "
                 "authenticated: PLAIN credentials checked at the handshake; one-way: the median of the floods "
                 "(floor: PUSH/PULL; kubemu: a server-push stream)")
    t.add_row("kubemu / floor", number(ratios["round_trip_p50_to_floor"], "{:.2f}x"),
              number(ratios["round_trip_p99_to_floor"], "{:.2f}x"), "", "",
              number(ratios["one_way_rate_to_floor"], "{:.2f}x"), "")
    return t


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "serve" or sys.argv[2] not in (*KUBEMU_KINDS, "zmq"):
        sys.exit("usage: python -m bench.wirebench serve kubemu|kubemu-auth|zmq DIR")
    serve(sys.argv[2], Path(sys.argv[3]))
