"""python -m kubelet --node NAME --node-dir DIR

PLACEHOLDER AGENT (until the kubelet issue lands): it does what init needs from a
Type=notify service and nothing more - READY=1, WATCHDOG=1 pings at half of WatchdogSec,
STOPPING=1 on SIGTERM - and logs a heartbeat. It runs no pods yet."""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from kubemu.sdnotify import notify, watchdog_interval


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubelet")
    parser.add_argument("--node", required=True)
    parser.add_argument("--node-dir", required=True)
    args, _unknown = parser.parse_known_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(f"kubelet (placeholder agent) for node {args.node} starting", flush=True)
    notify(f"READY=1\nSTATUS=placeholder agent for {args.node}, no pods yet")
    interval = watchdog_interval() or 10.0
    while not stop.wait(interval):
        notify("WATCHDOG=1")
    notify("STOPPING=1")
    print(f"kubelet for node {args.node} stopping at {time.strftime('%H:%M:%S')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
