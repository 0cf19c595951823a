"""`kubemu join`'s decisions, as kubeadm join makes them (cmd/kubeadm/app/discovery/token,
util/pubkeypin, the kubelet's TLS bootstrap). Pure: no I/O; kubemu/join_cli.py is the shell.

    req = request(address, token, ca_hashes, node_name, hostname)   # JoinError in kubeadm's words
    check_state_free(existing_files, nonempty_dirs)        # preflight: a state dir holding a node
    trusted = trusted_cluster_info(cluster_info, req)      # the token's JWS checked, the CA pinned
    check_same_kubeconfig(trusted.kubeconfig, secure_cluster_info)  # the second read, TLS verified
    wire = wire_info(secure_cluster_info)                  # tcp endpoints + the server's CURVE key
    check_no_ready_node(name, status, node)                # kubelet-start: never take a Ready Node over
    csr = node_csr(req.node_name, key)                     # the kubelet client certificate request
    issued_certificate(csr_now)                            # b"" while pending; JoinError if denied
    node = node_object(name, curve_public)                 # the Node carrying the node's CURVE key

Every refusal is a JoinError whose text is what kubeadm join prints (`phase_error(err)`: after
"error execution phase <phase>: " for a phase's error; an argument error is found before any
phase, as newJoinData finds it); the shell prints it and exits 1.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
from typing import NamedTuple

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID

from components.apiserver.nodekeys import ANNOTATION as CURVE_KEY_ANNOTATION
from components.controllers.bootstrapsigner import CONFIGMAP, JWS_PREFIX, KUBECONFIG_KEY, NAMESPACE
from kubemu import bootstraptoken, pki
from kubemu._wire_auth import check_curve_key, node_identity
from kubemu.clusterinfo import WIRE_ENDPOINTS_KEY, WIRE_SERVER_KEY_KEY
from kubemu.api import certificates
from kubemu.api.fielderrors import invalid, required
from kubemu.api.identity import NODES
from kubemu.api.pod import dns1123_subdomain_errors
from kubemu.api.rbac import aggregate

CLUSTER_INFO_PATH = f"/api/v1/namespaces/{NAMESPACE}/configmaps/{CONFIGMAP}"
CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
NODES_PATH = "/api/v1/nodes"
# The kubelet's client certificate request: ECDSA keys sign, they do not encipher (the kubelet
# asks for key encipherment only with an RSA key); the approver's allowed set holds these.
CSR_USAGES = ("digital signature", "client auth")
CSR_GENERATE_NAME = "node-csr-"
# what `kubemu join` writes under <joinstate>/pki/
CA_FILE, CERT_FILE, KEY_FILE, KUBECONFIG_FILE = "ca.crt", "kubelet-client.crt", "kubelet-client.key", "kubelet.conf"
DEFAULT_TIMEOUT = 300.0  # kubeadm's discovery timeout (5m0s)

SUPPORTED_HASH_FORMATS = "sha256"
PHASE_PREFLIGHT, PHASE_KUBELET_START = "preflight", "kubelet-start"
DISCOVERY_PREFIX = "couldn't validate the identity of the API Server: "

CLOSING = """
This node has joined the cluster:
* Certificate signing request was sent to apiserver and a response was received.
* The Kubelet was informed of the new secure connection details.

