"""kubemu/netplan.py: the pod network's decisions, without the machine: the mode, the CIDRs
against the host's routes, node block sizes, the host link, the fabric's steps."""
from __future__ import annotations

import pytest

from kubemu import netplan
from kubemu.netplan import CNI, HOST, NetplanError, Record

ALL_CAPS = (1 << netplan.CAP_NET_ADMIN) | (1 << netplan.CAP_SYS_ADMIN)
PLUGINS = set(netplan.CNI_PLUGINS)


@pytest.mark.parametrize("euid, caps, tools, plugins, requested, kind, reason", [
    (0, ALL_CAPS, [], PLUGINS, None, CNI, None),
    (0, ALL_CAPS, [], PLUGINS, CNI, CNI, None),
    (0, ALL_CAPS, [], PLUGINS, HOST, HOST, "kubemu up --network host"),
    (1000, 0, [], PLUGINS, None, HOST, "not root: CAP_NET_ADMIN and CAP_SYS_ADMIN are needed for pod networks"),
    (1000, 1 << netplan.CAP_SYS_ADMIN, [], PLUGINS, None, HOST,
     "not root: CAP_NET_ADMIN is needed for pod networks"),
    (1000, ALL_CAPS, [], PLUGINS, None, CNI, None),  # capabilities, not the uid, are what counts
    (0, 1 << netplan.CAP_NET_ADMIN, [], PLUGINS, None, HOST, "CAP_SYS_ADMIN is needed for pod networks"),
    (0, ALL_CAPS, ["ip", "nsenter"], PLUGINS, None, HOST,
     "ip, nsenter not found: pod networks need them (iproute2, util-linux)"),
    (0, ALL_CAPS, ["nft"], PLUGINS, None, HOST,  # kube-proxy's rules live in the fabric
     "nft not found: pod networks need it (nftables)"),
    (0, ALL_CAPS, [], {"loopback"}, None, HOST,
     "no CNI plugin bridge, host-local in /usr/lib/cni:/opt/cni/bin (Debian's containernetworking-plugins)"),
    (1000, 0, ["ip"], set(), HOST, HOST, "kubemu up --network host"),  # asked for: no other reason
])
def test_network_mode(euid, caps, tools, plugins, requested, kind, reason):
    assert netplan.network_mode(euid, caps, tools, plugins, requested) == netplan.Mode(kind, reason)


def test_pod_networks_need_nft():
    """kube-proxy's rules live in the fabric: without nft, no pod networks (one fallback path)."""
    assert netplan.TOOLS["nft"] == "nftables"


def test_network_cni_asked_for_but_impossible_is_an_error():
    with pytest.raises(NetplanError, match=r"^--network cni: not root: CAP_NET_ADMIN and CAP_SYS_ADMIN are needed"):
        netplan.network_mode(1000, 0, [], PLUGINS, CNI)


def test_the_host_network_line():
    assert netplan.host_network_line("not root: CAP_NET_ADMIN is needed for pod networks") == (
        "kubemu: pods share the host's network (not root: CAP_NET_ADMIN is needed for pod networks); "
        'see README "Pod networking"')


HOST_ROUTES = ["default", "192.0.2.0/24", "192.0.2.2", "127.0.0.0/8", "127.0.0.1"]


@pytest.mark.parametrize("routes, cidr, moved", [
    (HOST_ROUTES, "10.244.0.0/16", False),
    (HOST_ROUTES + ["10.244.0.0/16"], "10.245.0.0/16", True),               # another kubemu cluster's
    (HOST_ROUTES + ["10.244.0.0/16", "10.245.0.0/16"], "10.246.0.0/16", True),
    (HOST_ROUTES + ["10.0.0.0/8"], None, True),                              # a LAN holding all of 10/8
    (HOST_ROUTES + ["10.244.7.9"], "10.245.0.0/16", True),                   # a host address (local table)
    (HOST_ROUTES + ["10.240.0.0/12"], None, True),                          # 10.244-10.255 all taken
])
def test_choose_cluster_cidr(routes, cidr, moved):
    if cidr is None:
        with pytest.raises(NetplanError, match=r"^no free pod network from 10\.244\.0\.0/16 on: .*--pod-network-cidr"):
            netplan.choose_cluster_cidr(routes, None)
        return
    choice = netplan.choose_cluster_cidr(routes, None)
    assert choice.cidr == cidr
    if moved:
        assert choice.note.startswith("kubemu: 10.244.0.0/16 overlaps the host's route to ")
        assert choice.note.endswith(f": the pod network is {cidr} (choose with --pod-network-cidr)")
    else:
        assert choice.note is None


