"""kubemu join's decisions: its arguments, the discovery checks and the TLS bootstrap's request,
every refusal in kubeadm's words (cmd/kubeadm/app/discovery/token, util/pubkeypin)."""
from __future__ import annotations

import base64
import datetime

import pytest
import zmq
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from components.apiserver import nodekeys
from components.controllers import csrapproving
from kubemu import bootstraptoken as bt
from kubemu import clusterinfo, join, pki
from kubemu.api import certificates
from kubemu.api.pod import dns1123_subdomain_errors

TOKEN = "abcdef.0123456789abcdef"
NOW = datetime.datetime(2026, 11, 26, tzinfo=datetime.timezone.utc)


@pytest.fixture(scope="module")
def ca():
    key = pki.new_key()
    return pki.Pair(pki.make_ca(key, NOW), key)


def pin(ca) -> str:
    return bt.ca_cert_hash(ca.cert_pem)


def req(ca, token=TOKEN) -> join.Request:
    return join.request("198.18.0.1:6443", token, [pin(ca)], "worker-1", "ignored")


def signed_cluster_info(ca, token=TOKEN, server="https://198.18.0.1:6443", **extra) -> dict:
    cm = clusterinfo.configmap(server, ca.cert_pem)
    tid, secret = bt.parse(token)
    content = cm["data"]["kubeconfig"]
    cm["data"][f"jws-kubeconfig-{tid}"] = bt.detached_signature(content, tid, secret)
    cm["data"].update(extra)
    return cm


def refused(fn, *args) -> str:
    with pytest.raises(join.JoinError) as err:
        fn(*args)
    return join.phase_error(err.value)


# --- arguments -----------------------------------------------------------------------------

def test_the_arguments_are_taken_apart(ca):
    r = join.request("198.18.0.1:6443", TOKEN, ["SHA256:" + pin(ca)[7:].upper()], None, "Worker-7\n")
    assert r == join.Request("198.18.0.1:6443", "abcdef", "0123456789abcdef", (pin(ca)[7:],), "worker-7")
    assert r.token == TOKEN


def test_a_malformed_token_is_refused_before_any_phase_as_kubeadm_validates_it(ca):
    # --token is both the discovery token and the TLS bootstrap token: kubeadm's validation
    # finds both invalid, and reports its errors at once, without a phase
    assert refused(join.request, "198.18.0.1:6443", "abc", [pin(ca)], "n", "h") == (
        '[discovery.bootstrapToken.token: Invalid value: "abc": the bootstrap token is invalid, '
        'discovery.tlsBootstrapToken: Invalid value: "abc": the bootstrap token is invalid]')


@pytest.mark.parametrize("address, why", [
    ("198.18.0.1", "address 198.18.0.1: missing port in address"),
    ("a:b:c", "address a:b:c: too many colons in address"),
    ("[::1", "address [::1: missing ']' in address"),
    ("[::1]", "address [::1]: missing port in address"),
    ("[::1]x:6443", "address [::1]x:6443: missing port in address"),
    ("[::1]:64:43", "address [::1]:64:43: too many colons in address"),
    ("a[b:6443", "address a[b:6443: unexpected '[' in address"),
    ("a]b:6443", "address a]b:6443: unexpected ']' in address"),
])
def test_an_address_go_cannot_split_is_refused_in_its_words(ca, address, why):
    assert refused(join.request, address, TOKEN, [pin(ca)], "n", "h") == (
        f'discovery.bootstrapToken.apiServerEndpoint: Invalid value: "{address}": {why}')


def test_an_empty_address_is_required_and_unsplittable(ca):
    assert refused(join.request, "", TOKEN, [pin(ca)], "n", "h") == (
        "[discovery.bootstrapToken: Required value: APIServerEndpoint is not set, "
        'discovery.bootstrapToken.apiServerEndpoint: Invalid value: "": missing port in address]')


@pytest.mark.parametrize("hostport, split", [("198.18.0.1:6443", ("198.18.0.1", "6443")),
                                             ("[::1]:6443", ("::1", "6443")), (":6443", ("", "6443")),
                                             ("h:", ("h", ""))])
def test_host_and_port_are_split_as_go_splits_them(hostport, split):
    assert join.split_host_port(hostport) == split


@pytest.mark.parametrize("address", ["198.18.0.1:x", "198.18.0.1:0", "198.18.0.1:65536", ":6443",
                                     "198.18.0.1:\u0663", "198.18.0.1:"])
def test_a_port_kubemu_cannot_dial_is_refused(ca, address):
    assert refused(join.request, address, TOKEN, [pin(ca)], "n", "h") == (
        f'discovery.bootstrapToken.apiServerEndpoint: Invalid value: "{address}": expected host:port with a port '
        "in 1-65535")


