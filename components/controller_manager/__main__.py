"""python -m components.controller_manager --api ENDPOINT [--controllers replicaset,...]
                                           [--root-ca-file PEM]
                                           [--allocate-node-cidrs --cluster-cidr CIDR
                                            [--node-cidr-mask-size N]
                                             [--service-cluster-ip-range CIDR]]
                                           [--max-endpoints-per-slice N]
                                           [--endpoint-updates-batch-period SECONDS]
                                           [--endpointslice-updates-batch-period SECONDS]
                                           [--leader-elect[=BOOL]] [--leader-elect-lease-duration D]
                                           [--leader-elect-renew-deadline D] [--leader-elect-retry-period D]
                                           [--leader-elect-resource-namespace NS]
                                           [--leader-elect-resource-name NAME]"""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from components.controllers.endpointslice import DEFAULT_MAX_PER_SLICE, MAX_PER_SLICE_LIMIT
from components.controllers.nodeipam import DEFAULT_NODE_MASK, NodeIPAMSettings
from components.controllers.csrsigning import DEFAULT_DURATION as DEFAULT_SIGNING_DURATION
from components.controllers.nodelifecycle import NodeLifecycleSettings
from kubemu import leaderelector
from kubemu._wire_auth import CREDENTIALS_HELP, credentials_flag

from .app import CONTROLLERS, Config, run

_DEFAULTS = NodeLifecycleSettings()


