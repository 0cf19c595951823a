"""kubeconfig files: the ones `kubemu up` writes for the admin, the components and each kubelet
(kubeadm's admin.conf, scheduler.conf, controller-manager.conf, kubelet.conf, credentials
embedded), and the context it merges into the user's kubeconfig and takes out again, as
`kind create cluster` / `kind delete cluster` do. build/merge/unmerge are pure (dicts in,
dicts out); load/write/locked are the file shell."""
from __future__ import annotations

import base64
import copy
import os
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

from .statedir import write_atomic

# libyaml's emitter: the pure-Python one spends ~8 ms on a kubeconfig's long base64 strings.
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
CLUSTER = "kubernetes"  # kubeadm's cluster name in the kubeconfigs it writes
SECTIONS = ("clusters", "contexts", "users")


class KubeconfigError(Exception):
    """A kubeconfig that cannot be read or written; the message says which and why."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def build(server: str, ca_pem: bytes, user: str, cert_pem: bytes, key_pem: bytes, *,
          cluster: str = CLUSTER, context: str | None = None) -> dict:
    """A kubeconfig with one cluster, user and context (kubeadm names the context user@cluster)."""
    context = context or f"{user}@{cluster}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"certificate-authority-data": _b64(ca_pem), "server": server}}],
        "contexts": [{"name": context, "context": {"cluster": cluster, "user": user}}],
        "current-context": context,
        "preferences": {},
        "users": [{"name": user, "user": {"client-certificate-data": _b64(cert_pem),
                                          "client-key-data": _b64(key_pem)}}],
    }


def renamed(config: dict, name: str) -> dict:
    """A one-context kubeconfig with its cluster, user and context all called `name`: what kind
    merges into the user's kubeconfig (kind-kind everywhere)."""
    cluster, user = config["clusters"][0], config["users"][0]
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": copy.deepcopy(cluster["cluster"])}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
        "preferences": {},
        "users": [{"name": name, "user": copy.deepcopy(user["user"])}],
    }


def _normalized(config: dict | None) -> dict:
    out = copy.deepcopy(config) if config else {}
    out.setdefault("apiVersion", "v1")
    out.setdefault("kind", "Config")
    out.setdefault("preferences", {})
    out.setdefault("current-context", "")
    for section in SECTIONS:
        if out.get(section) is None:
            out[section] = []
    return out


def merge(existing: dict | None, entry: dict) -> dict:
    """`existing` with `entry`'s clusters, contexts and users added, each replacing the one of
    the same name, everything else untouched; `entry`'s context becomes the current one."""
    out = _normalized(existing)
    for section in SECTIONS:
        names = {item["name"] for item in entry[section]}
        out[section] = [item for item in out[section] if item.get("name") not in names] + \
            copy.deepcopy(entry[section])
    out["current-context"] = entry["current-context"]
    return out


def find(config: dict | None, section: str, name: str) -> dict | None:
    return next((item for item in _normalized(config)[section] if item.get("name") == name), None)


def unmerge(existing: dict | None, name: str, cluster: dict) -> tuple[dict, bool]:
    """`existing` without the cluster, context and user called `name`, if the cluster entry
    there is still `cluster` (the one merged): another cluster that took the name since keeps
    it. The current context is cleared if it was `name`, as `kind delete cluster` does.
    (the result, whether anything was taken out)."""
    out = _normalized(existing)
    if find(out, "clusters", name) != cluster:
        return out, False
    for section in SECTIONS:
        out[section] = [item for item in out[section] if item.get("name") != name]
    if out["current-context"] == name:
        out["current-context"] = ""
    return out, True


# --- files --------------------------------------------------------------------------------------

def user_path(environ=os.environ) -> Path:
    """The file kubectl writes to: $KUBECONFIG's first path, else ~/.kube/config."""
    paths = [p for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return Path(paths[0]).expanduser() if paths else Path("~/.kube/config").expanduser()


def dump(config: dict) -> str:
    return yaml.dump(config, Dumper=_Dumper, default_flow_style=False, sort_keys=True)


def _is_kubeconfig(config: object) -> bool:
    """A mapping whose clusters, contexts and users are lists of mappings (or absent)."""
    return isinstance(config, dict) and all(
        isinstance(items := config.get(section) or [], list) and all(isinstance(item, dict) for item in items)
        for section in SECTIONS)


def load(path: Path) -> dict:
    """The kubeconfig at `path`; an empty one if the file does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return _normalized(None)
    except OSError as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc.strerror}") from None
    try:
        config = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if config is None:
        return _normalized(None)
    if not _is_kubeconfig(config):
        raise KubeconfigError(f"kubeconfig {path} is not a kubeconfig (a mapping with lists of "
                              "clusters, contexts and users, each a mapping)")
    return _normalized(config)


def write(path: Path, config: dict) -> None:
    """Atomically and mode 0600 (it holds a private key); ~/.kube is made if missing. A
    symlinked kubeconfig is written through (its target replaced), as kubectl does."""
    try:
        target = path.resolve()
        target.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(target, dump(config).encode())
    except OSError as exc:
        raise KubeconfigError(f"cannot write kubeconfig {path}: {exc.strerror}") from None


@contextmanager
def locked(path: Path, timeout: float = 5.0):
    """kubectl's lock on a kubeconfig it changes, `<path>.lock` made exclusively and removed
    after, so kubemu, kubectl and kind never lose each other's edits."""
    lock = path.with_name(path.name + ".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # e.g. ~/.kube is a file
        raise KubeconfigError(f"cannot lock kubeconfig {path}: {exc.strerror}") from None
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                raise KubeconfigError(f"kubeconfig {path} is locked: {lock} exists "
                                      "(remove it if no kubectl is running)") from None
            time.sleep(0.05)
        except OSError as exc:
            raise KubeconfigError(f"cannot lock kubeconfig {path}: {exc.strerror}") from None
    try:
        yield
    finally:
        lock.unlink(missing_ok=True)
