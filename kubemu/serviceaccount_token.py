"""ServiceAccount tokens: the JWTs kube-apiserver's TokenRequest issues, signed and verified.

    signer = Signer.from_file("<state>/pki/sa.key", issuer)
    token = signer.issue(namespace="default", name="builder", uid=sa_uid, audiences=(issuer,),
                         expiration_seconds=3600, now=time.time(), jti=str(uuid.uuid4()))
    verified = verify(token, public_keys, issuer, audiences=(issuer,), now=time.time())
    user_info(verified) -> UserInfo("system:serviceaccount:default:builder", ...)

As kube-apiserver makes them (pkg/serviceaccount/claims.go, jwt.go): RS256, header `kid` the
base64url SHA-256 of the DER (SubjectPublicKeyInfo) public key; claims iss, sub
(`system:serviceaccount:<ns>:<name>`), aud (a list), exp, iat, nbf, jti and the private claim
`kubernetes.io` {namespace, serviceaccount {name, uid}, pod {name, uid} when bound to a pod,
secret {name, uid} when bound to a secret}.

Verification is pure (the clock comes in as `now`) and follows kube-apiserver's order: a token
that is not a JWT, or names another issuer, is not ours (None: another authenticator may know
it); then the signature (any of the keys), the audiences (the token's must meet the ones asked
for), the times (go-jose's one-minute leeway) and the claims. Failures raise TokenError with
Kubernetes' messages. Whether the ServiceAccount, and the pod or secret the token is bound to,
still exist is the caller's question (authn.py asks the apiserver).
"""
from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kubemu.api.identity import (UserInfo, authenticated, service_account_groups,
                                 service_account_username)
from kubemu.netplan import CLUSTER_DOMAIN

DEFAULT_ISSUER = f"https://kubernetes.default.svc.{CLUSTER_DOMAIN}"  # kubeadm's --service-account-issuer
DEFAULT_EXPIRATION = 3600          # TokenRequestSpec.expirationSeconds default (one hour)
MIN_EXPIRATION = 600               # ValidateTokenRequest: at least ten minutes
MAX_EXPIRATION = 2 ** 32           # ... and at most 2^32 seconds
LEEWAY = 60                        # go-jose's DefaultLeeway on exp, nbf and iat
ALGORITHM = "RS256"
CLAIM = "kubernetes.io"
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
POD_NAME = "authentication.kubernetes.io/pod-name"
POD_UID = "authentication.kubernetes.io/pod-uid"
# What a token may be bound to (boundObjectRef.kind), and where those objects are.
BOUND_RESOURCES = {"Pod": "pods", "Secret": "secrets"}


class TokenError(ValueError):
    """A token of ours that is not valid (bad signature, wrong audience, expired, ...)."""


def key_id(public_key: Any) -> str:
    """kube-apiserver's keyIDFromPublicKey: base64url (unpadded) SHA-256 of the DER public key."""
    der = public_key.public_bytes(serialization.Encoding.DER,
                                  serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()


def load_public_keys(path: str | Path) -> list:
    """The RSA public keys in a PEM file, as --service-account-key-file reads it: public keys,
    private keys (their public half) and certificates (their key), any number of each."""
    data = Path(path).read_bytes()
    keys = []
    for block in _pem_blocks(data):
        label = block.split(b"\n", 1)[0]
        if b"CERTIFICATE" in label:
            key = x509.load_pem_x509_certificate(block).public_key()
        elif b"PRIVATE KEY" in label:
            key = serialization.load_pem_private_key(block, password=None).public_key()
        elif b"PUBLIC KEY" in label:
            key = serialization.load_pem_public_key(block)
        else:
            continue
        if isinstance(key, rsa.RSAPublicKey):
            keys.append(key)
    if not keys:
        raise ValueError(f"{path}: no RSA public key, private key or certificate in it")
    return keys


def _pem_blocks(data: bytes) -> list[bytes]:
    blocks, start = [], data.find(b"-----BEGIN ")
    while start >= 0:
        end = data.find(b"-----END ", start)
        end = data.find(b"-----", end + 9) + 5 if end >= 0 else -1
        if end < 5:
            break
        blocks.append(data[start:end])
        start = data.find(b"-----BEGIN ", end)
    return blocks


@dataclass(frozen=True)
class Bound:
    """The object a token is bound to (TokenRequest's boundObjectRef, resolved)."""
    kind: str   # "Pod" | "Secret"
    name: str
    uid: str


def claims(*, issuer: str, namespace: str, name: str, uid: str, audiences: Iterable[str],
           expiration_seconds: int, now: float, jti: str, bound: Bound | None = None) -> dict:
    """The claims of a ServiceAccount token (token.Claims plus the issuer)."""
    issued = int(now)
    private: dict = {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}}
    if bound is not None:
        private[bound.kind.lower()] = {"name": bound.name, "uid": bound.uid}
    return {"aud": list(audiences), "exp": issued + int(expiration_seconds), "iat": issued,
            "iss": issuer, "jti": jti, CLAIM: private, "nbf": issued,
            "sub": service_account_username(namespace, name)}


