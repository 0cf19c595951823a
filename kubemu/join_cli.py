"""`kubemu join ADDRESS --token T --discovery-token-ca-cert-hash sha256:H [--node-name N]`: make
this machine a node of a cluster on another one, as kubeadm join does (kubemu/join.py decides;
this is the shell: HTTPS, files, the node's init).

    discovery      cluster-info read anonymously without trusting the server, its kubeconfig
                   trusted once the token's JWS of it verifies and its CA is the pinned one;
                   read again with TLS verified against that CA (the wire's endpoints and CURVE
                   key are taken from this read only)
    kubelet-start  a Ready Node of the same name refused (read with the token); then the TLS
                   bootstrap: a CSR for system:node:<N> sent with the token; the
                   controller-manager's approver approves it, its signer signs it
    files          <state>/pki/ca.crt, kubelet-client.crt/.key (0600), kubelet.conf (0600);
                   <state>/pki/wire-curve/server.key (the apiservers' public key) and the node's
                   key pair clients/system:node:<N>.key_secret; <state>/api-endpoint (tcp)
    the Node       created (or patched) with the node's certificate, carrying its CURVE public
                   key: the apiserver knows the kubelet's key as system:node:<N> by it
    the node       its kubelet.service (flags: --wire-curve-dir), its init started; Ready awaited

The joined node's pods share its machine's network (as `kubemu up --network host`): no pod
network spans machines. Its kubelet serves no exec/attach (the apiserver cannot dial another
machine's unix socket): `kubemu exec` / `logs` of its pods answer an error. Any failure stops
what was started and exits 1 with kubeadm's words.
"""
from __future__ import annotations

import http.client
import json
import shlex
import socket
import ssl
import sys
import time

import click

from . import cluster, join, kubeconfig, pki, wirekeys
from ._wire_auth import node_identity
from .statedir import StateDir, write_atomic

HOST_NETWORK_REASON = "a node joined from another machine: no pod network spans machines"
RETRY = 1.0  # kubeadm's DiscoveryRetryInterval is 5 s; a local test cluster answers sooner


class Https:
    """One HTTPS endpoint (host:port), verified against `ca_pem` or not at all, anonymous or
    with a bearer token or a client certificate."""

    def __init__(self, address: str, ca_pem: bytes | None = None, token: str | None = None,
                 cert: tuple[str, str] | None = None, timeout: float = 10.0):
        host, port = join.split_host_port(address)
        self.host, self.port = host, int(port)
        if ca_pem is None:
            self.ctx = ssl.create_default_context()
            self.ctx.check_hostname, self.ctx.verify_mode = False, ssl.CERT_NONE
        else:
            self.ctx = ssl.create_default_context(cadata=ca_pem.decode())
        if cert is not None:
            self.ctx.load_cert_chain(*cert)
        self.token, self.timeout = token, timeout

    def request(self, method: str, path: str, body: dict | None = None,
                content_type: str = "application/json") -> tuple[int, dict]:
        """(status, the JSON body); OSError (ssl.SSLError is one) when it cannot be had."""
        headers = {"Accept": "application/json", "Content-Type": content_type}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=self.timeout)
        try:
            conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        except http.client.HTTPException as err:
            raise OSError(f"{method} https://{self.host}:{self.port}{path}: {err}") from None
        finally:
            conn.close()
        try:
            obj = json.loads(data) if data else {}
        except ValueError:
            obj = {}
        return resp.status, obj if isinstance(obj, dict) else {}


def _message(status: int, obj: dict) -> str:
    return obj.get("message") or f"the server answered {status}"


def _cluster_info(api: Https, token_id: str, deadline: float) -> dict:
    """getClusterInfo: poll until cluster-info carries the token's signature, or the deadline."""
    last = join.signature_missing(token_id)
    while True:
        try:
            status, cm = api.request("GET", join.CLUSTER_INFO_PATH)
            if status != 200:
                last = f"failed to request the cluster-info ConfigMap: {_message(status, cm)}"
            elif join.has_signature(cm, token_id):
                return cm
            else:
                last = join.signature_missing(token_id)
        except OSError as err:
            last = f"failed to request the cluster-info ConfigMap: {err}"
        if time.monotonic() + RETRY > deadline:
            raise join.discovery_error(last)
        time.sleep(RETRY)


