"""`-o` for get and friends: kubectl's tables, json, yaml and name output.

A `Printer` keeps what must persist across calls for `-w`: whether the table's header was
printed, its column widths, and whether a YAML document separator is due.
"""
from __future__ import annotations

import json

import yaml

from kubemu.api.resources import Resource

from . import printers
from .tabwriter import GET, TabWriter

OUTPUTS = ("wide", "json", "yaml", "name")


def qualified_kind(r: Resource) -> str:
    """kubectl's `kind.group`: pod, deployment.apps, lease.coordination.k8s.io."""
    return f"{r.kind.lower()}.{r.group}" if r.group else r.kind.lower()


def object_name(r: Resource, name: str) -> str:
    """`-o name` and the messages of apply/scale/rollout: deployment.apps/web."""
    return f"{qualified_kind(r)}/{name}"


def plural_name(r: Resource) -> str:
    """schema.GroupResource's string: pods, deployments.apps."""
    return f"{r.plural}.{r.group}" if r.group else r.plural


def to_json(obj: dict) -> str:
    return json.dumps(obj, indent=4, sort_keys=True, ensure_ascii=False) + "\n"


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """YAML as kubectl writes it: multi-line strings (the last-applied annotation) as blocks."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _string)


def to_yaml(obj: dict) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=True, default_flow_style=False, allow_unicode=True)


def as_list(items: list[dict]) -> dict:
    """What kubectl prints for several objects in json or yaml."""
    return {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}


class Printer:
    def __init__(self, output: str | None, *, all_namespaces: bool = False, with_kind: bool = False,
                 show_labels: bool = False, no_headers: bool = False):
        self.output = output
        self.all_namespaces = all_namespaces
        self.with_kind = with_kind
        self.show_labels = show_labels
        self.no_headers = no_headers
        self._table = TabWriter(**GET, remember_widths=True)
        self._kind: str | None = None  # the kind of the table being printed
        self._documents = 0

    @property
    def is_table(self) -> bool:
        return self.output in (None, "wide")

    def objects(self, r: Resource, objs: list[dict], now: float) -> str:
        """Text for some objects of one resource: table rows (a header first when a new kind
        starts), or one document / name per object."""
        if self.is_table:
            return self.table(r, objs, now)
        return "".join(self.document(r, obj) for obj in objs)

    def document(self, r: Resource, obj: dict) -> str:
        if self.output == "name":
            return object_name(r, (obj.get("metadata") or {}).get("name", "")) + "\n"
        if self.output == "json":
            return to_json(obj)
        self._documents += 1
        return ("---\n" if self._documents > 1 else "") + to_yaml(obj)

    def table(self, r: Resource, objs: list[dict], now: float) -> str:
        if not objs:
            return ""
        wide = self.output == "wide"
        lines: list[list[str]] = []
        lead = ""
        if r.kind != self._kind:
            if self._kind is not None:
                self._table.reset()
                lead = "\n"  # a blank line between the tables of several kinds
            self._kind = r.kind
            if not self.no_headers:
                lines.append(self._decorate(r, printers.headers(r.kind, wide), "NAMESPACE", "LABELS"))
        name_at = printers.name_column(r.kind, wide)
        for obj in objs:
            cells = printers.row(r.kind, obj, now, wide)
            if self.with_kind and name_at is not None:
                cells[name_at] = object_name(r, cells[name_at])
            meta = obj.get("metadata") or {}
            lines.append(self._decorate(r, cells, meta.get("namespace", ""), printers.labels_text(obj)))
        return lead + self._table.format("".join("\t".join(cells) + "\n" for cells in lines))

    def _decorate(self, r: Resource, cells: list[str], namespace: str, labels: str) -> list[str]:
        """The NAMESPACE column first with -A, the LABELS column last with --show-labels."""
        out = list(cells)
        if self.all_namespaces and r.namespaced:
            out.insert(0, namespace)
        if self.show_labels:
            out.append(labels)
        return out
