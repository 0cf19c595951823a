"""The apiserver's --wire-listen-address: the wire also served on a tcp address with CURVE (a
real apiserver process over a real store), peers known by their public key in
<state>/pki/wire-curve/clients/, their requests authorized with RBAC; and the flag's bad values
as one line and exit 1."""
from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys

import pytest
import zmq

from kubemu import wire, wirekeys
from kubemu._wire_auth import ADMIN
from tests.conftest import DEADLINE, wait_for

from . import REPO, APIServerEnv, running


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    path = tmp_path_factory.mktemp("w")
    wirekeys.ensure_client_keys(path, ADMIN)
    wirekeys.ensure_client_keys(path, "someone")  # known, with no role
    env = APIServerEnv(path, extra_args=("--wire-listen-address", f"tcp://127.0.0.1:{_free_port()}"))
    env.curve_endpoint = env.extra_args[1]
    yield from running(env, path)


def _client(env, credentials, timeout: float = 15.0) -> wire.SyncClient:
    return wire.SyncClient(env.curve_endpoint, timeout=timeout, credentials=credentials)


def _served(client: wire.SyncClient) -> dict | None:
    try:
        return client.call("get", {"resource": "namespaces", "name": "kube-system"}, timeout=2.0)
    except (wire.Unavailable, wire.OutcomeUnknown):
        return None  # the wire opens once the RBAC bootstrap is done


def test_a_curve_client_is_served_as_its_identity(env):
    keys = wirekeys.curve_dir(env.dir)
    assert stat.S_IMODE(os.stat(keys / "server.key_secret").st_mode) == 0o600  # the apiserver made them
    with _client(env, wirekeys.client_credentials(env.dir, ADMIN)) as admin:
        assert wait_for(lambda: _served(admin), message="the CURVE listener")["metadata"]["name"] == "kube-system"
        made = admin.call("create", {"resource": "namespaces",
                                     "object": {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": "over-curve"}}})
        assert made["metadata"]["name"] == "over-curve"
    assert "\"user\":\"kubernetes-admin\"" in env.audit_path.read_text().replace(" ", "")
    with _client(env, wirekeys.client_credentials(env.dir, "someone")) as someone:
        with pytest.raises(wire.Forbidden, match='User "someone" cannot get resource "namespaces"'):
            someone.call("get", {"resource": "namespaces", "name": "kube-system"})


def test_unknown_keys_and_plain_peers_are_refused(env):
    server_key = wirekeys.load_public(wirekeys.curve_dir(env.dir) / "server.key")
    public, secret = zmq.curve_keypair()
    with _client(env, wire.CurveCredentials(server_key, public, secret), timeout=600) as stranger:
        with pytest.raises(wire.Unauthorized, match="not a key it knows"):
            stranger.call("get", {"resource": "namespaces", "name": "kube-system"})
    with _client(env, ("kubernetes-admin", "guess"), timeout=600) as plain:
        with pytest.raises(wire.Unauthorized, match="another mechanism"):
            plain.call("get", {"resource": "namespaces", "name": "kube-system"})
    log = env.log_text()
    assert f"refused a connection with CURVE key {public.decode()}" in log
    assert "refused a connection without CURVE credentials" in log
    assert "Traceback" not in log


def _start(tmp_path, *args: str, state_dir: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    env.pop("KUBEMU_STATE_DIR", None)
    return subprocess.run(
        [sys.executable, "-m", "components.apiserver", "--listen", f"ipc://{tmp_path}/api.sock",
         "--store-endpoints", f"ipc://{tmp_path}/no-store.sock", "--secure-port", "0",
         *(("--state-dir", str(tmp_path)) if state_dir else ()), *args],
        cwd=str(REPO), env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=DEADLINE * 3)


@pytest.mark.parametrize("args, state_dir, line", [
    (("--wire-listen-address", "ipc:///tmp/x.sock"), True,
     "--wire-listen-address ipc:///tmp/x.sock: expected tcp://HOST:PORT"),
    (("--wire-listen-address", "tcp://127.0.0.1:1"), False,
     "--wire-listen-address needs --wire-curve-dir (or --state-dir) for its CURVE keys"),
    (("--wire-listen-address", "tcp://127.0.0.1"), True,
     "apiserver: --wire-listen-address tcp://127.0.0.1: bad tcp endpoint"),
    (("--wire-listen-address", "tcp://127.0.0.1:1", "--wire-curve-dir", "{d}/a-file"), True,
     "apiserver: --wire-curve-dir {d}/a-file: "),
])
def test_a_wrong_wire_listen_flag_is_one_line(tmp_path, args, state_dir, line):
    (tmp_path / "a-file").write_text("not a directory\n")
    done = _start(tmp_path, *(a.format(d=tmp_path) for a in args), state_dir=state_dir)
    assert done.returncode == 1, done
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(line.format(d=tmp_path)), done.stderr
    assert "Traceback" not in done.stdout + done.stderr
