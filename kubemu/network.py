"""The pod network's shell: probes the machine, runs kubemu/netplan.py's steps with `ip`
(argv lists, never a shell), and keeps <state>/network.json, what `up` made and `down` removes.

Whatever fails while the fabric is built, what was made is removed and pods fall back to the
host's network, said in one line (an explicit `--network cni` or CIDR flag fails `up` instead).
Only what a record names is ever removed, and only names kubemu makes (`kubemu-<h8>`, `km-<h8>`).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import psutil

from . import netplan, ownership
from .netplan import CNI, HOST, NetplanError, Record
from .statedir import write_atomic

log = logging.getLogger(__name__)

RECORD = "network.json"
RUN_NETNS = "/run/netns"  # where `ip netns` keeps its namespaces (bind mounts of nsfs)
# kubemu's claim on /run/netns when its `ip netns add` mounted it ("dir": and made the directory);
# beside it in /run, so it goes with a reboot as the mount does
RUN_NETNS_CLAIM = "/run/kubemu-run-netns"
STEP_TIMEOUT = 30.0
SETUP_ATTEMPTS = 3  # two `up`s at once may pick the same free CIDR: the later's route add fails


class StepFailed(Exception):
    def __init__(self, argv: list[str], output: str):
        super().__init__(f"`{' '.join(argv)}`: {output or 'failed'}")
        self.argv, self.output = argv, output


def state_hash(state_root: Path) -> str:
    """The 8 hex digits naming a state directory's network objects: the start of the hash its
    cgroups are named by (ownership.cluster_cgroup_name)."""
    return ownership.cluster_cgroup_name(state_root).rsplit("/", 1)[1][:8]


def load(state_root: Path) -> Record | None:
    """The state directory's record; None if there is none, or if it names a fabric that is
    not this directory's (a record copied from another cluster's state: its `down` would
    remove that cluster's network)."""
    try:
        rec = Record.from_json(json.loads((state_root / RECORD).read_text()))
    except (OSError, ValueError):
        return None
    if rec is not None and rec.mode == CNI:
        netns, link = netplan.fabric_names(state_hash(state_root))
        if (rec.netns, rec.host_link, rec.netns_path) != (netns, link, f"{RUN_NETNS}/{netns}"):
            log.warning("kubemu: %s names the pod network of another state directory (%s): ignoring it",
                        state_root / RECORD, rec.netns)
            return None
    return rec


def save(state_root: Path, rec: Record) -> None:
    write_atomic(state_root / RECORD, (json.dumps(rec.to_json(), indent=1) + "\n").encode(), 0o644)


# --- probing the machine --------------------------------------------------------------------

def cap_eff() -> int:
    """This process's effective capabilities (the CapEff mask of /proc/self/status), 0 when unreadable."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError):
        pass
    return 0


def probe(requested: str | None) -> netplan.Mode:
    """netplan.network_mode for this process on this machine."""
    found = {p for p in netplan.CNI_PLUGINS for d in netplan.CNI_BIN_DIRS if os.access(f"{d}/{p}", os.X_OK)}
    missing_tools = [t for t in netplan.TOOLS if shutil.which(t, path=_path()) is None]
    return netplan.network_mode(os.geteuid(), cap_eff(), missing_tools, found, requested)


def _path() -> str:
    """PATH with the sbin directories: a user's PATH may lack them, `ip` and `sysctl` live there."""
    return ":".join(dict.fromkeys(os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]))


def _all_routes() -> list[dict]:
    """Every IPv4 route of the host, in every table (the local table has the host's own
    addresses), as `ip -j` describes them. StepFailed without `ip` or with output it cannot read."""
    argv = ["ip", "-4", "-j", "route", "show", "table", "all"]
    try:
        routes = json.loads(_run(argv) or "[]")
    except ValueError:
        raise StepFailed(argv, "unreadable output") from None
    return [r for r in routes if isinstance(r, dict)] if isinstance(routes, list) else []


def host_routes() -> list[str]:
    """The destinations of every IPv4 route of the host."""
    return [r["dst"] for r in _all_routes() if "dst" in r]


