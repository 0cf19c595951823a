"""The Authenticator: client certificates against the client CA (made here with cryptography),
ServiceAccount bearer tokens against the signing key and the ServiceAccounts that exist."""
from __future__ import annotations

import asyncio
import base64
import datetime

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from components.apiserver.authn import AuthenticationError, Authenticator, bearer_token
from kubemu import bootstraptoken as bt
from kubemu import serviceaccount_token as satoken
from kubemu.api.identity import AUTHENTICATED, UserInfo

ISSUER = satoken.DEFAULT_ISSUER
NOW = datetime.datetime(2026, 6, 1, tzinfo=datetime.timezone.utc)
DAY = datetime.timedelta(days=1)


def make_ca(cn: str):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(NOW - 365 * DAY).not_valid_after(NOW + 3650 * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def client_cert(ca, cn: str | None, orgs=(), *, before=NOW - DAY, after=NOW + 365 * DAY,
                usage=ExtendedKeyUsageOID.CLIENT_AUTH) -> bytes:
    ca_cert, ca_key = ca
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = ([x509.NameAttribute(NameOID.COMMON_NAME, cn)] if cn else []) + \
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    cert = (x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(before).not_valid_after(after)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


@pytest.fixture(scope="module")
def ca():
    return make_ca("kubernetes")


@pytest.fixture(scope="module")
def sa_key():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class Accounts:
    """The ServiceAccounts that exist: (namespace, name) -> uid, and the pods and secrets:
    (kind, namespace, name) -> uid, as the injected lookups see them."""

    def __init__(self):
        self.uids = {("team", "builder"): "sa-uid"}
        self.asked: list[tuple[str, str]] = []
        self.objects = {("Pod", "team", "web"): "pod-uid", ("Secret", "team", "s"): "secret-uid"}

    async def lookup(self, namespace: str, name: str) -> str | None:
        self.asked.append((namespace, name))
        return self.uids.get((namespace, name))

    async def bound_lookup(self, kind: str, namespace: str, name: str) -> str | None:
        return self.objects.get((kind, namespace, name))


@pytest.fixture
def accounts():
    return Accounts()


@pytest.fixture
def authn(tmp_path, ca, sa_key, accounts):
    (tmp_path / "ca.crt").write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))
    (tmp_path / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return Authenticator(str(tmp_path / "ca.crt"), [str(tmp_path / "sa.pub")], ISSUER,
                         accounts.lookup, bound_lookup=accounts.bound_lookup,
                         clock=NOW.timestamp)


def token(key, *, audiences=(ISSUER,), now=NOW.timestamp(), uid="sa-uid", name="builder",
          bound=None):
    return satoken.Signer(key, ISSUER).issue(namespace="team", name=name, uid=uid,
                                             audiences=audiences, expiration_seconds=3600,
                                             now=now, jti="jti-1", bound=bound)


def authenticate(authn, cert=None, authorization=None):
    return asyncio.run(authn.authenticate(cert, authorization))


# --- client certificates ----------------------------------------------------------------------

def test_a_certificate_from_the_ca_is_its_common_name_in_its_organizations(authn, ca):
    user = authenticate(authn, client_cert(ca, "alice", ("dev", "ops")))
    assert user == UserInfo("alice", ("dev", "ops", AUTHENTICATED))


def test_a_certificate_from_another_ca_is_refused(authn):
    with pytest.raises(AuthenticationError) as err:
        authenticate(authn, client_cert(make_ca("kubernetes"), "mallory", ("system:masters",)))
    assert err.value.code == "Unauthorized"
    assert err.value.message.startswith("verifying certificate SN=")
    assert err.value.message.endswith("failed: x509: certificate signed by unknown authority")


def test_an_expired_certificate_is_refused(authn, ca):
    der = client_cert(ca, "alice", before=NOW - 30 * DAY, after=NOW - DAY)
    with pytest.raises(AuthenticationError, match="certificate has expired or is not yet valid: "
                                                  "current time 2026-06-01T00:00:00Z is after "
                                                  "2026-05-31T00:00:00Z"):
        authenticate(authn, der)


def test_a_certificate_not_valid_yet_is_refused(authn, ca):
    with pytest.raises(AuthenticationError, match="is before 2026-06-02T00:00:00Z"):
        authenticate(authn, client_cert(ca, "alice", before=NOW + DAY))


def test_a_server_only_certificate_is_no_client_certificate(authn, ca):
    with pytest.raises(AuthenticationError, match="incompatible key usage"):
        authenticate(authn, client_cert(ca, "alice", usage=ExtendedKeyUsageOID.SERVER_AUTH))


def test_a_certificate_without_common_name_names_nobody(authn, ca):
    assert authenticate(authn, client_cert(ca, None, ("dev",))) is None


def test_garbage_instead_of_a_certificate_is_refused(authn):
    with pytest.raises(AuthenticationError, match="malformed client certificate"):
        authenticate(authn, b"\x30\x03garbage")


def test_a_remembered_certificate_is_still_refused_once_it_expires(authn, ca):
    der = client_cert(ca, "alice", after=NOW + DAY)
    assert authenticate(authn, der).name == "alice"
    authn.clock = (NOW + 2 * DAY).timestamp
    with pytest.raises(AuthenticationError, match="expired"):
        authenticate(authn, der)


def test_no_client_ca_means_no_certificate_is_accepted(tmp_path, ca):
    authn = Authenticator(None, [], ISSUER, clock=NOW.timestamp)
    with pytest.raises(AuthenticationError, match="unknown authority"):
        authenticate(authn, client_cert(ca, "alice"))


# --- bearer tokens ----------------------------------------------------------------------------

def test_a_good_token_is_its_service_account(authn, sa_key, accounts):
    user = authenticate(authn, None, f"Bearer {token(sa_key)}")
    assert user.name == "system:serviceaccount:team:builder"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:team", AUTHENTICATED)
    assert user.uid == "sa-uid"
    assert user.extra == {"authentication.kubernetes.io/credential-id": ("JTI=jti-1",)}
    assert accounts.asked == [("team", "builder")]


def test_an_expired_token_is_refused(authn, sa_key):
    old = token(sa_key, now=(NOW - 2 * DAY).timestamp())
    with pytest.raises(AuthenticationError, match="service account token has expired"):
        authenticate(authn, None, f"Bearer {old}")


def test_a_token_for_another_audience_is_refused(authn, sa_key):
    with pytest.raises(AuthenticationError, match=r'token audiences \["vault"\] is invalid'):
        authenticate(authn, None, f"Bearer {token(sa_key, audiences=('vault',))}")


def test_a_token_of_a_deleted_service_account_is_refused(authn, sa_key, accounts):
    good = token(sa_key)
    del accounts.uids[("team", "builder")]
    with pytest.raises(AuthenticationError, match='serviceaccounts "builder" not found'):
        authenticate(authn, None, f"Bearer {good}")


def test_a_token_of_a_recreated_service_account_is_refused(authn, sa_key, accounts):
    good = token(sa_key)
    accounts.uids[("team", "builder")] = "new-uid"
    with pytest.raises(AuthenticationError, match=r"service account UID \(new-uid\) does not "
                                                  r"match claim \(sa-uid\)"):
        authenticate(authn, None, f"Bearer {good}")


BOUND = [satoken.Bound("Pod", "web", "pod-uid"), satoken.Bound("Secret", "s", "secret-uid")]


def test_a_token_bound_to_a_pod_is_its_service_account_on_that_pod(authn, sa_key):
    user = authenticate(authn, None, f"Bearer {token(sa_key, bound=BOUND[0])}")
    assert user.name == "system:serviceaccount:team:builder"
    assert user.extra["authentication.kubernetes.io/pod-name"] == ("web",)
    assert user.extra["authentication.kubernetes.io/pod-uid"] == ("pod-uid",)


@pytest.mark.parametrize("bound", BOUND, ids=lambda b: b.kind)
def test_a_token_bound_to_a_deleted_object_is_refused(authn, sa_key, accounts, bound):
    good = token(sa_key, bound=bound)
    assert authenticate(authn, None, f"Bearer {good}").name == "system:serviceaccount:team:builder"
    del accounts.objects[(bound.kind, "team", bound.name)]
    with pytest.raises(AuthenticationError, match="service account token has been invalidated"):
        authenticate(authn, None, f"Bearer {good}")


@pytest.mark.parametrize("bound", BOUND, ids=lambda b: b.kind)
def test_a_token_bound_to_a_recreated_object_is_refused(authn, sa_key, accounts, bound):
    good = token(sa_key, bound=bound)
    accounts.objects[(bound.kind, "team", bound.name)] = "new-uid"
    kind = bound.kind.lower()
    with pytest.raises(AuthenticationError, match=rf"{kind} UID \(new-uid\) does not match "
                                                  rf"service account {kind} ref claim "
                                                  rf"\({bound.uid}\)"):
        authenticate(authn, None, f"Bearer {good}")


def test_a_token_signed_by_another_key_is_refused(authn):
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(AuthenticationError):
        authenticate(authn, None, f"Bearer {token(other)}")


@pytest.mark.parametrize("header", ["Bearer garbage", "bearer a.b.c",
                                    "Bearer a." + base64.urlsafe_b64encode(b"[" * 6000).decode()
                                    + ".b"])
def test_an_unknown_bearer_token_is_refused(authn, header):
    with pytest.raises(AuthenticationError, match="invalid bearer token"):
        authenticate(authn, None, header)


@pytest.mark.parametrize("header", [None, "", "Basic YWxpY2U6c2VjcmV0", "Bearer", "Bearer "])
def test_no_credentials_is_nobody(authn, header):
    assert authenticate(authn, None, header) is None


def test_bearer_token_parsing():
    assert bearer_token("  BEARER abc  ") == "abc"
    assert bearer_token("Bearer abc extra") == "abc"
    assert bearer_token("Token abc") is None


# --- both -------------------------------------------------------------------------------------

def test_a_good_certificate_wins_over_a_token(authn, ca, sa_key):
    user = authenticate(authn, client_cert(ca, "alice"), f"Bearer {token(sa_key)}")
    assert user.name == "alice"


def test_a_bad_certificate_does_not_stop_a_good_token(authn, sa_key):
    user = authenticate(authn, client_cert(make_ca("x"), "mallory"), f"Bearer {token(sa_key)}")
    assert user.name == "system:serviceaccount:team:builder"


def test_when_both_fail_the_certificate_error_is_the_answer(authn, sa_key):
    with pytest.raises(AuthenticationError, match="unknown authority"):
        authenticate(authn, client_cert(make_ca("x"), "mallory"),
                     f"Bearer {token(sa_key, audiences=('vault',))}")


def test_a_certificate_signed_by_a_client_certificate_in_the_bundle_is_refused(tmp_path, ca):
    """Only a CA (basicConstraints CA:TRUE) issues: a leaf in the bundle vouches for nobody."""
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "leaf")])
    leaf = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(leaf_key.public_key()).serial_number(1)
            .not_valid_before(NOW - DAY).not_valid_after(NOW + DAY).sign(leaf_key, hashes.SHA256()))
    (tmp_path / "bundle.crt").write_bytes(ca[0].public_bytes(serialization.Encoding.PEM)
                                          + leaf.public_bytes(serialization.Encoding.PEM))
    authn = Authenticator(str(tmp_path / "bundle.crt"), [], ISSUER, clock=NOW.timestamp)
    with pytest.raises(AuthenticationError, match="unknown authority"):
        authenticate(authn, client_cert((leaf, leaf_key), "mallory", ("system:masters",)))
    assert authenticate(authn, client_cert(ca, "alice")).name == "alice"


