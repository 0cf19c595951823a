"""The CSR approver's core: which kubelet client requests it reviews, the review it asks, and the
approval it writes."""
from __future__ import annotations

import random

from components.apiserver import strategy as st
from components.controllers.csrapproving import (NODE_CLIENT, SELF_NODE_CLIENT, access_review, approve,
                                                 recognizers)
from kubemu import pki
from kubemu.api import certificates
from kubemu.api.identity import UserInfo
from kubemu.api.resources import resolve
from tests.kubemu.api.test_certificates import NOW, csr_object, request_pem

BOOTSTRAPPER = UserInfo("system:bootstrap:abcdef", ("system:bootstrappers:kubeadm:default-node-token",
                                                    "system:bootstrappers", "system:authenticated"))


def stored(obj, user=BOOTSTRAPPER):
    return st.prepare_create(resolve("csr"), obj, None, now=NOW, rand=random.Random(1), user=user)


def test_a_bootstrap_request_for_a_node_client_certificate_is_reviewed_as_nodeclient():
    csr = stored(csr_object())
    assert recognizers(csr) == [NODE_CLIENT]
    assert access_review(csr, "nodeclient") == {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "system:bootstrap:abcdef", "groups": list(BOOTSTRAPPER.groups),
                 "resourceAttributes": {"group": "certificates.k8s.io",
                                        "resource": "certificatesigningrequests", "verb": "create",
                                        "subresource": "nodeclient"}}}


def test_a_node_renewing_its_own_certificate_is_reviewed_as_selfnodeclient_first():
    csr = stored(csr_object(), UserInfo("system:node:worker-1", ("system:nodes",)))
    assert recognizers(csr) == [SELF_NODE_CLIENT, NODE_CLIENT]


def test_the_subject_kubemu_gives_a_node_is_the_one_the_approver_recognizes():
    # one rule: the approver reads the node names from kubemu.api.identity, as pki writes them
    spec = pki.kubelet_spec("worker-1")
    csr = stored(csr_object(pem=request_pem(spec.common_name, spec.organizations)),
                 UserInfo(spec.common_name, spec.organizations))
    assert recognizers(csr) == [SELF_NODE_CLIENT, NODE_CLIENT]


def test_other_requests_are_not_auto_approved():
    for obj in (csr_object(signer=certificates.KUBE_APISERVER_CLIENT),
                csr_object(pem=request_pem("system:node:w", ("system:masters",))),
                csr_object(pem=request_pem("jane", ("system:nodes",))),
                csr_object(pem=request_pem(dns=("evil.example",))),
                csr_object(usages=("digital signature", "server auth"))):
        assert recognizers(stored(obj)) == [], obj


def test_approval_appends_the_condition_and_a_decided_request_is_left_alone():
    csr = stored(csr_object())
    approved = approve(csr, NODE_CLIENT.message, NOW.timestamp())
    assert approved["status"]["conditions"] == [{
        "type": "Approved", "status": "True", "reason": "AutoApproved",
        "message": "Auto approving kubelet client certificate after SubjectAccessReview.",
        "lastUpdateTime": "2026-06-01T12:00:00Z"}]
    assert recognizers(approved) == []
    denied = stored(csr_object())
    denied["status"] = {"conditions": [{"type": "Denied", "status": "True"}]}
    assert recognizers(denied) == []
