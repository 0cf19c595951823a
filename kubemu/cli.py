"""The `kubemu` command: kubeadm's, systemctl's and journalctl's habits for an emulated cluster.

Every command finds its cluster through --state-dir, $KUBEMU_STATE_DIR or ~/.kubemu.
"""
from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
from collections.abc import Sequence

import click
from rich.console import Console

from . import cluster, kubeconfig, netplan, views, wire
from .child import reap_exited
from .statedir import NoCluster, StateDir

# Piped output (tests, scripts, `| grep`) gets wide tables instead of wrapped cells.
console = Console() if sys.stdout.isatty() else Console(width=200)


class Ctx:
    def __init__(self, state_dir: str | None, server: str | None = None):
        self.state = StateDir(state_dir)
        self.server = server

    def api_endpoint(self) -> str:
        """The apiserver to talk to: --server / $KUBEMU_SERVER, else the running cluster's."""
        endpoint = self.server or self.state.api_endpoint()
        if not endpoint:
            fail(f"no apiserver known: no cluster in {self.state.root} (start one with `kubemu up`) "
                 "and no --server given")
        return endpoint

    def running(self) -> list[str]:
        try:
            return self.state.require_running()
        except NoCluster as exc:
            fail(str(exc))

    def client(self, node: str, timeout: float = 10.0) -> wire.SyncClient:
        if node not in self.running():
            fail(f"node {node} is not running in {self.state.root}")
        return wire.SyncClient(self.state.init_endpoint(node), timeout=timeout)


def fail(message: str, code: int = 1):
    """One line on stderr, kubectl's way: `Error from server (...)` as is, else `error: ...`."""
    click.echo(message if message.startswith("Error from server") else f"error: {message}", err=True)
    sys.exit(code)


pass_ctx = click.make_pass_decorator(Ctx)
state_dir_option = click.option("--state-dir", envvar="KUBEMU_STATE_DIR", default=None,
                                help="cluster state directory (default ~/.kubemu)")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@state_dir_option
@click.option("-s", "--server", envvar="KUBEMU_SERVER", default=None,
              help="the apiserver's endpoint (default: the running cluster's)")
@click.pass_context
def main(ctx: click.Context, state_dir: str | None, server: str | None) -> None:
    """kubemu: the Kubernetes supervision hierarchy with real processes."""
    ctx.obj = Ctx(state_dir, server)


# --- up / down / ps ----------------------------------------------------------------------

