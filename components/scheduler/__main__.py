"""python -m components.scheduler --api ENDPOINT [--wire-credentials FILE] [--backoff-initial S]
[--backoff-max S] [--parallel-binds N] [--volume-bind-timeout S] [--percentage-of-nodes-to-score P]
[--log-level LEVEL]
[--leader-elect[=BOOL]] [--leader-elect-lease-duration D] [--leader-elect-renew-deadline D]
[--leader-elect-retry-period D] [--leader-elect-resource-namespace NS] [--leader-elect-resource-name NAME]"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from components.scheduling.backoff import DEFAULT_INITIAL, DEFAULT_MAX
from components.scheduling.volumebinding import BIND_TIMEOUT
from kubemu import leaderelector
from kubemu._wire_auth import CREDENTIALS_HELP, credentials_flag

from .scheduler import DEFAULT_PARALLEL_BINDS, Scheduler


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m components.scheduler",
                                description="kubemu's scheduler: binds pending pods to nodes")
    p.add_argument("--api", required=True,
                   help="the apiserver's wire endpoint (ipc:// or tcp://), or a comma-separated list of "
                        "them to fail over between")
    p.add_argument("--wire-credentials", type=credentials_flag, metavar="FILE", help=CREDENTIALS_HELP)
    p.add_argument("--backoff-initial", type=float, default=DEFAULT_INITIAL,
                   help=f"seconds a pod waits after its first failed attempt, doubling after each "
                        f"further one (default {DEFAULT_INITIAL:g})")
    p.add_argument("--backoff-max", type=float, default=DEFAULT_MAX,
                   help=f"cap of a pod's backoff, in seconds (default {DEFAULT_MAX:g})")
    p.add_argument("--parallel-binds", type=int, default=DEFAULT_PARALLEL_BINDS,
                   help=f"API writes (binds, status updates) in flight at most "
                        f"(default {DEFAULT_PARALLEL_BINDS})")
    p.add_argument("--volume-bind-timeout", type=float, default=BIND_TIMEOUT, metavar="S",
                   help=f"seconds a pod waits for its claims to be bound on the chosen node before "
                        f"it is tried again (VolumeBinding's bindTimeoutSeconds, default {BIND_TIMEOUT:g})")
    p.add_argument("--percentage-of-nodes-to-score", type=int, default=0, metavar="P",
                   help="share of the nodes (percent) a scheduling cycle looks for feasible ones among, "
                        "in clusters of 100 nodes or more (KubeSchedulerConfiguration's "
                        "percentageOfNodesToScore; default 0: adaptive, 50%% minus 1%% per 125 nodes, "
                        "at least 5%%)")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    leaderelector.add_flags(p, "kube-scheduler")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 < args.backoff_initial <= args.backoff_max:
        parser.error("need 0 < --backoff-initial <= --backoff-max")
    if args.parallel_binds < 1:
        parser.error("--parallel-binds must be at least 1")
    if not args.volume_bind_timeout > 0:
        parser.error("--volume-bind-timeout must be positive")
    if not 0 <= args.percentage_of_nodes_to_score <= 100:
        parser.error("--percentage-of-nodes-to-score must be between 0 and 100")
    election = leaderelector.settings_from(parser, args)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stdout,
                        format="%(asctime)s scheduler[%(process)d] %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(Scheduler(args.api, backoff_initial=args.backoff_initial,
                                     backoff_max=args.backoff_max,
                                     parallel_binds=args.parallel_binds,
                                     credentials=args.wire_credentials,
                                     volume_bind_timeout=args.volume_bind_timeout,
                                     leader_election=election,
                                     percentage_of_nodes_to_score=args.percentage_of_nodes_to_score).run())
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
