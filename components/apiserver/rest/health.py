"""/healthz, /livez and /readyz as kube-apiserver answers them: `ok`, or with ?verbose one
`[+]<check> ok` line per check and `<endpoint> check passed`; a failing check is a 500 with
`[-]<check> failed: reason withheld`. /<endpoint>/<check> runs one check; ?exclude=<check> skips one.

Checks: ping (the process answers), etcd (the store answers a read, within ETCD_TIMEOUT), and
for /readyz also `ready` (the apiserver finished starting: its system namespaces exist).
"""
from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from kubemu.wire import NotFound, WireError

ENDPOINTS = ("/healthz", "/livez", "/readyz")
ETCD_TIMEOUT = 2.0


class Checks:
    def __init__(self, handlers: dict, ready: Callable[[], bool]):
        self.handlers = handlers
        self.ready = ready

    async def _etcd(self) -> bool:
        try:
            await asyncio.wait_for(self.handlers["get"](resource="namespaces", name="default"), ETCD_TIMEOUT)
        except NotFound:
            return True  # the store answered
        except (WireError, TimeoutError):
            return False
        return True

    async def _ping(self) -> bool:
        return True

    async def _ready(self) -> bool:
        return self.ready()

    def _checks(self, endpoint: str) -> dict[str, Callable[[], Awaitable[bool]]]:
        out = {"ping": self._ping, "etcd": self._etcd}
        if endpoint == "/readyz":
            out["ready"] = self._ready
        return out

    def answer(self, path: str, verbose: bool, exclude: list[str]) -> Awaitable[tuple[int, str]] | None:
        """(code, text) for a health path, or None if `path` is not one."""
        endpoint, _, one = path.partition("/")[2].partition("/")
        endpoint = "/" + endpoint
        if endpoint not in ENDPOINTS:
            return None
        checks = self._checks(endpoint)
        if one:
            if one not in checks:
                return None
            return self._one(checks[one])
        return self._all(endpoint, {k: v for k, v in checks.items() if k not in exclude}, verbose)

    @staticmethod
    async def _one(check) -> tuple[int, str]:
        return (200, "ok") if await check() else (500, "internal server error: check failed")

    @staticmethod
    async def _all(endpoint: str, checks: dict, verbose: bool) -> tuple[int, str]:
        results = {name: await check() for name, check in checks.items()}
        word = endpoint.lstrip("/")
        failed = [name for name, ok in results.items() if not ok]
        if not failed and not verbose:
            return 200, "ok"
        lines = [f"[+]{name} ok" if ok else f"[-]{name} failed: reason withheld" for name, ok in results.items()]
        lines.append(f"{word} check failed" if failed else f"{word} check passed")
        return (500 if failed else 200), "\n".join(lines) + "\n"
