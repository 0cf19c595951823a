"""`kubemu store`: the store's command line, with etcdctl's habits.

    kubemu store [--endpoints EP1,EP2] [-o simple|json|table] COMMAND ...
      put KEY [VALUE]                      OK (VALUE from stdin when left out)
      get KEY [RANGE_END] [--prefix] [--rev N] [--keys-only] [--limit N] ...
                                           key, then value, per key
      range PREFIX                         get PREFIX --prefix
      del KEY [RANGE_END] [--prefix]       the number of keys deleted
      watch KEY [--prefix] [--rev N]       PUT|DELETE, key, value per event, until Ctrl-C
      status [--cluster]                   a table like `etcdctl endpoint status -w table`
      compact REV
      defrag [--cluster | --member NAME[,NAME...]]
                                           one line per member, as `etcdctl defrag`
      member list | member add NAME ENDPOINT | member remove NAME
      lease grant TTL | lease revoke ID | lease keepalive ID [--once] | lease list
      move-leader NAME
      fault partition --from A --to B [--symmetric] | fault delay --ms N [--jitter [MS]]
      fault disk full|fsync-fail|ok --member M | fault power-loss --member M | fault heal | fault list

Endpoints: --endpoints (comma-separated, as etcdctl), else $KUBEMU_STORE_ENDPOINTS, else the
running cluster's `<state dir>/store-endpoints` (one per line). An endpoint without a scheme
(HOST:PORT, etcdctl's spelling) means tcp://HOST:PORT.

Output (-o/--output, or etcdctl's -w/--write-out; before or after the command): `simple` is
etcdctl's plain lines with raw bytes; `json` is one line of JSON per response (per event for
watch) with keys and values base64-encoded as `etcdctl -w json` does; `table` draws a table.
status and member list default to a table. Lease IDs are hexadecimal, as etcdctl prints them.
Errors are one line on stderr and a non-zero exit.
"""
from __future__ import annotations

import base64
import json
import math
import os
import sys
import time

import click
from rich import box
from rich.console import Console
from rich.table import Table

from store.client import Compacted, Event, OutcomeUnknown, SyncStoreClient, WireError

from . import wire
from ._wire_auth import state_credentials
from .statedir import StateDir

ENV_ENDPOINTS = "KUBEMU_STORE_ENDPOINTS"
ENDPOINTS_FILE = "store-endpoints"
OUTPUTS = ("simple", "json", "table")

console = Console() if sys.stdout.isatty() else Console(width=200)


def fail(message: str, code: int = 1):
    """kubemu's one-line error (imported when needed: kubemu.cli imports this module)."""
    from .cli import fail as cli_fail

    cli_fail(message, code)


def describe(err: BaseException) -> str:
    """One line for an error."""
    if isinstance(err, Compacted):
        text = f"required revision has been compacted (compact revision {err.compact_revision})"
    elif isinstance(err, OutcomeUnknown):
        text = f"the request may or may not have been applied: {err.message}"
    elif isinstance(err, WireError):
        text = f"{err.code}: {err.message}" if err.message else err.code
    else:
        text = str(err)
    return " ".join(text.split())


# ------------------------------------------------------------------------------------ context

class StoreCtx:
    def __init__(self, endpoints: str | None, output: str | None, timeout: float, dial_timeout: float):
        self.endpoints_opt = endpoints
        self.output = output
        self.timeout = timeout
        self.dial_timeout = dial_timeout
        self._client: SyncStoreClient | None = None

    def state_root(self):
        obj = click.get_current_context().find_root().obj
        state = getattr(obj, "state", None)  # kubemu.cli's Ctx, when run as `kubemu store`
        return state.root if state is not None else StateDir(None).root

    def endpoints(self) -> list[str]:
        if self.endpoints_opt:
            raw = self.endpoints_opt.split(",")
        else:
            path = self.state_root() / ENDPOINTS_FILE
            try:
                raw = [line for line in path.read_text().splitlines() if not line.strip().startswith("#")]
            except OSError:
                raw = []
            if not any(e.strip() for e in raw):
                fail(f"no store endpoints: pass --endpoints or set ${ENV_ENDPOINTS}, or start a cluster "
                     f"(`kubemu up` writes {path})")
        eps = [e.strip() if "://" in e else f"tcp://{e.strip()}" for e in raw if e.strip()]
        if not eps:
            fail(f"no store endpoints in --endpoints / ${ENV_ENDPOINTS}")
        return eps

    def credentials(self):
        """The admin's wire credentials from the state directory, when it has them."""
        try:
            return state_credentials(self.state_root())
        except ValueError as exc:
            fail(str(exc))

    def client(self, endpoints: list[str] | None = None) -> SyncStoreClient:
        """The client of the given endpoints (default: --endpoints or the state's), closed with
        the command."""
        if endpoints is None and self._client is not None:
            return self._client
        try:
            client = SyncStoreClient(endpoints or self.endpoints(), timeout=self.timeout,
                                     dial_timeout=self.dial_timeout, credentials=self.credentials())
        except ValueError as exc:
            fail(str(exc))
        click.get_current_context().call_on_close(client.close)
        if endpoints is None:
            self._client = client
        return client

    def fmt(self, local: str | None, default: str = "simple") -> str:
        return local or self.output or default

    def call(self, method: str, *args, **kwargs):
        """A client call; any failure is one line and a non-zero exit."""
        client = self.client()
        try:
            return getattr(client, method)(*args, **kwargs)
        except (WireError, ValueError) as err:
            fail(describe(err))


