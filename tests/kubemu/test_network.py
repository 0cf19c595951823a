"""kubemu/network.py with the real `ip`: the fabric `up` builds, what `down` leaves (nothing),
the fallback to the host's network when a step fails, two clusters at once, the record.

Other clusters may run on the machine meanwhile: every comparison is of names carrying the
test's own state-directory hash."""
from __future__ import annotations

import errno
import ipaddress
import json
import logging
import os
import shutil
import socket
import subprocess
import sys

import pytest

from kubemu import netplan, network
from kubemu.netplan import CNI, HOST, NetplanError
from tests.conftest import DEADLINE

HOST_FORWARD = "/proc/sys/net/ipv4/ip_forward"


def _why_not() -> str | None:
    mode = network.probe(None)
    return None if mode.kind == CNI else f"pod networks cannot be made here: {mode.reason}"


needs_cni = pytest.mark.skipif(_why_not() is not None, reason=str(_why_not()))


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=DEADLINE)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def snapshot(h8: str) -> dict[str, list[str]]:
    """What of a state directory's network the host shows: `ip netns`, `ip -br link`, `ip route`
    (every table), and the nsfs mounts that keep a namespace alive."""
    with open("/proc/mounts") as f:
        mounts = [line for line in f if line.split()[2] == "nsfs" and h8 in line]
    return {"netns": [line for line in ip("netns", "list").stdout.splitlines() if h8 in line],
            "links": [line.split()[0] for line in ip("-br", "link").stdout.splitlines() if h8 in line],
            "routes": [line for line in ip("route", "show", "table", "all").stdout.splitlines() if h8 in line],
            "mounts": mounts}


def host_forwarding() -> str:
    with open(HOST_FORWARD) as f:
        return f.read()


def remove(root) -> list[str]:
    """Tear down by name whatever a test made for a state directory, whatever its record says
    (a failing test may have overwritten it); what was left."""
    netns, link = netplan.fabric_names(network.state_hash(root))
    named = netplan.Record(CNI, netns=netns, netns_path=f"{network.RUN_NETNS}/{netns}", host_link=link)
    left = network.leftovers(named)
    network.down(root)
    for step in netplan.teardown_plan(named):
        network.run_step(step)
    return left


@pytest.fixture
def fabric(state_dir):
    """A state directory whose network is torn down at the end, whatever the test did."""
    yield state_dir
    assert remove(state_dir) == []


@needs_cni
def test_setup_builds_the_fabric_and_down_leaves_nothing(fabric):
    h8 = network.state_hash(fabric)
    before, forwarding = snapshot(h8), host_forwarding()
    rec = network.setup(fabric)
    assert rec.mode == CNI and rec.netns == f"kubemu-{h8}" and rec.host_link == f"km-{h8}"
    assert json.loads((fabric / "network.json").read_text()) == rec.to_json()

    assert ip("netns", "list").stdout.split().count(rec.netns) == 1
    assert ip("netns", "exec", rec.netns, "cat", HOST_FORWARD).stdout == "1\n"  # the fabric forwards
    assert host_forwarding() == forwarding                                      # the host never does
    assert ip("-n", rec.netns, "route", "show", "default").stdout == ""         # nothing leaves the cluster
    routes = {r["dst"]: r for r in json.loads(ip("-j", "route", "show", "dev", rec.host_link).stdout)}
    for cidr in (rec.cluster_cidr, rec.service_cidr):
        assert routes[cidr]["gateway"] == rec.fabric_addr and "onlink" in routes[cidr]["flags"]
        assert routes[cidr]["prefsrc"] == rec.host_addr

    unheld = str(ipaddress.IPv4Network(rec.cluster_cidr).network_address + 3 * 256 + 3)
    assert "No route to host" in ip("-n", rec.netns, "route", "get", unheld, check=False).stderr
    for addr in (unheld, str(ipaddress.IPv4Network(rec.service_cidr).network_address + 10)):
        with pytest.raises(OSError) as refused:  # refused at once by the fabric, never sent anywhere else
            socket.create_connection((addr, 80), timeout=DEADLINE)
        assert refused.value.errno == errno.EHOSTUNREACH
    assert sorted(network.leftovers(rec)) == sorted(
        [f"netns {rec.netns}", f"link {rec.host_link}", f"route {rec.cluster_cidr} dev {rec.host_link}",
         f"route {rec.service_cidr} dev {rec.host_link}", f"route {rec.host_addr} dev {rec.host_link}"])

    network.down(fabric)
    assert snapshot(h8) == before
    assert network.leftovers(rec) == []
    assert host_forwarding() == forwarding
    kept = network.load(fabric)  # kept for the next `up`: the nodes' podCIDRs are in its CIDRs
    assert (kept.cluster_cidr, kept.service_cidr) == (rec.cluster_cidr, rec.service_cidr)
    network.down(fabric)  # again: nothing to do, nothing said
    assert snapshot(h8) == before


