"""CertificateSigningRequest (certificates.k8s.io/v1): defaulting, validation and the registry
strategy, with objects.py's contract (DEFAULTERS, VALIDATORS by kind), as kube-apiserver has them
(pkg/apis/certificates/validation, pkg/registry/certificates/certificates/strategy.go).

* spec.request is a base64 PEM `CERTIFICATE REQUEST` whose signature checks; spec.usages are
  required, known and unique; spec.signerName is `<domain>/<path>`; spec.expirationSeconds,
  when set, is at least 600.
* status.conditions: type and status required, one of each type; Approved, Denied and Failed
  may only be True; Approved and Denied exclude each other. status.certificate, when set, is
  one or more PEM CERTIFICATE blocks.
* create (prepare_for_create): spec.username/uid/groups/extra are the caller's, whatever the
  request said; the status starts empty (no one creates an approved request). The
  CertificateSubjectRestriction admission: no kube-apiserver-client certificate for
  system:masters.
* the CertificateApproval and CertificateSigning admissions (signer_permission): an update
  through `approval` needs `approve`, one that sets the certificate through `status` needs
  `sign`, on the resource `signers` (certificates.k8s.io) named by spec.signerName or by
  `<domain>/*` (signer_attributes).
* update (prepare_for_update): the object itself changes metadata only; the `status`
  subresource changes the status but keeps the Approved/Denied conditions; the `approval`
  subresource changes the conditions but keeps the certificate. No update removes an
  Approved, Denied or Failed condition, only approval adds or changes Approved/Denied, and
  a certificate once issued is never replaced (update_errors).
"""
from __future__ import annotations

import copy
from typing import Any

from cryptography import x509
from cryptography.x509.oid import NameOID

from .configobjects import decode_base64
from .fielderrors import FieldError, child, duplicate, forbidden, index, not_supported, \
    required
from .authz import Attributes
from .identity import SYSTEM_MASTERS, UserInfo
from .meta import Checker, register, table
from .pod import LIST, OBJ, STR, STRS, dns1123_label_errors, dns1123_subdomain_errors

KIND = "CertificateSigningRequest"
APPROVED, DENIED, FAILED = "Approved", "Denied", "Failed"
APPROVAL_TYPES = (APPROVED, DENIED)
TRUE_ONLY_TYPES = (APPROVED, DENIED, FAILED)
STATUS_VALUES = ("False", "True", "Unknown")
MIN_EXPIRATION_SECONDS = 600

# the well-known signers (certificates/v1)
KUBE_APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
KUBE_APISERVER_CLIENT_KUBELET = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
LEGACY_UNKNOWN = "kubernetes.io/legacy-unknown"

# KeyUsage values, as x509 names them in the API
USAGES = ("signing", "digital signature", "content commitment", "key encipherment",
          "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only",
          "decipher only", "any", "server auth", "client auth", "code signing",
          "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user",
          "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc")

register(
    CertificateSigningRequest=table(
        "apiVersion kind metadata spec status",
        types={"apiVersion": "string", "kind": "string", "metadata": "ObjectMeta",
               "spec": "CertificateSigningRequestSpec",
               "status": "CertificateSigningRequestStatus"}),
    CertificateSigningRequestSpec=table(
        "request signerName expirationSeconds usages username uid groups extra",
        {"request": STR, "signerName": STR, "usages": STRS, "username": STR, "uid": STR,
         "groups": STRS, "extra": OBJ},
        types="""request:string signerName:string expirationSeconds:integer usages:[]string
        username:string uid:string groups:[]string extra:map[string][]string"""),
    CertificateSigningRequestStatus=table(
        "conditions certificate", {"conditions": LIST, "certificate": STR},
        types="conditions:[]CertificateSigningRequestCondition certificate:string"),
    CertificateSigningRequestCondition=table(
        "type status reason message lastUpdateTime lastTransitionTime",
        {"type": STR, "status": STR, "reason": STR, "message": STR},
        types="""type:string status:string reason:string message:string lastUpdateTime:Time
        lastTransitionTime:Time"""),
)


# --- reading a request ------------------------------------------------------------------------

def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def parse_request(csr: dict) -> x509.CertificateSigningRequest:
    """The x509 request of spec.request (ValueError in Kubernetes' words if it is not one)."""
    text = _dict(csr.get("spec")).get("request")
    if not isinstance(text, str) or not text:
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    pem = decode_base64(text)
    if b"-----BEGIN CERTIFICATE REQUEST-----" not in pem:
        raise ValueError("PEM block type must be CERTIFICATE REQUEST")
    return x509.load_pem_x509_csr(pem)


