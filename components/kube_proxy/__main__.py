"""python -m components.kube_proxy --api ENDPOINT --wire-credentials FILE --hostname-override NODE
[--proxy-mode nftables|userspace] [--cluster-cidr CIDR] [--fabric-netns PATH] [--host-side-node NODE]
[--host-interface IFACE --host-address IP] [--nodeport-addresses CIDRS] [--sync-period S]
[--min-sync-period S] [--masquerade-bit N] [--metrics-file FILE] [--cleanup] [--log-level L]

One DaemonSet template serves every node (kubemu/addons.py): its args name the node whose proxy
takes the host's side (`--host-side-node`) and give that side's flags to all, and give every
node the same apiserver list (node-0's first); `for_this_node` keeps the host side's flags only
in that node's proxy and orders the list as every client on this node orders it
(kubemu/apipreference.py: a control-plane node's own apiserver first).

kube-proxy's shell: informers on Services, EndpointSlices and its own Node feed the pure cores
(endpoints.service_ports → rules.desired → rules.transaction, paced by sync.SyncRunner), and
the result goes to the kernel with one `nft -f` transaction in the fabric (nftshell) — or, in
userspace mode, to userspace.UserspaceProxier. After each sync that programmed endpoint
changes it logs one line

    network programming latency: seconds=0.412,0.398 sync=partial

and, with --metrics-file, rewrites that file as JSON {"latencies": [last ≤1000 seconds],
"syncs": N, "failures": N, "last_sync": {...}} for the bench.
"""
from __future__ import annotations

import argparse
import asyncio
import ipaddress
import json
import logging
import os
import signal
import sys
import time

from components.kube_proxy import endpoints, nftshell, rules
from components.kube_proxy.sync import SyncRunner, trigger_time
from components.kube_proxy.userspace import UserspaceProxier
from kubemu import apipreference, sdnotify
from kubemu._wire_auth import CREDENTIALS_HELP, credentials_flag
from kubemu.apiclient import ApiClient
from kubemu.events import EventRecorder
from kubemu.informer import Informer

log = logging.getLogger("kubemu.kube_proxy")

NFTABLES, USERSPACE = "nftables", "userspace"
METRICS_KEPT = 1000
# userspace: a listener another socket holds (another cluster's NodePort on 127.0.0.1) is tried
# again this often, until it opens or is no longer wanted (said once, not at each try)
LISTEN_RETRY = 5.0
CLEANUP_TIMEOUT = 10.0


def proxy_mode(requested: str, euid: int, nft_found: bool, fabric_problem: str | None) -> tuple[str, str | None]:
    """The mode to run in, and why it is not the one asked for (None when it is).
    `fabric_problem`: why the fabric namespace cannot be programmed (None when it can)."""
    if requested == USERSPACE:
        return USERSPACE, None
    if euid != 0:
        reason = "not root: nftables mode programs the cluster's fabric namespace"
    elif not nft_found:
        reason = "nft not found (Debian's nftables package)"
    elif fabric_problem:
        reason = fabric_problem
    else:
        return NFTABLES, None
    return USERSPACE, reason


