"""The CSR signer's core (k8s pkg/controller/certificates/signer): an approved request for a
signer this controller runs gets its certificate from the cluster CA; one that signer must not
sign gets a Failed condition instead.

Signers: kubernetes.io/kube-apiserver-client-kubelet (kubelet client certificates, checked as
the approver checks them) and kubernetes.io/kube-apiserver-client (any client certificate).

Duration (kube-controller-manager's --cluster-signing-duration, default one year): the
request's spec.expirationSeconds when shorter (at least 600 s), never past the CA's own expiry.
The certificate is backdated 5 minutes for clock skew; a short-lived one (under 8 hours) ends
that much earlier, so it is never valid for longer than asked.

``sign(csr, ca, now, duration) -> list`` is pure: the request, the CA (pki.Pair) and the
time in; out, the actions for the controller-manager's executor: one UpdateStatus of the
request's status subresource (the certificate, or the Failed condition), or none when there is
nothing to do.
"""
from __future__ import annotations

import base64
import datetime

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from components.controllers import UpdateStatus
from components.controllers.csrapproving import kubelet_client_error
from kubemu.api import certificates
from kubemu.api.times import format_time

DEFAULT_DURATION = 365 * 24 * 3600.0      # --cluster-signing-duration 8760h
BACKDATE = datetime.timedelta(minutes=5)
SHORT = datetime.timedelta(hours=8)
SIGNERS = (certificates.KUBE_APISERVER_CLIENT_KUBELET, certificates.KUBE_APISERVER_CLIENT)
FAILED_REASON = "SignerValidationFailure"
_EXT_USAGES = {"client auth": ExtendedKeyUsageOID.CLIENT_AUTH,
               "server auth": ExtendedKeyUsageOID.SERVER_AUTH,
               "code signing": ExtendedKeyUsageOID.CODE_SIGNING,
               "email protection": ExtendedKeyUsageOID.EMAIL_PROTECTION,
               "timestamping": ExtendedKeyUsageOID.TIME_STAMPING,
               "ocsp signing": ExtendedKeyUsageOID.OCSP_SIGNING}
_KEY_USAGES = {"digital signature": "digital_signature", "signing": "digital_signature",
               "content commitment": "content_commitment", "key encipherment": "key_encipherment",
               "key agreement": "key_agreement", "data encipherment": "data_encipherment",
               "cert sign": "key_cert_sign", "crl sign": "crl_sign"}


def _signable(csr: dict) -> bool:
    spec = csr.get("spec") or {}
    return (certificates.has_condition(csr, certificates.APPROVED)
            and not certificates.has_condition(csr, certificates.DENIED)
            and not certificates.has_condition(csr, certificates.FAILED)
            and not certificates.certificate(csr) and spec.get("signerName") in SIGNERS)


def request_error(csr: dict, req: x509.CertificateSigningRequest) -> str | None:
    """Why this signer must not sign `req` (isRequestForSignerFn)."""
    spec = csr.get("spec") or {}
    usages = spec.get("usages") or []
    if spec.get("signerName") == certificates.KUBE_APISERVER_CLIENT_KUBELET:
        return kubelet_client_error(req, usages)
    if "client auth" not in usages:
        return "invalid usage for client certificate: missing client auth"
    return None


def duration(csr: dict, cluster_duration: float) -> float:
    seconds = (csr.get("spec") or {}).get("expirationSeconds")
    if isinstance(seconds, int) and not isinstance(seconds, bool):
        return min(cluster_duration, max(seconds, certificates.MIN_EXPIRATION_SECONDS))
    return cluster_duration


def issue(req: x509.CertificateSigningRequest, usages: list[str], ca, now: datetime.datetime,
          ttl: datetime.timedelta) -> x509.Certificate:
    """The certificate for `req`, signed by `ca` (a pki.Pair)."""
    not_before = now - BACKDATE
    not_after = not_before + ttl if ttl < SHORT else now + ttl
    not_after = min(not_after, ca.cert.not_valid_after_utc)
    flags = {v: False for v in ("digital_signature", "content_commitment", "key_encipherment",
                                "data_encipherment", "key_agreement", "key_cert_sign", "crl_sign")}
    for usage in usages:
        if usage in _KEY_USAGES:
            flags[_KEY_USAGES[usage]] = True
    builder = (x509.CertificateBuilder()
               .subject_name(req.subject).issuer_name(ca.cert.subject)
               .public_key(req.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_before).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(encipher_only=False, decipher_only=False, **flags),
                              critical=True)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                              critical=False))
    ext = [_EXT_USAGES[u] for u in usages if u in _EXT_USAGES]
    if ext:
        builder = builder.add_extension(x509.ExtendedKeyUsage(ext), critical=False)
    try:
        sans = req.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        builder = builder.add_extension(sans, critical=False)
    except x509.ExtensionNotFound:
        pass
    return builder.sign(ca.key, hashes.SHA256())


def sign(csr: dict, ca, now: float, cluster_duration: float = DEFAULT_DURATION) -> list[UpdateStatus]:
    if not _signable(csr):
        return []
    status = dict(csr.get("status") or {})
    try:
        req = certificates.parse_request(csr)
        problem = request_error(csr, req)
    except ValueError as err:
        req, problem = None, str(err)
    if problem is not None:
        status["conditions"] = [*(status.get("conditions") or []),
                                {"type": certificates.FAILED, "status": "True", "reason": FAILED_REASON,
                                 "message": problem, "lastUpdateTime": format_time(now)}]
    else:
        moment = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
        ttl = datetime.timedelta(seconds=duration(csr, cluster_duration))
        cert = issue(req, (csr.get("spec") or {}).get("usages") or [], ca, moment, ttl)
        status["certificate"] = base64.b64encode(cert.public_bytes(serialization.Encoding.PEM)).decode()
    return [UpdateStatus(certificates.KIND, None, (csr.get("metadata") or {}).get("name", ""), status)]
