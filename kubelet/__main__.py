"""python -m kubelet --node NAME --node-dir DIR [--manifests DIR] [...]: the node agent.

Started by init as kubelet.service (Type=notify): READY=1 once its static pods are being
synced, WATCHDOG=1 while its loop is healthy. Runs the static pods of its manifest directory
(how the control plane boots itself); its containers live under shims and survive it."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from .agent import Kubelet, Options
from .podworker import Settings


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kubelet", description=__doc__.split("\n\n")[0])
    p.add_argument("--node", required=True, help="the node's name")
    p.add_argument("--node-dir", required=True, help="the node's directory (pods/, events.jsonl)")
    p.add_argument("--manifests", help="static pod manifest directory (default: NODE_DIR/manifests)")
    p.add_argument("--file-check-frequency", type=float, default=20.0,
                   help="seconds between full re-lists of the manifest directory (default 20)")
    p.add_argument("--backoff-initial", type=float, default=10.0, help="CrashLoopBackOff's first delay (10 s)")
    p.add_argument("--backoff-max", type=float, default=300.0, help="CrashLoopBackOff's cap (300 s)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="multiply every pod timing (backoff, probes, grace periods) by this")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s kubelet[%(process)d] %(levelname)s: %(message)s")
    node_dir = os.path.abspath(args.node_dir)
    opts = Options(node=args.node, node_dir=node_dir,
                   manifests_dir=os.path.abspath(args.manifests or os.path.join(node_dir, "manifests")),
                   file_check_frequency=args.file_check_frequency,
                   settings=Settings(backoff_initial=args.backoff_initial, backoff_max=args.backoff_max,
                                     time_scale=args.time_scale))
    asyncio.run(Kubelet(opts).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
