"""The pod network, decided without touching the machine: whether pods get networks of their
own, which CIDRs they use, and the `ip` steps that build and remove a cluster's fabric.

One network namespace per cluster, the *fabric* `kubemu-<h8>`, plays the network between the
nodes: one bridge per node (made by the CNI bridge plugin), forwarding on, `unreachable` routes
for the pod and service CIDRs and no default route, so nothing a pod sends leaves the cluster.
The host reaches the pods through one veth (`km-<h8>` ↔ `host0`) and two routes bound to it;
the host's own forwarding is never touched. The host link takes the cluster CIDR's last
node-sized block, which node IPAM therefore never hands out. kube-proxy's nftables tables live
in the fabric too (one per node), so `nft` is one of the tools pod networks need. Without pod
networks, Services take their addresses from a loopback block of the cluster's own
(choose_host_service_cidr).
kubemu/network.py runs the steps.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict, dataclass

CNI = "cni"
HOST = "host"
DEFAULT_CLUSTER_CIDR = "10.244.0.0/16"  # kubeadm's --pod-network-cidr as flannel's docs use it
DEFAULT_SERVICE_CIDR = "10.96.0.0/12"   # kubeadm's --service-cidr default
CLUSTER_RANGE = ipaddress.IPv4Network("10.244.0.0/14")  # 10.244-10.255: where a taken default moves
DEFAULT_NODE_MASK = 24                  # kube-controller-manager's --node-cidr-mask-size for IPv4
SMALLEST_NODE_BLOCK = 29                # a gateway and 5 pods: enough for hollow nodes, which run none
CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")  # Debian's plugins, then upstream's place
CNI_PLUGINS = ("bridge", "host-local", "loopback")
# The tools pod networks need, and the Debian packages holding them.
TOOLS = {"ip": "iproute2", "nsenter": "util-linux", "sysctl": "procps", "nft": "nftables"}
# Without pod networks every ClusterIP is a loopback address: one a userspace proxy can bind
# and the host reaches as it is (kubemu's choice; real clusters always have a routed range).
# Each cluster gets a block of its own: two clusters handing out the same ClusterIPs would take
# each other's traffic (SO_REUSEPORT joins one user's sockets on one address, whatever cluster).
# 127.0.0.0/16, where the host's own loopback services live, is outside the range.
HOST_SERVICE_RANGE = ipaddress.IPv4Network("127.64.0.0/10")
HOST_SERVICE_PREFIX = 16
CLUSTER_DOMAIN = "cluster.local"        # kubeadm's networking.dnsDomain
# Per-namespace sysctls of the fabric (never the host's): ICMP errors unlimited, so a Service
# without endpoints refuses every connection at once (kube-proxy's reject) rather than after
# 1-4 s; bridged replies through iptables/nftables, so conntrack un-DNATs a reply from a pod on
# the client's own bridge (br_netfilter, as on a real node).
ICMP_RATELIMIT = "net.ipv4.icmp_ratelimit"
BRIDGE_NF_CALL_IPTABLES = "net.bridge.bridge-nf-call-iptables"
NO_BR_NETFILTER = ("kubemu: the pod network has no br_netfilter (no /proc/sys/net/bridge in it): kube-proxy "
                   "masquerades Service traffic between pods of one node, whose servers then see the node's "
                   "bridge address as the client")
FABRIC_PEER = "host0"                   # the fabric's end of the host link
CAP_NET_ADMIN, CAP_SYS_ADMIN = 12, 21   # linux/capability.h
README_HINT = 'see README "Pod networking"'


class NetplanError(RuntimeError):
    """The pod network cannot be had as asked (one line, for the user)."""


# --- the mode -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Mode:
    kind: str          # CNI or HOST
    reason: str | None  # why HOST (None for CNI)


def network_mode(euid: int, cap_eff: int, missing_tools: Sequence[str], plugins_found: Collection[str],
                 requested: str | None, cni_bin_dirs: Sequence[str] = CNI_BIN_DIRS) -> Mode:
    """Pod networks (CNI) when asked for or possible, else the host's network with the first
    reason it is not possible. `cap_eff`: the effective capability set (CapEff of
    /proc/self/status). An explicit `--network cni` that cannot be had is an error."""
    if requested == HOST:
        return Mode(HOST, "kubemu up --network host")
    missing_caps = [name for name, bit in (("CAP_NET_ADMIN", CAP_NET_ADMIN), ("CAP_SYS_ADMIN", CAP_SYS_ADMIN))
                    if not cap_eff >> bit & 1]
    missing_plugins = [p for p in CNI_PLUGINS if p not in plugins_found]
    if missing_caps:
        reason = (("not root: " if euid != 0 else "") + " and ".join(missing_caps)
                  + (" is" if len(missing_caps) == 1 else " are") + " needed for pod networks")
    elif missing_tools:
        packages = ", ".join(dict.fromkeys(TOOLS.get(t, t) for t in missing_tools))
        reason = (f"{', '.join(missing_tools)} not found: pod networks need "
                  f"{'it' if len(missing_tools) == 1 else 'them'} ({packages})")
    elif missing_plugins:
        reason = (f"no CNI plugin {', '.join(missing_plugins)} in {':'.join(cni_bin_dirs)} "
                  "(Debian's containernetworking-plugins)")
    else:
        return Mode(CNI, None)
    if requested == CNI:
        raise NetplanError(f"--network cni: {reason}")
    return Mode(HOST, reason)


def host_network_line(reason: str) -> str:
    """What `kubemu up` says, once, when pods share the host's network."""
    return f"kubemu: pods share the host's network ({reason}); {README_HINT}"


