"""Errors as kube-apiserver answers them over HTTP: a meta/v1 Status and its code. Pure.

    from_wire(NotFound('pods "web" not found', {"kind": "pods", "name": "web"}))
      -> 404, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": 'pods "web" not found', "reason": "NotFound",
               "details": {"name": "web", "kind": "pods"}, "code": 404}

The shapes are k8s.io/apimachinery's api/errors constructors (NewNotFound, NewAlreadyExists,
NewConflict, NewInvalid with one cause per field error, NewBadRequest, NewResourceExpired,
NewForbidden, NewUnauthorized, NewRequestEntityTooLargeError, NewUnsupportedMediaType,
NewMethodNotSupported, NewTooManyRequests, NewInternalError): kubectl prints its usual
`Error from server (<Reason>): <message>` from them.
"""
from __future__ import annotations

from kubemu.api import fielderrors
from kubemu.api.resources import UnknownResourceError, resolve
from kubemu.wire import WireError

from ..audit import HTTP_CODES

# metav1.StatusReason for each HTTP code kubemu answers with, when the error names none
REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           405: "MethodNotAllowed", 406: "NotAcceptable", 408: "Timeout", 409: "Conflict", 410: "Expired",
           413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
           429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}
# Codes of the HTTPS door's own errors (authentication) the audit table does not know.
DOOR_CODES = {"Unauthorized": 401}
# A wire code with no HTTP twin (the client went away: nobody reads the answer).
FALLBACK_CODE = 500
# The reasons a wire error's details may carry that are Status reasons as they stand.
STATUS_REASONS = frozenset(REASONS.values()) | {"AlreadyExists", "Gone"}
# field.ErrorType's text -> metav1.CauseType
CAUSE_TYPES = {fielderrors.REQUIRED: "FieldValueRequired", fielderrors.INVALID: "FieldValueInvalid",
               fielderrors.NOT_SUPPORTED: "FieldValueNotSupported",
               fielderrors.DUPLICATE: "FieldValueDuplicate", fielderrors.FORBIDDEN: "FieldValueForbidden",
               fielderrors.TOO_LONG: "FieldValueTooLong", fielderrors.UNKNOWN_FIELD: "FieldValueInvalid",
               "Not found": "FieldValueNotFound", "Too many": "FieldValueTooMany",
               "Internal error": "InternalError"}


def status(code: int, message: str, reason: str | None = None, details: dict | None = None) -> dict:
    out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": reason if reason is not None else REASONS.get(code, ""), "code": code}
    if details:
        out["details"] = details
    return out


def _group_of(kind_or_plural: str) -> str | None:
    try:
        return resolve(kind_or_plural).group
    except UnknownResourceError:
        return None


def _object_details(kind: object, name: object) -> dict:
    out: dict = {}
    if isinstance(name, str) and name:
        out["name"] = name
    if isinstance(kind, str) and kind:
        group = _group_of(kind)
        if group:
            out["group"] = group
        out["kind"] = kind
    return out


def _cause(path: str, message: str) -> dict:
    """One StatusCause from a field error's path and its `path: body` text."""
    body = message[len(path) + 2:] if path and message.startswith(path + ": ") else message
    kind = next((t for t in CAUSE_TYPES if body.startswith(t)), fielderrors.INVALID)
    return {"reason": CAUSE_TYPES[kind], "message": body, "field": path}


def causes(details: dict) -> list[dict]:
    """The handlers' Invalid details ({causes: [paths], messages: ["path: body"]}) as StatusCauses;
    causes already shaped as maps pass through."""
    paths = details.get("causes") if isinstance(details.get("causes"), list) else []
    messages = details.get("messages") if isinstance(details.get("messages"), list) else []
    out = []
    for i, item in enumerate(paths):
        if isinstance(item, dict):
            out.append(item)
        elif isinstance(item, str):
            text = messages[i] if i < len(messages) and isinstance(messages[i], str) else f"{item}: Invalid value"
            out.append(_cause(item, text))
    return out


def from_wire(err: WireError) -> tuple[int, dict]:
    """The HTTP code and Status of a handler's error."""
    code = HTTP_CODES.get(err.code) or DOOR_CODES.get(err.code, FALLBACK_CODE)
    if code not in REASONS:
        code = FALLBACK_CODE
    details = err.details if isinstance(err.details, dict) else {}
    hinted = details.get("reason")
    reason = hinted if isinstance(hinted, str) and hinted in STATUS_REASONS else REASONS[code]
    if reason == "Gone":
        reason = "Expired"
    out_details = _object_details(details.get("kind"), details.get("name"))
    if code == 422:
        out_details["causes"] = causes(details)
    if code == 429:  # NewTooManyRequests: when to come back, and why (an eviction's budget)
        out_details["retryAfterSeconds"] = details.get("retryAfterSeconds") or 0
        if details.get("causes"):
            out_details["causes"] = causes(details)
    if code == 500 and err.code == "Internal":
        message = f"Internal error occurred: {err.message}" if err.message else "Internal error occurred"
    else:
        message = err.message or reason
    return code, status(code, message, reason, out_details or None)


def unauthorized(message: str = "Unauthorized") -> tuple[int, dict]:
    return 401, status(401, message, "Unauthorized")


def forbidden(message: str, group: str = "", resource: str = "", name: str = "") -> tuple[int, dict]:
    details: dict = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if resource:
        details["kind"] = resource
    return 403, status(403, message, "Forbidden", details or None)


def not_found_path() -> tuple[int, dict]:
    """A path that names nothing this server serves (kube-apiserver's NotFound handler)."""
    return 404, status(404, "the server could not find the requested resource", "NotFound", {})


def method_not_allowed(method: str, what: str) -> tuple[int, dict]:
    return 405, status(405, f"{method} is not supported on {what}", "MethodNotAllowed")


def too_large(limit: int) -> tuple[int, dict]:
    return 413, status(413, f"Request entity too large: limit is {limit}", "RequestEntityTooLarge")


def bad_request(message: str) -> tuple[int, dict]:
    return 400, status(400, message, "BadRequest")


def internal(message: str = "an error on the server has prevented the request from succeeding") -> tuple[int, dict]:
    return 500, status(500, f"Internal error occurred: {message}", "InternalError")