pass_sctx = click.make_pass_decorator(StoreCtx)


def output_option(fn):
    return click.option("-o", "--output", "-w", "--write-out", "output", type=click.Choice(OUTPUTS),
                        default=None, help="output format (default: the group's)")(fn)


# ------------------------------------------------------------------------------------ output

def jsonable(obj):
    """etcdctl -w json's shape: bytes (keys, values) as base64 strings."""
    if isinstance(obj, bytes):
        return base64.b64encode(obj).decode("ascii")
    if isinstance(obj, Event):
        return jsonable(obj.to_wire())
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


def echo_json(obj) -> None:
    click.echo(json.dumps(jsonable(obj), separators=(",", ":")))


def echo_bytes(data: bytes) -> None:
    """A line of raw bytes, as etcdctl prints keys and values."""
    click.echo(data)


def echo_kv(kv: dict, keys_only: bool = False, value_only: bool = False) -> None:
    if not value_only:
        echo_bytes(kv["key"])
    if not keys_only:
        echo_bytes(kv.get("value", b""))


def human_bytes(n: int | None) -> str:
    """go-humanize's Bytes, as etcdctl shows DB SIZE: 20 kB, 1.2 MB."""
    if n is None:
        return "-"
    if n < 10:
        return f"{n} B"
    units = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
    e = min(int(math.floor(math.log(n, 1000))), len(units) - 1)
    val = n / 1000 ** e
    return f"{val:.0f} {units[e]}" if val >= 10 or e == 0 else f"{val:.1f} {units[e]}"


def text(data) -> str:
    if isinstance(data, bytes):
        return data.decode(errors="replace")
    return "" if data is None else str(data)


def new_table(*columns: str) -> Table:
    table = Table(box=box.ASCII, header_style="bold", show_lines=False)
    for col in columns:
        table.add_column(col, overflow="fold")
    return table


def kv_table(kvs: list[dict]) -> Table:
    table = new_table("KEY", "VALUE", "CREATE REV", "MOD REV", "VERSION", "LEASE")
    for kv in kvs:
        table.add_row(text(kv["key"]), text(kv.get("value")), str(kv.get("create_revision", "")),
                      str(kv.get("mod_revision", "")), str(kv.get("version", "")), lease_hex(kv.get("lease")))
    return table


def lease_hex(lease_id: int | None) -> str:
    return f"{lease_id:016x}" if lease_id else ""


def parse_lease(value: str) -> int:
    try:
        lease_id = int(value, 16)
    except ValueError:
        fail(f"bad lease ID {value!r}: expected hexadecimal, as `lease grant` prints it")
    return lease_id


def key_bytes(arg: str) -> bytes:
    return os.fsencode(arg)  # the exact bytes given on the command line


# ------------------------------------------------------------------------------------ the group

@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--endpoints", envvar=ENV_ENDPOINTS, default=None, metavar="EP1,EP2,...",
              help=f"store endpoints, comma-separated (default ${ENV_ENDPOINTS}, else <state dir>/{ENDPOINTS_FILE})")
@click.option("-o", "--output", "-w", "--write-out", "output", type=click.Choice(OUTPUTS), default=None,
              help="output format: simple (default), json (base64 keys and values) or table")
