"""The wire's typed errors: `WireError`, its subclasses, and the code registry behind
`error_from_code` (subclasses that set `code` register themselves)."""
from __future__ import annotations

_ERROR_CLASSES: dict[str, type[WireError]] = {}


class WireError(Exception):
    """An error that crosses the wire as ``{code, message, details}``."""

    code = "Error"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "code" in cls.__dict__:
            # first one wins, so a later module cannot hijack a core code
            _ERROR_CLASSES.setdefault(cls.code, cls)

    def __init__(self, message: str = "", details: dict | None = None, *, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.details = details if details is not None else {}
        if code is not None:
            self.code = code
        # set by the decoders when a bad message still carried a readable request id
        self.request_id: int | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"

    def __reduce__(self):
        return (error_from_code, (self.code, self.message, self.details))


class NotFound(WireError):
    code = "NotFound"


class Conflict(WireError):
    code = "Conflict"


class Invalid(WireError):
    code = "Invalid"


class Unavailable(WireError):
    code = "Unavailable"


class TooLarge(WireError):
    code = "TooLarge"


class BadRequest(WireError):
    code = "BadRequest"


class UnknownMethod(BadRequest):
    code = "UnknownMethod"


class TooManyRequests(WireError):
    """HTTP 429: not now, try again (an eviction a disruption budget blocks)."""

    code = "TooManyRequests"


class Internal(WireError):
    code = "Internal"


class Unauthorized(WireError):
    """The server refused the connection's credentials, or needs some and got none."""

    code = "Unauthorized"


class Forbidden(WireError):
    """The caller is authenticated but may not do this."""

    code = "Forbidden"


class Gone(WireError):
    code = "Gone"


class Cancelled(WireError):
    code = "Cancelled"


class OutcomeUnknown(WireError):
    """The request may or may not have been acted on: it timed out or the connection was lost
    after it was sent. Raised by the client; a server may also pass one on from a call of its own."""

    code = "OutcomeUnknown"


def error_from_code(code: str, message: str = "", details: dict | None = None) -> WireError:
    cls = _ERROR_CLASSES.get(code)
    if cls is not None:
        try:
            return cls(message, details)
        except TypeError:
            pass  # a subclass with a constructor of its own: keep the code, lose the class
    return WireError(message, details, code=code)