Run 'kubemu get nodes' on the control-plane to see this node join the cluster.
"""


class JoinError(Exception):
    """A refusal, in kubeadm's words, and the phase kubeadm join was in (None: its arguments,
    refused before any phase runs)."""

    def __init__(self, message: str, phase: str | None = PHASE_PREFLIGHT):
        super().__init__(message)
        self.phase = phase


def phase_error(err: JoinError) -> str:
    """The line kubeadm join prints for an error."""
    return str(err) if err.phase is None else f"error execution phase {err.phase}: {err}"


def discovery_error(message: str) -> JoinError:
    """An error of discovery.For (kubeadm wraps every one in this)."""
    return JoinError(DISCOVERY_PREFIX + message)


class Request(NamedTuple):
    address: str          # host:port of the API's HTTPS door
    token_id: str
    token_secret: str
    ca_hashes: tuple[str, ...]   # lowercase hex of sha256 pins
    node_name: str

    @property
    def token(self) -> str:
        return f"{self.token_id}.{self.token_secret}"


def split_host_port(hostport: str) -> tuple[str, str]:
    """Go's net.SplitHostPort: (host, port), brackets taken off an IPv6 host; ValueError in its
    words (net.AddrError) otherwise."""
    def error(why: str) -> ValueError:
        return ValueError(f"address {hostport}: {why}" if hostport else why)
    i = hostport.rfind(":")
    if i < 0:
        raise error("missing port in address")
    j = k = 0
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise error("missing ']' in address")
        if end + 1 == len(hostport):
            raise error("missing port in address")
        if end + 1 != i:  # ']' followed by something else than the last colon
            raise error("too many colons in address" if hostport[end + 1] == ":" else "missing port in address")
        host, j, k = hostport[1:end], 1, end + 1
    else:
        host = hostport[:i]
        if ":" in host:
            raise error("too many colons in address")
    if "[" in hostport[j:]:
        raise error("unexpected '[' in address")
    if "]" in hostport[k:]:
        raise error("unexpected ']' in address")
    return host, hostport[i + 1:]


def _address_errors(address: str) -> list:
    """ValidateDiscoveryBootstrapToken's checks of the API server endpoint, then kubemu's own:
    kubemu dials the port it is given, so it must be one."""
    path = "discovery.bootstrapToken.apiServerEndpoint"
    try:
        host, port = split_host_port(address)
    except ValueError as err:
        return [invalid(path, address, str(err))]
    if not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        return [invalid(path, address, "expected host:port with a port in 1-65535")]
    return []


def validation_errors(address: str, token: str, ca_hashes, node_name: str) -> list[str]:
    """ValidateJoinConfiguration of what the flags make (--token is both the discovery token
    and the TLS bootstrap token), in its order."""
    errors = []
    if not address:
        errors.append(required("discovery.bootstrapToken", "APIServerEndpoint is not set"))
    if not ca_hashes:
        errors.append(invalid("discovery.bootstrapToken.caCertHashes", "",
                              "using token-based discovery without caCertHashes can be unsafe. Set "
                              "unsafeSkipCAVerification as true in your kubeadm config file or pass "
                              "--discovery-token-unsafe-skip-ca-verification flag to continue"))
    token_ok = bootstraptoken.is_token(token)
    if not token_ok:
        errors.append(invalid("discovery.bootstrapToken.token", token, "the bootstrap token is invalid"))
    errors += _address_errors(address)
    if not token_ok:
        errors.append(invalid("discovery.tlsBootstrapToken", token, "the bootstrap token is invalid"))
    if not node_name:
        errors.append(required("nodeRegistration", "--node-name or .nodeRegistration.name in the config file is a "
                               "required value. It seems like this value couldn't be automatically detected in "
                               "your environment, please specify the desired value using the CLI or config file."))
    errors += [invalid("nodeRegistration.name", node_name, why) for why in dns1123_subdomain_errors(node_name)
               if node_name]
    return [str(e) for e in errors]


def allow_hashes(pins) -> tuple[str, ...]:
    """pubkeypin.Set.Allow: each pin `sha256:<64 hex>`; the hex, lowercased. kubeadm reads them
    in discovery, after its first request of cluster-info; kubemu before (its words are
    kubeadm's): a pin that cannot be one needs no server to be refused."""
    return tuple(_allow_hash(pin) for pin in pins)


def _allow_hash(pin: str) -> str:
    def invalid_pin(why: str) -> JoinError:
        return discovery_error(f"invalid discovery token CA certificate hash: {why}")
    parts = pin.split(":")
    if len(parts) != 2:
        raise invalid_pin(f'invalid hash, expected "format:hex-value". Known format(s) are: {SUPPORTED_HASH_FORMATS}')
    fmt, value = parts
    if fmt.lower() != "sha256":
        raise invalid_pin(f'unknown hash format "{fmt}". Known format(s) are: {SUPPORTED_HASH_FORMATS}')
    if len(value) // 2 != hashlib.sha256().digest_size:
        raise invalid_pin(f'invalid hash "{pin}", expected a 32 byte SHA-256 hash, found {len(value) // 2} bytes')
    try:
        bytes.fromhex(value)
    except ValueError:
        raise invalid_pin(f'invalid hash "{pin}", could not decode SHA-256 from hex') from None
    return value.lower()


def request(address: str, token: str, ca_hashes, node_name: str | None, hostname: str) -> Request:
    """The join's arguments checked before anything reaches the network: kubeadm's validation
    of its JoinConfiguration (every error at once, before any phase), then pubkeypin's. The node
    name defaults to the machine's hostname, lowercased (kubeadm's GetHostname), also when
    --node-name is empty."""
    name = node_name or hostname.strip().lower()
    errors = validation_errors(address, token, ca_hashes, name)
    if errors:
        raise JoinError(aggregate(errors), phase=None)
    token_id, secret = bootstraptoken.parse(token)
    return Request(address, token_id, secret, allow_hashes(ca_hashes), name)


def check_state_free(existing_files, nonempty_dirs) -> None:
    """The preflight checks of a state directory (RunJoinNodeChecks' FileAvailable and
    DirAvailable, named after their paths): one that already holds a node is refused."""
    lines = [f"\t[ERROR FileAvailable-{path.replace('/', '-')}]: {path} already exists\n"
             for path in map(str, existing_files)]
    lines += [f"\t[ERROR DirAvailable-{path.replace('/', '-')}]: {path} is not empty\n"
              for path in map(str, nonempty_dirs)]
    if lines:
        raise JoinError("[preflight] Some fatal errors occurred:\n" + "".join(lines)
                        + "[preflight] This state directory holds a node: give `kubemu join` a new --state-dir")


# --- discovery --------------------------------------------------------------------------------

def signature_missing(token_id: str) -> str:
    """getClusterInfo's last error while the bootstrap signer has not signed for this token."""
    return f'could not find a JWS signature in the cluster-info ConfigMap for token ID "{token_id}"'


def has_signature(cluster_info: dict, token_id: str) -> bool:
    """Whether cluster-info carries this token id's signature yet (getClusterInfo polls for it)."""
    return bool(_data(cluster_info).get(JWS_PREFIX + token_id))


def _data(cm: object) -> dict:
    data = cm.get("data") if isinstance(cm, dict) else None
    return data if isinstance(data, dict) else {}


def validated_kubeconfig(cluster_info: dict, req: Request) -> str:
    """validateClusterInfoToken: the kubeconfig text, its detached JWS verified with the token."""
    content = _data(cluster_info).get(KUBECONFIG_KEY)
    if not isinstance(content, str) or not content:
        raise discovery_error(f"there is no {KUBECONFIG_KEY} key in the {CONFIGMAP} ConfigMap. This API Server "
                              "isn't set up for token bootstrapping, can't connect")
    detached = _data(cluster_info).get(JWS_PREFIX + req.token_id)
    if not isinstance(detached, str) or not detached:
        raise discovery_error(f'token id "{req.token_id}" is invalid for this cluster or it has expired. Use '
                              '"kubemu token create" on the control-plane node to create a new valid token')
    if not bootstraptoken.signature_valid(detached, content, req.token_id, req.token_secret):
        raise discovery_error("failed to verify JWS signature of received cluster info object, can't trust "
                              "this API Server")
    return content


class Cluster(NamedTuple):
    server: str
    ca_pem: bytes


def parse_cluster_kubeconfig(text: str) -> Cluster:
    """The one cluster of cluster-info's kubeconfig: its server and CA."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise discovery_error(f"couldn't parse the kubeconfig file in the {CONFIGMAP} ConfigMap: {err}") from None
    clusters = config.get("clusters") if isinstance(config, dict) else None
    if not isinstance(clusters, list) or not clusters or not isinstance(clusters[-1], dict) \
            or not isinstance(clusters[-1].get("cluster"), dict):
        raise discovery_error(f"malformed kubeconfig in the {CONFIGMAP} ConfigMap: no clusters")
    cluster = clusters[-1]["cluster"]  # kubeadm takes the last one it ranges over
    server, ca_data = cluster.get("server"), cluster.get("certificate-authority-data")
    if not isinstance(server, str) or not server:
        raise discovery_error(f"malformed kubeconfig in the {CONFIGMAP} ConfigMap: no server")
    try:
        ca_pem = base64.b64decode(ca_data or "", validate=True)
    except (binascii.Error, TypeError, ValueError):
        ca_pem = b""
    return Cluster(server, ca_pem)


def ca_certificates(ca_pem: bytes) -> list[x509.Certificate]:
    try:
        certs = x509.load_pem_x509_certificates(ca_pem)
    except ValueError as err:
        raise discovery_error(f"failed to parse cluster CA from the {CONFIGMAP} ConfigMap: {err}") from None
    return certs


def check_ca_pinned(ca_pem: bytes, pins: tuple[str, ...]) -> bytes:
    """validateClusterCA: one of the CA certificates' public keys must be pinned. The PEM of the
    pinned one(s) only: another certificate in cluster-info's bundle is never trusted (kubeadm
    goes on with the whole bundle)."""
    hashes_seen, pinned = [], []
    for cert in ca_certificates(ca_pem):
        pem = cert.public_bytes(serialization.Encoding.PEM)
        pin = bootstraptoken.ca_cert_hash(pem)
        if pin.removeprefix("sha256:") in pins:
            pinned.append(pem)
        hashes_seen.append(pin)
    if not pinned:
        raise discovery_error(f"cluster CA found in {CONFIGMAP} ConfigMap is invalid: none of the public keys "
                              f"\"{':'.join(hashes_seen)}\" are pinned")
    return b"".join(pinned)


class Trusted(NamedTuple):
    kubeconfig: str   # cluster-info's kubeconfig, as the token's JWS signed it
    ca_pem: bytes     # its pinned CA certificate(s): what every later TLS connection trusts


def trusted_cluster_info(cluster_info: dict, req: Request) -> Trusted:
    """The first, unverified read of cluster-info, once the token's signature of its kubeconfig
    and the CA pin vouch for it."""
    kubeconfig = validated_kubeconfig(cluster_info, req)
    return Trusted(kubeconfig, check_ca_pinned(parse_cluster_kubeconfig(kubeconfig).ca_pem, req.ca_hashes))


def check_same_kubeconfig(first: str, secure_cluster_info: dict) -> None:
    """The second read (TLS verified against the pinned CA) must carry what the first did."""
    if _data(secure_cluster_info).get(KUBECONFIG_KEY) != first:
        raise discovery_error(f"the second kubeconfig from the {CONFIGMAP} ConfigMap (using validated TLS) was "
                              "different from the first")


class Wire(NamedTuple):
    endpoints: tuple[str, ...]   # tcp://IP:port of every apiserver, node-0's first
    server_key: bytes            # the apiservers' CURVE public key (Z85)


def wire_info(secure_cluster_info: dict) -> Wire:
    """Where a node on another machine reaches the wire, and the key that proves it is the
    cluster's: read only from the cluster-info whose TLS was verified against the pinned CA."""
    data = _data(secure_cluster_info)
    endpoints, key = data.get(WIRE_ENDPOINTS_KEY), data.get(WIRE_SERVER_KEY_KEY)
    if not isinstance(endpoints, str) or not endpoints or not isinstance(key, str) or not key:
        raise discovery_error(f"there is no {WIRE_ENDPOINTS_KEY} or {WIRE_SERVER_KEY_KEY} key in the {CONFIGMAP} "
                              "ConfigMap. This API Server does not serve the wire beyond loopback (`kubemu up "
                              "--apiserver-advertise-address`), can't connect")
    out = []
    for endpoint in endpoints.split(","):
        host, sep, port = endpoint.removeprefix("tcp://").rpartition(":")
        try:
            ok = endpoint.startswith("tcp://") and sep and 0 < int(port) < 65536 and ipaddress.ip_address(host)
        except ValueError:
            ok = False
        if not ok:
            raise discovery_error(f"{WIRE_ENDPOINTS_KEY} in the {CONFIGMAP} ConfigMap: {endpoint!r} is not "
                                  "tcp://<IP>:<port>")
        out.append(endpoint)
    try:
        server_key = check_curve_key(key, f"{WIRE_SERVER_KEY_KEY} in the {CONFIGMAP} ConfigMap")
    except ValueError as err:
        raise discovery_error(str(err)) from None
    return Wire(tuple(out), server_key)