@click.option("--command-timeout", default=5.0, show_default=True, help="seconds for one request")
@click.option("--dial-timeout", default=2.0, show_default=True, help="seconds to reach an endpoint")
@click.pass_context
def store(ctx: click.Context, endpoints: str | None, output: str | None, command_timeout: float,
          dial_timeout: float) -> None:
    """The store (the etcd analog): etcdctl's commands."""
    ctx.obj = StoreCtx(endpoints, output, command_timeout, dial_timeout)


@store.command()
@click.argument("key")
@click.argument("value", required=False)
@click.option("--lease", default="0", help="attach the key to this lease (ID in hex)")
@click.option("--prev-kv", is_flag=True, help="also print the key-value pair before this put")
@output_option
@pass_sctx
def put(sctx: StoreCtx, key: str, value: str | None, lease: str, prev_kv: bool, output: str | None) -> None:
    """Put KEY = VALUE (VALUE read from stdin when left out)."""
    data = sys.stdin.buffer.read() if value is None else key_bytes(value)
    resp = sctx.call("put", key_bytes(key), data, lease=parse_lease(lease), prev_kv=prev_kv)
    if sctx.fmt(output) == "json":
        echo_json(resp)
        return
    click.echo("OK")
    if prev_kv and resp.get("prev_kv"):
        echo_kv(resp["prev_kv"])


def _print_range(sctx: StoreCtx, resp: dict, output: str | None, keys_only: bool = False,
                 value_only: bool = False, count_only: bool = False) -> None:
    fmt = sctx.fmt(output)
    if fmt == "json":
        echo_json(resp)
    elif count_only:
        click.echo(resp.get("count", 0))
    elif fmt == "table":
        console.print(kv_table(resp.get("kvs", [])))
    else:
        for kv in resp.get("kvs", []):
            echo_kv(kv, keys_only=keys_only, value_only=value_only)


def _range_end(key: bytes, range_end: str | None, prefix: bool, from_key: bool) -> tuple[bytes | None, bool]:
    if sum((range_end is not None, prefix, from_key)) > 1:
        fail("give at most one of RANGE_END, --prefix and --from-key")
    if from_key:
        return b"\0", False
    return (None if range_end is None else key_bytes(range_end)), prefix


@store.command()
@click.argument("key")
@click.argument("range_end", required=False)
@click.option("--prefix", is_flag=True, help="every key with KEY as a prefix")
@click.option("--from-key", is_flag=True, help="every key >= KEY")
@click.option("--rev", type=click.IntRange(0), default=0, help="read at this revision (0: now)")
@click.option("--limit", type=click.IntRange(0), default=0, help="at most this many keys")
@click.option("--keys-only", is_flag=True, help="print keys only")
@click.option("--print-value-only", is_flag=True, help="print values only")
@click.option("--count-only", is_flag=True, help="print only the number of keys")
@click.option("--consistency", type=click.Choice(["l", "s"]), default="l",
              help="l: linearizable (default), s: serializable (the replica's local state)")
@output_option
@pass_sctx
def get(sctx: StoreCtx, key: str, range_end: str | None, prefix: bool, from_key: bool, rev: int, limit: int,
        keys_only: bool, print_value_only: bool, count_only: bool, consistency: str, output: str | None) -> None:
    """Get KEY, or the keys in [KEY, RANGE_END)."""
    k = key_bytes(key)
    end, prefix = _range_end(k, range_end, prefix, from_key)
    resp = sctx.call("range", k, end, prefix=prefix, revision=rev, limit=limit, keys_only=keys_only,
                     count_only=count_only, serializable=consistency == "s")
    _print_range(sctx, resp, output, keys_only, print_value_only, count_only)


@store.command("range")
@click.argument("prefix")
@click.option("--rev", type=click.IntRange(0), default=0, help="read at this revision (0: now)")
@click.option("--limit", type=click.IntRange(0), default=0, help="at most this many keys")
@click.option("--keys-only", is_flag=True, help="print keys only")
@output_option
@pass_sctx
def range_(sctx: StoreCtx, prefix: str, rev: int, limit: int, keys_only: bool, output: str | None) -> None:
    """Every key starting with PREFIX (get PREFIX --prefix)."""
    resp = sctx.call("range", key_bytes(prefix), prefix=True, revision=rev, limit=limit, keys_only=keys_only)
    _print_range(sctx, resp, output, keys_only)


