"""python -m store --name store-0 --data-dir DIR --listen ENDPOINT --peers store-0=EP,store-1=EP,...

One replica of the store (the etcd analog). See `store.server` for what it does; in short:
bootstrap a fresh cluster by starting every member of --peers with an empty data directory;
restart a member with its data directory; add a member (after `member_add`) or bring back a
member whose data directory was lost by starting it with --join. Logs go to stdout.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from ._peers import peer_credentials
from .server import Options, Replica, parse_peers, parse_retention


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def _seconds(text: str) -> float:
    value = float(text.rstrip("s"))
    if value <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m store", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", required=True, help="this replica's name (must appear in --peers)")
    p.add_argument("--data-dir", required=True, help="directory of the replica's LevelDB")
    p.add_argument("--listen", required=True, help="wire endpoint for clients and peers (ipc:// or tcp://)")
    p.add_argument("--peers", required=True, type=parse_peers,
                   help="every member as NAME=ENDPOINT, comma-separated (this one included)")
    p.add_argument("--tick-ms", type=_positive_int, default=100, help="Raft tick interval (default 100)")
    p.add_argument("--election-ticks", type=_positive_int, default=10,
                   help="election timeout in ticks, randomized in [n, 2n) (default 10)")
    p.add_argument("--heartbeat-ticks", type=_positive_int, default=1, help="heartbeat interval in ticks (default 1)")
    p.add_argument("--snapshot-count", type=_positive_int, default=100_000,
                   help="applied entries between Raft log compactions (default 100000, as etcd)")
    p.add_argument("--auto-compaction-retention", type=parse_retention, default=parse_retention("300s"),
                   metavar="DURATION|REVISIONS",
                   help="keep this much MVCC history: 300s/5m/1h (periodic), 10000 (revisions), 0 (off); "
                        "default 300s")
    p.add_argument("--join", action="store_true",
                   help="with an empty data directory: join the existing cluster (learn the log from its "
                        "leader) instead of bootstrapping a new one")
    p.add_argument("--request-timeout", type=_seconds, default=5.0,
                   help="seconds a write may take to apply, or a read to get its read index (default 5)")
    p.add_argument("--unsafe-no-fsync", action="store_true",
                   help="never fsync the Raft log (as etcd's flag: a machine crash loses acknowledged "
                        "writes); for measuring what the fsyncs cost")
    p.add_argument("--wire-secrets", metavar="DIR",
                   help="require wire credentials checked against DIR/<identity>.secret; peers present "
                        "system:store:<name> (its secret must be in DIR) and only members may send Raft messages")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        opts = Options(name=args.name, data_dir=args.data_dir, listen=args.listen, peers=args.peers,
                       tick_ms=args.tick_ms, election_ticks=args.election_ticks,
                       heartbeat_ticks=args.heartbeat_ticks, snapshot_count=args.snapshot_count,
                       retention=args.auto_compaction_retention, join=args.join,
                       request_timeout=args.request_timeout, unsafe_no_fsync=args.unsafe_no_fsync,
                       wire_secrets=args.wire_secrets)
        if opts.wire_secrets:
            peer_credentials(opts.name, opts.wire_secrets)  # this replica's own secret must be there
    except ValueError as exc:
        parser.error(str(exc))
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stdout,
                        format=f"%(asctime)s {args.name}[%(process)d] %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(Replica(opts).run())
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # e.g. the data directory is locked by another replica
        logging.getLogger("store").critical("cannot run: %s", exc, exc_info=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