def host_sysctls() -> list[str]:
    paths = ["/proc/sys/net/ipv4/icmp_ratelimit", "/proc/sys/net/bridge/bridge-nf-call-iptables"]
    return [open(p).read() if os.path.exists(p) else None for p in paths]


@needs_cni
def test_the_fabric_refuses_at_once_and_passes_bridged_replies_through_nftables(fabric, caplog):
    """The fabric's own sysctls (never the host's): icmp_ratelimit 0 and, where the kernel has
    br_netfilter, bridge-nf-call-iptables 1 (kube-proxy's DNAT undone for same-bridge replies)."""
    before = host_sysctls()
    with caplog.at_level(logging.WARNING, logger="kubemu.network"):
        rec = network.setup(fabric)
    ns = ["netns", "exec", rec.netns, "sysctl", "-n"]
    assert ip(*ns, "net.ipv4.icmp_ratelimit").stdout == "0\n"
    has_bridge = ip(*ns, netplan.BRIDGE_NF_CALL_IPTABLES, check=False)
    assert rec.br_netfilter == (has_bridge.returncode == 0) == network.has_br_netfilter(rec.netns)
    assert network.load(fabric).br_netfilter == rec.br_netfilter
    assert (netplan.NO_BR_NETFILTER in caplog.text) == (not rec.br_netfilter)  # said when missing only
    assert host_sysctls() == before
    network.down(fabric)
    if not rec.br_netfilter:
        pytest.skip("this kernel has no br_netfilter: the fabric runs without bridge-nf-call-iptables")
    assert has_bridge.stdout == "1\n"
    assert not network.has_br_netfilter(f"kubemu-{network.state_hash(fabric)}x")  # no such namespace


@needs_cni
def test_two_clusters_at_once_choose_different_cidrs(tmp_path_factory):
    roots = [tmp_path_factory.mktemp("k"), tmp_path_factory.mktemp("k")]
    before = [snapshot(network.state_hash(r)) for r in roots]
    try:
        recs = [network.setup(r) for r in roots]
        assert [r.mode for r in recs] == [CNI, CNI]
        a, b = ([ipaddress.IPv4Network(r.cluster_cidr), ipaddress.IPv4Network(r.service_cidr)] for r in recs)
        assert not any(x.overlaps(y) for x in a for y in b), (a, b)
    finally:
        for r in roots:
            network.down(r)
            remove(r)
    assert [snapshot(network.state_hash(r)) for r in roots] == before


@needs_cni
def test_a_cidr_taken_between_look_and_route_is_chosen_again(tmp_path_factory, monkeypatch):
    """Two `up`s at once may both see a /16 free: the later's route add fails, and it chooses again."""
    first, second = tmp_path_factory.mktemp("k"), tmp_path_factory.mktemp("k")
    try:
        taken = network.setup(first)
        real, looks = network.host_routes, []

        def stale_then_real() -> list[str]:  # the first look predates the other cluster's routes
            looks.append(1)
            return [r for r in real() if r not in (taken.cluster_cidr, taken.service_cidr)] \
                if len(looks) == 1 else real()
        monkeypatch.setattr(network, "host_routes", stale_then_real)
        rec = network.setup(second)
        assert rec.mode == CNI and len(looks) == 2
        assert not ipaddress.IPv4Network(rec.cluster_cidr).overlaps(ipaddress.IPv4Network(taken.cluster_cidr))
    finally:
        network.down(first)
        network.down(second)
        assert remove(first) == [] and remove(second) == []