@store.command("del")
@click.argument("key")
@click.argument("range_end", required=False)
@click.option("--prefix", is_flag=True, help="every key with KEY as a prefix")
@click.option("--from-key", is_flag=True, help="every key >= KEY")
@click.option("--prev-kv", is_flag=True, help="also print the deleted key-value pairs")
@output_option
@pass_sctx
def delete(sctx: StoreCtx, key: str, range_end: str | None, prefix: bool, from_key: bool, prev_kv: bool,
           output: str | None) -> None:
    """Delete KEY, or the keys in [KEY, RANGE_END); print how many were deleted."""
    k = key_bytes(key)
    end, prefix = _range_end(k, range_end, prefix, from_key)
    resp = sctx.call("delete", k, range_end=end, prefix=prefix, prev_kv=prev_kv)
    if sctx.fmt(output) == "json":
        echo_json(resp)
        return
    click.echo(resp.get("deleted", 0))
    for kv in resp.get("prev_kvs", []) if prev_kv else []:
        echo_kv(kv)


@store.command()
@click.argument("key")
@click.argument("range_end", required=False)
@click.option("--prefix", is_flag=True, help="watch every key with KEY as a prefix")
@click.option("--rev", type=click.IntRange(0), default=0, help="start at this revision (0: from now on)")
@click.option("--prev-kv", is_flag=True, help="also print each key's previous value")
@click.option("--max-events", type=click.IntRange(1), default=None, help="exit after this many events")
@output_option
@pass_sctx
def watch(sctx: StoreCtx, key: str, range_end: str | None, prefix: bool, rev: int, prev_kv: bool,
          max_events: int | None, output: str | None) -> None:
    """Print changes to KEY (or a range) as they happen, until Ctrl-C."""
    k = key_bytes(key)
    end, prefix = _range_end(k, range_end, prefix, False)
    client = sctx.client()
    as_json = sctx.fmt(output) == "json"
    seen = 0
    try:
        with client.watch(k, range_end=end, prefix=prefix, start_revision=rev, prev_kv=prev_kv) as events:
            for ev in events:
                if as_json:
                    echo_json(ev)
                else:
                    click.echo(ev.type)
                    if prev_kv and ev.prev_kv:
                        echo_kv(ev.prev_kv)
                    echo_kv(ev.kv)
                sys.stdout.flush()
                seen += 1
                if max_events is not None and seen >= max_events:
                    return
    except KeyboardInterrupt:
        return
    except (WireError, ValueError) as err:
        fail(f"watch ended: {describe(err)}")


@store.command()
@click.option("--cluster", is_flag=True, help="every member's endpoint, from the member list")
@output_option
@pass_sctx
def status(sctx: StoreCtx, cluster: bool, output: str | None) -> None:
    """Each endpoint's status, like `etcdctl endpoint status`."""
    client = sctx.client()
    if cluster:
        members = sctx.call("member_list")
        client = sctx.client([m["endpoint"] for m in members])
    rows = client.status_all()
    fmt = sctx.fmt(output, "table")
    if fmt == "json":
        echo_json(rows)
    elif fmt == "simple":
        for r in rows:
            if "error" in r:
                click.echo(f"{r['endpoint']}, error: {r['error']}")
            else:
                click.echo(", ".join(str(x) for x in (
                    r["endpoint"], r.get("name"), r.get("role"), str(r.get("role") == "leader").lower(),
                    r.get("term"), r.get("raft_index"), r.get("applied_index"), r.get("revision"),
                    human_bytes(r.get("db_size")))))
    else:
        table = new_table("ENDPOINT", "NAME", "ROLE", "IS LEADER", "TERM", "RAFT INDEX", "APPLIED INDEX",
                          "REVISION", "DB SIZE", "ERRORS")
        for r in rows:
            if "error" in r:
                table.add_row(r["endpoint"], "", "unreachable", "", "", "", "", "", "", r["error"],
                              style="red")
                continue
            leader = r.get("role") == "leader"
            table.add_row(r["endpoint"], str(r.get("name", "")), r.get("role", ""), str(leader).lower(),
                          str(r.get("term", "")), str(r.get("raft_index", "")), str(r.get("applied_index", "")),
                          str(r.get("revision", "")), human_bytes(r.get("db_size")),
                          ", ".join(f"alarm:{a}" for a in r.get("alarms") or ()),
                          style="bold" if leader else None)
        console.print(table)
    failed = [r["endpoint"] for r in rows if "error" in r]
    if failed:
        fail(f"failed to get the status of {len(failed)} of {len(rows)} endpoint(s): {', '.join(failed)}")


