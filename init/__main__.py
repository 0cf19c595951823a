"""python -m init --node-dir DIR [--units DIR] [--node NAME]: supervise the units of one node."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from .supervisor import Supervisor


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m init", description=__doc__)
    parser.add_argument("--node-dir", required=True, help="the node's directory (sockets, logs)")
    parser.add_argument("--units", help="unit file directory (default: NODE_DIR/units)")
    parser.add_argument("--node", help="node name (default: the node directory's name)")
    args = parser.parse_args(argv)
    node_dir = os.path.abspath(args.node_dir)
    os.makedirs(os.path.join(node_dir, "logs"), mode=0o700, exist_ok=True)
    os.chmod(node_dir, 0o700)
    handlers: list[logging.Handler] = [logging.FileHandler(os.path.join(node_dir, "logs", "init.log"))]
    if sys.stderr.isatty():
        handlers.append(logging.StreamHandler())
    logging.basicConfig(level=logging.INFO, handlers=handlers,
                        format="%(asctime)s init[%(process)d] %(levelname)s %(name)s: %(message)s")
    pidfile = os.path.join(node_dir, "init.pid")
    with open(pidfile, "w") as f:
        f.write(f"{os.getpid()}\n")
    try:
        sup = Supervisor(node_dir, args.units or os.path.join(node_dir, "units"),
                         args.node or os.path.basename(node_dir))
        asyncio.run(sup.run())
    finally:
        try:
            os.unlink(pidfile)
        except FileNotFoundError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
