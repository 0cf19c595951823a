"""The CSR cleaner's core (k8s pkg/controller/certificates/cleaner): requests are garbage once
decided and done with, as kube-controller-manager's csrcleaner deletes them:

* issued (a certificate, and Approved) an hour after the approval, or once the certificate
  has expired;
* Denied or Failed an hour after that condition;
* pending (no condition) a day after it was created.

``clean_csr(csr, now) -> (actions, recheck_after)`` is pure: a uid-guarded delete when one of
these holds, else nothing and the seconds until the next one can (None: never).
"""
from __future__ import annotations

from cryptography import x509

from components.controllers import DeleteObject
from components.controllers.podutil import meta, parse_time
from kubemu.api import certificates

DECIDED_EXPIRATION = 3600.0       # approved (and issued), denied, failed: an hour
PENDING_EXPIRATION = 24 * 3600.0  # pending: a day


def _updated(csr: dict, ctype: str) -> float | None:
    for cond in certificates.conditions(csr):
        if cond.get("type") == ctype:
            return parse_time(cond.get("lastUpdateTime"))
    return None


def _deadlines(csr: dict) -> list[float]:
    """When each rule that applies to `csr` makes it garbage."""
    out = []
    pem = certificates.certificate(csr)
    if pem:
        approved = _updated(csr, certificates.APPROVED)
        if approved is not None:
            out.append(approved + DECIDED_EXPIRATION)
        try:
            out.append(x509.load_pem_x509_certificate(pem).not_valid_after_utc.timestamp())
        except ValueError:
            pass
    for ctype in (certificates.DENIED, certificates.FAILED):
        when = _updated(csr, ctype)
        if when is not None:
            out.append(when + DECIDED_EXPIRATION)
    if not certificates.conditions(csr) and not pem:
        created = parse_time(meta(csr).get("creationTimestamp"))
        if created is not None:
            out.append(created + PENDING_EXPIRATION)
    return out


def clean_csr(csr: dict | None, now: float) -> tuple[list, float | None]:
    if csr is None or meta(csr).get("deletionTimestamp"):
        return [], None
    deadlines = _deadlines(csr)
    if not deadlines:
        return [], None
    first = min(deadlines)
    if now < first:
        return [], first - now
    m = meta(csr)
    return [DeleteObject("certificates.k8s.io/v1", certificates.KIND, None, m.get("name", ""),
                         m.get("uid", ""))], None
