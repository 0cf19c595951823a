"""The informer's local store, after client-go's tools/cache (Indexer over threadSafeMap).

Objects are Kubernetes-shaped dicts ({"metadata": {"namespace": ..., "name": ...}, ...}),
stored under a key (by default "namespace/name", or "name" for cluster-scoped objects, as
client-go's MetaNamespaceKeyFunc). Indexes map a value computed from each object (its
namespace, a node name, an owner's uid ...) to the keys of the objects that have it, so a
controller can ask "all pods on node n1" without scanning the store.

    store = Indexer(indexers={NAMESPACE_INDEX: meta_namespace_index_func})
    store.add(pod)
    store.by_index(NAMESPACE_INDEX, "default")    # every object in namespace default

Stored objects are shared, not copied (as in client-go): callers must not mutate what they
get back; deep-copy first. The index bookkeeping stays consistent even if they do, because
each object's index values are remembered at insertion instead of being recomputed from the
(possibly mutated) old object at update time.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Obj = Mapping[str, Any]
KeyFunc = Callable[[Any], str]
IndexFunc = Callable[[Obj], Iterable[str]]

NAMESPACE_INDEX = "namespace"   # client-go's cache.NamespaceIndex


@dataclass(frozen=True)
class DeletedFinalStateUnknown:
    """A delete the informer inferred from a relist (the watch missed it), carrying the
    last known state, which may be stale. client-go's type of the same name."""
    key: str
    obj: Any


def meta_namespace_key(obj: Any) -> str:
    """"namespace/name", or "name" when the object has no namespace (cluster-scoped).
    client-go's MetaNamespaceKeyFunc; a DeletedFinalStateUnknown yields its stored key, as
    DeletionHandlingMetaNamespaceKeyFunc does, so delete handlers can use this directly."""
    if type(obj) is dict:   # what a watch decodes: no ABC check (informers key every event)
        meta = obj.get("metadata")
    elif isinstance(obj, DeletedFinalStateUnknown):
        return obj.key
    elif isinstance(obj, str):
        return obj          # client-go's ExplicitKey: already a key
    else:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not (type(meta) is dict or isinstance(meta, Mapping)) or not meta.get("name"):
        raise ValueError("object has no metadata.name")
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def split_meta_namespace_key(key: str) -> tuple[str, str]:
    """(namespace, name) from a key; namespace is "" for a cluster-scoped key.
    client-go's SplitMetaNamespaceKey: anything other than one or two parts is an error."""
    parts = key.split("/")
    if len(parts) == 1 and parts[0]:
        return "", parts[0]
    if len(parts) == 2 and parts[1]:
        return parts[0], parts[1]
    raise ValueError(f"unexpected key format: {key!r}")


def meta_namespace_index_func(obj: Obj) -> list[str]:
    """Index by namespace (client-go's MetaNamespaceIndexFunc; "" for cluster-scoped)."""
    return [(obj.get("metadata") or {}).get("namespace") or ""]


