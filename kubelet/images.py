"""The image catalog: what a container's `image` runs, since kubemu runs processes, not images.

    catalog = load(text_of_state_dir_images_yaml_or_None, path, python=sys.executable)
    resolve(container_spec, catalog) -> Run(argv, image) | PullError(reason, message)

An image's filesystem is this machine's; what an image contributes is its ENTRYPOINT and CMD,
which the catalog gives per image name. The catalog is the state directory's `images.yaml`
(if it exists) followed by the shipped defaults (DEFAULTS below): entries are tried in order,
the first match wins, so the user's file can add images and override shipped ones.

    images:
    - image: nginx              # docker.io/library/nginx, any tag or digest
      cmd: ["{python}", "{programs}/httpd.py", "--port", "{port}"]
      port: 80                  # {port} when the container declares no containerPort
    - image: "python:3.*"       # a tag pattern (fnmatch: * ? [...]); "@sha256:..." a digest
      entrypoint: []
      cmd: ["{python}"]

Image names are normalised as Docker normalises them (`nginx` -> `docker.io/library/nginx:latest`,
`index.docker.io/x/y` -> `docker.io/x/y`), in the entries as in the pods. In `entrypoint` and
`cmd`, `{python}` is the kubelet's Python interpreter, `{programs}` the directory of the small
programs kubemu ships (kubelet/programs/), `{port}` the container's first containerPort (else
the entry's `port`).

command and args override them exactly as Kubernetes documents ("Define a Command and Arguments
for a Container"): command replaces ENTRYPOINT and drops CMD, args alone replace CMD. A
container with a command runs it whatever its image; one without a command needs its image in
the catalog, else its "pull" fails (ErrImagePull, the kubelet backs off: ImagePullBackOff).
"""
from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass
from typing import Any

import yaml

from .manifests import yaml_problem

PROGRAMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs")
CATALOG_FILE = "images.yaml"  # in the state directory

# What the shipped defaults stand for: the images' own ENTRYPOINT/CMD (busybox CMD ["sh"],
# alpine ["/bin/sh"], python ["python3"], nginx ["nginx", "-g", "daemon off;"] on port 80,
# httpd ["httpd-foreground"] on port 80, pause ["/pause"]), with local programs in their place;
# kubemu's own components for the images kubeadm deploys them from (kube-proxy's image has no
# ENTRYPOINT, its manifests give `command: [/usr/local/bin/kube-proxy]` + args; CoreDNS's is
# ENTRYPOINT ["/coredns"] with args `-conf`: here each is the component's module, args appended).
DEFAULTS = """\
images:
- image: busybox
  cmd: ["sh"]
- image: alpine
  cmd: ["/bin/sh"]
- image: ubuntu
  cmd: ["/bin/bash"]
- image: debian
  cmd: ["bash"]
- image: python
  cmd: ["{python}"]
- image: nginx
  cmd: ["{python}", "{programs}/httpd.py", "--port", "{port}"]
  port: 80
- image: httpd
  cmd: ["{python}", "{programs}/httpd.py", "--port", "{port}"]
  port: 80
- image: registry.k8s.io/pause
  cmd: ["{python}", "{programs}/pause.py"]
- image: k8s.gcr.io/pause
  cmd: ["{python}", "{programs}/pause.py"]
- image: registry.k8s.io/kube-proxy
  entrypoint: ["{python}", "-m", "components.kube_proxy"]
- image: registry.k8s.io/coredns/coredns
  entrypoint: ["{python}", "-m", "components.dns"]
"""

DOCKER_HUB = "docker.io"
DEFAULT_TAG = "latest"
ENTRY_FIELDS = ("image", "entrypoint", "cmd", "port")
PLACEHOLDER = re.compile(r"\{(\w+)\}")

# distribution/reference's grammar: a domain is host[:port] (a component with "." or ":",
# or "localhost"); path components are lower case; tags and digests as below.
_DOMAIN = re.compile(r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
                     r"(?::[0-9]+)?$")
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_TAG = re.compile(r"^[\w][\w.-]{0,127}$", re.ASCII)
_DIGEST = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}$")


