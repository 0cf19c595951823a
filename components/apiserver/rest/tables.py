"""Server-side printing: objects as a meta.k8s.io Table, the columns of `kubemu get`
(kubemu/kubectl/printers.py), as kube-apiserver's TableConvertor answers
`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`. Pure: objects and the time in.

Every column is sent with its priority (1: only with -o wide); kubectl chooses what to show.
Each row carries the object as includeObject asks: its metadata (PartialObjectMetadata, the
default), the whole object, or nothing.
"""
from __future__ import annotations

from kubemu.kubectl import printers

GROUP = "meta.k8s.io"
INCLUDE = ("Metadata", "Object", "None")

COLUMN_DESCRIPTIONS = {
    "NAME": "Name must be unique within a namespace. More info: "
            "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    "AGE": "CreationTimestamp is a timestamp representing the server time when this object was created.",
}


# The column names Kubernetes spells otherwise than by capitalizing each word of the header.
TITLES = {"CLUSTER-IP": "Cluster-IP", "EXTERNAL-IP": "External-IP", "INTERNAL-IP": "Internal-IP",
          "OS-IMAGE": "OS-Image", "ADDRESSTYPE": "AddressType", "STORAGECLASS": "StorageClass",
          "VOLUMEATTRIBUTESCLASS": "VolumeAttributesClass", "VOLUMEMODE": "VolumeMode",
          "RECLAIMPOLICY": "ReclaimPolicy", "VOLUMEBINDINGMODE": "VolumeBindingMode",
          "ALLOWVOLUMEEXPANSION": "AllowVolumeExpansion"}


def column_title(header: str) -> str:
    """kubectl upper-cases the names the server sends; the server sends them as `Nominated Node`."""
    return TITLES.get(header) or " ".join(word.capitalize() for word in header.split(" "))


def columns(kind: str) -> list[dict]:
    narrow = set(printers.headers(kind, wide=False))
    out = []
    for header in printers.headers(kind, wide=True):
        out.append({"name": column_title(header), "type": "string",
                    "format": "name" if header == "NAME" else "",
                    "description": COLUMN_DESCRIPTIONS.get(header, column_title(header)),
                    "priority": 0 if header in narrow else 1})
    return out


def row_object(obj: dict, include: str, version: str = "v1") -> dict | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": f"{GROUP}/{version}",
            "metadata": obj.get("metadata") or {}}


def table(kind: str, objects: list[dict], now: float, *, include: str = "Metadata", version: str = "v1",
          list_meta: dict | None = None) -> dict:
    """A Table of `objects` (all of `kind`); `list_meta` is the list's metadata (resourceVersion, continue)."""
    rows = []
    for obj in objects:
        row: dict = {"cells": printers.row(kind, obj, now, wide=True)}
        included = row_object(obj, include, version)
        if included is not None:
            row["object"] = included
        rows.append(row)
    return {"kind": "Table", "apiVersion": f"{GROUP}/{version}", "metadata": dict(list_meta or {}),
            "columnDefinitions": columns(kind), "rows": rows}