# --- CIDRs ----------------------------------------------------------------------------------

def parse_cidr(text: str, flag: str) -> ipaddress.IPv4Network:
    """An IPv4 network as a flag gives it (host bits zero, as kubeadm requires)."""
    try:
        net = ipaddress.IPv4Network(text)
    except ValueError as exc:
        raise NetplanError(f"{flag} {text}: not an IPv4 CIDR ({exc})") from None
    if net.prefixlen > 28:
        raise NetplanError(f"{flag} {text}: too small for a cluster (at most /28)")
    return net


@dataclass(frozen=True)
class CidrChoice:
    cidr: str
    note: str | None  # said when the default was taken and another chosen


def _routes(routes: Iterable[str]) -> list[ipaddress.IPv4Network]:
    """Route destinations as `ip -j route` prints them ("default", "10.0.0.0/8", "192.0.2.2"),
    the default route left out: every address overlaps it."""
    nets = []
    for dst in routes:
        if dst == "default":
            continue
        try:
            nets.append(ipaddress.IPv4Network(dst, strict=False))
        except ValueError:
            continue
    return nets


def _clash(net: ipaddress.IPv4Network, taken: list[ipaddress.IPv4Network]) -> ipaddress.IPv4Network | None:
    return next((t for t in taken if t.prefixlen > 0 and t.overlaps(net)), None)


def _choose(flag: str, what: str, routes: Iterable[str], requested: str | None, kept: str | None,
            candidates: list[ipaddress.IPv4Network], avoid: Sequence[str] = ()) -> CidrChoice:
    taken = _routes(routes) + [ipaddress.IPv4Network(a) for a in avoid]
    if requested or kept:
        net = parse_cidr(requested or kept, flag)
        clash = _clash(net, taken)
        if clash is not None:
            whose = f"{flag} {net}" if requested else f"{what} {net} (this cluster's, kept from its last `up`)"
            raise NetplanError(f"{whose} overlaps the host's route to {clash}")
        return CidrChoice(str(net), None)
    default = candidates[0]
    for net in candidates:
        if _clash(net, taken) is None:
            note = None if net == default else (
                f"kubemu: {default} overlaps the host's route to {_clash(default, taken)}: "
                f"the {what} is {net} (choose with {flag})")
            return CidrChoice(str(net), note)
    raise NetplanError(f"no free {what} from {default} on: every candidate overlaps a host route "
                       f"(choose one with {flag})")


def choose_cluster_cidr(routes: Iterable[str], requested: str | None, kept: str | None = None) -> CidrChoice:
    """The pod network: `requested` (--pod-network-cidr) or `kept` (the cluster's from its last
    `up`: its nodes' podCIDRs are in it) if free, else 10.244.0.0/16 or the next free /16 up to
    10.255 (another kubemu cluster, or the user's LAN, may hold one). Overlapping a host route
    is an error for a requested or kept CIDR."""
    return _choose("--pod-network-cidr", "pod network", routes, requested, kept,
                   list(CLUSTER_RANGE.subnets(new_prefix=16)))


