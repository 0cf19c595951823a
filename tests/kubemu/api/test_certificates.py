"""CertificateSigningRequest: validation and the registry strategy (create records the caller,
the status and approval subresources each change only their part)."""
from __future__ import annotations

import base64
import datetime
import random

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from components.apiserver import strategy as st
from kubemu import pki
from kubemu.api import certificates
from kubemu.api.identity import UserInfo
from kubemu.api.objects import default_object, validate_object
from kubemu.api.resources import resolve
from kubemu.wire import Forbidden, Invalid

NOW = datetime.datetime(2026, 6, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)
R = resolve("csr")
BOOTSTRAPPER = UserInfo("system:bootstrap:abcdef", ("system:bootstrappers", "system:authenticated"))


def request_pem(cn: str = "system:node:worker-1", orgs=("system:nodes",), key=None,
                dns: tuple[str, ...] = ()) -> bytes:
    key = key or ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs] + \
        [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name(attrs))
    if dns:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]),
                                        critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def csr_object(name: str = "node-csr-1", *, pem: bytes | None = None,
               signer: str = certificates.KUBE_APISERVER_CLIENT_KUBELET,
               usages=("digital signature", "client auth"), **spec) -> dict:
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {"request": base64.b64encode(pem or request_pem()).decode(),
                     "signerName": signer, "usages": list(usages), **spec}}


def messages(obj) -> list[str]:
    return [str(e) for e in validate_object(default_object(obj))]


def created(obj, user=BOOTSTRAPPER) -> dict:
    return st.prepare_create(R, obj, None, now=NOW, rand=random.Random(1), user=user)


def test_a_kubelet_client_request_is_valid():
    assert messages(csr_object()) == []


@pytest.mark.parametrize("change, expected", [
    (lambda c: c["spec"].update(request=base64.b64encode(b"junk").decode()),
     "spec.request: Invalid value: ")
    , (lambda c: c["spec"].update(usages=[]), "spec.usages: Required value")
    , (lambda c: c["spec"].update(usages=["client auth", "client auth"]),
       'spec.usages[1]: Duplicate value: "client auth"')
    , (lambda c: c["spec"].update(usages=["teleport"]), 'spec.usages[0]: Unsupported value: "teleport"')
    , (lambda c: c["spec"].pop("signerName"), "spec.signerName: Required value")
    , (lambda c: c["spec"].update(signerName="example"),
       "must be a fully qualified domain and path of the form 'example.com/signer-name'")
    , (lambda c: c["spec"].update(signerName="example/x"),
       "should be a domain with at least two segments separated by dots")
    , (lambda c: c["spec"].update(signerName=certificates.LEGACY_UNKNOWN),
       "the legacy signerName is not allowed via this API version")
    , (lambda c: c["spec"].update(expirationSeconds=599),
       "spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 seconds")
    , (lambda c: c.update(status={"conditions": [{"type": "Approved", "status": "False"}]}),
       'status.conditions[0].status: Unsupported value: "False"')
    , (lambda c: c.update(status={"conditions": [{"type": "Approved"}, {"type": "Denied"}]}),
       "Approved and Denied conditions are mutually exclusive")
    , (lambda c: c.update(status={"certificate": base64.b64encode(b"nope").decode()}),
       "status.certificate: Invalid value: \"<certificate data>\": must contain at least one "
       "CERTIFICATE PEM block")
])
def test_invalid_requests_are_refused_with_kubernetes_messages(change, expected):
    obj = csr_object()
    change(obj)
    assert any(expected in m for m in messages(obj)), messages(obj)


def test_a_request_whose_signature_does_not_check_is_refused():
    pem = request_pem()
    der = x509.load_pem_x509_csr(pem).public_bytes(serialization.Encoding.DER)
    tampered = der[:-3] + bytes([der[-3] ^ 1]) + der[-2:]
    bad = x509.load_der_x509_csr(tampered).public_bytes(serialization.Encoding.PEM)
    assert any(m.startswith("spec.request: Invalid value") for m in messages(csr_object(pem=bad)))


