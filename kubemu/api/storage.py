"""Defaulting and validation of PersistentVolume and PersistentVolumeClaim (v1) and StorageClass (storage.k8s.io/v1), with objects.py's contract
(DEFAULTERS, VALIDATORS, UPDATE_VALIDATORS by kind). GROUNDWORK: metadata checks only."""
from __future__ import annotations

import copy
from typing import Any

from .fielderrors import FieldError
from .meta import register, table


def _open(fields: str) -> tuple:
    return table(fields, types={f: "" for f in fields.split()})


register(PersistentVolume=_open("apiVersion kind metadata spec status"), PersistentVolumeClaim=_open("apiVersion kind metadata spec status"),
         StorageClass=_open("apiVersion kind metadata provisioner parameters reclaimPolicy mountOptions "
                            "allowVolumeExpansion volumeBindingMode allowedTopologies"))


def _frame(obj: Any, kind: str, strict: bool) -> list[FieldError]:
    from .objects import _validate as frame  # objects imports this module
    return frame(obj, kind, strict, lambda c, o: None)


DEFAULTERS = {"PersistentVolume": copy.deepcopy, "PersistentVolumeClaim": copy.deepcopy, "StorageClass": copy.deepcopy}
VALIDATORS = {"PersistentVolume": lambda obj, *, strict=True: _frame(obj, "PersistentVolume", strict), "PersistentVolumeClaim": lambda obj, *, strict=True: _frame(obj, "PersistentVolumeClaim", strict), "StorageClass": lambda obj, *, strict=True: _frame(obj, "StorageClass", strict)}
UPDATE_VALIDATORS: dict = {}
