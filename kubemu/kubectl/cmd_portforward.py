"""kubemu port-forward: reach a pod's port from this machine, as kubectl port-forward does.

It goes the way kubectl's does: through the apiserver's HTTPS door as the cluster's admin
(admin.conf), so RBAC's pods/portforward applies, to the kubelet of the pod's node, which
connects inside the pod's network namespace.
"""
from __future__ import annotations

import asyncio
import base64
import os
import tempfile
from urllib.parse import quote

import click

from kubemu import kubeconfig
from kubemu.apiclient import WireError

from .options import GoCommand, namespace_option
from .portforward import TUNNELED, Forwarder, PortError, parse_ports, tls_context
from .session import CommandError, connect, fatal, handle_errors, is_connection_error, server_error

POD_TYPES = ("pod", "pods", "po")


@click.command("port-forward", cls=GoCommand)
@click.argument("pod")
@click.argument("ports", nargs=-1, required=True)
@namespace_option
@click.option("--address", default="127.0.0.1",
              help="addresses to listen on, comma separated (localhost: 127.0.0.1 and ::1)")
@click.pass_obj
@handle_errors
def port_forward(obj, pod, ports, namespace, address) -> None:
    """Forward local ports to a pod (kubectl port-forward).

    \b
    kubemu port-forward pod/web 18080:8000     # localhost:18080 -> the pod's 8000
    kubemu port-forward web 8000 :9000         # same port; any free local port
    """
    kind, sep, name = pod.rpartition("/")
    if sep and kind.lower() not in POD_TYPES:
        raise CommandError(f"kubemu port-forward forwards to pods only, not {kind!r}")
    try:
        pairs = parse_ports(list(ports))
    except PortError as err:
        raise CommandError(str(err)) from None
    addresses = [a.strip() for a in address.split(",") if a.strip()]
    addresses = [x for a in addresses for x in (("127.0.0.1", "::1") if a == "localhost" else (a,))]
    ns = namespace or "default"
    with connect(obj) as api:
        try:
            found = api.get("pods", name, ns)
        except WireError as err:
            if is_connection_error(err):
                raise
            fatal(server_error(err))
    phase = (found.get("status") or {}).get("phase") or "Unknown"
    if phase != "Running":
        raise CommandError(f"unable to forward port because pod is not running. Current status={phase}")
    try:
        config = kubeconfig.load(obj.state.admin_conf)
    except kubeconfig.KubeconfigError as err:
        raise CommandError(str(err)) from None
    if not config["clusters"] or not config["users"]:
        raise CommandError(f"no kubeconfig at {obj.state.admin_conf}: port-forward goes through the "
                           "apiserver's HTTPS door, as the cluster's admin")
    try:
        asyncio.run(_forward(config, ns, name, pairs, addresses))
    except KeyboardInterrupt:
        return
    except OSError as err:
        raise CommandError(f"unable to listen on any of the requested ports: {err.strerror or err}") from None
    raise CommandError("lost connection to pod")


async def _forward(config: dict, ns: str, name: str, pairs, addresses) -> None:
    import aiohttp  # only this command needs it

    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    context = _context(cluster, user)
    url = f"{cluster['server']}/api/v1/namespaces/{quote(ns)}/pods/{quote(name)}/portforward" \
          f"?{'&'.join(f'ports={remote}' for _, remote in pairs)}"
    async with aiohttp.ClientSession() as session:
        try:
            ws = await session.ws_connect(url, protocols=(TUNNELED,), ssl=context, autoping=True,
                                          max_msg_size=0)
        except aiohttp.WSServerHandshakeError as err:
            raise CommandError(f"error upgrading connection: {err.message}") from None
        except aiohttp.ClientError as err:
            raise CommandError(f"error upgrading connection: {err}") from None
        async with ws:
            forwarder = Forwarder(ws, click.echo, lambda text: click.echo(f"error: {text}", err=True))
            servers = await forwarder.listen(addresses, pairs)
            try:
                await forwarder.run()
            finally:
                for server in servers:
                    server.close()


def _context(cluster: dict, user: dict):
    """The TLS context of admin.conf's embedded CA and client certificate (ssl reads files only:
    they are written to a private directory and removed at once)."""
    with tempfile.TemporaryDirectory(prefix="kubemu-pf-") as tmp:
        paths = []
        for field, data in (("ca", cluster["certificate-authority-data"]),
                            ("crt", user["client-certificate-data"]), ("key", user["client-key-data"])):
            path = os.path.join(tmp, field)
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                f.write(base64.b64decode(data))
            paths.append(path)
        return tls_context(*paths)
