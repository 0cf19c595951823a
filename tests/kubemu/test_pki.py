"""kubeadm's PKI: what each certificate says, that it chains to the CA, the files' modes, reuse,
and renewal (a fake clock: `now` is a parameter)."""
from __future__ import annotations

import datetime
import ipaddress
import stat

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from kubemu import pki

NOW = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
DAY = datetime.timedelta(days=1)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def ca(tmp_path):
    pair, why = pki.ensure_ca(tmp_path / "pki", NOW)
    assert why == "missing"
    return pair


def test_ca_is_kubeadm_s(ca):
    assert pki.subject_of(ca.cert) == ("kubernetes", ())
    assert ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.cert.not_valid_after_utc - NOW == pki.CA_VALIDITY
    assert pki.signed_by(ca.cert, ca.cert)  # self-signed


def test_apiserver_serving_certificate_names_and_chain(tmp_path, ca):
    pair, _ = pki.ensure_cert(tmp_path / "pki", pki.APISERVER, ca, NOW)
    pair.cert.verify_directly_issued_by(ca.cert)  # raises if not
    sans = pair.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.DNSName)) == {
        "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local"}
    assert set(sans.get_values_for_type(x509.IPAddress)) == {ipaddress.ip_address("127.0.0.1"),
                                                              ipaddress.ip_address("10.96.0.1")}
    eku = pair.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert pair.cert.not_valid_after_utc - NOW == pki.LEAF_VALIDITY


