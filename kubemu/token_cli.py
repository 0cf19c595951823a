"""`kubemu token`: bootstrap tokens, as `kubeadm token` manages them.

    kubemu token create [TOKEN] [--ttl 24h0m0s] [--description TEXT] [--usages signing,authentication]
                        [--groups system:bootstrappers:kubeadm:default-node-token] [--print-join-command]
    kubemu token list
    kubemu token delete TOKEN|ID ...
    kubemu token generate

`create` prints the token (or, with --print-join-command, the `kubemu join` line a new node
runs); `list` prints kubeadm's table; `delete` says `bootstrap token "<id>" deleted` for each.
Errors are kubeadm's words on one line and a non-zero exit.
"""
from __future__ import annotations

import random
import time
from pathlib import Path

import click

from . import bootstraptoken as bt

TTL_HELP = ("how long the token is valid, a Go duration (24h0m0s, 30m); 0 never expires "
            "(default 24h0m0s)")


def create_token(api, token: bt.BootstrapToken) -> None:
    """Store `token` as its kube-system Secret (a SyncApiClient `api`); kubeadm init's default
    token is `create_token(api, BootstrapToken.new(generate(SystemRandom()), now,
    description=DEFAULT_DESCRIPTION_INIT))`."""
    api.create("secrets", bt.secret_for(token), bt.NAMESPACE)


def join_command(api_server: str, token: str, ca_pem: bytes) -> str:
    """The line `kubeadm token create --print-join-command` prints, for kubemu."""
    return (f"kubemu join {api_server} --token {token} "
            f"--discovery-token-ca-cert-hash {bt.ca_cert_hash(ca_pem)}")


def token_rows(secrets: list[dict], now: float) -> str:
    """`kubeadm token list`'s table (its tabwriter: min width 10, padding 3)."""
    from .kubectl.tabwriter import TabWriter
    from .kubectl.timefmt import short_human_duration
    lines = ["TOKEN\tTTL\tEXPIRES\tUSAGES\tDESCRIPTION\tEXTRA GROUPS\n"]
    tokens = [t for t in map(bt.BootstrapToken.from_secret, secrets) if t is not None]
    for t in sorted(tokens, key=lambda t: t.id):
        ttl = "<forever>" if t.expires is None else short_human_duration(t.expires - now)
        expires = "<never>" if t.expires is None else bt.format_time(t.expires)
        lines.append("\t".join((t.token, ttl, expires, ",".join(t.usages) or "<none>",
                                t.description or "<none>", ",".join(t.groups) or "<none>")) + "\n")
    return TabWriter(minwidth=10, padding=3).format("".join(lines))


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
    if print_join_command:
        port = obj.state.api_port()
        ca = Path(obj.state.pki_dir) / "ca.crt"
        if port is None or not ca.exists():
            _fail(f"no cluster in {obj.state.root}: its API port and CA are needed for the join command")
        line = join_command(f"127.0.0.1:{port}", new.token, ca.read_bytes())
    with connect(obj) as api:
        create_token(api, new)
    click.echo(line)


@token.command("list")
@click.pass_obj
def list_tokens(obj) -> None:
    """List the bootstrap tokens (kubeadm token list)."""
    from .kubectl.session import connect
    with connect(obj) as api:
        secrets = api.list_all("secrets", bt.NAMESPACE, field_selector=f"type={bt.SECRET_TYPE}")["items"]
    click.echo(token_rows(secrets, time.time()), nl=False)


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
