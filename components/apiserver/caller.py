"""The authenticated caller of the request being handled, set by its transport.

A context variable: each request runs in a task of its own, which copies the context, so a
handler reads its own request's caller however many run at once.
"""
from __future__ import annotations

from contextvars import ContextVar

from kubemu.api.identity import UserInfo

current: ContextVar[UserInfo | None] = ContextVar("caller", default=None)