class CatalogError(ValueError):
    """The catalog file cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Reference:
    repository: str      # docker.io/library/nginx
    tag: str | None      # None only with a digest and no tag
    digest: str | None

    def __str__(self) -> str:
        return self.repository + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse_reference(ref: str, *, pattern: bool = False) -> Reference:
    """Docker's normalisation (ParseNormalizedNamed + TagNameOnly): the default domain and
    `library/`, the default tag `latest` unless a digest is given. A pattern may hold globs
    and gets no default tag (no tag: any). Raises ValueError for what Docker refuses."""
    name, _, digest = ref.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    first, sep, rest = name.partition("/")
    if sep and (("." in first or ":" in first) or first == "localhost" or first != first.lower()):
        domain, path = first, rest
    else:
        domain, path = DOCKER_HUB, name
    if domain == "index.docker.io":
        domain = DOCKER_HUB
    if domain == DOCKER_HUB and "/" not in path:
        path = "library/" + path
    if not pattern:
        if not (_DOMAIN.match(domain) and path and all(_COMPONENT.match(c) for c in path.split("/"))
                and (tag is None or _TAG.match(tag)) and (not digest or _DIGEST.match(digest))
                and (digest or "@" not in ref)):
            raise ValueError("invalid reference format")
        if tag is None and not digest:
            tag = DEFAULT_TAG
    elif not path or (tag == "") or ("@" in ref and not digest):
        raise ValueError("invalid reference format")
    return Reference(f"{domain}/{path}", tag, digest or None)


@dataclass(frozen=True)
class Entry:
    pattern: Reference
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    port: int | None = None

    def matches(self, ref: Reference) -> bool:
        p = self.pattern
        if not fnmatch.fnmatchcase(ref.repository, p.repository):
            return False
        if p.digest:
            return ref.digest == p.digest
        return p.tag is None or (ref.tag is not None and fnmatch.fnmatchcase(ref.tag, p.tag))


@dataclass(frozen=True)
class Catalog:
    entries: tuple[Entry, ...]
    source: str        # where the entries come from, for messages
    python: str = "python3"  # {python}
    programs: str = PROGRAMS_DIR  # {programs}
    error: str | None = None  # the catalog file cannot be used: why (no image resolves then)

    def lookup(self, ref: Reference) -> Entry | None:
        return next((e for e in self.entries if e.matches(ref)), None)


def parse_entries(text: str, source: str) -> tuple[Entry, ...]:
    """The entries of a catalog file's text; CatalogError names `source` and what is wrong."""
    try:
        doc = yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        raise CatalogError(f"{source}: invalid YAML: {yaml_problem(err)}") from None
    except (yaml.YAMLError, RecursionError, ValueError) as err:  # RecursionError: absurd nesting
        raise CatalogError(f"{source}: invalid YAML: {' '.join(str(err).split()) or type(err).__name__}") from None
    if doc is None:
        return ()
    if not isinstance(doc, dict) or set(doc) - {"images"} or not isinstance(doc.get("images") or [], list):
        raise CatalogError(f"{source}: expected a mapping with one key, images: a list of entries")
    return tuple(_entry(item, f"{source}: images[{i}]") for i, item in enumerate(doc.get("images") or []))


def _entry(item: Any, where: str) -> Entry:
    if not isinstance(item, dict):
        raise CatalogError(f"{where}: expected a mapping (image, entrypoint, cmd, port)")
    unknown = sorted(str(k) for k in set(item) - set(ENTRY_FIELDS))
    if unknown:
        raise CatalogError(f"{where}: unknown field {unknown[0]!r} (fields: {', '.join(ENTRY_FIELDS)})")
    image = item.get("image")
    if not isinstance(image, str) or not image:
        raise CatalogError(f"{where}.image: required: an image name, e.g. nginx or python:3.*")
    try:
        pattern = parse_reference(image, pattern=True)
    except ValueError as err:
        raise CatalogError(f"{where}.image: {image!r}: {err}") from None
    argv = {}
    for field in ("entrypoint", "cmd"):
        value = item.get(field) or []
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise CatalogError(f"{where}.{field}: expected a list of strings")
        argv[field] = tuple(value)
    if not argv["entrypoint"] and not argv["cmd"]:
        raise CatalogError(f"{where}: an entry needs an entrypoint or a cmd")
    port = item.get("port")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536):
        raise CatalogError(f"{where}.port: expected a port number (1-65535)")
    used = {m for a in argv["entrypoint"] + argv["cmd"] for m in PLACEHOLDER.findall(a)}
    if "port" in used and port is None:
        raise CatalogError(f"{where}: uses {{port}}, so it needs a port (for containers without a containerPort)")
    return Entry(pattern, argv["entrypoint"], argv["cmd"], port)