def _cidr(text: str) -> str:
    try:
        return str(ipaddress.IPv4Network(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _address(text: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _cidrs(text: str) -> list[str]:
    """kube-proxy's `--nodeport-addresses`: comma-separated CIDRs (the flag may repeat)."""
    return [_cidr(part.strip()) for part in text.split(",") if part.strip()]


def _seconds(text: str) -> float:
    try:
        value = float(text.rstrip("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration in seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m components.kube_proxy",
                                description="kubemu's kube-proxy: Services to nftables rules in the fabric "
                                            "(or userspace forwarders)")
    p.add_argument("--api", required=True,
                   help="the apiserver's wire endpoint (ipc:// or tcp://), or a comma-separated list of "
                        "every apiserver's, node-0's first, to fail over between (tried in this node's "
                        "order of preference)")
    p.add_argument("--wire-credentials", type=credentials_flag, metavar="FILE", help=CREDENTIALS_HELP)
    p.add_argument("--hostname-override", required=True, metavar="NODE", help="this node's name")
    p.add_argument("--proxy-mode", choices=(NFTABLES, USERSPACE), default=NFTABLES,
                   help="nftables (falls back to userspace, said once, when it cannot run)")
    p.add_argument("--cluster-cidr", type=_cidr, help="the pods' CIDR (nftables: masquerade sources outside it)")
    p.add_argument("--fabric-netns", metavar="PATH", help="the cluster's fabric network namespace (nftables)")
    p.add_argument("--host-side-node", metavar="NODE",
                   help="the node whose proxy takes the host's side: --host-interface, --host-address and "
                        "--nodeport-addresses apply only when --hostname-override is NODE (default: always)")
    p.add_argument("--host-interface", metavar="IFACE", help="the host link's fabric end (host0)")
    p.add_argument("--host-address", type=_address, metavar="IP",
                   help="that end's address (a NodePort address)")
    p.add_argument("--nodeport-addresses", type=_cidrs, action="extend", default=[], metavar="CIDRS",
                   help="userspace: the loopback addresses (/32 each, comma-separated) NodePorts listen on; "
                        "none by default (nftables: the node's fabric addresses)")
    p.add_argument("--sync-period", type=_seconds, default=3600.0, help="seconds between full syncs (default 3600)")
    p.add_argument("--min-sync-period", type=_seconds, default=1.0, help="seconds between syncs at least (default 1)")
    p.add_argument("--masquerade-bit", type=int, default=14, help="the packet mark bit for SNAT (default 14)")
    p.add_argument("--metrics-file", metavar="FILE",
                   help="rewrite FILE as JSON with the last latencies after each sync")
    p.add_argument("--cleanup", action="store_true", help="delete this proxy's rules and exit")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p


def for_this_node(args: argparse.Namespace) -> argparse.Namespace:
    """The flags this node's proxy runs with: --api in this node's order of preference, and the
    host side's (--host-interface, --host-address, --nodeport-addresses) dropped unless this is
    the --host-side-node. Only one proxy may take what comes from the host link, and a NodePort
    listener on the nodes' one shared loopback address is one proxy's alone
    (components/kube_proxy/userspace_plan.py)."""
    endpoints = [e for e in (part.strip() for part in args.api.split(",")) if e]
    changes: dict = {"api": ",".join(apipreference.for_node(endpoints, args.hostname_override))} if endpoints else {}
    if args.host_side_node not in (None, args.hostname_override):
        changes.update(host_interface=None, host_address=None, nodeport_addresses=[])
    return argparse.Namespace(**{**vars(args), **changes})


class Proxy:
    """One kube-proxy: informers, the sync loop, the mode's programmer."""

    def __init__(self, args: argparse.Namespace, mode: str, nft: str = nftshell.NFT, br_netfilter: bool = True):
        self.args, self.mode, self.node, self.nft = args, mode, args.hostname_override, nft
        self.br_netfilter = br_netfilter
        self.conntrack = nftshell.find_tool("conntrack")
        self._synced_ports: list[endpoints.ServicePort] = []
        self._said_conntrack: str | None = None
        self.api = ApiClient(args.api, credentials=args.wire_credentials)
        self.services = Informer(self.api, "services")
        self.slices = Informer(self.api, "endpointslices")
        self.nodes = Informer(self.api, "nodes", field_selector=f"metadata.name={self.node}")
        self.runner = SyncRunner(args.min_sync_period, args.sync_period, started_at=time.time())
        self.recorder = EventRecorder(self.api, "kube-proxy", host=self.node)
        self.scope: rules.Scope | None = None
        self.programmed: rules.Programmed | None = None
        self.userspace = None
        self._listen_retry: float | None = None   # when unopened userspace listeners are tried again
        self._said_scope: str | None = None
        self._wake = asyncio.Event()
        self._ready = False
        self.latencies: list[float] = []
        self.syncs = self.failures = 0
        self.services.add_event_handler(lambda o: self._changed(), lambda o, n: self._changed(),
                                        lambda o: self._changed())
        self.slices.add_event_handler(lambda o: self._slice(None, o), self._slice, lambda o: self._changed())
        self.nodes.add_event_handler(lambda o: self._node(o), lambda o, n: self._node(n), None)

    # -- informer handlers: bookkeeping only --

    def _changed(self) -> None:
        self.runner.request()
        self._wake.set()

    def _slice(self, old: dict | None, new: dict) -> None:
        self.runner.note_slice(trigger_time(old) if old is not None else None, trigger_time(new))
        self._wake.set()

    def _node(self, node: dict) -> None:
        if self.mode != NFTABLES:
            return
        spec = node.get("spec") if isinstance(node.get("spec"), dict) else {}
        pod_cidr = spec.get("podCIDR")
        if not isinstance(pod_cidr, str) or not pod_cidr:
            return
        try:
            sc = rules.scope(pod_cidr, self.args.cluster_cidr, self.args.masquerade_bit,
                             self.args.host_interface, self.args.host_address, self.br_netfilter)
        except ValueError as exc:
            if self._said_scope != pod_cidr:
                log.error("node %s: podCIDR %s: %s; no rules until it changes", self.node, pod_cidr, exc)
                self._said_scope = pod_cidr
            return
        if sc != self.scope:
            log.info("node %s: podCIDR %s → table %s %s, interfaces %s, NodePorts on %s", self.node, pod_cidr,
                     rules.FAMILY, sc.table, ",".join(sc.interfaces), ",".join(sc.nodeport_addresses))
            self.scope = sc
            self._changed()

    # -- the loop --

    async def run(self) -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, lambda: (stop.set(), self._wake.set()))
        informers = [asyncio.create_task(inf.run(stop), name=f"{inf.resource} informer")
                     for inf in (self.services, self.slices, self.nodes)]
        try:
            if self.mode == USERSPACE:
                self.userspace = UserspaceProxier(nodeport_addresses=self.args.nodeport_addresses,
                                                  recorder=self.recorder,
                                                  service_lookup=lambda ns, name: self.services.get(f"{ns}/{name}"))
            await self._loop(stop)
        finally:
            stop.set()
            await asyncio.gather(*informers, return_exceptions=True)
            if self.userspace is not None:
                await self.userspace.close()
            await self.recorder.close()
            await self.api.close()
        log.info("stopped (rules stay in place, as kube-proxy leaves them)" if self.mode == NFTABLES else "stopped")
        return 0

    def _initialized(self) -> bool:
        synced = all(inf.has_synced() for inf in (self.services, self.slices, self.nodes))
        return synced and (self.mode != NFTABLES or self.scope is not None)

    async def _loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self._wake.clear()
            self.runner.initialized = self._initialized()
            now = time.time()
            decision = self.runner.due(now)
            if decision is not None:
                await self._sync(decision.full)
                continue
            due = self.programmed.next_due() if self.programmed is not None else self._listen_retry
            wake = self.runner.next_wakeup(now, due)
            timeout = None if wake is None else max(0.0, wake - now)
            if not all(inf.has_synced() for inf in (self.services, self.slices, self.nodes)):
                timeout = 0.2  # informers report their first list by a flag, not an event
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            if due is not None and time.time() >= due:
                self.runner.request()  # the stale chains' deletion is a sync of its own

    async def _sync(self, full: bool) -> None:
        start = time.time()
        self.runner.start(start)
        ports = endpoints.service_ports(self.services.list(), self.slices.list(), self.node)
        ok, detail = True, ""
        try:
            if self.mode == NFTABLES:
                detail = await self._sync_nftables(ports, full, start)
            else:
                await self.userspace.sync(ports)
                detail = f"{len(ports)} service ports"
                self._listen_retry = time.time() + LISTEN_RETRY if self.userspace.unopened else None
        except nftshell.NftError as exc:
            ok = False
            log.error("sync failed (a full sync follows): %s", exc)
        end = time.time()
        latencies = self.runner.finished(end, ok, full)
        self.syncs += 1
        self.failures += 0 if ok else 1
        if ok:
            log.log(logging.INFO if full or detail.startswith("wrote") else logging.DEBUG,
                    "%s sync in %.3fs: %s", "full" if full else "partial", end - start, detail)
            if latencies:
                log.info("network programming latency: seconds=%s sync=%s",
                         ",".join(f"{x:.3f}" for x in latencies), "full" if full else "partial")
                self.latencies = (self.latencies + latencies)[-METRICS_KEPT:]
            if not self._ready:
                self._ready = True
                sdnotify.notify("READY=1\nSTATUS=proxying")
        self._write_metrics(full, ok, end - start)

    async def _sync_nftables(self, ports: list[endpoints.ServicePort], full: bool, now: float) -> str:
        assert self.scope is not None
        netns = self.args.fabric_netns
        prev = self.programmed
        if full or prev is None:  # a full sync trusts only the kernel for what exists
            chains, sets = await nftshell.list_table(netns, self.scope.table, nft=self.nft)
            prev = rules.from_listing(self.scope, chains, sets, prev.pending_delete if prev is not None else None)
        tx = rules.transaction(prev, rules.desired(ports, self.scope), now, full=full)
        await nftshell.apply(netns, tx.text, nft=self.nft)
        self.programmed = tx.after
        await self._clear_udp_flows(rules.stale_udp_flows(self._synced_ports, ports))
        self._synced_ports = ports
        return (f"wrote {tx.changed_chains} chains, {len(ports)} service ports" if tx.text
                else f"nothing changed, {len(ports)} service ports")

    async def _clear_udp_flows(self, filters: list[tuple[str, ...]]) -> None:
        problem = None
        if filters and self.conntrack is None:
            problem = "conntrack not found (Debian's conntrack package): stale UDP flows are left to time out"
        elif filters:
            problem = await nftshell.delete_flows(self.args.fabric_netns, filters, self.conntrack)
        if problem and problem != self._said_conntrack:
            log.warning("%s", problem)
        self._said_conntrack = problem or self._said_conntrack

    def _write_metrics(self, full: bool, ok: bool, duration: float) -> None:
        path = self.args.metrics_file
        if not path:
            return
        data = {"mode": self.mode, "latencies": self.latencies, "syncs": self.syncs, "failures": self.failures,
                "last_sync": {"full": full, "ok": ok, "seconds": round(duration, 6), "at": time.time()}}
        tmp = f"{path}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(data, f)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("--metrics-file %s: %s", path, exc.strerror or exc)


async def cleanup(args: argparse.Namespace) -> int:
    """`--cleanup`: delete this node's table from the fabric (its name needs the Node's podCIDR)."""
    if not args.fabric_netns or not os.path.exists(args.fabric_netns):
        log.info("no fabric namespace: no rules to clean up")
        return 0
    if not args.cluster_cidr:
        log.error("--cleanup needs --cluster-cidr (the table's name follows from the node's podCIDR in it)")
        return 2
    nft = nftshell.find_nft()
    if nft is None:
        log.info("nft not found: no rules to clean up")
        return 0
    async with ApiClient(args.api, credentials=args.wire_credentials, timeout=CLEANUP_TIMEOUT) as api:
        node = await api.get("nodes", args.hostname_override)
    pod_cidr = (node.get("spec") or {}).get("podCIDR")
    if not pod_cidr:
        log.info("node %s has no podCIDR: no table to clean up", args.hostname_override)
        return 0
    table = rules.scope(pod_cidr, args.cluster_cidr).table
    await nftshell.delete_table(args.fabric_netns, table, nft=nft)
    log.info("deleted table %s %s", rules.FAMILY, table)
    return 0


async def choose_mode(args: argparse.Namespace) -> tuple[str, str]:
    """The mode (said once when it is not the one asked for) and the nft to run."""
    if args.proxy_mode == USERSPACE:
        return USERSPACE, ""
    nft = nftshell.find_nft()
    problem = None
    if not args.fabric_netns:
        problem = "no --fabric-netns: pods share the host's network"
    elif not args.cluster_cidr:
        problem = "no --cluster-cidr"
    elif nft is not None and os.geteuid() == 0:
        problem = await nftshell.fabric_problem(args.fabric_netns, nft=nft)
    mode, reason = proxy_mode(args.proxy_mode, os.geteuid(), nft is not None, problem)
    if reason:
        log.warning("proxy mode userspace instead of nftables: %s", reason)
    return mode, nft or ""


async def _main(args: argparse.Namespace) -> int:
    if args.cleanup:
        return await cleanup(args)
    mode, nft = await choose_mode(args)
    log.info("kube-proxy on node %s, %s mode (api %s)%s", args.hostname_override, mode, args.api,
             ", the host's side" if args.host_side_node == args.hostname_override else "")
    br_netfilter = True
    if mode == NFTABLES and not await nftshell.bridge_nf_call_iptables(args.fabric_netns):
        br_netfilter = False
        log.warning("the fabric has no br_netfilter (net.bridge.bridge-nf-call-iptables is not 1 there): "
                    "clients are masqueraded to endpoints on their own bridge, which then see the gateway's address")
    return await Proxy(args, mode, nft, br_netfilter).run()


def main(argv: list[str] | None = None) -> int:
    args = for_this_node(build_parser().parse_args(argv))
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stdout,
                        format="%(asctime)s kube-proxy[%(process)d] %(levelname)s %(name)s: %(message)s")
    try:
        return asyncio.run(_main(args))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # API loss during --cleanup, an unreadable fabric: one line, no traceback
        log.error("%s", exc or type(exc).__name__)
        return 1


if __name__ == "__main__":
    sys.exit(main())
