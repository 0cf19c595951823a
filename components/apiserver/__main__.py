"""python -m components.apiserver --listen ENDPOINT --store-endpoints EP1,EP2,EP3 [--audit-log FILE]"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from .handlers import BOOKMARK_INTERVAL
from .server import APIServer


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m components.apiserver",
                                description="kubemu's apiserver: the only door to the store")
    p.add_argument("--listen", required=True, help="wire endpoint to serve on (ipc:// or tcp://)")
    p.add_argument("--store-endpoints", required=True, help="the store replicas' endpoints, comma-separated")
    p.add_argument("--audit-log", default=None, help="append one JSON line per mutating request to FILE")
    p.add_argument("--bookmark-interval", type=float, default=BOOKMARK_INTERVAL,
                   help=f"seconds between BOOKMARK events on idle watches that ask for them "
                        f"(default {BOOKMARK_INTERVAL:g})")
    p.add_argument("--state-dir", default=os.environ.get("KUBEMU_STATE_DIR"),
                   help="the cluster's state directory, where the kubelets keep pod logs "
                        "(default $KUBEMU_STATE_DIR); without it the log subresource is unavailable")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stdout,
                        format="%(asctime)s apiserver[%(process)d] %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(APIServer(args.listen, args.store_endpoints, audit_log=args.audit_log,
                                     bookmark_interval=args.bookmark_interval, state_dir=args.state_dir).run())
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
