"""`kubemu token`: bootstrap tokens, as `kubeadm token` manages them.

    kubemu token create [TOKEN] [--ttl 24h0m0s] [--description TEXT] [--usages signing,authentication]
                        [--groups system:bootstrappers:kubeadm:default-node-token] [--print-join-command]
    kubemu token list
    kubemu token delete TOKEN|ID ...
    kubemu token generate

`create` prints the token (or, with --print-join-command, the `kubemu join` line a new node
runs, for the address and CA in kube-public/cluster-info); `list` prints kubeadm's table, and
on stderr one line for each token Secret it cannot read (a malformed expiration, say), which it
skips as kubeadm does; `delete` says `bootstrap token "<id>" deleted` for each. Errors are
kubeadm's words on one line and a non-zero exit.
"""
from __future__ import annotations

import random
import time

import click

from components.controllers.bootstrapsigner import CONFIGMAP, KUBECONFIG_KEY
from components.controllers.bootstrapsigner import NAMESPACE as CLUSTER_INFO_NAMESPACE

from . import bootstraptoken as bt
from .api.fielderrors import go_quote

TTL_HELP = ("how long the token is valid, a Go duration (24h0m0s, 30m); 0 never expires "
            "(default 24h0m0s)")


def create_token(api, token: bt.BootstrapToken) -> None:
    """Store `token` as its kube-system Secret (a SyncApiClient `api`); kubeadm init's default
    token is `create_token(api, BootstrapToken.new(generate(SystemRandom()), now,
    description=DEFAULT_DESCRIPTION_INIT))`."""
    api.create("secrets", bt.secret_for(token), bt.NAMESPACE)


def join_line(cluster_info: dict, token: str) -> str:
    """The line `kubeadm token create --print-join-command` prints: the join command `up`
    prints, on one line, for the address and CA a joining node finds in cluster-info (its
    kubeconfig's server without https://, and the hash of its CA). ValueError if cluster-info
    does not say them."""
    from .join import JoinError, parse_cluster_kubeconfig
    data = cluster_info.get("data") if isinstance(cluster_info.get("data"), dict) else {}
    text = data.get(KUBECONFIG_KEY)
    if not isinstance(text, str) or not text:
        raise ValueError(f"there is no {KUBECONFIG_KEY} key in the {CONFIGMAP} ConfigMap")
    try:
        cluster = parse_cluster_kubeconfig(text)
        ca_hash = bt.ca_cert_hash(cluster.ca_pem)
    except JoinError as err:
        raise ValueError(str(err)) from None
    except ValueError as err:
        raise ValueError(f"the CA in the {CONFIGMAP} ConfigMap is not a certificate: {err}") from None
    command = bt.join_command(cluster.server.removeprefix("https://"), token, ca_hash)
    return command.replace("\\\n", "").replace("\t", "")  # as kubeadm flattens it


def unreadable(secret: dict) -> str | None:
    """Why `kubeadm token list` skips a bootstrap token Secret (BootstrapTokenFromSecret's error,
    in its words), None when it lists it. A Secret of another type is not looked at."""
    if not isinstance(secret, dict) or secret.get("type") != bt.SECRET_TYPE:
        return None
    name = (secret.get("metadata") or {}).get("name", "")
    data = bt.secret_data(secret)
    if data is None:
        return f"bootstrap Token Secret has data that is not base64: {name}"
    tid = data.get(bt.TOKEN_ID, "")
    if not tid:
        return f"bootstrap Token Secret has no token-id data: {name}"
    if name != bt.secret_name(tid):
        return (f"bootstrap token name is not of the form '{bt.SECRET_PREFIX}(token-id)'. "
                f"Actual: {go_quote(name)}. Expected: {go_quote(bt.secret_name(tid))}")
    if not data.get(bt.TOKEN_SECRET):
        return f"bootstrap Token Secret has no token-secret data: {name}"
    try:
        bt.parse(f"{tid}.{data[bt.TOKEN_SECRET]}")
    except ValueError as err:
        return f"bootstrap Token Secret is invalid and couldn't be parsed: {err}"
    try:
        bt.parse_expiration(data.get(bt.EXPIRATION))
    except ValueError as err:
        return f"can't parse expiration time of bootstrap token {go_quote(name)}: {err}"
    return None