def bound_addresses() -> set[str]:
    """The local addresses of the host's IPv4 sockets (every process's: /proc/net lists them
    all): another cluster's kube-proxy listens on its ClusterIPs."""
    try:
        return {c.laddr.ip for c in psutil.net_connections(kind="inet4") if c.laddr}
    except (psutil.Error, OSError):
        return set()


def host_record(state_root: Path, reason: str, kept: Record | None) -> Record:
    """netplan.host_record for this state directory on this machine."""
    return netplan.host_record(reason, kept, state_hash(state_root), bound_addresses())


def _mounted(path: str) -> bool:
    try:
        with open("/proc/self/mountinfo") as f:
            return any(line.split()[4] == path for line in f)
    except OSError:
        return False


# --- running steps --------------------------------------------------------------------------

def _run(argv: list[str]) -> str:
    env = dict(os.environ, PATH=_path(), LC_ALL="C")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=STEP_TIMEOUT, env=env,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StepFailed(argv, str(exc)) from None
    if done.returncode != 0:
        raise StepFailed(argv, " ".join((done.stderr or done.stdout).split()))
    return done.stdout


def has_br_netfilter(netns: str) -> bool:
    """Whether the namespace has the bridge's netfilter sysctls (/proc/sys/net is the reading
    process's namespace's: read from inside). kubemu never loads the module: that is host state."""
    try:
        _run(["ip", "netns", "exec", netns, "sysctl", "-n", netplan.BRIDGE_NF_CALL_IPTABLES])
    except StepFailed:
        return False
    return True


def _link_exists(dev: str) -> bool:
    return os.path.exists(f"/sys/class/net/{dev}")  # the host's links: this process is in its netns


def run_step(step: netplan.Step) -> None:
    """One step; a removal whose object is already gone is done."""
    if isinstance(step, netplan.DelLink) and not _link_exists(step.dev):
        return
    if isinstance(step, netplan.DelNetns) and not os.path.exists(f"{RUN_NETNS}/{step.name}"):
        return
    if isinstance(step, netplan.ReleaseRunNetns):
        try:
            claim = Path(RUN_NETNS_CLAIM).read_text()
        except OSError:
            return  # kubemu did not mount it: not ours to remove
        if not _mounted(RUN_NETNS) or os.listdir(RUN_NETNS):
            return  # namespaces are still there (another cluster's, or someone else's): it stays
        _run(["umount", RUN_NETNS])
        if claim == "dir":
            try:
                os.rmdir(RUN_NETNS)
            except OSError:
                pass  # someone made a namespace meanwhile
        Path(RUN_NETNS_CLAIM).unlink(missing_ok=True)
        return
    _run(step.argv())


def _teardown(rec: Record) -> list[str]:
    """Run rec's teardown; what could not be removed (each step is tried)."""
    failed = []
    for step in netplan.teardown_plan(rec):
        try:
            run_step(step)
        except StepFailed as exc:
            failed.append(str(exc))
    return failed


# --- up and down ----------------------------------------------------------------------------

def setup(state_root: Path, requested: str | None = None, pod_network_cidr: str | None = None,
          service_cidr: str | None = None, nodes: int = 1) -> Record:
    """Choose the mode and CIDRs, build the fabric, record it; the record. A fabric a previous
    `up` of this state left (no `down` since) is removed first. Raises NetplanError when what
    was asked for explicitly cannot be had; otherwise falls back to the host's network, said once."""
    kept = load(state_root)
    explicit = requested == CNI or pod_network_cidr is not None or service_cidr is not None
    if kept is not None:
        down(state_root)
        kept = load(state_root)
        left = leftovers(kept)
        if left:  # the record stays as it is, for the next `down` to try again
            reason = f"what the last `up` made is still there ({', '.join(left)})"
            if explicit:
                raise NetplanError(reason)
            log.warning("%s", netplan.host_network_line(reason))
            return host_record(state_root, reason, kept)
    mode = probe(requested)
    if mode.kind == HOST:
        return _host(state_root, mode.reason, kept)
    attempt = 0
    while True:
        attempt += 1
        try:
            rec, notes = _plan(state_root, pod_network_cidr, service_cidr, nodes, kept)
        except StepFailed as exc:
            return _fall_back(state_root, f"cannot read the host's routes: {exc}", kept, explicit)
        except NetplanError as exc:
            return _fall_back(state_root, str(exc), kept, explicit)
        try:
            rec = build(rec)
        except StepFailed as exc:
            host_route = exc.argv[:3] == ["ip", "route", "add"]
            retry = host_route and "File exists" in exc.output and not explicit and not (kept and kept.cluster_cidr)
            if retry and attempt < SETUP_ATTEMPTS:
                continue  # another cluster took the CIDR between our look and our route
            return _fall_back(state_root, f"could not set up the pod network: {exc}", kept, explicit)
        for note in notes:
            log.warning("%s", note)
        if not rec.br_netfilter:
            log.warning("%s", netplan.NO_BR_NETFILTER)
        save(state_root, rec)
        return rec


