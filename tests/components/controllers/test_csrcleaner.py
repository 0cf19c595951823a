"""The CSR cleaner's core: decided requests go an hour after the decision, issued ones also when
their certificate expires, pending ones after a day."""
from __future__ import annotations

import random

from cryptography.hazmat.primitives.asymmetric import ec

from components.apiserver import strategy as st
from components.controllers import DeleteObject
from components.controllers.csrapproving import NODE_CLIENT, approve
from components.controllers.csrcleaner import clean_csr
from components.controllers.csrsigning import sign
from kubemu import pki
from kubemu.api.resources import resolve
from tests.kubemu.api.test_certificates import NOW, csr_object

T = NOW.timestamp()
HOUR = 3600.0


def pending():
    csr = st.prepare_create(resolve("csr"), csr_object("c"), None, now=NOW, rand=random.Random(1))
    csr["metadata"]["uid"] = "u"
    return csr


GONE = [DeleteObject("certificates.k8s.io/v1", "CertificateSigningRequest", None, "c", "u")]


def test_a_pending_request_goes_after_a_day():
    assert clean_csr(pending(), T + HOUR) == ([], 23 * HOUR)
    assert clean_csr(pending(), T + 24 * HOUR) == (GONE, None)


def test_an_issued_request_goes_an_hour_after_approval_or_when_its_certificate_expires():
    ca = pki.Pair(pki.make_ca(key := ec.generate_private_key(ec.SECP256R1()), NOW), key)
    approved = approve(pending(), NODE_CLIENT.message, T)
    [signed] = sign(approved, ca, T, cluster_duration=1800)
    issued = {**approved, "status": signed.status}
    assert clean_csr(issued, T + 60) == ([], 1800 - 5 * 60 - 60)  # backdated 5 minutes
    assert clean_csr(issued, T + 1800) == (GONE, None)
    approved_only = approve(pending(), NODE_CLIENT.message, T)
    assert clean_csr(approved_only, T + 10 * 24 * HOUR) == ([], None)  # waits for its certificate


def test_denied_and_failed_requests_go_an_hour_after():
    for ctype in ("Denied", "Failed"):
        csr = pending()
        csr["status"] = {"conditions": [{"type": ctype, "status": "True",
                                         "lastUpdateTime": "2026-06-01T12:00:00Z"}]}
        assert clean_csr(csr, T + 60) == ([], HOUR - 60)
        assert clean_csr(csr, T + HOUR) == (GONE, None)
