"""`kubemu up --apiserver-advertise-address` end to end, real processes: "another machine" is a
network namespace joined to this one by a veth pair the test makes (a free /30 of
198.18.0.0/15). From inside it, cluster-info is read anonymously over HTTPS on the advertised
address (TLS verified against the cluster CA, the address among the certificate's names: it
carries the wire's endpoints and CURVE server key), and the CURVE wire there serves a client
whose key a Node's `kubemu.io/wire-curve-public-key` annotation names, as that node (NodeRestriction
refuses it another Node's key), while an unknown key is refused at the handshake.

Needs root, `ip` and `nsenter`; skipped otherwise."""
from __future__ import annotations

import json
import os
import re
import sys

import pytest
import zmq

from components.apiserver.nodekeys import ANNOTATION
from kubemu._wire_auth import state_credentials
from kubemu.apiclient import SyncApiClient
from kubemu.statedir import StateDir
from tests import netns
from tests.conftest import DEADLINE
from tests.kubemu.test_cli import kubemu

pytestmark = netns.NEEDS

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOT = DEADLINE * 6

# Run inside the namespace: what a joining machine sees. argv: host port ca-file node public secret wait
OTHER_MACHINE = r"""
import json, ssl, sys, time, urllib.request
import zmq
from kubemu import wire
host, port, ca, node, public, secret, wait = sys.argv[1:]
context = ssl.create_default_context(cafile=ca)  # check_hostname: the IP must be among its SANs
url = f"https://{host}:{port}/api/v1/namespaces/kube-public/configmaps/cluster-info"
with urllib.request.urlopen(url, context=context, timeout=30) as reply:
    info = json.load(reply)["data"]
out = {"cluster-info": info}
endpoint = info["kubemu-wire-endpoints"].split(",")[0]
server_key = info["kubemu-wire-curve-server-key"].encode()

def call(creds, method, params):
    with wire.SyncClient(endpoint, timeout=10, credentials=creds) as client:
        return client.call(method, params)

mine = wire.CurveCredentials(server_key, public.encode(), secret.encode())
deadline = time.monotonic() + float(wait)
while True:  # the apiserver learns the key from its Node watch
    try:
        out["own"] = call(mine, "get", {"resource": "nodes", "name": node})["metadata"]["name"]
        break
    except wire.Unauthorized as err:
        if time.monotonic() > deadline:
            out["own"] = f"refused: {err}"
            break
        time.sleep(0.2)
try:
    call(mine, "patch", {"resource": "nodes", "name": "node-0",
                         "patch": {"metadata": {"annotations": {"kubemu.io/wire-curve-public-key": public}}}})
    out["other"] = "allowed"
except wire.Forbidden as err:
    out["other"] = err.message
stranger_public, stranger_secret = zmq.curve_keypair()
try:
    call(wire.CurveCredentials(server_key, stranger_public, stranger_secret), "get",
         {"resource": "nodes", "name": node})
    out["stranger"] = "allowed"
except wire.Unauthorized as err:
    out["stranger"] = str(err)
print(json.dumps(out))
"""


@pytest.fixture
def other_machine():
    with netns.another_machine() as machine:
        yield machine


def test_another_machine_reads_cluster_info_over_https_and_is_served_on_the_curve_wire(state_dir, other_machine):
    host = other_machine.host
    state = StateDir(state_dir)
    try:
        up = kubemu(state_dir, "up", "--nodes", "1", "--fast", "--detach", "--api-port", "0", "--no-kubeconfig",
                    "--apiserver-advertise-address", host, timeout=BOOT)
        port = state.api_port()
        # kubeadm init's closing words: the join command, with a token the cluster knows
        match = re.search(rf"kubemu join {re.escape(host)}:{port} --token (\S+) \\\n\t"
                          r"--discovery-token-ca-cert-hash sha256:[0-9a-f]{64}", up.stdout)
        assert match, up.stdout
        assert match.group(1).split(".")[0] in kubemu(state_dir, "token", "list").stdout

        public, secret = (k.decode() for k in zmq.curve_keypair())
        with SyncApiClient(state.api_endpoint(), timeout=10, credentials=state_credentials(state_dir)) as api:
            api.create("nodes", {"apiVersion": "v1", "kind": "Node",
                                 "metadata": {"name": "joiner", "annotations": {ANNOTATION: public}}})
        done = other_machine.run([sys.executable, "-c", OTHER_MACHINE, host, str(port), str(state.pki_dir / "ca.crt"),
                                  "joiner", public, secret, str(DEADLINE)], cwd=REPO, timeout=DEADLINE * 3)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        info = seen["cluster-info"]
        assert f"server: https://{host}:{port}" in info["kubeconfig"]
        assert info["kubemu-wire-endpoints"] == f"tcp://{host}:{port + 1}"
        assert info["kubemu-wire-curve-server-key"] == \
            (state.root / "pki" / "wire-curve" / "server.key").read_text().split('public-key = "')[1][:40]
        assert seen["own"] == "joiner"  # served as system:node:joiner
        assert seen["other"] == 'nodes "node-0" is forbidden: node "joiner" is not allowed to modify node "node-0"'
        assert "not a key" in seen["stranger"]
    finally:
        kubemu(state_dir, "down", check=False)
