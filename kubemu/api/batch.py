"""Defaulting and validation of Job and CronJob (batch/v1), with objects.py's contract
(DEFAULTERS, VALIDATORS, UPDATE_VALIDATORS by kind). GROUNDWORK: metadata checks only."""
from __future__ import annotations

import copy
from typing import Any

from .fielderrors import FieldError
from .meta import register, table


def _open(fields: str) -> tuple:
    return table(fields, types={f: "" for f in fields.split()})


register(Job=_open("apiVersion kind metadata spec status"), CronJob=_open("apiVersion kind metadata spec status"))


def _frame(obj: Any, kind: str, strict: bool) -> list[FieldError]:
    from .objects import _validate as frame  # objects imports this module
    return frame(obj, kind, strict, lambda c, o: None)


DEFAULTERS = {"Job": copy.deepcopy, "CronJob": copy.deepcopy}
VALIDATORS = {"Job": lambda obj, *, strict=True: _frame(obj, "Job", strict), "CronJob": lambda obj, *, strict=True: _frame(obj, "CronJob", strict)}
UPDATE_VALIDATORS: dict = {}
