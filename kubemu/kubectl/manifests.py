"""Reading `-f` manifests: files, directories and stdin; multi-document YAML, JSON, `kind: List`.

    manifests, errors = load(["app.yaml", "dir/"], recursive=False, read_stdin=sys.stdin.buffer.read)

As kubectl (ContinueOnError) reads them: every object that can be read is returned, and each
file or document that cannot be is one CommandError, worded as kubectl's (printed after `error: `):

    error parsing bad.yaml: error converting YAML to JSON: yaml: line 3: mapping values are not allowed here
    the path "nope.yaml" does not exist
    resource mapping not found for name: "x" namespace: "" from "f.yaml": no matches for kind "Foo" in version "v1"

A parse error ends its file (the documents before it are kept); a document that is not an
object, or has no kind, is skipped alone. A path that does not exist, or a directory without
manifests, is raised at once: nothing is applied then.

Limits (kubemu.api.limits), checked before anything recursive runs: a file (or stdin) of at most
MAX_MANIFEST_BYTES, objects nested at most MAX_DEPTH deep and holding at most MAX_VALUES values
(YAML aliases counted each time they are used).
"""
from __future__ import annotations

import base64
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import yaml

from kubemu.api.limits import MAX_DEPTH, MAX_MANIFEST_BYTES, ShapeError, check_shape, json_too_deep_at
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


def load(filenames: list[str], recursive: bool,
         read_stdin: Callable[[int], bytes]) -> tuple[list[Manifest], list[CommandError]]:
    """Every object in the given files, directories (their .json/.yaml/.yml files) or stdin,
    and an error for each file or document that could not be read. `read_stdin(n)` reads at
    most n bytes."""
    if not filenames:
        raise CommandError("must specify one of -f and -k")
    sources = [found for name in filenames for found in _sources(name, recursive)]
    manifests: list[Manifest] = []
    errors: list[CommandError] = []
    for source, path in sources:
        try:
            text = _read_stdin(read_stdin) if path is None else _text(path)
        except CommandError as err:
            errors.append(err)
            continue
        objects, problems = parse(source, text)
        manifests.extend(Manifest(source, obj) for obj in objects)
        errors.extend(problems)
    return manifests, errors


def _sources(name: str, recursive: bool) -> list[tuple[str, Path | None]]:
    """(source name, path or None for stdin) of each file `name` stands for."""
    if name == STDIN:
        return [(STDIN_SOURCE, None)]
    path = Path(name)
    if not path.exists():
        raise CommandError(f'the path "{name}" does not exist')
    if path.is_dir():
        found = sorted(p for p in (path.rglob("*") if recursive else path.iterdir())
                       if p.is_file() and p.suffix in EXTENSIONS)
        if not found:
            raise CommandError(f"error reading [{name}]: recognized file extensions are "
                               f"[{' '.join(EXTENSIONS)}]")
        return [(str(p), p) for p in found]
    return [(name, path)]


def _too_large(source: str, size: str) -> CommandError:
    return CommandError(f"error reading {source}: {size}, more than the limit of {MAX_MANIFEST_BYTES} bytes")


def _read_stdin(read_stdin: Callable[[int], bytes]) -> str:
    try:
        return _decoded(STDIN_SOURCE, read_stdin(MAX_MANIFEST_BYTES + 1), "the input is larger")
    except OSError as err:
        raise CommandError(f"error reading {STDIN_SOURCE}: {err}") from None


def _text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_MANIFEST_BYTES:
            raise _too_large(str(path), f"the file is {size} bytes")
        with path.open("rb") as f:  # a file that grew since: read no more than the limit allows
            return _decoded(str(path), f.read(MAX_MANIFEST_BYTES + 1), "the file is larger")
    except OSError as err:
        raise CommandError(f"error reading {path}: {err}") from None


def _decoded(source: str, data: bytes, larger: str) -> str:
    """The text of what was read (at most one byte past the limit)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise _too_large(source, larger)
    try:
        return data.decode()
    except UnicodeDecodeError as err:
        raise CommandError(f"error reading {source}: {err}") from None


def parse(source: str, text: str) -> tuple[list[dict], list[CommandError]]:
    """The objects of one file, and its errors: a stream of JSON objects when it starts with `{`,
    else YAML documents; empty documents are skipped and a `List`'s items taken one by one."""
    docs, error = _json_docs(source, text) if text.lstrip().startswith("{") else _yaml_docs(source, text)
    objects: list[dict] = []
    errors: list[CommandError] = []
    for doc in docs:
        try:
            objects.extend(_objects(source, doc))
        except CommandError as err:
            errors.append(err)
    return objects, errors + ([error] if error else [])


