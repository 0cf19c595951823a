"""Wiring: the store client, the watch cache, the audit log, the wire server and the HTTPS door.

Both transports call the same handler table (`API.handlers()`); HTTPS adds authentication
(client certificates of --client-ca-file, ServiceAccount tokens), RBAC, discovery and OpenAPI
(rest/). READY=1 is sent once both listen; SIGTERM closes both. A file the HTTPS door cannot
read, or its port taken, is a StartupError: `__main__` says it in one line and exits 1.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import signal
from contextlib import contextmanager
from dataclasses import dataclass, field

import zmq
from cryptography.exceptions import UnsupportedAlgorithm

from kubemu import sdnotify
from kubemu import serviceaccount_token as satoken
from kubemu import wirekeys
from kubemu._wire_auth import Credentials, CurveAuth, ServerAuth
from kubemu.api.authz import forbidden_message
from kubemu.api.bootstrap_policy import bootstrap_objects
from kubemu.api.resources import for_object
from kubemu.gcfreeze import keep_frozen
from kubemu.wire import Conflict, Forbidden, Invalid, Server, WireError
from store.client import StoreClient

from .audit import AuditLog
from .authn import Authenticator, bootstrap_secret_lookup, bound_object_lookup, service_account_lookup
from .handlers import API, BOOKMARK_INTERVAL
from .kubernetes_service import Reconciler, desired
from .nodekeycache import NodeKeyCache
from .rbaccache import RBACCache
from .rest import discovery, openapi
from .rest.app import RestAPI
from .rest.server import HTTPSServer, ssl_context
from .reviews import Reviews
from .serviceips import DEFAULT_NODE_PORT_RANGE, DEFAULT_SERVICE_CIDR, PortRange, parse_port_range
from .servicestrategy import Allocations
from .storage import Storage
from .tokens import Tokens
from .watchcache import WatchCache
from .wireauthz import attributes, user_info

log = logging.getLogger("kubemu.apiserver")

SECURE_PORT = 6443
BIND_ADDRESS = "127.0.0.1"
ADVERTISE_ADDRESS = "127.0.0.1"
UNSPECIFIED = ("0.0.0.0", "::")
BOOTSTRAP_POLL = 0.01
WIRE_USERS_KEPT = 4096  # wire identities whose UserInfo is remembered (nodes, components, the admin)


@dataclass(frozen=True)
class HTTPSConfig:
    """kube-apiserver's flags for its secure port (port 0 or no certificate: not served)."""
    port: int = SECURE_PORT
    bind_address: str = BIND_ADDRESS
    permit_port_sharing: bool = False  # SO_REUSEPORT: the apiservers of an HA cluster share the port
    advertise_address: str = ADVERTISE_ADDRESS  # where pods reach it: listened on too
    external_address: str | None = None  # where other machines reach it (kubeadm's advertise address)
    cert_file: str | None = None
    key_file: str | None = None
    client_ca_file: str | None = None
    service_account_key_files: list[str] = field(default_factory=list)
    service_account_signing_key_file: str | None = None
    service_account_issuer: str = satoken.DEFAULT_ISSUER
    kubelet_client_credentials: Credentials | None = None  # presented to the kubelets (exec, attach)

    def hosts(self) -> list[str]:
        """The addresses the door listens on: --bind-address, and --advertise-address and
        --external-address when they are other (specific) addresses, so that the `kubernetes`
        Service's endpoint and other machines' clients are answered."""
        hosts = [self.bind_address]
        if self.bind_address in UNSPECIFIED:
            return hosts
        for also in (self.advertise_address, self.external_address):
            if also is not None and also not in (*hosts, *UNSPECIFIED):
                hosts.append(also)
        return hosts


@dataclass(frozen=True)
class ServiceConfig:
    """kube-apiserver's Service flags."""
    cluster_ip_range: str = DEFAULT_SERVICE_CIDR
    node_port_range: PortRange = parse_port_range(DEFAULT_NODE_PORT_RANGE)