@store.command()
@click.argument("revision", type=click.IntRange(1))
@click.option("--physical", is_flag=True, hidden=True, help="accepted for etcdctl compatibility")
@output_option
@pass_sctx
def compact(sctx: StoreCtx, revision: int, physical: bool, output: str | None) -> None:
    """Discard the history before REVISION."""
    resp = sctx.call("compact", revision)
    if sctx.fmt(output) == "json":
        echo_json(resp)
    else:
        click.echo(f"compacted revision {revision}")


def took(seconds: float) -> str:
    """A duration as etcdctl prints one (Go's time.Duration, to the millisecond)."""
    return f"{seconds * 1000:.0f}ms" if seconds < 1 else f"{seconds:.3f}s"


@store.command()
@click.option("--cluster", is_flag=True, help="every member's endpoint, from the member list")
@click.option("--member", "names", metavar="NAME[,NAME...]", help="only these members")
@output_option
@pass_sctx
def defrag(sctx: StoreCtx, cluster: bool, names: str | None, output: str | None) -> None:
    """Reclaim the disk space a compaction freed, like `etcdctl defrag`: each member rewrites
    its own files (after `compact`, the space stays in the files until then). Default: each
    of --endpoints. Mind --command-timeout on a big store."""
    if cluster and names:
        fail("--cluster and --member: pass one of them")
    if names:
        chosen = _split_names(names)
        members = _members(sctx, chosen)
        endpoints = [members[name] for name in chosen]
    elif cluster:
        endpoints = [m["endpoint"] for m in sctx.call("member_list") if m.get("endpoint")]
    else:
        endpoints = sctx.endpoints()
    client = sctx.client(endpoints)
    failed = []
    for endpoint in endpoints:
        began = time.monotonic()
        try:
            resp = client.defragment(endpoint)
        except WireError as err:
            failed.append(endpoint)
            click.echo(f"Failed to defragment store member[{endpoint}]. took {took(time.monotonic() - began)}. "
                       f"({describe(err)})", err=True)
            continue
        if sctx.fmt(output) == "json":
            echo_json({**resp, "endpoint": endpoint, "took_s": round(time.monotonic() - began, 3)})
        else:
            click.echo(f"Finished defragmenting store member[{endpoint}]. took {took(time.monotonic() - began)}")
    if failed:
        fail(f"failed to defragment {len(failed)} of {len(endpoints)} member(s): {', '.join(failed)}")


@store.command("move-leader")
@click.argument("target")
@pass_sctx
def move_leader(sctx: StoreCtx, target: str) -> None:
    """Hand leadership to the member named TARGET."""
    sctx.call("move_leader", target)
    click.echo(f"Leadership transferred to {target}")


# ------------------------------------------------------------------------------------ members

@store.group()
def member() -> None:
    """List, add and remove members."""


def _print_members(sctx: StoreCtx, members: list[dict], output: str | None) -> None:
    fmt = sctx.fmt(output, "table")
    if fmt == "json":
        echo_json({"members": members})
    elif fmt == "simple":
        for m in members:
            click.echo(f"{m.get('name')}, {m.get('endpoint')}")
    else:
        table = new_table("NAME", "ENDPOINT")
        for m in members:
            table.add_row(str(m.get("name")), str(m.get("endpoint")))
        console.print(table)


@member.command("list")
@output_option
@pass_sctx
def member_list(sctx: StoreCtx, output: str | None) -> None:
    """Every member of the cluster."""
    _print_members(sctx, sctx.call("member_list"), output)


@member.command("add")
@click.argument("name")
@click.argument("endpoint")
@output_option
@pass_sctx
def member_add(sctx: StoreCtx, name: str, endpoint: str, output: str | None) -> None:
    """Add a member NAME serving at ENDPOINT."""
    resp = sctx.call("member_add", name, endpoint)
    if sctx.fmt(output) == "json":
        echo_json(resp)
    else:
        click.echo(f"Member {name} added to cluster")


@member.command("remove")
@click.argument("name")
@output_option
@pass_sctx
def member_remove(sctx: StoreCtx, name: str, output: str | None) -> None:
    """Remove the member NAME."""
    resp = sctx.call("member_remove", name)
    if sctx.fmt(output) == "json":
        echo_json(resp)
    else:
        click.echo(f"Member {name} removed from cluster")