DEFAULT_ENTRIES = parse_entries(DEFAULTS, "kubemu's default image catalog")
NO_CATALOG = Catalog((), "(none)")  # only command/args run


def load(text: str | None, path: str, *, python: str) -> Catalog:
    """The catalog: the entries of the file at `path` (its `text`, None when there is no such
    file), then the shipped defaults. A file that cannot be used gives a catalog with its
    `error`: guessing what its author meant could run the wrong program."""
    try:
        own = () if text is None else parse_entries(text, path)
    except CatalogError as err:
        return Catalog((), path, python=python, error=str(err))
    return Catalog(own + DEFAULT_ENTRIES, f"{path} (no such file: kubemu's defaults only)" if text is None
                   else f"{path} (then kubemu's defaults)", python=python)


def defaults_only(python: str) -> Catalog:
    """The catalog of a kubelet given no catalog file."""
    return Catalog(DEFAULT_ENTRIES, "kubemu's defaults (the kubelet has no catalog file)", python=python)


def unreadable(path: str, reason: str, *, python: str) -> Catalog:
    """The catalog when its file exists but cannot be read."""
    return Catalog((), path, python=python, error=f"{path}: {reason}")


# --- resolving a container -------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """What to run: the argv, and the image the catalog supplied it from (None: not from one)."""
    argv: tuple[str, ...]
    image: str | None = None


@dataclass(frozen=True)
class PullError:
    """The image cannot be had: the container waits with `reason` (ErrImagePull,
    InvalidImageName, ErrImageNeverPull) and `message`, the kubelet's wording."""
    reason: str
    message: str
    image: str


def resolve(container: dict, catalog: Catalog) -> Run | PullError:
    """The argv of a container: command/args over the catalog's entrypoint/cmd, Kubernetes' rules."""
    command = list(container.get("command") or [])
    args = list(container.get("args") or [])
    image = container.get("image") or ""
    entry = None
    try:
        ref = parse_reference(image) if image else None
    except ValueError as err:
        ref = None
        if not command:
            return PullError("InvalidImageName", f'Failed to apply default image tag "{image}": '
                             f'couldn\'t parse image reference "{image}": {err}', image)
    if ref is not None:
        entry = catalog.lookup(ref)
    if command:
        return Run(tuple(command + args), image if entry is not None else None)
    if catalog.error:
        return PullError("ErrImagePull", f"the image catalog cannot be used: {catalog.error}", image)
    if entry is None and container.get("imagePullPolicy") == "Never":
        return PullError("ErrImageNeverPull", f'Container image "{image}" is not present with pull policy of Never',
                         image)
    if entry is None:
        what = f'"{ref}"' if ref else "(none)"
        return PullError("ErrImagePull", f"failed to resolve reference {what}: not in the image catalog "
                         f"{catalog.source}: add it there, or give the container a command", image)
    values = {"python": catalog.python, "programs": catalog.programs, "port": str(_port(container, entry))}

    def expand(arg: str) -> str:
        return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), arg)

    # ENTRYPOINT + CMD; args replace CMD; the user's own strings are never expanded.
    cmd = tuple(args) if args else tuple(expand(a) for a in entry.cmd)
    return Run(tuple(expand(a) for a in entry.entrypoint) + cmd, image)


def _port(container: dict, entry: Entry) -> int | None:
    for port in container.get("ports") or []:
        if isinstance(port, dict) and isinstance(port.get("containerPort"), int) \
                and (port.get("protocol") or "TCP") == "TCP":
            return port["containerPort"]
    return entry.port
