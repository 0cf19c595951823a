"""The bootstrap signer's core: cluster-info carries exactly one JWS per unexpired signing token."""
from __future__ import annotations

import base64

import pytest

from components.controllers import UpdateObject
from components.controllers.bootstrapsigner import sign_cluster_info
from kubemu import bootstraptoken as bt
from kubemu import clusterinfo

NOW = 1_780_000_000.0
CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def token(text, **kw):
    return bt.secret_for(bt.BootstrapToken.new(text, NOW, **kw))


def cm(**extra):
    c = clusterinfo.configmap("https://127.0.0.1:6443", CA)
    c["data"].update(extra)
    c["metadata"]["resourceVersion"] = "7"
    return c


def test_signing_tokens_sign_and_others_do_not():
    tokens = [token("aaaaaa.0123456789abcdef"), token("bbbbbb.0123456789abcdef", usages=("authentication",)),
              token("cccccc.0123456789abcdef", ttl=60)]
    [action] = sign_cluster_info(cm(), tokens, NOW + 120)
    assert isinstance(action, UpdateObject) and action.namespace == "kube-public"
    data = action.object["data"]
    content = data["kubeconfig"]
    assert set(data) == {"kubeconfig", "jws-kubeconfig-aaaaaa"}
    assert bt.signature_valid(data["jws-kubeconfig-aaaaaa"], content, "aaaaaa", "0123456789abcdef")
    assert action.object["metadata"]["resourceVersion"] == "7"  # a conditional update


def test_nothing_to_do_when_the_signatures_are_right_and_stale_ones_go():
    tokens = [token("aaaaaa.0123456789abcdef")]
    [action] = sign_cluster_info(cm(), tokens, NOW)
    assert sign_cluster_info(action.object, tokens, NOW) == []
    [cleaned] = sign_cluster_info(action.object, [], NOW)
    assert set(cleaned.object["data"]) == {"kubeconfig"}


def test_no_cluster_info_no_work():
    assert sign_cluster_info(None, [token("aaaaaa.0123456789abcdef")], NOW) == []


@pytest.mark.parametrize("expiration", ["soon", "2099-01-01", "2099-01-01T00:00:00"])
def test_a_token_with_a_malformed_expiration_does_not_sign(expiration):
    malformed = token("bbbbbb.0123456789abcdef", ttl=0)
    malformed["data"]["expiration"] = base64.b64encode(expiration.encode()).decode()
    [action] = sign_cluster_info(cm(), [token("aaaaaa.0123456789abcdef"), malformed], NOW)
    assert set(action.object["data"]) == {"kubeconfig", "jws-kubeconfig-aaaaaa"}


def test_a_cluster_info_brought_in_line_by_up_is_signed_again_and_keeps_the_wire_keys():
    tokens = [token("aaaaaa.0123456789abcdef")]
    [signed] = sign_cluster_info(cm(), tokens, NOW)
    want = clusterinfo.configmap("https://198.18.0.1:6443", CA, ["tcp://198.18.0.1:6444"], "k" * 40)
    updated = clusterinfo.brought_in_line(signed.object, want)  # what `up --apiserver-advertise-address` writes
    [resigned] = sign_cluster_info(updated, tokens, NOW)
    data = resigned.object["data"]
    assert bt.signature_valid(data["jws-kubeconfig-aaaaaa"], data["kubeconfig"], "aaaaaa", "0123456789abcdef")
    assert "198.18.0.1" in data["kubeconfig"] and data["kubemu-wire-endpoints"] == "tcp://198.18.0.1:6444"
    assert data["kubemu-wire-curve-server-key"] == "k" * 40
