"""The authenticated caller of the request being handled, set by its transport.

HTTPS sets `current` to the UserInfo its authenticator returned; the wire sets
`kubemu.wire.peer_identity` to the identity the connection's handshake authenticated. Both are
context variables: each request runs in a task of its own, which copies the context, so a
handler reads its own request's caller however many run at once. Nothing a client sends in a
request can name the caller.
"""
from __future__ import annotations

from contextvars import ContextVar

from kubemu.api.identity import UserInfo
from kubemu.wire import peer_identity

current: ContextVar[UserInfo | None] = ContextVar("caller", default=None)


def caller_name() -> str | None:
    """Who the audit log names: the authenticated user, or None for an unauthenticated wire."""
    user = current.get()
    return user.name if user is not None else peer_identity.get()
