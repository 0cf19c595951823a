"""python -m components.apiserver --listen ENDPOINT --store-endpoints EP1,EP2,EP3 [--audit-log FILE]
       [--secure-port 6443 --bind-address 127.0.0.1 --advertise-address 127.0.0.1 [--external-address IP] --permit-port-sharing
        --tls-cert-file F --tls-private-key-file F
        --client-ca-file F --service-account-key-file F --service-account-signing-key-file F]
       [--service-cluster-ip-range 10.96.0.0/12] [--service-node-port-range 30000-32767]
       [--wire-listen-address tcp://HOST:PORT [--wire-curve-dir DIR]]"""
from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys

from kubemu import eventloop, wirekeys
from kubemu._wire_auth import credentials_flag
from kubemu.serviceaccount_token import DEFAULT_ISSUER

from .handlers import BOOKMARK_INTERVAL
from .serviceips import DEFAULT_NODE_PORT_RANGE, DEFAULT_SERVICE_CIDR, parse_port_range
from .server import ADVERTISE_ADDRESS, BIND_ADDRESS, SECURE_PORT, APIServer, HTTPSConfig, ServiceConfig, \
    StartupError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m components.apiserver",
                                description="kubemu's apiserver: the only door to the store")
    p.add_argument("--listen", required=True, help="wire endpoint to serve on (ipc:// or tcp://)")
    p.add_argument("--store-endpoints", required=True, help="the store replicas' endpoints, comma-separated")
    p.add_argument("--audit-log", default=None, help="append one JSON line per mutating request to FILE")
    p.add_argument("--bookmark-interval", type=float, default=BOOKMARK_INTERVAL,
                   help=f"seconds between BOOKMARK events on idle watches that ask for them "
                        f"(default {BOOKMARK_INTERVAL:g})")
    p.add_argument("--state-dir", default=os.environ.get("KUBEMU_STATE_DIR"),
                   help="the cluster's state directory, where the kubelets keep pod logs "
                        "(default $KUBEMU_STATE_DIR); without it the log subresource is unavailable")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    p.add_argument("--wire-secrets", metavar="DIR", default=None,
                   help="require every wire peer to authenticate with an identity's secret in DIR "
                        "(<identity>.secret); its requests are then authorized with RBAC")
    p.add_argument("--store-credentials", metavar="FILE", type=credentials_flag, default=None,
                   help="present this identity's secret (<identity>.secret) to the store replicas")
    p.add_argument("--wire-listen-address", metavar="tcp://HOST:PORT", default=None,
                   help="also serve the wire on this tcp address, which may be beyond loopback: with CURVE, every "
                        "peer presenting a client key of --wire-curve-dir, its requests authorized with RBAC")
    p.add_argument("--wire-curve-dir", metavar="DIR", default=None,
                   help="the wire's CURVE keys: server.key_secret (made if absent; give server.key to the "
                        "clients) and clients/<identity>.key, the public key of each peer it knows "
                        "(default <--state-dir>/pki/wire-curve)")
    https = p.add_argument_group("HTTPS (the Kubernetes REST API), as kube-apiserver names its flags")
    https.add_argument("--secure-port", type=int, default=SECURE_PORT,
                       help=f"port of the HTTPS API (default {SECURE_PORT}; 0: not served)")
    https.add_argument("--bind-address", default=BIND_ADDRESS,
                       help=f"address the HTTPS API listens on (default {BIND_ADDRESS})")
    https.add_argument("--permit-port-sharing", action="store_true",
                       help="bind the secure port with SO_REUSEPORT, so that the apiservers of one cluster share "
                            "it and the kernel spreads connections over those alive (default false)")
    https.add_argument("--advertise-address", default=ADVERTISE_ADDRESS,
                       help="the address the `kubernetes` Service's endpoints name, listened on too when "
                            f"it is not --bind-address (default {ADVERTISE_ADDRESS})")
    https.add_argument("--external-address", default=None,
                       help="also listen on this address, where clients on other machines reach the API "
                            "(`kubemu up --apiserver-advertise-address`); the `kubernetes` Service keeps "
                            "naming --advertise-address, the pods' way in (default: none)")
    https.add_argument("--tls-cert-file", default=None,
                       help="the serving certificate (PEM); without it HTTPS is not served")
    https.add_argument("--tls-private-key-file", default=None, help="the serving certificate's key (PEM)")
    https.add_argument("--client-ca-file", default=None,
                       help="CA bundle that signs client certificates (x509 authentication)")
    https.add_argument("--service-account-key-file", action="append", default=[],
                       help="public key(s) that verify ServiceAccount tokens (repeatable)")
    https.add_argument("--service-account-signing-key-file", default=None,
                       help="private key that signs ServiceAccount tokens (TokenRequest)")
    https.add_argument("--service-account-issuer", default=DEFAULT_ISSUER,
                       help=f"the tokens' iss claim (default {DEFAULT_ISSUER})")
    https.add_argument("--kubelet-client-credentials", metavar="FILE", type=credentials_flag, default=None,
                       help="present this identity's secret (<identity>.secret) to the kubelets, which serve "
                            "pods/exec and pods/attach (kube-apiserver's --kubelet-client-certificate)")
    services = p.add_argument_group("Services")
    services.add_argument("--service-cluster-ip-range", default=DEFAULT_SERVICE_CIDR,
                          help=f"the CIDR Services' clusterIPs come from (default {DEFAULT_SERVICE_CIDR})")
    services.add_argument("--service-node-port-range", default=DEFAULT_NODE_PORT_RANGE,
                          help=f"the ports NodePort Services get (default {DEFAULT_NODE_PORT_RANGE})")
    return p