# ------------------------------------------------------------------------------------ leases

@store.group()
def lease() -> None:
    """Grant, revoke, refresh and list leases."""


@lease.command("grant")
@click.argument("ttl", type=click.IntRange(1))
@output_option
@pass_sctx
def lease_grant(sctx: StoreCtx, ttl: int, output: str | None) -> None:
    """Grant a lease of TTL seconds."""
    resp = sctx.call("lease_grant", ttl)
    if sctx.fmt(output) == "json":
        echo_json(resp)
    else:
        click.echo(f"lease {resp['id']:016x} granted with TTL({resp['ttl']}s)")


@lease.command("revoke")
@click.argument("lease_id", metavar="ID")
@output_option
@pass_sctx
def lease_revoke(sctx: StoreCtx, lease_id: str, output: str | None) -> None:
    """Revoke a lease (its keys are deleted)."""
    n = parse_lease(lease_id)
    resp = sctx.call("lease_revoke", n)
    if sctx.fmt(output) == "json":
        echo_json(resp)
    else:
        click.echo(f"lease {n:016x} revoked")


@lease.command("keepalive")
@click.argument("lease_id", metavar="ID")
@click.option("--once", is_flag=True, help="refresh once and exit")
@output_option
@pass_sctx
def lease_keepalive(sctx: StoreCtx, lease_id: str, once: bool, output: str | None) -> None:
    """Keep a lease alive (every TTL/3 seconds) until Ctrl-C."""
    n = parse_lease(lease_id)
    try:
        while True:
            resp = sctx.call("lease_keepalive", n)
            if sctx.fmt(output) == "json":
                echo_json(resp)
            else:
                click.echo(f"lease {n:016x} keepalived with TTL({resp['ttl']})")
            sys.stdout.flush()
            if once:
                return
            time.sleep(max(0.5, resp["ttl"] / 3))
    except KeyboardInterrupt:
        return


@lease.command("list")
@output_option
@pass_sctx
def lease_list(sctx: StoreCtx, output: str | None) -> None:
    """Every lease."""
    leases = sctx.call("lease_leases")
    if isinstance(leases, dict):
        leases = leases.get("leases", [])
    if sctx.fmt(output) == "json":
        echo_json({"leases": leases})
        return
    click.echo(f"found {len(leases)} leases")
    for item in leases:
        click.echo(f"{item['id']:016x}" if isinstance(item, dict) else f"{item[0]:016x}")


# ------------------------------------------------------------------------------------ faults

@store.group()
def fault() -> None:
    """Inject faults into the store's members (Jepsen's nemesis): partitions, delays, a full
    disk, a failing fsync, power loss. The admin's only; a restarted member has none."""


