"""The cluster's PKI, as `kubeadm init phase certs` writes /etc/kubernetes/pki: a cluster CA,
the apiserver's serving certificate, the service-account signing key pair, and client
certificates (admin, scheduler, controller-manager, each kubelet). Files and names are
kubeadm's; the decisions (what a certificate holds, whether one on disk is still good) are
pure functions of their inputs and `now`, and `ensure_*` is the thin shell over the files.

Keys: ECDSA P-256 for the CA and every leaf (kubeadm's `encryptionAlgorithm: ECDSA-P256`),
because `kubemu up --nodes 64` makes 64 kubelet keys and an RSA 2048 key costs ~50-100 ms to
generate where a P-256 key costs ~0.1 ms; the service-account pair stays RSA 2048 since
ServiceAccount tokens are RS256 JWTs, as kube-apiserver's default."""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from .api import identity
from .netplan import CLUSTER_DOMAIN, DEFAULT_SERVICE_CIDR, KUBERNETES_SERVICE_INDEX, service_ip
from .statedir import write_atomic

CA_VALIDITY = datetime.timedelta(days=3650)        # kubeadm: 10 years
LEAF_VALIDITY = datetime.timedelta(days=365)       # kubeadm: 1 year
# Renewed at `kubemu up` when less than this is left: a quarter of a leaf's year, about where
# the kubelet rotates its own client certificate (70-90 % of its lifetime).
RENEW_BEFORE = datetime.timedelta(days=90)
# Against small clock differences between processes: a certificate is valid from a bit before.
BACKDATE = datetime.timedelta(minutes=5)

CA_NAME = "ca"
CA_COMMON_NAME = "kubernetes"
SA_KEY, SA_PUB = "sa.key", "sa.pub"
# kubeadm's default: the `kubernetes` Service's ClusterIP in serviceSubnet, where pods reach the apiserver
FIRST_SERVICE_IP = service_ip(DEFAULT_SERVICE_CIDR, KUBERNETES_SERVICE_INDEX)
APISERVER_DNS = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                 f"kubernetes.default.svc.{CLUSTER_DOMAIN}")
APISERVER_IPS = ("127.0.0.1", FIRST_SERVICE_IP)


@dataclass(frozen=True)
class CertSpec:
    """What one leaf certificate must say; `name` is its files' stem (<name>.crt, <name>.key)."""
    name: str
    common_name: str
    organizations: tuple[str, ...] = ()
    server: bool = False                     # serverAuth; otherwise clientAuth
    dns_names: tuple[str, ...] = ()
    ip_addresses: tuple[str, ...] = ()
    validity: datetime.timedelta = field(default=LEAF_VALIDITY, compare=False)




def apiserver_spec(advertise_address: str = "127.0.0.1", first_service_ip: str = FIRST_SERVICE_IP,
                   external_address: str | None = None) -> CertSpec:
    """The apiserver's serving certificate, as kubeadm makes it: its names for loopback, the
    address it advertises (the `kubernetes` Service's endpoint), the first service IP (the
    `kubernetes` Service's ClusterIP) and the address other machines reach it by (`up
    --apiserver-advertise-address`), so a client verifies it by any of them."""
    ips = tuple(dict.fromkeys(("127.0.0.1", advertise_address, first_service_ip,
                               *((external_address,) if external_address else ()))))
    return CertSpec("apiserver", "kube-apiserver", server=True, dns_names=APISERVER_DNS, ip_addresses=ips)


APISERVER = apiserver_spec()
ADMIN = CertSpec("admin", identity.ADMIN, (identity.ADMIN_GROUP,))
SCHEDULER = CertSpec("scheduler", identity.SCHEDULER)
CONTROLLER_MANAGER = CertSpec("controller-manager", identity.CONTROLLER_MANAGER)


def kubelet_spec(node: str) -> CertSpec:
    """The node's client certificate: the Node authorizer's and RBAC's `system:node:<node>`."""
    return CertSpec("kubelet-client", f"{identity.NODE_PREFIX}{node}", (identity.NODES,))


@dataclass(frozen=True)
class Pair:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey  # a CA the user put there may be RSA

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return key_pem(self.key)


# --- pure: what a certificate holds, and whether one is still good --------------------------

def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations] +
                     [x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _key_usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                         data_encipherment=False, key_agreement=False, key_cert_sign=cert_sign,
                         crl_sign=False, encipher_only=False, decipher_only=False)


