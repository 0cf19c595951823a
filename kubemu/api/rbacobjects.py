"""Defaulting and validation of Role, ClusterRole, RoleBinding and ClusterRoleBinding (rbac.authorization.k8s.io/v1), with objects.py's contract."""
from __future__ import annotations

from typing import Any, Callable

from .fielderrors import FieldError

DEFAULTERS: dict[str, Callable[[Any], Any]] = {}
VALIDATORS: dict[str, Callable[..., list[FieldError]]] = {}
