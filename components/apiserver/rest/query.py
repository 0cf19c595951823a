"""Query parameters as kube-apiserver's parameter codec reads them. Pure; a bad value is one
QueryError worded as its decoder's, answered 400."""
from __future__ import annotations

from collections.abc import Mapping

TRUE_WORDS = ("1", "t", "T", "TRUE", "true", "True")
FALSE_WORDS = ("0", "f", "F", "FALSE", "false", "False")
FIELD_VALIDATION = ("Strict", "Warn", "Ignore")
PROPAGATION = ("Background", "Foreground", "Orphan")


class QueryError(ValueError):
    pass


def integer(q: Mapping[str, str], name: str, minimum: int | None = 0) -> int | None:
    if name not in q or q[name] == "":
        return None
    try:
        value = int(q[name])
    except ValueError:
        raise QueryError(f'{name}: Invalid value: "{q[name]}": must be an integer') from None
    if minimum is not None and value < minimum:
        raise QueryError(f'{name}: Invalid value: {value}: must be greater than or equal to {minimum}')
    return value


def boolean(q: Mapping[str, str], name: str) -> bool:
    """strconv.ParseBool; a bare `?verbose` (present, empty) is true, as kube-apiserver's health checks read it."""
    if name not in q:
        return False
    value = q[name]
    if value == "" or value in TRUE_WORDS:
        return True
    if value in FALSE_WORDS:
        return False
    raise QueryError(f'{name}: Invalid value: "{value}": must be a boolean')


def dry_run(values: list[str]) -> bool:
    """dryRun=All (the only value Kubernetes defines); given more than once, every value must be All."""
    for value in values:
        if value != "All":
            raise QueryError(f'dryRun: Unsupported value: "{value}": supported values: "All"')
    return bool(values)


def field_validation(q: Mapping[str, str]) -> str:
    """Unknown fields: Warn when the client does not say (kube-apiserver's default since 1.27)."""
    value = q.get("fieldValidation")
    if value in (None, ""):
        return "Warn"
    if value not in FIELD_VALIDATION:
        raise QueryError(f'fieldValidation: Unsupported value: "{value}": supported values: '
                         + ", ".join(f'"{v}"' for v in FIELD_VALIDATION))
    return value


def propagation(value: object) -> str | None:
    if value in (None, ""):
        return None
    if value not in PROPAGATION:
        raise QueryError(f'propagationPolicy: Unsupported value: "{value}": supported values: '
                         + ", ".join(f'"{v}"' for v in PROPAGATION))
    return str(value)
