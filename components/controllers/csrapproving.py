"""The CSR approver's core (k8s pkg/controller/certificates/approver/sarapprove.go): kubelet client
certificate requests are approved when their requester may ask for them, as a
SubjectAccessReview decides.

Two recognizers, tried in order, as in Kubernetes:

* selfnodeclient: a kubelet client request (signer kube-apiserver-client-kubelet, subject
  O=system:nodes, CN=system:node:<name>, client usages only, no SANs) whose CN is the
  requester's own user name (a node renewing its certificate); the requester needs `create`
  on certificatesigningrequests/selfnodeclient;
* nodeclient: any kubelet client request (a bootstrap token asking for a new node's
  certificate); the requester needs `create` on certificatesigningrequests/nodeclient.

Pure: ``recognizers(csr)`` says which reviews to ask (none for a request already approved,
denied or issued, or not a kubelet client one), ``access_review(csr, subresource)`` is the
review, ``approve(csr, message, now)`` the request with its Approved condition (for the
approval subresource).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from cryptography import x509

from kubemu.api import certificates
from kubemu.api.identity import NODE_PREFIX, NODES
from kubemu.api.times import format_time

# ValidateKubeletClientCSR: what a kubelet client certificate may be used for; client auth is required
KUBELET_CLIENT_USAGES = frozenset({"digital signature", "key encipherment", "client auth"})
REASON = "AutoApproved"


@dataclass(frozen=True)
class Recognizer:
    subresource: str
    message: str


SELF_NODE_CLIENT = Recognizer("selfnodeclient",
                              "Auto approving self kubelet client certificate after SubjectAccessReview.")
NODE_CLIENT = Recognizer("nodeclient", "Auto approving kubelet client certificate after SubjectAccessReview.")


def kubelet_client_error(req: x509.CertificateSigningRequest, usages) -> str | None:
    """Why `req` is not a kubelet client certificate request (None when it is one)."""
    cn, orgs = certificates.request_subject(req)
    if list(orgs) != [NODES]:
        return f"subject organization is not {NODES}"
    try:
        sans = req.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = []
    for kind, what in ((x509.DNSName, "DNS"), (x509.RFC822Name, "Email"),
                       (x509.IPAddress, "IP"), (x509.UniformResourceIdentifier, "URI")):
        if sans and sans.get_values_for_type(kind):
            return f"{what} subjectAltNames are not allowed"
    if not cn.startswith(NODE_PREFIX):
        return f"subject common name does not begin with {NODE_PREFIX}"
    given = set(usages or [])
    if not given <= KUBELET_CLIENT_USAGES or "client auth" not in given:
        return (f"usages did not match [{', '.join(sorted(KUBELET_CLIENT_USAGES))}]: "
                f"[{', '.join(usages or [])}]")
    return None


def _pending(csr: dict) -> bool:
    return not (certificates.certificate(csr) or certificates.has_condition(csr, certificates.APPROVED)
                or certificates.has_condition(csr, certificates.DENIED))


def recognizers(csr: dict) -> list[Recognizer]:
    """The permissions to check, in order; [] when there is nothing to approve."""
    spec = csr.get("spec") or {}
    if not _pending(csr) or spec.get("signerName") != certificates.KUBE_APISERVER_CLIENT_KUBELET:
        return []
    try:
        req = certificates.parse_request(csr)
    except ValueError:
        return []
    if kubelet_client_error(req, spec.get("usages")) is not None:
        return []
    found = [NODE_CLIENT]
    if certificates.request_subject(req)[0] == spec.get("username"):
        found.insert(0, SELF_NODE_CLIENT)
    return found


def access_review(csr: dict, subresource: str) -> dict:
    """May the requester create certificatesigningrequests/<subresource>?"""
    spec = csr.get("spec") or {}
    review_spec: dict = {"user": spec.get("username", ""), "groups": list(spec.get("groups") or []),
                         "resourceAttributes": {"group": "certificates.k8s.io",
                                                "resource": "certificatesigningrequests",
                                                "verb": "create", "subresource": subresource}}
    if spec.get("uid"):
        review_spec["uid"] = spec["uid"]
    if spec.get("extra"):
        review_spec["extra"] = spec["extra"]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": review_spec}


def approve(csr: dict, message: str, now: float) -> dict:
    out = copy.deepcopy(csr)
    status = out.setdefault("status", {})
    status["conditions"] = [*(status.get("conditions") or []),
                            {"type": certificates.APPROVED, "status": "True", "reason": REASON,
                             "message": message, "lastUpdateTime": format_time(now)}]
    return out