def _objects(source: str, doc: object) -> list[dict]:
    if doc is None:
        return []
    if not isinstance(doc, dict):
        raise CommandError(f'unable to decode "{source}": json: cannot unmarshal {_json_type(doc)} into '
                           "Go value of type map[string]interface {}")
    for field in ("apiVersion", "kind"):
        if doc.get(field) is not None and not isinstance(doc[field], str):
            raise CommandError(f'unable to decode "{source}": json: cannot unmarshal {_json_type(doc[field])} into '
                               f"Go struct field .{field} of type string")
    if not doc.get("kind"):
        raise CommandError(f"unable to decode \"{source}\": Object 'Kind' is missing in "
                           f"'{json.dumps(doc, separators=(',', ':'))}'")
    _check_accessors(source, doc)
    if doc["kind"] == "List":
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise CommandError(f'unable to decode "{source}": json: cannot unmarshal {_json_type(items)} into '
                               "Go struct field List.items of type []runtime.RawExtension")
        return [obj for item in items for obj in _objects(source, item)]
    return [doc]


# The metadata kubectl reads through unstructured's accessors: (path, the type it must have)
_ACCESSED = ((("metadata",), dict), (("metadata", "name"), str), (("metadata", "generateName"), str),
             (("metadata", "namespace"), str), (("metadata", "labels"), dict), (("metadata", "annotations"), dict))


def _check_accessors(source: str, doc: dict) -> None:
    """kubectl's "accessor error" for metadata of the wrong type (`metadata: abc`), so that
    nothing past here meets a metadata that is not a map, or a name that is not a string."""
    for path, want in _ACCESSED:
        value = doc
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None and not isinstance(value, want):
            shown = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            raise CommandError(f'unable to decode "{source}": .{".".join(path)} accessor error: '
                               f"{shown[:200]} is of the type {_go_type(value)}, expected {_go_type(want())}")


def _go_type(value: object) -> str:
    """How Go names the type of a decoded JSON value."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, dict):
        return "map[string]interface {}"
    return "string"


def _too_deep(source: str, where: str) -> CommandError:
    return CommandError(f"error parsing {source}: nested more than {MAX_DEPTH} levels deep (the limit) at {where}")


def _number(text: str) -> int | float:
    """A JSON integer as unstructured decodes it: an int64, else a float64 (so a number too
    large for any field is the apiserver's "must be an integer", not a client failure)."""
    value = int(text)
    return value if INT64_MIN <= value <= INT64_MAX else float(value)


INT64_MIN, INT64_MAX = -2**63, 2**63 - 1
_DECODER = json.JSONDecoder(parse_int=_number)


def _json_docs(source: str, text: str) -> tuple[list, CommandError | None]:
    """The JSON values of the text, and the error that ended it early (if any)."""
    cut = json_too_deep_at(text)
    body = text if cut is None else text[:cut]  # sliced once: raw_decode is called per document
    end = len(body)
    decoder = _DECODER
    docs, pos = [], 0
    while True:
        while pos < end and body[pos].isspace():
            pos += 1
        if pos >= end:
            return docs, None if cut is None else _too_deep(source, _line_column(text, cut))
        try:
            doc, pos = decoder.raw_decode(body, pos)
        except json.JSONDecodeError as err:
            if cut is not None:  # the document that nests too deep, cut short
                return docs, _too_deep(source, _line_column(text, cut))
            return docs, CommandError(f"error parsing {source}: {err.msg} at line {err.lineno} column {err.colno}")
        docs.append(doc)


def _line_column(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    return f"line {line} column {offset - text.rfind(chr(10), 0, offset)}"


def _yaml_docs(source: str, text: str) -> tuple[list, CommandError | None]:
    """The YAML documents of the text, through JSON, and the error that ended it early (if any)."""
    good, error = _yaml_scan(source, text)
    docs = []
    try:
        for doc in itertools.islice(yaml.load_all(text, Loader=_Loader), good):
            try:
                check_shape(doc)
                docs.append(_through_json(doc))
            except (ShapeError, TypeError, ValueError) as err:
                return docs, CommandError(f"error parsing {source}: error converting YAML to JSON: {err}")
    except yaml.YAMLError as err:
        return docs, _yaml_error(source, err)
    return docs, error


def _yaml_scan(source: str, text: str) -> tuple[int, CommandError | None]:
    """How many documents parse and nest within MAX_DEPTH, and the error after them (if any):
    the parser's events are counted without building anything, so no depth can overflow."""
    good, level = 0, 0
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                level += 1
                if level > MAX_DEPTH:
                    return good, _too_deep(source, f"line {event.start_mark.line + 1}")
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                level -= 1
            elif isinstance(event, yaml.DocumentEndEvent):
                good += 1
    except yaml.YAMLError as err:
        return good, _yaml_error(source, err)
    return good, None


def _yaml_error(source: str, err: yaml.YAMLError) -> CommandError:
    if isinstance(err, yaml.MarkedYAMLError):
        mark = err.problem_mark or err.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        text = f"{line}{err.problem or err.context}"
    else:
        text = str(err)
    return CommandError(f"error parsing {source}: error converting YAML to JSON: yaml: {text}")


def _through_json(doc: object) -> object:
    """The document as YAML-to-JSON leaves it: keys become strings (`1:` is "1", `null:` is
    "null"), !!binary becomes base64 text; a value JSON cannot hold (a NaN) is a ValueError."""
    return _DECODER.decode(json.dumps(doc, allow_nan=False, default=_json_default))


def _json_default(value: object) -> object:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    raise TypeError(f"unsupported value of type {type(value).__name__}")


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