def _cluster_name(_ctx, _param, name: str | None) -> str | None:
    """kind's rule for a cluster name: it becomes part of a context name."""
    if name is not None and not re.fullmatch(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?", name):
        raise click.BadParameter(f"{name!r}: lowercase letters, digits, '-' and '.', starting and "
                                 "ending with a letter or digit")
    return name


def _advertise_address(_ctx, _param, value: str | None) -> str | None:
    try:
        return None if value is None else cluster.check_advertise_address(value, cluster.local_addresses())
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _cidr(_ctx, param, value: str | None) -> str | None:
    try:
        return None if value is None else str(netplan.parse_cidr(value, f"--{param.name.replace('_', '-')}"))
    except netplan.NetplanError as exc:
        raise click.BadParameter(str(exc).split(": ", 1)[-1]) from None


@main.command()
@click.option("--nodes", default=None, type=click.IntRange(1, 64),
              help="number of nodes, the control-plane nodes among them  [default: --control-plane-nodes]")
@click.option("--control-plane-nodes", default="1", show_default=True, type=click.Choice(["1", "3", "5"]),
              help="control-plane nodes (node-0 on): each runs a store replica, an apiserver, a scheduler and a "
                   "controller-manager (kubeadm's stacked etcd)")
@click.option("--store-replicas", default=None, type=click.Choice(["3", "5"]),
              help="store (etcd) replicas on the one control-plane node  [default: 3]")
@click.option("--hollow-nodes", default=0, show_default=True, type=click.IntRange(0, 5000),
              help="extra hollow nodes (no processes per pod), all played by one process on node-0")
@click.option("--fast", is_flag=True, help="scale every Kubernetes timing down for demos and tests (see README)")
@click.option("--detach", is_flag=True, help="return once every node is Ready")
@click.option("--timeout", default=180.0, show_default=True, help="seconds to wait for every node to be Ready")
@click.option("--api-port", type=click.IntRange(0, 65535), default=None, envvar="KUBEMU_API_PORT",
              help="the apiserver's HTTPS port on 127.0.0.1 (default: the one this state dir's last `up` used, "
                   "else 6443; a busy port is replaced by a free one; 0: any free port)", show_envvar=True)
@click.option("--name", default=None, callback=_cluster_name,
              help="name the cluster: its kubectl context is kubemu-NAME instead of kubemu")
@click.option("--no-kubeconfig", is_flag=True,
              help="do not merge the cluster's context into $KUBECONFIG (or ~/.kube/config)")
@click.option("--network", "network_mode", type=click.Choice([netplan.CNI, netplan.HOST]), default=None,
              help="cni: every pod its own network namespace and IP; host: pods share the host's network "
                   "(default: cni where kubemu may make networks, see README \"Pod networking\")")
@click.option("--pod-network-cidr", callback=_cidr, default=None,
              help=f"the pods' addresses (default {netplan.DEFAULT_CLUSTER_CIDR}, or the next free /16 up to 10.255)")
@click.option("--service-cidr", callback=_cidr, default=None,
              help=f"the Services' addresses (default {netplan.DEFAULT_SERVICE_CIDR}, or the next free /12)")
@click.option("--apiserver-advertise-address", "advertise_address", callback=_advertise_address, default=None,
              metavar="IP",
              help="also serve the API on this address of this machine, for nodes of other machines (`kubemu "
                   "join`, printed at the end): HTTPS on IP:--api-port, the wire with CURVE on IP:--api-port+1+i "
                   "for control-plane node-i (default: the one this state dir's last `up` used, else loopback only)")
@pass_ctx
def up(ctx: Ctx, nodes: int | None, control_plane_nodes: str, store_replicas: str | None, hollow_nodes: int,
       fast: bool, detach: bool, timeout: float, api_port: int | None, name: str | None, no_kubeconfig: bool,
       network_mode: str | None, pod_network_cidr: str | None, service_cidr: str | None,
       advertise_address: str | None) -> None:
    """Create the cluster (kubeadm's role): the PKI and kubeconfigs, one init per node, the
    control plane as static pods of node-0 (of node-0..N-1 with --control-plane-nodes N); wait
    until every node is Ready; create the addons (kube-proxy's DaemonSet, the cluster DNS, the
    default StorageClass) unless they exist and wait for kube-proxy on every node; then, as
    kind does, merge a context for it into your kubeconfig and make it current."""
    control_plane = int(control_plane_nodes)
    if nodes is not None and nodes < control_plane:
        raise click.BadParameter(f"{nodes} is fewer than --control-plane-nodes {control_plane}",
                                 param_hint="--nodes")
    if store_replicas is not None and control_plane > 1:
        raise click.BadParameter(f"applies to one control-plane node: with --control-plane-nodes {control_plane} "
                                 "the store has one replica on each", param_hint="--store-replicas")
    try:
        names, hollow = cluster.up(ctx.state, nodes or control_plane, fast=fast,
                                   store_replicas=int(store_replicas or cluster.STORE_REPLICAS),
                                   hollow_nodes=hollow_nodes, api_port=api_port, network_mode=network_mode,
                                   pod_network_cidr=pod_network_cidr, service_cidr=service_cidr,
                                   control_plane_count=control_plane, advertise_address=advertise_address)
    except RuntimeError as exc:
        fail(str(exc))
    try:
        statuses = cluster.wait_started(ctx.state, names, timeout)
        cluster.wait_ready(ctx.state, names + hollow, timeout)
        _, refused = cluster.apply_addons(ctx.state, timeout)  # kubeadm's addon phase: the API answers now
    except TimeoutError as exc:
        cluster.down(ctx.state)
        fail(f"{exc}; see {ctx.state.nodes_dir}/*/logs/")
    except KeyboardInterrupt:  # Ctrl-C while starting: nothing may be left behind
        console.print("interrupted: stopping...")
        cluster.down(ctx.state)
        sys.exit(130)
    for line in refused:  # the cluster works without them: said, not fatal
        click.echo(f"warning: addon {line}", err=True)
    console.print(views.ps_table(names, statuses, pods={n: [pod for _d, pod in ctx.state.pods(n)] for n in names}))
    kubectl = f"kubectl --kubeconfig {ctx.state.admin_conf}"
    if not no_kubeconfig:
        path = kubeconfig.user_path()
        try:
            context = cluster.merge_user_kubeconfig(ctx.state, path, name)
        except kubeconfig.KubeconfigError as exc:
            click.echo(f"warning: {exc}: no kubectl context was set", err=True)
        else:
            kubectl = "kubectl"
            console.print(f'Set kubectl context to "{context}" '
                          f"({cluster.server_url(ctx.state.api_port())}, in {path})", highlight=False)
    console.print(f"\ncluster up in {ctx.state.root}: {len(names) + len(hollow)} node(s) Ready. Next:\n"
                  f"  {kubectl} get nodes\n"
                  "  kubemu get nodes; kubemu get pods -A\n"
                  "  kubemu apply -f deployment.yaml; kubemu get pods -o wide\n"
                  "  kill -9 <a PID from kubemu ps>; kubemu ps\n"
                  "  kubemu node kill node-1; kubemu get nodes -w\n"
                  "  kubemu down")
    if cluster.kept_advertise_address(ctx.state) is not None:  # kubeadm init's last words
        try:
            click.echo("\n" + cluster.join_text(ctx.state, cluster.join_token(ctx.state)))
        except wire.WireError as exc:
            click.echo(f"warning: no bootstrap token for `kubemu join` could be made: {exc} "
                       "(make one with `kubemu token create --print-join-command`)", err=True)
    if detach:
        return
    console.print("\nrunning in the foreground: Ctrl-C stops every node in order")
    _wait_for_interrupt(ctx, cluster.control_plane_of(ctx.state, control_plane))


def _wait_for_interrupt(ctx: Ctx, control_plane: list[str]) -> None:
    """Run until Ctrl-C (or SIGTERM), the last running control-plane node's init exits, or no
    node is left; reap every init that exits (they are our children) and say how it ended,
    then stop the cluster."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    interrupted = True
    try:
        while not stop:
            none_left = not ctx.state.running_nodes()  # before reaping: the last to go is said
            ended = _reap_inits(ctx.state, control_plane)
            if any(stops for _line, stops in ended) or none_left:
                interrupted = False
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    if interrupted:
        console.print("stopping...")
    try:
        stragglers = cluster.down(ctx.state)
    finally:  # nothing in the user's kubeconfig may keep the cluster running
        _remove_context(ctx)
    _reap_inits(ctx.state, say=False)
    if stragglers:
        console.print(f"killed leftover process(es): {stragglers}")
    console.print("cluster stopped")


def _remove_context(ctx: Ctx) -> None:
    """Take out the kubectl context `up` merged (as `kind delete cluster` does), and say so."""
    try:
        removed = cluster.unmerge_user_kubeconfig(ctx.state)
    except kubeconfig.KubeconfigError as exc:
        click.echo(f"warning: {exc}: the kubectl context was left in place", err=True)
        return
    if removed:
        click.echo(f'Deleted kubectl context "{removed[0]}" from {removed[1]}')


def _reap_inits(state: StateDir, control_plane: Sequence[str] = (), say: bool = True) -> list[tuple[str, bool]]:
    """Reap our exited children; for each node's init among them, what to say (printed if `say`)."""
    inits = {o.pid: n for n in state.nodes() if (o := state.owned(n)) is not None}
    ended = []
    for pid, status in reap_exited():
        if pid in inits:
            ended.append(cluster.init_exit_report(inits[pid], os.waitstatus_to_exitcode(status), control_plane,
                                                  state.running_nodes()))
            if say:
                console.print(ended[-1][0])
    return ended


@main.command()
@click.option("--timeout", default=150.0, show_default=True, help="seconds to wait for an orderly stop")
@pass_ctx
def down(ctx: Ctx, timeout: float) -> None:
    """Stop every node in order; return once no process of the cluster is left."""
    running = cluster.stoppable(ctx.state)
    try:
        stragglers = cluster.down(ctx.state, timeout)  # with nothing running, it removes stale cgroups only
    finally:  # stopped first: nothing in the user's kubeconfig may keep the cluster running
        _remove_context(ctx)  # even when the cluster died on its own: its context is of no use
    if not running:
        click.echo(f"no kubemu cluster was running in {ctx.state.root}: nothing to stop")
        return
    if stragglers:
        click.echo(f"killed {len(stragglers)} leftover process(es): {stragglers}")
    click.echo("cluster stopped")


@main.command("kubeconfig")
@pass_ctx
def kubeconfig_cmd(ctx: Ctx) -> None:
    """Print the cluster admin's kubeconfig (<state>/admin.conf), as `kind get kubeconfig` does:
    `kubemu kubeconfig > admin.conf; kubectl --kubeconfig admin.conf get nodes`."""
    try:
        click.echo(ctx.state.admin_conf.read_text(), nl=False)
    except FileNotFoundError:
        fail(f"no kubeconfig in {ctx.state.root}: no cluster was made there (start one with `kubemu up`)")
    except OSError as exc:
        fail(f"cannot read {ctx.state.admin_conf}: {exc.strerror}")


@main.group()
def node() -> None:
    """Kill or start a whole node (its init, with everything under it): a machine failure; add
    or remove one."""


@node.command("kill")
@click.argument("name")
@pass_ctx
def node_kill(ctx: Ctx, name: str) -> None:
    """SIGKILL every process of the node at once (its init, kubelet and pods): a power cut."""
    try:
        pid = cluster.kill_node(ctx.state, name)
    except RuntimeError as exc:
        fail(str(exc))
    click.echo(f"node/{name} killed (init pid {pid})")


@node.command("start")
@click.argument("name")
@pass_ctx
def node_start(ctx: Ctx, name: str) -> None:
    """Boot a killed node again: init, then its kubelet, which re-registers and resumes."""
    try:
        cluster.start_node(ctx.state, name)
    except RuntimeError as exc:
        fail(str(exc))
    click.echo(f"node/{name} started")


@node.command("add")
@click.option("--control-plane", is_flag=True,
              help="a control-plane node: a store member, an apiserver, a scheduler and a controller-manager")
@click.option("--fast", is_flag=True, help="the scaled-down timings: give it when the cluster's `up` had --fast")
@click.option("--timeout", default=180.0, show_default=True, help="seconds to wait for the node to be Ready")
@pass_ctx
def node_add(ctx: Ctx, control_plane: bool, fast: bool, timeout: float) -> None:
    """Add the next node, node-<i> (kubeadm join; --control-plane: kubeadm join --control-plane,
    its store member added first) and wait until it is Ready."""
    try:
        name = cluster.add_node(ctx.state, control_plane, fast=fast, timeout=timeout, say=click.echo)
    except (RuntimeError, NoCluster) as exc:
        fail(str(exc))
    click.echo(f"node/{name} joined{' the control plane' if control_plane else ''}")


@node.command("remove")
@click.argument("name")
@pass_ctx
def node_remove(ctx: Ctx, name: str) -> None:
    """Remove a node (kubeadm reset): its store member first, then its processes, its Node
    object and its directory. Refused when the store would lose its quorum."""
    try:
        cluster.remove_node(ctx.state, name, say=click.echo)
    except (RuntimeError, NoCluster) as exc:
        fail(str(exc))
    click.echo(f"node/{name} removed")


@main.command()
@click.option("-o", "--output", type=click.Choice(["table", "json"]), default="table")
@pass_ctx
def ps(ctx: Ctx, output: str) -> None:
    """Show the supervision tree: node -> init -> units, with PIDs, states and restarts."""
    ctx.running()
    nodes = ctx.state.nodes()
    statuses = {n: cluster.node_status(ctx.state, n) for n in nodes}
    pods = {n: [pod for _dir, pod in ctx.state.pods(n)] for n in nodes}
    if output == "json":
        click.echo(json.dumps({"nodes": [{"name": n, "init": statuses[n], "pods": pods[n]} for n in nodes]},
                              indent=2))
    else:
        console.print(views.ps_table(nodes, statuses, pods=pods))


# --- systemctl / journalctl ----------------------------------------------------------------

node_option = click.option("--node", default="node-0", show_default=True, help="which node's init")


@main.command(context_settings={"ignore_unknown_options": False})
@node_option
@click.argument("verb", type=click.Choice(["status", "start", "stop", "restart", "reset-failed", "daemon-reload"]))
@click.argument("unit", required=False)
@pass_ctx
def systemctl(ctx: Ctx, node: str, verb: str, unit: str | None) -> None:
    """Control a node's units as systemctl does."""
    if verb in ("start", "stop", "restart") and not unit:
        fail(f"systemctl {verb} needs a unit name")
    with ctx.client(node, timeout=180.0) as client:
        try:
            if verb == "status":
                st = client.call("status", {"unit": unit} if unit else {}, idempotent=True)
                click.echo("\n\n".join(views.unit_status_text(r) for r in st["units"]))
                if unit and st["units"][0]["active_state"] != "active":
                    sys.exit(3)  # systemctl's "unit is not active"
                return
            if verb == "daemon-reload":
                client.call("daemon-reload")
                return
            params = {"unit": unit} if unit else {}
            row = client.call(verb, params)
        except wire.WireError as exc:
            fail(exc.message)
    if verb in ("start", "restart") and row and row.get("active_state") == "failed":
        fail(f"Job for {row['name']} failed. See `kubemu systemctl status {row['name']}` "
             f"and `kubemu journalctl -u {row['name']}` for details.")


def _require_node(ctx: Ctx, node: str) -> None:
    """A node is named, never a path: `--node ../x` is no node."""
    if node not in ctx.state.nodes():
        fail(f"there is no node {node} in {ctx.state.root}")


@main.command()
@node_option
@click.option("-u", "--unit", required=True, help="unit name, or `init` for init's own log")
@click.option("-f", "--follow", is_flag=True, help="keep printing new lines")
@click.option("-n", "--lines", type=int, default=None, help="show only the last N lines")
@pass_ctx
def journalctl(ctx: Ctx, node: str, unit: str, follow: bool, lines: int | None) -> None:
    """Show a unit's log (its output and init's messages about it)."""
    _require_node(ctx, node)
    name = unit.removesuffix(".service")
    path = ctx.state.node_dir(node) / "logs" / f"{name}.log"
    if not path.exists():
        fail(f"no log for unit {unit} on {node} ({path})")
    with open(path, "rb") as f:
        data = f.read()
        text = data.decode(errors="replace").splitlines()
        if lines is not None:
            text = text[-lines:] if lines > 0 else []
        for line in text:
            click.echo(line)
        if follow:
            _follow(f)


@main.command()
@click.argument("target", metavar="POD | TYPE/NAME")
@click.option("-c", "--container", help="which container (needed when the pod has several)")
@click.option("-f", "--follow", is_flag=True, help="keep printing new lines")
@click.option("-p", "--previous", is_flag=True, help="the previous instance of the container")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option("--node", default=None, help="look only on this node")
@click.option("--tail", type=int, default=-1, help="only the last N lines")
@click.option("--pod-running-timeout", type=float, default=20.0, show_default=True,
              help="TYPE/NAME: seconds to wait for a pod to exist")
@pass_ctx
def logs(ctx: Ctx, target: str, container: str | None, follow: bool, previous: bool, namespace: str,
         node: str | None, tail: int, pod_running_timeout: float) -> None:
    """Print a container's log, as `kubectl logs` does (read from the node's files).

    \b
    kubemu logs web-5d4f8-x2x9q        kubemu logs pod/web-5d4f8-x2x9q
    kubemu logs deployment/web         (a pod of it, the one kubectl would pick)"""
    if node:
        _require_node(ctx, node)
    pod = _logs_pod(ctx, target, namespace, pod_running_timeout)
    nodes = [node] if node else ctx.running()
    found = [(d, p) for n in nodes for d, p in ctx.state.pods(n)
             if p["metadata"]["name"] == pod and p["metadata"]["namespace"] == namespace]
    if not found:
        fail(f'Error from server (NotFound): pods "{pod}" not found')
    pod_dir, obj = found[0]
    statuses = {c["name"]: c for c in obj["status"].get("initContainerStatuses", []) +
                obj["status"].get("containerStatuses", [])}
    if container is None:
        if len(obj["spec"]["containers"]) > 1:
            names = " ".join(c["name"] for c in obj["spec"]["containers"])
            fail(f"a container name must be specified for pod {pod}, choose one of: [{names}]")
        container = obj["spec"]["containers"][0]["name"]
    if container not in statuses:
        fail(f'container {container} is not valid for pod {pod}')
    count = statuses[container].get("restartCount", 0) - (1 if previous else 0)
    path = pod_dir / container / f"{count}.log"
    if count < 0 or not path.exists():
        waiting = (statuses[container].get("state") or {}).get("waiting")
        if waiting and not previous:  # the kubelet's words for the usual reasons a container has no log yet
            why = WAITING_WHY.get(waiting.get("reason"), waiting.get("reason"))
            fail(f'Error from server (BadRequest): container "{container}" in pod "{pod}" is waiting to start: {why}')
        what = f'previous terminated container "{container}"' if previous else f'container "{container}"'
        fail(f'{what} in pod "{pod}" not found')
    with open(path, "rb") as f:
        lines = f.read().decode(errors="replace").splitlines()
        for line in lines[max(0, len(lines) - tail):] if tail >= 0 else lines:
            click.echo(line)
        if follow:
            _follow(f)


WAITING_WHY = {"ErrImagePull": "image can't be pulled", "ImagePullBackOff": "trying and failing to pull image"}


def _logs_pod(ctx: Ctx, target: str, namespace: str, timeout: float) -> str:
    """The pod `logs` reads: POD or pod/POD as given; for a Deployment or ReplicaSet the pod
    kubectl would pick (its selector's pods in podutils.ByLogging order; "Found N pods, using
    pod/X" when there are several), waiting up to `timeout` for one to exist."""
    from .api.resources import UnknownResourceError
    from .apiclient import NotFound
    from .kubectl.session import CommandError, connect, server_error
    from .kubectl.targets import logging_order, one_pod_target, pod_selector

    try:
        r, name = one_pod_target(target)
        if r.kind == "Pod":
            return name
        with connect(ctx) as api:
            try:
                obj = api.get(r.plural, name, namespace)
            except NotFound as err:
                fail(server_error(err))
            selector = pod_selector(r, obj)
            deadline = time.monotonic() + timeout
            while True:
                pods = [] if selector.nothing else \
                    api.list_all("pods", namespace, label_selector=str(selector))["items"]
                if pods or time.monotonic() >= deadline:
                    break
                time.sleep(0.5)
    except (CommandError, UnknownResourceError) as err:
        fail(str(err))
    if not pods:
        fail("timed out waiting for the condition")
    pod = min(pods, key=logging_order)
    if len(pods) > 1:
        click.echo(f"Found {len(pods)} pods, using pod/{pod['metadata']['name']}", err=True)
    return pod["metadata"]["name"]


def _follow(f) -> None:
    """Print what is appended to `f` as it comes, like tail -f: one inotify IN_MODIFY watch
    on the file, added before the read that catches up, so no write falls in between."""
    from inotify_simple import INotify, flags  # only `-f` pays for the import

    try:
        with INotify() as inotify:
            inotify.add_watch(f.name, flags.MODIFY)
            while True:
                chunk = f.read()
                if chunk:
                    sys.stdout.write(chunk.decode(errors="replace"))
                    sys.stdout.flush()
                inotify.read()  # blocks until the file is written to
    except KeyboardInterrupt:
        pass


# --- bench ---------------------------------------------------------------------------------

def _int_list(ctx, param, value: str | None) -> list[int] | None:
    try:
        return [int(v) for v in value.split(",") if v.strip()] if value else None
    except ValueError:
        raise click.BadParameter("expected comma-separated numbers, e.g. 1,16,64,256") from None


@main.command()
@click.argument("suite", type=click.Choice(["restart", "failover", "wire", "api", "startup", "footprint",
                                            "store", "reconcile", "service", "scale", "all"]))
@click.option("--quick", is_flag=True,
              help="fewer trials, shorter windows: under a minute per suite (store: about 3 minutes)")
@click.option("--kills", type=int, default=None,
              help="restart: kills per row (default 30, 5 with --quick); failover: kills per layer (default "
                   "20, 5 with --quick); store: leader kills for failover (default 20, 10 with --quick); "
                   "reconcile: controller-manager kills (default 1)")
@click.option("--trials", type=int, default=None,
              help="startup: `kubemu up` runs per timing set (default 3, 1 with --quick)")
@click.option("--clients", callback=_int_list, help="store: write concurrency levels (default 1,16,64,256)")
@click.option("--read-clients", callback=_int_list, help="store: read concurrency levels (default 1,64)")
@click.option("--seconds", type=float, default=None,
              help="store: measured seconds per level (default 5, 2 with --quick)")
@click.option("--peers", default="etcd,pysyncobj", show_default=True,
              help="store: peers to run beside kubemu (installed for the benchmark if missing); 'none' for none")
@click.option("--pods", type=int, default=None,
              help="reconcile: pods in all (default 1000, 100 with --quick); scale: (default 30000, 2000 with --quick)")
@click.option("--deployments", type=int, default=None,
              help="reconcile: Deployments the pods are spread over (default 10, 2 with --quick)")
@click.option("--hollow-nodes", type=int, default=None,
              help="reconcile: hollow nodes the pods run on (default 100, 10 with --quick); scale: (default 1000, "
                   "100 with --quick)")
@click.option("--workload", "workloads", multiple=True,
              type=click.Choice(["deployment", "statefulset", "daemonset", "job"]),
              help="reconcile: also measure the pods made through this controller, beside the Deployment "
                   "row (repeatable)")
@click.option("-o", "--output", "json_path", type=click.Path(dir_okay=False),
              help="write every figure (unit, spread, machine) as JSON; with `all`, every suite's in one file")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False),
              help="write PNG plots (latency CDFs, bars beside floors and anchors, rates over time) into DIR")