def test_a_requested_or_kept_cidr_is_taken_as_is_or_refused():
    routes = HOST_ROUTES + ["10.244.0.0/16"]
    assert netplan.choose_cluster_cidr(routes, "10.200.0.0/16") == netplan.CidrChoice("10.200.0.0/16", None)
    with pytest.raises(NetplanError, match=r"^--pod-network-cidr 10\.244\.0\.0/20 overlaps the host's route to "
                                           r"10\.244\.0\.0/16$"):
        netplan.choose_cluster_cidr(routes, "10.244.0.0/20")
    with pytest.raises(NetplanError, match=r"^pod network 10\.244\.0\.0/16 \(this cluster's, kept from its last "
                                           r"`up`\) overlaps"):
        netplan.choose_cluster_cidr(routes, None, kept="10.244.0.0/16")
    assert netplan.choose_cluster_cidr(HOST_ROUTES, None, kept="10.250.0.0/16").cidr == "10.250.0.0/16"
    assert netplan.choose_cluster_cidr(HOST_ROUTES, "10.9.0.0/16", kept="10.250.0.0/16").cidr == "10.9.0.0/16"


@pytest.mark.parametrize("text, error", [
    ("10.244.0.1/16", "has host bits set"), ("fd00::/64", "not an IPv4 CIDR"), ("banana", "not an IPv4 CIDR"),
    ("10.0.0.0/30", "too small for a cluster"),
])
def test_parse_cidr_refuses(text, error):
    with pytest.raises(NetplanError, match=rf"^--pod-network-cidr {text}: .*{error}"):
        netplan.parse_cidr(text, "--pod-network-cidr")


def test_choose_service_cidr():
    assert netplan.choose_service_cidr(HOST_ROUTES, None, "10.244.0.0/16") == netplan.CidrChoice("10.96.0.0/12", None)
    taken = netplan.choose_service_cidr(HOST_ROUTES + ["10.100.0.0/16"], None, "10.244.0.0/16")
    assert taken.cidr == "10.112.0.0/12" and "the service network is 10.112.0.0/12 (choose with --service-cidr)" \
        in taken.note
    # never the cluster CIDR: a pod network inside 10.96/12 moves the services on
    assert netplan.choose_service_cidr(HOST_ROUTES, None, "10.97.0.0/16").cidr == "10.112.0.0/12"
    # wrapping round 10/8: everything from 10.96 up is taken
    routes = HOST_ROUTES + [f"10.{i}.0.0/12" for i in range(96, 256, 16)]
    assert netplan.choose_service_cidr(routes, None, "10.244.0.0/16").cidr == "10.0.0.0/12"
    with pytest.raises(NetplanError, match=r"^--service-cidr 10\.96\.0\.0/12 overlaps the host's route to 10\.100"):
        netplan.choose_service_cidr(HOST_ROUTES + ["10.100.0.0/16"], "10.96.0.0/12", "10.244.0.0/16")


@pytest.mark.parametrize("nodes, cidr, mask, said", [
    (1, "10.244.0.0/16", 24, False),
    (255, "10.244.0.0/16", 24, False),   # 256 blocks, the last the host link's
    (256, "10.244.0.0/16", 25, True),
    (1001, "10.244.0.0/16", 26, True),   # bench reconcile: 1000 hollow nodes and node-0
    (5064, "10.244.0.0/16", 29, True),   # the CLI's most: 64 nodes and 5000 hollow ones
    (3, "10.9.0.0/24", 26, True),        # a small requested CIDR: blocks under /24 at once
    (15, "10.9.0.0/20", 24, False),
])
def test_node_mask_for(nodes, cidr, mask, said):
    got, note = netplan.node_mask_for(nodes, cidr)
    assert got == mask
    assert (note is not None) == said
    if said:
        assert note == (f"kubemu: {nodes} nodes do not fit {cidr} in /24 blocks: each node gets a /{mask} "
                        f"(up to {2 ** (32 - mask) - 3} pods)")


