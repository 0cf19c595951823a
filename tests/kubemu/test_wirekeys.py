"""kubemu.wirekeys: CURVE key files (private, kept, readable by pyzmq's zmq.auth) and KnownKeys,
the identify hook over a directory of client public keys."""
from __future__ import annotations

import concurrent.futures
import os
import shutil
import stat
import tempfile

import pytest
import zmq
import zmq.auth

from kubemu import wirekeys


@pytest.fixture
def state():
    path = tempfile.mkdtemp(prefix="kwk-")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_key_files_are_private_kept_and_zpl(state):
    pair = wirekeys.ensure_server_keys(state)
    directory = wirekeys.curve_dir(state)
    assert sorted(os.listdir(directory)) == ["server.key", "server.key_secret"]
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    for name in os.listdir(directory):
        assert stat.S_IMODE(os.stat(directory / name).st_mode) == 0o600
    assert wirekeys.ensure_server_keys(state) == pair  # kept
    assert zmq.auth.load_certificate(directory / "server.key_secret") == pair  # czmq's format
    assert zmq.auth.load_certificate(directory / "server.key") == (pair.public, None)
    assert zmq.curve_public(pair.secret) == pair.public


def test_client_keys_and_credentials(state):
    server = wirekeys.ensure_server_keys(state)
    alice = wirekeys.ensure_client_keys(state, "system:node:n1")
    creds = wirekeys.client_credentials(state, "system:node:n1")
    assert creds == (server.public, alice.public, alice.secret)
    clients = wirekeys.clients_dir(wirekeys.curve_dir(state))
    assert stat.S_IMODE(os.stat(clients / "system:node:n1.key_secret").st_mode) == 0o600
    with pytest.raises(ValueError, match="bad wire identity"):
        wirekeys.ensure_client_keys(state, "a/b")


def test_racing_writers_agree_on_one_key_pair(state):
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        seen = set(pool.map(lambda _: wirekeys.ensure_server_keys(state), range(32)))
    assert len(seen) == 1
    assert sorted(os.listdir(wirekeys.curve_dir(state))) == ["server.key", "server.key_secret"]


def test_unusable_key_files_are_one_clear_error(state):
    directory = wirekeys.curve_dir(state)
    directory.mkdir(parents=True)
    with pytest.raises(ValueError, match="no CURVE key file"):
        wirekeys.load_keypair(directory / "missing.key_secret")
    (directory / "empty.key").write_text("")
    with pytest.raises(ValueError, match="no public-key line"):
        wirekeys.load_public(directory / "empty.key")
    (directory / "short.key").write_text('curve\n    public-key = "abc"\n')
    with pytest.raises(ValueError, match="not a CURVE key"):
        wirekeys.load_public(directory / "short.key")
    public, _ = zmq.curve_keypair()
    _, other_secret = zmq.curve_keypair()
    (directory / "mixed.key_secret").write_text(
        f'curve\n    public-key = "{public.decode()}"\n    secret-key = "{other_secret.decode()}"\n')
    with pytest.raises(ValueError, match="its public-key is not the secret-key's"):
        wirekeys.load_keypair(directory / "mixed.key_secret")
    (directory / "pub.key").write_text(f'curve\n    public-key = "{public.decode()}"\n')
    with pytest.raises(ValueError, match="no secret-key line"):
        wirekeys.load_keypair(directory / "pub.key")


def test_known_keys_map_keys_to_identities_and_follow_the_directory(state, caplog):
    directory = wirekeys.clients_dir(wirekeys.curve_dir(state))
    known = wirekeys.KnownKeys(directory)
    assert known("x" * 40) is None  # no directory yet
    alice = wirekeys.ensure_client_keys(state, "alice")
    assert known(alice.public.decode()) == "alice"
    bob = wirekeys.ensure_client_keys(state, "bob")  # added within the same mtime tick, likely
    assert known(bob.public.decode()) == "bob"
    (directory / "bob.key").unlink()
    (directory / "bob.key_secret").unlink()
    assert known(bob.public.decode()) is None
    # one key under two names names nobody
    (directory / "alias.key").write_text(f'curve\n    public-key = "{alice.public.decode()}"\n')
    assert known(alice.public.decode()) is None
    assert "more than one file" in caplog.text
    (directory / "alias.key").unlink()
    (directory / "junk.key").write_text("nonsense\n")  # skipped with a warning, the rest still known
    assert known(alice.public.decode()) == "alice"
    assert "ignored CURVE key file" in caplog.text


def test_a_joined_machine_has_the_servers_public_key_and_its_own_pair(state):
    """`kubemu join`'s state: the server's public key from cluster-info (no secret half) and
    the node's key pair; a kubelet's --wire-curve-dir reads them as CurveCredentials."""
    server = zmq.curve_keypair()
    wirekeys.write_server_public(state, server[0])
    node = wirekeys.ensure_client_keys(state, "system:node:w1")
    directory = wirekeys.curve_dir(state)
    assert sorted(os.listdir(directory)) == ["clients", "server.key"]
    assert zmq.auth.load_certificate(directory / "server.key") == (server[0], None)
    assert wirekeys.directory_credentials(directory, "system:node:w1") == (server[0], node.public, node.secret)
    assert wirekeys.client_credentials(state, "system:node:w1") == (server[0], node.public, node.secret)
    other = zmq.curve_keypair()[0]
    wirekeys.write_server_public(state, other)  # joined again: the cluster's key now
    assert wirekeys.load_public(directory / "server.key") == other
    with pytest.raises(ValueError, match="not a CURVE key"):
        wirekeys.write_server_public(state, "short")
    with pytest.raises(ValueError, match="no CURVE key file"):
        wirekeys.directory_credentials(directory, "system:node:w2")