@needs_cni
def test_a_failed_step_removes_what_was_made_and_falls_back(fabric, monkeypatch, caplog):
    h8 = network.state_hash(fabric)
    before, forwarding = snapshot(h8), host_forwarding()
    plan = netplan.fabric_plan

    def failing(rec):  # the fabric's unreachable route twice: fails once the host link is there
        steps = plan(rec)
        return steps[:-2] + [netplan.AddRoute(rec.netns, rec.cluster_cidr, unreachable=True)] + steps[-2:]
    monkeypatch.setattr(netplan, "fabric_plan", failing)
    with caplog.at_level(logging.WARNING, logger="kubemu.network"):
        rec = network.setup(fabric)
    assert rec.mode == HOST
    assert rec.reason.startswith(f"could not set up the pod network: `ip -n kubemu-{h8} route add unreachable ")
    assert rec.reason.endswith("`: RTNETLINK answers: File exists")
    assert [r.getMessage() for r in caplog.records] == [netplan.host_network_line(rec.reason)]
    assert network.load(fabric) == rec
    assert snapshot(h8) == before and host_forwarding() == forwarding

    with pytest.raises(NetplanError, match=r"^could not set up the pod network: .*File exists$"):
        network.setup(fabric, requested=CNI)  # asked for explicitly: an error, and nothing left either
    assert snapshot(h8) == before


@needs_cni
def test_up_again_removes_what_a_crashed_up_left_and_keeps_its_cidrs(fabric, tmp_path_factory, caplog):
    h8 = network.state_hash(fabric)
    before = snapshot(h8)
    first = network.setup(fabric, pod_network_cidr="10.251.0.0/16", service_cidr="10.176.0.0/12")
    again = network.setup(fabric)  # no `down` in between (a crash): the old fabric goes first
    assert (again.cluster_cidr, again.service_cidr) == ("10.251.0.0/16", "10.176.0.0/12")
    assert ip("netns", "list").stdout.split().count(first.netns) == 1
    network.down(fabric)
    assert snapshot(h8) == before

    # Meanwhile another cluster took the kept CIDR: not silently another (the nodes' podCIDRs
    # are in the kept one): the host's network, said why.
    other = tmp_path_factory.mktemp("k")
    try:
        network.setup(other, pod_network_cidr="10.251.0.0/16", service_cidr="10.192.0.0/12")
        with caplog.at_level(logging.WARNING, logger="kubemu.network"):
            rec = network.setup(fabric)
        assert rec.mode == HOST and rec.cluster_cidr == "10.251.0.0/16"
        assert rec.reason == ("pod network 10.251.0.0/16 (this cluster's, kept from its last `up`) overlaps the "
                              "host's route to 10.251.0.0/16")
        assert len(caplog.records) == 1
    finally:
        network.down(other)
        assert remove(other) == []
    assert snapshot(h8) == before


@needs_cni
def test_what_down_could_not_remove_is_not_forgotten(fabric, monkeypatch, caplog):
    """A fabric the last `up` left that cannot be removed now: the host's network this time, and
    the record still names the fabric, so a later `down` removes it."""
    first = network.setup(fabric)
    real = network.run_step
    monkeypatch.setattr(network, "run_step", lambda step: None if isinstance(
        step, (netplan.DelLink, netplan.DelNetns)) else real(step))
    caplog.clear()  # the first `up` may have said its CIDRs moved (another cluster has the defaults)
    with caplog.at_level(logging.WARNING, logger="kubemu.network"):
        rec = network.setup(fabric)
    assert rec.mode == HOST and rec.reason.startswith(f"what the last `up` made is still there (netns {first.netns}, ")
    assert [r.getMessage() for r in caplog.records] == [netplan.host_network_line(rec.reason)]
    assert network.load(fabric) == first
    monkeypatch.setattr(network, "run_step", real)
    network.down(fabric)
    assert network.leftovers(first) == []


@needs_cni
def test_an_explicit_cidr_overlapping_a_host_route_is_an_error(fabric):
    h8 = network.state_hash(fabric)
    before = snapshot(h8)
    lan = next(r for r in network.host_routes() if r != "default" and not r.startswith("127.")
               and ipaddress.IPv4Network(r, strict=False).prefixlen >= 16)
    cidr = str(ipaddress.IPv4Network(lan, strict=False).supernet(new_prefix=16))
    with pytest.raises(NetplanError, match=rf"^--pod-network-cidr {cidr} overlaps the host's route to "):
        network.setup(fabric, pod_network_cidr=cidr)
    assert snapshot(h8) == before and not (fabric / "network.json").exists()


def test_network_host_is_said_once_and_recorded(state_dir, caplog):
    with caplog.at_level(logging.WARNING, logger="kubemu.network"):
        rec = network.setup(state_dir, requested=HOST)
    assert rec == netplan.Record(HOST, "kubemu up --network host", service_cidr=rec.service_cidr)
    assert netplan.is_host_service_cidr(rec.service_cidr)
    assert [r.getMessage() for r in caplog.records] == [
        'kubemu: pods share the host\'s network (kubemu up --network host); see README "Pod networking"']
    assert network.load(state_dir) == rec
    network.down(state_dir)  # nothing to remove


