"""Bootstrap tokens: their form, their Secret, the authenticator's decision, the bootstrap
signer's JWS and the CA pin, with kubeadm's messages."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import random

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kubemu import bootstraptoken as bt
from kubemu import pki

NOW = 1_780_000_000.0
TOKEN = "abcdef.0123456789abcdef"


def test_generated_tokens_have_the_form():
    tokens = {bt.generate(random.Random(i)) for i in range(20)}
    assert len(tokens) == 20 and all(bt.is_token(t) for t in tokens)


@pytest.mark.parametrize("bad", ["abcdef", "ABCDEF.0123456789abcdef", "abcde.0123456789abcdef",
                                 "abcdef.0123456789abcdef0", "abcdef-0123456789abcdef", ""])
def test_a_malformed_token_is_refused_in_kubeadms_words(bad):
    with pytest.raises(ValueError) as err:
        bt.parse(bad)
    assert str(err.value) == (f'the bootstrap token "{bad}" was not of the form '
                              r'"\\A([a-z0-9]{6})\\.([a-z0-9]{16})\\z"')  # Go's %q


def test_delete_takes_an_id_or_a_token():
    assert bt.parse_id_or_token("abcdef") == bt.parse_id_or_token(TOKEN) == "abcdef"
    with pytest.raises(ValueError, match="given token didn't match pattern"):
        bt.parse_id_or_token("nope")


def test_usages_and_groups_are_checked():
    with pytest.raises(ValueError, match=r"invalid bootstrap token usage string: fly, valid options: "
                                         r"\[authentication signing\]"):
        bt.BootstrapToken.new(TOKEN, NOW, usages=("fly",))
    with pytest.raises(ValueError, match='bootstrap group "admins" is invalid'):
        bt.BootstrapToken.new(TOKEN, NOW, groups=("admins",))


def test_the_secret_is_kubeadms_and_reads_back():
    token = bt.BootstrapToken.new(TOKEN, NOW, description="for node-3")
    secret = bt.secret_for(token)
    assert secret["metadata"] == {"name": "bootstrap-token-abcdef", "namespace": "kube-system"}
    assert secret["type"] == "bootstrap.kubernetes.io/token"
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data == {"token-id": "abcdef", "token-secret": "0123456789abcdef",
                    "description": "for node-3", "expiration": bt.format_time(NOW + 24 * 3600),
                    "usage-bootstrap-signing": "true", "usage-bootstrap-authentication": "true",
                    "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token"}
    assert bt.BootstrapToken.from_secret(secret) == token
    assert bt.BootstrapToken.new(TOKEN, NOW, ttl=0).expires is None


def _secret(**kw):
    return bt.secret_for(bt.BootstrapToken.new(TOKEN, NOW, **kw))


def test_the_authenticator_accepts_the_token_as_its_bootstrap_user():
    assert bt.authenticated_user(_secret(), "abcdef", "0123456789abcdef", NOW + 60) == (
        "system:bootstrap:abcdef", ("system:bootstrappers:kubeadm:default-node-token",
                                    "system:bootstrappers"))


@pytest.mark.parametrize("secret, token_secret, now, why", [
    (None, "0123456789abcdef", NOW, "no secret"),
    (_secret(), "0123456789abcdeX", NOW, "does not match"),
    (_secret(), "0123456789abcdef", NOW + 24 * 3600, "has expired"),
    (_secret(usages=("signing",)), "0123456789abcdef", NOW, "may not be used for authentication"),
])
def test_the_authenticator_refuses(secret, token_secret, now, why):
    assert why in bt.authenticated_user(secret, "abcdef", token_secret, now)


def test_a_token_being_deleted_or_with_a_bad_group_is_refused():
    deleting = _secret()
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert "being deleted" in bt.authenticated_user(deleting, "abcdef", "0123456789abcdef", NOW)
    bad = _secret()
    bad["data"]["auth-extra-groups"] = base64.b64encode(b"system:masters").decode()
    assert "is invalid" in bt.authenticated_user(bad, "abcdef", "0123456789abcdef", NOW)


def with_expiration(secret: dict, expiration: str) -> dict:
    secret["data"]["expiration"] = base64.b64encode(expiration.encode()).decode()
    return secret


# Go's time.Parse(time.RFC3339) refuses these (a date alone, no zone, a space for the T, no
# seconds), so cluster-bootstrap's GetExpiration treats the token as expired
MALFORMED_EXPIRATIONS = ["soon", "2099-01-01", "2099-01-01T00:00:00", "2099-01-01 00:00:00Z",
                         "2099-01-01T00:00Z", "2099-13-01T00:00:00Z"]


def test_the_expiration_is_rfc3339_or_absent_and_malformed_is_reported():
    assert bt.parse_expiration(None) is None and bt.parse_expiration("") is None   # never expires
    assert bt.parse_expiration(bt.format_time(NOW)) == NOW
    assert bt.parse_expiration("2026-05-28T22:26:40.5+02:00") == NOW + 0.5
    for text in MALFORMED_EXPIRATIONS:
        with pytest.raises(ValueError, match=f'unparseable expiration time "{text}"'):
            bt.parse_expiration(text)


@pytest.mark.parametrize("expiration", MALFORMED_EXPIRATIONS)
def test_a_token_with_a_malformed_expiration_has_expired_and_is_refused(expiration):
    secret = with_expiration(_secret(ttl=0), expiration)
    token = bt.BootstrapToken.from_secret(secret)
    assert token is not None and token.expired(NOW)
    why = bt.authenticated_user(secret, "abcdef", "0123456789abcdef", NOW)
    assert isinstance(why, str) and "has expired" in why and "unparseable expiration time" in why


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def test_the_detached_jws_is_rfc7515_hs256_keyed_by_the_token_secret():
    content = "apiVersion: v1\nkind: Config\n"
    sig = bt.detached_signature(content, "abcdef", "0123456789abcdef")
    header, payload, mac = sig.split(".")
    assert payload == "" and json.loads(_b64url_decode(header)) == {"alg": "HS256", "kid": "abcdef"}
    signing_input = header + "." + base64.urlsafe_b64encode(content.encode()).rstrip(b"=").decode()
    assert _b64url_decode(mac) == hmac.new(b"0123456789abcdef", signing_input.encode(),
                                           hashlib.sha256).digest()
    assert bt.signature_valid(sig, content, "abcdef", "0123456789abcdef")
    assert not bt.signature_valid(sig, content + " ", "abcdef", "0123456789abcdef")
    assert not bt.signature_valid(sig, content, "abcdef", "0123456789abcdeX")


def test_the_ca_hash_is_the_sha256_of_the_subject_public_key_info():
    key = ec.generate_private_key(ec.SECP256R1())
    import datetime
    ca = pki.make_ca(key, datetime.datetime.now(datetime.timezone.utc))
    pem = ca.public_bytes(serialization.Encoding.PEM)
    spki = x509.load_pem_x509_certificate(pem).public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert bt.ca_cert_hash(pem) == "sha256:" + hashlib.sha256(spki).hexdigest()


def test_the_join_command_is_kubeadms():
    assert bt.join_command("10.0.0.1:6443", "abcdef.0123456789abcdef", "sha256:" + "0" * 64) == (
        "kubemu join 10.0.0.1:6443 --token abcdef.0123456789abcdef \\\n"
        "\t--discovery-token-ca-cert-hash sha256:" + "0" * 64)
