"""kubemu cordon | uncordon | drain NODE...: node maintenance as kubectl does it
(staging/src/k8s.io/kubectl/pkg/cmd/drain; the decisions are drain.py's).

cordon sets the Node's spec.unschedulable (the node lifecycle controller adds the
node.kubernetes.io/unschedulable:NoSchedule taint, as Kubernetes' TaintNodesByCondition does);
uncordon removes it. drain cordons, then evicts the node's pods through the Eviction API (a 429
from a PodDisruptionBudget is retried every 5 s, and so is an eviction the apiserver did not
answer: evicting again is harmless) and waits for each to be gone.
"""
from __future__ import annotations

import time

import click

from kubemu.apiclient import NotFound, SyncApiClient, TooManyRequests, WireError

from . import drain
from .durations import Duration
from .options import GoCommand
from .session import CommandError, connect, handle_errors, is_connection_error, report_errors, server_error


# An eviction is several writes on the apiserver's side (the budget, then the pod): on a loaded
# machine it may take longer than the CLI's usual 5 s; kubectl sets no limit of its own.
CALL_TIMEOUT = 60.0


def _cordon(api: SyncApiClient, names: tuple[str, ...], desired: bool) -> None:
    """RunCordonOrUncordon: `node/x cordoned` (or `already cordoned`); a missing node stops the
    command with the server's error, as kubectl's builder does before any change."""
    verb = "cordoned" if desired else "uncordoned"
    nodes = [api.get("nodes", name) for name in names]
    for node in nodes:
        name = node["metadata"]["name"]
        patch = drain.cordon_patch(node, desired)
        if patch is None:
            click.echo(f"node/{name} already {verb}")
            continue
        try:
            api.patch("nodes", name, patch)
        except WireError as err:
            if is_connection_error(err):
                raise
            click.echo(f'error: unable to {verb.removesuffix("ed")} node "{name}": {err.message}', err=True)
            continue
        click.echo(f"node/{name} {verb}")


@click.command("cordon", cls=GoCommand)
@click.argument("nodes", nargs=-1, required=True)
@click.pass_obj
@handle_errors
def cordon(obj, nodes) -> None:
    """Mark nodes unschedulable (kubectl cordon)."""
    with connect(obj) as api:
        _cordon(api, nodes, True)


@click.command("uncordon", cls=GoCommand)
@click.argument("nodes", nargs=-1, required=True)
@click.pass_obj
@handle_errors
def uncordon(obj, nodes) -> None:
    """Mark nodes schedulable again (kubectl uncordon)."""
    with connect(obj) as api:
        _cordon(api, nodes, False)


def _daemonset_lookup(api: SyncApiClient):
    def lookup(namespace: str, name: str):
        try:
            api.get("daemonsets", name, namespace)
        except NotFound as err:
            return True, err.message
        except WireError as err:
            if is_connection_error(err):
                raise
            return False, err.message
        return None
    return lookup


def _node_pods(api: SyncApiClient, node: str, opts: drain.Options) -> list[drain.PodDelete]:
    pods = api.list_all("pods", None, field_selector=f"spec.nodeName={node}")["items"]
    return drain.filter_pods(pods, opts, _daemonset_lookup(api))