def choose_service_cidr(routes: Iterable[str], requested: str | None, cluster_cidr: str,
                        kept: str | None = None) -> CidrChoice:
    """The service network, as choose_cluster_cidr: 10.96.0.0/12, else the next free /12 of
    10.0.0.0/8 (wrapping round), never overlapping the cluster CIDR."""
    blocks = list(ipaddress.IPv4Network("10.0.0.0/8").subnets(new_prefix=12))
    first = blocks.index(ipaddress.IPv4Network(DEFAULT_SERVICE_CIDR))
    return _choose("--service-cidr", "service network", routes, requested, kept,
                   blocks[first:] + blocks[:first], avoid=[cluster_cidr])


def is_host_service_cidr(cidr: str | None) -> bool:
    """Whether `cidr` is one of the host mode's loopback blocks (an older kubemu's record may
    hold another range: that one is chosen anew)."""
    try:
        net = ipaddress.IPv4Network(cidr or "")
    except ValueError:
        return False
    return net.prefixlen == HOST_SERVICE_PREFIX and net.subnet_of(HOST_SERVICE_RANGE)


def choose_host_service_cidr(h8: str, bound: Iterable[str], kept: str | None = None) -> str:
    """The Services' loopback block of a cluster without pod networks: `kept` (the cluster's
    from its last `up`: its Services' ClusterIPs are in it) when it is such a block, else the
    block the state directory's hash `h8` names, or the next one (wrapping round) that holds no
    bound address (`bound`: the host's local socket addresses; another cluster's proxies listen
    on its ClusterIPs). Every block taken: the hash's own."""
    if kept is not None and is_host_service_cidr(kept):
        return kept
    blocks = list(HOST_SERVICE_RANGE.subnets(new_prefix=HOST_SERVICE_PREFIX))
    base, shift = int(HOST_SERVICE_RANGE.network_address), 32 - HOST_SERVICE_PREFIX
    taken = set()
    for text in bound:
        try:
            addr = ipaddress.IPv4Address(text)
        except ValueError:
            continue
        if addr in HOST_SERVICE_RANGE:
            taken.add((int(addr) - base) >> shift)
    start = int(h8, 16) % len(blocks)
    order = [(start + i) % len(blocks) for i in range(len(blocks))]
    return str(blocks[next((i for i in order if i not in taken), start)])


def node_mask_for(node_count: int, cluster_cidr: str) -> tuple[int, str | None]:
    """--node-cidr-mask-size: /24 per node unless the cluster CIDR holds fewer /24 blocks than
    nodes (hollow ones included: node IPAM gives every Node a block), then the largest block
    that fits them all, said in one line. One block is the host link's."""
    net = ipaddress.IPv4Network(cluster_cidr)
    for mask in range(max(DEFAULT_NODE_MASK, net.prefixlen + 1), SMALLEST_NODE_BLOCK + 1):
        if (1 << (mask - net.prefixlen)) - 1 >= node_count:
            if mask == DEFAULT_NODE_MASK:
                return mask, None
            return mask, (f"kubemu: {node_count} nodes do not fit {net} in /{DEFAULT_NODE_MASK} blocks: "
                          f"each node gets a /{mask} (up to {(1 << (32 - mask)) - 3} pods)")
    raise NetplanError(f"{node_count} nodes do not fit {net}, even in /{SMALLEST_NODE_BLOCK} blocks "
                       "(choose a larger --pod-network-cidr)")


@dataclass(frozen=True)
class HostLink:
    block: ipaddress.IPv4Network       # reserved: never a node's podCIDR
    host_addr: ipaddress.IPv4Address   # on the host's end of the veth
    fabric_addr: ipaddress.IPv4Address  # on the fabric's end


def host_link(cluster_cidr: str, node_mask: int) -> HostLink:
    """The host link of a cluster CIDR cut into /node_mask node blocks: its last block, the
    host at the block's last usable address and the fabric just below it."""
    net = ipaddress.IPv4Network(cluster_cidr)
    size = 1 << (32 - max(node_mask, net.prefixlen))
    block = ipaddress.IPv4Network((int(net.broadcast_address) + 1 - size, 32 - size.bit_length() + 1))
    return HostLink(block, block.broadcast_address - 1, block.broadcast_address - 2)