def test_too_many_nodes_is_an_error():
    with pytest.raises(NetplanError, match=r"^40 nodes do not fit 10\.9\.0\.0/24, even in /29 blocks"):
        netplan.node_mask_for(40, "10.9.0.0/24")


@pytest.mark.parametrize("cidr, mask, block, host, fabric", [
    ("10.244.0.0/16", 24, "10.244.255.0/24", "10.244.255.254", "10.244.255.253"),
    ("10.244.0.0/16", 26, "10.244.255.192/26", "10.244.255.254", "10.244.255.253"),
    ("10.9.0.0/20", 24, "10.9.15.0/24", "10.9.15.254", "10.9.15.253"),
])
def test_host_link(cidr, mask, block, host, fabric):
    hl = netplan.host_link(cidr, mask)
    assert (str(hl.block), str(hl.host_addr), str(hl.fabric_addr)) == (block, host, fabric)


def record() -> Record:
    return netplan.cni_record("abcd1234", "10.244.0.0/16", "10.96.0.0/12", 24, "/run/netns")


def test_fabric_plan_is_the_ip_commands_in_order():
    rec = record()
    assert [" ".join(s.argv()) for s in netplan.fabric_plan(rec)] == [
        "ip netns add kubemu-abcd1234",
        "ip -n kubemu-abcd1234 link set lo up",
        "ip netns exec kubemu-abcd1234 sysctl -qw net.ipv4.ip_forward=1",
        "ip netns exec kubemu-abcd1234 sysctl -qw net.ipv4.icmp_ratelimit=0",
        "ip link add km-abcd1234 type veth peer name host0 netns kubemu-abcd1234",
        "ip addr add 10.244.255.254/32 dev km-abcd1234",
        "ip link set km-abcd1234 up",
        "ip -n kubemu-abcd1234 addr add 10.244.255.253/32 dev host0",
        "ip -n kubemu-abcd1234 link set host0 up",
        "ip -n kubemu-abcd1234 route add 10.244.255.254/32 dev host0",
        "ip -n kubemu-abcd1234 route add unreachable 10.244.0.0/16",
        "ip -n kubemu-abcd1234 route add unreachable 10.96.0.0/12",
        "ip route add 10.244.0.0/16 via 10.244.255.253 dev km-abcd1234 onlink src 10.244.255.254",
        "ip route add 10.96.0.0/12 via 10.244.255.253 dev km-abcd1234 onlink src 10.244.255.254",
    ]


def test_the_fabric_calls_nftables_for_bridged_traffic_where_it_has_br_netfilter():
    """The shell looks into the new namespace (the plan's first step) for /proc/sys/net/bridge;
    with it, the fabric's bridged replies pass conntrack, so kube-proxy's DNAT is undone for a
    pod answering a client on its own bridge."""
    without = netplan.fabric_plan(record())
    with_br = netplan.fabric_plan(Record(**{**record().to_json(), "br_netfilter": True}))
    assert with_br[0] == without[0] == netplan.AddNetns("kubemu-abcd1234")
    assert [s for s in with_br if s not in without] == [
        netplan.SetSysctl("kubemu-abcd1234", "net.bridge.bridge-nf-call-iptables", "1")]


def test_no_step_touches_the_host_s_forwarding_or_adds_a_default_route():
    for step in netplan.fabric_plan(record()):
        argv = step.argv()
        if isinstance(step, netplan.SetSysctl):
            assert argv[:4] == ["ip", "netns", "exec", "kubemu-abcd1234"]
        assert "default" not in argv and "0.0.0.0/0" not in argv


def test_teardown_plan():
    rec = record()
    # every cluster's teardown may release /run/netns: the last one does, whichever made it
    assert netplan.teardown_plan(rec) == [netplan.DelLink("km-abcd1234"), netplan.DelNetns("kubemu-abcd1234"),
                                          netplan.ReleaseRunNetns()]
    assert netplan.teardown_plan(Record(HOST, "kubemu up --network host")) == []
    assert [netplan.undoes(s) for s in netplan.teardown_plan(rec)] == [
        netplan.AddVeth, netplan.AddNetns, netplan.AddNetns]