def service_config(args: argparse.Namespace) -> ServiceConfig:
    """The Service flags, or SystemExit saying which one is wrong."""
    try:
        cidr = ipaddress.IPv4Network(args.service_cluster_ip_range, strict=True)
    except ValueError as err:
        raise SystemExit(f"--service-cluster-ip-range {args.service_cluster_ip_range}: not an IPv4 CIDR "
                         f"({err})") from None
    if cidr.num_addresses < 4:
        raise SystemExit(f"--service-cluster-ip-range {cidr}: too small (the kubernetes Service takes its "
                         "first address)")
    try:
        ports = parse_port_range(args.service_node_port_range)
    except ValueError as err:
        raise SystemExit(f"--service-node-port-range {err}") from None
    return ServiceConfig(cluster_ip_range=str(cidr), node_port_range=ports)


def https_config(args: argparse.Namespace) -> HTTPSConfig:
    if not 0 <= args.secure_port <= 65535:
        raise SystemExit(f"--secure-port {args.secure_port}: not a port (0 disables HTTPS)")
    if args.tls_cert_file and not args.tls_private_key_file:
        raise SystemExit("--tls-cert-file needs --tls-private-key-file")
    for flag, address in (("--advertise-address", args.advertise_address),
                          ("--external-address", args.external_address)):
        try:
            if address is not None:
                ipaddress.ip_address(address)
        except ValueError:
            raise SystemExit(f"{flag} {address}: not an IP address") from None
    return HTTPSConfig(port=args.secure_port, bind_address=args.bind_address,
                       permit_port_sharing=args.permit_port_sharing, advertise_address=args.advertise_address,
                       external_address=args.external_address,
                       cert_file=args.tls_cert_file,
                       key_file=args.tls_private_key_file, client_ca_file=args.client_ca_file,
                       service_account_key_files=args.service_account_key_file,
                       service_account_signing_key_file=args.service_account_signing_key_file,
                       service_account_issuer=args.service_account_issuer,
                       kubelet_client_credentials=args.kubelet_client_credentials)


def curve_dir(args: argparse.Namespace) -> str | None:
    """Where the CURVE keys of --wire-listen-address are, or SystemExit saying what is missing."""
    if not args.wire_listen_address:
        return None
    if not args.wire_listen_address.startswith("tcp://"):
        raise SystemExit(f"--wire-listen-address {args.wire_listen_address}: expected tcp://HOST:PORT")
    if args.wire_curve_dir:
        return args.wire_curve_dir
    if args.state_dir:
        return str(wirekeys.curve_dir(args.state_dir))
    raise SystemExit("--wire-listen-address needs --wire-curve-dir (or --state-dir) for its CURVE keys")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stdout,
                        format="%(asctime)s apiserver[%(process)d] %(levelname)s %(name)s: %(message)s")
    try:
        return eventloop.run(APIServer(args.listen, args.store_endpoints, audit_log=args.audit_log,
                                      bookmark_interval=args.bookmark_interval, state_dir=args.state_dir,
                                      https=https_config(args), wire_secrets=args.wire_secrets,
                                      store_credentials=args.store_credentials,
                                      services=service_config(args), wire_listen=args.wire_listen_address,
                                      wire_curve_dir=curve_dir(args)).run())
    except StartupError as err:
        print(f"apiserver: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
