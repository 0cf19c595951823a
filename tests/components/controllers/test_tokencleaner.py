"""The token cleaner's core: an expired bootstrap token's Secret is deleted, a live one is looked
at again when it expires."""
from __future__ import annotations

import base64

import pytest

from components.controllers import DeleteObject
from components.controllers.tokencleaner import clean_token
from kubemu import bootstraptoken as bt

NOW = 1_780_000_000.0


def secret(ttl=3600.0):
    s = bt.secret_for(bt.BootstrapToken.new("abcdef.0123456789abcdef", NOW, ttl=ttl))
    s["metadata"]["uid"] = "u1"
    return s


def test_a_live_token_is_kept_and_rechecked_when_it_expires():
    assert clean_token(secret(), NOW + 600) == ([], 3000.0)


def test_an_expired_token_is_deleted_with_its_uid():
    assert clean_token(secret(), NOW + 3600) == (
        [DeleteObject("v1", "Secret", "kube-system", "bootstrap-token-abcdef", "u1")], None)


def test_tokens_that_never_expire_and_other_secrets_are_left_alone():
    assert clean_token(secret(ttl=0), NOW + 10**9) == ([], None)
    other = secret()
    other["type"] = "Opaque"
    assert clean_token(other, NOW + 10**9) == ([], None)
    assert clean_token(None, NOW) == ([], None)


@pytest.mark.parametrize("expiration", ["soon", "2099-01-01", "2099-01-01T00:00:00"])
def test_a_token_with_a_malformed_expiration_is_deleted_as_expired(expiration):
    s = secret()
    s["data"]["expiration"] = base64.b64encode(expiration.encode()).decode()
    assert clean_token(s, NOW) == (
        [DeleteObject("v1", "Secret", "kube-system", "bootstrap-token-abcdef", "u1")], None)
