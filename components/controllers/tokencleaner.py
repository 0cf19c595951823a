"""The token cleaner's core (k8s pkg/controller/bootstrap/tokencleaner.go): a bootstrap token
Secret is deleted once its expiration has passed.

``clean_token(secret, now) -> (actions, recheck_after)`` is pure: the cached kube-system Secret
(None when gone) and the time in; out, a uid-guarded delete of an expired token, or nothing and
the seconds until it expires (None when it never does, or is not a bootstrap token).
"""
from __future__ import annotations

from components.controllers import DeleteObject
from components.controllers.podutil import meta, parse_time
from kubemu import bootstraptoken


def clean_token(secret: dict | None, now: float) -> tuple[list, float | None]:
    if secret is None or meta(secret).get("deletionTimestamp"):
        return [], None
    data = bootstraptoken.secret_data(secret)
    if data is None:
        return [], None
    expires = parse_time(data.get(bootstraptoken.EXPIRATION))
    if expires is None:
        return [], None
    if now < expires:
        return [], expires - now
    m = meta(secret)
    return [DeleteObject("v1", "Secret", m.get("namespace"), m.get("name", ""), m.get("uid", ""))], None
