"""Reading `-f` manifests: files, directories and stdin; multi-document YAML, JSON, `kind: List`.

Every problem is a CommandError worded as kubectl's (printed after `error: `):

    error parsing bad.yaml: error converting YAML to JSON: yaml: line 3: mapping values are not allowed here
    the path "nope.yaml" does not exist
    resource mapping not found for name: "x" namespace: "" from "f.yaml": no matches for kind "Foo" in version "v1"
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from kubemu.api.resources import Resource, UnknownResourceError, for_kind

from .session import CommandError

STDIN = "-"
STDIN_SOURCE = "STDIN"  # how kubectl names stdin in messages
EXTENSIONS = (".json", ".yaml", ".yml")


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """YAML as kubectl reads it: through JSON, so timestamps stay strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


@dataclass(frozen=True)
class Manifest:
    source: str   # the file it came from, or STDIN
    obj: dict

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name") or "")

    @property
    def namespace(self) -> str:
        return str((self.obj.get("metadata") or {}).get("namespace") or "")

    def resource(self) -> Resource:
        """The resource serving this kind, else kubectl's "resource mapping not found"."""
        try:
            return for_kind(self.obj.get("apiVersion"), self.obj.get("kind"))
        except UnknownResourceError:
            raise CommandError(
                f'resource mapping not found for name: "{self.name}" namespace: "{self.namespace}" '
                f'from "{self.source}": no matches for kind "{self.obj.get("kind") or ""}" in version '
                f'"{self.obj.get("apiVersion") or ""}"\nensure CRDs are installed first') from None


def load(filenames: list[str], recursive: bool, read_stdin: Callable[[], str]) -> list[Manifest]:
    """Every object in the given files, directories (their .json/.yaml/.yml files) or stdin."""
    if not filenames:
        raise CommandError("must specify one of -f and -k")
    out: list[Manifest] = []
    for name in filenames:
        for source, text in _read(name, recursive, read_stdin):
            out.extend(Manifest(source, obj) for obj in parse(source, text))
    return out


def _read(name: str, recursive: bool, read_stdin: Callable[[], str]) -> list[tuple[str, str]]:
    if name == STDIN:
        return [(STDIN_SOURCE, read_stdin())]
    path = Path(name)
    if not path.exists():
        raise CommandError(f'the path "{name}" does not exist')
    if path.is_dir():
        found = sorted(p for p in (path.rglob("*") if recursive else path.iterdir())
                       if p.is_file() and p.suffix in EXTENSIONS)
        if not found:
            raise CommandError(f"error reading [{name}]: recognized file extensions are "
                               f"[{' '.join(EXTENSIONS)}]")
        return [(str(p), _text(p)) for p in found]
    return [(name, _text(path))]


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise CommandError(f"error reading {path}: {err}") from None


def parse(source: str, text: str) -> list[dict]:
    """The objects of one file: a stream of JSON objects when it starts with `{`, else YAML
    documents; empty documents are skipped and a `List`'s items taken one by one."""
    docs = _json_docs(source, text) if text.lstrip().startswith("{") else _yaml_docs(source, text)
    return _objects(source, docs)


def _objects(source: str, docs: list) -> list[dict]:
    objects: list[dict] = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise CommandError(f'unable to decode "{source}": json: cannot unmarshal {_json_type(doc)} into '
                               "Go value of type map[string]interface {}")
        if not doc.get("kind"):
            raise CommandError(f"unable to decode \"{source}\": Object 'Kind' is missing in "
                               f"'{json.dumps(doc, separators=(',', ':'), default=str)}'")
        if doc["kind"] == "List":
            objects.extend(_objects(source, doc.get("items") or []))
        else:
            objects.append(doc)
    return objects


def _json_docs(source: str, text: str) -> list:
    decoder = json.JSONDecoder()
    docs, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return docs
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            raise CommandError(f"error parsing {source}: {err.msg} at line {err.lineno} column {err.colno}") \
                from None
        docs.append(doc)


def _yaml_docs(source: str, text: str) -> list:
    try:
        return list(yaml.load_all(text, Loader=_Loader))
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise CommandError(f"error parsing {source}: error converting YAML to JSON: yaml: {line}"
                           f"{err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise CommandError(f"error parsing {source}: error converting YAML to JSON: yaml: {err}") from None


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return type(value).__name__