@pytest.mark.parametrize("spec, user, groups", [
    (pki.ADMIN, "kubernetes-admin", ("kubeadm:cluster-admins",)),
    (pki.SCHEDULER, "system:kube-scheduler", ()),
    (pki.CONTROLLER_MANAGER, "system:kube-controller-manager", ()),
    (pki.kubelet_spec("node-3"), "system:node:node-3", ("system:nodes",)),
])
def test_client_certificates_name_their_user_and_groups(tmp_path, ca, spec, user, groups):
    pair, _ = pki.ensure_cert(tmp_path / "pki", spec, ca, NOW)
    assert pki.signed_by(pair.cert, ca.cert)
    assert pki.subject_of(pair.cert) == (user, groups)
    assert list(pair.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == \
        [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert isinstance(pair.key, ec.EllipticCurvePrivateKey)


def test_modes_keys_0600_certs_0644_dir_0700(tmp_path, ca):
    d = tmp_path / "pki"
    pki.ensure_cert(d, pki.APISERVER, ca, NOW)
    pki.ensure_service_account_keys(d)
    assert mode(d) == 0o700
    for key in ("ca.key", "apiserver.key", "sa.key"):
        assert mode(d / key) == 0o600, key
    for cert in ("ca.crt", "apiserver.crt", "sa.pub"):
        assert mode(d / cert) == 0o644, cert
    assert sorted(p.name for p in d.iterdir()) == ["apiserver.crt", "apiserver.key", "ca.crt", "ca.key",
                                                   "sa.key", "sa.pub"]  # no temporary file left


def test_service_account_pair_is_rsa_2048_and_kept(tmp_path):
    d = tmp_path / "pki"
    assert pki.ensure_service_account_keys(d) is True
    key = serialization.load_pem_private_key((d / "sa.key").read_bytes(), None)
    assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048
    assert serialization.load_pem_public_key((d / "sa.pub").read_bytes()) == key.public_key()
    before = (d / "sa.key").read_bytes()
    assert pki.ensure_service_account_keys(d) is False
    assert (d / "sa.key").read_bytes() == before
    (d / "sa.pub").write_bytes(b"garbage")  # halves that do not match: made again
    assert pki.ensure_service_account_keys(d) is True


def test_rerun_reuses_what_is_there(tmp_path, ca):
    d = tmp_path / "pki"
    first, _ = pki.ensure_cert(d, pki.ADMIN, ca, NOW)
    again_ca, why_ca = pki.ensure_ca(d, NOW + 30 * DAY)
    again, why = pki.ensure_cert(d, pki.ADMIN, again_ca, NOW + 30 * DAY)
    assert (why_ca, why) == (None, None)
    assert again_ca.cert == ca.cert and again.cert == first.cert


def test_near_expiry_is_renewed_with_a_new_key(tmp_path, ca):
    d = tmp_path / "pki"
    first, _ = pki.ensure_cert(d, pki.APISERVER, ca, NOW)
    expiry = first.cert.not_valid_after_utc
    kept, why = pki.ensure_cert(d, pki.APISERVER, ca, expiry - pki.RENEW_BEFORE - DAY)
    assert why is None and kept.cert == first.cert
    later = expiry - pki.RENEW_BEFORE + DAY
    renewed, why = pki.ensure_cert(d, pki.APISERVER, ca, later)
    assert why == f"it expires on {expiry:%Y-%m-%d}"
    assert renewed.cert.not_valid_after_utc == later + pki.LEAF_VALIDITY
    assert renewed.key.public_key() != first.key.public_key()
    assert pki.ensure_cert(d, pki.APISERVER, ca, later)[1] is None  # and then kept


def test_a_new_ca_renews_every_leaf(tmp_path, ca):
    d = tmp_path / "pki"
    pki.ensure_cert(d, pki.ADMIN, ca, NOW)
    new_ca, why = pki.ensure_ca(d, ca.cert.not_valid_after_utc - DAY)
    assert why.startswith("it expires on") and new_ca.cert != ca.cert
    renewed, why = pki.ensure_cert(d, pki.ADMIN, new_ca, NOW)
    assert why == "it is not signed by the cluster CA"
    assert pki.signed_by(renewed.cert, new_ca.cert) and not pki.signed_by(renewed.cert, ca.cert)


def test_other_names_or_another_key_renew(tmp_path, ca):
    d = tmp_path / "pki"
    pki.ensure_cert(d, pki.APISERVER, ca, NOW)
    more = pki.CertSpec("apiserver", "kube-apiserver", server=True, dns_names=pki.APISERVER_DNS + ("node-0",),
                        ip_addresses=pki.APISERVER_IPS)
    pair, why = pki.ensure_cert(d, more, ca, NOW)
    assert why == "its names (SANs) changed" and "node-0" in pki.sans_of(pair.cert)[0]
    (d / "apiserver.key").write_bytes(pki.key_pem(pki.new_key()))  # a key that is not the cert's
    assert pki.ensure_cert(d, more, ca, NOW)[1] == "its key does not match"
    (d / "apiserver.crt").write_bytes(b"not a certificate")
    assert pki.ensure_cert(d, more, ca, NOW)[1] == "missing"


def test_the_apiserver_certificate_names_its_advertised_address_and_the_first_service_ip(tmp_path, ca):
    """kubeadm's SANs: pods verify the apiserver at the `kubernetes` Service's ClusterIP and at
    its endpoint (the advertise address); a new pod network (other addresses) renews it."""
    d = tmp_path / "pki"
    spec = pki.apiserver_spec("10.244.255.254", "10.96.0.1")
    pair, _ = pki.ensure_cert(d, spec, ca, NOW)
    assert pki.sans_of(pair.cert) == (set(pki.APISERVER_DNS), {"127.0.0.1", "10.244.255.254", "10.96.0.1"})
    assert pki.ensure_cert(d, spec, ca, NOW)[1] is None  # the same network: kept
    moved = pki.apiserver_spec("10.245.255.254", "10.112.0.1")
    pair, why = pki.ensure_cert(d, moved, ca, NOW)
    assert why == "its names (SANs) changed"
    assert pki.sans_of(pair.cert)[1] == {"127.0.0.1", "10.245.255.254", "10.112.0.1"}
    assert pki.apiserver_spec("127.0.0.1", "127.96.0.1").ip_addresses == ("127.0.0.1", "127.96.0.1")  # host mode


def test_a_leaf_never_outlives_its_ca(ca):
    late = ca.cert.not_valid_after_utc - 100 * DAY
    cert = pki.issue(pki.ADMIN, pki.new_key().public_key(), ca, late)
    assert cert.not_valid_after_utc == ca.cert.not_valid_after_utc


def test_subject_change_renews(tmp_path, ca):
    d = tmp_path / "pki"
    pki.ensure_cert(d, pki.kubelet_spec("node-1"), ca, NOW)
    assert pki.ensure_cert(d, pki.kubelet_spec("node-2"), ca, NOW)[1] == "its subject changed"


def test_a_ca_the_user_put_there_is_used_rsa_too(tmp_path):
    """As kubeadm: an existing ca.crt/ca.key is not overwritten and signs the rest."""
    d = tmp_path / "pki"
    d.mkdir()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (d / "ca.key").write_bytes(pki.key_pem(key))
    (d / "ca.crt").write_bytes(pki.make_ca(key, NOW).public_bytes(serialization.Encoding.PEM))
    ca, why = pki.ensure_ca(d, NOW)
    assert why is None and ca.cert.public_key() == key.public_key()
    pair, _ = pki.ensure_cert(d, pki.APISERVER, ca, NOW)
    pair.cert.verify_directly_issued_by(ca.cert)
