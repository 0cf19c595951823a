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


class held:
    """`with held() as texts:` warnings added inside go to `texts`, a list of their own (None when
    the request keeps none), not to the request's: for an attempt that may be discarded and run
    again (a write decided on a stale cached state), whose caller `add_all`s the list of the
    attempt it answers with. A class, not @contextmanager: it runs once per write attempt."""
    __slots__ = ("_token",)

    def __enter__(self) -> list[str] | None:
        if current.get() is None:  # the wire: nothing kept, nothing to hold back
            self._token = None
            return None
        texts: list[str] = []
        self._token = current.set(texts)
        return texts

    def __exit__(self, *exc) -> None:
        if self._token is not None:
            current.reset(self._token)


def add_all(texts: list[str] | None) -> None:
    for text in texts or ():
        add(text)