# --- TLS bootstrap ----------------------------------------------------------------------------

def check_no_ready_node(node: str, status: int, obj: dict, message: str) -> None:
    """kubelet-start's check before the TLS bootstrap (GET of the Node with the bootstrap token,
    which kubeadm:get-nodes allows): a Ready Node of this name is another node's, never taken
    over. `message` says why a GET that is neither 200 nor 404 failed."""
    if status == 404:
        return
    if status != 200:
        raise JoinError(f'cannot get Node "{node}": {message}', PHASE_KUBELET_START)
    if node_is_ready(obj):
        raise JoinError(f'a Node with name "{node}" and status "Ready" already exists in the cluster. You must '
                        "delete the existing Node or change the name of this new joining Node", PHASE_KUBELET_START)


def node_csr(node: str, key) -> dict:
    """The CertificateSigningRequest the kubelet's TLS bootstrap sends (the approver's nodeclient
    case: CN system:node:<node>, O system:nodes, no SANs, client usages)."""
    request_pem = (x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, NODES),
        x509.NameAttribute(NameOID.COMMON_NAME, node_identity(node))])).sign(key, hashes.SHA256())
        .public_bytes(serialization.Encoding.PEM))
    return {"apiVersion": "certificates.k8s.io/v1", "kind": certificates.KIND,
            "metadata": {"generateName": CSR_GENERATE_NAME},
            "spec": {"request": base64.b64encode(request_pem).decode(),
                     "signerName": certificates.KUBE_APISERVER_CLIENT_KUBELET,
                     "usages": list(CSR_USAGES)}}