def bridge_name(pod_cidr: str, cluster_cidr: str) -> str:
    """`kmbr<i>`, i the index of the node's podCIDR among the cluster CIDR's blocks of its size:
    unique per node inside the cluster, and well within IFNAMSIZ."""
    pod, cluster = ipaddress.IPv4Network(pod_cidr), ipaddress.IPv4Network(cluster_cidr)
    if not pod.subnet_of(cluster):
        raise ValueError(f"podCIDR {pod} is not inside the cluster CIDR {cluster}")
    return f"kmbr{(int(pod.network_address) - int(cluster.network_address)) >> (32 - pod.prefixlen)}"


# The service CIDR's well-known addresses, as kube-apiserver and kubeadm take them: the
# `kubernetes` Service gets the first, kubeadm's `kube-dns` Service the tenth.
KUBERNETES_SERVICE_INDEX = 1
DNS_SERVICE_INDEX = 10


def service_ip(service_cidr: str, index: int) -> str:
    """The `index`-th address of the service CIDR (1 = its first usable address)."""
    net = ipaddress.IPv4Network(service_cidr)
    if not 0 < index < net.num_addresses - 1:
        raise ValueError(f"the service CIDR {net} has no address number {index}")
    return str(net.network_address + index)


# --- what `up` records ----------------------------------------------------------------------

@dataclass(frozen=True)
class Record:
    """<state>/network.json: what `up` chose and made, what `down` removes. In host mode the
    CIDRs of an earlier pod network are kept (the nodes' podCIDRs in the store are in them)."""
    mode: str
    reason: str | None = None
    netns: str | None = None
    netns_path: str | None = None
    cluster_cidr: str | None = None
    service_cidr: str | None = None
    node_mask: int | None = None
    host_link: str | None = None
    host_addr: str | None = None
    fabric_addr: str | None = None
    br_netfilter: bool = False        # the fabric has /proc/sys/net/bridge: bridged traffic can pass nftables

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> Record | None:
        """None for anything `up` did not write."""
        if not isinstance(data, dict) or data.get("mode") not in (CNI, HOST):
            return None
        fields = {k: data.get(k, f.default) for k, f in cls.__dataclass_fields__.items()}
        # exact types: a "false" string is truthy, a bool is an int
        if any(type(fields[k]) not in types for k, types in _RECORD_TYPES.items()):
            return None
        rec = cls(**fields)
        if rec.mode == HOST and not rec.service_cidr:
            return None  # the components' flags need the Services' block: `up` chooses one
        if rec.mode == CNI:
            names = (rec.netns, rec.host_link, rec.netns_path)
            if not all(isinstance(n, str) and n for n in names) or not rec.netns.startswith("kubemu-") \
                    or not rec.host_link.startswith("km-"):
                return None  # never delete by a record naming what kubemu does not make
        return rec


_OPT_STR = (str, type(None))
_RECORD_TYPES = {"mode": (str,), "reason": _OPT_STR, "netns": _OPT_STR, "netns_path": _OPT_STR,
                 "cluster_cidr": _OPT_STR, "service_cidr": _OPT_STR, "node_mask": (int, type(None)),
                 "host_link": _OPT_STR, "host_addr": _OPT_STR, "fabric_addr": _OPT_STR,
                 "br_netfilter": (bool,)}


def fabric_names(h8: str) -> tuple[str, str]:
    """The fabric namespace's and host link's names for a state directory's hash (IFNAMSIZ: 15)."""
    return f"kubemu-{h8}", f"km-{h8}"


def cni_record(h8: str, cluster_cidr: str, service_cidr: str, node_mask: int, run_netns: str) -> Record:
    netns, link = fabric_names(h8)
    hl = host_link(cluster_cidr, node_mask)
    return Record(CNI, None, netns, f"{run_netns}/{netns}", cluster_cidr, service_cidr, node_mask, link,
                  str(hl.host_addr), str(hl.fabric_addr))


def host_record(reason: str, kept: Record | None, h8: str, bound: Iterable[str] = ()) -> Record:
    """Services on the cluster's loopback block (choose_host_service_cidr: `h8` the state
    directory's hash, `bound` the host's bound addresses); an earlier pod network's CIDRs kept
    (not its service CIDR: no pod network could route the host mode's)."""
    kept_block = kept.service_cidr if kept is not None and kept.mode == HOST else None
    block = choose_host_service_cidr(h8, bound, kept_block)
    if kept is None:
        return Record(HOST, reason, service_cidr=block)
    return Record(HOST, reason, cluster_cidr=kept.cluster_cidr, service_cidr=block, node_mask=kept.node_mask)