def test_each_state_directory_has_its_loopback_block_kept_across_ups(tmp_path):
    """Two host-mode clusters on one machine never share ClusterIPs; a block in which a socket
    is bound (another cluster's proxy listening on its ClusterIPs) is passed over."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    first = network.setup(a, requested=HOST)
    assert network.host_record(b, "r", None).service_cidr != first.service_cidr
    assert network.setup(a, requested=HOST).service_cidr == first.service_cidr  # kept
    taken = netplan.choose_host_service_cidr(network.state_hash(b), ())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:  # an ephemeral port: nobody's
        listener.bind((netplan.service_ip(taken, netplan.DNS_SERVICE_INDEX), 0))
        chosen = network.setup(b, requested=HOST).service_cidr
    assert chosen != taken and netplan.is_host_service_cidr(chosen)
    assert network.load(b).service_cidr == chosen


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                    reason="needs root and setpriv to drop privileges")
@pytest.mark.parametrize("drop, reason", [
    (["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"],
     "not root: CAP_NET_ADMIN and CAP_SYS_ADMIN are needed for pod networks"),
    (["--inh-caps=-net_admin", "--bounding-set=-net_admin"], "CAP_NET_ADMIN is needed for pod networks"),
])
def test_the_mode_of_an_unprivileged_process(drop, reason):
    """The probe reads the process's own capabilities: no root, or root without CAP_NET_ADMIN."""
    done = subprocess.run(["setpriv", *drop, sys.executable, "-c",
                           "from kubemu import network; m = network.probe(None); print(m.kind); print(m.reason)"],
                          capture_output=True, text=True, timeout=DEADLINE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [HOST, reason]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount")
def test_run_netns_is_released_only_when_kubemu_made_it_and_it_is_empty(tmp_path, monkeypatch):
    """As `ip netns add` leaves it: /run/netns bind-mounted on itself. A `down` unmounts (and
    removes) it only when kubemu's claim says kubemu made it and no namespace is left in it;
    the claim is the machine's, so the last cluster to go releases it even if another cluster
    made it. A private directory plays /run/netns."""
    run_netns, claim = tmp_path / "netns", tmp_path / "claim"
    run_netns.mkdir()
    monkeypatch.setattr(network, "RUN_NETNS", str(run_netns))
    monkeypatch.setattr(network, "RUN_NETNS_CLAIM", str(claim))
    subprocess.run(["mount", "--bind", str(run_netns), str(run_netns)], check=True)
    try:
        network.run_step(netplan.ReleaseRunNetns())  # no claim: someone else's mount
        assert network._mounted(str(run_netns))
        claim.write_text("dir")  # a cluster made it, then another cluster's namespace came
        (run_netns / "another-cluster").touch()
        network.run_step(netplan.ReleaseRunNetns())  # the maker goes first: it stays
        assert network._mounted(str(run_netns))
        (run_netns / "another-cluster").unlink()
        network.run_step(netplan.ReleaseRunNetns())  # the other goes last: released
        assert not network._mounted(str(run_netns)) and not run_netns.exists() and not claim.exists()
    finally:
        if network._mounted(str(run_netns)):
            subprocess.run(["umount", str(run_netns)])


def test_a_record_copied_from_another_state_directory_is_no_record(tmp_path, caplog):
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    theirs.mkdir()
    ours.mkdir()
    rec = netplan.cni_record(network.state_hash(theirs), "10.244.0.0/16", "10.96.0.0/12", 24, network.RUN_NETNS)
    network.save(theirs, rec)
    assert network.load(theirs) == rec
    network.save(ours, rec)  # `cp -a theirs ours`
    with caplog.at_level(logging.WARNING, logger="kubemu.network"):
        assert network.load(ours) is None
    assert "names the pod network of another state directory" in caplog.text
    network.down(ours)  # removes nothing of theirs (it would run `ip netns del kubemu-<theirs>`)
    elsewhere = netplan.Record(**{**netplan.cni_record(network.state_hash(ours), "10.244.0.0/16", "10.96.0.0/12",
                                                       24, network.RUN_NETNS).to_json(),
                                  "netns_path": "/var/run/other/" + netplan.fabric_names(network.state_hash(ours))[0]})
    network.save(ours, elsewhere)
    assert network.load(ours) is None


def test_cap_eff_is_this_process_s_effective_capability_mask():
    """Public: the userspace proxy asks it too (may it bind ports below 1024?)."""
    with open("/proc/self/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
    assert network.cap_eff() == mask
