"""Who is asking: a request's credentials to a UserInfo, as kube-apiserver's authenticators do.

    authn = Authenticator(client_ca_file, [sa_pub], issuer,
                          token_lookup=service_account_lookup(api),
                          bound_lookup=bound_object_lookup(api))
    user = await authn.authenticate(peer_cert_der, authorization_header)
    # None: no credentials; AuthenticationError (a 401 Unauthorized): bad ones

Two authenticators, tried in kube-apiserver's order, the first that knows the caller wins:

* x509 client certificates (the x509 request authenticator): the certificate must be issued by
  a certificate of the client CA bundle, be valid now, and allow client authentication if it
  restricts its extended key usages. The common name is the user, each organization a group.
  The TLS layer verified the chain already; this verifies again (the issuer's signature and
  the validity window) because the same function serves transports that do not.
* `Authorization: Bearer <token>`: ServiceAccount JWTs (kubemu.serviceaccount_token) of the
  configured issuer, for the API's audiences (the issuer), whose ServiceAccount still exists
  with the uid the token names (asked through the injected `token_lookup(namespace, name)`,
  an awaitable of the uid or None), as kube-apiserver's service account token getter checks;
  a token bound to a Pod or Secret (TokenRequest's boundObjectRef) only while that object
  exists with the uid the token names (asked through `bound_lookup(kind, namespace, name)`;
  without one, bound objects are not checked).
* bootstrap tokens (`<id>.<secret>`, kubemu.bootstraptoken), when a `bootstrap_lookup(name)`
  (an awaitable of the kube-system Secret of that name, or None) is given: the token's Secret
  must hold this secret, be unexpired, allow authentication and not be being deleted; the
  user is system:bootstrap:<id> in system:bootstrappers and the token's auth-extra-groups.

Every authenticated user also gets the group system:authenticated. A bad certificate does not
stop a good token from authenticating the request (kube-apiserver's union authenticator goes on
to the next one); when neither succeeds the first error is the answer.
"""
from __future__ import annotations

import datetime
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID

from kubemu import bootstraptoken
from kubemu import serviceaccount_token as satoken
from kubemu.api.identity import UserInfo, authenticated
from kubemu.pki import signed_by, subject_of
from kubemu.wire import NotFound, WireError

TokenLookup = Callable[[str, str], Awaitable[str | None]]         # (namespace, name) -> uid
BoundLookup = Callable[[str, str, str], Awaitable[str | None]]    # (kind, namespace, name) -> uid
SecretLookup = Callable[[str], Awaitable[dict | None]]            # kube-system Secret name -> it
CERT_CACHE_SIZE = 1024   # verified client certificates remembered (a verify per request costs)


class AuthenticationError(WireError):
    """Credentials that do not authenticate anyone: a 401 Unauthorized."""
    code = "Unauthorized"


def load_certificates(path: str | Path) -> list[x509.Certificate]:
    certs = x509.load_pem_x509_certificates(Path(path).read_bytes())
    if not certs:
        raise ValueError(f"{path}: no certificate in it")
    return certs


def _hex(data: bytes | None) -> str:
    return ":".join(f"{b:02X}" for b in data or b"")


def _extension_value(cert: x509.Certificate, oid) -> object | None:
    try:
        return cert.extensions.get_extension_for_oid(oid).value
    except x509.ExtensionNotFound:
        return None


def certificate_identifier(cert: x509.Certificate) -> str:
    """How kube-apiserver names a certificate in its messages: SN=..., SKID=..., AKID=..."""
    ski = _extension_value(cert, ExtensionOID.SUBJECT_KEY_IDENTIFIER)
    aki = _extension_value(cert, ExtensionOID.AUTHORITY_KEY_IDENTIFIER)
    return (f"SN={cert.serial_number}, SKID={_hex(getattr(ski, 'digest', None))}, "
            f"AKID={_hex(getattr(aki, 'key_identifier', None))}")