def kept_service_cidr(kept: Record | None) -> str | None:
    """The service CIDR a new pod network keeps from the last `up`: a pod network's only."""
    return kept.service_cidr if kept is not None and kept.mode == CNI else None


# --- the steps ------------------------------------------------------------------------------

def _ip(netns: str | None, *args: str) -> list[str]:
    return ["ip", *(("-n", netns) if netns else ()), *args]


@dataclass(frozen=True)
class AddNetns:
    name: str

    def argv(self) -> list[str]:
        return ["ip", "netns", "add", self.name]


@dataclass(frozen=True)
class SetSysctl:
    netns: str
    key: str
    value: str

    def argv(self) -> list[str]:  # never run in the host: the key is the fabric's
        return ["ip", "netns", "exec", self.netns, "sysctl", "-qw", f"{self.key}={self.value}"]


@dataclass(frozen=True)
class AddVeth:
    name: str
    peer: str
    peer_netns: str

    def argv(self) -> list[str]:
        return ["ip", "link", "add", self.name, "type", "veth", "peer", "name", self.peer, "netns", self.peer_netns]


@dataclass(frozen=True)
class AddAddr:
    netns: str | None
    dev: str
    addr: str

    def argv(self) -> list[str]:
        return _ip(self.netns, "addr", "add", self.addr, "dev", self.dev)


@dataclass(frozen=True)
class LinkUp:
    netns: str | None
    dev: str

    def argv(self) -> list[str]:
        return _ip(self.netns, "link", "set", self.dev, "up")


@dataclass(frozen=True)
class AddRoute:
    netns: str | None
    dst: str
    dev: str | None = None
    via: str | None = None
    src: str | None = None
    unreachable: bool = False

    def argv(self) -> list[str]:
        args = ["route", "add"] + (["unreachable"] if self.unreachable else []) + [self.dst]
        if self.via:
            args += ["via", self.via]
        if self.dev:
            args += ["dev", self.dev]
        if self.via:
            args += ["onlink"]  # the fabric's address is on no subnet of the link: a /32 each end
        if self.src:
            args += ["src", self.src]
        return _ip(self.netns, *args)


@dataclass(frozen=True)
class DelLink:
    """The host's end of the veth; the fabric's end and every route through it go with it."""
    dev: str

    def argv(self) -> list[str]:
        return ["ip", "link", "del", self.dev]


@dataclass(frozen=True)
class DelNetns:
    name: str

    def argv(self) -> list[str]:
        return ["ip", "netns", "del", self.name]


@dataclass(frozen=True)
class ReleaseRunNetns:
    """Unmount /run/netns (and remove it) if kubemu's `ip netns add` made it and no namespace is
    left in it, which the shell checks at the time. The claim is the machine's, not a cluster's:
    clusters share /run/netns, so whichever goes last releases it, not the one that made it."""


Step = AddNetns | SetSysctl | AddVeth | AddAddr | LinkUp | AddRoute | DelLink | DelNetns | ReleaseRunNetns


def fabric_plan(rec: Record) -> list[Step]:
    """The steps that build a cluster's fabric; the host's routes last, once the fabric behind
    them is complete. The first step makes the namespace: the shell looks into it then for
    /proc/sys/net/bridge (rec.br_netfilter), which decides one sysctl."""
    ns, link, host, fabric = rec.netns, rec.host_link, rec.host_addr, rec.fabric_addr
    bridge = [SetSysctl(ns, BRIDGE_NF_CALL_IPTABLES, "1")] if rec.br_netfilter else []
    return [AddNetns(ns), LinkUp(ns, "lo"), SetSysctl(ns, "net.ipv4.ip_forward", "1"),
            SetSysctl(ns, ICMP_RATELIMIT, "0"), *bridge,
            AddVeth(link, FABRIC_PEER, ns),
            AddAddr(None, link, f"{host}/32"), LinkUp(None, link),
            AddAddr(ns, FABRIC_PEER, f"{fabric}/32"), LinkUp(ns, FABRIC_PEER),
            AddRoute(ns, f"{host}/32", dev=FABRIC_PEER),
            AddRoute(ns, rec.cluster_cidr, unreachable=True), AddRoute(ns, rec.service_cidr, unreachable=True),
            AddRoute(None, rec.cluster_cidr, dev=link, via=fabric, src=host),
            AddRoute(None, rec.service_cidr, dev=link, via=fabric, src=host)]