def discover(req: join.Request, deadline: float) -> tuple[bytes, join.Wire]:
    """kubeadm's token discovery: the cluster's pinned CA (PEM) and the wire beyond loopback."""
    trusted = join.trusted_cluster_info(_cluster_info(Https(req.address), req.token_id, deadline), req)
    second = _cluster_info(Https(req.address, trusted.ca_pem), req.token_id, deadline)
    join.check_same_kubeconfig(trusted.kubeconfig, second)
    return trusted.ca_pem, join.wire_info(second)


def refuse_ready_node(req: join.Request, ca_pem: bytes) -> None:
    """kubeadm's kubelet-start phase, before the TLS bootstrap: a Ready Node of this name is
    not taken over."""
    path = f"{join.NODES_PATH}/{req.node_name}"
    try:
        status, obj = Https(req.address, ca_pem, token=req.token).request("GET", path)
    except OSError as err:
        status, obj = 0, {"message": str(err)}
    join.check_no_ready_node(req.node_name, status, obj, _message(status, obj))


def tls_bootstrap(req: join.Request, ca_pem: bytes, deadline: float) -> tuple[bytes, object]:
    """The node's client certificate and key, by a CSR the token authenticates."""
    api = Https(req.address, ca_pem, token=req.token)
    key = pki.new_key()
    try:
        status, sent = api.request("POST", join.CSR_PATH, join.node_csr(req.node_name, key))
    except OSError as err:
        raise join.JoinError(f"failed to create the certificate signing request: {err}",
                             join.PHASE_KUBELET_START) from None
    if status != 201:
        raise join.JoinError(f"failed to create the certificate signing request: {_message(status, sent)}",
                             join.PHASE_KUBELET_START)
    name = (sent.get("metadata") or {}).get("name", "")
    while True:
        try:
            status, csr = api.request("GET", f"{join.CSR_PATH}/{name}")
        except OSError:
            status, csr = 0, {}
        if status == 200:
            cert = join.issued_certificate(csr)
            if cert:
                join.check_issued(cert, key, ca_pem, req.node_name)
                return cert, key
        if time.monotonic() + RETRY > deadline:
            raise join.JoinError(f"timed out waiting for the certificate signing request {name} to be approved "
                                 "and issued", join.PHASE_KUBELET_START)
        time.sleep(RETRY)


def write_pki(state: StateDir, req: join.Request, ca_pem: bytes, cert_pem: bytes, key) -> tuple[str, str]:
    pki_dir = state.pki_dir
    pki.make_dir(pki_dir)
    key_pem = pki.key_pem(key)
    write_atomic(pki_dir / join.CA_FILE, ca_pem, 0o644)
    write_atomic(pki_dir / join.CERT_FILE, cert_pem, 0o644)
    write_atomic(pki_dir / join.KEY_FILE, key_pem, 0o600)
    config = kubeconfig.build(f"https://{req.address}", ca_pem, node_identity(req.node_name), cert_pem, key_pem)
    write_atomic(pki_dir / join.KUBECONFIG_FILE, kubeconfig.dump(config).encode(), 0o600)
    return str(pki_dir / join.CERT_FILE), str(pki_dir / join.KEY_FILE)


def publish_key(api: Https, node: str, public: bytes) -> None:
    """Create the Node carrying the node's CURVE key, or set the key on the existing one."""
    try:
        status, obj = api.request("POST", join.NODES_PATH, join.node_object(node, public))
        if status == 409:
            status, obj = api.request("PATCH", f"{join.NODES_PATH}/{node}", join.node_patch(public),
                                      "application/merge-patch+json")
    except OSError as err:
        raise join.JoinError(f"failed to publish the node's wire key: {err}", join.PHASE_KUBELET_START) from None
    if status not in (200, 201):
        raise join.JoinError(f"failed to publish the node's wire key: {_message(status, obj)}",
                             join.PHASE_KUBELET_START)


def node_ready(api: Https, node: str) -> bool:
    try:
        status, obj = api.request("GET", f"{join.NODES_PATH}/{node}")
    except OSError:
        return False
    return status == 200 and join.node_is_ready(obj)


