"""The CSR signer's core: approved kubelet client requests get a certificate from the cluster CA
for the duration kube's rules give; bad ones fail; others are left alone. Each outcome is one
UpdateStatus action of the request's status subresource, for the executor."""
from __future__ import annotations

import base64
import datetime
import random

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from components.apiserver import strategy as st
from components.controllers import UpdateStatus
from components.controllers.csrapproving import NODE_CLIENT, approve
from components.controllers.csrsigning import sign
from kubemu import pki
from kubemu.api import certificates
from kubemu.api.resources import resolve
from tests.kubemu.api.test_certificates import NOW, csr_object, request_pem

T = NOW.timestamp()
CA = pki.Pair(pki.make_ca(key := ec.generate_private_key(ec.SECP256R1()), NOW), key)


def approved(obj):
    csr = st.prepare_create(resolve("csr"), obj, None, now=NOW, rand=random.Random(1), user=None)
    return approve(csr, NODE_CLIENT.message, T)


def written(csr, actions) -> dict:
    """The request as the executor leaves it: the one action's status in place of its own."""
    [action] = actions
    return {**csr, "status": action.status}


def signed(csr, **kw) -> dict:
    return written(csr, sign(csr, CA, T, **kw))


def issued(csr) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(csr["status"]["certificate"]))


def test_an_approved_kubelet_client_request_is_signed_by_the_cluster_ca():
    out = signed(approved(csr_object()))
    cert = issued(out)
    assert pki.subject_of(cert) == ("system:node:worker-1", ("system:nodes",))
    assert pki.signed_by(cert, CA.cert)
    assert cert.not_valid_before_utc == NOW - datetime.timedelta(minutes=5)
    assert cert.not_valid_after_utc == NOW + datetime.timedelta(days=365)
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usages) == [x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
    assert sign(out, CA, T) == []  # issued once


def test_expiration_seconds_shortens_the_certificate_and_short_ones_are_not_stretched():
    cert = issued(signed(approved(csr_object(expirationSeconds=3600))))
    assert cert.not_valid_after_utc - cert.not_valid_before_utc == datetime.timedelta(hours=1)
    cert = issued(signed(approved(csr_object(expirationSeconds=30 * 24 * 3600))))
    assert cert.not_valid_after_utc == NOW + datetime.timedelta(days=30)


def test_pending_denied_and_foreign_requests_are_left_alone():
    pending = st.prepare_create(resolve("csr"), csr_object(), None, now=NOW, rand=random.Random(1))
    assert sign(pending, CA, T) == []
    assert sign(approved(csr_object(signer="example.com/mine")), CA, T) == []


def test_an_approved_request_the_signer_must_not_sign_fails():
    out = signed(approved(csr_object(pem=request_pem("jane", ("system:nodes",)))))
    [_, failed] = out["status"]["conditions"]
    assert failed["type"] == certificates.FAILED and failed["reason"] == "SignerValidationFailure"
    assert failed["message"] == "subject common name does not begin with system:node:"
    assert "certificate" not in out["status"] and sign(out, CA, T) == []


def test_the_certificate_is_one_status_write_that_keeps_the_approval():
    csr = approved(csr_object())
    [action] = sign(csr, CA, T)
    assert isinstance(action, UpdateStatus)
    assert (action.kind, action.namespace, action.name) == (certificates.KIND, None,
                                                           csr["metadata"]["name"])
    assert action.status["conditions"] == csr["status"]["conditions"]
    assert set(action.status) == {"conditions", "certificate"}
    assert "certificate" not in (csr.get("status") or {})  # the cached request is not touched
