"""`kubemu store`: etcdctl's habits against in-process fake replicas (click's CliRunner)."""
from __future__ import annotations

import base64
import json
import shutil
import tempfile

import pytest
from click.testing import CliRunner

from kubemu.cli import main
from kubemu.store_cli import human_bytes
from tests.store.test_client import ThreadedCluster

ENV = "KUBEMU_STORE_ENDPOINTS"


@pytest.fixture
def sockdir():
    path = tempfile.mkdtemp(prefix="kcli-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake(sockdir):
    with ThreadedCluster(sockdir) as tc:
        yield tc


@pytest.fixture
def cli(fake, tmp_path):
    """Run `kubemu --state-dir <tmp> store --endpoints <fake> ARGS...`."""
    def invoke(*args, input=None, endpoints=True, env=None):
        base = ["--state-dir", str(tmp_path), "store"]
        if endpoints:
            base += ["--endpoints", ",".join(fake.endpoints), "--command-timeout", "10"]
        runner = CliRunner()
        return runner.invoke(main, base + list(args), input=input, env={ENV: None, **(env or {})},
                             catch_exceptions=False)
    return invoke


def ok(result) -> str:
    assert result.exit_code == 0, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


def one_line_error(result) -> str:
    assert result.exit_code != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def test_put_get_del(cli):
    assert ok(cli("put", "foo", "bar")) == "OK\n"
    assert ok(cli("put", "foo2", "baz")) == "OK\n"
    assert ok(cli("get", "foo")) == "foo\nbar\n"
    assert ok(cli("get", "foo", "--prefix")) == "foo\nbar\nfoo2\nbaz\n"
    assert ok(cli("range", "foo")) == "foo\nbar\nfoo2\nbaz\n"
    assert ok(cli("get", "foo", "--prefix", "--keys-only")) == "foo\nfoo2\n"
    assert ok(cli("get", "foo", "--print-value-only")) == "bar\n"
    assert ok(cli("get", "foo", "--prefix", "--count-only")) == "2\n"
    assert ok(cli("get", "foo", "foo2")) == "foo\nbar\n"  # [foo, foo2)
    assert ok(cli("get", "--rev", "2", "foo", "--prefix")) == "foo\nbar\n"
    assert ok(cli("get", "nothing")) == ""
    assert ok(cli("put", "foo", "new", "--prev-kv")) == "OK\nfoo\nbar\n"
    assert ok(cli("del", "foo")) == "1\n"
    assert ok(cli("del", "foo")) == "0\n"
    assert ok(cli("del", "f", "--prefix", "--prev-kv")) == "1\nfoo2\nbaz\n"
    assert ok(cli("get", "f", "--prefix")) == ""


def test_put_value_from_stdin_and_raw_bytes(cli):
    assert ok(cli("put", "k", input="line one\nline two")) == "OK\n"
    assert ok(cli("get", "k", "--print-value-only")) == "line one\nline two\n"


def test_json_output_base64_like_etcdctl(cli):
    out = json.loads(ok(cli("-o", "json", "put", "foo", "bar")))
    assert out["header"]["revision"] == 2
    out = json.loads(ok(cli("get", "foo", "-w", "json")))
    assert out["count"] == 1 and out["header"]["revision"] == 2
    kv = out["kvs"][0]
    assert (kv["key"], kv["value"]) == (b64("foo"), b64("bar"))
    assert (kv["create_revision"], kv["mod_revision"], kv["version"]) == (2, 2, 1)
    assert json.loads(ok(cli("del", "foo", "-o", "json")))["deleted"] == 1


def test_table_output(cli):
    ok(cli("put", "foo", "bar"))
    out = ok(cli("get", "foo", "-o", "table"))
    assert "KEY" in out and "VALUE" in out and "foo" in out and "bar" in out


def test_watch_prints_events_and_survives_a_short_lived_stream(cli, fake):
    ok(cli("put", "foo", "v1"))  # revision 2
    ok(cli("put", "foo", "v2"))  # revision 3
    ok(cli("put", "bar", "x"))  # revision 4, not watched
    ok(cli("del", "foo"))  # revision 5
    ended = []

    def short_lived(replica):
        async def hook(**params):
            # the first stream: created, one revision, then it ends (a replica going away)
            if not ended:
                ended.append(replica.name)
                async for item in replica.default_watch(**params):
                    yield item
                    if item.get("events"):
                        return
            else:
                async for item in replica.default_watch(**params):
                    yield item
        return hook

    for r in fake.cluster.replicas:
        r.hooks["watch"] = short_lived(r)
    out = ok(cli("watch", "foo", "--rev", "2", "--max-events", "3"))
    assert out == "PUT\nfoo\nv1\nPUT\nfoo\nv2\nDELETE\nfoo\n\n"
    assert ended and sum(r.calls["watch"] for r in fake.cluster.replicas) >= 2  # it was resumed

    out = ok(cli("watch", "f", "--prefix", "--rev", "3", "--prev-kv", "--max-events", "1"))
    assert out == "PUT\nfoo\nv1\nfoo\nv2\n"  # prev kv, then kv
    lines = ok(cli("watch", "foo", "--rev", "2", "--max-events", "3", "-o", "json")).splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == ["PUT", "PUT", "DELETE"]
    assert events[0]["kv"]["key"] == b64("foo") and events[1]["kv"]["value"] == b64("v2")


def test_watch_of_a_compacted_revision_is_one_line(cli):
    for i in range(3):
        ok(cli("put", "k", str(i)))
    assert ok(cli("compact", "3")) == "compacted revision 3\n"
    line = one_line_error(cli("watch", "k", "--rev", "2"))
    assert "compacted" in line and "3" in line
    line = one_line_error(cli("get", "k", "--rev", "2"))
    assert "compacted" in line


def test_status_table(cli, fake):
    ok(cli("put", "a", "1"))
    out = ok(cli("status"))
    header = out.splitlines()[1]
    for col in ("ENDPOINT", "NAME", "ROLE", "IS LEADER", "TERM", "RAFT INDEX", "APPLIED INDEX", "REVISION",
                "DB SIZE"):
        assert col in header
    rows = [line for line in out.splitlines() if "ipc://" in line]
    assert len(rows) == 3
    assert "leader" in rows[0] and "true" in rows[0] and "store-0" in rows[0]
    assert all("follower" in r and "false" in r for r in rows[1:])
    assert all("20 kB" in r for r in rows)
    statuses = json.loads(ok(cli("status", "-o", "json")))
    assert [s["role"] for s in statuses] == ["leader", "follower", "follower"]
    assert ok(cli("status", "-o", "simple")).splitlines()[0].startswith(fake.endpoints[0] + ", store-0, leader, true")
    out = ok(cli("status", "--cluster"))
    assert len([line for line in out.splitlines() if "ipc://" in line]) == 3


def test_status_with_a_dead_endpoint(cli, fake):
    fake.run(fake.cluster.replicas[2].stop())
    result = cli("--dial-timeout", "0.2", "--command-timeout", "1", "status")
    assert "unreachable" in result.stdout and "leader" in result.stdout
    assert fake.endpoints[2] in one_line_error(result)


def test_members_leases_compact_move_leader(cli, fake):
    out = ok(cli("member", "list"))
    assert "NAME" in out and all(f"store-{i}" in out for i in range(3))
    assert ok(cli("member", "list", "-o", "simple")).splitlines()[0] == f"store-0, {fake.endpoints[0]}"
    assert ok(cli("member", "add", "store-3", "tcp://127.0.0.1:1")) == "Member store-3 added to cluster\n"
    assert len(json.loads(ok(cli("member", "list", "-o", "json")))["members"]) == 4
    assert ok(cli("member", "remove", "store-3")) == "Member store-3 removed from cluster\n"
    assert "no member" in one_line_error(cli("member", "remove", "store-3"))

    out = ok(cli("lease", "grant", "30"))
    assert out.startswith("lease ") and out.endswith(" granted with TTL(30s)\n")
    lease_id = out.split()[1]
    assert len(lease_id) == 16
    assert ok(cli("put", "leased", "v", "--lease", lease_id)) == "OK\n"
    assert ok(cli("lease", "keepalive", lease_id, "--once")) == f"lease {lease_id} keepalived with TTL(30)\n"
    assert ok(cli("lease", "list")) == f"found 1 leases\n{lease_id}\n"
    assert ok(cli("lease", "revoke", lease_id)) == f"lease {lease_id} revoked\n"
    assert ok(cli("get", "leased")) == ""
    assert "not found" in one_line_error(cli("lease", "revoke", lease_id))
    assert "hexadecimal" in one_line_error(cli("lease", "revoke", "xyz"))

    assert ok(cli("move-leader", "store-2")) == "Leadership transferred to store-2\n"
    assert fake.cluster.leader.name == "store-2"


def test_endpoints_from_env_and_state_dir(cli, fake, tmp_path):
    assert ok(cli("put", "k", "v", endpoints=False, env={ENV: ",".join(fake.endpoints)})) == "OK\n"
    (tmp_path / "store-endpoints").write_text("\n".join(fake.endpoints) + "\n")
    assert ok(cli("get", "k", endpoints=False)) == "k\nv\n"


def test_no_endpoints_is_one_clear_line(cli, tmp_path):
    line = one_line_error(cli("get", "k", endpoints=False))
    assert "no store endpoints" in line and "--endpoints" in line and str(tmp_path / "store-endpoints") in line


def test_unreachable_cluster_is_one_line(cli, tmp_path):
    result = CliRunner().invoke(main, ["--state-dir", str(tmp_path), "store", "--endpoints", "127.0.0.1:1",
                                       "--command-timeout", "0.5", "--dial-timeout", "0.1", "put", "k", "v"],
                                env={ENV: None})
    assert "Unavailable" in one_line_error(result)


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 9, 999, 20480, 1_234_567, 10**10)] == [
        "0 B", "9 B", "999 B", "20 kB", "1.2 MB", "10 GB"]