def _remove(api: SyncApiClient, pods: list[dict], grace: int, timeout: float | None,
            use_eviction: bool) -> list[str]:
    """DeleteOrEvictPods: evict (or delete) each pod and wait for it to be gone; the failures."""
    evictions = drain.Evictions(pods, time.monotonic(), timeout)
    options = {"gracePeriodSeconds": grace} if grace >= 0 else {}
    while not evictions.finished:
        now = time.monotonic()
        for step, pod in evictions.due(now):
            name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]
            if step == drain.CHECK:
                try:
                    current = api.get("pods", name, ns, timeout=CALL_TIMEOUT)
                except NotFound:
                    current = None
                except WireError as err:
                    if not is_connection_error(err):
                        raise
                    evictions.still_there(pod, now)  # the control plane restarting: look again
                    continue
                if drain.gone(pod, current):
                    click.echo(f"pod/{name} {'evicted' if use_eviction else 'deleted'}")
                    evictions.done(pod)
                else:
                    evictions.still_there(pod, now)
                continue
            try:
                if use_eviction:
                    click.echo(f"evicting pod {ns}/{name}")
                    api.evict(name, {"apiVersion": "policy/v1", "kind": "Eviction",
                                     "metadata": {"name": name, "namespace": ns},
                                     **({"deleteOptions": options} if options else {})}, ns,
                              timeout=CALL_TIMEOUT)
                else:
                    api.delete("pods", name, ns, grace_period_seconds=grace if grace >= 0 else None,
                               timeout=CALL_TIMEOUT)
            except NotFound:
                evictions.done(pod)
                continue
            except WireError as err:
                # a budget's 429, or no answer (the control plane restarting): try again later
                if isinstance(err, TooManyRequests) or is_connection_error(err):
                    click.echo(f"{evictions.blocked(pod, now)}: {err.message}", err=True)
                else:
                    evictions.failed(pod, err.message)
                continue
            evictions.admitted(pod, now)
        due = evictions.next_due()
        if due is not None:
            time.sleep(max(0.0, due - time.monotonic()))
    return evictions.failures


def _drain_node(api: SyncApiClient, node: str, opts: drain.Options, grace: int, timeout: float | None,
                use_eviction: bool) -> list[str]:
    """deleteOrEvictPodsSimple: the errors that kept the node from draining (none: drained)."""
    items = _node_pods(api, node, opts)
    errors = drain.errors(items)
    if errors:
        return errors
    warned = drain.warnings(items)
    if warned:
        click.echo(f"WARNING: {warned}", err=True)
    failures = _remove(api, drain.to_delete(items), grace, timeout, use_eviction)
    if failures:
        pending = drain.to_delete(_node_pods(api, node, opts))
        if pending:
            click.echo(f'There are pending pods in node "{node}" when an error occurred: '
                       f"{drain.aggregate(failures)}", err=True)
            for pod in pending:
                click.echo(f"pod/{pod['metadata']['name']}", err=True)
    return failures


@click.command("drain", cls=GoCommand)
@click.argument("nodes", nargs=-1, required=True)
@click.option("--ignore-daemonsets", is_flag=True, help="ignore DaemonSet-managed pods")
@click.option("--delete-emptydir-data", is_flag=True,
              help="continue even if there are pods using emptyDir (their data is deleted)")
@click.option("--force", is_flag=True, help="continue even if there are pods that no controller manages")
@click.option("--grace-period", type=int, default=-1,
              help="seconds each pod gets to terminate (negative: the pod's own)")
@click.option("--timeout", type=Duration(), default=0.0,
              help="give up after this long (e.g. 5m; 0: wait for ever)")
@click.option("--disable-eviction", is_flag=True,
              help="delete instead of evict, bypassing PodDisruptionBudgets")
@click.pass_obj
@handle_errors
def drain_cmd(obj, nodes, ignore_daemonsets, delete_emptydir_data, force, grace_period, timeout,
              disable_eviction) -> None:
    """Cordon nodes and evict their pods (kubectl drain).

    \b
    kubemu drain node-2 --ignore-daemonsets
    kubemu drain node-1 --force --delete-emptydir-data --timeout 2m
    """
    if timeout < 0:
        raise CommandError("--timeout must be a non-negative duration")
    opts = drain.Options(ignore_daemonsets, delete_emptydir_data, force)
    with connect(obj) as api:
        _cordon(api, nodes, True)
        for i, node in enumerate(nodes):
            try:
                errors = _drain_node(api, node, opts, grace_period, timeout or None, not disable_eviction)
            except WireError as err:
                if is_connection_error(err):
                    raise
                errors = [server_error(err)]
            if not errors:
                click.echo(f"node/{node} drained")
                continue
            click.echo(f'error: unable to drain node "{node}" due to error: {drain.aggregate(errors)}, '
                       "continuing command...", err=True)
            click.echo("There are pending nodes to be drained:", err=True)
            for pending in nodes[i:]:
                click.echo(f" {pending}", err=True)
            report_errors([CommandError(e) for e in errors])
