"""python -m kubelet --node NAME --node-dir DIR [--manifests DIR] [...]: the node agent.

Started by init as kubelet.service (Type=notify): READY=1 once its static pods are being
synced, WATCHDOG=1 while its loop is healthy. Runs the static pods of its manifest directory
(how the control plane boots itself); its containers live under shims and survive it. With
--api it is also a node of the cluster: Node, Lease, mirror pods, the pods bound to it."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from kubemu import netplan
from kubemu._wire_auth import CREDENTIALS_HELP, credentials_flag

from . import images
from .agent import Kubelet, NetworkOptions, Options
from .nodestatus import NodeConfig, parse_taint
from .podworker import Settings


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kubelet", description=__doc__.split("\n\n")[0])
    p.add_argument("--node", help="the node's name (required unless --hollow)")
    p.add_argument("--node-dir", help="the node's directory (pods/, events.jsonl; required unless --hollow)")
    p.add_argument("--manifests", help="static pod manifest directory (default: NODE_DIR/manifests)")
    p.add_argument("--file-check-frequency", type=float, default=20.0,
                   help="seconds between full re-lists of the manifest directory (default 20)")
    p.add_argument("--backoff-initial", type=float, default=10.0, help="CrashLoopBackOff's first delay (10 s)")
    p.add_argument("--backoff-max", type=float, default=300.0, help="CrashLoopBackOff's cap (300 s)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="multiply every pod timing (backoff, probes, grace periods) by this")
    p.add_argument("--image-catalog",
                   help="the image catalog file (default: the state directory's images.yaml, NODE_DIR/../../images.yaml; "
                        "absent: the shipped defaults only)")
    api = p.add_argument_group("the node in the API (with --api)")
    api.add_argument("--api", help="the apiserver's wire endpoint, or a comma-separated list of them to fail "
                                    "over between; without it, static pods only")
    api.add_argument("--wire-credentials", type=credentials_flag, metavar="FILE", help=CREDENTIALS_HELP)
    api.add_argument("--wire-curve-dir", metavar="DIR",
                     help="present system:node:<node> with CURVE: DIR/server.key (the apiservers' public key) and "
                          "DIR/clients/system:node:<node>.key_secret (a node joined from another machine)")
    api.add_argument("--cpu", help="the node's cpu capacity (default: this machine's cpu count)")
    api.add_argument("--memory", help="the node's memory capacity (default: this machine's memory)")
    api.add_argument("--max-pods", type=int, default=110, help="pods capacity (default 110)")
    api.add_argument("--node-labels", default="", help="k=v[,k=v...] labels to register the node with")
    api.add_argument("--register-with-taints", default="",
                     help="key[=value]:Effect[,...] taints to register the node with")
    api.add_argument("--node-lease-duration-seconds", type=int, default=40, help="the Lease's duration (40)")
    api.add_argument("--node-status-update-frequency", type=float, default=10.0,
                     help="seconds between Lease renewals and node checks (10)")
    api.add_argument("--node-status-report-frequency", type=float, default=300.0,
                     help="seconds between node status posts when nothing changed (300)")
    serve = p.add_argument_group("the streaming server (kubectl exec and attach, through the apiserver)")
    serve.add_argument("--listen", help="wire endpoint to serve exec/attach on (default: none)")
    serve.add_argument("--wire-secrets", metavar="DIR",
                       help="require wire authentication against DIR/<identity>.secret; only the apiserver's "
                            "kube-apiserver-kubelet-client identity is served")
    net = p.add_argument_group("pod networks and cgroups")
    net.add_argument("--network-mode", choices=(netplan.CNI, netplan.HOST), default=netplan.HOST,
                     help="cni: each pod (not hostNetwork) gets a sandbox with its own network through CNI; "
                          "host: every pod shares the node's network (default)")
    net.add_argument("--network-mode-reason", metavar="TEXT",
                     help="with --network-mode host: why, shown on the Node (kubectl describe node)")
    net.add_argument("--fabric-netns", metavar="PATH",
                     help="the network namespace the CNI plugins run in (the cluster's fabric)")
    net.add_argument("--cni-conf-dir", metavar="DIR",
                     help="the CNI network config directory (default NODE_DIR/cni/net.d)")
    bin_dirs = ":".join(netplan.CNI_BIN_DIRS)
    net.add_argument("--cni-bin-dir", metavar="DIRS", default=bin_dirs,
                     help=f"colon-separated directories to find CNI plugins in (default {bin_dirs})")
    net.add_argument("--cluster-cidr", metavar="CIDR", type=_cluster_cidr, default=netplan.DEFAULT_CLUSTER_CIDR,
                     help=f"the cluster's pod CIDR, routed through each node's bridge "
                          f"(default {netplan.DEFAULT_CLUSTER_CIDR})")
    net.add_argument("--service-cidr", metavar="CIDR", type=_service_cidr,
                     help="the cluster's Service CIDR, routed from each pod to its bridge's gateway (with "
                          "--network-mode cni)")
    net.add_argument("--pod-cidr", metavar="CIDR", type=_node_cidr,
                     help="this node's pod CIDR when there is no API to give it (spec.podCIDR otherwise)")
    net.add_argument("--cgroup-root", metavar="NAME",
                     help="the node's cgroup relative to each hierarchy's root; pods get cgroups below it "
                          "(default: none, memory limits are watched by RSS)")
    net.add_argument("--pod-max-pids", metavar="N", type=_pod_max_pids, default=-1,
                     help="the most processes a pod may have (its cgroup's pids.max, with --cgroup-root; "
                          "the kubelet's podPidsLimit); -1: unlimited (default)")
    dns = p.add_argument_group("the pods' DNS")
    dns.add_argument("--cluster-dns", metavar="IP[,IP...]", type=_ip_list, action="extend", default=[],
                     help="the DNS servers of pods with dnsPolicy ClusterFirst (comma-separated, or repeated); "
                          "without: they get the node's resolv.conf, and a MissingClusterDNS event")
    dns.add_argument("--cluster-domain", metavar="DOMAIN", default=netplan.CLUSTER_DOMAIN,
                     help=f"the cluster's DNS domain, searched by those pods (default {netplan.CLUSTER_DOMAIN}, "
                          "as kubeadm configures the kubelet; \"\": the node's search path only)")
    hollow = p.add_argument_group("hollow mode (kubemark's hollow node): many API nodes, no processes")
    hollow.add_argument("--hollow", action="store_true", help="run hollow nodes (needs --api)")
    hollow.add_argument("--nodes", type=int, default=1, help="how many hollow nodes (default 1)")
    hollow.add_argument("--node-prefix", default="hollow-node-", help="hollow node names: PREFIX<i>")
    hollow.add_argument("--startup-delay", type=float, default=0.0,
                        help="seconds from a pod's binding to it being reported Running (default 0)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s kubelet[%(process)d] %(levelname)s: %(message)s")
    if args.hollow:
        return _run_hollow(p, args)
    if not args.node or not args.node_dir:
        p.error("--node and --node-dir are required (unless --hollow)")
    node_dir = os.path.abspath(args.node_dir)
    try:
        node_config = _node_config(args)
    except ValueError as err:
        p.error(str(err))
    if args.network_mode_reason and args.network_mode != netplan.HOST:
        p.error("--network-mode-reason goes with --network-mode host")
    credentials = args.wire_credentials
    if args.wire_curve_dir is not None:
        if credentials is not None:
            p.error("--wire-curve-dir and --wire-credentials: give one")
        from kubemu import wirekeys
        from kubemu._wire_auth import node_identity
        try:
            credentials = wirekeys.directory_credentials(args.wire_curve_dir, node_identity(args.node))
        except ValueError as err:
            p.error(f"--wire-curve-dir: {err}")
    network = None
    if args.network_mode == netplan.CNI:
        network = NetworkOptions(
            conf_dir=os.path.abspath(args.cni_conf_dir or os.path.join(node_dir, "cni", "net.d")),
            bin_dirs=tuple(d for d in args.cni_bin_dir.split(":") if d),
            fabric_netns=args.fabric_netns, cluster_cidr=args.cluster_cidr, pod_cidr=args.pod_cidr,
            service_cidr=args.service_cidr)
    opts = Options(node=args.node, node_dir=node_dir,
                   manifests_dir=os.path.abspath(args.manifests or os.path.join(node_dir, "manifests")),
                   file_check_frequency=args.file_check_frequency,
                   settings=Settings(backoff_initial=args.backoff_initial, backoff_max=args.backoff_max,
                                     time_scale=args.time_scale),
                   api=args.api, api_credentials=credentials, node_config=node_config,
                   lease_duration=args.node_lease_duration_seconds,
                   renew_interval=args.node_status_update_frequency,
                   status_interval=args.node_status_report_frequency,
                   listen=args.listen, wire_secrets=args.wire_secrets,
                   network=network, host_network_reason=args.network_mode_reason, cgroup_root=args.cgroup_root,
                   pod_pids_limit=None if args.pod_max_pids == -1 else args.pod_max_pids,
                   cluster_dns=tuple(args.cluster_dns), cluster_domain=args.cluster_domain.strip("."),
                   image_catalog=os.path.abspath(args.image_catalog or os.path.join(
                       node_dir, os.pardir, os.pardir, images.CATALOG_FILE)))
    asyncio.run(Kubelet(opts).run())
    return 0


def _cluster_cidr(text: str) -> str:
    try:
        return str(netplan.parse_cidr(text, "--cluster-cidr"))
    except netplan.NetplanError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _service_cidr(text: str) -> str:
    try:
        return str(netplan.parse_cidr(text, "--service-cidr"))
    except netplan.NetplanError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _ip_list(text: str) -> list[str]:
    """--cluster-dns: comma-separated IP addresses (a pflag string slice)."""
    import ipaddress

    ips = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        try:
            ips.append(str(ipaddress.ip_address(item)))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not an IP address") from None
    return ips


def _node_cidr(text: str) -> str:
    """A node's block: any IPv4 network (hollow-sized ones are smaller than a cluster's least)."""
    import ipaddress

    try:
        return str(ipaddress.IPv4Network(text))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IPv4 CIDR: {err}") from None


def _pod_max_pids(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n == -1 or n > 0:
        return n
    raise argparse.ArgumentTypeError(f"{text!r}: a positive number of processes, or -1 for unlimited")


def _run_hollow(p: argparse.ArgumentParser, args) -> int:
    import signal

    from .hollow import HollowKubelet, hollow_configs

    if not args.api or args.nodes < 1:
        p.error("--hollow needs --api and --nodes >= 1")
    configs = hollow_configs(args.nodes, args.node_prefix, args.cpu or "4", args.memory or "16Gi", args.max_pods)
    hollow = HollowKubelet(args.api, configs, startup_delay=args.startup_delay, credentials=args.wire_credentials,
                           lease_duration=args.node_lease_duration_seconds,
                           renew_interval=args.node_status_update_frequency,
                           status_interval=args.node_status_report_frequency)

    async def run() -> None:
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await hollow.run(stop)

    asyncio.run(run())
    return 0


def _node_config(args) -> NodeConfig | None:
    if not args.api:
        return None
    import platform

    import psutil

    from kubemu.api.quantity import cpu_millis, memory_bytes

    labels = {}
    for item in filter(None, args.node_labels.split(",")):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--node-labels: {item!r} is not key=value")
        labels[key] = value
    taints = tuple(parse_taint(t) for t in filter(None, args.register_with_taints.split(",")))
    cpu = args.cpu or str(psutil.cpu_count() or 1)
    memory = args.memory or f"{psutil.virtual_memory().total // 1024}Ki"
    cpu_millis(cpu), memory_bytes(memory)  # a bad quantity fails here, naming itself
    return NodeConfig(args.node, cpu, memory, args.max_pods, labels, taints,
                      kernel_version=platform.release())


if __name__ == "__main__":
    sys.exit(main())
