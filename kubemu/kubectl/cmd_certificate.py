"""kubemu certificate approve|deny: decide CertificateSigningRequests, as kubectl certificate does.

Each named request gets an Approved (or Denied) condition through the approval subresource and
`certificatesigningrequest.certificates.k8s.io/<name> approved` is printed; a request that has
it already is left as it is (unless --force) and printed the same; one with the opposite
decision is an error (`certificate signing request "x" is already Denied`). A conflict (someone
else wrote the request meanwhile) is retried on the fresh request.
"""
from __future__ import annotations

import time

import click

from kubemu.api.resources import resolve
from kubemu.api.times import format_time
from kubemu.apiclient import Conflict, WireError

from .options import GoCommand
from .output import object_name
from .session import CommandError, connect, handle_errors, is_connection_error, report_errors, server_error

DECISIONS = {  # verb -> (the condition it adds, the one it must not find, reason, message, printed)
    "approve": ("Approved", "Denied", "KubectlApprove", "This CSR was approved by kubectl certificate approve.",
                "approved"),
    "deny": ("Denied", "Approved", "KubectlDeny", "This CSR was denied by kubectl certificate deny.", "denied"),
}
CONFLICT_RETRIES = 5


def decided(csr: dict, verb: str, now: float, force: bool = False) -> dict | None:
    """The request with the decision added (None: it has it already and no --force);
    CommandError when it has the opposite one."""
    ctype, opposite, reason, message, _ = DECISIONS[verb]
    conditions = (csr.get("status") or {}).get("conditions") or []
    if any(c.get("type") == opposite for c in conditions):
        name = (csr.get("metadata") or {}).get("name", "")
        raise CommandError(f'certificate signing request "{name}" is already {opposite}')
    if any(c.get("type") == ctype for c in conditions) and not force:
        return None
    status = dict(csr.get("status") or {})
    status["conditions"] = [*conditions, {"type": ctype, "status": "True", "reason": reason,
                                          "message": message, "lastUpdateTime": format_time(now)}]
    return {**csr, "status": status}


def _decide(verb: str):
    @click.command(verb, cls=GoCommand)
    @click.argument("names", nargs=-1, required=True)
    @click.option("--force", is_flag=True, help="update the request even if it is already decided")
    @click.pass_obj
    @handle_errors
    def command(obj, names, force) -> None:
        r = resolve("certificatesigningrequests")
        errors: list = []
        with connect(obj) as api:
            for name in names:
                try:
                    for attempt in range(CONFLICT_RETRIES):
                        new = decided(api.get(r.plural, name), verb, time.time(), force)
                        if new is None:
                            break
                        try:
                            api.update_approval(new)
                            break
                        except Conflict:
                            if attempt == CONFLICT_RETRIES - 1:
                                raise
                except CommandError as err:
                    errors.append(err)
                    continue
                except WireError as err:
                    if is_connection_error(err):
                        raise
                    errors.append(server_error(err))
                    continue
                click.echo(f"{object_name(r, name)} {DECISIONS[verb][4]}")
        report_errors(errors)
    command.__doc__ = f"{verb.capitalize()} certificate signing requests (kubectl certificate {verb})."
    return command


@click.group("certificate")
def certificate() -> None:
    """Approve or deny certificate signing requests (kubectl certificate)."""


certificate.add_command(_decide("approve"))
certificate.add_command(_decide("deny"))
