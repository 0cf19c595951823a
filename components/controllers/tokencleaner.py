"""The token cleaner's core (k8s pkg/controller/bootstrap/tokencleaner.go): a bootstrap token
Secret is deleted once its expiration has passed, or at once when its expiration is not RFC 3339
(cluster-bootstrap's GetExpiration counts an unparseable one as expired).

``clean_token(secret, now) -> (actions, recheck_after)`` is pure: the cached kube-system Secret
(None when gone) and the time in; out, a uid-guarded delete of an expired token, or nothing and
the seconds until it expires (None when it never does, or is not a bootstrap token).
"""
from __future__ import annotations

from components.controllers import DeleteObject
from components.controllers.podutil import meta
from kubemu import bootstraptoken


def clean_token(secret: dict | None, now: float) -> tuple[list, float | None]:
    if secret is None or meta(secret).get("deletionTimestamp"):
        return [], None
    data = bootstraptoken.secret_data(secret)
    if data is None:
        return [], None
    try:
        expires = bootstraptoken.parse_expiration(data.get(bootstraptoken.EXPIRATION))
    except ValueError:
        expires = now                                   # malformed: expired
    if expires is None:
        return [], None
    if now < expires:
        return [], expires - now
    m = meta(secret)
    return [DeleteObject("v1", "Secret", m.get("namespace"), m.get("name", ""), m.get("uid", ""))], None