def issued_certificate(csr: dict) -> bytes:
    """csr.WaitForCertificate's test: the certificate once issued (b"" while pending); a
    denied or failed request is a JoinError in client-go's words."""
    for ctype, what in ((certificates.DENIED, "is denied"), (certificates.FAILED, "failed")):
        for c in certificates.conditions(csr):
            if c.get("type") == ctype:
                raise JoinError(f"certificate signing request {what}, reason: {c.get('reason', '')}, "
                                f"message: {c.get('message', '')}", PHASE_KUBELET_START)
    return certificates.certificate(csr)


def check_issued(cert_pem: bytes, key, ca_pem: bytes, node: str) -> None:
    """The issued certificate must be for this key and this node, signed by the cluster's CA (a
    signer's mistake is not written to disk)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError as err:
        raise JoinError(f"the issued certificate is not a certificate: {err}", PHASE_KUBELET_START) from None
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    cns = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    if cert.public_key().public_bytes(*spki) != key.public_key().public_bytes(*spki) \
            or cns != [node_identity(node)] or not any(pki.signed_by(cert, ca) for ca in ca_certificates(ca_pem)):
        raise JoinError("the issued certificate does not match the request", PHASE_KUBELET_START)


def node_is_ready(node: object) -> bool:
    """Whether a Node's Ready condition is True."""
    status = node.get("status") if isinstance(node, dict) else None
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
               for c in (conditions if isinstance(conditions, list) else ()))


# --- the Node that carries the node's CURVE key ------------------------------------------------

def node_object(node: str, curve_public: bytes) -> dict:
    """The Node created before the kubelet starts: the apiserver knows the kubelet's CURVE key as
    system:node:<node> by this annotation (the kubelet registers into it, adding its labels)."""
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "annotations": {CURVE_KEY_ANNOTATION: curve_public.decode()}}}


def node_patch(curve_public: bytes) -> dict:
    """The merge patch of an existing Node (a node joining again with new keys)."""
    return {"metadata": {"annotations": {CURVE_KEY_ANNOTATION: curve_public.decode()}}}