@pytest.mark.parametrize("hashes, why", [
    (["sha256"], 'invalid hash, expected "format:hex-value". Known format(s) are: sha256'),
    (["md5:00"], 'unknown hash format "md5". Known format(s) are: sha256'),
    (["sha256:00"], 'invalid hash "sha256:00", expected a 32 byte SHA-256 hash, found 1 bytes'),
    (["sha256:" + "zz" * 32], f'invalid hash "sha256:{"zz" * 32}", could not decode SHA-256 from hex'),
])
def test_a_malformed_ca_hash_is_refused_in_discoverys_words(hashes, why):
    # kubeadm reads the pins in discovery (the preflight phase), after the first request
    assert refused(join.request, "198.18.0.1:6443", TOKEN, hashes, "n", "h") == (
        "error execution phase preflight: couldn't validate the identity of the API Server: "
        f"invalid discovery token CA certificate hash: {why}")


def test_no_ca_hash_is_refused_as_unsafe():
    assert refused(join.request, "198.18.0.1:6443", TOKEN, [], "n", "h") == (
        'discovery.bootstrapToken.caCertHashes: Invalid value: "": using token-based discovery without caCertHashes '
        "can be unsafe. Set unsafeSkipCAVerification as true in your kubeadm config file or pass "
        "--discovery-token-unsafe-skip-ca-verification flag to continue")


def test_a_node_name_must_be_a_dns_subdomain(ca):
    assert refused(join.request, "198.18.0.1:6443", TOKEN, [pin(ca)], "Bad_Name", "h").startswith(
        'nodeRegistration.name: Invalid value: "Bad_Name": a lowercase RFC 1123')
    assert refused(join.request, "198.18.0.1:6443", TOKEN, [pin(ca)], None, " ").startswith(
        "nodeRegistration: Required value: --node-name or .nodeRegistration.name in the config file is a required "
        "value.")
    assert join.request("198.18.0.1:6443", TOKEN, [pin(ca)], "", "Host-1").node_name == "host-1"


def test_every_argument_error_is_reported_at_once_in_kubeadms_order(ca):
    assert refused(join.request, "198.18.0.1", "abc", [], "Bad_Name", "h") == (
        '[discovery.bootstrapToken.caCertHashes: Invalid value: "": using token-based discovery without '
        "caCertHashes can be unsafe. Set unsafeSkipCAVerification as true in your kubeadm config file or pass "
        "--discovery-token-unsafe-skip-ca-verification flag to continue, "
        'discovery.bootstrapToken.token: Invalid value: "abc": the bootstrap token is invalid, '
        'discovery.bootstrapToken.apiServerEndpoint: Invalid value: "198.18.0.1": address 198.18.0.1: missing port '
        "in address, "
        'discovery.tlsBootstrapToken: Invalid value: "abc": the bootstrap token is invalid, '
        f'nodeRegistration.name: Invalid value: "Bad_Name": {dns1123_subdomain_errors("Bad_Name")[0]}]')


def test_a_state_directory_holding_a_node_fails_preflight_with_checks_named_after_their_paths():
    join.check_state_free([], [])
    assert refused(join.check_state_free, ["/s/pki/kubelet.conf"], ["/s/nodes"]) == (
        "error execution phase preflight: [preflight] Some fatal errors occurred:\n"
        "\t[ERROR FileAvailable--s-pki-kubelet.conf]: /s/pki/kubelet.conf already exists\n"
        "\t[ERROR DirAvailable--s-nodes]: /s/nodes is not empty\n"
        "[preflight] This state directory holds a node: give `kubemu join` a new --state-dir")


# --- discovery -------------------------------------------------------------------------------

def test_a_signed_cluster_info_gives_its_kubeconfig_server_and_ca(ca):
    cm = signed_cluster_info(ca)
    assert join.has_signature(cm, "abcdef") and not join.has_signature(cm, "zzzzzz")
    content = join.validated_kubeconfig(cm, req(ca))
    assert content == cm["data"]["kubeconfig"]
    assert join.parse_cluster_kubeconfig(content) == join.Cluster("https://198.18.0.1:6443", ca.cert_pem)
    assert join.check_ca_pinned(ca.cert_pem, req(ca).ca_hashes) == ca.cert_pem
    assert join.trusted_cluster_info(cm, req(ca)) == join.Trusted(content, ca.cert_pem)
    join.check_same_kubeconfig(content, cm)