def test_the_admins_wire_credentials_come_from_the_state_directory(cli, tmp_path):
    """With <state>/pki/wire/kubernetes-admin.secret the client presents it; these fake replicas
    take no credentials, so they refuse the handshake: one line, no traceback."""
    from kubemu import _wire_auth

    ok(cli("put", "k", "v"))
    _wire_auth.ensure_secret(_wire_auth.secrets_dir(tmp_path), _wire_auth.ADMIN)
    line = one_line_error(cli("put", "k", "v"))
    assert "Unauthorized" in line and "kubernetes-admin" in line


def test_defrag_each_endpoint_the_cluster_or_named_members(cli, fake):
    lines = ok(cli("defrag")).splitlines()
    assert len(lines) == 3
    for line, endpoint in zip(lines, fake.endpoints):
        assert line.startswith(f"Finished defragmenting store member[{endpoint}]. took ")
    assert [r.calls["defragment"] for r in fake.cluster.replicas] == [1, 1, 1]
    assert len(ok(cli("defrag", "--cluster")).splitlines()) == 3
    out = json.loads(ok(cli("defrag", "--member", "store-1", "-o", "json")))
    assert out["name"] == "store-1" and out["endpoint"] == fake.endpoints[1]
    assert out["db_size_after"] < out["db_size_before"]
    assert [r.calls["defragment"] for r in fake.cluster.replicas] == [2, 3, 2]


def test_defrag_of_a_bad_member_name_is_one_clear_error(cli, fake):
    line = one_line_error(cli("defrag", "--member", "store-1,nosuch"))
    assert "nosuch is not a member" in line and "store-0, store-1, store-2" in line
    assert sum(r.calls["defragment"] for r in fake.cluster.replicas) == 0
    assert "one of them" in one_line_error(cli("defrag", "--cluster", "--member", "store-1"))


def test_defrag_with_a_dead_member_says_which_and_fails(cli, fake):
    fake.run(fake.cluster.replicas[2].stop())
    result = cli("--dial-timeout", "0.2", "--command-timeout", "1", "defrag")
    assert result.exit_code != 0
    assert result.stdout.count("Finished defragmenting") == 2
    assert f"Failed to defragment store member[{fake.endpoints[2]}]" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"error: failed to defragment 1 of 3 member(s): {fake.endpoints[2]}"