def bench(suite: str, quick: bool, kills: int | None, trials: int | None, clients, read_clients,
          seconds: float | None, peers: str, pods: int | None, deployments: int | None, hollow_nodes: int | None,
          workloads: tuple[str, ...], json_path: str | None, plot_dir: str | None) -> None:
    """Run a benchmark suite (or `all` of them in turn) and print its figures beside its floor,
    peers and anchors.

    \b
    restart    kill -9 -> new PID alive: floor, init, kubelet, pod containers, supervisord
    failover   kill -9 the store leader / the apiserver -> served again
    wire       kubemu's RPC round trip and stream rate beside raw pyzmq
    api        the apiserver's HTTPS door beside its wire: latency, throughput, CPU per request
    startup    `kubemu up` -> every node Ready, beside kind and minikube
    footprint  an idle cluster's memory (PSS) and CPU per role, beside k3s
    store      durable writes, reads, failover beside etcd and PySyncObj
    reconcile  pods reconciled through Deployments (and --workload ...) on hollow nodes
    service    Services: new Service and endpoint change -> served, DNS q/s, ClusterIP beside pod IP
    scale      1,000 hollow nodes and 30,000 pods: startup, API latency SLOs, Lease lag, memory, store"""
    from bench.runner import SuiteUnavailable, failed, run_suite  # benchmarks load only when asked for

    peer_list = [p.strip() for p in peers.split(",") if p.strip() not in ("", "none")]
    if set(peer_list) - {"etcd", "pysyncobj"}:
        raise click.BadParameter(f"{peers!r}: choose from etcd, pysyncobj, none", param_hint="--peers")
    try:
        report = run_suite(suite, quick, json_path, kills, plot_dir, trials=trials, clients=clients,
                           read_clients=read_clients, seconds=seconds, peers=peer_list, pods=pods,
                           deployments=deployments, hollow_nodes=hollow_nodes, workloads=workloads)
    except SuiteUnavailable as exc:
        fail(f"{suite}: {exc}")
    if failed(report):
        fail(f"suite(s) failed: {', '.join(failed(report))}")


from .store_cli import store  # noqa: E402  (last: store_cli takes fail() from this module)
main.add_command(store)

from .kubectl import register as _register_kubectl  # noqa: E402
_register_kubectl(main)

from .top import top  # noqa: E402
main.add_command(top)

from .token_cli import token  # noqa: E402
main.add_command(token)

from .chaos_cli import chaos  # noqa: E402
main.add_command(chaos)

from .join_cli import join_command  # noqa: E402
main.add_command(join_command)

if __name__ == "__main__":
    main()