def _split_names(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        fail("expected member names, comma-separated")
    return names


def _members(sctx: StoreCtx, *given: list[str] | None) -> dict[str, str]:
    """The members' endpoints by name; each name given must be one of them."""
    members = {m["name"]: m["endpoint"] for m in sctx.call("member_list") if m.get("endpoint")}
    for names in given:
        for name in names or ():
            if name not in members:
                fail(f"{name} is not a member of the store (members: {', '.join(sorted(members))})")
    return members


def _fault_summary(faults: dict) -> str:
    parts = []
    cut = faults.get("partitions") or []
    if cut:
        parts.append("cut " + ", ".join(f"{p['from']}->{p['to']}" for p in cut))
    for d in faults.get("delays") or []:
        def who(x):
            return x if isinstance(x, str) else ",".join(x)
        jitter = f" ±{d['jitter_ms']:g}ms" if d.get("jitter_ms") else ""
        parts.append(f"delay {who(d['from'])}->{who(d['to'])} {d['ms']:g}ms{jitter}")
    if faults.get("disk", "ok") != "ok":
        parts.append(f"disk {faults['disk']}")
    return "; ".join(parts) or "no faults"


def _send_fault(sctx: StoreCtx, members: dict[str, str], targets: list[str], params: dict,
                output: str | None) -> None:
    """Send one `fault` request to each target member; one line per member. A member that does
    not answer is reported, and the command fails once all were tried."""
    failed = []
    for name in targets:
        client = wire.SyncClient(members[name], timeout=sctx.timeout, credentials=sctx.credentials())
        try:
            resp = client.call("fault", params, timeout=sctx.timeout)
        except WireError as err:
            failed.append(name)
            click.echo(f"{name}: {describe(err)}", err=True)
            continue
        finally:
            client.close()
        if sctx.fmt(output) == "json":
            echo_json(resp)
        elif params["action"] == "power-loss":
            click.echo(f"{name}: power lost: what it had not synced is gone, and it stopped")
        else:
            click.echo(f"{name}: {_fault_summary(resp.get('faults') or {})}")
    if failed:
        fail(f"the fault did not reach {', '.join(failed)}")


@fault.command("partition")
@click.option("--from", "frm", required=True, metavar="A[,B...]", help="the members whose messages are dropped")
@click.option("--to", "to", required=True, metavar="C[,D...]", help="the members they no longer reach")
@click.option("--symmetric", is_flag=True, help="cut both directions")
@output_option
@pass_sctx
def fault_partition(sctx: StoreCtx, frm: str, to: str, symmetric: bool, output: str | None) -> None:
    """Drop every Raft message from the --from members to the --to members (and back with
    --symmetric). Partitions add up until `fault heal`."""
    senders, receivers = _split_names(frm), _split_names(to)
    members = _members(sctx, senders, receivers)
    _send_fault(sctx, members, sorted(members), {"action": "partition", "from": senders, "to": receivers,
                                                 "symmetric": symmetric}, output)


@fault.command("delay")
@click.option("--ms", type=click.FloatRange(0, 60_000), required=True, help="milliseconds to hold each batch (0: no delay)")
@click.option("--jitter", type=click.FloatRange(-1, 60_000), is_flag=False, flag_value=-1.0, default=0.0,
              metavar="[MS]", help="vary the delay by up to MS either way (alone: by --ms); reorders messages")
@click.option("--from", "frm", metavar="A[,B...]", help="only messages from these members (default all)")
@click.option("--to", "to", metavar="C[,D...]", help="only messages to these members (default all)")
@output_option
@pass_sctx
def fault_delay(sctx: StoreCtx, ms: float, jitter: float, frm: str | None, to: str | None,
                output: str | None) -> None:
    """Hold Raft messages between members for --ms milliseconds (netem's delay: uniform in
    [ms - jitter, ms + jitter]); messages held apart overtake each other."""
    if jitter < 0 and jitter != -1.0:  # -1: the flag alone
        fail("--jitter: expected a non-negative number of milliseconds")
    senders, receivers = _split_names(frm), _split_names(to)
    members = _members(sctx, senders, receivers)
    params = {"action": "delay", "ms": ms, "jitter_ms": ms if jitter < 0 else jitter,
              "from": senders, "to": receivers}
    _send_fault(sctx, members, sorted(members), params, output)


@fault.command("disk")
@click.argument("mode", type=click.Choice(["full", "fsync-fail", "ok"]))
@click.option("--member", required=True, help="the member whose disk it is")
@output_option
@pass_sctx
def fault_disk(sctx: StoreCtx, mode: str, member: str, output: str | None) -> None:
    """full: etcd's NOSPACE alarm, on this member only: while it leads, writes that grow the
    store are refused (reads, deletes and compaction go on); as a follower it changes nothing
    until it leads (etcd replicates the alarm to every member). fsync-fail: the member's next
    fsync fails and it stops, as etcd does. ok: a healthy disk again."""
    members = _members(sctx, [member])
    _send_fault(sctx, members, [member], {"action": "disk", "mode": mode}, output)


@fault.command("power-loss")
@click.option("--member", required=True, help="the member that loses power")
@output_option
@pass_sctx
def fault_power_loss(sctx: StoreCtx, member: str, output: str | None) -> None:
    """The member's machine loses power: what it wrote without an fsync is lost (kill -9 never
    shows this: the page cache survives it) and it stops at once."""
    members = _members(sctx, [member])
    _send_fault(sctx, members, [member], {"action": "power-loss"}, output)


@fault.command("heal")
@click.option("--member", help="only this member (default: all)")
@output_option
@pass_sctx
def fault_heal(sctx: StoreCtx, member: str | None, output: str | None) -> None:
    """Every injected fault off."""
    members = _members(sctx, [member] if member else None)
    _send_fault(sctx, members, [member] if member else sorted(members), {"action": "heal"}, output)


@fault.command("list")
@output_option
@pass_sctx
def fault_list(sctx: StoreCtx, output: str | None) -> None:
    """Each member's injected faults."""
    members = _members(sctx)
    _send_fault(sctx, members, sorted(members), {"action": "list"}, output)