class Indexer:
    """A keyed store of objects plus named indexes; not thread-safe (one loop owns it)."""

    def __init__(self, key_func: KeyFunc = meta_namespace_key,
                 indexers: Mapping[str, IndexFunc] | None = None) -> None:
        self.key_func = key_func
        self._items: dict[str, Any] = {}
        self._indexers: dict[str, IndexFunc] = {}
        # index name -> value -> keys (a dict used as an insertion-ordered set)
        self._indices: dict[str, dict[str, dict[str, None]]] = {}
        # index name -> key -> the values that key is filed under (see module docstring)
        self._values: dict[str, dict[str, tuple[str, ...]]] = {}
        self.resource_version: str | None = None   # of the last replace(); the reflector's
        self.add_indexers(indexers or {})

    # -- writes --

    def add(self, obj: Any) -> None:
        self._put(self.key_func(obj), obj)

    def update(self, obj: Any) -> None:
        # client-go's threadSafeMap makes Add and Update the same upsert.
        self._put(self.key_func(obj), obj)

    def delete(self, obj: Any) -> None:
        """Remove the object with `obj`'s key (a missing key is not an error)."""
        key = self.key_func(obj)
        if key in self._items:
            del self._items[key]
            self._unindex(key)

    def replace(self, objects: Iterable[Any], resource_version: str | None = None) -> None:
        """Make the store hold exactly `objects` (an informer's relist), reindexing all."""
        self._items = {}
        self._indices = {name: {} for name in self._indexers}
        self._values = {name: {} for name in self._indexers}
        for obj in objects:
            self._put(self.key_func(obj), obj)
        self.resource_version = resource_version

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add indexes, indexing what is already stored. Names must be new."""
        clash = set(indexers) & set(self._indexers)
        if clash:
            raise ValueError(f"indexer conflict: {sorted(clash)}")
        for name, func in indexers.items():
            self._indexers[name] = func
            self._indices[name] = {}
            self._values[name] = {}
            for key, obj in self._items.items():
                self._file(name, key, obj)

    # -- reads --

    def get(self, obj: Any) -> Any | None:
        return self._items.get(self.key_func(obj))

    def get_by_key(self, key: str) -> Any | None:
        return self._items.get(key)

    def list(self) -> list[Any]:
        return list(self._items.values())

    def list_keys(self) -> list[str]:
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def index(self, name: str, obj: Obj) -> list[Any]:
        """Objects sharing any of `obj`'s values for index `name` (client-go's Index)."""
        func = self._indexer(name)
        index = self._indices[name]
        keys: dict[str, None] = {}
        for value in _values_of(func, obj):
            keys.update(index.get(value, {}))
        return [self._items[k] for k in keys]

    def by_index(self, name: str, value: str) -> list[Any]:
        return [self._items[k] for k in self.index_keys(name, value)]

    def index_keys(self, name: str, value: str) -> list[str]:
        self._indexer(name)
        return list(self._indices[name].get(value, {}))

    def list_index_func_values(self, name: str) -> list[str]:
        """The values index `name` currently holds objects under."""
        self._indexer(name)
        return list(self._indices[name])

    def get_indexers(self) -> dict[str, IndexFunc]:
        return dict(self._indexers)

    # -- bookkeeping --

    def _indexer(self, name: str) -> IndexFunc:
        try:
            return self._indexers[name]
        except KeyError:
            raise KeyError(f"index with name {name!r} does not exist") from None

    def _put(self, key: str, obj: Any) -> None:
        # Compute every new value before touching anything: an index function that raises
        # leaves the store as it was.
        new = {name: _values_of(func, obj) for name, func in self._indexers.items()}
        if key in self._items:
            # An update mostly keeps every value (a pod's status changes, not its namespace,
            # owner or node): refile the key only in the indexes whose values changed.
            for name, values in new.items():
                if self._values[name].get(key) != values:
                    self._unindex_one(name, key)
                    self._file_values(name, key, values)
        else:
            for name, values in new.items():
                self._file_values(name, key, values)
        self._items[key] = obj

    def _file(self, name: str, key: str, obj: Any) -> None:
        self._file_values(name, key, _values_of(self._indexers[name], obj))

    def _file_values(self, name: str, key: str, values: tuple[str, ...]) -> None:
        index = self._indices[name]
        for value in values:
            index.setdefault(value, {})[key] = None
        self._values[name][key] = values

    def _unindex(self, key: str) -> None:
        for name in self._indices:
            self._unindex_one(name, key)

    def _unindex_one(self, name: str, key: str) -> None:
        index = self._indices[name]
        for value in self._values[name].pop(key, ()):
            bucket = index.get(value)
            if bucket is None:
                continue
            bucket.pop(key, None)
            if not bucket:
                del index[value]    # no empty buckets: values come and go (node names)


def _values_of(func: IndexFunc, obj: Any) -> tuple[str, ...]:
    values = tuple(func(obj))
    # dict.fromkeys dedupes while keeping order: a value listed twice is filed once. Most
    # index functions give one value (or none), which has nothing to dedupe.
    return values if len(values) < 2 else tuple(dict.fromkeys(values))