def _plan(state_root: Path, pod_network_cidr: str | None, service_cidr: str | None, nodes: int,
          kept: Record | None) -> tuple[Record, list[str]]:
    routes = host_routes()
    cluster = netplan.choose_cluster_cidr(routes, pod_network_cidr, kept.cluster_cidr if kept else None)
    service = netplan.choose_service_cidr(routes, service_cidr, cluster.cidr, netplan.kept_service_cidr(kept))
    mask, mask_note = netplan.node_mask_for(nodes, cluster.cidr)
    if kept and kept.node_mask and kept.cluster_cidr == cluster.cidr and kept.node_mask >= mask:
        mask, mask_note = kept.node_mask, None  # the nodes' podCIDRs have that size
    rec = netplan.cni_record(state_hash(state_root), cluster.cidr, service.cidr, mask, RUN_NETNS)
    return rec, [n for n in (cluster.note, service.note, mask_note) if n]


def build(rec: Record) -> Record:
    """Run fabric_plan(rec) (claiming /run/netns if `ip netns add` had to mount it); rec with
    whether the new namespace has br_netfilter (looked at once it exists: the rest of the plan depends on it). On a failure
    what this call made is removed (nothing that was there before), then StepFailed is raised."""
    had_dir, had_mount = os.path.isdir(RUN_NETNS), _mounted(RUN_NETNS)
    made, done = rec, set()
    try:
        add_netns, *_ = netplan.fabric_plan(rec)
        run_step(add_netns)
        done.add(type(add_netns))
        if not had_mount and _mounted(RUN_NETNS):
            write_atomic(Path(RUN_NETNS_CLAIM), b"" if had_dir else b"dir", 0o644)
        made = Record(**{**rec.to_json(), "br_netfilter": has_br_netfilter(rec.netns)})
        for step in netplan.fabric_plan(made)[1:]:
            run_step(step)
            done.add(type(step))
    except StepFailed:
        for step in netplan.teardown_plan(made):
            if netplan.undoes(step) in done:
                try:
                    run_step(step)
                except StepFailed as exc:
                    log.warning("kubemu: could not remove the pod network: %s", exc)
        raise
    return made


def _fall_back(state_root: Path, reason: str, kept: Record | None, explicit: bool) -> Record:
    if explicit:
        raise NetplanError(reason)
    return _host(state_root, reason, kept)


def _host(state_root: Path, reason: str, kept: Record | None) -> Record:
    log.warning("%s", netplan.host_network_line(reason))
    rec = host_record(state_root, reason, kept)
    save(state_root, rec)
    return rec


def down(state_root: Path) -> None:
    """Remove the fabric the record names (after the nodes' processes are gone). The record
    stays, for the next `up` to keep the CIDRs."""
    rec = load(state_root)
    if rec is None or rec.mode != CNI:
        return
    for failure in _teardown(rec):
        log.warning("kubemu: could not remove the pod network: %s", failure)


def leftovers(rec: Record) -> list[str]:
    """What of rec's fabric is still on the host: its namespace, its link, routes through it."""
    if rec.mode != CNI:
        return []
    left = []
    if os.path.exists(rec.netns_path):
        left.append(f"netns {rec.netns}")
    if _link_exists(rec.host_link):
        left.append(f"link {rec.host_link}")
    try:
        routes = _all_routes()
    except StepFailed:
        routes = []  # without `ip` there are no routes kubemu made either
    return left + [f"route {r.get('dst')} dev {r.get('dev')}" for r in routes if r.get("dev") == rec.host_link]