@pytest.mark.parametrize("data", [
    None, [], {"mode": "bridge"},
    {"mode": "cni", "netns": "docker0", "netns_path": "/run/netns/docker0", "host_link": "km-x"},
    {"mode": "cni", "netns": "kubemu-x", "netns_path": "/run/netns/kubemu-x", "host_link": "eth0"},
    {"mode": "cni", "netns": "kubemu-x", "host_link": "km-x"},
    {"mode": "cni", "unknown": 1},
])
def test_a_record_kubemu_did_not_write_is_no_record(data):
    assert Record.from_json(data) is None


def test_a_record_round_trips():
    rec = record()
    assert Record.from_json(rec.to_json()) == rec
    kept = netplan.host_record("not root", rec, "abcd1234")
    assert Record.from_json(kept.to_json()) == kept
    assert (kept.mode, kept.cluster_cidr, kept.node_mask, kept.netns) == (HOST, "10.244.0.0/16", 24, None)
    br = Record(**{**rec.to_json(), "br_netfilter": True})
    assert Record.from_json(br.to_json()) == br
    older = {k: v for k, v in rec.to_json().items() if k != "br_netfilter"}  # an older kubemu's record
    assert Record.from_json(older) == rec


def test_services_live_on_a_loopback_block_without_pod_networks():
    """Every ClusterIP a local address: a userspace proxy can bind it, the host reaches it."""
    host = netplan.host_record("not root", None, "00000005")
    assert host.service_cidr == "127.69.0.0/16"  # the hash's block of 127.64.0.0/10
    assert netplan.service_cidr(host) == "127.69.0.0/16"
    assert netplan.service_cidr(netplan.host_record("not root", record(), "00000005")) == "127.69.0.0/16"
    assert netplan.dns_service_ip(host) == "127.69.0.10"
    assert netplan.service_ip(host.service_cidr, netplan.KUBERNETES_SERVICE_INDEX) == "127.69.0.1"
    assert netplan.service_cidr(record()) == "10.96.0.0/12" and netplan.dns_service_ip(record()) == "10.96.0.10"
    # a pod network after a host-mode `up` keeps the pod CIDR, not the loopback service block
    assert netplan.kept_service_cidr(netplan.host_record("not root", record(), "00000005")) is None
    assert netplan.kept_service_cidr(record()) == "10.96.0.0/12"
    assert netplan.kept_service_cidr(None) is None


def test_each_host_mode_cluster_has_a_loopback_block_of_its_own():
    """Two clusters on one machine handing out the same ClusterIPs take each other's traffic:
    the state directory's hash names a /16 of 127.64.0.0/10, never 127.0.0.0/16."""
    a, b = netplan.host_record("r", None, "abcd1234"), netplan.host_record("r", None, "abcd1235")
    assert a.service_cidr != b.service_cidr
    blocks = {netplan.choose_host_service_cidr(f"{i:08x}", ()) for i in range(64)}
    assert len(blocks) == 64 and all(netplan.is_host_service_cidr(b) for b in blocks)
    assert netplan.choose_host_service_cidr("0000003f", ()) == "127.127.0.0/16"
    assert netplan.choose_host_service_cidr("00000040", ()) == "127.64.0.0/16"  # wraps round


def test_a_block_with_a_bound_address_is_skipped():
    """Another cluster's proxies listen on its ClusterIPs: the next block, wrapping round."""
    bound = ["127.0.0.1", "127.69.0.1", "::1", "10.0.0.1", "127.70.255.254"]
    assert netplan.choose_host_service_cidr("00000005", bound) == "127.71.0.0/16"
    assert netplan.choose_host_service_cidr("0000003f", ["127.127.0.10"]) == "127.64.0.0/16"
    every = [f"127.{64 + i}.0.1" for i in range(64)]
    assert netplan.choose_host_service_cidr("00000005", every) == "127.69.0.0/16"  # all taken: its own
    assert netplan.host_record("r", None, "00000005", bound).service_cidr == "127.71.0.0/16"


def test_the_block_is_kept_across_ups():
    """The Services in the store have their ClusterIPs in it; an older kubemu's range is not
    such a block and is chosen anew."""
    assert netplan.choose_host_service_cidr("00000005", ["127.90.0.1"], kept="127.90.0.0/16") == "127.90.0.0/16"
    earlier = netplan.host_record("r", None, "00000001")
    again = netplan.host_record("r", earlier, "00000005", ["127.65.0.1"])
    assert again.service_cidr == earlier.service_cidr == "127.65.0.0/16"
    for old in ("127.96.0.0/12", "127.0.0.0/16", "10.96.0.0/12", "nonsense", None):
        assert netplan.choose_host_service_cidr("00000005", (), kept=old) == "127.69.0.0/16"
    older = Record(HOST, "r", service_cidr="127.96.0.0/12")
    assert netplan.host_record("r", older, "00000005").service_cidr == "127.69.0.0/16"
    assert Record.from_json({"mode": "host", "reason": "r"}) is None  # no block: `up` chooses one


