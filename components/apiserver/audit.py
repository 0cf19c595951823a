"""The audit log: one JSON line per mutating request (Kubernetes' audit at level Metadata).

    {"time": "2024-05-01T12:00:00.123456Z", "verb": "create", "resource": "pods",
     "namespace": "default", "name": "web", "code": 201, "user": "system:anonymous",
     "userAgent": "kubectl/v1.30.0"}

`code` is the HTTP status Kubernetes would answer with (409 for a conflict, ...); a wire error
code with no HTTP twin is written as is in "reason". `userAgent` is what the client called
itself (HTTPS: the User-Agent header; the wire: its handshake's X-User-Agent), absent when it
said nothing. Lines are appended and flushed at once
(each write is one short `write` on an O_APPEND file, so lines never interleave).
"""
from __future__ import annotations

import json
import os
import time

from kubemu.api.times import format_time

ANONYMOUS = "system:anonymous"

HTTP_CODES = {
    "NotFound": 404, "Conflict": 409, "Invalid": 422, "BadRequest": 400, "UnknownMethod": 400,
    "TooLarge": 413, "Gone": 410, "Unavailable": 503, "Internal": 500, "OutcomeUnknown": 504,
    "Forbidden": 403, "Cancelled": 499, "MethodNotAllowed": 405, "Timeout": 504, "TooManyRequests": 429,
}


# one encoder for every line: json.dumps with separators of its own builds a new one per call
_json_line = json.JSONEncoder(separators=(",", ":")).encode


def now_rfc3339() -> str:
    # runs once per request: the second's text is format_time's, made once a second
    second, micro = divmod(time.time_ns() // 1000, 1_000_000)
    return f"{format_time(second)[:-1]}.{micro:06d}Z"


class AuditLog:
    def __init__(self, path: str | None):
        self.path = path
        self._fd: int | None = None
        if path:
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def record(self, *, verb: str, resource: str, namespace: str | None, name: str | None,
               code: int, user: str | None, reason: str | None = None, received: str | None = None,
               user_agent: str | None = None) -> None:
        """One line; `time` is when the request was received (kube's RequestReceived stage), so a
        request is in the log at the time it came, whatever its answer's effects raced with."""
        if self._fd is None:
            return
        line = {"time": received or now_rfc3339(), "verb": verb, "resource": resource,
                "namespace": namespace or "", "name": name or "", "code": code,
                "user": user or ANONYMOUS}
        if user_agent:
            line["userAgent"] = user_agent
        if reason:
            line["reason"] = reason
        try:
            os.write(self._fd, (_json_line(line) + "\n").encode())
        except OSError:
            pass

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