class APIServer:
    def __init__(self, listen: str, store_endpoints, *, audit_log: str | None = None,
                 bookmark_interval: float = BOOKMARK_INTERVAL, state_dir: str | None = None,
                 https: HTTPSConfig = HTTPSConfig(), wire_secrets: str | None = None,
                 store_credentials: Credentials | None = None, services: ServiceConfig = ServiceConfig(),
                 wire_listen: str | None = None, wire_curve_dir: str | None = None):
        self.wire_listen = wire_listen  # also served there, with CURVE (keys in wire_curve_dir)
        self.wire_curve_dir = wire_curve_dir
        self.services = services
        self.state_dir = state_dir
        self.wire_secrets = wire_secrets
        self.store_credentials = store_credentials
        self.listen = listen
        self.store_endpoints = store_endpoints
        self.audit_path = audit_log
        self.bookmark_interval = bookmark_interval
        self.https = https
        self.bootstrapped = False

    async def run(self) -> int:
        client = StoreClient(self.store_endpoints, credentials=self.store_credentials)
        cache = WatchCache(client)
        audit = AuditLog(self.audit_path)
        rbac = RBACCache(cache)
        node_keys = NodeKeyCache(cache) if self.wire_listen else None
        api = API(Storage(client), cache, audit, bookmark_interval=self.bookmark_interval,
                  state_dir=self.state_dir,
                  services=Allocations(self.services.cluster_ip_range, self.services.node_port_range),
                  authorize=rbac.authorize, key_owners=None if node_keys is None else node_keys.owners)
        auth = ServerAuth(self.wire_secrets, self._wire_authorizer(rbac)) if self.wire_secrets else None
        server = curve_server = None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await rbac.start()
        if node_keys is not None:
            node_keys.start()
        https = None
        reconciler = None
        init = asyncio.create_task(self._bootstrap(api, rbac), name="bootstrap")
        repair = asyncio.create_task(api.service_allocator.run(), name="service allocation repair")
        freezing = asyncio.create_task(keep_frozen(), name="gc freezer")
        try:
            https, tokens = self._https_door(api, rbac)  # its files are read before anything listens
            # TokenRequest and the access reviews on the wire too: the kubelet asks for its pods'
            # projected tokens, the CSR approver (a SubjectAccessReview) whether a requester may
            handlers = {**api.handlers(), "review": Reviews(rbac).review, **tokens}
            server = Server(self.listen, handlers, name="apiserver", auth=auth)
            curve_server = self._curve_server(handlers, rbac, node_keys)
            if auth is not None or curve_server is not None:
                # authorizing needs the roles: the wire opens once they are there, as
                # kube-apiserver is not ready before its RBAC bootstrap
                await _first(init, stop.wait())
            if curve_server is not None:  # the joined nodes' keys listed first, or a joined kubelet
                # reconnecting right after a restart would be refused once
                await _first(node_keys.wait_listed(), stop.wait())
            if not stop.is_set():
                await server.start()
                log.info("serving on %s (store %s)%s", server.endpoint, ",".join(client.endpoints),
                         ", authenticating every peer" if auth else "")
                if curve_server is not None:
                    with _starting(f"--wire-listen-address {self.wire_listen}"):
                        await curve_server.start()
                    log.info("serving the wire on %s with CURVE (keys in %s)", curve_server.endpoint,
                             self.wire_curve_dir)
                if https is not None:
                    cfg = self.https
                    also = "".join(f" {flag} {address}" for flag, address in
                                   (("--advertise-address", cfg.advertise_address),
                                    ("--external-address", cfg.external_address))
                                   if address in cfg.hosts()[1:])
                    with _starting(f"--bind-address {cfg.bind_address}{also} --secure-port {cfg.port}"):
                        port = await https.start()
                    log.info("serving HTTPS on %s:%d", ", ".join(cfg.hosts()), port)
                    reconciler = asyncio.create_task(self._kubernetes_service(api, init, port),
                                                     name="kubernetes service")
                sdnotify.notify("READY=1\nSTATUS=serving")
                await stop.wait()
        finally:
            log.info("shutting down")
            init.cancel()
            repair.cancel()
            freezing.cancel()
            if reconciler is not None:
                reconciler.cancel()
            if https is not None:
                await https.close()
            if server is not None:
                await server.close()
            if curve_server is not None:
                await curve_server.close()
            if node_keys is not None:
                await node_keys.close()
            await rbac.close()
            await api.namespaces.close()
            await cache.close()
            await client.close()
            audit.close()
        return 0

    def _https_door(self, api: API, rbac: RBACCache) -> tuple[HTTPSServer | None, dict]:
        """The HTTPS listener, not yet listening (None when it is not served), and the
        TokenRequest handler when a signing key is configured ({} otherwise). Raises
        StartupError for a file it cannot read."""
        cfg = self.https
        if cfg.port == 0:
            log.info("HTTPS is not served (--secure-port 0)")
            return None, {}
        if not cfg.cert_file:
            log.info("HTTPS is not served: no --tls-cert-file")
            return None, {}
        with _starting("--client-ca-file / --service-account-key-file"):
            authn = Authenticator(cfg.client_ca_file, cfg.service_account_key_files, cfg.service_account_issuer,
                                  token_lookup=service_account_lookup(api), bound_lookup=bound_object_lookup(api),
                                  bootstrap_lookup=bootstrap_secret_lookup(api))
        handlers = dict(api.handlers())
        reviews = Reviews(rbac)
        handlers["review"] = reviews.review
        wire_tokens = {}
        if cfg.service_account_signing_key_file:
            with _starting(f"--service-account-signing-key-file {cfg.service_account_signing_key_file}"):
                signer = satoken.Signer.from_file(cfg.service_account_signing_key_file, cfg.service_account_issuer)
            tokens = Tokens(api, signer, authn)
            handlers.update(token_request=tokens.token_request, token_review=tokens.token_review,
                            self_subject_review=tokens.self_subject_review)
            wire_tokens["token_request"] = tokens.token_request
        rest = RestAPI(handlers, authn, rbac, state_dir=self.state_dir,
                       kubelet_credentials=cfg.kubelet_client_credentials, audit=api.audit.record,
                       discovery=discovery, openapi=openapi,
                       ready=lambda: self.bootstrapped and rbac.synced)
        with _starting(f"--tls-cert-file {cfg.cert_file} / --tls-private-key-file {cfg.key_file}"
                       + (f" / --client-ca-file {cfg.client_ca_file}" if cfg.client_ca_file else "")):
            context = ssl_context(cfg.cert_file, cfg.key_file, cfg.client_ca_file)
        return HTTPSServer(rest.serve, cfg.hosts(), cfg.port, context, on_close=rest.close,
                           reuse_port=cfg.permit_port_sharing), wire_tokens

    def _curve_server(self, handlers: dict, rbac: RBACCache, node_keys: NodeKeyCache) -> Server | None:
        """The wire beyond loopback (--wire-listen-address), not yet listening: CURVE with this
        apiserver's key pair (made if absent, as kube-apiserver makes its own serving certificate
        in --cert-dir), a peer known by its public key in clients/, else as the joined node whose
        Node annotation names that key (nodekeys.py), authorized with RBAC."""
        if not self.wire_listen:
            return None
        directory = self.wire_curve_dir
        with _starting(f"--wire-curve-dir {directory}"):
            keys = wirekeys.ensure_keypair(directory, wirekeys.SERVER)
        known = wirekeys.KnownKeys(wirekeys.clients_dir(directory))
        auth = CurveAuth(keys.public, keys.secret, node_keys.chain(known), self._wire_authorizer(rbac))
        with _starting(f"--wire-listen-address {self.wire_listen}"):
            return Server(self.wire_listen, handlers, name="apiserver", auth=auth)

    async def _kubernetes_service(self, api: API, bootstrap: asyncio.Task, port: int) -> None:
        """Once the default namespace is there, keep the `kubernetes` Service pointing at the
        HTTPS door (kube-apiserver's endpoint reconciler). The apiservers of an HA cluster share
        the advertised address and port (--permit-port-sharing): they all want the same three
        objects, so several reconcilers agree instead of taking turns rewriting them."""
        await asyncio.shield(bootstrap)
        want = desired(self.services.cluster_ip_range, self.https.advertise_address, port)
        await Reconciler(api, want, self.services.cluster_ip_range).run()

    @staticmethod
    def _wire_authorizer(rbac: RBACCache):
        """The wire's authorize hook: the same RBAC rules as HTTPS, on what the method names."""
        users = functools.lru_cache(maxsize=WIRE_USERS_KEPT)(user_info)  # pure, asked per message

        def authorize(identity: str, method: str, params: dict) -> None:
            attrs = attributes(users(identity), method, params)
            if attrs is None:
                raise Forbidden(f'User "{identity}" cannot call {method!r}: no authorization rule names it')
            decision = rbac.authorize(attrs)
            if not decision.allowed:
                raise Forbidden(forbidden_message(attrs, decision.reason))
        return authorize

    async def _bootstrap(self, api: API, rbac: RBACCache) -> None:
        """Create the system namespaces and the default RBAC policy (each if absent), retrying
        until the store answers."""
        delay = 0.1
        while True:
            try:
                await api.ensure_system_namespaces()
                await rbac.wait_synced()
                written = []
                for obj in bootstrap_objects():
                    if rbac.has(obj):
                        continue
                    try:
                        await api.create(for_object(obj).plural, obj)
                        written.append(obj)
                    except Conflict:
                        pass
                    except Invalid as err:  # a policy object this build refuses: serve without it
                        log.error("default RBAC policy: %s", err.message)
                while not all(map(rbac.has, written)):  # ready means the cache decides with them
                    await asyncio.sleep(BOOTSTRAP_POLL)
                self.bootstrapped = True
                return
            except WireError as err:
                log.info("creating the system namespaces and the default roles: %s (retrying)", err)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)


class StartupError(Exception):
    """What the apiserver cannot start with (a flag's file, the secure port): `<what>: <reason>`."""


@contextmanager
def _starting(what: str):
    # ssl.SSLError is an OSError; cryptography's loaders raise ValueError, TypeError (a key
    # that needs a password) and UnsupportedAlgorithm; a wire bind, zmq.ZMQError
    try:
        yield
    except (OSError, ValueError, TypeError, UnsupportedAlgorithm, zmq.ZMQError) as err:
        raise StartupError(f"{what}: {err}") from None


async def _first(*aws) -> None:
    """Wait until the first of `aws` is done; cancel the rest (a task given is left running)."""
    tasks = [a if isinstance(a, asyncio.Task) else asyncio.ensure_future(a) for a in aws]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for t, a in zip(tasks, aws):
        if t in pending and t is not a:
            t.cancel()
