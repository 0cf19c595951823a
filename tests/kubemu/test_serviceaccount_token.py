"""ServiceAccount JWTs: what kube-apiserver's TokenRequest puts in them, and every reason a token
is refused, with a fixed clock."""
from __future__ import annotations

import base64
import hashlib
import json

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from kubemu import serviceaccount_token as satoken
from kubemu.api.identity import AUTHENTICATED

ISSUER = satoken.DEFAULT_ISSUER
NOW = 1_800_000_000


@pytest.fixture(scope="module")
def key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def other_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def issue(key, **overrides):
    args = dict(namespace="team", name="builder", uid="sa-uid", audiences=(ISSUER,),
                expiration_seconds=3600, now=NOW, jti="the-jti")
    args.update(overrides)
    return satoken.Signer(key, ISSUER).issue(**args)


def segments(token: str) -> tuple[dict, dict]:
    def part(text):
        return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    header, payload, _ = token.split(".")
    return part(header), part(payload)


def test_key_id_is_the_base64url_sha256_of_the_der_public_key(key):
    der = key.public_key().public_bytes(serialization.Encoding.DER,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    expected = base64.urlsafe_b64encode(hashlib.sha256(der).digest()).decode().rstrip("=")
    assert satoken.key_id(key.public_key()) == expected
    assert "=" not in expected and len(expected) == 43


def test_a_token_carries_kube_apiservers_header_and_claims(key):
    header, payload = segments(issue(key))
    assert header == {"alg": "RS256", "kid": satoken.key_id(key.public_key())}
    assert payload == {
        "aud": [ISSUER], "exp": NOW + 3600, "iat": NOW, "nbf": NOW, "iss": ISSUER,
        "jti": "the-jti", "sub": "system:serviceaccount:team:builder",
        "kubernetes.io": {"namespace": "team",
                          "serviceaccount": {"name": "builder", "uid": "sa-uid"}}}


def test_a_bound_token_names_its_pod(key):
    _, payload = segments(issue(key, bound=satoken.Bound("Pod", "web-1", "pod-uid")))
    assert payload["kubernetes.io"]["pod"] == {"name": "web-1", "uid": "pod-uid"}
    verified = satoken.verify(issue(key, bound=satoken.Bound("Pod", "web-1", "pod-uid")),
                              [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW)
    user = satoken.user_info(verified)
    assert user.extra[satoken.POD_NAME] == ("web-1",)
    assert user.extra[satoken.POD_UID] == ("pod-uid",)


def test_a_bound_token_names_its_secret(key):
    verified = satoken.verify(issue(key, bound=satoken.Bound("Secret", "s", "secret-uid")),
                              [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW)
    assert (verified.pod, verified.secret) == (None, ("s", "secret-uid"))
    assert satoken.POD_NAME not in satoken.user_info(verified).extra


def test_a_valid_token_is_the_service_account_user(key):
    verified = satoken.verify(issue(key), [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW + 10)
    assert verified == satoken.Verified("team", "builder", "sa-uid", (ISSUER,), "the-jti")
    user = satoken.user_info(verified)
    assert user.name == "system:serviceaccount:team:builder"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:team", AUTHENTICATED)
    assert user.uid == "sa-uid"
    assert user.extra == {"authentication.kubernetes.io/credential-id": ("JTI=the-jti",)}


def test_any_of_several_keys_may_have_signed_it(key, other_key):
    assert satoken.verify(issue(key), [other_key.public_key(), key.public_key()], ISSUER,
                          audiences=(ISSUER,), now=NOW) is not None


NESTED = "a." + base64.urlsafe_b64encode(b"[" * 6000).decode() + ".b"  # too deep for json


@pytest.mark.parametrize("token", ["", "abc", "a.b.c", "not a jwt at all", 42, None, NESTED])
def test_what_is_not_a_jwt_is_not_ours(token):
    assert satoken.verify(token, [], ISSUER, audiences=(ISSUER,), now=NOW) is None


def test_a_token_of_another_issuer_is_not_ours(key):
    token = satoken.Signer(key, "https://elsewhere").issue(
        namespace="team", name="builder", uid="u", audiences=(ISSUER,), expiration_seconds=3600,
        now=NOW, jti="j")
    assert satoken.verify(token, [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW) is None


def test_a_token_signed_by_another_key_is_refused(key, other_key):
    with pytest.raises(satoken.TokenError, match="error in cryptographic primitive"):
        satoken.verify(issue(other_key), [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW)


def test_a_forged_payload_is_refused(key):
    token = issue(key)
    header, payload, signature = token.split(".")
    claims = segments(token)[1]
    claims["kubernetes.io"]["namespace"] = "kube-system"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    with pytest.raises(satoken.TokenError):
        satoken.verify(f"{header}.{forged}.{signature}", [key.public_key()], ISSUER,
                       audiences=(ISSUER,), now=NOW)


def test_an_unsigned_token_is_refused(key):
    token = jwt.encode(segments(issue(key))[1], None, algorithm="none")
    with pytest.raises(satoken.TokenError):
        satoken.verify(token, [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW)


def test_a_token_for_another_audience_is_refused_in_kubernetes_words(key):
    token = issue(key, audiences=("vault", "other"))
    with pytest.raises(satoken.TokenError) as err:
        satoken.verify(token, [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW)
    assert str(err.value) == (f'token audiences ["vault" "other"] is invalid for the target '
                              f'audiences ["{ISSUER}"]')
    accepted = satoken.verify(token, [key.public_key()], ISSUER, audiences=("vault",), now=NOW)
    assert accepted.audiences == ("vault",)


@pytest.mark.parametrize("now, message", [
    (NOW + 3600 + satoken.LEEWAY + 1, "service account token has expired"),
    (NOW - satoken.LEEWAY - 1, "service account token is not valid yet"),
])
def test_times_are_checked_with_a_minute_of_leeway(key, now, message):
    with pytest.raises(satoken.TokenError, match=message):
        satoken.verify(issue(key), [key.public_key()], ISSUER, audiences=(ISSUER,), now=now)
    inside = now - 2 if "expired" in message else now + 2
    assert satoken.verify(issue(key), [key.public_key()], ISSUER, audiences=(ISSUER,), now=inside)


def test_a_token_issued_in_the_future_is_refused(key):
    signer = satoken.Signer(key, ISSUER)
    claims = satoken.claims(issuer=ISSUER, namespace="team", name="builder", uid="u",
                            audiences=(ISSUER,), expiration_seconds=3600, now=NOW, jti="j")
    claims["iat"] = NOW + 600
    with pytest.raises(satoken.TokenError, match="issued in the future"):
        satoken.verify(signer.sign(claims), [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW)


def test_a_token_whose_subject_is_not_its_service_account_is_refused(key):
    signer = satoken.Signer(key, ISSUER)
    claims = satoken.claims(issuer=ISSUER, namespace="team", name="builder", uid="u",
                            audiences=(ISSUER,), expiration_seconds=3600, now=NOW, jti="j")
    claims["sub"] = "system:serviceaccount:kube-system:admin"
    with pytest.raises(satoken.TokenError, match="does not name the service account"):
        satoken.verify(signer.sign(claims), [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW)
    del claims["kubernetes.io"]
    with pytest.raises(satoken.TokenError, match="claims are missing"):
        satoken.verify(signer.sign(claims), [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW)


def test_keys_load_from_public_private_and_certificate_pem(tmp_path, key, other_key):
    pub = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    priv = other_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption())
    (tmp_path / "keys.pem").write_bytes(pub + priv)
    ids = [satoken.key_id(k) for k in satoken.load_public_keys(tmp_path / "keys.pem")]
    assert ids == [satoken.key_id(key.public_key()), satoken.key_id(other_key.public_key())]
    (tmp_path / "ec.pem").write_bytes(ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    with pytest.raises(ValueError, match="no RSA public key"):
        satoken.load_public_keys(tmp_path / "ec.pem")


def test_a_signer_loads_its_key_from_a_file(tmp_path, key):
    (tmp_path / "sa.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption()))
    signer = satoken.Signer.from_file(tmp_path / "sa.key")
    assert signer.key_id == satoken.key_id(key.public_key())
    assert signer.issuer == ISSUER
    with pytest.raises(ValueError):
        satoken.Signer(ec.generate_private_key(ec.SECP256R1()))


@pytest.mark.parametrize("claims", [
    {"aud": 5, "kubernetes.io": [1]},
    {"aud": {"x": 1}, "kubernetes.io": {"namespace": 1, "serviceaccount": "x"}},
    {"exp": "soon", "nbf": None, "iat": [], "kubernetes.io": None},
])
def test_odd_claims_in_a_signed_token_are_a_token_error(key, claims):
    token = satoken.Signer(key, ISSUER).sign({"iss": ISSUER, "sub": "x", **claims})
    with pytest.raises(satoken.TokenError):
        satoken.verify(token, [key.public_key()], ISSUER, audiences=(ISSUER,), now=NOW)