class Signer:
    """Signs ServiceAccount tokens with one RSA private key (--service-account-signing-key-file)."""

    def __init__(self, private_key: rsa.RSAPrivateKey, issuer: str = DEFAULT_ISSUER):
        if not isinstance(private_key, rsa.RSAPrivateKey):
            raise ValueError("a ServiceAccount signing key must be an RSA private key")
        self.private_key = private_key
        self.issuer = issuer
        self.key_id = key_id(private_key.public_key())

    @classmethod
    def from_file(cls, path: str | Path, issuer: str = DEFAULT_ISSUER) -> Signer:
        key = serialization.load_pem_private_key(Path(path).read_bytes(), password=None)
        return cls(key, issuer)

    def sign(self, token_claims: dict) -> str:
        return jwt.encode(token_claims, self.private_key, algorithm=ALGORITHM,
                          headers={"kid": self.key_id, "typ": None})

    def issue(self, *, namespace: str, name: str, uid: str, audiences: Iterable[str],
              expiration_seconds: int, now: float, jti: str, bound: Bound | None = None) -> str:
        return self.sign(claims(issuer=self.issuer, namespace=namespace, name=name, uid=uid,
                                audiences=audiences, expiration_seconds=expiration_seconds,
                                now=now, jti=jti, bound=bound))


@dataclass(frozen=True)
class Verified:
    """What a valid token says: its ServiceAccount, audiences (those it was accepted for), jti
    and the pod or secret it is bound to, if any."""
    namespace: str
    name: str
    uid: str
    audiences: tuple[str, ...]
    jti: str = ""
    pod: tuple[str, str] | None = None      # (name, uid)
    secret: tuple[str, str] | None = None   # (name, uid)


def _unverified_payload(token: str) -> dict | None:
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError, RecursionError):  # deep nesting: not a JWT of ours
        return None
    return payload if isinstance(payload, dict) else None


def _go_strings(items: Iterable[str]) -> str:
    """%q of a []string: ["a" "b"]."""
    return "[" + " ".join(json.dumps(s) for s in items) + "]"


def verify(token: str, public_keys: Iterable, issuer: str, *, audiences: Iterable[str],
           now: float) -> Verified | None:
    """The token's claims if it is a valid ServiceAccount token of `issuer` for one of
    `audiences`; None if it is not one of ours; TokenError if it is ours but not valid."""
    if not isinstance(token, str):
        return None
    unverified = _unverified_payload(token)
    if unverified is None or unverified.get("iss") != issuer:
        return None
    payload = _check_signature(token, list(public_keys))
    wanted = tuple(audiences)
    aud = payload.get("aud")
    token_auds = (aud,) if isinstance(aud, str) else \
        tuple(a for a in aud if isinstance(a, str)) if isinstance(aud, list) else ()
    if not token_auds:
        token_auds = wanted
    accepted = tuple(a for a in token_auds if a in wanted)
    if not accepted:
        raise TokenError(f"token audiences {_go_strings(token_auds)} is invalid for the target "
                         f"audiences {_go_strings(wanted)}")
    _check_times(payload, now)
    private = payload.get(CLAIM)
    private = private if isinstance(private, dict) else {}
    namespace = private.get("namespace")
    sa = private.get("serviceaccount") if isinstance(private.get("serviceaccount"), dict) else {}
    name, uid = sa.get("name"), sa.get("uid")
    if not all(isinstance(v, str) and v for v in (namespace, name, uid)):
        raise TokenError("service account token claims are missing the namespace, the "
                         "service account name or its uid")
    if payload.get("sub") != service_account_username(namespace, name):
        raise TokenError(f"sub claim {payload.get('sub')!r} does not name the service account "
                         f"{namespace}/{name}")
    jti = payload.get("jti") if isinstance(payload.get("jti"), str) else ""
    return Verified(namespace, name, uid, accepted, jti,
                    _object_ref(private.get("pod")), _object_ref(private.get("secret")))


def _object_ref(claim: Any) -> tuple[str, str] | None:
    """(name, uid) of a pod or secret claim."""
    if not isinstance(claim, dict):
        return None
    return str(claim.get("name", "")), str(claim.get("uid", ""))


def _check_signature(token: str, keys: list) -> dict:
    """The payload, once one of `keys` (the one the header's kid names first) verifies it."""
    try:
        kid = jwt.get_unverified_header(token).get("kid")
    except jwt.InvalidTokenError:
        kid = None
    if len(keys) > 1:
        keys.sort(key=lambda k: key_id(k) != kid)
    for key in keys:
        try:
            payload = jwt.decode(token, key, algorithms=[ALGORITHM],
                                 options={"verify_exp": False, "verify_nbf": False,
                                          "verify_iat": False, "verify_aud": False,
                                          "verify_iss": False})
        except jwt.InvalidTokenError:
            continue
        if isinstance(payload, dict):
            return payload
    raise TokenError("go-jose/go-jose: error in cryptographic primitive")


def _check_times(payload: dict, now: float) -> None:
    """jwt.Claims.Validate with the default leeway, in its order, with kube-apiserver's words."""
    def number(field: str) -> float | None:
        value = payload.get(field)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    exp, nbf, iat = number("exp"), number("nbf"), number("iat")
    if nbf is not None and now + LEEWAY < nbf:
        raise TokenError("service account token is not valid yet")
    if exp is not None and now - LEEWAY > exp:
        raise TokenError("service account token has expired")
    if iat is not None and now + LEEWAY < iat:
        raise TokenError("service account token is issued in the future")


def user_info(verified: Verified) -> UserInfo:
    """The user a verified token authenticates (ServiceAccountInfo.UserInfo)."""
    extra = {CREDENTIAL_ID: (f"JTI={verified.jti}",)} if verified.jti else {}
    if verified.pod is not None:
        extra[POD_NAME] = (verified.pod[0],)
        extra[POD_UID] = (verified.pod[1],)
    return authenticated(service_account_username(verified.namespace, verified.name),
                         service_account_groups(verified.namespace), verified.uid, extra)
