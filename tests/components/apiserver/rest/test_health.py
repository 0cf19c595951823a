"""/healthz, /livez, /readyz answers."""
from __future__ import annotations

import asyncio

from components.apiserver.rest.health import Checks
from kubemu import wire


def _answer(checks: Checks, path: str, verbose: bool = False, exclude=()):
    got = checks.answer(path, verbose, list(exclude))
    return None if got is None else asyncio.run(got)


def _store(fails: bool):
    async def get(resource, name, namespace=None):
        if fails:
            raise wire.Unavailable("no store")
        raise wire.NotFound("x")  # an answer is an answer
    return {"get": get}


def test_all_pass():
    checks = Checks(_store(False), lambda: True)
    assert _answer(checks, "/healthz") == (200, "ok")
    assert _answer(checks, "/readyz", verbose=True) == (
        200, "[+]ping ok\n[+]etcd ok\n[+]ready ok\nreadyz check passed\n")
    assert _answer(checks, "/livez", verbose=True)[1].endswith("livez check passed\n")
    assert _answer(checks, "/livez/ping") == (200, "ok")


def test_failures_exclusions_and_other_paths():
    checks = Checks(_store(True), lambda: False)
    assert _answer(checks, "/readyz") == (
        500, "[+]ping ok\n[-]etcd failed: reason withheld\n[-]ready failed: reason withheld\nreadyz check failed\n")
    assert _answer(checks, "/readyz", exclude=("etcd", "ready")) == (200, "ok")
    assert _answer(checks, "/healthz/etcd")[0] == 500
    assert _answer(checks, "/healthz/nope") is None
    assert _answer(checks, "/version") is None