def token_rows(secrets: list[dict], now: float) -> tuple[str, list[str]]:
    """`kubeadm token list`'s table (its tabwriter: min width 10, padding 3), and one line per
    bootstrap token Secret it skips, saying why (kubeadm writes those to stderr). A token whose
    expiration is not RFC 3339 is skipped: it is neither listed as never expiring nor as
    expired, as kubeadm neither lists it."""
    from .kubectl.tabwriter import TabWriter
    from .kubectl.timefmt import short_human_duration
    lines = ["TOKEN\tTTL\tEXPIRES\tUSAGES\tDESCRIPTION\tEXTRA GROUPS\n"]
    tokens, skipped = [], []
    for secret in secrets:
        why = unreadable(secret)
        if why is not None:
            skipped.append(why)
        elif (t := bt.BootstrapToken.from_secret(secret)) is not None:
            tokens.append(t)
    for t in sorted(tokens, key=lambda t: t.id):
        ttl = "<forever>" if t.expires is None else short_human_duration(t.expires - now)
        expires = "<never>" if t.expires is None else bt.format_time(t.expires)
        lines.append("\t".join((t.token, ttl, expires, ",".join(t.usages) or "<none>",
                                t.description or "<none>", ",".join(t.groups) or "<none>")) + "\n")
    return TabWriter(minwidth=10, padding=3).format("".join(lines)), skipped


def _fail(message: str):
    from .cli import fail

    fail(message)


def _split(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split(",") if part)


@click.group("token")
def token() -> None:
    """Bootstrap tokens for nodes that join (kubeadm token)."""


@token.command("create")
@click.argument("value", required=False)
@click.option("--ttl", default="24h0m0s", help=TTL_HELP)
@click.option("--description", default="", help="a human-friendly description of the token")
@click.option("--usages", default=",".join(bt.USAGES),
              help="what the token may be used for: signing (cluster-info), authentication")
@click.option("--groups", default=bt.DEFAULT_GROUP,
              help="extra groups the token authenticates as (each system:bootstrappers:...)")
@click.option("--print-join-command", is_flag=True,
              help="print the whole `kubemu join` command, not just the token")
@click.pass_obj
def create(obj, value, ttl, description, usages, groups, print_join_command) -> None:
    """Create a bootstrap token (a new random one unless VALUE is given)."""
    from .apiclient import NotFound
    from .kubectl.durations import parse_duration
    from .kubectl.session import connect
    try:
        seconds = parse_duration(ttl)
        new = bt.BootstrapToken.new(value or bt.generate(random.SystemRandom()), time.time(),
                                    ttl=seconds, description=description,
                                    usages=_split(usages), groups=_split(groups))
    except ValueError as err:
        _fail(str(err))
    line = new.token
    with connect(obj) as api:
        if print_join_command:  # read before the token is made: a failure leaves none behind
            try:
                line = join_line(api.get("configmaps", CONFIGMAP, CLUSTER_INFO_NAMESPACE), new.token)
            except (NotFound, ValueError) as err:
                _fail(f"failed to get join command: {getattr(err, 'message', err)}")
        create_token(api, new)
    click.echo(line)


@token.command("list")
@click.pass_obj
def list_tokens(obj) -> None:
    """List the bootstrap tokens (kubeadm token list); one it cannot read is skipped, and why
    is said on stderr."""
    from .kubectl.session import connect
    with connect(obj) as api:
        secrets = api.list_all("secrets", bt.NAMESPACE, field_selector=f"type={bt.SECRET_TYPE}")["items"]
    table, skipped = token_rows(secrets, time.time())
    for why in skipped:
        click.echo(why, err=True)
    click.echo(table, nl=False)


@token.command("delete")
@click.argument("values", nargs=-1, required=True)
@click.pass_obj
def delete(obj, values) -> None:
    """Delete bootstrap tokens, each given by its id or the whole token."""
    from .apiclient import NotFound
    from .kubectl.session import connect
    try:
        ids = [bt.parse_id_or_token(v) for v in values]
    except ValueError as err:
        _fail(str(err))
    with connect(obj) as api:
        for tid in ids:
            try:
                api.delete("secrets", bt.secret_name(tid), bt.NAMESPACE)
            except NotFound as err:
                _fail(f'failed to delete bootstrap token "{tid}": {err.message}')
            click.echo(f'bootstrap token "{tid}" deleted')


@token.command("generate")
def generate() -> None:
    """Print a new random token without creating it (kubeadm token generate)."""
    click.echo(bt.generate(random.SystemRandom()))
