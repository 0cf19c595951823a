"""The store's Raft port with --wire-secrets: only members step Raft, each as itself.

The attack this guards against: anyone who could reach a follower's socket sent it a forged
TIMEOUT_NOW "from the leader", and the follower took over the leadership. With wire secrets,
a client without credentials cannot connect, an authenticated non-member (the admin) is
Forbidden the peer methods, and a member cannot speak for another member. The refusals are
one rate-limited log line each; leadership and term stay where they were.
"""
from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from kubemu import _wire_auth as wa
from kubemu import wire
from kubemu.cli import main as cli_main
from store._peers import PEER_METHODS, impostor, peer_credentials, refuse_peer
from store.raft import MessageType
from tests.store.cluster import StoreCluster


def _forged_timeout_now(frm: str, to: str, term: int) -> dict:
    return {"msgs": [{"type": int(MessageType.TIMEOUT_NOW), "to": to, "from": frm, "term": term}]}


# -------------------------------------------------------------------------- the pure rules

@pytest.mark.parametrize("method", ["fault", "defragment"])
def test_the_fault_and_defragment_methods_are_the_admins_alone(method):
    members = {"store-0", "store-1"}.__contains__
    assert refuse_peer(wa.ADMIN, method, members) is None
    for who in ("system:store:store-1", "kube-apiserver-etcd-client", "system:node:node-1", None):
        assert "is for the admin" in refuse_peer(who, method, members)


def test_peer_methods_are_for_members_only():
    members = {"store-0", "store-1"}.__contains__
    assert refuse_peer("system:store:store-1", "raft", members) is None
    assert refuse_peer("system:store:store-1", "raft_snapshot", members) is None
    assert "not one" in refuse_peer("kubernetes-admin", "raft", members)
    assert "not one" in refuse_peer("system:store:store-9", "raft", members)
    assert "not one" in refuse_peer(None, "raft_snapshot", members)
    assert refuse_peer("kubernetes-admin", "put", members) is None  # `kubemu store`
    assert refuse_peer("kube-apiserver-etcd-client", "range", members) is None
    assert refuse_peer("system:store:store-0", "status", members) is None
    assert PEER_METHODS == {"raft", "raft_snapshot"}


def test_the_store_serves_only_the_apiserver_the_admin_and_members():
    """kubeadm's etcd trusts only the apiserver's client certificate and its peers: a node's
    identity talking to the store directly would bypass RBAC (read every Secret, write anything)."""
    members = {"store-0"}.__contains__
    for method in ("put", "range", "delete_range", "txn", "compact", "member_add", "member_remove",
                   "move_leader", "watch", "status"):
        assert "none of them" in refuse_peer("system:node:node-1", method, members)
        assert "none of them" in refuse_peer("system:store:store-9", method, members)  # not a member
        assert "none of them" in refuse_peer(None, method, members)
    assert "not one" in refuse_peer("kube-apiserver-etcd-client", "raft", members)


def test_a_member_cannot_speak_for_another():
    assert impostor("system:store:store-0", "store-0") is None
    assert impostor(None, "store-0") is None  # no authentication: nothing to compare
    assert "sent by 'system:store:store-2'" in impostor("system:store:store-2", "store-0")


def test_peer_credentials(tmp_path):
    assert peer_credentials("store-0", None) is None
    with pytest.raises(ValueError, match="cannot read"):
        peer_credentials("store-0", str(tmp_path))
    wa.ensure_secret(tmp_path, "system:store:store-0")
    assert peer_credentials("store-0", str(tmp_path)).user == "system:store:store-0"


# -------------------------------------------------------------------------- real replicas

def test_forged_raft_messages_are_refused_and_leadership_stays(state_dir):
    secrets = state_dir / "pki" / "wire"
    for i in range(3):
        wa.ensure_secret(secrets, wa.store_identity(f"store-{i}"))
    admin = wa.load_credentials(wa.ensure_secret(secrets, wa.ADMIN))
    apiserver = wa.load_credentials(wa.ensure_secret(secrets, wa.APISERVER))
    node = wa.load_credentials(wa.ensure_secret(secrets, wa.node_identity("node-1")))
    with StoreCluster(state_dir, n=3, tick_ms=20, wire_secrets=str(secrets), credentials=admin) as c:
        c.start()
        leader = c.leader()
        term = c.status(leader)["term"]
        target, third = [n for n in c.names if n != leader]
        other = wa.load_credentials(wa.secret_path(secrets, wa.store_identity(third)))
        forged = _forged_timeout_now(leader, target, term)
        ep = c.endpoints[target]

        async def attack():
            # 1. no credentials: no connection at all
            async with wire.Client(ep, timeout=600) as anon:
                with pytest.raises(wire.Unauthorized):
                    await anon.call("raft", forged)
                assert not anon.notify("raft", forged)
            # 2. authenticated, but not a member: Forbidden, and the notification is dropped
            async with wire.Client(ep, credentials=admin, timeout=60) as cl:
                with pytest.raises(wire.Forbidden, match="for the store's members"):
                    await cl.call("raft", forged)
                assert cl.notify("raft", forged)
                await cl.call("status")  # the notification was handled before this reply
            # 3. another member posing as the leader
            async with wire.Client(ep, credentials=other, timeout=60) as cl:
                with pytest.raises(wire.BadRequest, match=f"sent by 'system:store:{third}'"):
                    await cl.call("raft", forged)
            # 4. a node's identity: not a store client at all (it would bypass RBAC)
            async with wire.Client(c.endpoints[leader], credentials=node, timeout=60) as cl:
                with pytest.raises(wire.Forbidden, match="none of them"):
                    await cl.call("put", {"key": b"/registry/secrets/x", "value": b"v"})
            # the apiserver's identity may
            async with wire.Client(c.endpoints[leader], credentials=apiserver, timeout=60) as cl:
                await cl.call("put", {"key": b"k0", "value": b"v"})
                # but injected faults are the admin's alone
                with pytest.raises(wire.Forbidden, match="for the admin"):
                    await cl.call("fault", {"action": "partition", "from": [leader], "to": [target]})

        asyncio.run(attack())
        # a stepped TIMEOUT_NOW makes the target campaign at once (term + 1) when it handles it
        st = c.status(target)
        assert (st["term"], st["leader"]) == (term, leader)
        assert c.leader() == leader and c.status(leader)["term"] == term
        # the members still work together: a write commits
        c.call(leader, "put", {"key": b"k", "value": b"v"})
        # `kubemu store` presents the admin's credentials from the state directory
        result = CliRunner().invoke(cli_main, ["--state-dir", str(state_dir), "store", "--endpoints",
                                               ",".join(c.endpoints.values()), "status", "-o", "json"],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert sorted(row.get("role") for row in json.loads(result.stdout)) == ["follower", "follower", "leader"]
        result = CliRunner().invoke(cli_main, ["--state-dir", str(state_dir), "store", "--endpoints",
                                               ",".join(c.endpoints.values()), "fault", "list"],
                                    catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert result.stdout.count(": no faults") == 3
        log = c.log_text(target)
        assert log.count("refused a connection without PLAIN credentials") == 1
        assert log.count("for the store's members") == 1  # the call; the notification was quiet
        assert "Traceback" not in log
        assert c.log_text(leader).count("none of them") == 1
        assert "Traceback" not in c.log_text(leader)