def run(state: StateDir, req: join.Request, timeout: float, fast: bool, started: list) -> None:
    """The join's phases; `started` gets True once a node may be running (it is then stopped on
    failure), never for a state directory that already held one."""
    deadline = time.monotonic() + timeout
    click.echo("[preflight] Running pre-flight checks")
    kubelet_conf = state.pki_dir / join.KUBECONFIG_FILE
    join.check_state_free([kubelet_conf] if kubelet_conf.exists() else [],
                          [state.nodes_dir] if state.nodes() else [])
    started.append(True)
    click.echo(f'[discovery] Requesting info from "{req.address}"')
    ca_pem, wire = discover(req, deadline)
    refuse_ready_node(req, ca_pem)
    click.echo("[kubelet-start] Performing the TLS Bootstrap")
    cert_pem, key = tls_bootstrap(req, ca_pem, deadline)
    cert = write_pki(state, req, ca_pem, cert_pem, key)
    pair = wirekeys.ensure_client_keys(state.root, node_identity(req.node_name))
    wirekeys.write_server_public(state.root, wire.server_key)
    api = Https(req.address, ca_pem, cert=cert)
    publish_key(api, req.node_name, pair.public)
    write_atomic(state.api_endpoint_file, (",".join(wire.endpoints) + "\n").encode(), 0o644)
    timings = cluster.FAST_TIMINGS if fast else cluster.DEFAULT_TIMINGS
    args = cluster.kubelet_args(state, req.node_name, timings, joined_api=",".join(wire.endpoints),
                                curve_dir=wirekeys.curve_dir(state.root))
    args += " " + shlex.join(["--network-mode", "host", "--network-mode-reason", HOST_NETWORK_REASON])
    cluster.write_node(state, req.node_name, timings.kubelet_restart_sec, kubelet_args=args)
    click.echo("[kubelet-start] Starting the kubelet")
    cluster.start_init(state, req.node_name)
    click.echo("[kubelet-check] Waiting for the node to be Ready")
    while not node_ready(api, req.node_name):
        if time.monotonic() + RETRY > deadline:
            raise join.JoinError(f"timed out waiting for node {req.node_name} to be Ready; see "
                                 f"{state.node_dir(req.node_name) / 'logs'}/", join.PHASE_KUBELET_START)
        time.sleep(RETRY)
    click.echo(join.CLOSING)


@click.command("join")
@click.argument("address")
@click.option("--token", required=True, help="the bootstrap token (<id>.<secret>) for discovery and the TLS bootstrap")
@click.option("--discovery-token-ca-cert-hash", "ca_hashes", multiple=True, metavar="sha256:HASH",
              help="the cluster CA's public key pin (sha256:<hex>, as `kubemu up` prints it)")
@click.option("--node-name", default=None, help="the node's name (default: this machine's hostname, lowercased)")
@click.option("--timeout", type=click.FloatRange(min=1), default=join.DEFAULT_TIMEOUT, show_default=True,
              help="seconds for discovery, the certificate and the node to become Ready")
@click.option("--fast", is_flag=True, help="the kubelet timings of `kubemu up --fast` (use it when the cluster was)")
@click.pass_obj
def join_command(ctx, address: str, token: str, ca_hashes: tuple[str, ...], node_name: str | None,
                 timeout: float, fast: bool) -> None:
    """Make this machine a node of the cluster at ADDRESS (host:port of its apiserver), as
    kubeadm join does; --state-dir is this node's state directory (a new one)."""
    state: StateDir = ctx.state
    started: list = []
    try:
        req = join.request(address, token, ca_hashes, node_name, socket.gethostname())
        run(state, req, timeout, fast, started)
    except join.JoinError as err:
        _give_up(state, started, join.phase_error(err))
    except (OSError, ValueError) as err:  # this state directory's disk, an unusable key file
        _give_up(state, started, f"error execution phase kubelet-start: {err}")
    except KeyboardInterrupt:
        _give_up(state, started, "interrupted", 130)


def _give_up(state: StateDir, started: list, message: str, code: int = 1):
    """Nothing a failed join started is left running; kubeadm's error line, and exit."""
    if started and cluster.stoppable(state):
        cluster.down(state)
    click.echo(message, err=True)
    sys.exit(code)
