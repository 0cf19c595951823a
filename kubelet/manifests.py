"""The kubelet's file source: static pods from a manifest directory.

Kubernetes' rules (pkg/kubelet/config/file.go and common.go), re-implemented:

  * the directory holds one Pod per file; every regular file whose name does not start with
    "." is a manifest (editors' swap and backup files are dotfiles), read in sorted order;
    subdirectories are not entered, symlinks are followed;
  * a file is at most 10 MiB (the kubelet's maxConfigLength);
  * a manifest is one YAML (or JSON) document holding `apiVersion: v1, kind: Pod`. The kubelet
    decodes only the first document of a file; kubemu rejects a second one instead of silently
    ignoring it;
  * a static pod needs `metadata.name` (generateName is not honoured);
  * the kubelet's static defaults (applyDefaults):
      - metadata.uid, when unset: a hash of where the pod comes from and what it says;
      - metadata.name becomes "<name>-<node name, lowercased>", unique per node;
      - metadata.namespace "default" when empty; spec.nodeName = the node;
      - annotations kubernetes.io/config.hash = the uid, kubernetes.io/config.source = "file"
        (kubernetes.io/config.seen is the caller's: it is a time);
      - the toleration {"operator": "Exists", "effect": "NoExecute"} so that node problems
        never evict a static pod;
      - status.phase Pending;
    then the API defaults (default_pod) and validation (validate_pod, strict): one bad field
    makes the whole manifest invalid.

The hash: MD5 (as the kubelet uses) of the file's bytes, the node name and the path, each
length-prefixed so that no two different triples hash alike. The kubelet hashes the decoded
object instead; hashing the bytes keeps this pure and has the property that matters: the same
content in the same file on the same node always gets the same uid (rewriting a file with
identical content changes nothing), and any change to the content gives a new one, which the
kubelet's shell treats as a new pod (the old one is stopped).

Only `list_manifest_files` and `load_manifest` touch the disk; everything else is pure.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, NamedTuple

import yaml

from kubemu.api.fielderrors import REQUIRED, FieldError, ValidationError, go_value, required
from kubemu.api.pod import default_pod, validate_pod

MAX_MANIFEST_BYTES = 10 * 1024 * 1024  # the kubelet's maxConfigLength

CONFIG_HASH = "kubernetes.io/config.hash"
CONFIG_SOURCE = "kubernetes.io/config.source"
CONFIG_SEEN = "kubernetes.io/config.seen"
SOURCE_FILE = "file"

# What the kubelet adds to every static pod so it is never evicted for a NoExecute taint.
STATIC_TOLERATION = {"operator": "Exists", "effect": "NoExecute"}


class Manifest(NamedTuple):
    """One manifest file: its defaulted pod, or why it cannot run (exactly one is set)."""

    path: str
    pod: dict | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


class ManifestError(Exception):
    """Why a file is not a usable manifest (the message does not name the file)."""


def is_static(pod: dict) -> bool:
    """A pod from a manifest (the kubelet's IsStaticPod): it never waits for the API."""
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(CONFIG_SOURCE) == SOURCE_FILE


# --- the directory (I/O) -------------------------------------------------------------------

def list_manifest_files(directory: str) -> list[str]:
    """The manifest paths in `directory`, sorted: regular files (or symlinks to one) whose name
    does not start with ".". A missing directory has no manifests; other errors propagate."""
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []
    paths = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            if entry.is_file():  # follows symlinks; a dangling one is skipped
                paths.append(entry.path)
        except OSError:  # gone or unreadable since the listing: skipped, as the kubelet does
            continue
    return sorted(paths)


def load_manifest(node: str, path: str) -> Manifest:
    """Read and parse one manifest file; never raises."""
    try:
        with open(path, "rb") as f:
            content = f.read(MAX_MANIFEST_BYTES + 1)
    except (OSError, ValueError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        return Manifest(path, None, f"{path}: cannot read: {reason}")
    return parse_manifest(node, path, content)


# --- one file (pure) -------------------------------------------------------------------------

def parse_manifest(node: str, path: str, content: bytes) -> Manifest:
    """The static pod a file's `content` describes, defaulted for `node`, or an error message
    that names the file and says what is wrong in one line."""
    try:
        pod = _decode(content)
        _check_kind(pod)
    except ManifestError as e:
        return Manifest(path, None, f"{path}: {e}")
    pod = default_pod(apply_static_defaults(pod, node, path, content), with_status=True)
    errors = _with_static_rules(pod, validate_pod(pod, strict=True))
    if errors:
        name = _get(pod, "metadata", "name")
        name = name if isinstance(name, str) else ""
        return Manifest(path, None, f"{path}: {ValidationError(errors, kind='Pod', name=name)}")
    return Manifest(path, pod, None)


def manifest_hash(node: str, path: str, content: bytes) -> str:
    """The uid (and config hash) of a static pod without one: 32 hex digits of MD5."""
    h = hashlib.md5(usedforsecurity=False)
    for part in (content, node.encode("utf-8", "surrogateescape"),
                 path.encode("utf-8", "surrogateescape")):
        h.update(b"%d:" % len(part))
        h.update(part)
    return h.hexdigest()


def apply_static_defaults(pod: dict, node: str, path: str, content: bytes) -> dict:
    """The kubelet's applyDefaults for a file source, on a copy. Parts of the wrong type are
    left alone for validation to report."""
    pod = dict(pod)
    if pod.get("metadata") is None:
        pod["metadata"] = {}
    if isinstance(pod["metadata"], dict):
        meta = pod["metadata"] = dict(pod["metadata"])
        if not meta.get("uid"):
            meta["uid"] = manifest_hash(node, path, content)
        if isinstance(meta.get("name"), str) and meta["name"]:
            meta["name"] = f"{meta['name']}-{node.lower()}"
        if not meta.get("namespace"):
            meta["namespace"] = "default"
        if meta.get("annotations") is None:
            meta["annotations"] = {}
        if isinstance(meta["annotations"], dict):
            meta["annotations"] = {**meta["annotations"], CONFIG_HASH: meta["uid"],
                                   CONFIG_SOURCE: SOURCE_FILE}
    if isinstance(pod.get("spec"), dict):
        spec = pod["spec"] = dict(pod["spec"])
        spec["nodeName"] = node
        if spec.get("tolerations") is None:
            spec["tolerations"] = []
        if isinstance(spec["tolerations"], list):
            spec["tolerations"] = _add_toleration(spec["tolerations"], STATIC_TOLERATION)
    return pod


def _add_toleration(tolerations: list, toleration: dict) -> list:
    """AddOrUpdateTolerationInPod: replace a toleration matching on key, operator, value and
    effect, else append."""
    ident = ("key", "operator", "value", "effect")

    def same(t: Any) -> bool:
        return isinstance(t, dict) and all(t.get(f) == toleration.get(f) for f in ident)

    if any(same(t) for t in tolerations):
        return [dict(toleration) if same(t) else t for t in tolerations]
    return [*tolerations, dict(toleration)]


def _with_static_rules(pod: dict, errors: list[FieldError]) -> list[FieldError]:
    """A static pod needs a name of its own: no apiserver is there to generate one, so
    generateName does not count (the kubelet: "name is needed for the pod")."""
    meta = pod.get("metadata")
    if not isinstance(meta, dict) or meta.get("name") not in (None, ""):
        return errors
    rest = [e for e in errors if not (e.path == "metadata.name" and e.type == REQUIRED)]
    return [required("metadata.name", "a static pod needs a name (generateName is not supported)"),
            *rest]


# --- decoding ----------------------------------------------------------------------------------

class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings (the Pod API has no timestamp fields a user
    writes, and a date-like annotation or env value must stay a string) and has no "=" value
    tag (a lone "=" is a string, not a constructor error)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers
            if tag not in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _decode(content: bytes) -> Any:
    """The one document in `content`."""
    if len(content) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"file is larger than {MAX_MANIFEST_BYTES} bytes")
    if b"\0" in content:
        raise ManifestError("not a text file (it contains NUL bytes)")
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise ManifestError(f"not UTF-8 text (invalid byte at offset {e.start})") from None
    try:
        documents = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    except yaml.MarkedYAMLError as e:
        raise ManifestError(f"invalid YAML: {yaml_problem(e)}") from None
    except yaml.reader.ReaderError as e:  # a control character; YAML allows printable text only
        raise ManifestError(f"invalid YAML: unacceptable character #x{e.character:04x} at "
                            f"character {e.position}: {e.reason}") from None
    except yaml.YAMLError as e:
        raise ManifestError(f"invalid YAML: {' '.join(str(e).split())}") from None
    except (RecursionError, ValueError) as e:  # absurd nesting; integers past Python's digit limit
        raise ManifestError(f"invalid YAML: {type(e).__name__}: {e}") from None
    if not documents:
        raise ManifestError("empty manifest: expected a Pod")
    if len(documents) > 1:
        raise ManifestError(f"multiple documents are not supported: found {len(documents)}, "
                            "a static pod manifest holds exactly one Pod")
    return documents[0]


def yaml_problem(e: yaml.MarkedYAMLError) -> str:
    """'line L, column C: <problem> (<context> at line ...)', lines and columns from 1."""
    mark = e.problem_mark or e.context_mark
    text = e.problem or e.context or "malformed"
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    if e.context and e.problem:
        cm = e.context_mark
        at = f" at line {cm.line + 1}, column {cm.column + 1}" if cm else ""
        text += f" ({e.context}{at})"
    return where + text


def _check_kind(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise ManifestError(f"expected a Pod (a YAML mapping), found {_type_name(doc)}")
    kind, version = doc.get("kind"), doc.get("apiVersion")
    if kind in (None, ""):
        raise ManifestError("kind is missing: a static pod manifest holds one Pod "
                            "(apiVersion: v1, kind: Pod)")
    if kind != "Pod":
        raise ManifestError(f"kind {go_value(kind)} is not supported: a static pod manifest holds "
                            "one Pod (apiVersion: v1, kind: Pod)")
    if version != "v1":
        shown = "is missing" if version in (None, "") else f"{go_value(version)} is not supported"
        raise ManifestError(f"apiVersion {shown}: a Pod is apiVersion v1")


def _type_name(value: Any) -> str:
    names = {list: "a list", str: "a string", bool: "a boolean", int: "a number",
             float: "a number"}
    return names.get(type(value), type(value).__name__)


def _get(obj: Any, *fields: str) -> Any:
    for field in fields:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(field)
    return obj
