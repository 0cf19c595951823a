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
from kubemu.wire import peer_identity, peer_user_agent

current: ContextVar[UserInfo | None] = ContextVar("caller", default=None)
# the HTTPS request's User-Agent header (the wire's is `peer_user_agent`, from its handshake)
user_agent: ContextVar[str | None] = ContextVar("user_agent", default=None)


def current_user() -> UserInfo | None:
    """The caller as a UserInfo: the HTTPS user, else the wire identity's user, else None
    (an unauthenticated wire)."""
    from .wireauthz import user_info  # wireauthz is pure and imports nothing of this package
    user = current.get()
    if user is not None:
        return user
    identity = peer_identity.get()
    return user_info(identity) if identity else None


def caller_name() -> str | None:
    """Who the audit log names: the authenticated user, or None for an unauthenticated wire."""
    user = current.get()
    return user.name if user is not None else peer_identity.get()


def caller_user_agent() -> str | None:
    """What the caller says it is (the audit log's userAgent): not a credential."""
    user = current.get()
    return user_agent.get() if user is not None else peer_user_agent.get()
