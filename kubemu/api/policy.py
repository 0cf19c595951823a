"""Defaulting and validation of PodDisruptionBudget (policy/v1), with objects.py's contract
(DEFAULTERS, VALIDATORS, UPDATE_VALIDATORS by kind). GROUNDWORK: metadata checks only."""
from __future__ import annotations

import copy
from typing import Any

from .fielderrors import FieldError
from .meta import register, table


def _open(fields: str) -> tuple:
    return table(fields, types={f: "" for f in fields.split()})


register(PodDisruptionBudget=_open("apiVersion kind metadata spec status"))


def _frame(obj: Any, kind: str, strict: bool) -> list[FieldError]:
    from .objects import _validate as frame  # objects imports this module
    return frame(obj, kind, strict, lambda c, o: None)


DEFAULTERS = {"PodDisruptionBudget": copy.deepcopy}
VALIDATORS = {"PodDisruptionBudget": lambda obj, *, strict=True: _frame(obj, "PodDisruptionBudget", strict)}
UPDATE_VALIDATORS: dict = {}
