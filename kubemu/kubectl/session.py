"""Talking to the apiserver from a command, and saying what went wrong as kubectl does.

    @handle_errors                     # CommandError -> `error: ...`, exit 1
    def cmd(obj, ...):
        with connect(obj) as api:      # the wire's errors -> kubectl's lines, exit 1
            ...

Errors from the server read `Error from server (<Reason>): <message>`; an invalid object reads
`The Deployment "web" is invalid: spec.replicas: Invalid value: -1: ...` (one line per field
error when there are several); an apiserver that cannot be reached reads `The connection to
the server <endpoint> was refused - did you specify the right host or port?`.
"""
from __future__ import annotations

import contextlib
import functools
import signal
import sys
import threading
import time
from typing import Iterator

import click

from kubemu._wire_auth import state_credentials
from kubemu.api.fielderrors import go_quote
from kubemu.api.resources import UnknownResourceError
from kubemu.apiclient import Invalid, OutcomeUnknown, SyncApiClient, Unavailable, WireError

# Short: an apiserver that cannot be reached should not keep a person waiting long.
CLIENT_TIMEOUT = 5.0

# wire code -> the StatusReason kubectl shows, when details carry no reason of their own
REASONS = {"TooLarge": "RequestEntityTooLarge", "Internal": "InternalError", "Cancelled": "Timeout"}


class CommandError(Exception):
    """A problem kubectl reports as `error: <message>` (bad flags, bad manifests, timeouts)."""


def fatal(text: str) -> None:
    """Print kubectl's error text as is and exit 1."""
    click.echo(text, err=True)
    sys.exit(1)


def fail(message: str) -> None:
    """`error: <message>` (kubemu's one-line error), exit 1."""
    from kubemu.cli import fail as cli_fail  # imported when needed: kubemu.cli imports this package

    cli_fail(message)


def handle_errors(fn):
    """Run a command, turning CommandError and an unknown resource type into kubectl's error."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (CommandError, UnknownResourceError) as err:
            fail(str(err))
    return wrapper


def report_errors(errors: list[str | CommandError]) -> None:
    """Print the errors of a command that carried on past them and exit 1 (if any), as kubectl's
    CheckErr prints its aggregate: one error as `error: <message>`, several one per line as they
    are; a server's error (a str here: `Error from server (...)`) is always printed as it is."""
    if not errors:
        return
    for err in errors:
        plain = isinstance(err, CommandError)
        click.echo(f"error: {err}" if plain and len(errors) == 1 else str(err), err=True)
    raise SystemExit(1)


def server_error(err: WireError, verb: str = "", source: str = "") -> str:
    """kubectl's text for an error the apiserver answered with; `verb` and `source` say where
    it came from (AddSourceToErr: `error when creating "pod.yaml": ...`)."""
    if isinstance(err, Invalid) and err.details.get("messages"):
        return invalid_text(err)
    details = err.details if isinstance(err.details, dict) else {}
    reason = details.get("reason") or REASONS.get(err.code, err.code)
    message = f'error when {verb} "{source}": {err.message}' if source else err.message
    return f"Error from server ({reason}): {message}"


def invalid_text(err: Invalid) -> str:
    """`The <Kind> "<name>" is invalid: <field error>`, or one `* <field error>` line each."""
    kind, name = err.details.get("kind"), err.details.get("name")
    head = f"The {kind} {go_quote(str(name or ''))} is invalid" if kind or name else "The request is invalid"
    messages = list(dict.fromkeys(err.details.get("messages") or []))
    if len(messages) == 1:
        return f"{head}: {messages[0]}"
    return f"{head}: \n" + "\n".join(f"* {m}" for m in messages)


def connection_error(err: WireError, endpoint: str) -> str:
    if isinstance(err, Unavailable):
        return f"The connection to the server {endpoint} was refused - did you specify the right host or port?"
    return f"Unable to connect to the server: {err.message}"


def is_connection_error(err: WireError) -> bool:
    """No answer from the server (as opposed to an answer that is an error)."""
    return isinstance(err, (Unavailable, OutcomeUnknown))


@contextlib.contextmanager
def _die_on_interrupt() -> Iterator[None]:
    """Ctrl-C ends the command at once, as it ends kubectl (a Go program dies of SIGINT). A
    KeyboardInterrupt raised inside the wire's event loop could leave the client unable to
    close, and the command hanging; the handler is restored for in-process callers (tests)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def connect(obj) -> Iterator[SyncApiClient]:
    """A client for the apiserver of the `kubemu` group's context object (`kubemu.cli.Ctx`)."""
    endpoint = obj.api_endpoint()
    try:
        credentials = state_credentials(obj.state.root)  # the admin's, when the cluster has them
    except ValueError as exc:
        fatal(str(exc))
    with _die_on_interrupt():
        try:
            api = SyncApiClient(endpoint, timeout=CLIENT_TIMEOUT, credentials=credentials)
        except ValueError as exc:  # an endpoint (of --server, or a list of them) that is not one
            fail(f"bad server {endpoint!r}: {exc}")
        try:
            yield api
        except WireError as err:
            fatal(connection_error(err, endpoint) if is_connection_error(err) else server_error(err))
        finally:
            api.close()


class Deadline:
    """A time limit; `None` seconds means none."""

    def __init__(self, seconds: float | None):
        self.at = None if seconds is None else time.monotonic() + seconds

    def passed(self) -> bool:
        return self.at is not None and time.monotonic() >= self.at


def follow(api: SyncApiClient, resource: str, namespace: str | None, resource_version: str = "",
           label_selector: str = "", field_selector: str = "",
           deadline: Deadline | None = None) -> Iterator[tuple[str, dict]]:
    """Watch events (type, object) from `resource_version` ("": the current objects as ADDED
    first) until the deadline, resuming from the last version seen when the connection drops.
    The deadline is checked at every event and at the server's bookmarks on an idle watch."""
    deadline = deadline or Deadline(None)
    rv = resource_version
    while not deadline.passed():
        watch = api.watch(resource, namespace, resource_version=rv, label_selector=label_selector,
                          field_selector=field_selector, allow_bookmarks=True)
        with watch:  # an apiserver that cannot be reached now ends the command
            try:
                for type_, obj in watch:
                    rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                    if type_ != "BOOKMARK":
                        yield type_, obj
                    if deadline.passed():
                        return
            except Unavailable:
                if not rv:  # nothing seen yet: resuming would replay the objects as ADDED
                    raise