def make_ca(key, now: datetime.datetime) -> x509.Certificate:
    name = _name(CA_COMMON_NAME)
    return (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(_key_usage(cert_sign=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))


def issue(spec: CertSpec, public_key, ca: Pair, now: datetime.datetime) -> x509.Certificate:
    """A leaf signed by the CA; it never outlives the CA."""
    not_after = min(now + spec.validity, ca.cert.not_valid_after_utc)
    builder = (x509.CertificateBuilder()
               .subject_name(_name(spec.common_name, spec.organizations)).issuer_name(ca.cert.subject)
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_key_usage(cert_sign=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if spec.server
                                                     else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                              critical=False))
    sans = [x509.DNSName(d) for d in spec.dns_names] + \
           [x509.IPAddress(ipaddress.ip_address(ip)) for ip in spec.ip_addresses]
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca.key, hashes.SHA256())


def subject_of(cert: x509.Certificate) -> tuple[str, tuple[str, ...]]:
    """(CN, the O's): the user and groups the apiserver reads from a client certificate."""
    cn = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = tuple(a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
    return (cn[0] if cn else "", orgs)


def sans_of(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set(), set()
    return set(ext.get_values_for_type(x509.DNSName)), {str(ip) for ip in ext.get_values_for_type(x509.IPAddress)}


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def renewal_reason(cert: x509.Certificate, key, now: datetime.datetime, spec: CertSpec | None = None,
                   ca: x509.Certificate | None = None) -> str | None:
    """Why the certificate on disk must be made again (None: keep it). Without `spec` it is
    the CA, checked for its key and expiry only."""
    if cert.public_key() != key.public_key():
        return "its key does not match"
    if cert.not_valid_after_utc - now < RENEW_BEFORE:
        return f"it expires on {cert.not_valid_after_utc:%Y-%m-%d}"
    if spec is None:
        return None
    if ca is not None and not signed_by(cert, ca):
        return "it is not signed by the cluster CA"
    if subject_of(cert) != (spec.common_name, spec.organizations):
        return "its subject changed"
    if sans_of(cert) != (set(spec.dns_names), set(spec.ip_addresses)):
        return "its names (SANs) changed"
    return None


# --- the shell: files under a pki directory ---------------------------------------------------

def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def make_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def _load(directory: Path, name: str) -> tuple[x509.Certificate, object] | None:
    try:
        cert = x509.load_pem_x509_certificate((directory / f"{name}.crt").read_bytes())
        key = serialization.load_pem_private_key((directory / f"{name}.key").read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    return cert, key


def _save(directory: Path, name: str, pair: Pair) -> None:
    write_atomic(directory / f"{name}.key", pair.key_pem)  # key first: a cert without its key is renewed
    write_atomic(directory / f"{name}.crt", pair.cert_pem, 0o644)


def ensure_ca(pki_dir: Path, now: datetime.datetime | None = None) -> tuple[Pair, str | None]:
    """The cluster CA from pki_dir, made (or made again) when missing or due; (the pair, why
    it was made or None when reused)."""
    now = now or utcnow()
    make_dir(pki_dir)
    found = _load(pki_dir, CA_NAME)
    reason = "missing" if found is None else renewal_reason(*found, now)
    if reason is None:
        return Pair(*found), None
    key = new_key()
    pair = Pair(make_ca(key, now), key)
    _save(pki_dir, CA_NAME, pair)
    return pair, reason


def ensure_cert(directory: Path, spec: CertSpec, ca: Pair, now: datetime.datetime | None = None
                ) -> tuple[Pair, str | None]:
    """The leaf `spec` from directory, issued (with a new key) when missing or due; (the pair,
    why it was issued or None when reused)."""
    now = now or utcnow()
    make_dir(directory)
    found = _load(directory, spec.name)
    reason = "missing" if found is None else renewal_reason(*found, now, spec, ca.cert)
    if reason is None:
        return Pair(*found), None
    key = new_key()
    pair = Pair(issue(spec, key.public_key(), ca, now), key)
    _save(directory, spec.name, pair)
    return pair, reason


def ensure_service_account_keys(pki_dir: Path) -> bool:
    """sa.key / sa.pub (RSA 2048, PEM) as kubeadm makes them, kept once made; True if made.
    A pair whose halves do not match is made again (tokens signed by the old key stop verifying,
    as they would after kubeadm's)."""
    make_dir(pki_dir)
    try:
        key = serialization.load_pem_private_key((pki_dir / SA_KEY).read_bytes(), password=None)
        pub = serialization.load_pem_public_key((pki_dir / SA_PUB).read_bytes())
        if isinstance(key, rsa.RSAPrivateKey) and key.public_key() == pub:
            return False
    except (OSError, ValueError, TypeError):
        pass
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_atomic(pki_dir / SA_KEY, key_pem(key))
    write_atomic(pki_dir / SA_PUB, key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo), 0o644)
    return True
