"""TLS bootstrapping end to end, with real processes (a 3-replica store, an apiserver serving
HTTPS, a controller-manager running the bootstrap and CSR controllers, the `kubemu` CLI): what
`kubemu join` will do, step by step, as kubeadm join and the kubelet's TLS bootstrap do it.

token (`kubemu token create`) -> cluster-info read anonymously over HTTPS, its JWS verified with
the token and its CA pinned by hash -> a CSR for system:node:<name> sent with the token -> the
approver approves it, the signer signs it -> the certificate authenticates as system:node:<name>.
"""
from __future__ import annotations

import base64
import datetime
import http.client
import json
import os
import random
import ssl
import subprocess
import sys

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubemu import bootstraptoken as bt
from kubemu import clusterinfo
from kubemu.apiclient import SyncApiClient
from tests.components.apiserver import running
from tests.components.apiserver.rest import HTTPSEnv
from tests.components.controller_manager import ControllerManager
from tests.conftest import DEADLINE, wait_for

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CLUSTER_INFO = "/api/v1/namespaces/kube-public/configmaps/cluster-info"
NODE = "worker-7"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    path = tmp_path_factory.mktemp("boot")
    for env in running(HTTPSEnv(path), path):
        p = env.pki_dir
        cm = ControllerManager(path, env.endpoint, [
            "--controllers", "tokencleaner,bootstrapsigner,csrapproving,csrsigning,csrcleaner",
            "--cluster-signing-cert-file", str(p / "ca.crt"), "--cluster-signing-key-file", str(p / "ca.key"),
            "--leader-elect=false"], "controller-manager")
        cm.start()
        api = SyncApiClient(env.endpoint, timeout=15.0)
        try:
            assert clusterinfo.ensure(api, env.server, env.ca.cert_pem)
            yield env, api, cm
        finally:
            api.close()
            cm.terminate()


def kubemu(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kubemu.cli", "--state-dir", str(env.dir / "state"),
                           "--server", env.endpoint, *args], capture_output=True, text=True,
                          timeout=DEADLINE, env={**os.environ, "PYTHONPATH": os.getcwd()})


def https(env, method: str, path: str, *, body=None, token: str | None = None,
          ca_pem: bytes | None = None, cert: tuple | None = None) -> tuple[int, dict | None]:
    """One HTTPS request: anonymous unless a bearer token or a client certificate is given; the
    server is verified with `ca_pem` when given, else not at all (discovery's first read)."""
    if ca_pem is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cadata=ca_pem.decode())
    if cert is not None:
        ctx.load_cert_chain(*cert)
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn = http.client.HTTPSConnection("127.0.0.1", env.port, context=ctx, timeout=15)
    try:
        conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, json.loads(data) if data else None
    finally:
        conn.close()


def discover(env, token: str) -> bytes:
    """kubeadm's token discovery: cluster-info without credentials nor trust, its kubeconfig
    trusted only once the token's signature of it verifies; the CA it names."""
    tid, secret = bt.parse(token)

    def signed():
        code, cm = https(env, "GET", CLUSTER_INFO)
        assert code == 200, cm
        return cm if f"jws-kubeconfig-{tid}" in cm["data"] else None
    cm = wait_for(signed, message="the bootstrap signer to sign cluster-info for the token")
    content = cm["data"]["kubeconfig"]
    assert bt.signature_valid(cm["data"][f"jws-kubeconfig-{tid}"], content, tid, secret)
    assert not bt.signature_valid(cm["data"][f"jws-kubeconfig-{tid}"], content, tid, "0" * 16)
    cluster = yaml.safe_load(content)["clusters"][0]["cluster"]
    assert cluster["server"] == env.server
    return base64.b64decode(cluster["certificate-authority-data"])


