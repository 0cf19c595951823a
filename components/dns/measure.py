"""How fast the cluster DNS answers, beside a floor: the simplest server dnspython makes (a
blocking loop: receive, parse, answer one A record, send), which the component, with its view,
cache and asyncio, should at least match. For `kubemu bench service`, and by hand:

    python -m components.dns.measure [--server HOST:PORT --name NAME] [--seconds S]

prints the zone's answers/s in process (parse, answer, encode: no socket, no cache), and the q/s
over UDP of the floor on 127.0.0.1 and, with --server, of a running DNS component asked NAME. The
client keeps WINDOW queries in flight on one socket and only matches reply ids, so it costs the
server's side little; client and server share the machine's cores."""
from __future__ import annotations

import argparse
import os
import random
import socket
import struct
import subprocess
import sys
import time

import dns.message
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from . import zone

WINDOW = 32          # queries in flight
FIRST_ANSWER_TIMEOUT = 30.0
FLOOR_ADDRESS = "10.96.0.1"


def sample_view(services: int = 100) -> zone.ClusterView:
    """A view of `services` ClusterIP Services, each with 3 ready endpoints, in `default`."""
    svcs, slices = [], []
    for i in range(services):
        name = f"svc-{i}"
        svcs.append({"metadata": {"namespace": "default", "name": name},
                     "spec": {"clusterIP": f"10.96.{i // 250}.{i % 250 + 2}",
                              "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}})
        slices.append({"metadata": {"namespace": "default", "name": f"{name}-x",
                                    "labels": {zone.SERVICE_NAME_LABEL: name}},
                       "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                       "endpoints": [{"addresses": [f"10.244.{j}.{i % 250 + 2}"], "conditions": {"ready": True}}
                                     for j in range(3)]})
    return zone.build_view(zone.DEFAULT_DOMAIN, svcs, slices, ["default"])


def zone_answers_per_second(seconds: float = 2.0, view: zone.ClusterView | None = None,
                            name: str = "svc-7.default.svc.cluster.local") -> float:
    """zone.respond (parse, answer, encode) calls per second on one query, in this process."""
    view = view or sample_view()
    wire = dns.message.make_query(name, "A").to_wire()
    if zone.respond(wire, view).problem:
        raise ValueError(f"{name} is not answered normally")
    done, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(100):
            zone.respond(wire, view)
        done += 100
        now = time.perf_counter()
        if now >= deadline:
            return done / (now - start)


def udp_queries_per_second(host: str, port: int, name: str, seconds: float = 2.0,
                           window: int = WINDOW, vary_case: bool = False) -> tuple[float, int]:
    """Answers per second from the server at host:port to A queries for `name`, with `window`
    queries in flight, and how many of the answers were not NOERROR: from the first answer for
    `seconds`, and at least one more answer. A query unanswered for a second is replaced (UDP may
    drop it); TimeoutError if the server does not answer at all. `vary_case` spells the name in a
    random case each time (as resolvers using 0x20 encoding do): the same question in new bytes,
    which no answer cache keyed by the query's bytes has seen."""
    base = bytearray(dns.message.make_query(name, "A").to_wire())
    letters = [i for i in range(12, len(base) - 4) if chr(base[i]).isalpha()] if vary_case else []
    rng = random.Random(0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((host, port))
        s.setblocking(True)
        sent: set[int] = set()   # ids in flight
        next_id, answered, errors = 0, 0, 0

        def send() -> None:
            nonlocal next_id
            next_id = (next_id + 1) & 0xFFFF
            struct.pack_into("!H", base, 0, next_id)
            if letters:
                bits = rng.getrandbits(len(letters))
                for k, i in enumerate(letters):
                    base[i] = base[i] & 0xDF if bits >> k & 1 else base[i] | 0x20
            s.send(base)
            sent.add(next_id)

        for _ in range(window):
            send()
        s.settimeout(FIRST_ANSWER_TIMEOUT)   # the clock starts at the first answer (a warm server)
        try:
            reply = s.recv(65535)
        except socket.timeout:
            raise TimeoutError(f"no answer from {host}:{port} in {FIRST_ANSWER_TIMEOUT:g}s") from None
        sent.discard(struct.unpack_from("!H", reply)[0])
        send()
        start = time.perf_counter()
        deadline = start + seconds
        s.settimeout(1.0)
        last_answer = start
        while True:
            now = time.perf_counter()
            if now >= deadline and answered:
                return answered / (now - start), errors
            if now - last_answer > FIRST_ANSWER_TIMEOUT:
                raise TimeoutError(f"{host}:{port} stopped answering")
            try:
                reply = s.recv(65535)
            except socket.timeout:
                sent.clear()
                for _ in range(window):
                    send()
                continue
            qid = struct.unpack_from("!H", reply)[0] if len(reply) >= 12 else -1
            if qid not in sent:
                continue
            sent.discard(qid)
            answered += 1
            last_answer = time.perf_counter()
            if reply[3] & 0x0F != dns.rcode.NOERROR:
                errors += 1
            send()


def serve_floor(host: str, port: int) -> None:
    """The floor: dnspython's plainest server loop, one A record for any question, forever."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, port))
        print(s.getsockname()[1], flush=True)
        while True:
            wire, peer = s.recvfrom(65535)
            try:
                query = dns.message.from_wire(wire)
            except Exception:  # noqa: BLE001  (the floor answers good queries only)
                continue
            response = dns.message.make_response(query)
            q = query.question[0]
            response.answer.append(dns.rrset.from_text(q.name, 5, dns.rdataclass.IN, dns.rdatatype.A,
                                                       FLOOR_ADDRESS))
            s.sendto(response.to_wire(), peer)


def floor_queries_per_second(seconds: float = 2.0, name: str = "svc-7.default.svc.cluster.local") -> float:
    """q/s of the floor server, run as its own process on 127.0.0.1, with the same client."""
    proc = subprocess.Popen([sys.executable, "-m", "components.dns.measure", "--serve-floor"],
                            stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            env=dict(os.environ))
    try:
        port = int(proc.stdout.readline())
        return udp_queries_per_second("127.0.0.1", port, name, seconds)[0]
    finally:
        proc.terminate()
        proc.wait()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        return host, int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT") from None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m components.dns.measure", description=__doc__.split("\n\n")[0])
    p.add_argument("--server", type=_address, metavar="HOST:PORT", help="a running DNS component to load")
    p.add_argument("--name", default="kubernetes.default.svc.cluster.local", help="the name --server is asked")
    p.add_argument("--seconds", type=float, default=3.0, help="length of each measurement (default 3)")
    p.add_argument("--serve-floor", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_floor:
        try:
            serve_floor("127.0.0.1", 0)
        except KeyboardInterrupt:
            pass
        return 0
    print(f"zone answers/s in process: {zone_answers_per_second(args.seconds):.0f}")
    print(f"floor (dnspython loop) q/s over UDP: {floor_queries_per_second(args.seconds):.0f}")
    if args.server:
        for vary, what in ((False, "one spelling, answered from its cache"), (True, "a new spelling each time")):
            rate, errors = udp_queries_per_second(*args.server, args.name, args.seconds, vary_case=vary)
            print(f"DNS component q/s over UDP, {what}: {rate:.0f}"
                  + (f" ({errors} answers not NOERROR)" if errors else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