def test_the_components_flags():
    rec = record()
    assert netplan.kubelet_flags(rec, "/s/nodes/node-1") == [
        "--network-mode", "cni", "--fabric-netns", "/run/netns/kubemu-abcd1234",
        "--cni-conf-dir", "/s/nodes/node-1/cni/net.d", "--cni-bin-dir", "/usr/lib/cni:/opt/cni/bin",
        "--cluster-cidr", "10.244.0.0/16", "--service-cidr", "10.96.0.0/12",
        "--cluster-dns", "10.96.0.10", "--cluster-domain", "cluster.local"]
    assert netplan.apiserver_flags(rec) == [
        "--service-cluster-ip-range", "10.96.0.0/12", "--advertise-address", "10.244.255.254"]
    # one set for every node: the host side's flags apply in node-0's proxy only (--host-side-node)
    assert netplan.kube_proxy_flags(rec, "node-0") == [
        "--proxy-mode", "nftables", "--cluster-cidr", "10.244.0.0/16", "--fabric-netns", "/run/netns/kubemu-abcd1234",
        "--host-side-node", "node-0", "--host-interface", "host0", "--host-address", "10.244.255.253"]
    assert netplan.controller_manager_flags(rec) == [
        "--allocate-node-cidrs", "--cluster-cidr", "10.244.0.0/16", "--service-cluster-ip-range", "10.96.0.0/12",
        "--node-cidr-mask-size", "24"]
    host = netplan.host_record("not root: CAP_NET_ADMIN is needed for pod networks", None, "00000005")
    assert netplan.kubelet_flags(host, "/s/nodes/node-1") == [  # no --cluster-dns: the node's resolv.conf
        "--network-mode", "host", "--network-mode-reason", "not root: CAP_NET_ADMIN is needed for pod networks"]
    assert netplan.apiserver_flags(host) == [
        "--service-cluster-ip-range", "127.69.0.0/16", "--advertise-address", "127.0.0.1"]
    # NodePorts on 127.0.0.1 by node-0's proxy alone (a NodePort listener is not shared)
    assert netplan.kube_proxy_flags(host, "node-0") == [
        "--proxy-mode", "userspace", "--host-side-node", "node-0", "--nodeport-addresses", "127.0.0.1/32"]
    assert netplan.controller_manager_flags(host) == []


@pytest.mark.parametrize("field, value", [
    ("node_mask", "24"), ("node_mask", True),
    ("cluster_cidr", 10), ("mode", ["cni"]), ("reason", {}), ("br_netfilter", "true"),
])
def test_a_field_of_the_wrong_type_is_no_record(field, value):
    assert Record.from_json({**record().to_json(), field: value}) is None


def test_every_record_field_has_its_type():
    assert netplan._RECORD_TYPES.keys() == Record.__dataclass_fields__.keys()


def test_bridge_name_is_the_block_index():
    assert netplan.bridge_name("10.244.0.0/24", "10.244.0.0/16") == "kmbr0"
    assert netplan.bridge_name("10.244.7.0/24", "10.244.0.0/16") == "kmbr7"
    assert netplan.bridge_name("10.245.255.128/25", "10.244.0.0/15") == "kmbr1023"
    with pytest.raises(ValueError, match="not inside the cluster CIDR"):
        netplan.bridge_name("10.9.0.0/24", "10.244.0.0/16")


def test_service_ips_are_counted_from_the_cidrs_first_address():
    assert netplan.service_ip("10.96.0.0/12", netplan.KUBERNETES_SERVICE_INDEX) == "10.96.0.1"
    assert netplan.service_ip("10.96.0.0/12", netplan.DNS_SERVICE_INDEX) == "10.96.0.10"
    with pytest.raises(ValueError, match="no address number 10"):
        netplan.service_ip("10.96.0.0/29", 10)
