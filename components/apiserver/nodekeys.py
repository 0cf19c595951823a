"""Joined nodes' CURVE keys: which Node a wire client's public key belongs to, and who may say so.

A node that joins from another machine (`kubemu join`) makes its own CURVE key pair and
publishes the public half (Z85) as its Node's annotation `kubemu.io/wire-curve-public-key`. The
apiserver's CURVE identify hook knows a key as ``system:node:<name>`` from these annotations,
after the keys of ``<curve dir>/clients``.

    NodeKeys                    the index: apply(name, node or None) -> keys that became shared;
                                snapshot() -> an immutable key -> node name mapping
    admission_error(user, name, old, new) -> None, or the NodeRestriction refusal (a message)
    duplicate_error(name, owners)    -> None, or the refusal of a key another Node names

Pure: the apiserver's shell (nodekeycache.py) feeds `NodeKeys` from its Node watch and hands
each snapshot to the ZAP thread, which only ever reads a mapping nobody changes.
"""
from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from kubemu._wire_auth import check_curve_key
from kubemu.api.identity import NODE_PREFIX, NODES, UserInfo

ANNOTATION = "kubemu.io/wire-curve-public-key"


def key_of(node: dict | None) -> str | None:
    """The Z85 public key a Node's annotation names; None when absent or not a CURVE key."""
    meta = (node or {}).get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    value = annotations.get(ANNOTATION) if isinstance(annotations, dict) else None
    if not isinstance(value, str):
        return None
    try:
        return check_curve_key(value, ANNOTATION).decode()
    except ValueError:
        return None


class NodeKeys:
    """Node name -> its key, and the key -> node name index built from it. A key that two
    Nodes name is refused for both (either could be the other's impostor); `apply` returns it
    once, when it becomes shared, so that the shell warns once."""

    def __init__(self):
        self._keys: dict[str, str] = {}
        self._warned: set[str] = set()
        self._snapshot: Mapping[str, str] = MappingProxyType({})

    def replace(self, nodes: Mapping[str, dict]) -> list[str]:
        """Start over from a full listing (node name -> Node)."""
        self._keys = {name: key for name, node in nodes.items() if (key := key_of(node)) is not None}
        return self._rebuild()

    def apply(self, name: str, node: dict | None) -> list[str]:
        """Node `name` is now `node` (None: deleted); the keys that have just become shared."""
        key = key_of(node)
        if key is None:
            if self._keys.pop(name, None) is None:
                return []
        elif self._keys.get(name) == key:
            return []
        else:
            self._keys[name] = key
        return self._rebuild()

    def snapshot(self) -> Mapping[str, str]:
        """Key -> node name, never changed once returned (a new one replaces it)."""
        return self._snapshot

    def _rebuild(self) -> list[str]:
        owners: dict[str, list[str]] = {}
        for name, key in self._keys.items():
            owners.setdefault(key, []).append(name)
        shared = {key for key, names in owners.items() if len(names) > 1}
        self._snapshot = MappingProxyType({key: names[0] for key, names in owners.items() if key not in shared})
        newly = sorted(shared - self._warned)
        self._warned = (self._warned & set(owners)) | shared  # a key no Node names any more may warn again
        return newly

    def owners(self, key: str) -> list[str]:
        return sorted(name for name, k in self._keys.items() if k == key)


def _annotation(obj: dict | None) -> object:
    meta = (obj or {}).get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    return annotations.get(ANNOTATION) if isinstance(annotations, dict) else None


def duplicate_error(name: str, owners: list[str]) -> str | None:
    """Node `name` is to name a CURVE key, which the Nodes `owners` name now: refused when
    another Node names it (a copied key would cut that node off the wire, the index refusing a
    shared key for both). None when admitted, else the message of the 403."""
    other = sorted(owner for owner in owners if owner != name)
    if not other:
        return None
    return f'nodes "{name}" is forbidden: its {ANNOTATION} is node "{other[0]}"\'s'


def admission_error(user: UserInfo | None, name: str, old: dict | None, new: dict | None) -> str | None:
    """NodeRestriction's rule for a node's own object, on this annotation: a user in group
    system:nodes may set, change or remove it only on the Node its username names
    (system:node:<name>); anyone else whom RBAC let through may. None when admitted, else the
    message of the 403 (kube-apiserver's wording)."""
    if user is None or NODES not in user.groups or _annotation(old) == _annotation(new):
        return None
    if not user.name.startswith(NODE_PREFIX) or not user.name[len(NODE_PREFIX):]:
        return f'nodes "{name}" is forbidden: could not determine node from user "{user.name}"'
    own = user.name[len(NODE_PREFIX):]
    if own != name:
        return f'nodes "{name}" is forbidden: node "{own}" is not allowed to modify node "{name}"'
    return None
