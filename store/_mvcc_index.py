"""The in-memory key index of the MVCC store: key -> the revisions at which it changed.

The analog of etcd's treeIndex. It holds no values, only, per key, the packed revisions
(`pack_rev(main, sub)`) of its stored versions and which of them are tombstones, so a read at
any revision finds each key's version with one binary search and reads the value from the
backend. It is rebuilt from the revision keyspace when the store opens.
"""
from __future__ import annotations

import bisect
from typing import Iterable, Iterator

from ._mvcc_types import SUB_MASK, main_of, pack_rev
from ._mvcc_requests import KeyRange


class KeyHistory:
    """The stored versions of one key, oldest first."""

    __slots__ = ("revs", "tombs")

    def __init__(self) -> None:
        self.revs: list[int] = []
        self.tombs: list[bool] = []

    def append(self, packed: int, tomb: bool) -> None:
        self.revs.append(packed)
        self.tombs.append(tomb)

    def at(self, main: int) -> int | None:
        """The packed revision of the key's live version as of revision `main`, or None."""
        i = bisect.bisect_right(self.revs, pack_rev(main, SUB_MASK)) - 1
        return None if i < 0 or self.tombs[i] else self.revs[i]

    def latest(self) -> int | None:
        """The packed revision of the current live version, or None if deleted."""
        return None if self.tombs[-1] else self.revs[-1]

    def before(self, packed: int) -> int | None:
        """The live version just before the one at `packed`, or None (absent or compacted)."""
        i = bisect.bisect_left(self.revs, packed) - 1
        return None if i < 0 or self.tombs[i] else self.revs[i]

    def compact(self, main: int) -> list[int]:
        """Drop what a read at or after `main` can never need: every version older than the
        latest one at or below `main`, and that one too if it is a tombstone (etcd's
        keyIndex.compact). Return the packed revisions dropped."""
        i = bisect.bisect_right(self.revs, pack_rev(main, SUB_MASK)) - 1
        if i < 0:
            return []
        keep = i + 1 if self.tombs[i] else i
        dropped = self.revs[:keep]
        del self.revs[:keep], self.tombs[:keep]
        return dropped


class Index:
    """Every key with stored versions (live or tombstoned), sorted, with its history."""

    def __init__(self) -> None:
        self._hist: dict[bytes, KeyHistory] = {}
        self._keys: list[bytes] = []  # sorted, for range scans

    @classmethod
    def build(cls, versions: Iterable[tuple[bytes, int, bool]]) -> Index:
        """An index from (key, packed revision, tombstone) in revision order."""
        index = cls()
        for key, packed, tomb in versions:
            hist = index._hist.get(key)
            if hist is None:
                hist = index._hist[key] = KeyHistory()
            hist.append(packed, tomb)
        index._keys = sorted(index._hist)
        return index

    def get(self, key: bytes) -> KeyHistory | None:
        return self._hist.get(key)

    def latest(self, key: bytes) -> int | None:
        hist = self._hist.get(key)
        return None if hist is None else hist.latest()

    def append(self, key: bytes, packed: int, tomb: bool) -> None:
        hist = self._hist.get(key)
        if hist is None:
            hist = self._hist[key] = KeyHistory()
            bisect.insort(self._keys, key)
        hist.append(packed, tomb)

    def visible(self, keys: KeyRange, main: int) -> Iterator[tuple[bytes, int]]:
        """(key, packed revision) of each key in `keys` live at revision `main`, in key order."""
        start, stop = keys.start, keys.stop
        if stop is not None and len(stop) == len(start) + 1 and stop == start + b"\0":
            # One key (what nearly every compare and txn read asks for): a dict lookup instead
            # of two binary searches over every key and a slice. [k, k+"\0") holds k alone.
            hist = self._hist.get(start)
            packed = None if hist is None else hist.at(main)
            if packed is not None:
                yield start, packed
            return
        lo = bisect.bisect_left(self._keys, start)
        hi = len(self._keys) if stop is None else bisect.bisect_left(self._keys, stop)
        for key in self._keys[lo:hi]:
            packed = self._hist[key].at(main)
            if packed is not None:
                yield key, packed

    def compact(self, main: int) -> list[int]:
        """Compact every key's history at `main` (see KeyHistory.compact); keys left with no
        versions leave the index. Return every packed revision dropped."""
        dropped: list[int] = []
        emptied = False
        for hist in self._hist.values():
            if hist.revs and main_of(hist.revs[0]) <= main:
                dropped.extend(hist.compact(main))
                emptied = emptied or not hist.revs
        if emptied:
            self._hist = {k: h for k, h in self._hist.items() if h.revs}
            self._keys = [k for k in self._keys if k in self._hist]
        return dropped

    def live_count(self) -> int:
        return sum(1 for hist in self._hist.values() if not hist.tombs[-1])