def test_create_records_the_caller_and_starts_with_no_status():
    obj = csr_object()
    obj["spec"].update(username="system:admin", groups=["system:masters"])
    obj["status"] = {"conditions": [{"type": "Approved", "status": "True"}]}
    out = created(obj)
    assert out["spec"]["username"] == "system:bootstrap:abcdef"
    assert out["spec"]["groups"] == ["system:bootstrappers", "system:authenticated"]
    assert out["status"] == {}


def test_no_client_certificate_for_system_masters():
    obj = csr_object(pem=request_pem("root", ("system:masters",)),
                     signer=certificates.KUBE_APISERVER_CLIENT)
    with pytest.raises(Forbidden, match="use of kubernetes.io/kube-apiserver-client signer with "
                                        "system:masters group is not allowed"):
        created(obj)


def _update(old, new, subresource):
    old = {**old, "metadata": {**old["metadata"], "resourceVersion": "5"}}
    return st.prepare_update(R, old, 5, new, status=subresource == "status",
                             approval=subresource == "approval", now=NOW)


APPROVED = {"type": "Approved", "status": "True", "reason": "KubectlApprove", "message": "ok"}


def test_approval_sets_conditions_and_stamps_them_but_never_the_certificate():
    old = created(csr_object())
    new = {**old, "status": {"conditions": [dict(APPROVED)], "certificate": "c2lnbmVk"}}
    out = _update(old, new, "approval").obj
    assert out["status"]["conditions"] == [{**APPROVED, "lastUpdateTime": "2026-06-01T12:00:00Z",
                                            "lastTransitionTime": "2026-06-01T12:00:00Z"}]
    assert "certificate" not in out["status"] and out["spec"] == old["spec"]


def test_the_status_subresource_may_not_approve():
    old = created(csr_object())
    with pytest.raises(Invalid, match='updates may not add a condition of type "Approved"'):
        _update(old, {**old, "status": {"conditions": [dict(APPROVED)]}}, "status")


def test_the_object_itself_changes_metadata_only():
    old = created(csr_object())
    new = {**old, "metadata": {**old["metadata"], "labels": {"a": "b"}},
           "spec": {**old["spec"], "usages": ["server auth"]},
           "status": {"conditions": [dict(APPROVED)]}}
    out = _update(old, new, "").obj
    assert out["metadata"]["labels"] == {"a": "b"} and out["spec"] == old["spec"] and out["status"] == {}


def _issued(old):
    ca = pki.Pair(*_ca())
    cert = pki.issue(pki.kubelet_spec("worker-1"), ec.generate_private_key(ec.SECP256R1()).public_key(),
                     ca, NOW)
    approved = _update(old, {**old, "status": {"conditions": [dict(APPROVED)]}}, "approval").obj
    pem = base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()
    return approved, pem


def _ca():
    key = ec.generate_private_key(ec.SECP256R1())
    return pki.make_ca(key, NOW), key


def test_the_status_subresource_sets_the_certificate_once_and_keeps_the_approval():
    approved, pem = _issued(created(csr_object()))
    out = _update(approved, {**approved, "status": {"certificate": pem, "conditions": [
        dict(c) for c in approved["status"]["conditions"]]}}, "status").obj
    assert out["status"]["certificate"] == pem
    with pytest.raises(Invalid, match="updates may not modify existing certificate content"):
        _update(out, {**out, "status": {**out["status"], "certificate": _issued(out)[1]}}, "status")
    with pytest.raises(Invalid, match='updates may not remove a condition of type "Approved"'):
        _update(out, {**out, "status": {"certificate": pem}}, "approval")


def test_display_condition_is_kubectls_column():
    old = created(csr_object())
    assert certificates.display_condition(old) == "Pending"
    approved, pem = _issued(old)
    assert certificates.display_condition(approved) == "Approved"
    approved["status"]["certificate"] = pem
    assert certificates.display_condition(approved) == "Approved,Issued"