def node_csr(tmp_path, name: str) -> tuple[dict, tuple[str, str]]:
    key = ec.generate_private_key(ec.SECP256R1())
    request = (x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
        x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{name}")])).sign(key, hashes.SHA256()))
    key_path = tmp_path / f"{name}.key"
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    csr = {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
           "metadata": {"generateName": "node-csr-"},
           "spec": {"request": base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode(),
                    "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                    "usages": ["digital signature", "client auth"]}}
    return csr, (str(tmp_path / f"{name}.crt"), str(key_path))


def test_a_node_bootstraps_its_client_certificate_with_a_token(cluster, tmp_path):
    env, api, _ = cluster
    created = kubemu(env, "token", "create", "--description", "for worker-7")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert bt.is_token(token)

    ca_pem = discover(env, token)
    assert bt.ca_cert_hash(ca_pem) == bt.ca_cert_hash((env.pki_dir / "ca.crt").read_bytes())

    csr, (cert_path, key_path) = node_csr(tmp_path, NODE)
    code, sent = https(env, "POST", CSRS, body=csr, token=token, ca_pem=ca_pem)
    assert code == 201, sent
    name = sent["metadata"]["name"]
    assert sent["spec"]["username"] == f"system:bootstrap:{bt.parse(token)[0]}"

    def issued():
        code, got = https(env, "GET", f"{CSRS}/{name}", token=token, ca_pem=ca_pem)
        assert code == 200, got
        return got if (got.get("status") or {}).get("certificate") else None
    done = wait_for(issued, message="the CSR to be approved and signed")
    [approved] = done["status"]["conditions"]
    assert (approved["type"], approved["reason"]) == ("Approved", "AutoApproved")
    with open(cert_path, "wb") as f:
        f.write(base64.b64decode(done["status"]["certificate"]))

    code, review = https(env, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                         body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                         ca_pem=ca_pem, cert=(cert_path, key_path))
    assert code == 201, review
    user = review["status"]["userInfo"]
    assert user["username"] == f"system:node:{NODE}"
    assert user["groups"] == ["system:nodes", "system:authenticated"]

    listed = kubemu(env, "get", "csr")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()[0], next(line for line in listed.stdout.splitlines()
                                                      if line.startswith(name))
    assert header.split() == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
    assert row.split()[2:] == ["kubernetes.io/kube-apiserver-client-kubelet",
                               f"system:bootstrap:{bt.parse(token)[0]}", "<none>", "Approved,Issued"]


def test_a_wrong_token_is_refused_and_a_deleted_one_stops_signing(cluster, tmp_path):
    env, api, _ = cluster
    token = kubemu(env, "token", "create").stdout.strip()
    tid, _ = bt.parse(token)
    discover(env, token)
    wrong = f"{tid}.{'x' * 16}"
    csr, _ = node_csr(tmp_path, "intruder")
    assert https(env, "POST", CSRS, body=csr, token=wrong)[0] == 401
    code, denied = https(env, "POST", CSRS, body=csr)  # anonymous: RBAC says no
    assert code == 403 and 'User "system:anonymous" cannot create' in denied["message"]

    listed = kubemu(env, "token", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split() == ["TOKEN", "TTL", "EXPIRES", "USAGES", "DESCRIPTION",
                                                     "EXTRA", "GROUPS"]
    line = next(line for line in listed.stdout.splitlines() if line.startswith(token))
    assert line.split()[1] == "23h" and "authentication,signing" in line

    deleted = kubemu(env, "token", "delete", tid)
    assert deleted.returncode == 0 and deleted.stdout == f'bootstrap token "{tid}" deleted\n'
    again = kubemu(env, "token", "delete", tid)
    assert again.returncode == 1 and again.stderr == (
        f'error: failed to delete bootstrap token "{tid}": secrets "bootstrap-token-{tid}" not found\n')
    wait_for(lambda: f"jws-kubeconfig-{tid}" not in https(env, "GET", CLUSTER_INFO)[1]["data"],
             message="the bootstrap signer to drop the deleted token's signature")
    assert https(env, "POST", CSRS, body=csr, token=token)[0] == 401


def test_an_expired_token_is_cleaned_up(cluster):
    env, api, _ = cluster
    token = bt.BootstrapToken.new(bt.generate(random.Random(7)), 0.0, ttl=1.0)
    api.create("secrets", bt.secret_for(token), bt.NAMESPACE)  # expired long ago
    wait_for(lambda: not [s for s in api.list("secrets", bt.NAMESPACE)["items"]
                          if s["metadata"]["name"] == bt.secret_name(token.id)],
             message="the token cleaner to delete the expired token")


def test_kubectl_style_approve_and_deny(cluster, tmp_path):
    env, api, _ = cluster
    key = ec.generate_private_key(ec.SECP256R1())
    pem = (x509.CertificateSigningRequestBuilder().subject_name(x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, "jane")])).sign(key, hashes.SHA256())
        .public_bytes(serialization.Encoding.PEM))
    for name in ("jane", "mallory"):
        api.create("certificatesigningrequests", {
            "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem).decode(), "signerName": "kubernetes.io/kube-apiserver-client",
                     "usages": ["client auth"], "expirationSeconds": 3600}})
    out = kubemu(env, "certificate", "approve", "jane")
    assert out.returncode == 0 and out.stdout == "certificatesigningrequest.certificates.k8s.io/jane approved\n"
    out = kubemu(env, "certificate", "deny", "mallory")
    assert out.returncode == 0 and out.stdout == "certificatesigningrequest.certificates.k8s.io/mallory denied\n"
    out = kubemu(env, "certificate", "approve", "mallory")
    assert out.returncode == 1 and out.stderr == 'error: certificate signing request "mallory" is already Denied\n'
    signed = wait_for(lambda: (api.get("certificatesigningrequests", "jane").get("status") or {}).get("certificate"),
                      message="the signer to sign jane's approved request")
    cert = x509.load_pem_x509_certificate(base64.b64decode(signed))
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(hours=1)
    assert "certificate" not in (api.get("certificatesigningrequests", "mallory").get("status") or {})


def test_print_join_command_names_cluster_info_s_address_and_ca(cluster):
    """`kubemu token create --print-join-command`: up's join command on one line, for the address
    and CA a joining node reads from cluster-info; the token it names authenticates."""
    env, api, _ = cluster
    made = kubemu(env, "token", "create", "--print-join-command")
    assert made.returncode == 0, made.stderr
    address = env.server.removeprefix("https://")
    words = made.stdout.split()
    assert made.stdout.count("\n") == 1 and words[:3] == ["kubemu", "join", address], made.stdout
    assert words[3] == "--token" and bt.is_token(words[4])
    assert words[5:] == ["--discovery-token-ca-cert-hash", bt.ca_cert_hash(env.ca.cert_pem)]
    assert discover(env, words[4]) == env.ca.cert_pem