def test_only_the_pinned_ca_of_cluster_infos_bundle_is_trusted(ca):
    """Another CA in cluster-info's bundle vouches for nothing: neither for the second read's
    TLS nor for the certificate the signer issues."""
    other_key = pki.new_key()
    other = pki.Pair(pki.make_ca(other_key, NOW), other_key)
    for bundle in (other.cert_pem + ca.cert_pem, ca.cert_pem + other.cert_pem):
        assert join.check_ca_pinned(bundle, req(ca).ca_hashes) == ca.cert_pem
        cm = signed_cluster_info(ca)
        cm["data"]["kubeconfig"] = clusterinfo.configmap("https://198.18.0.1:6443", bundle)["data"]["kubeconfig"]
        cm["data"]["jws-kubeconfig-abcdef"] = bt.detached_signature(cm["data"]["kubeconfig"], *bt.parse(TOKEN))
        trusted = join.trusted_cluster_info(cm, req(ca))
        assert trusted.ca_pem == ca.cert_pem
        key = pki.new_key()
        by_other = pki.issue(pki.kubelet_spec("worker-1"), key.public_key(), other, NOW)
        assert "does not match the request" in refused(
            join.check_issued, by_other.public_bytes(serialization.Encoding.PEM), key, trusted.ca_pem, "worker-1")


def test_a_token_id_cluster_info_has_no_signature_for_is_refused(ca):
    cm = signed_cluster_info(ca, token="zzzzzz.0123456789abcdef")
    assert refused(join.validated_kubeconfig, cm, req(ca)) == (
        "error execution phase preflight: couldn't validate the identity of the API Server: "
        'token id "abcdef" is invalid for this cluster or it has expired. Use "kubemu token create" on the '
        "control-plane node to create a new valid token")
    assert join.signature_missing("abcdef") == (
        'could not find a JWS signature in the cluster-info ConfigMap for token ID "abcdef"')


def test_a_wrong_token_secret_fails_the_signature(ca):
    cm = signed_cluster_info(ca)
    assert refused(join.validated_kubeconfig, cm, req(ca, "abcdef.xxxxxxxxxxxxxxxx")) == (
        "error execution phase preflight: couldn't validate the identity of the API Server: "
        "failed to verify JWS signature of received cluster info object, can't trust this API Server")


def test_a_cluster_info_without_a_kubeconfig_is_refused(ca):
    assert refused(join.validated_kubeconfig, {"data": {}}, req(ca)).endswith(
        "there is no kubeconfig key in the cluster-info ConfigMap. This API Server isn't set up for token "
        "bootstrapping, can't connect")


def test_a_ca_that_is_not_pinned_is_refused(ca):
    other = pki.Pair(pki.make_ca(pki.new_key(), NOW), None)
    assert refused(join.check_ca_pinned, other.cert_pem, req(ca).ca_hashes) == (
        "error execution phase preflight: couldn't validate the identity of the API Server: cluster CA found "
        f'in cluster-info ConfigMap is invalid: none of the public keys "{pin(other)}" are pinned')


def test_unparseable_kubeconfig_and_ca_are_refused(ca):
    assert "couldn't parse the kubeconfig file in the cluster-info ConfigMap" in refused(
        join.parse_cluster_kubeconfig, "{")
    assert "malformed kubeconfig in the cluster-info ConfigMap" in refused(join.parse_cluster_kubeconfig, "a: 1")
    assert "failed to parse cluster CA from the cluster-info ConfigMap" in refused(
        join.check_ca_pinned, b"not pem", req(ca).ca_hashes)


def test_the_second_read_must_carry_the_same_kubeconfig(ca):
    first = signed_cluster_info(ca)["data"]["kubeconfig"]
    changed = signed_cluster_info(ca, server="https://198.18.0.9:6443")
    assert refused(join.check_same_kubeconfig, first, changed).endswith(
        "the second kubeconfig from the cluster-info ConfigMap (using validated TLS) was different from the first")


def test_the_wire_comes_from_cluster_info(ca):
    key = zmq.curve_keypair()[0]
    cm = signed_cluster_info(ca, **{clusterinfo.WIRE_ENDPOINTS_KEY: "tcp://198.18.0.1:6444,tcp://198.18.0.1:6445",
                                    clusterinfo.WIRE_SERVER_KEY_KEY: key.decode()})
    assert join.wire_info(cm) == join.Wire(("tcp://198.18.0.1:6444", "tcp://198.18.0.1:6445"), key)


