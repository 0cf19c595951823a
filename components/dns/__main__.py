"""python -m components.dns --api ENDPOINT [--wire-credentials FILE] [--cluster-domain DOMAIN]
[--port 53] [--bind-address ADDR] [--health-port 8080] [--ready-port 8181] [--ttl 5] [--log-level LEVEL]"""
from __future__ import annotations

import argparse
import logging
import sys

import dns.exception
import dns.name

from kubemu import eventloop, netnsinfo
from kubemu._wire_auth import CREDENTIALS_HELP, credentials_flag

from . import zone
from .server import DNSServer

MAX_TTL = 3600   # CoreDNS's cap on the kubernetes plugin's `ttl`


def _domain(text: str) -> str:
    try:
        name = dns.name.from_text(text)
    except dns.exception.DNSException as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not a domain name: {err}") from None
    if name == dns.name.root:
        raise argparse.ArgumentTypeError("the cluster domain cannot be the root")
    if zone.domain_length(name) > zone.MAX_DOMAIN_LENGTH:
        raise argparse.ArgumentTypeError(
            f"{text!r} is too long: at most {zone.MAX_DOMAIN_LENGTH} characters, so that every name under it "
            f"(<hostname>.<service>.<namespace>.svc.<domain>, each label up to 63) fits DNS's {zone.MAX_NAME} octets")
    return name.to_text(omit_final_dot=True)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0-65535; 0: any free one)")
    return port


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m components.dns",
                                description="kubemu's cluster DNS (CoreDNS's kubernetes plugin): "
                                            "Services, endpoints and pods under the cluster domain")
    p.add_argument("--api", required=True,
                   help="the apiserver's wire endpoint (ipc:// or tcp://), or a comma-separated list of "
                        "them to fail over between")
    p.add_argument("--wire-credentials", type=credentials_flag, metavar="FILE", help=CREDENTIALS_HELP)
    p.add_argument("--cluster-domain", type=_domain, default=zone.DEFAULT_DOMAIN,
                   help=f"the zone served, at most {zone.MAX_DOMAIN_LENGTH} characters (default {zone.DEFAULT_DOMAIN})")
    p.add_argument("--port", type=_port, default=53, help="DNS port, UDP and TCP (default 53)")
    p.add_argument("--bind-address", metavar="ADDR",
                   help="address to listen on (default: 0.0.0.0 in a network namespace of the "
                        "process's own, as in a pod; 127.0.0.1 in the machine's network)")
    p.add_argument("--health-port", type=_port, default=8080, help="HTTP port of /health (default 8080)")
    p.add_argument("--ready-port", type=_port, default=8181, help="HTTP port of /ready (default 8181)")
    p.add_argument("--ttl", type=int, default=zone.DEFAULT_TTL,
                   help=f"TTL of the answers, 0-{MAX_TTL} seconds (default {zone.DEFAULT_TTL})")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 <= args.ttl <= MAX_TTL:
        parser.error(f"--ttl must be between 0 and {MAX_TTL}")
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stdout,
                        format="%(asctime)s dns[%(process)d] %(levelname)s %(name)s: %(message)s")
    server = DNSServer(args.api, credentials=args.wire_credentials, domain=args.cluster_domain, ttl=args.ttl,
                       host=args.bind_address or netnsinfo.listen_address(), port=args.port,
                       health_port=args.health_port, ready_port=args.ready_port,
                       reuse_port=netnsinfo.in_own_network_namespace())
    try:
        return eventloop.run(server.run())
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