def _controllers(text: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in CONTROLLERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown controller(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {','.join(CONTROLLERS)}")
    return names


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _endpoints_per_slice(text: str) -> int:
    value = _positive_int(text)
    if value > MAX_PER_SLICE_LIMIT:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_PER_SLICE_LIMIT}")
    return value


def _seconds(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def _positive_seconds(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m components.controller_manager",
                                description="kubemu's controller-manager: the ReplicaSet, "
                                            "Deployment, node lifecycle, node IPAM, garbage "
                                            "collector, namespace, ServiceAccount, root CA "
                                            "publisher, Endpoints and EndpointSlice "
                                            "controllers")
    p.add_argument("--api", required=True, metavar="ENDPOINT",
                   help="the apiserver's wire endpoint (ipc:// or tcp://), or a comma-separated list of "
                        "them to fail over between")
    p.add_argument("--wire-credentials", type=credentials_flag, metavar="FILE", help=CREDENTIALS_HELP)
    p.add_argument("--controllers", type=_controllers, default=CONTROLLERS, metavar="LIST",
                   help=f"comma-separated controllers to run (default all: "
                        f"{','.join(CONTROLLERS)})")
    p.add_argument("--concurrent-replicaset-syncs", type=_positive_int, default=5, metavar="N",
                   help="ReplicaSets synced at once (default 5)")
    p.add_argument("--concurrent-deployment-syncs", type=_positive_int, default=5, metavar="N",
                   help="Deployments synced at once (default 5)")
    p.add_argument("--concurrent-endpoint-syncs", type=_positive_int, default=5, metavar="N",
                   help="Services whose Endpoints are synced at once (default 5)")
    p.add_argument("--concurrent-service-endpoint-syncs", type=_positive_int, default=5,
                   metavar="N", help="Services whose EndpointSlices are synced at once "
                                     "(default 5)")
    p.add_argument("--max-endpoints-per-slice", type=_endpoints_per_slice,
                   default=DEFAULT_MAX_PER_SLICE, metavar="N",
                   help=f"endpoints in one EndpointSlice at most (default "
                        f"{DEFAULT_MAX_PER_SLICE}, at most {MAX_PER_SLICE_LIMIT})")
    p.add_argument("--endpoint-updates-batch-period", type=_seconds, default=0.0,
                   metavar="SECONDS", help="how long pod changes are gathered before a "
                                           "Service's Endpoints are written (default 0)")
    p.add_argument("--endpointslice-updates-batch-period", type=_seconds, default=0.0,
                   metavar="SECONDS", help="how long pod changes are gathered before a "
                                           "Service's EndpointSlices are written (default 0)")
    p.add_argument("--node-monitor-period", type=_positive_seconds, default=5.0,
                   metavar="SECONDS", help="seconds between node health passes (default 5)")
    p.add_argument("--node-monitor-grace-period", type=_seconds, metavar="SECONDS",
                   default=_DEFAULTS.node_monitor_grace_period,
                   help="seconds without a heartbeat before a node is Unknown (default "
                        f"{_DEFAULTS.node_monitor_grace_period:g})")
    p.add_argument("--node-startup-grace-period", type=_seconds, metavar="SECONDS",
                   default=_DEFAULTS.node_startup_grace_period,
                   help="the same, for a node that never posted status (default "
                        f"{_DEFAULTS.node_startup_grace_period:g})")
    p.add_argument("--node-eviction-rate", type=_seconds, default=_DEFAULTS.eviction_rate,
                   metavar="RATE",
                   help="nodes per second that get NoExecute taints when unhealthy (default "
                        f"{_DEFAULTS.eviction_rate:g})")
    p.add_argument("--default-toleration-seconds", type=_seconds, metavar="SECONDS",
                   default=_DEFAULTS.default_toleration_seconds,
                   help="how long pods without their own toleration stay on a not-ready or "
                        "unreachable node (kube-apiserver's DefaultTolerationSeconds "
                        f"admission; default {_DEFAULTS.default_toleration_seconds:g})")
    p.add_argument("--root-ca-file", metavar="PATH",
                   help="the cluster CA bundle (PEM) the root-ca-cert-publisher publishes as "
                        "the ConfigMap kube-root-ca.crt in every namespace (without it, that "
                        "controller does not run)")
    p.add_argument("--cluster-signing-cert-file", metavar="PATH",
                   help="the CA certificate (PEM) the csrsigning controller signs approved "
                        "kubelet and apiserver client certificate requests with (without it "
                        "and --cluster-signing-key-file, that controller does not run)")
    p.add_argument("--cluster-signing-key-file", metavar="PATH",
                   help="that CA's private key (PEM)")
    p.add_argument("--cluster-signing-duration", type=_positive_seconds, metavar="SECONDS",
                   default=DEFAULT_SIGNING_DURATION,
                   help="the longest a signed certificate is valid (default "
                        f"{DEFAULT_SIGNING_DURATION:g}: one year)")
    p.add_argument("--allocate-node-cidrs", action="store_true",
                   help="give every node a block of --cluster-cidr as its spec.podCIDR (the "
                        "nodeipam controller runs only with it)")
    p.add_argument("--cluster-cidr", default="", metavar="CIDR",
                   help="the pods' address range; requires --allocate-node-cidrs")
    p.add_argument("--node-cidr-mask-size", type=int, default=0, metavar="N",
                   help=f"the prefix length of each node's block (default 0: "
                        f"{DEFAULT_NODE_MASK} for IPv4)")
    p.add_argument("--service-cluster-ip-range", default="", metavar="CIDR",
                   help="the Services' address range: the blocks it overlaps in --cluster-cidr "
                        "are never handed out; requires --allocate-node-cidrs")
    p.add_argument("--time-scale", type=_positive_seconds, default=1.0, metavar="FACTOR",
                   help="kubemu: scale the controllers' built-in delays (the Job pod-failure "
                        "backoff, 10 s doubling to 6 min); `kubemu up --fast` passes 0.1")
    p.add_argument("--cronjob-clock-offset-file", metavar="PATH",
                   help="kubemu, for tests: the CronJob controller's clock runs this file's "
                        "number of seconds ahead of the real one (absent file: 0)")
    p.add_argument("--local-path-dir-template", metavar="TEMPLATE",
                   help="kubemu: run the local-path provisioner; a volume's directory is made "
                        "under TEMPLATE with {node} replaced by its node's name")
    p.add_argument("--resync-period", type=_seconds, default=0.0, metavar="SECONDS",
                   help="seconds between informer resyncs that re-check every object "
                        "(default 0: never)")
    p.add_argument("--log-level", default="INFO", metavar="LEVEL",
                   help="logging level (default INFO)")
    leaderelector.add_flags(p, "kube-controller-manager")
    return p


def read_root_ca(path: str) -> str:
    """The PEM certificates of --root-ca-file (ValueError, with the reason, if there are none)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        x509.load_pem_x509_certificates(data)
    except (OSError, ValueError) as err:
        raise ValueError(f"error reading root-ca-file at {path}: {err}") from None
    return data.decode("ascii")


def read_signing_ca(cert_file: str | None, key_file: str | None):
    """The CA pair of --cluster-signing-cert-file and --cluster-signing-key-file (None without
    them; ValueError, with the reason, for one without the other or a file that is not one)."""
    from kubemu.pki import Pair
    if not cert_file and not key_file:
        return None
    if not cert_file or not key_file:
        raise ValueError("--cluster-signing-cert-file and --cluster-signing-key-file go together")
    try:
        with open(cert_file, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
        with open(key_file, "rb") as f:
            key = serialization.load_pem_private_key(f.read(), password=None)
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"error reading the cluster signing CA: {err}") from None
    if cert.public_key() != key.public_key():
        raise ValueError(f"{key_file} is not the key of {cert_file}")
    return Pair(cert, key)


def config_from(args: argparse.Namespace, election: leaderelector.Settings | None = None) -> Config:
    settings = NodeLifecycleSettings(
        node_monitor_grace_period=args.node_monitor_grace_period,
        node_startup_grace_period=args.node_startup_grace_period,
        eviction_rate=args.node_eviction_rate,
        default_toleration_seconds=args.default_toleration_seconds)
    return Config(api=args.api, controllers=args.controllers,
                  concurrent_replicaset_syncs=args.concurrent_replicaset_syncs,
                  concurrent_deployment_syncs=args.concurrent_deployment_syncs,
                  node_monitor_period=args.node_monitor_period, node_lifecycle=settings,
                  resync_period=args.resync_period, credentials=args.wire_credentials,
                  concurrent_endpoint_syncs=args.concurrent_endpoint_syncs,
                  concurrent_service_endpoint_syncs=args.concurrent_service_endpoint_syncs,
                  max_endpoints_per_slice=args.max_endpoints_per_slice,
                  endpoint_updates_batch_period=args.endpoint_updates_batch_period,
                  endpointslice_updates_batch_period=args.endpointslice_updates_batch_period,
                  time_scale=args.time_scale,
                  cronjob_clock_offset_file=args.cronjob_clock_offset_file,
                  local_path_dir_template=args.local_path_dir_template,
                  leader_election=election,
                  root_ca=read_root_ca(args.root_ca_file) if args.root_ca_file else None,
                  cluster_signing=read_signing_ca(args.cluster_signing_cert_file,
                                                  args.cluster_signing_key_file),
                  cluster_signing_duration=args.cluster_signing_duration,
                  node_ipam=NodeIPAMSettings.parse(args.cluster_cidr,
                                                   args.node_cidr_mask_size or None,
                                                   args.service_cluster_ip_range)
                  if args.allocate_node_cidrs else None)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    election = leaderelector.settings_from(parser, args)
    try:
        config = config_from(args, election)
    except ValueError as err:
        parser.error(str(err))
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stdout,
                        format="%(asctime)s controller-manager[%(process)d] %(levelname)s "
                               "%(name)s: %(message)s")
    try:
        return asyncio.run(run(config))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
