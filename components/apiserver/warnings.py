"""The warnings of the request being handled (kube-apiserver's `Warning: 299` headers).

A handler calls `add(text)`; the transport that wants them sets `current` to a fresh list for
each request and sends what it holds (the HTTPS door as `Warning: 299 - "<text>"` headers). A
request whose transport set no list (the ZeroMQ wire) drops them. Each request runs in a task of
its own, which copies the context, so requests never see each other's warnings.
"""
from __future__ import annotations

from contextvars import ContextVar

current: ContextVar[list[str] | None] = ContextVar("warnings", default=None)


def add(text: str) -> None:
    """Record a warning for the current request (once: kube-apiserver deduplicates them)."""
    got = current.get()
    if got is not None and text not in got:
        got.append(text)