# --- bootstrap tokens -------------------------------------------------------------------------

def _bootstrap_authn(tmp_path, ca, secrets: dict):
    (tmp_path / "ca.crt").write_bytes(ca[0].public_bytes(serialization.Encoding.PEM))

    async def lookup(name):
        return secrets.get(name)
    return Authenticator(str(tmp_path / "ca.crt"), [], ISSUER, bootstrap_lookup=lookup,
                         clock=NOW.timestamp)


def test_a_bootstrap_token_is_its_bootstrap_user(tmp_path, ca):
    secret = bt.secret_for(bt.BootstrapToken.new("abcdef.0123456789abcdef", NOW.timestamp()))
    authn = _bootstrap_authn(tmp_path, ca, {"bootstrap-token-abcdef": secret})
    user = authenticate(authn, authorization="Bearer abcdef.0123456789abcdef")
    assert user == UserInfo("system:bootstrap:abcdef", ("system:bootstrappers:kubeadm:default-node-token",
                                                        "system:bootstrappers", AUTHENTICATED))


@pytest.mark.parametrize("header", ["Bearer abcdef.0123456789abcdee", "Bearer zzzzzz.0123456789abcdef"])
def test_a_wrong_or_unknown_bootstrap_token_is_refused(tmp_path, ca, header):
    secret = bt.secret_for(bt.BootstrapToken.new("abcdef.0123456789abcdef", NOW.timestamp()))
    authn = _bootstrap_authn(tmp_path, ca, {"bootstrap-token-abcdef": secret})
    with pytest.raises(AuthenticationError, match="bootstrap token: "):
        authenticate(authn, authorization=header)


def test_an_expired_bootstrap_token_is_refused(tmp_path, ca):
    secret = bt.secret_for(bt.BootstrapToken.new("abcdef.0123456789abcdef", NOW.timestamp() - 25 * 3600))
    authn = _bootstrap_authn(tmp_path, ca, {"bootstrap-token-abcdef": secret})
    with pytest.raises(AuthenticationError, match="has expired"):
        authenticate(authn, authorization="Bearer abcdef.0123456789abcdef")


def test_without_a_bootstrap_lookup_bootstrap_tokens_authenticate_nobody(authn):
    with pytest.raises(AuthenticationError):
        authenticate(authn, authorization="Bearer abcdef.0123456789abcdef")