@pytest.mark.parametrize("endpoints, key, why", [
    (None, None, "there is no kubemu-wire-endpoints or kubemu-wire-curve-server-key key"),
    ("ipc:///tmp/a.sock", "K", "'ipc:///tmp/a.sock' is not tcp://<IP>:<port>"),
    ("tcp://198.18.0.1:0", "K", "is not tcp://<IP>:<port>"),
    ("tcp://host.example:6444", "K", "is not tcp://<IP>:<port>"),
    ("tcp://198.18.0.1:6444", "short", "not a CURVE key"),
])
def test_a_wire_that_is_missing_or_malformed_is_refused(ca, endpoints, key, why):
    extra = {}
    if endpoints:
        extra[clusterinfo.WIRE_ENDPOINTS_KEY] = endpoints
    if key:
        extra[clusterinfo.WIRE_SERVER_KEY_KEY] = zmq.curve_keypair()[0].decode() if key == "K" else key
    assert why in refused(join.wire_info, signed_cluster_info(ca, **extra))


# --- kubelet-start -----------------------------------------------------------------------------

def node(ready: str | None) -> dict:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    return {"kind": "Node", "metadata": {"name": "node-0"}, "status": {"conditions": conditions}}


def test_a_ready_node_of_the_same_name_is_never_taken_over():
    assert refused(join.check_no_ready_node, "node-0", 200, node("True"), "") == (
        'error execution phase kubelet-start: a Node with name "node-0" and status "Ready" already exists in the '
        "cluster. You must delete the existing Node or change the name of this new joining Node")
    for other in (node("False"), node("Unknown"), node(None), {"status": "x"}, {}):
        join.check_no_ready_node("node-0", 200, other, "")  # a NotReady node's name may be taken (kubeadm)
    join.check_no_ready_node("node-0", 404, {}, "not found")
    assert refused(join.check_no_ready_node, "node-0", 403, {}, 'nodes "node-0" is forbidden: no') == (
        'error execution phase kubelet-start: cannot get Node "node-0": nodes "node-0" is forbidden: no')
    assert join.node_is_ready(node("True")) and not join.node_is_ready(node("False"))


# --- TLS bootstrap ---------------------------------------------------------------------------

def test_the_csr_is_the_kubelets_and_the_approver_takes_it_for_a_bootstrapper():
    key = pki.new_key()
    csr = join.node_csr("worker-1", key)
    request = certificates.parse_request(csr)
    assert certificates.request_subject(request) == ("system:node:worker-1", ("system:nodes",))
    assert request.public_key().public_numbers() == key.public_key().public_numbers()
    spec = csr["spec"]
    assert spec["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet"
    assert spec["usages"] == ["digital signature", "client auth"]
    assert csr["metadata"] == {"generateName": "node-csr-"}
    assert certificates.validate_csr(csr) == []
    assert csrapproving.kubelet_client_error(request, spec["usages"]) is None
    sent = {**csr, "spec": {**spec, "username": "system:bootstrap:abcdef",
                            "groups": ["system:bootstrappers", "system:authenticated"]}}
    assert csrapproving.recognizers(sent) == [csrapproving.NODE_CLIENT]


def test_the_certificate_is_awaited_and_a_denial_said_in_client_gos_words(ca):
    key = pki.new_key()
    csr = join.node_csr("worker-1", key)
    assert join.issued_certificate(csr) == b""
    denied = {**csr, "status": {"conditions": [{"type": "Denied", "reason": "NoWay", "message": "not you"}]}}
    assert refused(join.issued_certificate, denied) == (
        "error execution phase kubelet-start: certificate signing request is denied, reason: NoWay, "
        "message: not you")
    failed = {**csr, "status": {"conditions": [{"type": "Failed", "reason": "Bad", "message": "m"}]}}
    assert "certificate signing request failed, reason: Bad, message: m" in refused(join.issued_certificate, failed)
    cert = pki.issue(pki.kubelet_spec("worker-1"), key.public_key(), ca, NOW)
    pem = cert.public_bytes(serialization.Encoding.PEM)
    issued = {**csr, "status": {"certificate": base64.b64encode(pem).decode()}}
    assert join.issued_certificate(issued) == pem
    join.check_issued(pem, key, ca.cert_pem, "worker-1")
    assert "does not match the request" in refused(join.check_issued, pem, pki.new_key(), ca.cert_pem, "worker-1")
    assert "does not match the request" in refused(join.check_issued, pem, key, ca.cert_pem, "worker-2")
    other_ca = pki.make_ca(pki.new_key(), NOW).public_bytes(serialization.Encoding.PEM)
    assert "does not match the request" in refused(join.check_issued, pem, key, other_ca, "worker-1")
    assert x509.load_pem_x509_certificate(pem)  # what is written is a certificate


# --- the Node that carries the key ---------------------------------------------------------------

def test_the_node_carries_the_curve_key_the_apiserver_reads():
    public = zmq.curve_keypair()[0]
    node = join.node_object("worker-1", public)
    assert node["metadata"]["name"] == "worker-1"
    assert nodekeys.key_of(node) == public.decode()
    assert nodekeys.key_of({"metadata": join.node_patch(public)["metadata"]}) == public.decode()