def teardown_plan(rec: Record) -> list[Step]:
    """The steps that remove what fabric_plan made (each one skipped when its object is gone)."""
    if rec.mode != CNI:
        return []
    return [DelLink(rec.host_link), DelNetns(rec.netns), ReleaseRunNetns()]


def undoes(step: Step) -> type:
    """The building step whose object a teardown step removes: a failed build removes only
    what it made itself."""
    return AddVeth if isinstance(step, DelLink) else AddNetns


# --- what the components are told -----------------------------------------------------------

def service_cidr(rec: Record) -> str:
    """The Services' addresses: the pod network's service CIDR, or the cluster's loopback block."""
    if rec.mode != CNI:
        return rec.service_cidr
    return rec.service_cidr or DEFAULT_SERVICE_CIDR


def dns_service_ip(rec: Record) -> str:
    """The kube-dns Service's ClusterIP (kubeadm's: the service CIDR's tenth address)."""
    return service_ip(service_cidr(rec), DNS_SERVICE_INDEX)


def kubelet_flags(rec: Record, node_dir: str) -> list[str]:
    """The kubelet's network flags (kubelet/__main__.py parses them). Without pod networks no
    --cluster-dns: pods share the host's network and keep its resolv.conf (the kubelet's
    MissingClusterDNS case); the kube-dns ClusterIP answers on port 53 only where the userspace
    proxy may bind it (root)."""
    if rec.mode != CNI:
        return ["--network-mode", HOST, "--network-mode-reason", rec.reason or ""]
    return ["--network-mode", CNI, "--fabric-netns", rec.netns_path,
            "--cni-conf-dir", f"{node_dir}/cni/net.d", "--cni-bin-dir", ":".join(CNI_BIN_DIRS),
            "--cluster-cidr", rec.cluster_cidr, "--service-cidr", service_cidr(rec),
            "--cluster-dns", dns_service_ip(rec), "--cluster-domain", CLUSTER_DOMAIN]


def advertise_address(rec: Record) -> str:
    """The apiserver's address for pods (the `kubernetes` Service's endpoint): the host's end
    of the host link, which every pod reaches through the fabric; loopback without pod networks."""
    return rec.host_addr if rec.mode == CNI and rec.host_addr else "127.0.0.1"


def apiserver_flags(rec: Record) -> list[str]:
    """kube-apiserver's Service flags."""
    return ["--service-cluster-ip-range", service_cidr(rec), "--advertise-address", advertise_address(rec)]


# Every flag kube_proxy_flags may give: what of kube-proxy's command line depends on the network.
KUBE_PROXY_NETWORK_FLAGS = ("--proxy-mode", "--cluster-cidr", "--fabric-netns", "--host-side-node",
                            "--host-interface", "--host-address", "--nodeport-addresses")


def kube_proxy_flags(rec: Record, host_side_node: str) -> list[str]:
    """kube-proxy's network flags, the same for every node (one DaemonSet template). With pod
    networks: nftables rules in the fabric, each node's proxy scoped to its own bridge; the proxy
    of `host_side_node` also takes what arrives from the host link, and NodePorts on the fabric's
    address there. Without: the userspace proxy on loopback, NodePorts on 127.0.0.1 by that
    node's proxy only (the nodes share the host's address, and a NodePort listener is one proxy's
    alone: components/kube_proxy/userspace_plan.py). Each proxy drops the host side's flags
    unless it runs on `host_side_node` (components/kube_proxy/__main__.py: for_this_node)."""
    if rec.mode != CNI:
        return ["--proxy-mode", "userspace", "--host-side-node", host_side_node,
                "--nodeport-addresses", "127.0.0.1/32"]
    return ["--proxy-mode", "nftables", "--cluster-cidr", rec.cluster_cidr, "--fabric-netns", rec.netns_path,
            "--host-side-node", host_side_node, "--host-interface", FABRIC_PEER, "--host-address", rec.fabric_addr]


def controller_manager_flags(rec: Record) -> list[str]:
    """kube-controller-manager's node IPAM flags: only when pods get networks."""
    if rec.mode != CNI:
        return []
    return ["--allocate-node-cidrs", "--cluster-cidr", rec.cluster_cidr,
            "--service-cluster-ip-range", rec.service_cidr, "--node-cidr-mask-size", str(rec.node_mask)]