def conditions(csr: dict) -> list[dict]:
    return [c for c in _dict(csr.get("status")).get("conditions") or [] if isinstance(c, dict)]


def has_condition(csr: dict, ctype: str) -> bool:
    return any(c.get("type") == ctype for c in conditions(csr))


def certificate(csr: dict) -> bytes:
    """status.certificate decoded (b"" while none is issued)."""
    text = _dict(csr.get("status")).get("certificate")
    if not isinstance(text, str) or not text:
        return b""
    try:
        return decode_base64(text)
    except ValueError:
        return b""


def request_subject(req: x509.CertificateSigningRequest) -> tuple[str, tuple[str, ...]]:
    cn = [a.value for a in req.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = tuple(a.value for a in req.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return (cn[0] if cn else "", orgs)


def display_condition(csr: dict) -> str:
    """kubectl's CONDITION column: the condition types, comma-joined, `Issued` added once a
    certificate is there; `Pending` when there is neither."""
    types = [c.get("type", "") for c in conditions(csr)]
    if certificate(csr):
        types.append("Issued")
    return ",".join(types) if types else "Pending"


# --- defaulting and validation ----------------------------------------------------------------

def default_csr(obj: Any) -> Any:
    """A condition without a status is True (SetDefaults_CertificateSigningRequestCondition)."""
    from .objects import _defaulted  # objects.py imports this module for its tables

    def fill(csr: dict) -> None:
        for cond in conditions(csr):
            if cond.get("status") in (None, ""):
                cond["status"] = "True"
    return _defaulted(obj, fill, namespaced=False)


def _signer_name(c: Checker, value: Any, path: str) -> None:
    """ValidateSignerName: `<domain with two or more labels>/<path of subdomain labels>`."""
    name = c.string(value, path)
    if name is None or name == "":
        if name is not None or value is None:
            c.add(required(path))
        return
    segments = name.split("/")
    if len(segments) != 2:
        c.invalid(path, name, "must be a fully qualified domain and path of the form "
                              "'example.com/signer-name'")
        return
    domain, rest = segments
    if len(domain) > 253:
        c.invalid(path, domain, "must be no more than 253 characters")
    labels = domain.split(".")
    for label in labels:
        errs = dns1123_label_errors(label)
        if errs:
            for err in errs:
                c.invalid(path, domain, f'validating label "{label}": {err}')
            break
    if len(labels) < 2:
        c.invalid(path, domain, "should be a domain with at least two segments separated by dots")
    for label in rest.split("."):
        errs = dns1123_subdomain_errors(label.lower())
        if errs:
            for err in errs:
                c.invalid(path, rest, f'validating label "{label}": {err}')
            break


def _certificate_error(data: bytes) -> str | None:
    """validateCertificate: one or more CERTIFICATE PEM blocks, without headers."""
    if not data:
        return None
    blocks = 0
    text = data.decode("latin-1")
    while "-----BEGIN " in text:
        head, _, after = text.partition("-----BEGIN ")
        kind, _, after = after.partition("-----")
        if kind != "CERTIFICATE":
            return f'only CERTIFICATE PEM blocks are allowed, found "{kind}"'
        body, sep, text = after.partition("-----END CERTIFICATE-----")
        if not sep:
            break
        if ":" in body:
            return "no PEM block headers are permitted"
        try:
            x509.load_pem_x509_certificate(
                f"-----BEGIN CERTIFICATE-----{body}-----END CERTIFICATE-----".encode("latin-1"))
        except ValueError as err:
            return str(err)
        blocks += 1
    return None if blocks else "must contain at least one CERTIFICATE PEM block"


def _conditions(c: Checker, csr: dict) -> None:
    path = "status.conditions"
    items = c.array(_dict(csr.get("status")).get("conditions"), path) or []
    seen: set[str] = set()
    approved = denied = False
    for c_path, cond in c.each_obj(items, path, "CertificateSigningRequestCondition"):
        ctype = cond.get("type")
        if ctype in (None, ""):
            c.add(required(child(c_path, "type")))
        status = cond.get("status")
        allowed = ("True",) if ctype in TRUE_ONLY_TYPES else STATUS_VALUES
        if status in (None, ""):
            c.add(required(child(c_path, "status")))
        elif status not in allowed:
            c.add(not_supported(child(c_path, "status"), status, allowed))
        if ctype == APPROVED:
            approved = True
            if denied:
                c.invalid(child(c_path, "type"), ctype,
                          "Approved and Denied conditions are mutually exclusive")
        elif ctype == DENIED:
            denied = True
            if approved:
                c.invalid(child(c_path, "type"), ctype,
                          "Approved and Denied conditions are mutually exclusive")
        if isinstance(ctype, str):
            if ctype in seen:
                c.add(duplicate(child(c_path, "type"), ctype))
            seen.add(ctype)
        for field in ("lastUpdateTime", "lastTransitionTime"):
            c.timestamp(cond.get(field), child(c_path, field))


def validate_csr(obj: Any, *, strict: bool = True) -> list[FieldError]:
    from .objects import _validate  # see default_csr

    def body(c: Checker, csr: dict) -> None:
        spec = c.obj(csr.get("spec"), "spec", "CertificateSigningRequestSpec") or {}
        try:
            req = parse_request(csr)
            if not req.is_signature_valid:
                raise ValueError("x509: ECDSA verification failure")
        except ValueError as err:
            c.invalid("spec.request", spec.get("request"), str(err))
        usages = spec.get("usages")
        if not usages:
            c.add(required("spec.usages"))
        seen: set = set()
        for i, usage in enumerate(usages if isinstance(usages, list) else []):
            if usage not in USAGES:
                c.add(not_supported(index("spec.usages", i), usage, sorted(USAGES)))
            if usage in seen:
                c.add(duplicate(index("spec.usages", i), usage))
            seen.add(usage)
        if spec.get("signerName") == LEGACY_UNKNOWN:
            c.invalid("spec.signerName", LEGACY_UNKNOWN,
                      "the legacy signerName is not allowed via this API version")
        else:
            _signer_name(c, spec.get("signerName"), "spec.signerName")
        seconds = c.integer(spec.get("expirationSeconds"), "spec.expirationSeconds")
        if seconds is not None and seconds < MIN_EXPIRATION_SECONDS:
            c.invalid("spec.expirationSeconds", seconds,
                      "may not specify a duration less than 600 seconds (10 minutes)")
        status = c.obj(csr.get("status"), "status", "CertificateSigningRequestStatus")
        _conditions(c, csr)
        text = (status or {}).get("certificate")
        if isinstance(text, str) and text:
            try:
                problem = _certificate_error(decode_base64(text))
            except ValueError as err:
                problem = str(err)
            if problem:
                c.invalid("status.certificate", "<certificate data>", problem)
    return _validate(obj, KIND, strict, body, name_rule=lambda name: [])


def _of_type(csr: dict, ctype: str) -> list[dict]:
    return [c for c in conditions(csr) if c.get("type") == ctype]


def update_errors(old: dict, new: dict, subresource: str) -> list[FieldError]:
    """What an update through `subresource` ("", "status" or "approval") may not do
    (validateCertificateSigningRequestUpdate's checks beyond the object's own)."""
    errors = []
    for ctype in TRUE_ONLY_TYPES:
        if len(_of_type(new, ctype)) < len(_of_type(old, ctype)):
            errors.append(forbidden("status.conditions",
                                    f'updates may not remove a condition of type "{ctype}"'))
    if subresource != "approval":
        for ctype in APPROVAL_TYPES:
            before, after = _of_type(old, ctype), _of_type(new, ctype)
            if len(after) > len(before):
                errors.append(forbidden("status.conditions",
                                        f'updates may not add a condition of type "{ctype}"'))
            elif len(after) == len(before) and after != before:
                errors.append(forbidden("status.conditions",
                                        f'updates may not modify a condition of type "{ctype}"'))
    before, after = certificate(old), certificate(new)
    if before != after:
        if subresource != "status":
            errors.append(forbidden("status.certificate", "updates may not set certificate content"))
        elif before:
            errors.append(forbidden("status.certificate",
                                    "updates may not modify existing certificate content"))
    return errors


# --- the registry strategy --------------------------------------------------------------------

def prepare_for_create(csr: dict, user: UserInfo | None) -> None:
    """In place: the requester is the caller; the status is empty."""
    spec = csr.get("spec")
    if not isinstance(spec, dict):
        return
    spec = csr["spec"] = dict(spec)
    for field in ("username", "uid", "groups", "extra"):
        spec.pop(field, None)
    if user is not None:
        spec["username"] = user.name
        if user.uid:
            spec["uid"] = user.uid
        if user.groups:
            spec["groups"] = list(user.groups)
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
    csr["status"] = {}


def subject_restriction_error(csr: dict) -> str | None:
    """CertificateSubjectRestriction admission: the kube-apiserver-client signer never signs a
    request in the group system:masters (that would make a cluster admin)."""
    if _dict(csr.get("spec")).get("signerName") != KUBE_APISERVER_CLIENT:
        return None
    try:
        _, orgs = request_subject(parse_request(csr))
    except ValueError:
        return None  # validation reports it
    if SYSTEM_MASTERS in orgs:
        return (f"use of {KUBE_APISERVER_CLIENT} signer with {SYSTEM_MASTERS} group is not allowed")
    return None


def signer_permission(old: dict, new: dict, subresource: str) -> tuple[str, str] | None:
    """(verb, signerName) the caller must be allowed on `signers` for this update, or None."""
    signer = _dict(new.get("spec")).get("signerName", "")
    if subresource == "approval":
        return "approve", signer
    if subresource == "status" and certificate(old) != certificate(new):
        return "sign", signer
    return None


def signer_attributes(user: UserInfo, verb: str, signer: str) -> tuple[Attributes, ...]:
    """IsAuthorizedForSignerName's questions: the signer by name, then its domain's wildcard."""
    names = (signer, signer.split("/", 1)[0] + "/*") if "/" in signer else (signer,)
    return tuple(Attributes(user=user, verb=verb, api_group="certificates.k8s.io", api_version="*",
                            resource="signers", name=name) for name in names)


def _preserve(new_status: dict, old: dict, ctype: str) -> None:
    """preserveConditionInstances: the old conditions of `ctype` in the new ones' places, when
    there are as many of them (otherwise validation refuses the difference)."""
    olds = _of_type(old, ctype)
    slots = [i for i, c in enumerate(new_status.get("conditions") or [])
             if isinstance(c, dict) and c.get("type") == ctype]
    if len(olds) == len(slots):
        for i, cond in zip(slots, olds):
            new_status["conditions"][i] = copy.deepcopy(cond)


def _timestamps(new_status: dict, old: dict, now: str) -> None:
    """populateConditionTimestamps: lastUpdateTime now when unset; lastTransitionTime kept from
    the old condition of the same type and status, else now."""
    previous = {c.get("type"): c for c in conditions(old)}
    for cond in new_status.get("conditions") or []:
        if not isinstance(cond, dict):
            continue
        if not cond.get("lastUpdateTime"):
            cond["lastUpdateTime"] = now
        if not cond.get("lastTransitionTime"):
            before = previous.get(cond.get("type"))
            same = before is not None and before.get("status") == (cond.get("status") or "True")
            cond["lastTransitionTime"] = before.get("lastTransitionTime") if same and \
                before.get("lastTransitionTime") else now


def prepare_for_update(old: dict, new: dict, subresource: str, now: str) -> dict:
    """`new` as the update through `subresource` may write it (a copy)."""
    obj = dict(new)
    if "spec" in old:
        obj["spec"] = copy.deepcopy(old["spec"])
    old_status = _dict(old.get("status"))
    if subresource == "":
        if "status" in old:
            obj["status"] = copy.deepcopy(old["status"])
        else:
            obj.pop("status", None)
        return obj
    status = copy.deepcopy(new.get("status")) if isinstance(new.get("status"), dict) else {}
    if isinstance(status.get("conditions"), list):
        status["conditions"] = [dict(c) if isinstance(c, dict) else c for c in status["conditions"]]
    if subresource == "status":
        for ctype in APPROVAL_TYPES:
            _preserve(status, old, ctype)
    else:  # approval: the conditions only
        status.pop("certificate", None)
        if old_status.get("certificate"):
            status["certificate"] = old_status["certificate"]
    _timestamps(status, old, now)
    obj["status"] = status
    return obj


DEFAULTERS = {KIND: default_csr}
VALIDATORS = {KIND: validate_csr}
UPDATE_VALIDATORS: dict = {}

__all__ = ["KIND", "APPROVED", "DENIED", "FAILED", "KUBE_APISERVER_CLIENT",
           "KUBE_APISERVER_CLIENT_KUBELET", "KUBELET_SERVING", "USAGES", "parse_request",
           "conditions", "has_condition", "certificate", "request_subject", "display_condition",
           "default_csr", "validate_csr", "update_errors", "prepare_for_create",
           "subject_restriction_error", "signer_permission", "signer_attributes", "prepare_for_update"]