def _go_time(t: datetime.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _is_ca(cert: x509.Certificate) -> bool:
    constraints = _extension_value(cert, ExtensionOID.BASIC_CONSTRAINTS)
    return bool(getattr(constraints, "ca", False))


def _verify_error(cert: x509.Certificate, cas: list[x509.Certificate],
                  now: datetime.datetime) -> str | None:
    """Why `cert` is not a valid client certificate issued by one of `cas` (Go's x509 words),
    or None when it is one."""
    issuers = [ca for ca in cas if ca.subject == cert.issuer and _is_ca(ca) and signed_by(cert, ca)]
    if not issuers:
        return "x509: certificate signed by unknown authority"
    for c in (cert, *issuers[:1]):
        if now < c.not_valid_before_utc:
            return (f"x509: certificate has expired or is not yet valid: current time "
                    f"{_go_time(now)} is before {_go_time(c.not_valid_before_utc)}")
        if now > c.not_valid_after_utc:
            return (f"x509: certificate has expired or is not yet valid: current time "
                    f"{_go_time(now)} is after {_go_time(c.not_valid_after_utc)}")
    usages = _extension_value(cert, ExtensionOID.EXTENDED_KEY_USAGE)
    if usages is not None and ExtendedKeyUsageOID.CLIENT_AUTH not in usages \
            and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in usages:
        return "x509: certificate specifies an incompatible key usage"
    return None


def certificate_user(cert: x509.Certificate, cas: list[x509.Certificate],
                     now: datetime.datetime) -> UserInfo | None:
    """The user a client certificate authenticates: CN the name, O the groups. None for a
    certificate without a common name (it names nobody: other credentials may); raises
    AuthenticationError for one the client CA did not issue or that is not valid at `now`."""
    problem = _verify_error(cert, cas, now)
    if problem is not None:
        raise AuthenticationError(f"verifying certificate {certificate_identifier(cert)} "
                                  f"failed: {problem}")
    name, groups = subject_of(cert)
    return authenticated(name, groups) if name else None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case); None
    for any other header (kube-apiserver's bearertoken authenticator)."""
    parts = (authorization or "").strip().split(" ")
    if len(parts) < 2 or parts[0].lower() != "bearer" or not parts[1]:
        return None
    return parts[1]


async def _uid(api, resource: str, namespace: str, name: str) -> str | None:
    try:
        obj = await api.get(resource, name, namespace)
    except NotFound:
        return None
    return (obj.get("metadata") or {}).get("uid")


def service_account_lookup(api) -> TokenLookup:
    """A token_lookup over the handlers' API (its `get`): the uid of a ServiceAccount, None
    when there is none."""
    return lambda namespace, name: _uid(api, "serviceaccounts", namespace, name)


def bootstrap_secret_lookup(api) -> SecretLookup:
    """A bootstrap_lookup over the handlers' API: a kube-system Secret, None when there is none."""
    async def lookup(name: str) -> dict | None:
        try:
            return await api.get("secrets", name, bootstraptoken.NAMESPACE)
        except NotFound:
            return None
    return lookup


def bound_object_lookup(api) -> BoundLookup:
    """A bound_lookup over the handlers' API: the uid of the Pod or Secret a token is bound
    to, None when there is none."""
    return lambda kind, namespace, name: _uid(api, satoken.BOUND_RESOURCES[kind], namespace, name)


class Authenticator:
    def __init__(self, client_ca_file: str | None, service_account_key_files: list[str],
                 issuer: str = satoken.DEFAULT_ISSUER, token_lookup: TokenLookup | None = None,
                 *, bound_lookup: BoundLookup | None = None,
                 bootstrap_lookup: SecretLookup | None = None,
                 clock: Callable[[], float] = time.time):
        self.client_cas = load_certificates(client_ca_file) if client_ca_file else []
        self.keys = [key for path in service_account_key_files
                     for key in satoken.load_public_keys(path)]
        self.issuer = issuer
        self.audiences = (issuer,)   # --api-audiences defaults to the issuer
        self.token_lookup = token_lookup
        self.bound_lookup = bound_lookup
        self.bootstrap_lookup = bootstrap_lookup
        self.clock = clock
        self._certs: OrderedDict[bytes, tuple] = OrderedDict()

    async def authenticate(self, peer_cert_der: bytes | None,
                           authorization: str | None) -> UserInfo | None:
        """The caller, from its client certificate or its bearer token; None when it presents
        neither; AuthenticationError when what it presents authenticates nobody."""
        failure: AuthenticationError | None = None
        if peer_cert_der:
            try:
                user = self.authenticate_certificate(peer_cert_der)
            except AuthenticationError as err:
                failure = err
            else:
                if user is not None:
                    return user
        token = bearer_token(authorization)
        if token is not None:
            try:
                return (await self.authenticate_token(token))[0]
            except AuthenticationError as err:
                failure = failure or err
        if failure is not None:
            raise failure
        return None

    def authenticate_certificate(self, der: bytes) -> UserInfo | None:
        """certificate_user for a DER certificate. Accepted ones are remembered with the
        window in which they and every client CA are valid, still checked on each use."""
        now = datetime.datetime.fromtimestamp(self.clock(), datetime.timezone.utc)
        known = self._certs.get(der)
        if known is not None:
            user, valid_from, valid_until = known
            if valid_from <= now <= valid_until:
                self._certs.move_to_end(der)
                return user
            del self._certs[der]
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError as err:
            raise AuthenticationError(f"malformed client certificate: {err}") from None
        user = certificate_user(cert, self.client_cas, now)
        certs = (cert, *self.client_cas)
        self._certs[der] = (user, max(c.not_valid_before_utc for c in certs),
                            min(c.not_valid_after_utc for c in certs))
        if len(self._certs) > CERT_CACHE_SIZE:
            self._certs.popitem(last=False)
        return user

    async def authenticate_token(self, token: str, audiences: tuple[str, ...] | None = None
                                 ) -> tuple[UserInfo, tuple[str, ...]]:
        """(user, the audiences the token was accepted for) of a bearer token, checked against
        `audiences` (default: the API's); AuthenticationError when it authenticates nobody."""
        if self.bootstrap_lookup is not None and bootstraptoken.is_token(token):
            return await self._bootstrap_token(token), audiences or self.audiences
        try:
            verified = satoken.verify(token, self.keys, self.issuer,
                                      audiences=audiences or self.audiences, now=self.clock())
        except satoken.TokenError as err:
            raise AuthenticationError(str(err)) from None
        if verified is None:
            raise AuthenticationError("invalid bearer token")
        if self.token_lookup is not None:
            uid = await self.token_lookup(verified.namespace, verified.name)
            if uid is None:
                raise AuthenticationError(f'serviceaccounts "{verified.name}" not found')
            if uid != verified.uid:
                raise AuthenticationError(f"service account UID ({uid}) does not match claim "
                                          f"({verified.uid})")
        if self.bound_lookup is not None:
            await self._check_bound(verified)
        return satoken.user_info(verified), verified.audiences

    async def _bootstrap_token(self, token: str) -> UserInfo:
        token_id, secret = bootstraptoken.parse(token)
        found = await self.bootstrap_lookup(bootstraptoken.secret_name(token_id))
        decided = bootstraptoken.authenticated_user(found, token_id, secret, self.clock())
        if isinstance(decided, str):
            raise AuthenticationError(f"bootstrap token: {decided}")
        return authenticated(*decided)

    async def _check_bound(self, verified: satoken.Verified) -> None:
        """The objects the token is bound to are still there, the same ones (kube-apiserver's
        validator: deleting the pod or secret invalidates the token)."""
        for kind, ref in (("Secret", verified.secret), ("Pod", verified.pod)):
            if ref is None:
                continue
            name, claimed = ref
            uid = await self.bound_lookup(kind, verified.namespace, name)
            if uid is None:
                raise AuthenticationError("service account token has been invalidated")
            if uid != claimed:
                raise AuthenticationError(f"{kind.lower()} UID ({uid}) does not match service "
                                          f"account {kind.lower()} ref claim ({claimed})")
