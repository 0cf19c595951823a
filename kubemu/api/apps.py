"""Defaulting and validation of StatefulSet, DaemonSet and ControllerRevision (apps/v1), with objects.py's contract
(DEFAULTERS, VALIDATORS, UPDATE_VALIDATORS by kind). GROUNDWORK: metadata checks only."""
from __future__ import annotations

import copy
from typing import Any

from .fielderrors import FieldError
from .meta import register, table


def _open(fields: str) -> tuple:
    return table(fields, types={f: "" for f in fields.split()})


register(StatefulSet=_open("apiVersion kind metadata spec status"), DaemonSet=_open("apiVersion kind metadata spec status"),
         ControllerRevision=_open("apiVersion kind metadata data revision"))


def _frame(obj: Any, kind: str, strict: bool) -> list[FieldError]:
    from .objects import _validate as frame  # objects imports this module
    return frame(obj, kind, strict, lambda c, o: None)


DEFAULTERS = {"StatefulSet": copy.deepcopy, "DaemonSet": copy.deepcopy, "ControllerRevision": copy.deepcopy}
VALIDATORS = {"StatefulSet": lambda obj, *, strict=True: _frame(obj, "StatefulSet", strict), "DaemonSet": lambda obj, *, strict=True: _frame(obj, "DaemonSet", strict), "ControllerRevision": lambda obj, *, strict=True: _frame(obj, "ControllerRevision", strict)}
UPDATE_VALIDATORS: dict = {}
